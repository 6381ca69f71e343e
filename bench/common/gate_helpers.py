# SPDX-License-Identifier: Apache-2.0
"""What the gate modules (bench/<component>/gates.py) share beyond the
runner's Context: the suite drivers' run plan, number formats, the
drivers' self-checks, and running gate sections so one broken section
skips only its own gates.

A module loads it with
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "common"))
    import gate_helpers
(scripts/gates.py loads each gates.py by path, so bench/common is not on
sys.path by itself; this file is not named gates.py, so the runner does not
take it for a component).
"""

import json
import os
import subprocess

# Gate threads on the 2-core machines these gates were set for.
THREADS = 2


def millions(x):
    return f"{x / 1e6:.2f}"


def micros(x):
    return f"{x / 1e3:.1f}"


class Plan:
    """Population, repetitions and minimum time of the suite drivers
    (cairn_directory_benchmark, cairn_suite_benchmark)."""

    def __init__(self, ctx):
        self.full = ctx.full
        # CAIRN_SUITE_POPULATION overrides the population (smoke runs).
        self.population = int(os.environ.get("CAIRN_SUITE_POPULATION", "1000000"))
        self.reps = 7 if ctx.full else 5
        self.min_time = 0.3 if ctx.full else 0.2
        self.env = {"CAIRN_SUITE_POPULATION": str(self.population)}


def listed(ctx, binary):
    """The benchmark names a binary registers."""
    done = subprocess.run([str(ctx.bench_dir / binary), "--benchmark_list_tests"],
                          capture_output=True, text=True, check=True)
    return set(done.stdout.split())


def self_check(ctx, binary, name):
    """Runs a driver's self-check (every adapter routes every key to its own
    entry, misses absent keys, refuses duplicates, batches cover every key);
    raises with the failure so the section's gates are skipped, not run on a
    broken adapter."""
    ctx.progress(f"{binary} {name}")
    done = subprocess.run([str(ctx.bench_dir / binary), f"--benchmark_filter=^{name}/",
                           "--benchmark_format=json"], capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"{binary} self-check exited {done.returncode}: {done.stderr[-500:]}")
    ran = json.loads(done.stdout)["benchmarks"] if done.stdout.strip() else []
    if not ran:
        raise RuntimeError(f"{binary} has no {name}")
    for b in ran:
        if b.get("error_occurred"):
            raise RuntimeError(f"self-check failed: {b.get('error_message')}")


def run_sections(ctx, sections, *args):
    """sections: (binary, self-check name or None, function, gate ids). A
    section without a self-check needs an earlier one of its binary to have
    passed. A section that raises records its ids as skipped with the
    reason; the others still run."""
    records = []
    checked = {}
    for binary, check, section, ids in sections:
        try:
            if check:
                self_check(ctx, binary, check)
                checked[binary] = True
            elif not checked.get(binary):
                raise RuntimeError(f"{binary} self-check did not pass")
            records += section(ctx, *args)
        except Exception as error:  # one broken section must not hide the others
            records += [ctx.skipped(gid, "-", f"not measured: {error}") for gid in ids]
    return records
