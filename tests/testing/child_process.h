// Copyright 2026 The cairn Authors.
// SPDX-License-Identifier: Apache-2.0
//
// ChildProcess: a program a crash test execs and then kills with SIGKILL.
// Destroying it kills and reaps the child if Kill() has not, so a failed
// assertion never leaves a child running.

#ifndef CAIRN_TESTS_TESTING_CHILD_PROCESS_H_
#define CAIRN_TESTS_TESTING_CHILD_PROCESS_H_

#include <signal.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>
#include <vector>

namespace cairn::testing {

class ChildProcess {
 public:
  // Forks and execs `program` with `args` as argv[1..]; the child first
  // closes `close_in_child` (a pipe's read end, say) if it is >= 0.
  // started() is false if fork failed.
  ChildProcess(const char* program, const std::vector<std::string>& args,
               int close_in_child) {
    std::vector<char*> argv;
    argv.push_back(const_cast<char*>(program));
    for (const std::string& a : args)
      argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    pid_ = ::fork();
    if (pid_ == 0) {
      if (close_in_child >= 0) ::close(close_in_child);
      ::execv(program, argv.data());
      ::_exit(127);
    }
  }
  ~ChildProcess() {
    if (pid_ > 0 && !reaped_) (void)Kill();
  }
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  bool started() const { return pid_ > 0; }

  // SIGKILLs the child and reaps it. True if it died of that SIGKILL (not
  // on its own before it); *wait_status, if given, gets waitpid's status.
  bool Kill(int* wait_status = nullptr) {
    ::kill(pid_, SIGKILL);
    int status = 0;
    const bool waited = ::waitpid(pid_, &status, 0) == pid_;
    reaped_ = true;
    if (wait_status != nullptr) *wait_status = status;
    return waited && WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL;
  }

 private:
  pid_t pid_ = -1;
  bool reaped_ = false;
};

}  // namespace cairn::testing

#endif  // CAIRN_TESTS_TESTING_CHILD_PROCESS_H_
