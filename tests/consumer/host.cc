// Copyright 2026 The cairn Authors.
//
// A host program: registers a participant, reads under a guard, retires,
// and checks the domain drained; then uses the directory (and through it the
// route) and the index from two other translation units (odr_unit.cc,
// compiled twice). Exit code 0 means cairn linked and worked.

#include <cstdio>

#include "cairn/base/status.h"
#include "cairn/base/version.h"
#include "cairn/epoch/epoch_domain.h"

namespace consumer {
int UseEverythingA();
int UseEverythingB();
}  // namespace consumer

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
  std::printf("cairn %d.%d.%d consumer ok\n", cairn::kVersion.major,
              cairn::kVersion.minor, cairn::kVersion.patch);
  return 0;
}
