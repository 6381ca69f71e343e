// Copyright 2026 The cairn Authors.
// SPDX-License-Identifier: Apache-2.0
//
// A host program: registers a participant, reads under a guard, retires,
// and checks the domain drained; then uses the directory (and through it the
// route) and the index from two other translation units (odr_unit.cc,
// compiled twice), and a directory logging to a FileDurableLog (the
// README's example). Exit code 0 means cairn linked and worked.

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "cairn/base/status.h"
#include "cairn/base/version.h"
#include "cairn/directory/group_directory.h"
#include "cairn/epoch/epoch_domain.h"
#include "cairn/ha/file_durable_log.h"

namespace consumer {
int UseEverythingA();
int UseEverythingB();
}  // namespace consumer

// The README's "Durable log" example, on a log directory in $TMPDIR.
int UseDurableLog() {
  const char* tmp = std::getenv("TMPDIR");
  const std::string path = std::string(tmp != nullptr ? tmp : "/tmp") +
                           "/cairn-consumer-" + std::to_string(getpid()) +
                           "-log";
  struct Meta {
    std::uint64_t location = 0;
  };
  int rc = 0;
  {
    auto log = cairn::FileDurableLog::Open(path);
    if (!log.ok()) return 1;
    cairn::DirectoryOptions options;
    options.durable_log = log->get();
    cairn::GroupDirectory<Meta> logged(std::move(options));
    if (!logged.Create("obj-2", {}, Meta{7}).ok()) rc = 2;
    if (rc == 0 && (*log)->durable_records() != 1) rc = 3;
  }
  std::uint64_t records = 0;
  if (rc == 0 &&
      !cairn::ReadDurableLog(path, [&](cairn::Lsn, std::string_view) {
         ++records;
       }).ok()) {
    rc = 4;
  }
  if (rc == 0 && records != 1) rc = 5;
  std::error_code ignored;
  std::filesystem::remove_all(path, ignored);
  return rc;
}

int main() {
  cairn::EpochOptions options;
  options.name = "host";
  cairn::EpochDomain domain(options);
  cairn::Result<cairn::Participant> participant =
      domain.RegisterParticipant("main");
  if (!participant.ok()) return 1;
  int* value = new int(42);
  {
    cairn::Guard guard = participant->Enter();
    if (*value != 42) return 2;
  }
  if (!domain.Retire(value).ok()) return 3;
  if (!domain.Barrier().ok()) return 4;
  if (domain.Diagnostics().retired_bytes != 0) return 5;
  if (cairn::LinkedVersion().major != cairn::kVersion.major) return 6;
  if (int rc = consumer::UseEverythingA(); rc != 0) return 10 + rc;
  if (int rc = consumer::UseEverythingB(); rc != 0) return 20 + rc;
  if (int rc = UseDurableLog(); rc != 0) return 30 + rc;
  std::printf("cairn %d.%d.%d consumer ok\n", cairn::kVersion.major,
              cairn::kVersion.minor, cairn::kVersion.patch);
  return 0;
}
