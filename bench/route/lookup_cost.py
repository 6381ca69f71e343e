#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Instructions per lookup on the directory's read path (docs/directory.md,
"Cost of a lookup"), from callgrind: runs cairn_lookup_cost under
`valgrind --tool=callgrind --instr-atstart=no`, one dump per phase, and prints
each phase's instructions (Ir) per lookup and the directory's excess over the
route's own work plus the object lock.

Usage: bench/route/lookup_cost.py [--binary PATH] [--population N] [--lookups N]
"""

import argparse
import glob
import os
import re
import subprocess
import sys
import tempfile


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--binary", default="build/release/bench/cairn_lookup_cost")
    parser.add_argument("--population", type=int, default=1_000_000)
    parser.add_argument("--lookups", type=int, default=64_000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as out:
        cmd = ["valgrind", "--tool=callgrind", "--instr-atstart=no",
               f"--callgrind-out-file={out}/cg.out",
               args.binary, f"--population={args.population}",
               f"--lookups={args.lookups}"]
        print("$ " + " ".join(cmd), file=sys.stderr)
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)
        phases = {}
        def dump_number(path):
            suffix = path.rsplit(".", 1)[-1]
            return int(suffix) if suffix.isdigit() else -1

        for path in sorted(glob.glob(os.path.join(out, "cg.out*")), key=dump_number):
            name = lookups = total = None
            with open(path) as f:
                for line in f:
                    m = re.match(r"desc: Trigger: Client Request: phase (\S+) (\d+)", line)
                    if m:
                        name, lookups = m.group(1), int(m.group(2))
                    m = re.match(r"(?:summary|totals): (\d+)", line)
                    if m:
                        total = int(m.group(1))
            if name is not None and total is not None:
                phases[name] = total / lookups
    if not phases:
        sys.exit("no phase dumps found (is valgrind installed?)")
    print(f"{'phase':<18} {'Ir/lookup':>10}")
    for name, ir in phases.items():
        print(f"{name:<18} {ir:>10.1f}")
    for dir_phase, route_phase in (("dir_point", "route_point"),
                                   ("dir_point_excl", "route_point_excl"),
                                   ("dir_batch", "route_batch"),
                                   ("dir_batch_excl", "route_batch_excl")):
        if dir_phase in phases and route_phase in phases:
            d, r = phases[dir_phase], phases[route_phase]
            print(f"{dir_phase} - {route_phase}: {d - r:+.1f} Ir/lookup "
                  f"({d / r:.2f}x)")
    if "route_churn" in phases and "shard_churn" in phases:
        print(f"churn (Ir per create+delete pair): epoch "
              f"{phases['route_churn']:.0f}, shard {phases['shard_churn']:.0f}")


if __name__ == "__main__":
    main()
