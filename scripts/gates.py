#!/usr/bin/env python3
"""cairn's A/B gate runner.

Imports every bench/<component>/gates.py, calls its run(ctx), and writes the
records to build/gates/gates.json and the tables to build/gates/gates.md.
Every deciding figure is a ratio of candidate and baseline measured side by
side in one benchmark invocation (random interleaving, repetitions, medians).
A failing gate is printed as failing; a gate that cannot run is `skipped`.

Usage: scripts/gates.py [--full] [--only COMPONENT ...] [--strict]
"""

import argparse
import importlib.util
import json
import os
import pathlib
import statistics
import subprocess
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent


class Context:
    """What a component's gates.py gets: bench runner, medians, records."""

    def __init__(self, bench_dir, out_dir, full):
        self.bench_dir = pathlib.Path(bench_dir)
        self.out_dir = pathlib.Path(out_dir)
        self.full = full

    def progress(self, message):
        print(f"[gates {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)

    def run_bench(self, binary, filter_regex, repetitions=5, min_time=0.3,
                  extra_args=(), env=None):
        """Runs one Google Benchmark binary; returns its per-repetition runs."""
        path = self.bench_dir / binary
        if not path.exists():
            raise FileNotFoundError(f"bench binary {path} is missing")
        cmd = [str(path), f"--benchmark_filter={filter_regex}",
               "--benchmark_format=json",
               f"--benchmark_repetitions={repetitions}",
               "--benchmark_enable_random_interleaving=true",
               f"--benchmark_min_time={min_time}", *extra_args]
        run_env = dict(os.environ)
        run_env.update(env or {})
        self.progress(f"{binary} {filter_regex} x{repetitions}")
        done = subprocess.run(cmd, capture_output=True, text=True, env=run_env)
        if done.returncode != 0:
            raise RuntimeError(f"{binary} failed ({done.returncode}): {done.stderr[-2000:]}")
        data = json.loads(done.stdout)
        return [b for b in data["benchmarks"] if b.get("run_type", "iteration") == "iteration"
                and not b.get("error_occurred")]

    @staticmethod
    def median(runs, name, field="items_per_second"):
        values = [b[field] for b in runs if b.get("run_name") == name and field in b]
        if not values:
            names = sorted({b.get("run_name") for b in runs})
            raise KeyError(f"no repetition of {name!r} has {field!r}; have {names}")
        return statistics.median(values)

    @staticmethod
    def gate(id, workload, threads, population, candidate, baseline,
             candidate_value, baseline_value, unit, higher_is_better,
             goal_value, criterion=None, note=None):
        ratio = candidate_value / baseline_value if baseline_value else float("inf")
        passed = ratio >= goal_value if higher_is_better else ratio <= goal_value
        record = {
            "id": id, "workload": workload, "threads": threads,
            "population": population, "candidate": candidate,
            "baseline": baseline, "candidate_value": candidate_value,
            "baseline_value": baseline_value, "unit": unit,
            "ratio": round(ratio, 4), "higher_is_better": higher_is_better,
            "criterion": criterion,
            "goal": f"{'>=' if higher_is_better else '<='} {goal_value}",
            "verdict": "pass" if passed else "fail",
        }
        if note:
            record["note"] = note
        return record

    @staticmethod
    def skipped(id, workload, reason):
        return {"id": id, "workload": workload, "threads": None,
                "population": None, "candidate": None, "baseline": None,
                "candidate_value": None, "baseline_value": None, "unit": None,
                "ratio": None, "higher_is_better": None, "criterion": None,
                "goal": None, "verdict": "skipped", "note": reason}


def load_components(only):
    for gates_py in sorted(ROOT.glob("bench/*/gates.py")):
        component = gates_py.parent.name
        if only and component not in only:
            continue
        spec = importlib.util.spec_from_file_location(f"cairn_gates_{component}", gates_py)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        yield component, module


def fmt(value):
    if value is None:
        return "-"
    if isinstance(value, float):
        if value == 0 or 0.01 <= abs(value) < 1e6:
            return f"{value:.3g}" if abs(value) < 100 else f"{value:,.0f}"
        return f"{value:.3e}"
    return str(value)


def bar(ratio, goal, width=30):
    if ratio is None:
        return ""
    scale = max(ratio, goal, 1.0) * 1.1
    n = max(1, round(width * ratio / scale))
    return "█" * n


def render(records_by_component, full):
    lines = ["# cairn gates", "",
             f"Size: {'full' if full else 'quick'}. Ratios are candidate / baseline "
             "medians from one interleaved run; see docs/ for the workloads.", ""]
    console = []
    for component, records in records_by_component.items():
        lines += [f"## {component}", "",
                  "| gate | workload | threads | population | candidate | baseline | "
                  "candidate value | baseline value | unit | ratio | goal | RFC criterion | verdict |",
                  "|---|---|---:|---:|---|---|---:|---:|---|---:|---|---|---|"]
        for r in records:
            verdict = r["verdict"].upper() if r["verdict"] != "pass" else "pass"
            lines.append("| " + " | ".join([
                f"`{r['id']}`", r["workload"], fmt(r["threads"]), fmt(r["population"]),
                fmt(r["candidate"]), fmt(r["baseline"]), fmt(r["candidate_value"]),
                fmt(r["baseline_value"]), fmt(r["unit"]), fmt(r["ratio"]),
                fmt(r["goal"]), fmt(r["criterion"]), verdict]) + " |")
            console.append(f"{r['id']:<32} {fmt(r['ratio']):>8}  goal {fmt(r['goal']):<8} "
                           f"{verdict:<8} {r.get('note', '')}")
        notes = [r for r in records if r.get("note")]
        if notes:
            lines.append("")
            lines += [f"- `{r['id']}`: {r['note']}" for r in notes]
        lines += ["", "```text", "ratio (candidate / baseline)"]
        for r in records:
            if r["ratio"] is not None:
                goal = float(r["goal"].split()[1])
                lines.append(f"{r['id']:<30} {r['ratio']:>7.3f} {bar(r['ratio'], goal)}")
        lines += ["```", ""]
        if (pathlib.Path(os.environ.get("CAIRN_GATES_OUT", "")) / f"{component}.png").exists():
            lines += [f"![{component}]({component}.png)", ""]
    return "\n".join(lines) + "\n", console


def plot(out_dir, component, records):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return
    rows = [r for r in records if r["ratio"] is not None]
    if not rows:
        return
    fig, ax = plt.subplots(figsize=(8, 0.5 + 0.45 * len(rows)))
    colors = ["tab:green" if r["verdict"] == "pass" else "tab:red" for r in rows]
    ax.barh([r["id"] for r in rows], [r["ratio"] for r in rows], color=colors)
    for i, r in enumerate(rows):
        ax.plot([float(r["goal"].split()[1])] * 2, [i - 0.4, i + 0.4], "k--")
    ax.invert_yaxis()
    ax.set_xlabel("ratio (candidate / baseline); dashed: goal")
    ax.set_title(f"cairn {component} gates")
    fig.tight_layout()
    fig.savefig(out_dir / f"{component}.png", dpi=100)
    plt.close(fig)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--full", action="store_true", help="large populations")
    parser.add_argument("--only", nargs="*", help="components to run")
    parser.add_argument("--strict", action="store_true", help="exit 1 if a gate fails")
    parser.add_argument("--bench-dir", default=str(ROOT / "build/bench/bench"))
    parser.add_argument("--out", default=str(ROOT / "build/gates"))
    args = parser.parse_args()
    out_dir = pathlib.Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    os.environ["CAIRN_GATES_OUT"] = str(out_dir)
    ctx = Context(args.bench_dir, out_dir, args.full)

    by_component = {}
    for component, module in load_components(args.only):
        ctx.progress(f"component {component}")
        try:
            records = module.run(ctx)
        except Exception as error:  # a broken bench must not hide the others
            records = [ctx.skipped(f"{component}.*", "-", f"gate module failed: {error}")]
        by_component[component] = records
        plot(out_dir, component, records)

    all_records = [r for records in by_component.values() for r in records]
    (out_dir / "gates.json").write_text(json.dumps(all_records, indent=2) + "\n")
    markdown, console = render(by_component, args.full)
    (out_dir / "gates.md").write_text(markdown)
    print("\n".join(console))
    failed = [r["id"] for r in all_records if r["verdict"] == "fail"]
    print(f"\n{len(all_records)} gates: {len(all_records) - len(failed)} not failing, "
          f"{len(failed)} failing{': ' + ', '.join(failed) if failed else ''}")
    print(f"wrote {out_dir / 'gates.json'} and {out_dir / 'gates.md'}")
    return 1 if (args.strict and failed) else 0


if __name__ == "__main__":
    sys.exit(main())
