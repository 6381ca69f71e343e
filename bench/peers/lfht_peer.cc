// Copyright 2026 The cairn Authors.
// SPDX-License-Identifier: Apache-2.0

#define _LGPL_SOURCE 1
#include <urcu/urcu-memb.h>
// The flavour header comes first: rculfhash.h binds to it.
#include <urcu/rculfhash.h>

#include <cstdint>
#include <cstdlib>
#include <new>
#include <string>
#include <string_view>
#include <vector>

#include "bench/peers/lfht_peer.h"
#include "cairn/base/internal/hash.h"

namespace cairn::bench {

namespace {

struct Node {
  cds_lfht_node node;
  std::string key;
  void* value;
};

int Match(cds_lfht_node* node, const void* key) {
  const Node* n = caa_container_of(node, Node, node);
  return n->key == *static_cast<const std::string_view*>(key);
}

}  // namespace

// urcu must not see a thread register twice or exit registered.
static thread_local bool thread_registered = false;

struct LfhtPeer::Table {
  cds_lfht* ht;
  std::vector<Node*> nodes;  // freed at destruction (no concurrent reader)
};

LfhtPeer::LfhtPeer(std::size_t expected) : table_(new Table) {
  unsigned long init = 1;
  while (init < expected && init < (1ul << 30)) init <<= 1;
  table_->ht = cds_lfht_new_flavor(init, 1, 0,
                                   CDS_LFHT_AUTO_RESIZE | CDS_LFHT_ACCOUNTING,
                                   &urcu_memb_flavor, nullptr);
  if (table_->ht == nullptr) std::abort();
}

LfhtPeer::~LfhtPeer() {
  const bool was_registered = thread_registered;
  RegisterThread();
  ReadLock();
  for (Node* n : table_->nodes) cds_lfht_del(table_->ht, &n->node);
  ReadUnlock();
  urcu_memb_synchronize_rcu();
  for (Node* n : table_->nodes) delete n;
  cds_lfht_destroy(table_->ht, nullptr);
  if (!was_registered) UnregisterThread();
  delete table_;
}

bool LfhtPeer::Insert(std::string_view key, void* value) {
  Node* n = new Node{{}, std::string(key), value};
  cds_lfht_node_init(&n->node);
  const std::string_view lookup = n->key;
  ReadLock();
  cds_lfht_node* added = cds_lfht_add_unique(
      table_->ht, base_internal::RouteHash(lookup), Match, &lookup, &n->node);
  ReadUnlock();
  if (added != &n->node) {
    delete n;
    return false;
  }
  table_->nodes.push_back(n);
  return true;
}

void* LfhtPeer::Lookup(std::string_view key) const {
  cds_lfht_iter iter;
  cds_lfht_lookup(table_->ht, base_internal::RouteHash(key), Match, &key,
                  &iter);
  cds_lfht_node* node = cds_lfht_iter_get_node(&iter);
  return node == nullptr ? nullptr : caa_container_of(node, Node, node)->value;
}

void LfhtPeer::RegisterThread() {
  if (!thread_registered) urcu_memb_register_thread();
  thread_registered = true;
}
void LfhtPeer::UnregisterThread() {
  if (thread_registered) urcu_memb_unregister_thread();
  thread_registered = false;
}
void LfhtPeer::ReadLock() { urcu_memb_read_lock(); }
void LfhtPeer::ReadUnlock() { urcu_memb_read_unlock(); }

}  // namespace cairn::bench
