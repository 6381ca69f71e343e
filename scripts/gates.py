#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""cairn's A/B gate runner.

Imports every bench/<component>/gates.py, calls its run(ctx), and writes the
records to build/gates/gates.json and the tables to build/gates/gates.md,
together with a record of the machine (CPU model, cores, a calibration of
dependent-load latency and independent-load throughput over 512 MiB).
Every deciding figure is a ratio of candidate and baseline measured side by
side in one benchmark invocation (random interleaving, repetitions, medians);
each record also carries the spread of the per-repetition ratios, which
--compare uses to tell a real change from run-to-run noise.
A failing gate is printed as failing; a gate that cannot run is `skipped`.

Usage: scripts/gates.py [--full] [--only COMPONENT ...] [--strict]
       scripts/gates.py --compare A.json B.json
       scripts/gates.py --summary RUN.json   (markdown for docs/gates.md)
"""

import argparse
import datetime
import importlib.util
import json
import os
import pathlib
import statistics
import subprocess
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent


def _quantile(sorted_values, q):
    """Linear-interpolated quantile of an already sorted list."""
    if not sorted_values:
        return None
    pos = (len(sorted_values) - 1) * q
    lo = int(pos)
    hi = min(lo + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)


def spread_of(ratios):
    """min, quartiles and max of per-repetition ratios (None if < 2)."""
    if len(ratios) < 2:
        return None
    s = sorted(ratios)
    return {"n": len(s), "min": round(s[0], 4), "q1": round(_quantile(s, 0.25), 4),
            "median": round(_quantile(s, 0.5), 4), "q3": round(_quantile(s, 0.75), 4),
            "max": round(s[-1], 4)}


class Context:
    """What a component's gates.py gets: bench runner, medians, records."""

    def __init__(self, bench_dir, out_dir, full):
        self.bench_dir = pathlib.Path(bench_dir)
        self.out_dir = pathlib.Path(out_dir)
        self.full = full
        # median value -> the repetition values it was taken from, so gate()
        # can record the spread of the per-repetition ratios without every
        # module passing the samples along.
        self._samples = {}

    def progress(self, message):
        print(f"[gates {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)

    def run_bench(self, binary, filter_regex, repetitions=5, min_time=0.3,
                  extra_args=(), env=None, interleave=True):
        """Runs one Google Benchmark binary; returns its per-repetition runs.

        The binary's stderr (population and warm-up progress) is passed
        through line by line as it is written.
        """
        path = self.bench_dir / binary
        if not path.exists():
            raise FileNotFoundError(f"bench binary {path} is missing")
        cmd = [str(path), f"--benchmark_filter={filter_regex}",
               "--benchmark_format=json",
               f"--benchmark_repetitions={repetitions}",
               f"--benchmark_enable_random_interleaving={'true' if interleave else 'false'}",
               f"--benchmark_min_time={min_time}", *extra_args]
        run_env = dict(os.environ)
        run_env.update(env or {})
        self.progress(f"{binary} {filter_regex} x{repetitions}")
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True, env=run_env)
        tail = []
        # stdout is read after stderr ends; a full stdout pipe would block the
        # child, so JSON output goes through a reader thread.
        import threading
        out_chunks = []
        reader = threading.Thread(target=lambda: out_chunks.append(proc.stdout.read()))
        reader.start()
        for line in proc.stderr:
            tail = (tail + [line])[-40:]
            if line.startswith("[bench]") or line.startswith("[calibrate]"):
                self.progress(f"  {line.rstrip()}")
        reader.join()
        code = proc.wait()
        if code != 0:
            raise RuntimeError(f"{binary} failed ({code}): {''.join(tail)[-2000:]}")
        data = json.loads("".join(out_chunks))
        return [b for b in data["benchmarks"] if b.get("run_type", "iteration") == "iteration"
                and not b.get("error_occurred")]

    # min/quartiles/max of per-repetition ratios, for modules that pair
    # repetitions themselves.
    spread_of = staticmethod(spread_of)

    @staticmethod
    def values(runs, name, field="items_per_second"):
        """Every repetition's value of `field` for the run `name`."""
        values = [b[field] for b in runs if b.get("run_name") == name and field in b]
        if not values:
            names = sorted({b.get("run_name") for b in runs})
            raise KeyError(f"no repetition of {name!r} has {field!r}; have {names}")
        return values

    def median(self, runs, name, field="items_per_second"):
        values = self.values(runs, name, field)
        m = statistics.median(values)
        self._samples[m] = values
        return m

    def gate(self, id, workload, threads, population, candidate, baseline,
             candidate_value, baseline_value, unit, higher_is_better,
             goal_value, criterion=None, note=None, spread=None, extra=None):
        if not baseline_value or not candidate_value:
            # A side that measured nothing is a broken run, never a pass.
            ratio = float("nan")
            passed = False
            note = (note + "; " if note else "") + "a side measured 0: no ratio"
        else:
            ratio = candidate_value / baseline_value
            passed = ratio >= goal_value if higher_is_better else ratio <= goal_value
        if spread is None:
            cand = self._samples.get(candidate_value)
            base = self._samples.get(baseline_value)
            if cand and base and len(cand) == len(base) and len(cand) >= 2:
                # Repetition i of each side ran in the same interleaved run.
                spread = spread_of([c / b for c, b in zip(cand, base) if b])
        record = {
            "id": id, "workload": workload, "threads": threads,
            "population": population, "candidate": candidate,
            "baseline": baseline, "candidate_value": candidate_value,
            "baseline_value": baseline_value, "unit": unit,
            "ratio": round(ratio, 4), "higher_is_better": higher_is_better,
            "criterion": criterion,
            "goal": f"{'>=' if higher_is_better else '<='} {goal_value}",
            "verdict": "pass" if passed else "fail",
            "spread": spread,
        }
        if note:
            record["note"] = note
        if extra:
            record["extra"] = extra
        return record

    @staticmethod
    def skipped(id, workload, reason):
        return {"id": id, "workload": workload, "threads": None,
                "population": None, "candidate": None, "baseline": None,
                "candidate_value": None, "baseline_value": None, "unit": None,
                "ratio": None, "higher_is_better": None, "criterion": None,
                "goal": None, "verdict": "skipped", "spread": None, "note": reason}


def load_components(only):
    for gates_py in sorted(ROOT.glob("bench/*/gates.py")):
        component = gates_py.parent.name
        if only and component not in only:
            continue
        spec = importlib.util.spec_from_file_location(f"cairn_gates_{component}", gates_py)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        yield component, module


def git(*args):
    try:
        return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True,
                              check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None


def machine_record(ctx, seconds):
    """CPU, cores, memory calibration, load, commit: what the figures came from."""
    record = {}
    path = ctx.bench_dir / "cairn_calibrate"
    if path.exists():
        ctx.progress(f"machine calibration ({2 * seconds:g} s over 512 MiB)")
        done = subprocess.run([str(path), f"--seconds={seconds}"], capture_output=True,
                              text=True)
        if done.returncode == 0:
            record.update(json.loads(done.stdout))
        else:
            record["calibration_error"] = done.stderr[-500:]
    else:
        record["calibration_error"] = f"{path} is missing"
    record.pop("checksum", None)
    try:
        record["loadavg_at_start"] = pathlib.Path("/proc/loadavg").read_text().split()[:3]
    except OSError:
        pass
    try:
        for line in pathlib.Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                record["mem_total_kib"] = int(line.split()[1])
    except OSError:
        pass
    record["kernel"] = os.uname().release
    return record


def fmt(value):
    if value is None:
        return "-"
    if isinstance(value, float):
        if value == 0 or 0.01 <= abs(value) < 1e6:
            return f"{value:.3g}" if abs(value) < 100 else f"{value:,.0f}"
        return f"{value:.3e}"
    return str(value)


def fmt_spread(spread):
    if not spread:
        return "-"
    return f"{spread['min']:.3g}-{spread['max']:.3g} (IQR {spread['q1']:.3g}-{spread['q3']:.3g})"


def goal_value(goal):
    """The number in a goal such as '>= 1.5'; None for a reported figure."""
    try:
        return float(str(goal).split()[1])
    except (IndexError, ValueError):
        return None


def bar(ratio, goal, width=30):
    if ratio is None:
        return ""
    scale = max(ratio, goal if goal is not None else 1.0, 1.0) * 1.1
    n = max(1, round(width * ratio / scale))
    return "█" * n


def render_machine(run):
    m = run["machine"]
    lines = ["## Machine", "",
             "| field | value |", "|---|---|",
             f"| date (UTC) | {run['date']} |",
             f"| commit | `{run.get('commit') or '-'}`{' (dirty tree)' if run.get('dirty') else ''} |",
             f"| size | {'full' if run['full'] else 'quick'} |",
             f"| CPU | {m.get('cpu_model', '-')} |",
             f"| cores | {m.get('cores', '-')} |",
             f"| memory | {fmt(m.get('mem_total_kib', 0) / 2**20) if m.get('mem_total_kib') else '-'} GiB |",
             f"| kernel | {m.get('kernel', '-')} |",
             f"| load average at start | {' '.join(m.get('loadavg_at_start', [])) or '-'} |"]
    if "dependent_load_ns" in m:
        lines += [
            f"| dependent load (pointer chase, {m['buffer_mib']} MiB) | "
            f"{m['dependent_load_ns']:.1f} ns (50 ms slices {m.get('dependent_load_ns_min', 0):.0f}-"
            f"{m.get('dependent_load_ns_max', 0):.0f}) |",
            f"| independent load (random, {m['buffer_mib']} MiB) | "
            f"{m['independent_load_ns']:.1f} ns ({m['independent_loads_per_s'] / 1e6:.1f} M loads/s; "
            f"slices {m.get('independent_load_ns_min', 0):.1f}-{m.get('independent_load_ns_max', 0):.1f}) |",
            f"| memory-level parallelism (dependent / independent) | {m['mlp']:.1f}x |",
            f"| transparent huge pages | {m.get('thp', '-')} |"]
    else:
        lines.append(f"| calibration | {m.get('calibration_error', 'not run')} |")
    return lines + [""]


def render(records_by_component, run):
    lines = ["# cairn gates", "",
             f"Size: {'full' if run['full'] else 'quick'}. Ratios are candidate / baseline "
             "medians from one interleaved run; spread is the min-max (and interquartile "
             "range) of the per-repetition ratios. See docs/gates.md for the workloads.", ""]
    lines += render_machine(run)
    console = []
    for component, records in records_by_component.items():
        lines += [f"## {component}", "",
                  "| gate | workload | threads | population | candidate | baseline | "
                  "candidate value | baseline value | unit | ratio | spread | goal | "
                  "RFC criterion | verdict |",
                  "|---|---|---:|---:|---|---|---:|---:|---|---:|---|---|---|---|"]
        for r in records:
            verdict = r["verdict"].upper() if r["verdict"] != "pass" else "pass"
            lines.append("| " + " | ".join([
                f"`{r['id']}`", r["workload"], fmt(r["threads"]), fmt(r["population"]),
                fmt(r["candidate"]), fmt(r["baseline"]), fmt(r["candidate_value"]),
                fmt(r["baseline_value"]), fmt(r["unit"]), fmt(r["ratio"]),
                fmt_spread(r.get("spread")), fmt(r["goal"]), fmt(r["criterion"]),
                verdict]) + " |")
            console.append(f"{r['id']:<32} {fmt(r['ratio']):>8}  goal {fmt(r['goal']):<8} "
                           f"{verdict:<8} {r.get('note', '')}")
        notes = [r for r in records if r.get("note")]
        if notes:
            lines.append("")
            lines += [f"- `{r['id']}`: {r['note']}" for r in notes]
        tables = [t for r in records for t in (r.get("extra") or {}).get("tables", [])]
        for table in tables:
            lines += ["", f"### {table['title']}", "",
                      "| " + " | ".join(table["columns"]) + " |",
                      "|" + "---|" * len(table["columns"])]
            lines += ["| " + " | ".join(fmt(c) for c in row) + " |" for row in table["rows"]]
        lines += ["", "```text", "ratio (candidate / baseline)"]
        for r in records:
            if r["ratio"] is not None:
                goal = goal_value(r["goal"])
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
    colors = [{"pass": "tab:green", "report": "tab:gray"}.get(r["verdict"], "tab:red")
              for r in rows]
    ax.barh([r["id"] for r in rows], [r["ratio"] for r in rows], color=colors)
    for i, r in enumerate(rows):
        goal = (r.get("goal") or "").split()
        if len(goal) == 2:  # ">= 2.0"; a report-only gate has no goal line
            ax.plot([float(goal[1])] * 2, [i - 0.4, i + 0.4], "k--")
        s = r.get("spread")
        if s:
            ax.plot([s["min"], s["max"]], [i, i], "k-", linewidth=1)
    ax.invert_yaxis()
    ax.set_xlabel("ratio (candidate / baseline); dashed: goal; line: repetition spread")
    ax.set_title(f"cairn {component} gates")
    fig.tight_layout()
    fig.savefig(out_dir / f"{component}.png", dpi=100)
    plt.close(fig)


# ---- --compare -------------------------------------------------------------

def load_run(path):
    data = json.loads(pathlib.Path(path).read_text())
    if isinstance(data, list):  # runs written before the machine record
        return {"machine": {}, "gates": data}
    return data


# --compare: a ratio whose spreads do not overlap but which moved by less
# than this fraction is "same", not a change (a deterministic figure, such as
# copied bytes per publication, has a spread of one value in each run).
SAME_WITHIN = 0.01


def compare(path_a, path_b):
    """Per-gate deltas between two runs; a change is flagged when the two
    runs' per-repetition ratio ranges do not overlap (it is larger than the
    run-to-run spread either run measured) and the ratio moved by at least
    SAME_WITHIN."""
    a, b = load_run(path_a), load_run(path_b)
    lines = [f"A: {path_a} ({a.get('date', '?')}, commit {a.get('commit') or '?'})",
             f"B: {path_b} ({b.get('date', '?')}, commit {b.get('commit') or '?'})", ""]
    ma, mb = a.get("machine", {}), b.get("machine", {})
    for key, label, unit in (("cpu_model", "CPU", ""), ("cores", "cores", ""),
                             ("dependent_load_ns", "dependent load", " ns"),
                             ("independent_load_ns", "independent load", " ns")):
        va, vb = ma.get(key), mb.get(key)
        lines.append(f"{label:<18} A {fmt(va)}{unit if va is not None else ''}   "
                     f"B {fmt(vb)}{unit if vb is not None else ''}")
    lines += ["", f"{'gate':<34} {'A':>8} {'B':>8} {'delta':>8}  {'A spread':<13} "
              f"{'B spread':<13} verdict A->B  change"]
    by_a = {r["id"]: r for r in a["gates"]}
    by_b = {r["id"]: r for r in b["gates"]}
    flagged = 0
    for gid in list(by_a) + [g for g in by_b if g not in by_a]:
        ra, rb = by_a.get(gid), by_b.get(gid)
        xa = ra.get("ratio") if ra else None
        xb = rb.get("ratio") if rb else None
        va = ra["verdict"] if ra else "absent"
        vb = rb["verdict"] if rb else "absent"
        sa = ra.get("spread") if ra else None
        sb = rb.get("spread") if rb else None
        delta, change = "-", ""
        if xa is not None and xb is not None and xa != 0:
            delta = f"{100 * (xb / xa - 1):+.1f}%"
            if sa and sb:
                apart = sb["min"] > sa["max"] or sb["max"] < sa["min"]
                if apart and abs(xb / xa - 1) < SAME_WITHIN:
                    change = "same"
                elif apart:
                    hib = (ra.get("higher_is_better") if ra.get("higher_is_better") is not None
                           else True)
                    better = (xb > xa) == hib
                    change = "BETTER" if better else "WORSE"
                    flagged += 1
                else:
                    change = "within spread"
            else:
                change = "no spread recorded"
        fs = lambda s: f"{s['min']:.3g}-{s['max']:.3g}" if s else "-"
        lines.append(f"{gid:<34} {fmt(xa):>8} {fmt(xb):>8} {delta:>8}  {fs(sa):<13} "
                     f"{fs(sb):<13} {va}->{vb}  {change}")
    lines += ["", f"{flagged} gate(s) changed by more than the run-to-run spread "
              f"and {SAME_WITHIN:.0%}"]
    return "\n".join(lines)


def summary(path):
    """Markdown for docs/gates.md: the machine, every gate, the detail tables."""
    run = load_run(path)
    m = run.get("machine", {})
    lines = [f"Run of {run.get('date', '?')} at commit `{run.get('commit') or '?'}`"
             f"{' (dirty tree)' if run.get('dirty') else ''}, "
             f"{'full' if run.get('full') else 'quick'} size, {run.get('seconds', 0):.0f} s. "
             f"Machine: {m.get('cpu_model', '?')}, {m.get('cores', '?')} cores, load average "
             f"{' '.join(m.get('loadavg_at_start', [])) or '?'} at the start"]
    if "dependent_load_ns" in m:
        lines[-1] += (f"; dependent load {m['dependent_load_ns']:.0f} ns (slices "
                      f"{m.get('dependent_load_ns_min', 0):.0f}-{m.get('dependent_load_ns_max', 0):.0f}), "
                      f"independent load {m['independent_load_ns']:.1f} ns over 512 MiB.")
    lines += ["", "| gate | threads | candidate | baseline | ratio | spread | goal | verdict |",
              "|---|---:|---|---|---:|---|---|---|"]
    for r in run["gates"]:
        lines.append("| " + " | ".join([
            f"`{r['id']}`", fmt(r["threads"]),
            f"{fmt(r['candidate'])} {fmt(r['candidate_value'])}",
            f"{fmt(r['baseline'])} {fmt(r['baseline_value'])}", fmt(r["ratio"]),
            fmt_spread(r.get("spread")), fmt(r["goal"]),
            r["verdict"] if r["verdict"] == "pass" else r["verdict"].upper()]) + " |")
    notes = [r for r in run["gates"] if r.get("note")]
    if notes:
        lines.append("")
        lines += [f"- `{r['id']}`: {r['note']}" for r in notes]
    for r in run["gates"]:
        for table in (r.get("extra") or {}).get("tables", []):
            lines += ["", f"**{table['title']}**", "",
                      "| " + " | ".join(table["columns"]) + " |",
                      "|" + "---|" * len(table["columns"])]
            lines += ["| " + " | ".join(fmt(c) for c in row) + " |" for row in table["rows"]]
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--full", action="store_true", help="large populations")
    parser.add_argument("--only", nargs="*", help="components to run")
    parser.add_argument("--strict", action="store_true", help="exit 1 if a gate fails")
    parser.add_argument("--bench-dir", default=str(ROOT / "build/bench/bench"))
    parser.add_argument("--out", default=str(ROOT / "build/gates"))
    parser.add_argument("--calibrate-seconds", type=float, default=1.0,
                        help="seconds per calibration phase (two phases)")
    parser.add_argument("--compare", nargs=2, metavar=("A.json", "B.json"),
                        help="print per-gate deltas between two runs and exit")
    parser.add_argument("--summary", metavar="RUN.json",
                        help="print a run as markdown (for docs/gates.md) and exit")
    args = parser.parse_args()
    if args.summary:
        print(summary(args.summary))
        return 0
    if args.compare:
        print(compare(*args.compare))
        return 0
    out_dir = pathlib.Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    os.environ["CAIRN_GATES_OUT"] = str(out_dir)
    ctx = Context(args.bench_dir, out_dir, args.full)
    started = time.time()
    run = {"date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
           "commit": git("rev-parse", "--short=12", "HEAD"),
           "dirty": bool(git("status", "--porcelain", "--untracked-files=no")),
           "full": args.full,
           "machine": machine_record(ctx, args.calibrate_seconds)}

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
    run["seconds"] = round(time.time() - started, 1)
    run["gates"] = all_records
    (out_dir / "gates.json").write_text(json.dumps(run, indent=2) + "\n")
    markdown, console = render(by_component, run)
    (out_dir / "gates.md").write_text(markdown)
    m = run["machine"]
    if "dependent_load_ns" in m:
        print(f"machine: {m.get('cpu_model')}, {m.get('cores')} cores, dependent load "
              f"{m['dependent_load_ns']:.0f} ns, independent load {m['independent_load_ns']:.1f} ns "
              f"(512 MiB); commit {run['commit']}{' (dirty)' if run['dirty'] else ''}")
    print("\n".join(console))
    failed = [r["id"] for r in all_records if r["verdict"] == "fail"]
    skipped = [r["id"] for r in all_records if r["verdict"] == "skipped"]
    # `report`: a figure a module records without a goal (never a pass).
    reported = [r["id"] for r in all_records if r["verdict"] == "report"]
    passing = len(all_records) - len(failed) - len(skipped) - len(reported)
    print(f"\n{len(all_records)} gates: {passing} passing, "
          f"{len(failed)} failing{': ' + ', '.join(failed) if failed else ''}, "
          f"{len(skipped)} skipped{': ' + ', '.join(skipped) if skipped else ''}"
          f"{f', {len(reported)} reported only' if reported else ''} "
          f"({run['seconds']:.0f} s)")
    print(f"wrote {out_dir / 'gates.json'} and {out_dir / 'gates.md'}")
    return 1 if (args.strict and failed) else 0


if __name__ == "__main__":
    sys.exit(main())
