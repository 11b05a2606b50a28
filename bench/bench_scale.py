"""What a large suite costs: plain against profiled, alternated, and the JSON report's size.

Two suites, each run as whole pytest processes (start-up, collection, tests, reports),
as a CI job sees them:

* ``numpy``: numpy's own ``test_einsum`` and ``test_linalg`` (``--pyargs``, from a
  temporary directory, no baselines): plain against ``--opprof`` (its defaults);
* ``tiny``: ``--tiny`` generated tests of three numpy calls each (30 modules): plain
  against ``--opprof`` (no baselines yet), against an update run, and against a gate
  (baselines of that update run) writing the JSON, HTML and Markdown reports.

Every repeat runs each variant of a suite once, in a rotating order, so the variants
share the machine's load; ratios are of the minima over the repeats (the run least
disturbed by other work), with the median ratio of a repeat beside them.  Beside the
wall time, each process's CPU time (user + system, its children's too): on a machine
shared with other work it moves far less than the wall time does, and a ratio of CPU
times is what a quiet machine's wall-time ratio comes near for these single-threaded
runs.  The JSON report's bytes per test are read from the gate's report.

    python bench/bench_scale.py [--repeats 3] [--tiny 3000] [--suites numpy tiny]
                                [--json PATH] [-- EXTRA PYTEST ARGS FOR PROFILED RUNS]
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from _common import loadavg, machine_line, now_utc, plugin_args, subprocess_env

NUMPY_TESTS = ("numpy._core.tests.test_einsum", "numpy.linalg.tests.test_linalg")
MODULES = 30


def write_tiny_suite(root: Path, tests: int) -> None:
    """``tests`` tiny tests (three numpy calls each) in :data:`MODULES` modules."""
    per = -(-tests // MODULES)
    for m in range(MODULES):
        lines = ["import numpy as np", ""]
        for t in range(min(per, tests - m * per)):
            lines += [
                f"def test_{t}():",
                f"    a = np.arange({t % 7 + 3}.0)",
                "    assert (a + 1).sum() > 0",
                "",
            ]
        (root / f"test_m{m:02d}.py").write_text("\n".join(lines))
    (root / "pytest.ini").write_text("[pytest]\n")


def _children_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run(args: Sequence[str], cwd: Path) -> tuple[float, float]:
    """Wall and CPU seconds of one pytest process (exit status 0 required)."""
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *plugin_args()]
    cmd += ["-p", "no:randomly", "-p", "no:benchmark", *args]
    env = subprocess_env()
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # bytecode cached, as on a developer's machine
    cpu0, t0 = _children_cpu_s(), time.perf_counter()
    proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True)
    seconds, cpu = time.perf_counter() - t0, _children_cpu_s() - cpu0
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} exited {proc.returncode}:\n{proc.stdout[-3000:]}")
    return seconds, cpu


def alternate(variants: dict[str, list[str]], cwd: Path, repeats: int) -> dict[str, dict[str, Any]]:
    """Each variant once a repeat, rotating; per variant its wall and CPU seconds and,
    against ``plain``, the ratios of their minima and the median per-repeat wall ratio."""
    names = list(variants)
    for name in names:  # untimed: bytecode caches, the page cache
        run(variants[name], cwd)
    times: dict[str, list[float]] = {name: [] for name in names}
    cpus: dict[str, list[float]] = {name: [] for name in names}
    ratios: dict[str, list[float]] = {name: [] for name in names}
    for i in range(repeats):
        order = names[i % len(names) :] + names[: i % len(names)]
        now = {name: run(variants[name], cwd) for name in order}
        for name in names:
            times[name].append(now[name][0])
            cpus[name].append(now[name][1])
            ratios[name].append(now[name][0] / now["plain"][0])
    return {
        name: {
            "seconds": times[name],
            "cpu_seconds": cpus[name],
            "ratio_of_minima": min(times[name]) / min(times["plain"]),
            "cpu_ratio_of_minima": min(cpus[name]) / min(cpus["plain"]),
            "median_ratio": statistics.median(ratios[name]),
        }
        for name in names
    }


def numpy_suite(tmp: Path, repeats: int, extra: list[str]) -> dict[str, Any]:
    import numpy

    site = Path(numpy.__file__).resolve().parent.parent
    (tmp / "pytest.ini").write_text(f"[pytest]\nopprof_baseline_dir = {tmp / 'baselines'}\n")
    base = ["--pyargs", *NUMPY_TESTS, f"--rootdir={site}", "-c", str(tmp / "pytest.ini")]
    return alternate({"plain": base, "opprof": [*base, "--opprof", *extra]}, tmp, repeats)


def tiny_suite(tmp: Path, tests: int, repeats: int, extra: list[str]) -> dict[str, Any]:
    """The tiny suite's variants (:func:`alternate`), and the gate's JSON report's bytes
    per test (``json_bytes_per_test``)."""
    suite = tmp / "tiny"
    suite.mkdir()
    write_tiny_suite(suite, tests)
    out = tmp / "out"
    out.mkdir()
    gated = suite / "gated"  # the gate's own baselines, recorded once
    run(["--opprof-update-baselines", f"--opprof-baseline-dir={gated}", *extra], suite)
    reports = [
        f"--opprof-report={out / 'report.json'}",
        f"--opprof-markdown={out / 'report.md'}",
        f"--opprof-html={out / 'report.html'}",
    ]
    variants = {
        "plain": [],
        "opprof": ["--opprof", f"--opprof-baseline-dir={tmp / 'none'}", *extra],
        "update": ["--opprof-update-baselines", f"--opprof-baseline-dir={tmp / 'upd'}", *extra],
        "gate + 3 reports": ["--opprof", f"--opprof-baseline-dir={gated}", *reports, *extra],
    }
    result: dict[str, Any] = alternate(variants, suite, repeats)
    report = out / "report.json"
    data = json.loads(report.read_text())
    result["json_bytes_per_test"] = report.stat().st_size / len(data["tests"])
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--tiny", type=int, default=3000, help="tests of the tiny suite")
    parser.add_argument("--suites", nargs="+", choices=["numpy", "tiny"], default=["numpy", "tiny"])
    parser.add_argument("--json", type=Path)
    parser.add_argument("extra", nargs="*", help="pytest arguments for the profiled runs")
    args = parser.parse_args()
    result: dict[str, Any] = {"machine": machine_line(), "at": now_utc(), "load": loadavg()}
    with tempfile.TemporaryDirectory(prefix="opprof-scale-") as name:
        tmp = Path(name)
        if "numpy" in args.suites:
            numpy_dir = tmp / "numpy"
            numpy_dir.mkdir()
            result["numpy"] = numpy_suite(numpy_dir, args.repeats, args.extra)
        if "tiny" in args.suites:
            result["tiny"] = tiny_suite(tmp, args.tiny, args.repeats, args.extra)
    result["load_after"] = loadavg()
    print(f"{result['machine']}; {result['at']}; load {result['load']:.1f}-{loadavg():.1f}")
    for suite in ("numpy", "tiny"):
        rows = result.get(suite)
        if rows is None:
            continue
        for name, row in rows.items():
            if not isinstance(row, dict):
                continue
            secs = " ".join(f"{s:.1f}" for s in row["seconds"])
            cpu = " ".join(f"{s:.1f}" for s in row["cpu_seconds"])
            print(
                f"  {suite:<5} {name:<17} wall x{row['ratio_of_minima']:.2f} (minima; median "
                f"ratio x{row['median_ratio']:.2f}), CPU x{row['cpu_ratio_of_minima']:.2f}  "
                f"wall s: {secs}  CPU s: {cpu}"
            )
        if "json_bytes_per_test" in rows:
            print(f"  tiny  JSON report: {rows['json_bytes_per_test']:,.0f} bytes a test")
    if args.json:
        args.json.write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
