// Copyright 2026 The cairn Authors.
// SPDX-License-Identifier: Apache-2.0
//
// One copy of cairn inside a shared object. Built twice, as
// libcairn_two_copies_a.so and libcairn_two_copies_b.so, each linking
// cairn's static libraries and hiding them (-Wl,--exclude-libs,ALL), as a
// plugin that bundles its dependencies does. CAIRN_COPY names the C entry
// points so one program can link both copies.

#include <atomic>
#include <chrono>

#include "cairn/epoch/epoch_domain.h"

#define CAIRN_COPY_CAT2(a, b) a##b
#define CAIRN_COPY_CAT(a, b) CAIRN_COPY_CAT2(a, b)
#define CAIRN_COPY_FN(name) CAIRN_COPY_CAT(CAIRN_COPY, name)

namespace {

cairn::EpochDomain* domain = nullptr;

struct Node {
  std::atomic<int>* freed;
};

void DeleteNode(void* p) {
  auto* node = static_cast<Node*>(p);
  node->freed->fetch_add(1, std::memory_order_relaxed);
  delete node;
}

}  // namespace

extern "C" {

__attribute__((visibility("default"))) void CAIRN_COPY_FN(_create)() {
  cairn::EpochOptions options;
  options.reclaim_every = 1'000'000;  // reclaim only when asked
  options.stall_threshold = std::chrono::nanoseconds(0);
  domain = new cairn::EpochDomain(options);
}

__attribute__((visibility("default"))) void CAIRN_COPY_FN(_destroy)() {
  delete domain;
  domain = nullptr;
}

// Enters a guard through this copy's EnterOnThisThread(); the caller ends
// it with _leave().
__attribute__((visibility("default"))) void* CAIRN_COPY_FN(_enter)() {
  return new cairn::Guard(domain->EnterOnThisThread());
}

__attribute__((visibility("default"))) void CAIRN_COPY_FN(_leave)(void* guard) {
  delete static_cast<cairn::Guard*>(guard);
}

// Retires a node whose deleter increments *freed; 0 on success.
__attribute__((visibility("default"))) int CAIRN_COPY_FN(_retire)(
    std::atomic<int>* freed) {
  auto* node = new Node{freed};
  if (domain->Retire(node, sizeof(Node), &DeleteNode).ok()) return 0;
  delete node;
  return 1;
}

__attribute__((visibility("default"))) void CAIRN_COPY_FN(_reclaim)() {
  for (int i = 0; i < 4; ++i) domain->TryReclaim();
}

__attribute__((visibility("default"))) unsigned long long CAIRN_COPY_FN(
    _active_guards)() {
  return domain->Diagnostics().active_guards;
}

}  // extern "C"
