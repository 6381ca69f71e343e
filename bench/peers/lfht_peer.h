// Copyright 2026 The cairn Authors.
// SPDX-License-Identifier: Apache-2.0
//
// Peer: liburcu's lock-free resizable hash table (cds_lfht) under the
// urcu-memb flavour, behind a small interface so the flavour's macros stay in
// lfht_peer.cc (urcu flavours must not share a translation unit). Keys are
// strings (copied into the node), values opaque pointers the caller keeps
// alive. Lookups run inside a read-side critical section the caller opens
// with ReadLock(); every thread that reads registers first.

#ifndef CAIRN_BENCH_PEERS_LFHT_PEER_H_
#define CAIRN_BENCH_PEERS_LFHT_PEER_H_

#include <cstddef>
#include <string_view>

namespace cairn::bench {

class LfhtPeer {
 public:
  explicit LfhtPeer(std::size_t expected);
  ~LfhtPeer();
  LfhtPeer(const LfhtPeer&) = delete;
  LfhtPeer& operator=(const LfhtPeer&) = delete;

  // False if `key` is present (nothing changes). Caller registered; one
  // inserting thread at a time.
  bool Insert(std::string_view key, void* value);
  // The value routed under `key`, or null. Caller inside ReadLock().
  void* Lookup(std::string_view key) const;

  // Idempotent per thread; a registered thread must unregister before it
  // exits.
  static void RegisterThread();
  static void UnregisterThread();
  static void ReadLock();
  static void ReadUnlock();

 private:
  struct Table;
  Table* table_;
};

}  // namespace cairn::bench

#endif  // CAIRN_BENCH_PEERS_LFHT_PEER_H_
