"""Route gates: W1 point reads, W2 batch R/W 1:1, W3 forced collision."""

BINARY = "cairn_route_benchmark"
THREADS = 2


def run(ctx):
    population = 1_000_000
    suffix = f"/{population}/real_time/threads:{THREADS}"
    runs = ctx.run_bench(BINARY, f"BM_RouteW[123]/.*{suffix}$", repetitions=5,
                         min_time=0.3)
    names = {r["run_name"] for r in runs}

    def rate(workload, impl):
        return ctx.median(runs, f"BM_Route{workload}/{impl}{suffix}")

    def have(workload, impl):
        return f"BM_Route{workload}/{impl}{suffix}" in names

    def extra(workload):
        parts = []
        for impl in ("owning", "epoch_unstaged"):
            if have(workload, impl):
                parts.append(f"{impl} {rate(workload, impl) / 1e6:.2f} M key ops/s")
        return ", ".join(parts) or None

    records = []
    w1_epoch, w1_shard = rate("W1", "epoch"), rate("W1", "shard")
    records.append(ctx.gate(
        "route.W1.point_read", "W1 point reads, 64-byte keys", THREADS, population,
        "epoch", "shard", w1_epoch, w1_shard, "key ops/s", higher_is_better=True,
        goal_value=1.2, criterion=">= 0.80 (RFC)", note=extra("W1")))
    w2_epoch, w2_shard = rate("W2", "epoch"), rate("W2", "shard")
    records.append(ctx.gate(
        "route.W2.batch_rw", "W2 batch R/W 1:1, 32 keys", THREADS, population,
        "epoch", "shard", w2_epoch, w2_shard, "key ops/s", higher_is_better=True,
        goal_value=2.0, criterion=">= 1.20 (RFC)", note=extra("W2")))
    w3_epoch, w3_shard = rate("W3", "epoch"), rate("W3", "shard")
    records.append(ctx.gate(
        "route.W3.collision", "W3 W2 with every key in one shard/bucket/stripe",
        THREADS, population, "epoch", "shard", w3_epoch, w3_shard, "key ops/s",
        higher_is_better=True, goal_value=1.0, criterion="report", note=extra("W3")))
    records.append(ctx.gate(
        "route.W3.immunity", "epoch under W3 / epoch under W2", THREADS, population,
        "epoch W3", "epoch W2", w3_epoch, w2_epoch, "key ops/s",
        higher_is_better=True, goal_value=0.9, criterion="report"))
    return records
