// Copyright 2026 The cairn Authors.
// SPDX-License-Identifier: Apache-2.0
//
// Shared by the RwLock tests: a watchdog that fails the test (by aborting
// with a message) if a scenario does not finish within a generous bound, and
// a probe that tells when a thread sleeps in the kernel. The bound detects a
// lost wakeup or a starved writer; it is not a timing assertion.

#ifndef CAIRN_TESTS_BASE_RW_LOCK_TESTING_H_
#define CAIRN_TESTS_BASE_RW_LOCK_TESTING_H_

#include <sys/syscall.h>
#include <sys/types.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <mutex>
#include <string>
#include <thread>
#include <utility>

namespace cairn::testing {

class LockWatchdog {
 public:
  LockWatchdog(std::chrono::seconds bound, std::string what)
      : what_(std::move(what)), thread_([this, bound] { Run(bound); }) {}
  ~LockWatchdog() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      done_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  LockWatchdog(const LockWatchdog&) = delete;
  LockWatchdog& operator=(const LockWatchdog&) = delete;

 private:
  void Run(std::chrono::seconds bound) {
    std::unique_lock<std::mutex> lock(mu_);
    if (!cv_.wait_for(lock, bound, [this] { return done_; })) {
      std::fprintf(stderr,
                   "watchdog: '%s' did not finish within %llds (a lost "
                   "wakeup or a starved thread)\n",
                   what_.c_str(), static_cast<long long>(bound.count()));
      std::fflush(stderr);
      std::abort();
    }
  }

  std::string what_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  std::thread thread_;
};

inline pid_t CurrentTid() { return static_cast<pid_t>(syscall(SYS_gettid)); }

// True if thread `tid` of this process is sleeping (state S in
// /proc/self/task/<tid>/stat). The RwLock tests' threads block nowhere but
// in the lock's futex, so "asleep" means "parked on the lock".
inline bool ThreadAsleep(pid_t tid) {
  std::ifstream in("/proc/self/task/" + std::to_string(tid) + "/stat");
  const std::string stat{std::istreambuf_iterator<char>(in),
                         std::istreambuf_iterator<char>()};
  const std::size_t close = stat.rfind(')');
  return close != std::string::npos && close + 2 < stat.size() &&
         stat[close + 2] == 'S';
}

// Polls `done` (a cheap predicate) until it holds; the caller's watchdog
// bounds the wait.
template <typename Pred>
void WaitUntil(Pred&& done) {
  while (!done()) std::this_thread::sleep_for(std::chrono::microseconds(200));
}

}  // namespace cairn::testing

#endif  // CAIRN_TESTS_BASE_RW_LOCK_TESTING_H_
