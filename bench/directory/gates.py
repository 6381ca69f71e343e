# SPDX-License-Identifier: Apache-2.0
"""Directory gates (cairn_directory_benchmark): GroupDirectory against the
shard-locked directory on YCSB A/B/C, uniform and Zipf 0.99, point and
32-key batches, threads 1/2/8, batch latency p50/p99 from a histogram.

Population 1M objects (CAIRN_SUITE_POPULATION overrides it for smoke runs).
Quick mode runs the two gate rows at threads 1, 2 and 8 and every other row
at 2 threads, 5 repetitions; --full sweeps every row at 1, 2 and 8 threads
with 7 repetitions.

directory.batch_put (cairn_directory_batch_benchmark): BatchCreatePending +
BatchCommit of 32 keys against the same 32 puts by CreatePending + Commit,
one thread, through a FileDurableLog that syncs on a real file in
$CAIRN_BENCH_DIR (default /tmp); the two run interleaved in one invocation.
"""

import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "common"))
import gate_helpers  # noqa: E402  (bench/common/gate_helpers.py)

BINARY = "cairn_directory_benchmark"
BATCH_BINARY = "cairn_directory_batch_benchmark"
THREADS = gate_helpers.THREADS
MIXES = (("A", 50), ("B", 95), ("C", 100))
_m = gate_helpers.millions
_us = gate_helpers.micros


def _dir_name(impl, zipf, read, batch, threads):
    return (f"BM_Dir/{impl}/zipf:{zipf}/read:{read}/batch:{batch}"
            f"/real_time/threads:{threads}")


def directory_gates(ctx, plan):
    threads_all = (1, 2, 8)
    # One invocation (one build): both implementations of every row
    # interleaved, so each ratio is side by side. Quick mode sweeps threads
    # 1 and 8 on the two gate rows only.
    gate_rows = "(zipf:0/read:50/batch:32|zipf:1/read:50/batch:1)"
    regex = (f"BM_Dir/.*/real_time/threads:(1|2|8)$" if plan.full else
             f"BM_Dir/.*/{gate_rows}/real_time/threads:(1|8)$|BM_Dir/.*/real_time/threads:2$")
    all_runs = ctx.run_bench(BINARY, regex, repetitions=plan.reps, min_time=plan.min_time,
                             env=plan.env)
    runs = {t: all_runs for t in threads_all}

    def rate(impl, zipf, read, batch, t):
        return ctx.median(runs[t], _dir_name(impl, zipf, read, batch, t))

    def lat(impl, zipf, read, batch, t, field):
        return ctx.median(runs[t], _dir_name(impl, zipf, read, batch, t), field)

    def rw_p99(impl, zipf, read, batch, t):
        # Read batches' and write batches' own p99 ("-" for a mix without
        # one kind), as the read-path RFC reported them.
        def one(field):
            v = lat(impl, zipf, read, batch, t, field)
            return _us(v) if v else "-"
        return f"{one('read_p99_ns')}/{one('write_p99_ns')}"

    ycsb = {"title": f"directory YCSB at {THREADS} threads, {plan.population:,} objects "
                     "(M key ops/s; batch latency in us from a histogram: p50/p99 of all "
                     "batches, then p99 of read batches / of write batches)",
            "columns": ["keys", "mix", "ops", "directory", "shard_directory", "ratio",
                        "directory p50/p99", "directory read/write p99",
                        "shard_directory p50/p99", "shard_directory read/write p99"],
            "rows": []}
    for zipf in (0, 1):
        for mix, read in MIXES:
            for batch in (1, 32):
                d = rate("directory", zipf, read, batch, THREADS)
                s = rate("shard_directory", zipf, read, batch, THREADS)
                latency = ["-"] * 4
                if batch > 1:
                    latency = []
                    for i in ("directory", "shard_directory"):
                        latency.append(f"{_us(lat(i, zipf, read, batch, THREADS, 'p50_ns'))}/"
                                       f"{_us(lat(i, zipf, read, batch, THREADS, 'p99_ns'))}")
                        latency.append(rw_p99(i, zipf, read, batch, THREADS))
                ycsb["rows"].append(["Zipf 0.99" if zipf else "uniform", f"{mix} ({read}% reads)",
                                     "point" if batch == 1 else f"batch {batch}", _m(d), _m(s),
                                     f"{d / s:.2f}", *latency])

    sweep = {"title": "directory thread sweep (threads 8: oversubscribed on 2 cores)",
             "columns": ["workload", "threads", "directory", "shard_directory", "ratio",
                         "directory p99 (us)", "shard_directory p99 (us)"],
             "rows": []}
    for label, zipf, read, batch in (("W2 uniform batch R/W 1:1", 0, 50, 32),
                                     ("YCSB A Zipf point", 1, 50, 1)):
        for t in threads_all:
            d = rate("directory", zipf, read, batch, t)
            s = rate("shard_directory", zipf, read, batch, t)
            p99 = ["-", "-"]
            if batch > 1:
                p99 = [_us(lat(i, zipf, read, batch, t, "p99_ns"))
                       for i in ("directory", "shard_directory")]
            sweep["rows"].append([label, t, _m(d), _m(s), f"{d / s:.2f}", *p99])

    records = []
    d, s = rate("directory", 0, 50, 32, THREADS), rate("shard_directory", 0, 50, 32, THREADS)
    records.append(ctx.gate(
        "directory.W2.batch_rw", "GroupDirectory WithObjects / WithObjectsExclusive vs "
        "shard-locked directory, uniform, 32-key batches R/W 1:1, payload work", THREADS,
        plan.population, "GroupDirectory", "shard_directory", d, s, "key ops/s",
        higher_is_better=True, goal_value=2.0,
        note=(f"batch p50/p99 directory {_us(lat('directory', 0, 50, 32, THREADS, 'p50_ns'))}/"
              f"{_us(lat('directory', 0, 50, 32, THREADS, 'p99_ns'))} us, shard_directory "
              f"{_us(lat('shard_directory', 0, 50, 32, THREADS, 'p50_ns'))}/"
              f"{_us(lat('shard_directory', 0, 50, 32, THREADS, 'p99_ns'))} us; "
              f"read/write batch p99 directory {rw_p99('directory', 0, 50, 32, THREADS)} us, "
              f"shard_directory {rw_p99('shard_directory', 0, 50, 32, THREADS)} us"),
        extra={"tables": [ycsb, sweep]}))
    d, s = rate("directory", 1, 50, 1, THREADS), rate("shard_directory", 1, 50, 1, THREADS)
    records.append(ctx.gate(
        "directory.W6.zipf_a_point", "GroupDirectory WithObject / WithObjectExclusive vs "
        "shard-locked directory, YCSB A (Zipf 0.99, 50/50) point ops, payload work", THREADS,
        plan.population, "GroupDirectory", "shard_directory", d, s, "key ops/s",
        higher_is_better=True, goal_value=1.5))
    return records


def batch_put_gates(ctx, plan):
    # Both paths interleaved in one invocation, so the ratio is side by side.
    runs = ctx.run_bench(BATCH_BINARY, "BM_BatchPut/(batch|single)/real_time$",
                         repetitions=plan.reps, min_time=plan.min_time)
    batch = ctx.median(runs, "BM_BatchPut/batch/real_time")
    single = ctx.median(runs, "BM_BatchPut/single/real_time")
    per_sync = ctx.median(runs, "BM_BatchPut/batch/real_time", "records_per_sync")
    return [ctx.gate(
        "directory.batch_put", "BatchCreatePending + BatchCommit of 32 keys vs the same puts "
        "by CreatePending + Commit, FileDurableLog with fdatasync on a real file", 1, None,
        "batch calls", "single calls", batch, single, "acknowledged puts/s",
        higher_is_better=True, goal_value=10.0,
        note=f"batch path: {per_sync:.1f} records per sync")]


GROUP_BINARY = "cairn_group_benchmark"


def group_gates(ctx, plan):
    """route.W4.group_teardown: EraseGroup of a 32-member group, GroupDirectory
    against the shard-locked directory with a group catalog (teardowns per
    second, one thread, 100k singletons around the groups); sizes 8 and 128
    and the group creation time are reported beside it, and group eviction
    through the Evictor (BM_GroupEvict, directory only: the baseline has no
    eviction kernel)."""
    runs = ctx.run_bench(GROUP_BINARY, "BM_GroupW4/", repetitions=plan.reps,
                         min_time=plan.min_time)
    try:  # reported only: its failure must not cost the gate above
        evict_runs = ctx.run_bench(GROUP_BINARY, "BM_GroupEvict/",
                                   repetitions=plan.reps, min_time=plan.min_time)
    except Exception as e:  # pylint: disable=broad-except
        ctx.progress(f"BM_GroupEvict not measured: {e}")
        evict_runs = None
    name = "BM_GroupW4/{}/size:{}/manual_time"
    rate = {}
    figures = []
    for size in (8, 32, 128):
        for impl in ("directory", "shard_directory"):
            rate[impl, size] = ctx.median(runs, name.format(impl, size))
        d, s = name.format("directory", size), name.format("shard_directory", size)
        figures.append(
            f"size {size}: teardown {1e6 / rate['directory', size]:.1f} vs "
            f"{1e6 / rate['shard_directory', size]:.1f} us (p99 "
            f"{ctx.median(runs, d, 'teardown_p99_us'):.1f} vs "
            f"{ctx.median(runs, s, 'teardown_p99_us'):.1f}), create "
            f"{ctx.median(runs, d, 'create_us'):.1f} vs "
            f"{ctx.median(runs, s, 'create_us'):.1f} us, retired "
            f"{ctx.median(runs, d, 'retired_bytes_per_teardown') / 1024:.1f} KiB "
            f"per teardown")
    evict = "BM_GroupEvict/size:{}/iterations:5/manual_time"
    try:
        if evict_runs is None:
            raise KeyError("no runs")
        figures.append(
            "eviction (Evictor, 256 groups, goal every byte): " + ", ".join(
                f"size {size} {ctx.median(evict_runs, evict.format(size), 'us_per_group'):.1f} "
                f"us per group ({ctx.median(evict_runs, evict.format(size), 'us_per_member'):.2f} "
                f"per member, retired "
                f"{ctx.median(evict_runs, evict.format(size), 'retired_bytes_per_group') / 1024:.1f} KiB)"
                for size in (8, 32, 128)))
    except (KeyError, ValueError) as e:
        figures.append(f"eviction: not measured ({e})")
    return [ctx.gate(
        "route.W4.group_teardown",
        "EraseGroup of a 32-member group (created untimed just before), one "
        "thread, 100k singletons in the directory", 1, 100_000, "directory",
        "shard_directory", rate["directory", 32], rate["shard_directory", 32],
        "teardowns/s", higher_is_better=True, goal_value=1.0, criterion=None,
        note="; ".join(figures))]


def run(ctx):
    return gate_helpers.run_sections(
        ctx, ((BINARY, "BM_DirSelfCheck", directory_gates,
               ("directory.W2.batch_rw", "directory.W6.zipf_a_point")),
              (BATCH_BINARY, "BM_BatchPutSelfCheck", batch_put_gates,
               ("directory.batch_put",)),
              (GROUP_BINARY, "BM_GroupSelfCheck", group_gates,
               ("route.W4.group_teardown",))),
        gate_helpers.Plan(ctx))
