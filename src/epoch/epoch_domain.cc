// Copyright 2026 The cairn Authors.
// SPDX-License-Identifier: Apache-2.0
//
// The cold half of EpochDomain: registration, retirement, the advancer,
// stall reports, shutdown. The argument for the memory orders used here is in
// docs/concurrency.md ("EpochDomain").

#include "cairn/epoch/epoch_domain.h"

#include <linux/membarrier.h>
#include <sys/random.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cinttypes>
#include <cstddef>
#include <cstdio>
#include <new>
#include <thread>
#include <vector>

#include "cairn/base/check.h"
#include "cairn/base/metrics.h"
#include "cairn/base/mutex.h"
#include "cairn/base/thread_annotations.h"

#if defined(__SANITIZE_THREAD__)
#define CAIRN_EPOCH_UNDER_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define CAIRN_EPOCH_UNDER_TSAN 1
#endif
#endif
#ifndef CAIRN_EPOCH_UNDER_TSAN
#define CAIRN_EPOCH_UNDER_TSAN 0
#endif

CAIRN_NAMESPACE_BEGIN
namespace epoch_internal {
namespace {

std::int64_t SteadyNanos() { return Clock::Steady()->NowNanos(); }

// A random 64-bit value from the kernel (getrandom(2), which does not
// block once the pool is initialised). A per-copy counter is mixed in, so a
// failing source still gives each domain of this copy a distinct nonce.
std::uint64_t DrawNonce() {
  static std::atomic<std::uint64_t> drawn{0};
  std::uint64_t random = 0;
  if (getrandom(&random, sizeof(random), GRND_NONBLOCK) !=
      static_cast<ssize_t>(sizeof(random))) {
    random = static_cast<std::uint64_t>(SteadyNanos());
  }
  // splitmix64's increment keeps consecutive counters far apart.
  return random ^ (drawn.fetch_add(1, std::memory_order_relaxed) *
                   0x9e3779b97f4a7c15ULL);
}

bool RegisterMembarrier() {
  // syscall() returns long.
  const auto mask = syscall(__NR_membarrier, MEMBARRIER_CMD_QUERY, 0, 0);
  if (mask < 0 || (mask & MEMBARRIER_CMD_PRIVATE_EXPEDITED) == 0) return false;
  return syscall(__NR_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0,
                 0) == 0;
}

// Waits between polls of a blocking call: spin briefly, then sleep up to
// 200 us, so a stalled reader costs the waiter little CPU.
class Backoff {
 public:
  void Pause() {
    if (round_ < 8) {
      std::this_thread::yield();
    } else {
      std::this_thread::sleep_for(std::chrono::microseconds(
          std::min<int>(200, 10 << std::min(round_ - 8, 5))));
    }
    ++round_;
  }

 private:
  int round_ = 0;
};

struct Retired {
  void* ptr;
  EpochDomain::Deleter deleter;
  std::size_t bytes;
};

// Up to kBagCapacity retirements stamped with one epoch. A block is a
// thread's open block while it fills, an element of its bag's sealed list
// (or, for a thread without a bag, of the shared list) once sealed, and a
// spare of its bag or a block of the domain's pool once its deleters ran,
// so sealing and reclaiming move pointers and never allocate: a retire
// path needs memory only when its bag has no spare and the pool is empty,
// and there it can refuse (or use the block its reservation pledged)
// instead of throwing.
inline constexpr std::size_t kBagCapacity = 64;

struct Block {
  Block* next = nullptr;    // a sealed list, a pool, or a batch being freed
  std::uint64_t epoch = 0;  // global epoch read after every unlink in it
  std::uint64_t seq = 0;    // on the shared list: retirement order of items[0]
  std::size_t count = 0;
  // On a bag's sealed list: items[0, done) have had their deleters run.
  // Advanced under the bag's lock by the thread that claimed the bag
  // (`freeing`), which alone reads it without the lock.
  std::size_t done = 0;
  std::array<Retired, kBagCapacity> items;
};

// Nodes one owner step frees at most (FreeBag): the reclamation work a
// single Retire() or ReclaimIfDue() does on its own bag, so that no write
// pays for a whole block of deleters.
inline constexpr std::size_t kStepNodes = 8;
// An owner's pass sweeps one idle bag every kSweepEvery passes (SweepIdle).
inline constexpr std::uint32_t kSweepEvery = 4;
// Free blocks a bag keeps for its own next seals, beyond which freed blocks
// go back to the domain's pool.
inline constexpr std::size_t kBagSpares = 2;

// Work a retirement left for the calling thread (Bag::due).
inline constexpr std::uint8_t kPassDue = 1;  // reclaim_every retires sealed
inline constexpr std::uint8_t kStepDue = 2;  // the bag's oldest block expired

// A batch cut from the list whose deleters are running (Barrier() waits for
// it). Lives on the stack of the thread running them.
struct InFlight {
  std::uint64_t lowest_seq;
  std::size_t count;
  std::size_t bytes;
  InFlight* next;
};

// One thread's retirements. Retire() appends to the bag's open block under
// the bag's own (normally uncontended) lock; the block is sealed, with one
// epoch read, onto the bag's own sealed list when it is full, on the host's
// TryReclaim(), under back-pressure, in Barrier() and Shutdown(), and at
// thread exit. The owner frees its expired sealed blocks itself, at most
// kStepNodes deleters per Retire() or ReclaimIfDue(); host passes free every
// bag's. Its nodes' bytes were charged to the cap before they entered (E4).
// Bags belong to the core and are never freed before it; a departed
// thread's bag is reused by the next thread that retires. A bag whose
// owner has sealed nothing for a while (an idle or departed thread) has its
// expired blocks freed by other threads' passes, a few nodes every
// kSweepEvery passes.
struct alignas(128) Bag {
  Mutex mu;
  // Null until the next push after a seal gives it one.
  Block* block CAIRN_GUARDED_BY(mu) = nullptr;
  // Sealed blocks in stamp order (seals are serialised by mu and the global
  // epoch only rises). The head leaves only once all its deleters ran, so
  // "head null or stamped after E" means every node stamped <= E is freed.
  Block* sealed_head CAIRN_GUARDED_BY(mu) = nullptr;
  Block* sealed_tail CAIRN_GUARDED_BY(mu) = nullptr;
  Block* spare CAIRN_GUARDED_BY(mu) = nullptr;  // up to kBagSpares blocks
  std::size_t spares CAIRN_GUARDED_BY(mu) = 0;
  std::uint32_t retires_since_pass CAIRN_GUARDED_BY(mu) = 0;
  // Owner passes since the last idle sweep (SweepIdle runs every
  // kSweepEvery passes). Owner only.
  std::uint32_t passes_since_sweep = 0;
  // The stamp of the seal that last made a pass due: the owner's pass
  // advances the epoch only if nobody did since (TryReclaim). A hint,
  // read and written relaxed.
  std::atomic<std::uint64_t> pass_stamp{0};
  // The global epoch as this bag last read it (a seal's stamp, a claim, the
  // owner's pass): Push tests the sealed head's expiry against it, so a
  // retirement does not miss on the epoch's line after every advance. Never
  // ahead of the epoch, so it only delays a step until the next read;
  // ClaimExpired checks the epoch itself before anything is freed.
  std::atomic<std::uint64_t> epoch_seen{0};
  // Nodes sealed and not yet freed. Written under mu; read relaxed.
  std::atomic<std::size_t> sealed_pending{0};
  // Set while one thread runs deleters of the sealed head (ClaimExpired):
  // one freer per bag, so blocks are freed in order.
  bool freeing CAIRN_GUARDED_BY(mu) = false;
  // kPassDue | kStepDue left by a deferred retirement for ReclaimIfDue().
  // Written and read by the owning thread only.
  std::atomic<std::uint8_t> due{0};
  // Seals so far, and the count the last idle sweep saw (SweepIdle): a bag
  // sealed nothing since the sweep's previous visit is idle.
  std::atomic<std::uint64_t> seals{0};
  // On a line of its own: other threads' sweeps write it.
  alignas(64) std::atomic<std::uint64_t> seals_seen{0};
  // Metrics, summed over bags by VisitMetrics(), read relaxed: passes is
  // counted by the owner's passes, the others are written under mu.
  std::atomic<std::uint64_t> passes{0};
  std::atomic<std::uint64_t> reclaimed_count{0};
  std::atomic<std::uint64_t> reclaimed_bytes{0};
  // Nodes in `block`. Written under mu; read relaxed to skip empty bags
  // without locking.
  std::atomic<std::size_t> size{0};
  // Retired bytes this thread has charged to the cap ahead of use, so that
  // most Retire() calls touch no shared word. Written under mu; read relaxed
  // by Diagnostics() and to skip bags with nothing to hand back.
  std::atomic<std::size_t> credit{0};
  std::atomic<bool> in_use{false};
  Bag* next = nullptr;  // immutable once the bag is linked
};

// Builds an error message, or drops it when there is no memory for it: the
// paths that report errors must not throw (a destructor calls them).
template <typename Fn>
Status WithMessage(StatusCode code, Fn&& message) noexcept {
  try {
    return Status(code, message());
  } catch (const std::bad_alloc&) {
    return Status(code);
  }
}

// Pending nodes a forked child drops (ResetAfterFork). Kept reachable, so
// a leak checker in the child does not report what the parent owns.
Block* forked_leftovers = nullptr;

std::string FormatStall(const StallReport& r) {
  char line[512];
  std::snprintf(
      line, sizeof(line),
      "cairn epoch '%s': participant %" PRIu64 " (%s) has pinned epoch %" PRIu64
      " (global %" PRIu64 ") for at least %.3f s; %" PRIu64
      " retired nodes (%" PRIu64 " bytes) wait on it [stall report %u]",
      r.domain.c_str(), r.participant_id, r.participant_name.c_str(),
      r.pinned_epoch, r.global_epoch, static_cast<double>(r.age.count()) / 1e9,
      r.retired_count, r.retired_bytes, r.report_index + 1);
  return line;
}

}  // namespace

class DomainCore {
 public:
  explicit DomainCore(EpochOptions options)
      : options_(std::move(options)), clock_(options_.clock) {
    read_side.nonce = DrawNonce();
    bag_nonce = read_side.nonce;
    bag_capacity_ = std::min<std::size_t>(kBagCapacity, options_.reclaim_every);
    credit_chunk_ = std::min<std::size_t>(options_.retired_bytes_cap / 64,
                                          std::size_t{64} << 10);
    CAIRN_CHECK_MSG(clock_ != nullptr, "EpochOptions::clock is null");
    CAIRN_CHECK_MSG(options_.reclaim_every > 0,
                    "EpochOptions::reclaim_every must be > 0");
    if (options_.read_side_mode == ReadSideMode::kAsymmetric &&
        RegisterMembarrier()) {
      read_side.mode = ReadSideMode::kAsymmetric;
    }
    const std::int64_t now = clock_->NowNanos();
    ring_.fill(EpochStart{0, now});
    ring_[1 % kRingSize] = EpochStart{1, now};
    last_advance_nanos_.store(now, std::memory_order_relaxed);
  }

  // Runs when the domain and every participant are gone, so no guard can be
  // active: whatever is still retired is freed here.
  // Nothing here allocates.
  ~DomainCore() {
    for (Bag* b = bags_head_.load(std::memory_order_acquire); b != nullptr;
         b = b->next) {
      MutexLock lock(&b->mu);
      RunDeleters(b->block);
      DeleteChain(std::exchange(b->block, nullptr));
      RunDeleters(b->sealed_head);
      DeleteChain(std::exchange(b->sealed_head, nullptr));
      DeleteChain(std::exchange(b->spare, nullptr));
    }
    {
      MutexLock lock(&retire_mu_);
      RunDeleters(head_);
      DeleteChain(std::exchange(head_, nullptr));
      DeleteChain(std::exchange(pool_, nullptr));
    }
    Slot* slot = slots_head_.load(std::memory_order_acquire);
    while (slot != nullptr) delete std::exchange(slot, slot->next);
    Bag* bag = bags_head_.load(std::memory_order_acquire);
    while (bag != nullptr) delete std::exchange(bag, bag->next);
  }

  ReadSide read_side;
  // read_side.nonce again, on a line no advance writes (it shares it only
  // with the options): every Retire() checks its cached bag against it,
  // and would otherwise miss on the epoch's line after each advance by
  // another thread.
  alignas(64) std::uint64_t bag_nonce = 0;

  const EpochOptions& options() const { return options_; }

  // --- registration -----------------------------------------------------

  Result<Slot*> Register(std::string_view name, std::uint64_t* id,
                         bool implicit = false) {
    if (!implicit && shut_down_.load(std::memory_order_acquire)) {
      return UnavailableError("epoch domain '" + options_.name +
                              "' is shut down");
    }
    MutexLock lock(&registry_mu_);
    Slot* slot = slots_head_.load(std::memory_order_relaxed);
    while (slot != nullptr && slot->in_use.load(std::memory_order_relaxed)) {
      slot = slot->next;
    }
    if (slot == nullptr) {
      slot = new Slot;
      slot->next = slots_head_.load(std::memory_order_relaxed);
      slots_head_.store(slot, std::memory_order_release);
    }
    *id = next_participant_id_++;
    slot->participant_id = *id;
    slot->name = !name.empty() ? std::string(name)
                 : implicit    ? "thread-" + std::to_string(*id)
                               : "participant-" + std::to_string(*id);
    slot->nesting = 0;
    slot->implicit = implicit;
    slot->in_use.store(true, std::memory_order_release);
    registered_.fetch_add(1, std::memory_order_relaxed);
    if (implicit) implicit_registered_.fetch_add(1, std::memory_order_relaxed);
    return slot;
  }

  void Deregister(Slot* slot) {
    MutexLock lock(&registry_mu_);
    slot->name.clear();
    if (slot->implicit) {
      implicit_registered_.fetch_sub(1, std::memory_order_relaxed);
    }
    slot->in_use.store(false, std::memory_order_release);
    registered_.fetch_sub(1, std::memory_order_relaxed);
  }

  std::uint64_t registered() const {
    return registered_.load(std::memory_order_relaxed);
  }
  // Registered participants the host created itself, the ones the lifetime
  // check counts (E10).
  std::uint64_t explicit_registered() const {
    return registered() - implicit_registered_.load(std::memory_order_relaxed);
  }

  // --- retirement -------------------------------------------------------

  Status CheckCanRetire(std::size_t bytes) const {
    if (bytes > options_.retired_bytes_cap) {
      return WithMessage(StatusCode::kInvalidArgument, [&] {
        return "retire of " + std::to_string(bytes) +
               " bytes exceeds the cap of " +
               std::to_string(options_.retired_bytes_cap) +
               " bytes of domain '" + options_.name + "'";
      });
    }
    if (shut_down_.load(std::memory_order_acquire)) {
      return WithMessage(StatusCode::kUnavailable, [&] {
        return "epoch domain '" + options_.name + "' is shut down";
      });
    }
    return Status::Ok();
  }

  static Status OutOfMemory() noexcept {
    return ResourceExhaustedError("out of memory for the retired list");
  }

  Status Charge(std::size_t bytes) {
    CAIRN_RETURN_IF_ERROR(CheckCanRetire(bytes));
    if (TryCharge(bytes)) return Status::Ok();
    if (CallerInGuard()) {
      return WithMessage(StatusCode::kFailedPrecondition, [&] {
        return "retire in domain '" + options_.name +
               "' needs back-pressure but the caller holds a guard of it";
      });
    }
    const std::int64_t deadline =
        SteadyNanos() + options_.reclaim_deadline.count();
    // The wait is reported on the options' clock (metrics, like stall ages,
    // follow the injected clock); the deadline stays on real time.
    const std::int64_t wait_start = clock_->NowNanos();
    Backoff backoff;
    while (true) {
      TryReclaim();
      if (TryCharge(bytes)) {
        RecordCapWait(wait_start);
        return Status::Ok();
      }
      if (SteadyNanos() >= deadline) break;
      backoff.Pause();
    }
    RecordCapWait(wait_start);
    busy_count_.fetch_add(1, std::memory_order_relaxed);
    return WithMessage(StatusCode::kResourceExhausted, [&] {
      return "epoch domain '" + options_.name +
             "' is busy: " + std::to_string(RetiredBytes()) + " of " +
             std::to_string(options_.retired_bytes_cap) +
             " retired bytes still wait for a grace period after " +
             std::to_string(options_.reclaim_deadline.count() / 1000) + " us";
    });
  }

  // Retire() as a host calls it. The bytes come from the calling thread's
  // credit when it has enough; else the credit is refilled with one CAS on
  // the cap (the bytes plus credit_chunk_); only when the cap has no room
  // for that does the call take the exact, possibly waiting, path (Charge).
  // Out of memory for the list (no block in the pool and none allocated),
  // it reclaims once, which refills the pool, and else refuses: the caller
  // keeps `ptr`, so nothing is lost or leaked.
  Status Retire(Bag* bag, void* ptr, std::size_t bytes,
                EpochDomain::Deleter deleter) {
    CAIRN_RETURN_IF_ERROR(CheckCanRetire(bytes));
    if (bag != nullptr) {
      bool room = false;
      bool charged = false;
      std::uint8_t work = 0;
      Block* claimed = nullptr;
      for (int attempt = 0; attempt < 2 && !room; ++attempt) {
        if (attempt > 0) {
          // Out of memory for a block: reclaim, freeing this bag whole,
          // which refills its spares and the pool.
          TryReclaim(/*seal_all=*/false, bag);
          FreeBag(bag, SIZE_MAX, /*owner=*/true);
        }
        MutexLock lock(&bag->mu);
        room = EnsureBlock(bag);
        charged = room && TakeCredit(bag, bytes);
        if (charged) {
          work = Push(bag, Retired{ptr, deleter, bytes});
          if ((work & kStepDue) != 0) claimed = ClaimExpired(bag);
        }
      }
      if (!room) return OutOfMemory();
      if (charged) {
        RunOwnerWork(bag, work, claimed);
        return Status::Ok();
      }
    }
    CAIRN_RETURN_IF_ERROR(Charge(bytes));
    if (!Append(bag, Retired{ptr, deleter, bytes}, /*pledged=*/false,
                /*defer=*/false)) {
      Uncharge(bytes);
      return OutOfMemory();
    }
    return Status::Ok();
  }

  // EpochDomain::TryUnlinkAndRetire(); `bag` null once the thread's
  // cairn state is gone (the node then goes straight onto the list). Room
  // in the list is found before anything is charged or unlinked, so out of
  // memory is one more kResourceExhausted.
  Status TryUnlinkAndRetire(Bag* bag, void* ptr, std::size_t bytes,
                            EpochDomain::Deleter deleter,
                            EpochDomain::Unlink unlink, void* arg) {
    if (bytes > options_.retired_bytes_cap) return InvalidArgumentError();
    if (shut_down_.load(std::memory_order_acquire)) return UnavailableError();
    bool reclaim = false;
    if (bag != nullptr) {
      MutexLock lock(&bag->mu);
      if (!EnsureBlock(bag)) return ResourceExhaustedError();
      if (!TakeCredit(bag, bytes) && !TryCharge(bytes)) {
        return ResourceExhaustedError();
      }
      unlink(arg);
      Defer(bag, Push(bag, Retired{ptr, deleter, bytes}));
    } else {
      if (!TryCharge(bytes)) return ResourceExhaustedError();
      if (!AppendOne(Retired{ptr, deleter, bytes}, /*pledged=*/false, &reclaim,
                     unlink, arg)) {
        Uncharge(bytes);
        return ResourceExhaustedError();
      }
    }
    if (reclaim) reclaim_due_.store(true, std::memory_order_relaxed);
    return Status::Ok();
  }

  Status TryChargeNow(std::size_t bytes) {
    CAIRN_RETURN_IF_ERROR(CheckCanRetire(bytes));
    if (TryCharge(bytes)) return Status::Ok();
    // Code-only: the route asks under its writer stripe, where a refusal
    // must not allocate, and it may be frequent under back-pressure.
    return ResourceExhaustedError();
  }

  void Uncharge(std::size_t bytes) {
    retired_bytes_.fetch_sub(bytes, std::memory_order_acq_rel);
  }

  // --- pledges ------------------------------------------------------------
  //
  // RetireReserved() cannot fail, so every reservation pledges one pooled
  // block: if the retire finds no room (its thread's bag has no block and
  // the pool none to spare, or the thread has no bag) it takes that block,
  // which no unpledged taker may use. Blocks in the pool = unpledged_ +
  // outstanding pledges. A pledge is one CAS while the pool has unpledged
  // blocks (reclaim keeps it stocked); else it allocates, and a reservation
  // out of memory is refused (kResourceExhausted) with nothing charged.

  bool Pledge() {
    std::int64_t n = unpledged_.load(std::memory_order_acquire);
    while (n > 0) {
      if (unpledged_.compare_exchange_weak(n, n - 1, std::memory_order_acq_rel,
                                           std::memory_order_acquire)) {
        return true;
      }
    }
    Block* block = new (std::nothrow) Block;
    if (block == nullptr) return false;
    MutexLock lock(&retire_mu_);
    PushPool(block);  // pledged at once: unpledged_ unchanged
    return true;
  }

  // The pledge was not needed: its block is free for anyone again.
  void Unpledge() { unpledged_.fetch_add(1, std::memory_order_acq_rel); }

  // The block a pledge promised.
  Block* TakePledged() {
    MutexLock lock(&retire_mu_);
    return PopPool();
  }

  // A free block for `bag`: its own spare, else one from the pool nobody
  // pledged, else new. Null when out of memory. Allocating under the bag's
  // lock is fine: the allocator takes no cairn lock.
  Block* TakeBlock(Bag* bag) CAIRN_REQUIRES(bag->mu) {
    if (Block* block = PopSpare(bag)) return block;
    {
      MutexLock lock(&retire_mu_);
      if (Block* block = PopUnpledged()) return block;
    }
    return new (std::nothrow) Block;
  }

  static Block* PopSpare(Bag* bag) CAIRN_REQUIRES(bag->mu) {
    Block* block = bag->spare;
    if (block == nullptr) return nullptr;
    bag->spare = block->next;
    --bag->spares;
    block->next = nullptr;
    block->count = 0;
    block->done = 0;
    return block;
  }

  // A block whose deleters all ran: kept as `bag`'s spare, else pooled,
  // else deleted (returned, for the caller to delete with no lock held).
  Block* ReturnBlock(Bag* bag, Block* block) CAIRN_REQUIRES(bag->mu) {
    if (bag->spares < kBagSpares) {
      block->next = bag->spare;
      bag->spare = block;
      ++bag->spares;
      return nullptr;
    }
    MutexLock lock(&retire_mu_);
    if (unpledged_.load(std::memory_order_relaxed) < kPoolBlocks) {
      PushPool(block);
      Unpledge();  // after the push, under the lock: see PopUnpledged
      return nullptr;
    }
    return block;
  }

  // --- bags ---------------------------------------------------------------

  // A free bag for the calling thread (reusing a departed thread's). Null
  // when out of memory: the thread then retires straight onto the list.
  Bag* AcquireBag() {
    MutexLock lock(&registry_mu_);
    Bag* bag = bags_head_.load(std::memory_order_relaxed);
    while (bag != nullptr && bag->in_use.load(std::memory_order_relaxed)) {
      bag = bag->next;
    }
    if (bag == nullptr) {
      bag = new (std::nothrow) Bag;
      if (bag == nullptr) return nullptr;
      bag->next = bags_head_.load(std::memory_order_relaxed);
      bags_head_.store(bag, std::memory_order_release);
    }
    bag->in_use.store(true, std::memory_order_relaxed);
    return bag;
  }

  // The thread that used `bag` is done with it (thread exit, or it forgot
  // this domain): its open block is sealed and its credit returned; the bag,
  // with its sealed blocks, goes to the next thread that retires, and idle
  // sweeps (SweepIdle) free its expired nodes meanwhile.
  void ReleaseBag(Bag* bag) {
    {
      MutexLock lock(&bag->mu);
      Seal(bag);
      ReturnCredit(bag);
    }
    MutexLock lock(&registry_mu_);
    bag->in_use.store(false, std::memory_order_relaxed);
  }

  // A charged node into the calling thread's bag, or straight onto the list
  // when the thread has none (`bag` null: its thread-local state is gone).
  // A full bag is sealed here. False, with nothing added, when out of
  // memory; never with `pledged` (the pledged block is used then).
  bool Append(Bag* bag, Retired r, bool pledged, bool defer) {
    bool reclaim = false;
    std::uint8_t work = 0;
    if (bag == nullptr) {
      if (!AppendOne(r, pledged, &reclaim)) return false;
      pledged = false;  // used or handed back by AppendOne
    } else {
      MutexLock lock(&bag->mu);
      if (bag->block == nullptr) {
        bag->block = pledged ? TakePledged() : TakeBlock(bag);
        pledged = false;
        if (bag->block == nullptr) return false;
      }
      work = Push(bag, r);
      if (defer) Defer(bag, std::exchange(work, 0));
    }
    if (pledged) Unpledge();
    if (reclaim) {
      if (defer) {
        reclaim_due_.store(true, std::memory_order_relaxed);
      } else {
        TryReclaim(/*seal_all=*/false);
      }
    }
    if (work != 0) RunOwnerWork(bag, work);
    return true;
  }

  // The work deferred retirements left: the calling thread's bag's (`bag`,
  // null if it has none) and a pass a bagless retirement made due.
  std::size_t ReclaimIfDue(Bag* bag) {
    std::size_t freed = 0;
    if (bag != nullptr) {
      const std::uint8_t work = bag->due.load(std::memory_order_relaxed);
      if (work != 0) {
        bag->due.store(0, std::memory_order_relaxed);
        freed += RunOwnerWork(bag, work);
      }
    }
    if (reclaim_due_.load(std::memory_order_relaxed)) {
      reclaim_due_.store(false, std::memory_order_relaxed);
      freed += TryReclaim(/*seal_all=*/false);
    }
    return freed;
  }

  // Leaves `work` for the owner's next ReclaimIfDue().
  static void Defer(Bag* bag, std::uint8_t work) CAIRN_REQUIRES(bag->mu) {
    if (work == 0) return;
    bag->due.store(bag->due.load(std::memory_order_relaxed) | work,
                   std::memory_order_relaxed);
  }

  // What a retirement on `bag` made due, run by its owner with no lock
  // held: one bounded step over the bag's own expired nodes (starting at
  // `claimed` if the caller already claimed the bag's head) and a pass
  // (advance the epoch, free the shared list and some of an idle bag).
  std::size_t RunOwnerWork(Bag* bag, std::uint8_t work,
                           Block* claimed = nullptr) {
    std::size_t freed = 0;
    // A claimed step first: the pass runs other threads' deleters and the
    // stall hook, which must never run while this bag is claimed (a Barrier
    // elsewhere would wait on the claim).
    if (claimed != nullptr) {
      freed += FreeClaimed(bag, claimed, kStepNodes, /*owner=*/true);
    }
    if ((work & kPassDue) != 0) {
      freed += TryReclaim(/*seal_all=*/false, bag, /*owner_pass=*/true);
    }
    if (claimed == nullptr && work != 0) {
      freed += FreeBag(bag, kStepNodes, /*owner=*/true);
    }
    return freed;
  }

  // --- reclamation ------------------------------------------------------

  // One reclaim pass: advance the epoch (up to twice; once for an
  // `owner_pass`, see below) and free what expired.
  // The host's TryReclaim(), back-pressure and Barrier() (`seal_all`) first
  // seal every thread's bag (E2, E3) and then free every bag's expired
  // nodes. The pass a retirement makes due (`seal_all` false) frees only
  // the shared list and up to kStepNodes of one idle bag (SweepIdle): busy
  // threads never free each other's bags, and each frees its own in
  // bounded steps.
  std::size_t TryReclaim(bool seal_all = true, Bag* counted_by = nullptr,
                         bool owner_pass = false) {
    if (counted_by != nullptr) {
      counted_by->passes.fetch_add(1, std::memory_order_relaxed);
    } else {
      reclaim_passes_.fetch_add(1, std::memory_order_relaxed);
    }
    if (seal_all) SealAllBags();
    std::vector<StallReport> reports;
    // The pass a thread's own retirements made due (`owner_pass`, from
    // RunOwnerWork) advances once, and not at all if another thread
    // advanced since the seal that made it due: every advance makes every
    // other retiring thread miss on the epoch's line, so with N writers
    // one advance per pass, not two each, keeps their blocks expiring
    // (each needs two, which the next passes give) at a fraction of the
    // traffic. Every other pass (the host's TryReclaim(), Barrier(),
    // back-pressure, a Retire() out of memory, a bagless retirement's) and
    // the sanitize mode (reclaim_every 1) advance twice, so they free at
    // once whatever no guard holds.
    const bool single = owner_pass && options_.reclaim_every > 1;
    if (!single || read_side.global_epoch.load(std::memory_order_relaxed) <=
                       counted_by->pass_stamp.load(std::memory_order_relaxed)) {
      if (advance_mu_.TryLock()) {
        const int advances = single ? 1 : 2;
        for (int i = 0; i < advances && TryAdvance(&reports); ++i) {
        }
        advance_mu_.Unlock();
      }
    }
    if (counted_by != nullptr) {
      counted_by->epoch_seen.store(
          read_side.global_epoch.load(std::memory_order_relaxed),
          std::memory_order_relaxed);
    }
    std::size_t freed = 0;
    if (retired_count_.load(std::memory_order_relaxed) != 0) {
      freed += FreeExpired();
    }
    if (seal_all) {
      for (Bag* b = bags_head_.load(std::memory_order_acquire); b != nullptr;
           b = b->next) {
        if (b->sealed_pending.load(std::memory_order_relaxed) != 0) {
          freed += FreeBag(b, SIZE_MAX, /*owner=*/false);
        }
      }
    } else if (!owner_pass || ++counted_by->passes_since_sweep >= kSweepEvery) {
      // The sweep reads and writes other threads' bags: every few passes.
      if (owner_pass) counted_by->passes_since_sweep = 0;
      freed += SweepIdle(counted_by, kStepNodes);
    }
    Emit(reports);
    return freed;
  }

  Status Barrier(std::chrono::nanoseconds timeout) {
    if (CallerInGuard()) {
      return WithMessage(StatusCode::kFailedPrecondition, [&] {
        return "Barrier() inside a guard of domain '" + options_.name +
               "' would wait for itself";
      });
    }
    barriers_.fetch_add(1, std::memory_order_relaxed);
    SealAllBags();
    // Every node retired before the call is now on the shared list below
    // `target`, or in a bag's sealed block stamped at most `stamped`.
    const std::uint64_t stamped =
        read_side.global_epoch.load(std::memory_order_acquire);
    std::uint64_t target;
    {
      MutexLock lock(&retire_mu_);
      target = next_seq_;
    }
    const bool bounded = timeout != std::chrono::nanoseconds::max();
    const std::int64_t deadline = bounded ? SteadyNanos() + timeout.count() : 0;
    Backoff backoff;
    while (true) {
      TryReclaim();
      if (FreedBelow(target) && BagsFreedThrough(stamped)) return Status::Ok();
      if (bounded && SteadyNanos() >= deadline) {
        barrier_timeouts_.fetch_add(1, std::memory_order_relaxed);
        return WithMessage(StatusCode::kDeadlineExceeded, [&] {
          return "Barrier() on domain '" + options_.name +
                 "' timed out: a guard still pins nodes retired before the "
                 "call";
        });
      }
      backoff.Pause();
    }
  }

  Status Shutdown(std::chrono::nanoseconds deadline) {
    if (CallerInGuard()) {
      return WithMessage(StatusCode::kFailedPrecondition, [&] {
        return "Shutdown() inside a guard of domain '" + options_.name + "'";
      });
    }
    shut_down_.store(true, std::memory_order_release);
    const std::int64_t end = SteadyNanos() + deadline.count();
    // Normal grace periods free everything; repeat in case a reservation
    // taken before the shutdown was committed meanwhile.
    while (true) {
      const std::int64_t left = end - SteadyNanos();
      Status barrier =
          Barrier(std::chrono::nanoseconds(std::max<std::int64_t>(left, 0)));
      if (!barrier.ok()) {
        return WithMessage(StatusCode::kDeadlineExceeded, [&] {
          return "Shutdown() of domain '" + options_.name +
                 "': " + std::to_string(ActiveGuards()) +
                 " guards still active, " + std::to_string(RetiredCount()) +
                 " retired nodes kept";
        });
      }
      if (!BagsEmpty()) continue;
      MutexLock lock(&retire_mu_);
      if (head_ == nullptr && in_flight_ == nullptr) return Status::Ok();
    }
  }

  // --- diagnostics ------------------------------------------------------

  EpochDiagnostics Diagnostics() {
    EpochDiagnostics d;
    const std::int64_t now = clock_->NowNanos();
    d.global_epoch = read_side.global_epoch.load(std::memory_order_acquire);
    d.registered_participants = registered();
    Slot* oldest = nullptr;
    std::uint64_t oldest_epoch = 0;
    for (Slot* s = slots_head_.load(std::memory_order_acquire); s != nullptr;
         s = s->next) {
      ++d.participant_slots;
      const std::uint64_t state = s->state.load(std::memory_order_acquire);
      if ((state & kActiveBit) == 0) continue;
      ++d.active_guards;
      if (oldest == nullptr || PinnedEpoch(state) < oldest_epoch) {
        oldest = s;
        oldest_epoch = PinnedEpoch(state);
      }
    }
    if (oldest != nullptr) {
      {
        MutexLock lock(&advance_mu_);
        if (oldest_epoch < d.global_epoch) {
          d.oldest_guard_age =
              std::chrono::nanoseconds(now - EpochStartNanos(oldest_epoch + 1));
        }
      }
      MutexLock lock(&registry_mu_);
      d.oldest_guard_participant = oldest->participant_id;
      d.oldest_guard_participant_name = oldest->name;
    }
    d.retired_count = RetiredCount();
    d.retired_bytes = RetiredBytes();
    d.peak_retired_bytes = peak_retired_bytes_.load(std::memory_order_relaxed);
    d.grace_periods = grace_periods_.load(std::memory_order_relaxed);
    d.since_last_advance = std::chrono::nanoseconds(
        now - last_advance_nanos_.load(std::memory_order_relaxed));
    d.busy_count = busy_count_.load(std::memory_order_relaxed);
    d.stall_reports = stall_reports_.load(std::memory_order_relaxed);
    return d;
  }

  // Totals only the metrics report (cold paths: reclaim passes, barriers,
  // back-pressure waits), and the cap.
  struct MetricTotals {
    std::uint64_t reclaim_passes = 0;
    std::uint64_t reclaimed_count = 0;
    std::uint64_t reclaimed_bytes = 0;
    std::uint64_t barriers = 0;
    std::uint64_t barrier_timeouts = 0;
    HistogramSnapshot cap_wait;
  };
  void ReadMetricTotals(MetricTotals* t) const {
    t->reclaim_passes = reclaim_passes_.load(std::memory_order_relaxed);
    t->reclaimed_count = reclaimed_count_.load(std::memory_order_relaxed);
    t->reclaimed_bytes = reclaimed_bytes_.load(std::memory_order_relaxed);
    for (Bag* b = bags_head_.load(std::memory_order_acquire); b != nullptr;
         b = b->next) {
      t->reclaim_passes += b->passes.load(std::memory_order_relaxed);
      t->reclaimed_count += b->reclaimed_count.load(std::memory_order_relaxed);
      t->reclaimed_bytes += b->reclaimed_bytes.load(std::memory_order_relaxed);
    }
    t->barriers = barriers_.load(std::memory_order_relaxed);
    t->barrier_timeouts = barrier_timeouts_.load(std::memory_order_relaxed);
    t->cap_wait = cap_wait_.Snapshot();
  }

  void ResetAfterFork() {
    // Another thread may have held any of these at fork(); it is gone now.
    new (&registry_mu_) Mutex;
    new (&retire_mu_) Mutex;
    new (&advance_mu_) Mutex;
    const std::uintptr_t me = ThisThreadTag();
    for (Slot* s = slots_head_.load(std::memory_order_acquire); s != nullptr;
         s = s->next) {
      if (s->owner_thread.load(std::memory_order_relaxed) != me) {
        s->state.store(0, std::memory_order_release);
        s->nesting = 0;
      }
    }
    // Drop (leak) every pending node: its deleter may touch state that only
    // the parent owns. The child is single-threaded; the lock is taken on
    // the fresh mutex so the guarded members are touched as everywhere else.
    std::size_t bytes = 0;
    std::size_t count = 0;
    for (Bag* b = bags_head_.load(std::memory_order_acquire); b != nullptr;
         b = b->next) {
      new (&b->mu) Mutex;
      MutexLock lock(&b->mu);
      if (b->block != nullptr) {
        for (std::size_t i = 0; i < b->block->count; ++i) {
          bytes += b->block->items[i].bytes;
        }
        b->block->count = 0;  // dropped (leaked)
      }
      for (Block* block = b->sealed_head; block != nullptr;
           block = block->next) {
        for (std::size_t i = block->done; i < block->count; ++i) {
          bytes += block->items[i].bytes;
        }
      }
      if (b->sealed_tail != nullptr) {
        b->sealed_tail->next = forked_leftovers;
        forked_leftovers = b->sealed_head;
      }
      b->sealed_head = b->sealed_tail = nullptr;
      b->sealed_pending.store(0, std::memory_order_relaxed);
      b->freeing = false;
      b->due.store(0, std::memory_order_relaxed);
      b->size.store(0, std::memory_order_relaxed);
      bytes += b->credit.exchange(0, std::memory_order_relaxed);
    }
    MutexLock lock(&retire_mu_);
    for (Block* block = head_; block != nullptr; block = block->next) {
      count += block->count;
      for (std::size_t i = 0; i < block->count; ++i) {
        bytes += block->items[i].bytes;
      }
    }
    // A batch in flight lives on a thread that is gone; its blocks too.
    for (InFlight* f = in_flight_; f != nullptr; f = f->next) {
      bytes += f->bytes;
      count += f->count;
    }
    if (tail_ != nullptr) {
      tail_->next = forked_leftovers;
      forked_leftovers = head_;
    }
    head_ = tail_ = nullptr;
    in_flight_ = nullptr;
    retired_bytes_.fetch_sub(bytes, std::memory_order_relaxed);
    retired_count_.fetch_sub(count, std::memory_order_relaxed);
  }

  std::uint64_t ActiveGuards() const {
    std::uint64_t active = 0;
    for (Slot* s = slots_head_.load(std::memory_order_acquire); s != nullptr;
         s = s->next) {
      if ((s->state.load(std::memory_order_acquire) & kActiveBit) != 0) {
        ++active;
      }
    }
    return active;
  }

  bool shut_down() const { return shut_down_.load(std::memory_order_acquire); }

  void MarkDestroyed() { destroyed_.store(true, std::memory_order_release); }
  bool destroyed() const { return destroyed_.load(std::memory_order_acquire); }

 private:
  static constexpr std::size_t kRingSize = 64;
  struct EpochStart {
    std::uint64_t epoch;
    std::int64_t nanos;
  };

  // Reads the epoch that stamps nodes whose unlink happened before the call.
  // Unlink, then read the epoch: the caller's unlink must be visible to every
  // reader that pins an epoch later than the one read here (see "Retire
  // ordering" in docs/concurrency.md). That is a store followed by a load of
  // another location, which only a full barrier orders: a seq_cst fence in
  // the C++ model (`mfence` or a locked instruction on x86, `dmb ish` on
  // ARMv8). Called under the lock of the list it stamps for (a bag's, or
  // retire_mu_), so each list stays sorted by epoch.
  std::uint64_t StampEpoch() {
#if CAIRN_EPOCH_UNDER_TSAN
    // ThreadSanitizer does not model fences (GCC rejects them under
    // -fsanitize=thread -Werror) and cannot check store-load order at all;
    // a seq_cst read-modify-write keeps the hardware barrier in TSan builds.
    tsan_barrier_.fetch_add(1, std::memory_order_seq_cst);
#else
    std::atomic_thread_fence(std::memory_order_seq_cst);
#endif
    return read_side.global_epoch.load(std::memory_order_seq_cst);
  }

  // Gives `bag` a block if it has none (a bag's block is never full: it is
  // sealed as it fills). False when out of memory.
  bool EnsureBlock(Bag* bag) CAIRN_REQUIRES(bag->mu) {
    if (bag->block == nullptr) bag->block = TakeBlock(bag);
    return bag->block != nullptr;
  }

  // Adds a charged node to `bag`'s block (EnsureBlock() first), sealing it
  // when full. Returns the work that fell due for the owner: kPassDue after
  // reclaim_every sealed retirements, kStepDue while the bag's oldest
  // sealed block has expired and nobody is freeing it.
  std::uint8_t Push(Bag* bag, Retired r) CAIRN_REQUIRES(bag->mu) {
    Block* block = bag->block;
    block->items[block->count++] = r;
    bag->size.store(block->count, std::memory_order_relaxed);
    std::uint8_t work = 0;
    if (block->count >= bag_capacity_ && Seal(bag)) work |= kPassDue;
    const Block* head = bag->sealed_head;
    if (head != nullptr &&
        head->epoch + 2 <= bag->epoch_seen.load(std::memory_order_relaxed) &&
        !bag->freeing) {
      work |= kStepDue;
    }
    return work;
  }

  // Takes `bytes` from the bag's credit, refilling it from the cap first if
  // it is short. False, with nothing charged, if the cap has no room for
  // the bytes plus a refill.
  bool TakeCredit(Bag* bag, std::size_t bytes) CAIRN_REQUIRES(bag->mu) {
    std::size_t credit = bag->credit.load(std::memory_order_relaxed);
    if (credit < bytes) {
      const std::size_t refill = bytes - credit + credit_chunk_;
      if (credit_chunk_ == 0 || !TryCharge(refill)) return false;
      credit += refill;
    }
    bag->credit.store(credit - bytes, std::memory_order_relaxed);
    return true;
  }

  // Hands the bag's unused credit back to the cap.
  void ReturnCredit(Bag* bag) CAIRN_REQUIRES(bag->mu) {
    const std::size_t credit = bag->credit.load(std::memory_order_relaxed);
    if (credit == 0) return;
    bag->credit.store(0, std::memory_order_relaxed);
    Uncharge(credit);
  }

  // Bytes charged to the cap ahead of use by every bag (Diagnostics()).
  std::size_t CreditBytes() const {
    std::size_t credit = 0;
    for (Bag* b = bags_head_.load(std::memory_order_acquire); b != nullptr;
         b = b->next) {
      credit += b->credit.load(std::memory_order_relaxed);
    }
    return credit;
  }

  // Retired bytes waiting for a grace period, plus reservations: what is
  // charged to the cap, less the bags' unused credit.
  std::size_t RetiredBytes() const {
    const std::size_t charged = retired_bytes_.load(std::memory_order_relaxed);
    const std::size_t credit = CreditBytes();
    return charged > credit ? charged - credit : 0;
  }

  // Stamps `bag`'s open block and moves it to the tail of the bag's sealed
  // list: pointers only, so sealing never fails and takes no shared lock.
  // The bag takes one of its spare blocks if it has one, else its next push
  // finds one. True if a reclaim pass fell due.
  bool Seal(Bag* bag) CAIRN_REQUIRES(bag->mu) {
    Block* block = bag->block;
    if (block == nullptr || block->count == 0) return false;
    block->epoch = StampEpoch();
    bag->epoch_seen.store(block->epoch, std::memory_order_relaxed);
    block->done = 0;
    block->next = nullptr;
    if (bag->sealed_tail != nullptr) {
      bag->sealed_tail->next = block;
    } else {
      bag->sealed_head = block;
    }
    bag->sealed_tail = block;
    bag->sealed_pending.store(
        bag->sealed_pending.load(std::memory_order_relaxed) + block->count,
        std::memory_order_relaxed);
    bag->seals.store(bag->seals.load(std::memory_order_relaxed) + 1,
                     std::memory_order_relaxed);
    bag->block = PopSpare(bag);
    // Release: a Barrier that reads 0 here and skips the bag then reads a
    // global epoch no older than this stamp's (docs/concurrency.md, 8).
    bag->size.store(0, std::memory_order_release);
    bag->retires_since_pass += static_cast<std::uint32_t>(block->count);
    if (bag->retires_since_pass < options_.reclaim_every) return false;
    bag->retires_since_pass = 0;
    bag->pass_stamp.store(block->epoch, std::memory_order_relaxed);
    return true;
  }

  // Runs the deleters of up to `budget` expired nodes of `bag`, oldest
  // first, with no lock held. One thread at a time frees a bag (it claims
  // the bag's head under the bag's lock); a caller that finds the bag
  // claimed returns 0, as does a deleter that retires into its own
  // thread's bag. The freed bytes go back to the cap, or, for the owner
  // (`owner`), into its bag's credit up to two refills' worth, so its next
  // retirements charge nothing shared.
  std::size_t FreeBag(Bag* bag, std::size_t budget, bool owner)
      CAIRN_EXCLUDES(bag->mu) {
    Block* head;
    {
      MutexLock lock(&bag->mu);
      head = ClaimExpired(bag);
    }
    return head == nullptr ? 0 : FreeClaimed(bag, head, budget, owner);
  }

  // The bag's oldest sealed block if its grace period has passed and no
  // other thread is freeing the bag, which is then claimed by the caller;
  // else null.
  Block* ClaimExpired(Bag* bag) CAIRN_REQUIRES(bag->mu) {
    Block* head = bag->sealed_head;
    if (bag->freeing || head == nullptr) return nullptr;
    const std::uint64_t global =
        read_side.global_epoch.load(std::memory_order_acquire);
    bag->epoch_seen.store(global, std::memory_order_relaxed);
    if (head->epoch + 2 > global) return nullptr;
    bag->freeing = true;
    return head;
  }

  // FreeBag() from a claimed head. A block leaves the sealed list only
  // after its last deleter ran (Barrier relies on that); the claim is
  // dropped when the budget is spent or no expired block is left.
  std::size_t FreeClaimed(Bag* bag, Block* head, std::size_t budget, bool owner)
      CAIRN_EXCLUDES(bag->mu) {
    std::size_t freed = 0;
    while (head != nullptr) {
      const std::size_t begin = head->done;
      const std::size_t n = std::min(head->count - begin, budget - freed);
      std::size_t bytes = 0;
      for (std::size_t i = begin; i < begin + n; ++i) {
        head->items[i].deleter(head->items[i].ptr);
        bytes += head->items[i].bytes;
      }
      freed += n;
      Block* surplus = nullptr;
      std::size_t uncharge = bytes;
      {
        // Everything below happens under the lock Barrier's check takes,
        // so a Barrier that sees the block gone also sees its bytes
        // released (E10), and a fork never sees `done` behind the frees.
        MutexLock lock(&bag->mu);
        head->done = begin + n;
        bag->sealed_pending.store(
            bag->sealed_pending.load(std::memory_order_relaxed) - n,
            std::memory_order_relaxed);
        bag->reclaimed_count.store(
            bag->reclaimed_count.load(std::memory_order_relaxed) + n,
            std::memory_order_relaxed);
        bag->reclaimed_bytes.store(
            bag->reclaimed_bytes.load(std::memory_order_relaxed) + bytes,
            std::memory_order_relaxed);
        if (owner && credit_chunk_ != 0) {
          const std::size_t credit =
              bag->credit.load(std::memory_order_relaxed) + bytes;
          const std::size_t keep = std::min(credit, 2 * credit_chunk_);
          bag->credit.store(keep, std::memory_order_relaxed);
          uncharge = credit - keep;
        }
        if (head->done == head->count) {
          bag->sealed_head = head->next;
          if (bag->sealed_head == nullptr) bag->sealed_tail = nullptr;
          surplus = ReturnBlock(bag, head);
        }
        if (uncharge != 0) Uncharge(uncharge);
        bag->freeing = false;
        head = freed < budget ? ClaimExpired(bag) : nullptr;
      }
      delete surplus;
    }
    return freed;
  }

  // Visits the next bag round-robin (one every kSweepEvery passes an
  // owner's retirements make due) and, if it sealed nothing since the previous
  // visit, frees up to `budget` of its expired nodes: an idle or departed
  // thread's last blocks are freed without a host call, while a busy owner
  // frees its own.
  std::size_t SweepIdle(Bag* self, std::size_t budget) {
    Bag* b = sweep_cursor_.load(std::memory_order_relaxed);
    b = b != nullptr && b->next != nullptr
            ? b->next
            : bags_head_.load(std::memory_order_acquire);
    sweep_cursor_.store(b, std::memory_order_relaxed);
    if (b == nullptr || b == self) return 0;
    const std::uint64_t seals = b->seals.load(std::memory_order_relaxed);
    if (b->seals_seen.load(std::memory_order_relaxed) != seals) {
      b->seals_seen.store(seals, std::memory_order_relaxed);
      return 0;
    }
    if (b->sealed_pending.load(std::memory_order_relaxed) == 0) {
      return 0;
    }
    return FreeBag(b, budget, /*owner=*/false);
  }

  // True once no bag holds a sealed node stamped at most `epoch` whose
  // deleter has not finished (Barrier()).
  bool BagsFreedThrough(std::uint64_t epoch) {
    for (Bag* b = bags_head_.load(std::memory_order_acquire); b != nullptr;
         b = b->next) {
      MutexLock lock(&b->mu);
      if (b->sealed_head != nullptr && b->sealed_head->epoch <= epoch) {
        return false;
      }
    }
    return true;
  }

  // One charged node straight onto the list, for a thread without a bag:
  // into the last block if it has room (restamped: a later stamp only makes
  // its older nodes wait longer), else into a new one. Runs `unlink` (if
  // any) under the list's lock, before the stamp (point 2a). False, with
  // nothing appended or unlinked, when out of memory; never with `pledged`,
  // whose block is used if one is needed and handed back otherwise.
  bool AppendOne(Retired r, bool pledged, bool* reclaim,
                 EpochDomain::Unlink unlink = nullptr, void* arg = nullptr) {
    MutexLock lock(&retire_mu_);
    Block* block = tail_;
    if (block == nullptr || block->count == kBagCapacity) {
      if (pledged) {
        block = PopPool();
        pledged = false;
      } else {
        block = PopUnpledged();
        if (block == nullptr) block = new (std::nothrow) Block;
        if (block == nullptr) return false;
      }
      block->count = 0;
      block->seq = next_seq_;
      Link(block);
    }
    if (unlink != nullptr) unlink(arg);
    block->epoch = StampEpoch();
    block->items[block->count++] = r;
    ++next_seq_;
    if (pledged) Unpledge();
    retired_count_.fetch_add(1, std::memory_order_relaxed);
    *reclaim = CountRetires(1);
    return true;
  }

  void Link(Block* block) CAIRN_REQUIRES(retire_mu_) {
    block->next = nullptr;
    if (tail_ != nullptr) {
      tail_->next = block;
    } else {
      head_ = block;
    }
    tail_ = block;
  }

  void PushPool(Block* block) CAIRN_REQUIRES(retire_mu_) {
    block->next = pool_;
    pool_ = block;
  }

  // The caller holds a pledge (or took one from unpledged_), so the pool has
  // a block.
  Block* PopPool() CAIRN_REQUIRES(retire_mu_) {
    Block* block = pool_;
    CAIRN_CHECK_MSG(block != nullptr, "epoch block pool short of a pledge");
    pool_ = block->next;
    block->next = nullptr;
    block->count = 0;
    block->done = 0;
    return block;
  }

  // A pooled block nobody pledged, or null.
  Block* PopUnpledged() CAIRN_REQUIRES(retire_mu_) {
    std::int64_t n = unpledged_.load(std::memory_order_acquire);
    while (n > 0) {
      if (unpledged_.compare_exchange_weak(n, n - 1, std::memory_order_acq_rel,
                                           std::memory_order_acquire)) {
        return PopPool();
      }
    }
    return nullptr;
  }

  // Runs every deleter not yet run (from `done`; an open block's is 0).
  static void RunDeleters(const Block* block) {
    for (; block != nullptr; block = block->next) {
      for (std::size_t i = block->done; i < block->count; ++i) {
        block->items[i].deleter(block->items[i].ptr);
      }
    }
  }

  static void DeleteChain(Block* block) {
    while (block != nullptr) delete std::exchange(block, block->next);
  }

  bool CountRetires(std::size_t n) CAIRN_REQUIRES(retire_mu_) {
    retires_since_reclaim_ += n;
    if (retires_since_reclaim_ < options_.reclaim_every) return false;
    retires_since_reclaim_ = 0;
    return true;
  }

  // Seals every thread's open block, so the bags' sealed lists hold every
  // node whose Retire() returned before this call, and hands every bag's
  // credit back to the cap
  // (so a writer short of room sees all of it). Bags with neither are
  // skipped without locking.
  void SealAllBags() {
    for (Bag* b = bags_head_.load(std::memory_order_acquire); b != nullptr;
         b = b->next) {
      // Acquire pairs with Seal's release store of 0 (Barrier, point 8).
      if (b->size.load(std::memory_order_acquire) == 0 &&
          b->credit.load(std::memory_order_relaxed) == 0) {
        continue;
      }
      MutexLock lock(&b->mu);
      Seal(b);  // the caller reclaims next
      ReturnCredit(b);
    }
  }

  // Nodes retired and not yet freed: on the shared list, in flight, or in
  // a bag (open or sealed).
  std::uint64_t RetiredCount() const {
    std::uint64_t count = retired_count_.load(std::memory_order_relaxed);
    for (Bag* b = bags_head_.load(std::memory_order_acquire); b != nullptr;
         b = b->next) {
      count += b->size.load(std::memory_order_relaxed) +
               b->sealed_pending.load(std::memory_order_relaxed);
    }
    return count;
  }

  bool BagsEmpty() const {
    for (Bag* b = bags_head_.load(std::memory_order_acquire); b != nullptr;
         b = b->next) {
      if (b->size.load(std::memory_order_relaxed) != 0 ||
          b->sealed_pending.load(std::memory_order_relaxed) != 0) {
        return false;
      }
    }
    return true;
  }

  bool TryCharge(std::size_t bytes) {
    std::size_t current = retired_bytes_.load(std::memory_order_relaxed);
    do {
      if (current + bytes > options_.retired_bytes_cap) return false;
    } while (!retired_bytes_.compare_exchange_weak(current, current + bytes,
                                                   std::memory_order_acq_rel,
                                                   std::memory_order_relaxed));
    const std::size_t now = current + bytes;
    std::size_t peak = peak_retired_bytes_.load(std::memory_order_relaxed);
    while (now > peak && !peak_retired_bytes_.compare_exchange_weak(
                             peak, now, std::memory_order_relaxed)) {
    }
    return true;
  }

  // True if this thread holds a guard of this domain through any participant.
  // The owner tag is stored before the state on enter, so reading the state
  // first (acquire) and the tag second never pairs a new state with an old
  // owner.
  bool CallerInGuard() const {
    const std::uintptr_t me = ThisThreadTag();
    for (Slot* s = slots_head_.load(std::memory_order_acquire); s != nullptr;
         s = s->next) {
      if ((s->state.load(std::memory_order_acquire) & kActiveBit) != 0 &&
          s->owner_thread.load(std::memory_order_relaxed) == me) {
        return true;
      }
    }
    return false;
  }

  // One attempt to move the global epoch from G to G+1: allowed once every
  // active guard has published G. Collects stall reports when blocked.
  bool TryAdvance(std::vector<StallReport>* reports)
      CAIRN_REQUIRES(advance_mu_) {
    std::uint64_t global =
        read_side.global_epoch.load(std::memory_order_seq_cst);
    if (read_side.mode == ReadSideMode::kAsymmetric) {
      // Forces a full barrier on every running thread of the process, which
      // orders each reader's plain store before our loads below.
      syscall(__NR_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0);
    }
    bool blocked = false;
    for (Slot* s = slots_head_.load(std::memory_order_acquire); s != nullptr;
         s = s->next) {
      const std::uint64_t state = s->state.load(std::memory_order_seq_cst);
      if ((state & kActiveBit) != 0 && PinnedEpoch(state) != global) {
        blocked = true;
        break;
      }
    }
    if (blocked) {
      CollectStalls(global, reports);
      return false;
    }
    // Only the holder of advance_mu_ writes the global epoch.
    read_side.global_epoch.store(global + 1, std::memory_order_seq_cst);
    const std::int64_t now = clock_->NowNanos();
    ring_[(global + 1) % kRingSize] = EpochStart{global + 1, now};
    grace_periods_.fetch_add(1, std::memory_order_relaxed);
    last_advance_nanos_.store(now, std::memory_order_relaxed);
    return true;
  }

  // When epoch `epoch` began; if it fell off the ring, the oldest start we
  // still know, which is later and so keeps ages lower bounds.
  std::int64_t EpochStartNanos(std::uint64_t epoch) const
      CAIRN_REQUIRES(advance_mu_) {
    const EpochStart& entry = ring_[epoch % kRingSize];
    if (entry.epoch == epoch) return entry.nanos;
    std::int64_t oldest = ring_[0].nanos;
    std::uint64_t oldest_epoch = ring_[0].epoch;
    for (const EpochStart& e : ring_) {
      if (e.epoch < oldest_epoch && e.epoch != 0) {
        oldest_epoch = e.epoch;
        oldest = e.nanos;
      }
    }
    return oldest;
  }

  void CollectStalls(std::uint64_t global, std::vector<StallReport>* reports)
      CAIRN_REQUIRES(advance_mu_) {
    if (options_.stall_threshold.count() <= 0) return;
    const std::int64_t now = clock_->NowNanos();
    for (Slot* s = slots_head_.load(std::memory_order_acquire); s != nullptr;
         s = s->next) {
      const std::uint64_t state = s->state.load(std::memory_order_acquire);
      if ((state & kActiveBit) == 0 || PinnedEpoch(state) >= global) continue;
      const std::uint64_t pinned = PinnedEpoch(state);
      if (s->stall_epoch != pinned) {  // a different stalled guard
        s->stall_epoch = pinned;
        s->stall_reports = 0;
      }
      const std::int64_t age = now - EpochStartNanos(pinned + 1);
      // Back-off: report at 1x, 3x, 9x, ... the threshold.
      double due = static_cast<double>(options_.stall_threshold.count());
      for (std::uint32_t i = 0; i < s->stall_reports; ++i) due *= 3;
      if (static_cast<double>(age) < due) continue;
      // A report is a diagnostic: out of memory, it is skipped (counted
      // as made, so the back-off goes on), never thrown through the caller
      // (TryReclaim() holds advance_mu_ without RAII; Shutdown() runs in a
      // destructor).
      const std::uint32_t index = s->stall_reports++;
      stall_reports_.fetch_add(1, std::memory_order_relaxed);
      try {
        StallReport report;
        report.domain = options_.name;
        report.pinned_epoch = pinned;
        report.global_epoch = global;
        report.age = std::chrono::nanoseconds(age);
        report.retired_count = RetiredCount();
        report.retired_bytes = RetiredBytes();
        report.report_index = index;
        {
          MutexLock lock(&registry_mu_);
          report.participant_id = s->participant_id;
          report.participant_name = s->name;
        }
        reports->push_back(std::move(report));
      } catch (const std::bad_alloc&) {
      }
    }
  }

  // Runs the deleters of every node whose grace period has passed, outside
  // any lock (L3): the expired blocks are cut from the list, marked in
  // flight (Barrier() waits for them), freed, and pooled for reuse.
  std::size_t FreeExpired() {
    Block* batch = nullptr;
    InFlight in_flight{0, 0, 0, nullptr};
    {
      MutexLock lock(&retire_mu_);
      const std::uint64_t global =
          read_side.global_epoch.load(std::memory_order_acquire);
      Block* last = nullptr;
      for (Block* b = head_; b != nullptr && b->epoch + 2 <= global;
           b = b->next) {
        last = b;
      }
      if (last == nullptr) return 0;
      batch = head_;
      head_ = last->next;
      if (head_ == nullptr) tail_ = nullptr;
      last->next = nullptr;
      in_flight.lowest_seq = batch->seq;
      for (Block* b = batch; b != nullptr; b = b->next) {
        in_flight.count += b->count;
        for (std::size_t i = 0; i < b->count; ++i) {
          in_flight.bytes += b->items[i].bytes;
        }
      }
      in_flight.next = in_flight_;
      in_flight_ = &in_flight;
    }
    for (Block* b = batch; b != nullptr; b = b->next) {
      for (std::size_t i = 0; i < b->count; ++i) {
        b->items[i].deleter(b->items[i].ptr);
      }
    }
    Block* surplus = nullptr;
    {
      MutexLock lock(&retire_mu_);
      for (InFlight** f = &in_flight_; *f != nullptr; f = &(*f)->next) {
        if (*f == &in_flight) {
          *f = in_flight.next;
          break;
        }
      }
      retired_count_.fetch_sub(in_flight.count, std::memory_order_relaxed);
      retired_bytes_.fetch_sub(in_flight.bytes, std::memory_order_acq_rel);
      reclaimed_count_.fetch_add(in_flight.count, std::memory_order_relaxed);
      reclaimed_bytes_.fetch_add(in_flight.bytes, std::memory_order_relaxed);
      while (batch != nullptr) {
        Block* b = std::exchange(batch, batch->next);
        if (unpledged_.load(std::memory_order_relaxed) < kPoolBlocks) {
          PushPool(b);
          Unpledge();  // after the push, under the lock: see PopUnpledged
        } else {
          b->next = surplus;
          surplus = b;
        }
      }
    }
    DeleteChain(surplus);
    return in_flight.count;
  }

  bool FreedBelow(std::uint64_t seq) {
    MutexLock lock(&retire_mu_);
    if (head_ != nullptr && head_->seq < seq) return false;
    for (const InFlight* f = in_flight_; f != nullptr; f = f->next) {
      if (f->lowest_seq < seq) return false;
    }
    return true;
  }

  void RecordCapWait(std::int64_t start) {
    const std::int64_t waited = clock_->NowNanos() - start;
    cap_wait_.Record(waited > 0 ? static_cast<std::uint64_t>(waited) : 0);
  }

  void Emit(const std::vector<StallReport>& reports) const {
    for (const StallReport& r : reports) {
      if (options_.stall_hook) {
        options_.stall_hook(r);
      } else {
        try {
          std::fprintf(stderr, "%s\n", FormatStall(r).c_str());
        } catch (const std::bad_alloc&) {
        }
      }
    }
  }

  const EpochOptions options_;
  const Clock* const clock_;

  // Lock order: advance_mu_ -> retire_mu_ -> registry_mu_. All are leaves
  // with respect to host code: no deleter or hook runs under any of them.
  Mutex advance_mu_ CAIRN_ACQUIRED_BEFORE(retire_mu_, registry_mu_);
  Mutex retire_mu_ CAIRN_ACQUIRED_BEFORE(registry_mu_);
  Mutex registry_mu_;

  std::atomic<Slot*> slots_head_{nullptr};
  std::atomic<Bag*> bags_head_{nullptr};  // linked under registry_mu_
  // The bag the next idle sweep visits after (SweepIdle); any bag or null.
  // Written by every thread's passes: on a line of its own.
  alignas(64) std::atomic<Bag*> sweep_cursor_{nullptr};
  std::size_t bag_capacity_ = kBagCapacity;  // min(64, reclaim_every)
  // A bag's credit refill beyond the bytes at hand: cap / 64, at most
  // 64 KiB. A bag holds at most two refills' worth (its own frees go back
  // into its credit up to that), so credits held by idle threads stay a
  // small part of the cap unless the domain has dozens of retiring threads.
  std::size_t credit_chunk_ = 0;
  std::atomic<std::uint64_t> registered_{0};
  std::atomic<std::uint64_t> implicit_registered_{0};
  std::uint64_t next_participant_id_ CAIRN_GUARDED_BY(registry_mu_) = 1;

  // The retired list: sealed blocks in retirement (and so epoch) order.
  Block* head_ CAIRN_GUARDED_BY(retire_mu_) = nullptr;
  Block* tail_ CAIRN_GUARDED_BY(retire_mu_) = nullptr;
  InFlight* in_flight_ CAIRN_GUARDED_BY(retire_mu_) = nullptr;
  // Free blocks; unpledged_ of them are not promised to a reservation.
  // unpledged_ is changed by CAS outside the lock (pledges) and under it
  // (pops); every block it counts was pushed under the lock first, and
  // acquire/release on it orders that push before the pop it allows.
  static constexpr std::int64_t kPoolBlocks = 16;
  Block* pool_ CAIRN_GUARDED_BY(retire_mu_) = nullptr;
  std::atomic<std::int64_t> unpledged_{0};
  std::uint64_t next_seq_ CAIRN_GUARDED_BY(retire_mu_) = 0;
  std::uint32_t retires_since_reclaim_ CAIRN_GUARDED_BY(retire_mu_) = 0;

  std::array<EpochStart, kRingSize> ring_ CAIRN_GUARDED_BY(advance_mu_);

  // Counters read by Diagnostics() without locks.
  std::atomic<std::size_t> retired_bytes_{0};  // pending + reserved
  std::atomic<std::size_t> retired_count_{0};  // on the list or in flight
  std::atomic<std::size_t> peak_retired_bytes_{0};
  std::atomic<std::uint64_t> grace_periods_{0};
  std::atomic<std::int64_t> last_advance_nanos_{0};
  std::atomic<std::uint64_t> busy_count_{0};
  std::atomic<std::uint64_t> stall_reports_{0};
  // Read only by VisitMetrics(); written on cold paths (never by a guard).
  std::atomic<std::uint64_t> reclaim_passes_{0};
  std::atomic<std::uint64_t> reclaimed_count_{0};
  std::atomic<std::uint64_t> reclaimed_bytes_{0};
  std::atomic<std::uint64_t> barriers_{0};
  std::atomic<std::uint64_t> barrier_timeouts_{0};
  Histogram cap_wait_{1e-9};  // nanoseconds on clock_, exported as seconds
#if CAIRN_EPOCH_UNDER_TSAN
  // Written only by StampEpoch's barrier in TSan builds.
  alignas(64) std::atomic<std::uint64_t> tsan_barrier_{0};
#endif
  alignas(64) std::atomic<bool> shut_down_{false};
  std::atomic<bool> destroyed_{false};    // the EpochDomain object is gone
  std::atomic<bool> reclaim_due_{false};  // set by deferred retirements
};

// The calling thread's implicit participants, one per domain it entered
// through EnterOnThisThread(). Destroyed (deregistering them) at thread exit.
// Set once this thread's cache is destroyed (thread exit), so a later
// thread_local destructor that enters a guard fails loudly, not with UB.
thread_local bool thread_cache_gone = false;

class ThreadCache {
 public:
  ~ThreadCache() {
    thread_last = ThreadLast{};
    thread_cache_gone = true;
  }

  Slot* Bind(const std::shared_ptr<DomainCore>& core);

 private:
  struct Entry {
    std::uint64_t nonce;
    Participant participant;  // keeps the core, so its address, alive
  };
  std::vector<Entry> entries_;
};

thread_local ThreadCache thread_cache;

// The calling thread's retire bags, one per domain it retired into. The
// cache does not keep a domain alive: it holds a weak reference, and a bag
// dies with its core (which frees the bag's nodes). Destroyed at thread exit,
// handing its bags back sealed; a bind forgets dead cores.
struct LastBag {
  const ReadSide* read_side = nullptr;
  std::uint64_t nonce = 0;
  Bag* bag = nullptr;
};
thread_local LastBag last_bag;
thread_local bool bag_cache_gone = false;

class BagCache {
 public:
  ~BagCache() {
    last_bag = LastBag{};
    bag_cache_gone = true;
    for (Entry& e : entries_) {
      if (std::shared_ptr<DomainCore> core = e.core.lock()) {
        core->ReleaseBag(e.bag);
      }
    }
  }

  // Takes no strong reference to any other core: dropping one could run
  // that core's destructor, and so deleters, inside a Retire() whose caller
  // asked for none (Reclaim::kDeferred).
  Bag* Bind(const std::shared_ptr<DomainCore>& core) {
    // A dead core's bag died with it; a destroyed domain whose core lives on
    // (participants still hold it) can take no more retirements, so its
    // entry is dropped with the core.
    std::erase_if(entries_, [](const Entry& e) { return e.core.expired(); });
    Bag* bag = Find(core);
    if (bag == nullptr) {
      // Out of memory the thread has no bag this time (null), and its
      // retires go straight onto the list.
      try {
        entries_.reserve(entries_.size() + 1);
      } catch (const std::bad_alloc&) {
        return nullptr;
      }
      bag = core->AcquireBag();
      if (bag == nullptr) return nullptr;
      entries_.push_back(Entry{core, bag});
    }
    last_bag = LastBag{&core->read_side, core->bag_nonce, bag};
    return bag;
  }

  // This thread's bag for `core` if it has one; never allocates one.
  Bag* Find(const std::shared_ptr<DomainCore>& core) const {
    for (const Entry& e : entries_) {
      if (!e.core.owner_before(core) && !core.owner_before(e.core)) {
        return e.bag;
      }
    }
    return nullptr;
  }

 private:
  struct Entry {
    std::weak_ptr<DomainCore> core;
    Bag* bag;
  };
  std::vector<Entry> entries_;
};

thread_local BagCache bag_cache;

// ThisThreadBag when the last bag used is not this core's: out of line, so
// that the check in front of it inlines into every retire.
[[gnu::noinline]] Bag* ThisThreadBagSlow(
    const std::shared_ptr<DomainCore>& core, bool bind) {
  if (bag_cache_gone) return nullptr;
  return bind ? bag_cache.Bind(core) : bag_cache.Find(core);
}

// The calling thread's bag for `core`, bound on first use (`bind`; else
// null if it has none yet), or null once the thread's cairn state is torn
// down (a deleter or destructor running at thread exit).
inline Bag* ThisThreadBag(const std::shared_ptr<DomainCore>& core,
                          bool bind = true) {
  const LastBag& last = last_bag;
  if (last.read_side == &core->read_side && last.nonce == core->bag_nonce)
      [[likely]] {
    return last.bag;
  }
  return ThisThreadBagSlow(core, bind);
}

}  // namespace epoch_internal

// --- Participant ------------------------------------------------------------

Participant::Participant(std::shared_ptr<epoch_internal::DomainCore> core,
                         epoch_internal::Slot* slot, std::uint64_t id) noexcept
    : core_(std::move(core)),
      read_side_(&core_->read_side),
      slot_(slot),
      id_(id) {}

Participant::Participant(Participant&& other) noexcept
    : core_(std::move(other.core_)),
      read_side_(other.read_side_),
      slot_(std::exchange(other.slot_, nullptr)),
      id_(other.id_) {}

Participant& Participant::operator=(Participant&& other) noexcept {
  if (this != &other) {
    Release();
    core_ = std::move(other.core_);
    read_side_ = other.read_side_;
    slot_ = std::exchange(other.slot_, nullptr);
    id_ = other.id_;
  }
  return *this;
}

Participant::~Participant() { Release(); }

epoch_internal::Slot* epoch_internal::ThreadCache::Bind(
    const std::shared_ptr<DomainCore>& core) {
  CAIRN_CHECK_MSG(!thread_cache_gone,
                  "EpochDomain::EnterOnThisThread() called after this "
                  "thread's participants were released (thread exit)");
  // Forget domains destroyed since the last bind: their participants would
  // otherwise keep dead cores alive and lengthen this scan forever.
  std::erase_if(entries_, [](const Entry& e) {
    return e.participant.core_->destroyed();
  });
  for (Entry& e : entries_) {
    if (e.participant.read_side_ == &core->read_side &&
        e.nonce == core->read_side.nonce) {
      return e.participant.slot_;
    }
  }
  // A guard cannot be refused, so out of memory here is fatal, with a
  // message rather than a bad_alloc escaping a noexcept caller.
  try {
    entries_.reserve(entries_.size() + 1);
    std::uint64_t id = 0;
    Result<Slot*> slot = core->Register({}, &id, /*implicit=*/true);
    CAIRN_CHECK(slot.ok());  // implicit registration fails only by throwing
    entries_.push_back(
        Entry{core->read_side.nonce, Participant(core, *slot, id)});
    return *slot;
  } catch (const std::bad_alloc&) {
    CAIRN_CHECK_MSG(false,
                    "out of memory binding a thread to an epoch domain "
                    "(EnterOnThisThread)");
  }
  return nullptr;
}

void Participant::Release() noexcept {
  if (core_ == nullptr) return;
  CAIRN_CHECK_MSG(slot_->nesting == 0,
                  "Participant destroyed while one of its guards is active");
  core_->Deregister(slot_);
  core_.reset();
  slot_ = nullptr;
}

// A live reservation (core_ set) holds a pledge (DomainCore::Pledge()).
RetireReservation::~RetireReservation() {
  if (core_ == nullptr) return;
  if (bytes_ > 0) core_->Uncharge(bytes_);
  core_->Unpledge();
}

// --- EpochDomain ------------------------------------------------------------

EpochDomain::EpochDomain(EpochOptions options)
    : core_(std::make_shared<epoch_internal::DomainCore>(std::move(options))),
      read_side_(&core_->read_side) {}

void EpochDomain::BindThisThread() noexcept {
  epoch_internal::Slot* slot = epoch_internal::thread_cache.Bind(core_);
  epoch_internal::thread_last =
      epoch_internal::ThreadLast{read_side_, read_side_->nonce, slot};
}

EpochDomain::~EpochDomain() {
  const EpochOptions& options = core_->options();
  // A lifetime report needs memory; without it, the line is lost, never
  // thrown out of the destructor.
  auto report = [&](auto&& message) {
    try {
      const std::string line = message();
      if (options.error_hook) {
        options.error_hook(line);
      } else {
        std::fprintf(stderr, "%s\n", line.c_str());
      }
    } catch (const std::bad_alloc&) {
    }
  };
  core_->MarkDestroyed();
  const Status shutdown = core_->Shutdown(std::max<std::chrono::nanoseconds>(
      options.reclaim_deadline, std::chrono::milliseconds(100)));
  const std::uint64_t registered = core_->explicit_registered();
  if (registered != 0) {
    report([&] {
      return "cairn epoch '" + options.name + "': destroyed with " +
             std::to_string(registered) +
             " registered participants (E10); their slots stay valid until "
             "they are destroyed";
    });
  }
  if (!shutdown.ok()) {
    report([&] {
      return "cairn epoch '" + options.name +
             "': destroyed before its retirements could be freed: " +
             shutdown.ToString() +
             "; they are freed when the last participant "
             "is destroyed";
    });
  }
}

Result<Participant> EpochDomain::RegisterParticipant(std::string_view name) {
  std::uint64_t id = 0;
  Result<epoch_internal::Slot*> slot = core_->Register(name, &id);
  if (!slot.ok()) return std::move(slot).status();
  return Participant(core_, *slot, id);
}

Status EpochDomain::Retire(void* ptr, std::size_t bytes, Deleter deleter) {
  if (ptr == nullptr || deleter == nullptr) {
    return InvalidArgumentError("Retire() needs a pointer and a deleter");
  }
  return core_->Retire(epoch_internal::ThisThreadBag(core_), ptr, bytes,
                       deleter);
}

Result<RetireReservation> EpochDomain::Reserve(std::size_t bytes) {
  Status charged = core_->Charge(bytes);
  if (!charged.ok()) return charged;
  if (!core_->Pledge()) {
    core_->Uncharge(bytes);
    return epoch_internal::DomainCore::OutOfMemory();
  }
  return RetireReservation(core_, bytes);
}

Result<RetireReservation> EpochDomain::TryReserve(std::size_t bytes) {
  Status charged = core_->TryChargeNow(bytes);
  if (!charged.ok()) return charged;
  if (!core_->Pledge()) {
    core_->Uncharge(bytes);
    return ResourceExhaustedError();  // code-only, as TryChargeNow()
  }
  return RetireReservation(core_, bytes);
}

void EpochDomain::RetireReserved(RetireReservation reservation, void* ptr,
                                 Deleter deleter, Reclaim reclaim) noexcept {
  CAIRN_CHECK_MSG(reservation.core_ == core_,
                  "RetireReservation used with another domain");
  CAIRN_CHECK_MSG(ptr != nullptr && deleter != nullptr,
                  "RetireReserved() needs a pointer and a deleter");
  // The reservation's bytes become the node's; the node releases them. Its
  // pledge is used or handed back by Append(), which so cannot fail.
  const bool appended =
      core_->Append(epoch_internal::ThisThreadBag(core_),
                    epoch_internal::Retired{
                        ptr, deleter, std::exchange(reservation.bytes_, 0)},
                    /*pledged=*/true, reclaim == Reclaim::kDeferred);
  CAIRN_CHECK(appended);
  reservation.core_.reset();
}

Status EpochDomain::TryUnlinkAndRetire(void* ptr, std::size_t bytes,
                                       Deleter deleter, Unlink unlink,
                                       void* arg) noexcept {
  CAIRN_CHECK_MSG(ptr != nullptr && deleter != nullptr && unlink != nullptr,
                  "TryUnlinkAndRetire() needs a pointer, a deleter and an "
                  "unlink");
  return core_->TryUnlinkAndRetire(epoch_internal::ThisThreadBag(core_), ptr,
                                   bytes, deleter, unlink, arg);
}

std::size_t EpochDomain::ReclaimIfDue() {
  return core_->ReclaimIfDue(
      epoch_internal::ThisThreadBag(core_, /*bind=*/false));
}

std::size_t EpochDomain::TryReclaim() { return core_->TryReclaim(); }

Status EpochDomain::Barrier(std::chrono::nanoseconds timeout) {
  return core_->Barrier(timeout);
}

Status EpochDomain::Shutdown(std::chrono::nanoseconds deadline) {
  return core_->Shutdown(deadline);
}

EpochDiagnostics EpochDomain::Diagnostics() const {
  return core_->Diagnostics();
}

void EpochDomain::VisitMetrics(MetricVisitor& visitor) const {
  const EpochDiagnostics d = core_->Diagnostics();
  epoch_internal::DomainCore::MetricTotals t;
  core_->ReadMetricTotals(&t);
  const MetricLabel label[] = {{"domain", core_->options().name}};
  const std::span<const MetricLabel> l(label);
  const auto seconds = [](std::chrono::nanoseconds n) {
    return static_cast<double>(n.count()) * 1e-9;
  };
  visitor.GaugeValue("cairn_epoch_global_epoch",
                     "The domain's global epoch; it rises by one per grace "
                     "period.",
                     static_cast<double>(d.global_epoch), l);
  visitor.GaugeValue("cairn_epoch_participants",
                     "Participants registered (explicit and per-thread).",
                     static_cast<double>(d.registered_participants), l);
  visitor.GaugeValue("cairn_epoch_participant_slots",
                     "Participant slots ever allocated (departed "
                     "participants' slots are reused).",
                     static_cast<double>(d.participant_slots), l);
  visitor.GaugeValue("cairn_epoch_active_guards",
                     "Guards active when the metrics were read.",
                     static_cast<double>(d.active_guards), l);
  visitor.GaugeValue("cairn_epoch_oldest_guard_age_seconds",
                     "Lower bound on the age of the guard pinning the oldest "
                     "epoch; 0 when no guard is active or it pins the current "
                     "epoch.",
                     seconds(d.oldest_guard_age), l);
  visitor.GaugeValue("cairn_epoch_since_last_advance_seconds",
                     "Time since the global epoch last advanced.",
                     seconds(d.since_last_advance), l);
  visitor.GaugeValue("cairn_epoch_retired_objects",
                     "Retired objects whose deleters have not run yet.",
                     static_cast<double>(d.retired_count), l);
  visitor.GaugeValue("cairn_epoch_retired_bytes",
                     "Retired bytes not yet reclaimed, with outstanding "
                     "reservations; never above the cap.",
                     static_cast<double>(d.retired_bytes), l);
  visitor.GaugeValue("cairn_epoch_retired_bytes_peak",
                     "Highest retired bytes charged to the cap since the "
                     "domain was created (per-thread retire credit "
                     "included).",
                     static_cast<double>(d.peak_retired_bytes), l);
  visitor.GaugeValue("cairn_epoch_retired_bytes_cap",
                     "EpochOptions::retired_bytes_cap: the most retired bytes "
                     "the domain holds before writers wait.",
                     static_cast<double>(core_->options().retired_bytes_cap),
                     l);
  visitor.CounterValue("cairn_epoch_grace_periods_total",
                       "Times the global epoch advanced.", d.grace_periods, l);
  visitor.CounterValue("cairn_epoch_reclaim_passes_total",
                       "Reclaim passes run (TryReclaim, back-pressure, "
                       "Barrier, every reclaim_every retirements).",
                       t.reclaim_passes, l);
  visitor.CounterValue("cairn_epoch_reclaimed_objects_total",
                       "Retired objects whose deleters ran.", t.reclaimed_count,
                       l);
  visitor.CounterValue("cairn_epoch_reclaimed_bytes_total",
                       "Retired bytes released by deleters that ran.",
                       t.reclaimed_bytes, l);
  visitor.CounterValue("cairn_epoch_busy_total",
                       "Retires and reservations refused with "
                       "kResourceExhausted after waiting reclaim_deadline at "
                       "the cap.",
                       d.busy_count, l);
  visitor.CounterValue("cairn_epoch_stall_reports_total",
                       "Stall reports made for guards held past the stall "
                       "threshold (1x, 3x, 9x, ... the threshold).",
                       d.stall_reports, l);
  visitor.CounterValue("cairn_epoch_barriers_total",
                       "Barrier() calls, including those Shutdown() makes.",
                       t.barriers, l);
  visitor.CounterValue("cairn_epoch_barrier_timeouts_total",
                       "Barrier() calls that returned kDeadlineExceeded.",
                       t.barrier_timeouts, l);
  visitor.HistogramValue("cairn_epoch_cap_wait_seconds",
                         "Time a Retire() or Reserve() waited at the retired "
                         "bytes cap, whether it then got room or was refused "
                         "(busy).",
                         t.cap_wait, l);
}

void EpochDomain::ResetAfterFork() noexcept { core_->ResetAfterFork(); }

const std::string& EpochDomain::name() const noexcept {
  return core_->options().name;
}

bool EpochDomain::shut_down() const noexcept { return core_->shut_down(); }

ReadSideMode EpochDomain::read_side_mode() const noexcept {
  return core_->read_side.mode;
}

CAIRN_NAMESPACE_END
