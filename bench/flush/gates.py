# SPDX-License-Identifier: Apache-2.0
"""Gates X4 and X5 of docs/flush.md: the receipt pass and LogStore end to end.

Quick mode runs the receipt pass at 1M entries; --full at 16M (the
population the gate ids are defined at). Candidate and baseline run in one
benchmark invocation (random interleaving); ratios are of medians. X5 figures
(LogStore SET/GET throughput and p99 with prefetch off, on and in watermark
mode, fdatasync on a real file) are reported, not gated: their records carry
the verdict `report` and a reference of 1.0 (no change). X5 SET tail with
the flusher (flush.X5.set_p9999) is gated: SET p99.99 over SET p50. So are
LogStore against RocksDB and LevelDB (durable_gates: SETs acknowledged
durable; buffered_gates: buffered SETs and GETs, and LogStore's writer
scaling) and the space amplification under overwrite (space_gates).
"""

BINARY = "cairn_flush_benchmark"
DURABLE_BINARY = "cairn_flush_durable_benchmark"
BUFFERED_BINARY = "cairn_flush_buffered_benchmark"
PEERS = (("rocksdb", "RocksDB 7.8", "librocksdb-dev"),
         ("leveldb", "LevelDB 1.23", "libleveldb-dev"))


def _fmt(x):
    return f"{x:.3g}"


def _report(record):
    record["verdict"] = "report"
    record["goal"] = "~ 1.0"
    return record


def run(ctx):
    records = []
    pop = 16_000_000 if ctx.full else 1_000_000

    runs = ctx.run_bench(BINARY, f"BM_FlushX4Receipts/.*/{pop}/(1|16384)$",
                         repetitions=5, min_time=0.3)
    med = lambda impl, maps: ctx.median(runs, f"BM_FlushX4Receipts/{impl}/{pop}/{maps}")
    one = (med("staged", 1), med("serial", 1))
    many = (med("staged", 16384), med("serial", 16384))
    ctx.progress(f"X4 receipts {pop}: one map staged {one[0]/1e6:.2f} serial {one[1]/1e6:.2f} "
                 f"M/s; 16K maps staged {many[0]/1e6:.2f} serial {many[1]/1e6:.2f} M/s")
    records.append(ctx.gate(
        "flush.X4.receipts", "X4 receipt pass over one 8 MiB block (8192 receipts of 1 KiB "
        "records), one map, 24-byte keys; staged = metadata 16 / bucket+entry 8 ahead",
        1, pop, "staged", "serial", one[0], one[1], "receipts/s", True, 2.5,
        note=(f"16K small maps {_fmt(many[0] / many[1])} ({many[0]/1e6:.2f} vs "
              f"{many[1]/1e6:.2f} M/s); one map {one[0]/1e6:.2f} vs {one[1]/1e6:.2f} M/s"
              + ("" if ctx.full else "; quick mode: 1M entries, --full runs 16M"))))

    runs = ctx.run_bench(BINARY, f"BM_FlushX4Block/.*/{pop}/1$", repetitions=5, min_time=0.3)
    field = "locked_ns_per_block"
    staged = ctx.median(runs, f"BM_FlushX4Block/staged/{pop}/1", field=field)
    serial = ctx.median(runs, f"BM_FlushX4Block/serial/{pop}/1", field=field)
    slice_staged = ctx.median(runs, f"BM_FlushX4Block/staged/{pop}/1", field="max_slice_ns")
    slice_serial = ctx.median(runs, f"BM_FlushX4Block/serial/{pop}/1", field="max_slice_ns")

    def hold(impl, what, with_max=True):
        """Hold-time quantiles over the blocks, in us, as a/b[/c]."""
        name = f"BM_FlushX4Block/{impl}/{pop}/1"
        parts = [ctx.median(runs, name, field=f"{what}_p50_ns"),
                 ctx.median(runs, name, field=f"{what}_p99_ns")]
        if with_max:
            parts.append(ctx.median(runs, name, field=f"{what}_max_ns"))
        return "/".join(f"{p / 1e3:.0f}" for p in parts) + " us"
    records.append(ctx.gate(
        "flush.X4.critical_section", "X4 time the partition lock is held per 8 MiB block "
        "(sliced pass, 512 receipts per slice), one map", 1, pop, "staged", "serial",
        staged, serial, "ns/block", False, 0.5,
        note=(f"per block {staged/1e6:.3f} ms staged vs {serial/1e6:.3f} ms serial "
              f"(p50/p99/max {hold('staged', 'locked')} vs {hold('serial', 'locked')}); "
              f"longest hold per block p50/p99 {hold('staged', 'slice', False)} vs "
              f"{hold('serial', 'slice', False)}; longest single hold "
              f"{slice_staged/1e3:.0f} us vs {slice_serial/1e3:.0f} us")))

    runs = ctx.run_bench(BINARY, f"BM_FlushX4Sweep/.*/{pop}/1$", repetitions=3, min_time=0.2)
    sweep = {}
    for d in ("0_0", "4_2", "8_4", "16_8", "32_16", "64_32", "16_0", "0_8"):
        sweep[d] = ctx.median(runs, f"BM_FlushX4Sweep/{d}/{pop}/1")
    base = sweep["0_0"]
    ctx.progress("X4 sweep (metadata_bucket: ratio to serial): " +
                 ", ".join(f"{d} {v / base:.2f}" for d, v in sweep.items()))
    best = max(sweep, key=sweep.get)
    records[0]["note"] += ("; sweep vs serial: " +
                           ", ".join(f"{d} {_fmt(v / base)}" for d, v in sweep.items()) +
                           f" (best {best})")

    keys = 1_000_000 if ctx.full else 100_000
    runs = ctx.run_bench(BINARY, f"BM_FlushX5(Set|Get)/.*/{keys}/real_time$", repetitions=3, min_time=0.5)
    x5 = {}
    for op in ("Set", "Get"):
        for mode in ("off", "on", "watermark"):
            name = f"BM_FlushX5{op}/{mode}/{keys}/real_time"
            x5[(op, mode)] = (ctx.median(runs, name), ctx.median(runs, name, field="p99_ns"),
                              ctx.median(runs, name, field="p9999_ns"))
    share = {mode: ctx.median(runs, f"BM_FlushX5Set/{mode}/{keys}/real_time", field="pass_share")
             for mode in ("off", "on")}
    io_block = ctx.median(runs, f"BM_FlushX5Set/off/{keys}/real_time",
                          field="flush_io_ns_per_block")
    for op in ("Set", "Get"):
        off, on, wm = x5[(op, "off")], x5[(op, "on")], x5[(op, "watermark")]
        ctx.progress(f"X5 {op}: off {off[0]/1e3:.1f}k/s p99 {off[1]/1e3:.1f} us; on "
                     f"{on[0]/1e3:.1f}k/s p99 {on[1]/1e3:.1f} us; watermark {wm[0]/1e3:.1f}k/s "
                     f"p99 {wm[1]/1e3:.1f} us")
        records.append(_report(ctx.gate(
            f"flush.X5.{op.lower()}", f"X5 LogStore {op.upper()} of 1 KiB values, uniform over "
            f"{keys} keys, 8 MiB blocks, fdatasync, flush when a block is full",
            1, keys, "prefetch on", "prefetch off", on[0], off[0], "ops/s", True, 1.0,
            note=(f"on {on[0]/1e3:.1f}k ops/s, off {off[0]/1e3:.1f}k; p99 on {on[1]/1e3:.1f} us, "
                  f"off {off[1]/1e3:.1f} us; p99.99 on {on[2]/1e3:.0f} us, off {off[2]/1e3:.0f} us; "
                  f"watermark mode {wm[0]/1e3:.1f}k ops/s ({_fmt(wm[0] / off[0])} of off), "
                  f"p99 {wm[1]/1e3:.1f} us, p99.99 {wm[2]/1e3:.0f} us"
                  + (f"; receipt pass share of flush time: off {share['off']:.1%}, on "
                     f"{share['on']:.1%}; flush I/O {io_block/1e6:.1f} ms per FlushBlock"
                     if op == "Set" else "")))))
    records += tail_gates(ctx)
    records += durable_gates(ctx)
    records += buffered_gates(ctx)
    records += space_gates(ctx)
    return records


def tail_gates(ctx):
    """X5 SET tail with the flusher: SET p99.99 over SET p50 with a
    RunFlusher thread writing and syncing full blocks (host_flusher), SETs
    paced at 25k/s (25 MiB/s of 1 KiB values, under what the disk takes,
    so back-pressure is not what is measured), buffered (fdatasync per 8 MiB
    block, no per-SET durability), real file. Beside it the same ratio
    inline (the SET after a block fills writes and syncs it), and both
    unpaced (as fast as the writer goes: the disk's pace, back-pressure
    included), reported in the note. Quick mode 100k keys, --full 1M."""
    keys = 1_000_000 if ctx.full else 100_000
    rate = 25000
    runs = ctx.run_bench(BINARY, f"BM_FlushX5SetTail/(flusher|inline)/{keys}/{rate}/real_time$",
                         repetitions=5, min_time=4.0)
    name = lambda mode, r=rate: f"BM_FlushX5SetTail/{mode}/{keys}/{r}/real_time"
    fig = {}
    for mode in ("flusher", "inline"):
        fig[mode] = {f: ctx.median(runs, name(mode), field=f)
                     for f in ("p50_ns", "p99_ns", "p9999_ns", "over_1ms",
                               "backpressure_waits", "samples")}
    free = ctx.run_bench(BINARY, f"BM_FlushX5SetTail/(flusher|inline)/{keys}/0/real_time$",
                         repetitions=3, min_time=1.0)
    unpaced = {}
    for mode in ("flusher", "inline"):
        unpaced[mode] = {f: ctx.median(free, name(mode, 0), field=f)
                         for f in ("p50_ns", "p9999_ns", "over_1ms", "backpressure_waits",
                                   "items_per_second")}
    f, i = fig["flusher"], fig["inline"]
    # The gate's own medians, last, so that gate() pairs their repetitions.
    p9999 = ctx.median(runs, name("flusher"), field="p9999_ns")
    p50 = ctx.median(runs, name("flusher"), field="p50_ns")
    ctx.progress(f"X5 SET tail at {rate}/s: flusher p50 {f['p50_ns']:.0f} ns p99.99 "
                 f"{f['p9999_ns']/1e3:.1f} us; inline p50 {i['p50_ns']:.0f} ns p99.99 "
                 f"{i['p9999_ns']/1e6:.1f} ms")
    uf, ui = unpaced["flusher"], unpaced["inline"]
    return [ctx.gate(
        "flush.X5.set_p9999", f"X5 LogStore SET p99.99 / SET p50 with a flusher thread "
        f"(host_flusher, RunFlusher), 1 KiB values uniform over {keys} keys, SETs paced at "
        f"{rate}/s, 8 MiB blocks, fdatasync per block (buffered: no per-SET durability), "
        f"real file", 1, keys, "SET p99.99 (flusher)", "SET p50 (flusher)", p9999, p50, "ns",
        False, 50,
        note=(f"flusher: p50 {f['p50_ns']:.0f} ns, p99 {f['p99_ns']/1e3:.1f} us, p99.99 "
              f"{f['p9999_ns']/1e3:.1f} us, {f['over_1ms']:.0f} SETs over 1 ms and "
              f"{f['backpressure_waits']:.0f} back-pressure waits in {f['samples']:.0f}; "
              f"inline: p50 {i['p50_ns']:.0f} ns, p99.99 {i['p9999_ns']/1e6:.2f} ms, ratio "
              f"{_fmt(i['p9999_ns'] / i['p50_ns'])}, {i['over_1ms']:.0f} SETs over 1 ms; "
              f"unpaced (the disk's pace): flusher {uf['items_per_second']/1e3:.0f}k SET/s, "
              f"p99.99 {uf['p9999_ns']/1e6:.2f} ms, ratio {_fmt(uf['p9999_ns'] / uf['p50_ns'])}, "
              f"{uf['backpressure_waits']:.0f} waits, {uf['over_1ms']:.0f} over 1 ms; inline "
              f"{ui['items_per_second']/1e3:.0f}k SET/s, p99.99 {ui['p9999_ns']/1e6:.2f} ms, "
              f"ratio {_fmt(ui['p9999_ns'] / ui['p50_ns'])}, {ui['over_1ms']:.0f} over 1 ms"
              + ("" if ctx.full else "; quick mode: 100k keys, --full runs 1M")),
        extra={"inline_ratio": round(i["p9999_ns"] / i["p50_ns"], 1),
               "unpaced_flusher_ratio": round(uf["p9999_ns"] / uf["p50_ns"], 1),
               "unpaced_inline_ratio": round(ui["p9999_ns"] / ui["p50_ns"], 1)})]


SPACE_BINARY = "cairn_flush_space_benchmark"


def space_gates(ctx):
    """X5 space amplification: the log file's bytes over the live bytes
    after 10 passes of uniform overwrite (1 KiB values, 16-byte keys) with
    the host compacting (every 256 SETs, the emptiest block if at most 90%
    live) while the blocks in use take over 1.2x the live bytes.
    Quick mode 100k keys (about 100 MiB live, 1 GiB written), --full 1M.
    One run: the figure is a size, not a timing."""
    keys = 1_000_000 if ctx.full else 100_000
    gid = "flush.X5.space_amp"
    workload = (f"X5 LogStore file bytes / live bytes after 10 passes of uniform "
                f"overwrite of {keys} keys (1 KiB values), Compact every 256 SETs while "
                f"the blocks in use take over 1.2x live (the emptiest block, if <= 90% "
                f"live), 8 MiB blocks, no fdatasync")
    if not (ctx.bench_dir / SPACE_BINARY).exists():
        return [ctx.skipped(gid, workload, f"bench binary {SPACE_BINARY} is missing")]
    runs = ctx.run_bench(SPACE_BINARY, f"BM_FlushX5SpaceAmp/{keys}/",
                         repetitions=1, min_time=0.01, interleave=False)
    name = f"BM_FlushX5SpaceAmp/{keys}/iterations:1/real_time"
    field = lambda f: ctx.median(runs, name, field=f)
    file_mib, live_mib = field("file_mib"), field("live_mib")
    ctx.progress(f"X5 space: file {file_mib:.1f} MiB, live {live_mib:.1f} MiB, "
                 f"amp {file_mib / live_mib:.3f}, write amp {field('write_amp'):.2f}")
    return [ctx.gate(
        gid, workload, 1, keys, "file bytes", "live bytes", file_mib, live_mib, "MiB",
        False, 1.5,
        note=(f"file {file_mib:.1f} MiB over live {live_mib:.1f} MiB; write amplification "
              f"{field('write_amp'):.2f} (flushed bytes / appended record bytes), "
              f"{field('relocated_mib'):.0f} MiB relocated, {field('blocks_freed'):.0f} blocks "
              f"freed in {field('compact_calls'):.0f} calls, {field('slots'):.0f} slots; "
              f"throughput "
              f"{field('items_per_second')/1e3:.0f}k SETs/s with compaction"
              + ("" if ctx.full else "; quick mode: 100k keys, --full runs 1M")))]


def durable_gates(ctx):
    """X5 durable SETs: LogStore SetDurable (group commit) against RocksDB and
    LevelDB Put with WriteOptions::sync = true, 1 and 8 writer threads, same
    keys and values, interleaved repetitions, medians; best peer = the
    faster of the two in the same run. Quick mode 100k keys loaded first,
    --full 1M."""
    keys = 1_000_000 if ctx.full else 100_000
    impls, missing = _peer_impls(ctx, DURABLE_BINARY, "BM_FlushX5Durable")
    ids = (("flush.X5.durable_set_vs_best", 8, 2.0), ("flush.X5.durable_set_1t_vs_best", 1, 1.0))
    workload = (f"X5 SETs each acknowledged durable, 1 KiB random values, 16-byte keys uniform "
                f"over {keys} loaded keys, real file; LogStore SetDurable vs Put with sync=true")
    reason = _peers_missing(impls, missing, DURABLE_BINARY)
    if reason:
        return [ctx.skipped(gid, workload, reason) for gid, _, _ in ids]
    runs = ctx.run_bench(DURABLE_BINARY,
                         f"BM_FlushX5Durable/({'|'.join(impls)})/{keys}/real_time/threads:(1|8)$",
                         repetitions=5, min_time=0.5)
    records = []
    for gid, threads, goal in ids:
        vals = {i: ctx.median(runs, f"BM_FlushX5Durable/{i}/{keys}/real_time/threads:{threads}")
                for i in impls}
        best = max(("rocksdb", "leveldb"), key=lambda p: vals[p])
        ctx.progress(f"X5 durable SET {threads} thread(s): " +
                     ", ".join(f"{i} {vals[i]/1e3:.2f}k/s" for i in impls))
        records.append(ctx.gate(
            gid, workload + f", {threads} writer thread(s)", threads, keys, "logstore",
            f"best peer ({best})", vals["logstore"], vals[best], "ops/s", True, goal,
            note=(f"LogStore {vals['logstore']/1e3:.2f}k ops/s, RocksDB "
                  f"{vals['rocksdb']/1e3:.2f}k, LevelDB {vals['leveldb']/1e3:.2f}k; "
                  f"LogStore / RocksDB {vals['logstore']/vals['rocksdb']:.2f}, "
                  f"/ LevelDB {vals['logstore']/vals['leveldb']:.2f}"
                  + ("" if ctx.full else f"; quick mode: {keys} keys, --full runs 1M"))))
    return records


def _peer_impls(ctx, binary, prefix):
    """The implementations `binary` was built with, from its benchmark list
    (logstore first), and why each peer left out is missing; (None, []) if
    the binary is missing or lists nothing."""
    path = ctx.bench_dir / binary
    if not path.exists():
        return None, []
    import subprocess
    listed = subprocess.run([str(path), "--benchmark_list_tests=true"],
                            capture_output=True, text=True).stdout
    if not listed:
        return None, []
    impls, missing = ["logstore"], []
    for peer, label, package in PEERS:
        if f"{prefix}/{peer}/" in listed:
            impls.append(peer)
        else:
            missing.append(f"{label}: {package} was not installed when the bench was configured")
    return impls, missing


def _peers_missing(impls, missing, binary):
    """Why a gate against the peers is skipped, or None if it can run."""
    if impls is None:
        return f"bench binary {binary} is missing"
    if missing:
        return "peer missing: " + "; ".join(missing)
    return None


def buffered_gates(ctx):
    """X5 buffered SETs and GETs: LogStore Set (8 MiB blocks, the SET after
    a block fills writes it and fdatasyncs: back-pressure, no per-SET
    durability) against RocksDB and LevelDB Put with WriteOptions::sync =
    false, and GETs uniform over the loaded keys; 1 and 8 threads, same keys
    and values, interleaved repetitions, medians; best peer = the faster of
    the two in the same run. SETs and GETs run in separate processes, so
    that the GETs read the stores as loaded. Beside them, LogStore's writer
    scaling: its 8-writer SET throughput over its 1-writer one (appends take
    no store-wide lock; the flushes, on the writers' threads, take the disk's
    time). Quick mode 100k keys loaded first, --full 1M."""
    keys = 1_000_000 if ctx.full else 100_000
    impls, missing = _peer_impls(ctx, BUFFERED_BINARY, "BM_FlushX5BufferedSet")
    over = f"16-byte keys uniform over {keys} loaded keys, 1 KiB random values, real file"
    set_workload = (f"X5 buffered SETs (overwrites), {over}; LogStore Set (8 MiB blocks, "
                    f"fdatasync per block by back-pressure) vs Put with sync=false, "
                    f"8 writer threads")
    get_workload = f"X5 GETs, {over}, after the load, 8 threads"
    scaling_workload = (f"X5 LogStore buffered SETs (overwrites), {over}, 8 MiB blocks, "
                        f"fdatasync per block by back-pressure; 8 writer threads / 1")
    if impls is None:
        reason = _peers_missing(impls, missing, BUFFERED_BINARY)
        return [ctx.skipped(gid, w, reason) for gid, w in
                (("flush.X5.set_vs_best", set_workload), ("flush.X5.get_vs_best", get_workload),
                 ("flush.X5.writer_scaling", scaling_workload))]
    # A gate against the best peer needs both peers; writer scaling none.
    peers = [] if missing else impls[1:]
    impls = ["logstore"] + peers
    name = lambda op, impl, t: f"BM_FlushX5Buffered{op}/{impl}/{keys}/real_time/threads:{t}"
    fig = {}
    for op in ("Set", "Get") if peers else ("Set",):
        runs = ctx.run_bench(BUFFERED_BINARY, f"BM_FlushX5Buffered{op}/({'|'.join(impls)})/"
                             f"{keys}/real_time/threads:(1|8)$", repetitions=5, min_time=0.5)
        fig[op] = {(i, t): ctx.median(runs, name(op, i, t)) for i in impls for t in (1, 8)}
        ctx.progress(f"X5 buffered {op.upper()}: " + "; ".join(
            f"{t} thread(s) " + ", ".join(f"{i} {fig[op][(i, t)]/1e3:.0f}k/s" for i in impls)
            for t in (1, 8)))
        if op == "Set":
            share = ctx.median(runs, name(op, "logstore", 8), field="flush_io_share")
            share_1t = ctx.median(runs, name(op, "logstore", 1), field="flush_io_share")
            syncs = ctx.median(runs, name(op, "logstore", 8), field="syncs_per_block")
    label = {"logstore": "LogStore", "rocksdb": "RocksDB", "leveldb": "LevelDB"}
    best = lambda op, t: max(peers, key=lambda p: fig[op][(p, t)])

    def line(op, t):
        """Every store's figure at t threads, and LogStore over each peer."""
        v = fig[op]
        return (f"{t} thread(s) " + ", ".join(f"{label[i]} {v[(i, t)]/1e3:.0f}k"
                                              for i in impls) + " ops/s"
                + "".join(f", LogStore / {label[p]} {_fmt(v[('logstore', t)] / v[(p, t)])}"
                          for p in peers))

    quick = "" if ctx.full else f"; quick mode: {keys} keys, --full runs 1M"
    ratios_1t = {}
    if peers:
        ratios_1t = {f"{op.lower()}_1t_vs_best":
                     round(fig[op][("logstore", 1)] / fig[op][(best(op, 1), 1)], 3)
                     for op in ("Set", "Get")}
    one_thread = "".join(f"; 1-thread {k[:3].upper()} / best peer {v:.2f}"
                         for k, v in ratios_1t.items())
    scaling = ", ".join(f"{label[i]} {_fmt(fig['Set'][(i, 8)] / fig['Set'][(i, 1)])}"
                        for i in impls)
    io = (f"LogStore flush I/O (write + fdatasync, on the writers' threads) "
          f"{share_1t:.0%} of wall time at 1 writer, {share:.0%} at 8; "
          f"{syncs:.2f} syncs per block at 8")
    records = []
    if peers:
        for gid, op, goal, workload in (("flush.X5.set_vs_best", "Set", 5.0, set_workload),
                                        ("flush.X5.get_vs_best", "Get", 4.0, get_workload)):
            b = best(op, 8)
            records.append(ctx.gate(
                gid, workload, 8, keys, "logstore", f"best peer ({b})", fig[op][("logstore", 8)],
                fig[op][(b, 8)], "ops/s", True, goal,
                note=(line(op, 8) + "; " + line(op, 1) + one_thread
                      + (f"; 8/1 writer scaling: {scaling}; {io}" if op == "Set" else "")
                      + quick),
                extra=ratios_1t))
    else:
        reason = _peers_missing(impls, missing, BUFFERED_BINARY)
        records += [ctx.skipped("flush.X5.set_vs_best", set_workload, reason),
                    ctx.skipped("flush.X5.get_vs_best", get_workload, reason)]
    records.append(ctx.gate(
        "flush.X5.writer_scaling", scaling_workload, 8, keys, "logstore, 8 writers",
        "logstore, 1 writer", fig["Set"][("logstore", 8)], fig["Set"][("logstore", 1)],
        "ops/s", True, 1.6,
        note=(f"8/1 writer scaling: {scaling}; {io}; "
              + line("Set", 8) + "; " + line("Set", 1) + one_thread + quick),
        extra=ratios_1t or None))
    return records
