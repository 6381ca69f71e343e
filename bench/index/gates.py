# SPDX-License-Identifier: Apache-2.0
"""Gates X1-X3 of docs/index.md: ScanHashMap against absl::flat_hash_map.

Quick mode runs 1M entries; --full adds 16M entries (the population the gate
ids are defined at). Each gate's candidate and baseline run in one benchmark
invocation (random interleaving); the ratio is of medians. The gate record is
for 64-byte keys; the note carries the 16-byte figures and the other
baselines (absl with its prefetch, std::unordered_map).
"""

BINARY = "cairn_index_benchmark"
GATE_WIDTH = 64
WIDTHS = (16, 64)


def _fmt(x):
    return f"{x:.3g}"


def _x1(ctx, population):
    name = lambda kind, impl, w: f"BM_IndexX1Find{kind}/{impl}/{population}/{w}"
    figures = {}
    for w in WIDTHS:
        # One invocation per key width: all maps of it stay built for the
        # interleaved repetitions (about 5.5 GB at 16M entries, 64-byte keys).
        runs = ctx.run_bench(BINARY, f"BM_IndexX1Find(Hit|Miss)/.*/{population}/{w}$",
                             repetitions=5, min_time=0.3)
        hit = {impl: ctx.median(runs, name("Hit", impl, w))
               for impl in ("cairn", "absl", "absl_prefetch", "std")}
        miss = {impl: ctx.median(runs, name("Miss", impl, w)) for impl in ("cairn", "absl", "std")}
        bpk = {impl: ctx.median(runs, name("Hit", impl, w), field="bytes_per_key")
               for impl in ("cairn", "absl", "std")}
        figures[w] = (hit, miss, bpk)
        ctx.progress(
            f"X1 {population} entries, {w}-byte keys: hit Mops/s cairn {hit['cairn']/1e6:.2f} "
            f"absl {hit['absl']/1e6:.2f} absl+prefetch {hit['absl_prefetch']/1e6:.2f} "
            f"std {hit['std']/1e6:.2f}; miss cairn {miss['cairn']/1e6:.2f} absl "
            f"{miss['absl']/1e6:.2f} std {miss['std']/1e6:.2f}; bytes/key cairn "
            f"{bpk['cairn']:.1f} absl {bpk['absl']:.1f} std {bpk['std']:.1f}")
    return figures


def run(ctx):
    records = []
    populations = [1_000_000] + ([16_000_000] if ctx.full else [])
    gate_pop = populations[-1]
    x1 = {p: _x1(ctx, p) for p in populations}

    hit, miss, bpk = x1[gate_pop][GATE_WIDTH]
    hit16, miss16, bpk16 = x1[gate_pop][16]
    workload = f"X1 random find hit, {GATE_WIDTH}-byte keys, uniform"
    records.append(ctx.gate(
        "index.X1.find_hit", workload, 1, gate_pop, "ScanHashMap", "absl::flat_hash_map",
        hit["cairn"], hit["absl"], "finds/s", True, 0.9,
        note=(f"16-byte keys {_fmt(hit16['cairn'] / hit16['absl'])}; vs absl with prefetch "
              f"{_fmt(hit['cairn'] / hit['absl_prefetch'])} (16B {_fmt(hit16['cairn'] / hit16['absl_prefetch'])}); "
              f"vs std::unordered_map {_fmt(hit['cairn'] / hit['std'])}; miss vs absl "
              f"{_fmt(miss['cairn'] / miss['absl'])} (16B {_fmt(miss16['cairn'] / miss16['absl'])})"
              + ("" if ctx.full else "; quick mode: 1M entries, --full runs 16M"))))
    records.append(ctx.gate(
        "index.X1.bytes_per_key", f"X8-style memory after building {gate_pop} entries, "
        f"{GATE_WIDTH}-byte keys (heap growth, mallinfo2)", 1, gate_pop, "ScanHashMap",
        "absl::flat_hash_map", bpk["cairn"], bpk["absl"], "bytes/key", False, 0.75,
        note=(f"16-byte keys {_fmt(bpk16['cairn'] / bpk16['absl'])} "
              f"({bpk16['cairn']:.1f} vs {bpk16['absl']:.1f}); std::unordered_map "
              f"{bpk['std']:.1f} B/key")))

    runs = ctx.run_bench(BINARY, f"BM_IndexX2Find/.*/{gate_pop}/(16|64)$",
                         repetitions=5, min_time=0.3)
    x2 = {w: (ctx.median(runs, f"BM_IndexX2Find/cairn_batched/{gate_pop}/{w}"),
              ctx.median(runs, f"BM_IndexX2Find/cairn_serial/{gate_pop}/{w}")) for w in WIDTHS}
    records.append(ctx.gate(
        "index.X2.batched", f"X2 FindBatch of 64 random keys vs 64 Find calls, "
        f"{GATE_WIDTH}-byte keys", 1, gate_pop, "FindBatch", "Find one by one",
        x2[GATE_WIDTH][0], x2[GATE_WIDTH][1], "finds/s", True, 2.0,
        note=f"16-byte keys {_fmt(x2[16][0] / x2[16][1])}"))

    runs = ctx.run_bench(BINARY, "BM_IndexX3FindAddress/.*/1000000/(16|64)$",
                         repetitions=5, min_time=0.3)
    x3 = {w: (ctx.median(runs, f"BM_IndexX3FindAddress/tagged/1000000/{w}"),
              ctx.median(runs, f"BM_IndexX3FindAddress/untagged/1000000/{w}")) for w in WIDTHS}
    records.append(ctx.gate(
        "index.X3.tagged", "X3 FindAddress of random receipts, full head buckets plus "
        f"two overflow buckets per chain (exponent capped at 15), {GATE_WIDTH}-byte keys",
        1, 1_000_000, "tagged", "untagged", x3[GATE_WIDTH][0], x3[GATE_WIDTH][1],
        "lookups/s", True, 2.0, note=f"16-byte keys {_fmt(x3[16][0] / x3[16][1])}"))
    return records
