"""The gate suite's cross-component gates (docs/gates.md).

Directory level (cairn_directory_benchmark): GroupDirectory against the
shard-locked directory on YCSB A/B/C, uniform and Zipf 0.99, point and 32-key
batches, threads 1/2/8, batch latency p50/p99 from a histogram.
Route level (cairn_suite_benchmark): W1/W2/W6 against object_index and shard,
W6 against the peers (TBB, cds_lfht, libcuckoo), W4 flat vs two_level, W8 RSS
in a fresh process per implementation.

Populations are 1M objects in both modes. Quick mode runs the directory gate
rows at threads 1, 2 and 8 and everything else at 2 threads, 5 repetitions,
W8 in 3 processes per implementation; --full sweeps every row at 1, 2 and 8
threads with 7 repetitions and runs W8 in 5 processes each.
"""

import json
import os
import statistics
import subprocess

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
        # CAIRN_SUITE_POPULATION overrides the population (smoke runs).
        self.population = int(os.environ.get("CAIRN_SUITE_POPULATION", "1000000"))
        self.reps = 7 if ctx.full else 5
        self.min_time = 0.3 if ctx.full else 0.2
        self.env = {"CAIRN_SUITE_POPULATION": str(self.population)}


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
    all_runs = ctx.run_bench(DIR_BINARY, regex, repetitions=plan.reps, min_time=plan.min_time,
                             env=plan.env)
    runs = {t: all_runs for t in threads_all}

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


PEERS = (("tbb", "tbb::concurrent_hash_map", "libtbb-dev"),
         ("lfht", "liburcu cds_lfht (urcu-memb)", "liburcu-dev"),
         ("cuckoo", "libcuckoo cuckoohash_map", "libcuckoo-dev"))


def _listed(ctx, binary):
    done = subprocess.run([str(ctx.bench_dir / binary), "--benchmark_list_tests"],
                          capture_output=True, text=True, check=True)
    return set(done.stdout.split())


def _sweep(ctx, t):
    return ctx.full or t == THREADS


def route_gates(ctx, plan):
    """W1/W2 and W6 against shard and object_index (plus the peers in W6)."""
    listed = _listed(ctx, SUITE_BINARY)
    threads_all = (1, 2, 8)
    records = []

    # W1 and W2, three implementations, one invocation; threads 1, 2 and 8
    # in --full, 2 in quick mode.
    sweep = "(1|2|8)" if ctx.full else str(THREADS)
    all_runs = ctx.run_bench(SUITE_BINARY, f"BM_SuiteW[12]/.*/real_time/threads:{sweep}$",
                             repetitions=plan.reps, min_time=plan.min_time, env=plan.env)
    runs = {t: all_runs for t in threads_all if _sweep(ctx, t)}

    def rate(runs_t, w, impl, t, suffix=""):
        return ctx.median(runs_t, f"BM_Suite{w}/{impl}{suffix}/real_time/threads:{t}")

    table = {"title": "W1 point reads and W2 batch R/W 1:1 (M key ops/s; W2 batch "
                      "p50/p99 in us)",
             "columns": ["workload", "threads", "epoch", "shard", "object_index",
                         "epoch / shard", "epoch / object_index", "epoch p50/p99",
                         "object_index p50/p99"],
             "rows": []}
    for w in ("W1", "W2"):
        for t in sorted(runs):
            e, s, o = (rate(runs[t], w, i, t) for i in ("epoch", "shard", "object_index"))
            lat = ["-", "-"]
            if w == "W2":
                lat = [f"{_us(ctx.median(runs[t], f'BM_SuiteW2/{i}/real_time/threads:{t}', 'p50_ns'))}/"
                       f"{_us(ctx.median(runs[t], f'BM_SuiteW2/{i}/real_time/threads:{t}', 'p99_ns'))}"
                       for i in ("epoch", "object_index")]
            table["rows"].append([w, t, _m(e), _m(s), _m(o), f"{e / s:.2f}", f"{e / o:.2f}", *lat])
    e, o = rate(runs[THREADS], "W2", "epoch", THREADS), rate(runs[THREADS], "W2", "object_index",
                                                                THREADS)
    s = rate(runs[THREADS], "W2", "shard", THREADS)
    records.append(ctx.gate(
        "route.W2.vs_object_index", "W2 batch R/W 1:1, 32 keys, uniform; object_index = one "
        "rwlock per tenant, strong handle copied, then the entry lock", THREADS,
        plan.population, "epoch", "object_index", e, o, "key ops/s", higher_is_better=True,
        goal_value=2.0, note=f"epoch / shard {e / s:.2f} in the same run",
        extra={"tables": [table]}))

    # W6: Zipf 0.99 point ops, YCSB B and A, against shard, object_index and
    # the peers.
    impls = ["epoch", "shard", "object_index"]
    missing = []
    for peer, label, package in PEERS:
        if any(n.startswith(f"BM_SuiteW6/{peer}/") for n in listed):
            impls.append(peer)
        else:
            missing.append(f"{peer} ({label}): {package} was not installed when the bench "
                           "was configured")
    sweep = "(1|2|8)" if ctx.full else str(THREADS)
    w6_runs = ctx.run_bench(
        SUITE_BINARY, f"BM_SuiteW6/({'|'.join(impls)})/read:(95|50)/real_time/threads:{sweep}$",
        repetitions=plan.reps, min_time=plan.min_time, env=plan.env)
    w6 = {t: w6_runs for t in threads_all if _sweep(ctx, t)}
    w6_table = {"title": "W6 Zipf 0.99 point operations (M key ops/s)",
                "columns": ["mix", "threads", *impls, "epoch / best peer", "best peer"],
                "rows": []}
    peer_names = [p for p in impls if p in ("tbb", "lfht", "cuckoo")]
    for read, mix in ((95, "B (95/5)"), (50, "A (50/50)")):
        for t in sorted(w6):
            vals = {i: ctx.median(w6[t], f"BM_SuiteW6/{i}/read:{read}/real_time/threads:{t}")
                    for i in impls}
            best = max(peer_names, key=lambda p: vals[p]) if peer_names else None
            w6_table["rows"].append([mix, t, *(_m(vals[i]) for i in impls),
                                     f"{vals['epoch'] / vals[best]:.2f}" if best else "-",
                                     best or "-"])
    if missing:
        records.append(ctx.skipped(
            "route.W6.zipf_b", "W6 Zipf 0.99, YCSB B (95/5) point ops, epoch / best peer",
            "peer missing: " + "; ".join(missing)))
        records[-1]["extra"] = {"tables": [w6_table]}
    else:
        vals = {i: ctx.median(w6[THREADS], f"BM_SuiteW6/{i}/read:95/real_time/threads:{THREADS}")
                for i in impls}
        best = max(peer_names, key=lambda p: vals[p])
        a = {i: ctx.median(w6[THREADS], f"BM_SuiteW6/{i}/read:50/real_time/threads:{THREADS}")
             for i in impls}
        best_a = max(peer_names, key=lambda p: a[p])
        records.append(ctx.gate(
            "route.W6.zipf_b", "W6 Zipf 0.99, YCSB B (95/5) point ops, same per-object work",
            THREADS, plan.population, "epoch", f"best peer ({best})", vals["epoch"], vals[best],
            "key ops/s", higher_is_better=True, goal_value=1.0,
            note=(f"peers: " + ", ".join(f"{p} {_m(vals[p])}" for p in peer_names) +
                  f" M ops/s; epoch / shard {vals['epoch'] / vals['shard']:.2f}, / object_index "
                  f"{vals['epoch'] / vals['object_index']:.2f}; YCSB A epoch / best peer "
                  f"({best_a}) {a['epoch'] / a[best_a]:.2f}"),
            extra={"tables": [w6_table]}))
    return records


def w4_gates(ctx, plan):
    """W4 flat vs two_level: point g32, same/cross-group batches g8/32/128."""
    sweep = "(1|2|8)" if ctx.full else str(THREADS)
    w4_runs = ctx.run_bench(SUITE_BINARY, f"BM_SuiteW4.*/real_time/threads:{sweep}$",
                            repetitions=plan.reps, min_time=plan.min_time, env=plan.env)
    w4 = {t: w4_runs for t in (1, 2, 8) if _sweep(ctx, t)}

    def name(w, impl, g, t):
        return f"BM_SuiteW4{w}/{impl}/g:{g}/real_time/threads:{t}"

    table = {"title": "W4 flat vs two_level (M key ops/s; batch p99 in us)",
             "columns": ["workload", "group size", "threads", "flat", "two_level",
                         "flat / two_level", "flat p99", "two_level p99"],
             "rows": []}
    for t in sorted(w4):
        for w, sizes in (("Point", (32,)), ("Same", (8, 32, 128)), ("Cross", (8, 32, 128))):
            for g in sizes:
                f = ctx.median(w4[t], name(w, "flat", g, t))
                two = ctx.median(w4[t], name(w, "two_level", g, t))
                p99 = ["-", "-"]
                if w != "Point":
                    p99 = [_us(ctx.median(w4[t], name(w, i, g, t), "p99_ns"))
                           for i in ("flat", "two_level")]
                table["rows"].append([{"Point": "point reads", "Same": "same-group batch R/W",
                                       "Cross": "cross-group batch R/W"}[w], g, t, _m(f),
                                      _m(two), f"{f / two:.2f}", *p99])
    records = []
    for gid, w, workload, goal, rfc in (
            ("route.W4.point_g32", "Point", "W4 point reads, group size 32", 1.3, "+33.6% (RFC)"),
            ("route.W4.same_group", "Same", "W4 same-group batch R/W 1:1, 32 keys, group size 32",
             1.16, "+16.0% (RFC)"),
            ("route.W4.cross_group", "Cross", "W4 cross-group batch R/W 1:1, 32 keys, group "
             "size 32", 1.5, "+54.3% (RFC)")):
        f = ctx.median(w4[THREADS], name(w, "flat", 32, THREADS))
        two = ctx.median(w4[THREADS], name(w, "two_level", 32, THREADS))
        records.append(ctx.gate(gid, workload, THREADS, plan.population, "flat", "two_level",
                                f, two, "key ops/s", higher_is_better=True, goal_value=goal,
                                criterion=f"report ({rfc})",
                                extra={"tables": [table]} if gid.endswith("point_g32") else None))
    return records


def w8_gate(ctx, plan):
    """W8: RSS per 1M objects, one fresh process per implementation."""
    # RSS growth depends on how the build's freed snapshots fragment the heap
    # (about +-15% between processes here), so several processes per
    # implementation, alternating, and the median.
    reps = 5 if ctx.full else 3
    values = {"flat": [], "two_level": []}
    heap = {"flat": [], "two_level": []}
    for _ in range(reps):
        for impl in ("flat", "two_level"):  # alternate: drift hits both
            runs = ctx.run_bench(SUITE_BINARY, f"BM_SuiteW8/{impl}/", repetitions=1,
                                 min_time=0.01, env=plan.env, interleave=False)
            run_name = f"BM_SuiteW8/{impl}/iterations:1/real_time"
            values[impl] += ctx.values(runs, run_name, "rss_per_1m_objects")
            heap[impl] += ctx.values(runs, run_name, "heap_bytes_per_object")
    flat = statistics.median(values["flat"])
    two = statistics.median(values["two_level"])
    spread = ctx.spread_of([f / t for f, t in zip(values["flat"], values["two_level"])])
    return [ctx.gate(
        "route.W8.rss", "W8 RSS growth per 1M objects over the population phase (VmRSS, "
        "after malloc_trim), group-size mix 1/8/32/128 (a quarter of the objects each), "
        "fresh process per implementation", 1, plan.population, "flat", "two_level",
        flat, two, "bytes per 1M objects", higher_is_better=False, goal_value=0.8,
        criterion="report (RFC 571.1 vs 685.3 MB)", spread=spread,
        note=(f"flat {flat / 2**20:.1f} MiB, two_level {two / 2**20:.1f} MiB per 1M objects "
              f"(median of {reps} processes each); heap in use (mallinfo2) flat "
              f"{statistics.median(heap['flat']):.0f}, two_level "
              f"{statistics.median(heap['two_level']):.0f} bytes per object"))]


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


SECTIONS = (
    (DIR_BINARY, "BM_DirSelfCheck", directory_gates,
     ("directory.W2.batch_rw", "directory.W6.zipf_a_point")),
    (SUITE_BINARY, "BM_SuiteSelfCheck", route_gates,
     ("route.W2.vs_object_index", "route.W6.zipf_b")),
    (SUITE_BINARY, None, w4_gates,
     ("route.W4.point_g32", "route.W4.same_group", "route.W4.cross_group")),
    (SUITE_BINARY, None, w8_gate, ("route.W8.rss",)),
)


def run(ctx):
    plan = Plan(ctx)
    records = []
    checked = {}
    for binary, check, section, ids in SECTIONS:
        try:
            if check:
                self_check(ctx, binary, check)
                checked[binary] = True
            elif not checked.get(binary):
                raise RuntimeError(f"{binary} self-check did not pass")
            records += section(ctx, plan)
        except Exception as error:  # one broken section must not hide the others
            records += [ctx.skipped(gid, "-", f"not measured: {error}") for gid in ids]
    return records
