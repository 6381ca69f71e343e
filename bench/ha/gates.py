# SPDX-License-Identifier: Apache-2.0
"""ha figures: FileDurableLog group commit and registry snapshots.

Reported, not gated (docs/durable_log.md, docs/snapshot.md): each record
carries the verdict `report` and a reference of 1.0. Quick mode snapshots
100k objects over 1,000 tenants; --full 1M.
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
    return records
