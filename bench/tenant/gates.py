"""Tenant gates: W7 eviction vs foreground p99, T1 multi-tenant point reads."""

BINARY = "cairn_tenant_benchmark"


def run(ctx):
    records = []
    population = 1_000_000 if ctx.full else 100_000
    tenants = 1000 if ctx.full else 100
    suffix = f"/{population}/real_time"
    runs = ctx.run_bench(BINARY, f"BM_DirectoryW7/.*{suffix}$", repetitions=3,
                         min_time=0.5)
    quiet = ctx.median(runs, f"BM_DirectoryW7/quiet{suffix}", "p99_us")
    evicting = ctx.median(runs, f"BM_DirectoryW7/evicting{suffix}", "p99_us")
    fg_quiet = ctx.median(runs, f"BM_DirectoryW7/quiet{suffix}")
    fg_evicting = ctx.median(runs, f"BM_DirectoryW7/evicting{suffix}")
    census = ctx.median(runs, f"BM_DirectoryW7/evicting{suffix}",
                        "census_cpu_ms_per_1M")
    records.append(ctx.gate(
        "directory.W7.fg_p99",
        "W2 batches (32 keys, R/W 1:1) on one thread while another runs "
        "eviction cycles (census, rank, evict 64, re-create)", 2, population,
        "evicting", "quiet", evicting, quiet, "batch p99 us",
        higher_is_better=False, goal_value=1.5,
        criterion="report (RFC: no correctness regression)",
        note=(f"foreground {fg_evicting / 1e3:.0f}k vs {fg_quiet / 1e3:.0f}k "
              f"key ops/s; census CPU {census:.0f} ms per 1M objects")))
    t_suffix = f"/{tenants}/real_time"
    runs = ctx.run_bench(BINARY, f"BM_DirectoryT1/.*{t_suffix}$", repetitions=5,
                         min_time=0.3)
    multi = ctx.median(runs, f"BM_DirectoryT1/multi{t_suffix}")
    single = ctx.median(runs, f"BM_DirectoryT1/single{t_suffix}")
    empty = ctx.median(runs, f"BM_DirectoryT1/multi{t_suffix}",
                       "bytes_per_empty_tenant")
    records.append(ctx.gate(
        "directory.T1.multi_tenant",
        f"point reads alternating over {tenants} tenants x 1,000 objects vs one "
        "tenant holding them all (registry lookup + WithObject)", 1,
        tenants * 1000, "multi", "single", multi, single, "reads/s",
        higher_is_better=True, goal_value=0.8, criterion=None,
        note=f"bytes per empty tenant (1,024 route buckets): {empty:.0f}"))
    return records
