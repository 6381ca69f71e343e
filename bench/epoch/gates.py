# SPDX-License-Identifier: Apache-2.0
"""Epoch gates: guard scaling, retire scaling, guard cost vs urcu-memb, W9 bounded memory."""

import json

BINARY = "cairn_epoch_benchmark"


def plot_w9(out_dir, cap):
    """W9's retired bytes over time, against the cap (when matplotlib is here)."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    trace = json.loads((out_dir / "w9_trace.json").read_text())
    fig, ax = plt.subplots(figsize=(8, 3))
    ax.plot([t for t, _ in trace], [b / 2**20 for _, b in trace], label="retired")
    ax.axhline(cap / 2**20, color="k", linestyle="--", label="hard cap")
    ax.set_xlabel("seconds (reader stalled until the last point)")
    ax.set_ylabel("MiB")
    ax.set_title("W9: retired bytes while one guard is held")
    ax.legend(loc="lower right")
    fig.tight_layout()
    fig.savefig(out_dir / "w9_retired_bytes.png", dpi=100)
    plt.close(fig)
    return True


def run(ctx):
    records = []
    runs = ctx.run_bench(BINARY, "BM_EpochGuard/", repetitions=7, min_time=0.2)
    one = ctx.median(runs, "BM_EpochGuard/cairn_seq_cst/real_time/threads:1")
    two = ctx.median(runs, "BM_EpochGuard/cairn_seq_cst/real_time/threads:2")
    records.append(ctx.gate(
        "epoch.guard.scaling_2t", "guard enter+leave, seq_cst mode", 2, None,
        "cairn 2 threads", "cairn 1 thread", two, one, "guards/s",
        higher_is_better=True, goal_value=1.7))

    retire = ctx.run_bench(BINARY, "BM_EpochRetire/", repetitions=7, min_time=0.2)
    name = "BM_EpochRetire/cairn_seq_cst/real_time/threads:{}"
    retire_1 = ctx.median(retire, name.format(1))
    retire_2 = ctx.median(retire, name.format(2))
    retire_8 = ctx.median(retire, name.format(8))
    records.append(ctx.gate(
        "epoch.retire.scaling_2t",
        "Retire of a 64-byte node into one shared domain, amortised reclaim included",
        2, None, "cairn 2 threads", "cairn 1 thread", retire_2, retire_1, "retires/s",
        higher_is_better=True, goal_value=1.8,
        note=(f"1 thread {retire_1 / 1e6:.1f} M/s, 2 threads {retire_2 / 1e6:.1f} M/s, "
              f"8 threads {retire_8 / 1e6:.1f} M/s")))
    records.append(ctx.gate(
        "epoch.retire.scaling_8t",
        "Retire of a 64-byte node into one shared domain, 8 threads on the machine's cores",
        8, None, "cairn 8 threads", "cairn 1 thread", retire_8, retire_1, "retires/s",
        higher_is_better=True, goal_value=1.5))

    have_urcu = any(r["run_name"].startswith("BM_EpochGuard/urcu_memb") for r in runs)
    if have_urcu:
        cairn_ns = ctx.median(runs, "BM_EpochGuard/cairn_asymmetric/real_time/threads:1",
                              "real_time")
        urcu_ns = ctx.median(runs, "BM_EpochGuard/urcu_memb/real_time/threads:1",
                             "real_time")
        seq_ns = ctx.median(runs, "BM_EpochGuard/cairn_seq_cst/real_time/threads:1",
                            "real_time")
        qsbr_ns = ctx.median(runs, "BM_EpochGuard/urcu_qsbr/real_time/threads:1",
                             "real_time")
        records.append(ctx.gate(
            "epoch.guard.vs_urcu_memb", "guard enter+leave, 1 thread", 1, None,
            "cairn asymmetric", "urcu-memb read lock+unlock", cairn_ns, urcu_ns, "ns",
            higher_is_better=False, goal_value=1.2,
            note=f"seq_cst mode {seq_ns:.2f} ns, urcu-qsbr {qsbr_ns:.2f} ns"))
    else:
        records.append(ctx.skipped("epoch.guard.vs_urcu_memb", "guard enter+leave",
                                   "liburcu-dev not installed"))

    seconds = "5" if ctx.full else "1.5"
    w9 = ctx.run_bench(BINARY, "BM_EpochW9/", repetitions=1, min_time=0.01,
                       env={"CAIRN_W9_SECONDS": seconds,
                            "CAIRN_BENCH_TRACE_DIR": str(ctx.out_dir)})
    name = "BM_EpochW9/stalled_reader/iterations:1/real_time"
    peak = ctx.median(w9, name, "peak_retired_bytes")
    cap = ctx.median(w9, name, "cap_bytes")
    busy = ctx.median(w9, name, "busy_count")
    stalls = ctx.median(w9, name, "stall_reports")
    after = ctx.median(w9, name, "retired_bytes_after_release")
    chart = "w9_retired_bytes.png" if plot_w9(ctx.out_dir, cap) else "w9_trace.json"
    records.append(ctx.gate(
        "epoch.stall.bounded", f"W9 stalled reader {seconds} s, 4 KiB every 20 us", 2, None,
        "peak retired bytes", "hard cap", peak, cap, "bytes",
        higher_is_better=False, goal_value=1.0,
        note=(f"busy (refused) retires {busy:.0f}, stall reports {stalls:.0f}, "
              f"retired bytes after the reader left {after:.0f}; "
              f"retired bytes over time: {chart}")))
    return records
