"""The gate suite's cross-component gates (docs/gates.md).

Directory level (cairn_directory_benchmark): GroupDirectory against the
shard-locked directory on YCSB A/B/C, uniform and Zipf 0.99, point and 32-key
batches, threads 1/2/8, batch latency p50/p99 from a histogram.
Route level (cairn_suite_benchmark): W1/W2/W6 against object_index and shard,
W6 against the peers (TBB, cds_lfht, libcuckoo), W4 flat vs two_level, W8 RSS
in a fresh process per implementation.

Quick mode runs the gate workloads at 2 threads plus the 1- and 8-thread
sweep of the gate rows; --full sweeps every row at 1, 2 and 8 threads with
more repetitions.
"""

import json

DIR_BINARY = "cairn_directory_benchmark"
SUITE_BINARY = "cairn_suite_benchmark"
THREADS = 2
MIXES = (("A", 50), ("B", 95), ("C", 100))


def _m(x):
    return f"{x / 1e6:.2f}"


def _us(x):
    return f"{x / 1e3:.1f}"


class Plan:
    def __init__(self, ctx):
        self.full = ctx.full
        self.population = 1_000_000
        self.reps = 7 if ctx.full else 5
        self.min_time = 0.4 if ctx.full else 0.2
        self.env = {"CAIRN_SUITE_POPULATION": str(self.population)}


def _dir_name(impl, zipf, read, batch, threads):
    return (f"BM_Dir/{impl}/zipf:{zipf}/read:{read}/batch:{batch}"
            f"/real_time/threads:{threads}")


def directory_gates(ctx, plan):
    threads_all = (1, 2, 8)
    # One invocation per thread count: both implementations of every row
    # interleaved, so each ratio is side by side.
    runs = {}
    for t in threads_all:
        if plan.full or t == THREADS:
            rows = ".*"
        else:
            rows = "(zipf:0/read:50/batch:32|zipf:1/read:50/batch:1)"
        runs[t] = ctx.run_bench(DIR_BINARY, f"BM_Dir/.*/{rows}/real_time/threads:{t}$",
                                repetitions=plan.reps, min_time=plan.min_time, env=plan.env)

    def rate(impl, zipf, read, batch, t):
        return ctx.median(runs[t], _dir_name(impl, zipf, read, batch, t))

    def lat(impl, zipf, read, batch, t, field):
        return ctx.median(runs[t], _dir_name(impl, zipf, read, batch, t), field)

    ycsb = {"title": f"directory YCSB at {THREADS} threads, {plan.population:,} objects "
                     "(M key ops/s; batch latency in us, p50/p99 from a histogram)",
            "columns": ["keys", "mix", "ops", "directory", "shard_directory", "ratio",
                        "directory p50/p99", "shard_directory p50/p99"],
            "rows": []}
    for zipf in (0, 1):
        for mix, read in MIXES:
            for batch in (1, 32):
                d = rate("directory", zipf, read, batch, THREADS)
                s = rate("shard_directory", zipf, read, batch, THREADS)
                latency = ["-", "-"]
                if batch > 1:
                    latency = [f"{_us(lat(i, zipf, read, batch, THREADS, 'p50_ns'))}/"
                               f"{_us(lat(i, zipf, read, batch, THREADS, 'p99_ns'))}"
                               for i in ("directory", "shard_directory")]
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
              f"{_us(lat('shard_directory', 0, 50, 32, THREADS, 'p99_ns'))} us"),
        extra={"tables": [ycsb, sweep]}))
    d, s = rate("directory", 1, 50, 1, THREADS), rate("shard_directory", 1, 50, 1, THREADS)
    records.append(ctx.gate(
        "directory.W6.zipf_a_point", "GroupDirectory WithObject / WithObjectExclusive vs "
        "shard-locked directory, YCSB A (Zipf 0.99, 50/50) point ops, payload work", THREADS,
        plan.population, "GroupDirectory", "shard_directory", d, s, "key ops/s",
        higher_is_better=True, goal_value=1.2))
    return records


def run(ctx):
    plan = Plan(ctx)
    records = []
    records += directory_gates(ctx, plan)
    return records
