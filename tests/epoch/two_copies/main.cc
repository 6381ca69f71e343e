// Copyright 2026 The cairn Authors.
// SPDX-License-Identifier: Apache-2.0
//
// Two copies of cairn in one process, used alternately from one thread: a
// guard entered through one copy's EnterOnThisThread() must protect that
// copy's domain, whatever the other copy's thread cache holds. Exits 0 on
// success, 1 with a message per failed check otherwise.

#include <atomic>
#include <cstdio>

extern "C" {
void cairn_copy_a_create();
void cairn_copy_a_destroy();
void* cairn_copy_a_enter();
void cairn_copy_a_leave(void* guard);
int cairn_copy_a_retire(std::atomic<int>* freed);
void cairn_copy_a_reclaim();
unsigned long long cairn_copy_a_active_guards();
void cairn_copy_b_create();
void cairn_copy_b_destroy();
void* cairn_copy_b_enter();
void cairn_copy_b_leave(void* guard);
int cairn_copy_b_retire(std::atomic<int>* freed);
void cairn_copy_b_reclaim();
unsigned long long cairn_copy_b_active_guards();
}

namespace {

int failures = 0;

void Expect(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "two_copies: FAILED: %s\n", what);
    ++failures;
  }
}

struct Copy {
  void* (*enter)();
  void (*leave)(void*);
  int (*retire)(std::atomic<int>*);
  void (*reclaim)();
  unsigned long long (*active_guards)();
};

// Binds the thread to `first`, then checks that a guard entered through
// `second` pins `second`'s domain: it shows as active there, and a node
// retired there is not freed until that guard leaves.
void CheckGuardProtectsItsOwnDomain(const Copy& first, const Copy& second) {
  void* first_guard = first.enter();
  void* guard = second.enter();
  Expect(second.active_guards() == 1,
         "a guard entered through the second copy is active in its domain");
  Expect(first.active_guards() == 1,
         "the first copy's domain sees only its own guard");
  std::atomic<int> freed{0};
  Expect(second.retire(&freed) == 0, "retire in the second copy");
  first.leave(first_guard);
  second.reclaim();
  Expect(freed.load() == 0,
         "a node retired under the second copy's guard was freed while the "
         "guard was held");
  second.leave(guard);
  second.reclaim();
  Expect(freed.load() == 1, "the node is freed once the guard has left");
  Expect(first.active_guards() == 0 && second.active_guards() == 0,
         "every guard left");
}

}  // namespace

int main() {
  const Copy a{cairn_copy_a_enter, cairn_copy_a_leave, cairn_copy_a_retire,
               cairn_copy_a_reclaim, cairn_copy_a_active_guards};
  const Copy b{cairn_copy_b_enter, cairn_copy_b_leave, cairn_copy_b_retire,
               cairn_copy_b_reclaim, cairn_copy_b_active_guards};
  // Each copy's first domain: with per-copy counters both would get id 1.
  cairn_copy_a_create();
  cairn_copy_b_create();
  for (int round = 0; round < 3; ++round) {
    CheckGuardProtectsItsOwnDomain(a, b);
    CheckGuardProtectsItsOwnDomain(b, a);
  }
  cairn_copy_a_destroy();
  cairn_copy_b_destroy();
  // Fresh domains in both copies, used alternately again.
  cairn_copy_b_create();
  cairn_copy_a_create();
  CheckGuardProtectsItsOwnDomain(a, b);
  CheckGuardProtectsItsOwnDomain(b, a);
  cairn_copy_a_destroy();
  cairn_copy_b_destroy();
  if (failures == 0) std::fprintf(stderr, "two_copies: OK\n");
  return failures == 0 ? 0 : 1;
}
