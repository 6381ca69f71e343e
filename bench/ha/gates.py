# SPDX-License-Identifier: Apache-2.0
"""ha figures: FileDurableLog group commit, registry snapshots, replay.

Group commit and snapshots are reported, not gated (docs/durable_log.md,
docs/snapshot.md): those records carry the verdict `report` and a reference
of 1.0. Quick mode snapshots 100k objects over 1,000 tenants; --full 1M.

Replay (docs/ha.md): ha.replay.rate (records Recover applies per second /
records one primary thread logs per second, fdatasync off; goal >= 1.5),
ha.recover.time_1m (Recover from a snapshot of N objects plus an N-record
tail / building the same objects by Create; goal <= 1.0; N = 200k quick, 1M
--full) and ha.follower.lag_p99 (a standby's p99 lag in LSNs behind two
writer threads, reported).
"""

BINARY = "cairn_ha_benchmark"


def _report(record):
    record["verdict"] = "report"
    record["goal"] = "~ 1.0"
    return record


def run(ctx):
    records = []
    runs = ctx.run_bench(BINARY, "BM_HaLogRecord/128/sync/real_time/threads:(1|16)$",
                         repetitions=3, min_time=0.5)
    one = "BM_HaLogRecord/128/sync/real_time/threads:1"
    many = "BM_HaLogRecord/128/sync/real_time/threads:16"
    rate_one, rate_many = ctx.median(runs, one), ctx.median(runs, many)
    per_sync = ctx.median(runs, many, field="records_per_sync")
    records.append(_report(ctx.gate(
        "ha.log.group_commit", "FileDurableLog Reserve + Append + Finalize of "
        "128-byte records, fdatasync on: 16 writers vs 1", 16, None, "16 writers",
        "1 writer", rate_many, rate_one, "records/s", True, 1.0,
        note=(f"{rate_many / 1e3:.1f}k vs {rate_one / 1e3:.1f}k records/s; "
              f"{per_sync:.1f} records per fdatasync with 16 writers"))))

    tenants = 1000
    objects = 1_000_000 if ctx.full else 100_000
    size = f"/{tenants}/{objects}/real_time"
    runs = ctx.run_bench(BINARY, f"BM_HaSnapshot(Write|Restore){size}$",
                         repetitions=3, min_time=0.1,
                         extra_args=(f"--tenants={tenants}", f"--objects={objects}"))
    write = ctx.median(runs, f"BM_HaSnapshotWrite{size}")
    restore = ctx.median(runs, f"BM_HaSnapshotRestore{size}")
    file_mb = ctx.median(runs, f"BM_HaSnapshotWrite{size}", field="file_mb")
    records.append(_report(ctx.gate(
        "ha.snapshot", f"registry snapshot of {objects} objects over {tenants} "
        "tenants (30% in groups of 3, 32-byte payloads, sync on): restore vs "
        "write", 1, objects, "restore", "write", restore, write, "objects/s",
        True, 1.0,
        note=(f"write {objects / write * 1e3:.0f} ms, restore "
              f"{objects / restore * 1e3:.0f} ms, {file_mb:.1f} MB file"))))
    records += _replay(ctx)
    return records


def _replay(ctx):
    records = []
    n = 1_000_000 if ctx.full else 200_000
    name = f"BM_HaReplay/{n}/iterations:1/real_time"
    runs = ctx.run_bench(BINARY, f"BM_HaReplay/{n}/", repetitions=3)
    replay = ctx.median(runs, name, field="replay_rate")
    append = ctx.median(runs, name, field="append_rate")
    records.append(ctx.gate(
        "ha.replay.rate", f"{n} logged mutations (60% create, 20% upsert with "
        "a 32-byte payload, 20% erase): records/s Recover applies vs records/s "
        "one primary thread logs (fdatasync off)", 1, n, "replay", "primary",
        replay, append, "records/s", True, 1.5,
        note=f"replay {replay / 1e3:.0f}k/s, primary {append / 1e3:.0f}k/s"))

    name = f"BM_HaRecover/{n}/iterations:1/real_time"
    runs = ctx.run_bench(BINARY, f"BM_HaRecover/{n}/", repetitions=3)
    recover = ctx.median(runs, name, field="recover_s")
    create = ctx.median(runs, name, field="create_s")
    records.append(ctx.gate(
        "ha.recover.time_1m", f"Recover from a snapshot of {n} objects and a "
        f"{n}-record log tail vs building the same {n * 3 // 2} objects by "
        "Create", 1, n, "recover", "create", recover, create, "s", False, 1.0,
        note=f"recover {recover:.2f} s, create {create:.2f} s"))

    name = "BM_HaFollowerLag/2/iterations:1/real_time"
    runs = ctx.run_bench(BINARY, "BM_HaFollowerLag/2/", repetitions=3)
    p99 = ctx.median(runs, name, field="lag_p99")
    p50 = ctx.median(runs, name, field="lag_p50")
    logged = ctx.median(runs, name, field="records")
    record = ctx.gate(
        "ha.follower.lag_p99", "a Standby polling behind 2 writer threads "
        "(fdatasync off) for 2 s: p99 lag in LSNs vs p50", 2, None, "p99",
        "p50", max(p99, 1.0), max(p50, 1.0), "LSNs", False, 1.0,
        note=f"lag p50 {p50:.0f}, p99 {p99:.0f} LSNs; {logged / 2:.0f} "
             "records/s logged")
    record["verdict"] = "report"
    record["goal"] = "reported"
    records.append(record)
    return records
