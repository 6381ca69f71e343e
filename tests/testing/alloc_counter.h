// Copyright 2026 The cairn Authors.
// SPDX-License-Identifier: Apache-2.0
//
// Counts heap allocations made by the calling thread, so a test can check a
// "does not allocate" contract. Every test executable links
// alloc_counter.cc, which replaces the global operator new/delete with
// versions that count and then call malloc/free.

#ifndef CAIRN_TESTS_TESTING_ALLOC_COUNTER_H_
#define CAIRN_TESTS_TESTING_ALLOC_COUNTER_H_

#include <cstdint>
#include <new>

namespace cairn::testing {

// Allocations (every operator new form) made by this thread so far.
std::uint64_t AllocationsOnThisThread() noexcept;

// The next `n` allocations on this thread fail (operator new throws
// std::bad_alloc; the nothrow forms return null), so a test can drive a
// code's allocation-failure path.
void FailNextAllocationsOnThisThread(int n) noexcept;

// Only the `nth` allocation from now on this thread fails (1: the next
// one), so a test can fail each allocation of a workload in turn; 0
// disarms. FailedAllocationsOnThisThread() tells whether it was reached.
void FailNthAllocationOnThisThread(int nth) noexcept;
std::uint64_t FailedAllocationsOnThisThread() noexcept;

// Runs fn() with only the `nth` allocation on this thread from now failing,
// then disarms. A std::bad_alloc that fn lets out is caught and counted in
// *threw. Returns whether the nth allocation was made: false once fn made
// fewer than nth, so a loop failing each allocation in turn can stop.
template <typename Fn>
bool FailNthAllocationDuring(int nth, int* threw, Fn&& fn) {
  const std::uint64_t failed_before = FailedAllocationsOnThisThread();
  FailNthAllocationOnThisThread(nth);
  try {
    fn();
  } catch (const std::bad_alloc&) {
    ++*threw;
  }
  FailNthAllocationOnThisThread(0);
  return FailedAllocationsOnThisThread() != failed_before;
}

// Allocations made by this thread since construction.
class AllocationCounter {
 public:
  AllocationCounter() noexcept : start_(AllocationsOnThisThread()) {}
  std::uint64_t count() const noexcept {
    return AllocationsOnThisThread() - start_;
  }

 private:
  std::uint64_t start_;
};

}  // namespace cairn::testing

#endif  // CAIRN_TESTS_TESTING_ALLOC_COUNTER_H_
