# SPDX-License-Identifier: Apache-2.0
"""The gate suite's comparisons with peers and baselines
(cairn_suite_benchmark, docs/gates.md): W6 Zipf 0.99 point operations
against shard, object_index and the peers (TBB, cds_lfht, libcuckoo), W4
flat vs two_level, W8 RSS in a fresh process per implementation. (W1 and W2
against shard and object_index are measured once, in bench/route.)

Populations are 1M objects in both modes (CAIRN_SUITE_POPULATION overrides
it for smoke runs). Quick mode runs at 2 threads, 5 repetitions, W8 in 3
processes per implementation; --full sweeps every row at 1, 2 and 8 threads
with 7 repetitions and runs W8 in 5 processes each.
"""

import pathlib
import statistics
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "common"))
import gate_helpers  # noqa: E402  (bench/common/gate_helpers.py)

SUITE_BINARY = "cairn_suite_benchmark"
THREADS = gate_helpers.THREADS
_m = gate_helpers.millions
_us = gate_helpers.micros


PEERS = (("tbb", "tbb::concurrent_hash_map", "libtbb-dev"),
         ("lfht", "liburcu cds_lfht (urcu-memb)", "liburcu-dev"),
         ("cuckoo", "libcuckoo cuckoohash_map", "libcuckoo-dev"))


def _sweep(ctx, t):
    return ctx.full or t == THREADS


def w6_gates(ctx, plan):
    """W6 against shard, object_index and the peers compiled in."""
    listed = gate_helpers.listed(ctx, SUITE_BINARY)
    threads_all = (1, 2, 8)
    records = []
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
            "key ops/s", higher_is_better=True, goal_value=1.2,
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


SECTIONS = (
    (SUITE_BINARY, "BM_SuiteSelfCheck", w6_gates, ("route.W6.zipf_b",)),
    (SUITE_BINARY, None, w4_gates,
     ("route.W4.point_g32", "route.W4.same_group", "route.W4.cross_group")),
    (SUITE_BINARY, None, w8_gate, ("route.W8.rss",)),
)


def run(ctx):
    return gate_helpers.run_sections(ctx, SECTIONS, gate_helpers.Plan(ctx))
