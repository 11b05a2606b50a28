"""Run the standing benchmarks and write bench/results.md (and its plots).

    .venv/bin/python bench/run_all.py            # everything, about 15 minutes
    .venv/bin/python bench/run_all.py --quick    # smoke test of the runner, about 2 minutes

Each section is its own script in ``bench/`` (runnable alone, ``--json`` for
its figures), run here in a fresh process with a time limit, so a failing
section is reported in the results instead of stopping the run.  The 1-minute
load average is recorded before each section: on a busy machine every timing
is inflated and noisier, so read the figures beside it.  The results are laid
out under BENCHMARKS.md's questions; BENCHMARKS.md itself keeps the latest
figure of every study, these and the ones other scripts produce, each with its
command, and is updated from a run by hand.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from _common import REPO, fmt_spread, loadavg, machine_line, now_utc, subprocess_env

HERE = Path(__file__).resolve().parent
PLOTS = HERE / "plots"


# BENCHMARKS.md's questions, in its order: each section is written under its own.
CAPTURE = "What does capture cost?"
SUITE = "What does a suite cost?"
TRUST = "How trustworthy is a verdict?"
BUSY = "Quiet and busy"


@dataclass
class Section:
    key: str
    title: str
    script: str
    question: str
    args: list[str] = field(default_factory=list)
    quick_args: list[str] = field(default_factory=lambda: ["--quick"])
    json: bool = True
    timeout_s: int = 600


SECTIONS = [
    Section("per_op", "Cost per captured op", "bench_numpy_capture.py", CAPTURE),
    Section("record_function", "record_function scopes", "bench_record_function.py", CAPTURE),
    Section(
        "hotpath", "Native hot path", "bench_core_hotpath.py", CAPTURE, quick_args=[], json=False
    ),
    Section(
        "memory",
        "Allocation hooks (memory accounting)",
        "bench_memory.py",
        CAPTURE,
        quick_args=["--n", "5000", "--repeats", "11"],
        json=False,
    ),
    Section("key_averages", "key_averages()", "bench_key_averages.py", CAPTURE, timeout_s=900),
    Section(
        "chrome_trace",
        "Chrome trace export",
        "bench_chrome_trace.py",
        CAPTURE,
        args=["--repeats", "3"],
        timeout_s=1500,
    ),
    Section(
        "torch_source",
        "torch ops",
        "bench_torch_source.py",
        CAPTURE,
        args=["--phases"],
        quick_args=["--ops", "200", "--repeats", "3", "--phases"],
        json=False,
    ),
    Section(
        "test_overhead",
        "Per-test and per-allocation overhead",
        "bench_test_overhead.py",
        SUITE,
        quick_args=["--repeats", "3", "--tests", "200"],
        json=False,
        timeout_s=1200,
    ),
    Section("suite", "Whole-suite overhead", "bench_suite_overhead.py", SUITE, timeout_s=1200),
    Section(
        "post_processing",
        "The plugin's work after a big body",
        "bench_post_processing.py",
        SUITE,
        args=["--repeats", "3"],
        quick_args=["--ops", "100000", "--repeats", "1"],
        json=False,
    ),
    Section("accuracy", "Accuracy and overhead subtraction", "bench_accuracy.py", TRUST),
    Section(
        "verdict",
        "Verdict quality",
        "verdict_study.py",
        TRUST,
        args=["--rounds", "9"],
        timeout_s=1800,
    ),
    Section(
        "busy",
        "Verdict quality on busy machines",
        "busy_study.py",
        BUSY,
        # BLAS on one thread for both tools: the plugin pins its rounds by default, and
        # pytest-benchmark should not lose to a thread pool rather than to noise.
        args=["--pin-blas"],
        quick_args=["--tests", "20", "--sessions", "1", "--scenario", "quiet,loaded", "--pin-blas"],
        timeout_s=3600,
    ),
]


def run_section(section: Section, quick: bool, tmp: Path) -> dict[str, Any]:
    out = tmp / f"{section.key}.json"
    cmd = [sys.executable, str(HERE / section.script)]
    cmd += section.quick_args if quick else section.args
    if section.json:
        cmd += ["--json", str(out)]
    load = loadavg()
    started = now_utc()
    t0 = time.perf_counter()
    print(f"== {section.title}: {shlex.join(cmd[1:])} (load {load:.2f})", flush=True)
    try:
        proc = subprocess.run(
            cmd,
            cwd=REPO,
            env=subprocess_env(),
            capture_output=True,
            text=True,
            timeout=section.timeout_s,
        )
        stdout, rc = proc.stdout, proc.returncode
        error = proc.stderr[-3000:] if rc else ""
    except subprocess.TimeoutExpired as exc:
        stdout = exc.stdout.decode() if isinstance(exc.stdout, bytes) else (exc.stdout or "")
        rc, error = -1, f"timed out after {section.timeout_s} s"
    seconds = time.perf_counter() - t0
    print(stdout.rstrip("\n"))
    if error:
        print(f"   FAILED ({rc}): {error}", file=sys.stderr)
    data = json.loads(out.read_text()) if section.json and out.exists() and not rc else None
    return {
        "command": shlex.join(["python", f"bench/{section.script}", *cmd[2:]]).replace(
            str(out), "OUT.json"
        ),
        "stdout": stdout,
        "rc": rc,
        "error": error,
        "seconds": seconds,
        "started": started,
        "load_before": load,
        "load_after": loadavg(),
        "data": data,
    }


# -- markdown --------------------------------------------------------------


def _table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)


def _spread_cell(s: dict[str, float], digits: int = 0) -> str:
    return fmt_spread(s, digits).replace("[", "[IQR ")


def md_per_op(d: dict[str, Any]) -> str:
    rows = [[name, _spread_cell(s, 1)] for name, s in d["rows"].items()]
    ratios = [[name, _spread_cell(s, 1) + "x"] for name, s in d["ratios"].items()]
    return (
        f"{d['ops']:,} numpy ops / {d['torch_ops']:,} torch ops per run, {d['repeats']} "
        "interleaved repeats; added ns per op over the same loop unprofiled, run before and "
        "after each repeat's variants (median [IQR]). *total* = start + loop + exit + "
        "key_averages, amortised per op. *at full speed*: each run's ratio to the plain runs "
        "around it times the fastest plain run, i.e. the added cost at this machine's unloaded "
        "speed (the VM's speed drifts by up to 1.8x between runs tens of ms apart; the ratio "
        "cancels it).\n\n"
        + _table(["what", "ns per op"], rows)
        + "\n\nRatios (per repeat, side by side):\n\n"
        + _table(["ratio", "median [IQR]"], ratios)
        + "\n\n![per-op cost](plots/per_op.png)"
    )


def md_record_function(d: dict[str, Any]) -> str:
    rows = [
        [label, _spread_cell(parts["in loop"]), _spread_cell(parts["incl. collection"])]
        for label, parts in d["rows"].items()
    ]
    rows.append(
        [
            "torch / opprof",
            _spread_cell(d["ratios"]["in loop"], 1) + "x",
            _spread_cell(d["ratios"]["incl. collection"], 1) + "x",
        ]
    )
    return (
        f"Empty scope, enter + exit, ns per scope ({d['n']:,} scopes, {d['repeats']} repeats).\n\n"
        + _table(["", "in loop", "incl. stop + collection"], rows)
        + f"\n\nopprof `record_function` with no profile active: {_spread_cell(d['idle'])} ns."
    )


def md_key_averages(d: dict[str, Any]) -> str:
    rows = [
        [
            r["what"],
            f"{r['events']:,}",
            f"{r['seconds']['median']:.3f}",
            _spread_cell(r["ns_per_event"], 1),
        ]
        for r in d["rows"]
    ]
    ratio = d.get("torch_over_opprof")
    tail = f"\n\ntorch / opprof, per event, same session: **{ratio:.0f}x**" if ratio else ""
    return (
        "Synthetic sessions (depth-3 trees, 50 names, 2 threads, ~100 shapes). Ours from the raw "
        "records (tree building included); torch's from FunctionEvents already linked.\n\n"
        + _table(["what", "events", "median s", "ns per event"], rows)
        + tail
    )


def md_chrome_trace(d: dict[str, Any]) -> str:
    rows = [
        [
            label,
            f"{d['events'][label]:,}",
            _spread_cell(parts["wall"], 3),
            _spread_cell(parts["cpu"], 3),
        ]
        for label, parts in d["rows"].items()
    ]
    return (
        f"Seconds per 100,000 trace events ({d['n']:,} scopes around `np.add`, "
        f"{d['repeats']} interleaved repeats; torch: its export of a `torch.add` loop). "
        "CPU is the process's CPU time: on a loaded machine the wall time also holds the "
        "waits for a CPU.\n\n"
        + _table(["path", "events", "wall s / 100k", "CPU s / 100k"], rows)
        + f"\n\nold path / streamed (profile), wall: {_spread_cell(d['ratio'], 1)}x"
    )


def md_accuracy(d: dict[str, Any]) -> str:
    return str(d.get("markdown", "```\n" + json.dumps(d, indent=1) + "\n```"))


def md_suite(d: dict[str, Any]) -> str:
    rows = [
        [
            name,
            _spread_cell(r["plain_s"], 1),
            _spread_cell(r["opprof_s"], 1),
            f"**{_spread_cell(r['ratio'], 2)}**",
            _spread_cell(r["one_round_s"], 1) if "one_round_s" in r else "-",
            f"**{_spread_cell(r['one_round_ratio'], 2)}**" if "one_round_ratio" in r else "-",
            f"{r['load']['median']:.1f}",
        ]
        for name, r in d["rows"].items()
    ]
    return (
        f"Whole pytest process, {d['repeats']} repeats; plain, `--opprof` (defaults: "
        "`--opprof-rounds auto` runs each test of 1 ms or more 5 times so that its times can "
        "be judged, and 4 more when they put a time beyond its tolerance) and "
        "`--opprof --opprof-rounds 1` (the cost of profiling alone) back to "
        f'back; ratios per repeat. numpy tests selected with `-k "{d.get("numpy_k", "")}"`.\n\n'
        + _table(
            [
                "suite",
                "plain s",
                "--opprof s",
                "ratio",
                "--opprof-rounds 1 s",
                "ratio (1 round)",
                "load",
            ],
            rows,
        )
    )


def md_verdict(d: dict[str, Any]) -> str:
    from verdict_study import DEFAULT_LABEL, pick_rows

    chosen = pick_rows(d)
    rows = []
    for label, row in chosen:
        rows.append(
            [
                label,
                f"{row['false_regressions']}/{row['judged']} ({row['false_rate']:.1%})",
                f"{row['detected']}/{row['slowed']} ({row['detection_rate']:.1%})",
                str(row["false_in_slowed_session"]),
            ]
        )
    bench = d.get("pytest_benchmark")
    if bench:
        rows.append(
            [
                f"pytest-benchmark `{bench['check']}`",
                f"{bench['false_regressions']}/{bench['judged']} ({bench['false_rate']:.1%})",
                f"{bench['detected']}/{d['slowed']} ({bench['detection_rate']:.1%})",
                str(bench["false_in_slowed_session"]),
            ]
        )
    loads = [s["load"] for s in d["session_log"]]
    return (
        f"{d['tests']} generated tests ({d['tests_with_kernel']} with a 1-4 ms `kernel` scope); "
        f"{d['sessions']} unchanged sessions against a baseline recorded by one session "
        f"(refined by {d.get('baseline_sessions', 1) - 1} later update run(s) in the rows "
        "that say so: a passing run's rounds join the baseline's); then "
        f"+{d['slowdown']:.0%} injected into the kernel of {d['slowed']} random tests "
        f"(detected = judged regressed *because of* `kernel`). opprof sessions measured "
        f"{d['rounds_measured']} rounds; fewer rounds are scored on each test's first rounds. "
        f"Load average during the sessions: {min(loads):.1f}-{max(loads):.1f}. `auto` "
        f"confirmed {d.get('confirmed_share', 0.0):.1%} of the tests of the unchanged sessions "
        "(judged against the refined baseline) with 4 more rounds. "
        f"{DEFAULT_LABEL}\n\n"
        + _table(["setting", "false regressions", "detected", "false in slowed session"], rows)
        + "\n\n![verdict quality](plots/verdict.png)"
    )


def md_busy(d: dict[str, Any]) -> str:
    from busy_study import markdown

    return (
        f"The plugin end to end with its defaults, scored from its JSON report: baselines by "
        f"{d['update_runs']} update runs, {d['sessions']} unchanged gate runs, one run with "
        f"+{d['slowdown']:.0%} in the 1-4 ms `kernel` scope of half of the "
        f"{d['tests_with_kernel']} tests (of {d['tests']}) that have one; detection among the "
        "slowed tests whose time was judged, and among all slowed; cost = a gate run's wall "
        "time / a plain run's, same condition. Loaded: one CPU-bound process per core "
        "(`heavy`, when run: two). "
        f"BLAS threads {'pinned to 1' if d['pin_blas'] else 'as the environment has them'}. "
        f"Whole study {d['seconds'] / 60:.0f} min.\n\n"
        + markdown(d)
        + "\n\n![busy machines](plots/busy.png)"
    )


RENDER: dict[str, Callable[[dict[str, Any]], str]] = {
    "per_op": md_per_op,
    "record_function": md_record_function,
    "key_averages": md_key_averages,
    "chrome_trace": md_chrome_trace,
    "accuracy": md_accuracy,
    "suite": md_suite,
    "verdict": md_verdict,
    "busy": md_busy,
}


# -- plots -------------------------------------------------------------------


def plot_per_op(d: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = [
        ("opprof", "opprof recording: total"),
        ("Python wrapper", "Python wrapper: total"),
        ("sys.setprofile", "sys.setprofile: total"),
        ("torch.profiler", "torch.profiler: total"),
    ]
    names = [(label, key) for label, key in names if key in d["rows"]]
    med = [max(d["rows"][k]["median"], 1e-3) for _, k in names]
    lo = [m - max(d["rows"][k]["q1"], 1e-3) for m, (_, k) in zip(med, names, strict=True)]
    hi = [d["rows"][k]["q3"] - m for m, (_, k) in zip(med, names, strict=True)]
    fig, ax = plt.subplots(figsize=(6, 3.2))
    ax.bar([n for n, _ in names], med, yerr=[lo, hi], capsize=4, color="#4c72b0")
    ax.set_yscale("log")
    ax.set_ylabel("added ns per op (log)")
    ax.set_title("Capture cost per op, incl. exit and key_averages")
    for i, m in enumerate(med):
        ax.text(i, m, f"{m:,.0f}", ha="center", va="bottom", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_verdict(d: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.5, 4))
    by_rounds: dict[int, list[tuple[float, float]]] = {}
    for row in d["opprof"]:
        # 0 stands for auto (the default: 5 rounds where a time can be judged)
        by_rounds.setdefault(row["setting"]["rounds"] or 0, []).append(
            (row["false_rate"] * 100, row["detection_rate"] * 100)
        )
    for rounds, pts in sorted(by_rounds.items()):
        xs, ys = zip(*pts, strict=True)
        label = f"opprof, {rounds} round(s)" if rounds else "opprof, auto rounds (defaults)"
        ax.scatter(xs, ys, s=14, label=label, alpha=0.7)
    from verdict_study import default_setting

    default = default_setting()
    for setting, marker, label in (
        (default, "*", "opprof defaults, first baseline session"),
        (replace(default, refined=True), "D", "opprof defaults, refined baseline"),
    ):
        for row in d["opprof"]:
            if row["label"] == setting.label:
                ax.scatter(
                    [row["false_rate"] * 100],
                    [row["detection_rate"] * 100],
                    marker=marker,
                    s=110,
                    color="crimson",
                    edgecolors="black",
                    zorder=5,
                    label=label,
                )
    bench = d.get("pytest_benchmark")
    if bench:
        ax.scatter(
            [bench["false_rate"] * 100],
            [bench["detection_rate"] * 100],
            marker="x",
            s=80,
            color="black",
            label="pytest-benchmark mean:10%",
        )
    ax.axvline(1, color="grey", lw=0.8, ls="--")
    ax.axhline(95, color="grey", lw=0.8, ls="--")
    ax.set_xscale("symlog", linthresh=1)
    ax.set_xlim(0, 100)
    ax.set_ylim(0, 100)
    ax.set_xlabel("false regressions, % of unchanged tests")
    ax.set_ylabel("detected +30% slowdowns, %")
    ax.set_title("Verdict quality per setting (goal: left of 1%, above 95%)")
    ax.legend(fontsize=7, loc="lower left")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


# -- main ----------------------------------------------------------------------


def write_markdown(
    results: dict[str, dict[str, Any]],
    args: argparse.Namespace,
    started: str,
    total_s: float,
    out: Path,
    machine: str,
) -> None:
    cmd = "python bench/run_all.py" + (" --quick" if args.quick else "")
    parts = [
        "# Benchmark results",
        "",
        f"Generated by `{cmd}` (see `bench/`; every section is a script that runs alone)"
        " from `bench/results.json`: do not edit. The sections sit under the questions of"
        " [BENCHMARKS.md](../BENCHMARKS.md), which keeps the latest figure of every study"
        " with its command.",
        "",
        f"- machine: {machine}",
        f"- date: {started}; whole run {total_s / 60:.1f} min (a section re-run later with "
        "`--only` gives its own date)"
        + ("; **quick mode** (smoke test: small sizes, few repeats)" if args.quick else ""),
        "- load average (1 min) at each section's start: "
        + ", ".join(f"{k} {r['load_before']:.1f}" for k, r in results.items())
        + f" on {os.cpu_count()} cores. Timings on a loaded machine are inflated and noisier."
        + (f" Run at niceness {os.nice(0)}." if os.nice(0) else ""),
        "- conventions: every comparison is a ratio measured side by side in one run; figures "
        "are medians over repeats with the interquartile range (IQR) or the min-max range.",
        "",
    ]
    question = ""
    for section in SECTIONS:
        r = results.get(section.key)
        if r is None:
            continue
        if section.question != question:
            question = section.question
            parts += [f"## {question}", ""]
        when = f", {r['started']}" if r.get("started", started) != started else ""
        parts += [f"### {section.title}", "", f"`{r['command']}` ({r['seconds']:.0f} s{when})", ""]
        if r["rc"]:
            parts += [f"**failed** (exit {r['rc']}):", "", "```", r["error"].strip(), "```", ""]
            continue
        render = RENDER.get(section.key)
        if render is not None and r["data"] is not None:
            parts += [render(r["data"]), ""]
        else:
            parts += ["```", r["stdout"].strip(), "```", ""]
    out.write_text("\n".join(parts))


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes: smoke-test the runner")
    parser.add_argument(
        "--only",
        nargs="+",
        choices=[s.key for s in SECTIONS],
        help="re-run these sections; the others are kept from --json",
    )
    parser.add_argument("--out", type=Path, default=HERE / "results.md")
    parser.add_argument("--json", type=Path, default=HERE / "results.json")
    parser.add_argument(
        "--render-only", action="store_true", help="rewrite the Markdown and plots from --json"
    )
    args = parser.parse_args()
    if args.render_only:
        saved = json.loads(args.json.read_text())
        meta, results = saved["meta"], saved["sections"]
        args.quick = meta["quick"]
        started, total_s = meta["started"], meta["seconds"]
    else:
        started = now_utc()
        t0 = time.perf_counter()
        results = {}
        previous = None
        if args.only and args.json.exists():  # re-run some sections, keep the others
            saved = json.loads(args.json.read_text())
            results, previous = saved["sections"], saved["meta"]
        with tempfile.TemporaryDirectory(prefix="opprof-bench-") as tmp:
            for section in SECTIONS:
                if args.only and section.key not in args.only:
                    continue
                results[section.key] = run_section(section, args.quick, Path(tmp))
        total_s = time.perf_counter() - t0
        if previous is not None:
            started, total_s = previous["started"], previous["seconds"]
        meta = {
            "quick": args.quick,
            "started": started,
            "seconds": total_s,
            "machine": machine_line(),
        }
        args.json.write_text(json.dumps({"meta": meta, "sections": results}, indent=1))
    PLOTS.mkdir(exist_ok=True)
    from busy_study import plot_busy

    for key, plot in (("per_op", plot_per_op), ("verdict", plot_verdict), ("busy", plot_busy)):
        data = results.get(key, {}).get("data")
        if data:
            plot(data, PLOTS / f"{key}.png")
    # --render-only: the machine that ran, not this one (older files lack it).
    machine = meta.get("machine") or machine_line()
    write_markdown(results, args, started, total_s, args.out, machine)
    print(f"wrote {args.out} and {args.json}")


if __name__ == "__main__":
    main()
