"""BLAS/LAPACK op times with the thread pools at 1 thread against their default, side by side.

What ``--opprof-blas-threads`` should default to.  Ops: ``np.matmul``,
``np.linalg.solve`` and ``np.linalg.eigh`` on square float64 arrays of 200-1000.
Three conditions, each timing every op with the pools pinned to 1 thread and left at
their default (the core count, unless the environment says otherwise):

* quiet: this process alone, the two settings interleaved call by call;
* busy: the same with two CPU burners per core (like ``tests/conftest.py``'s
  ``busy_machine``), ended by pid;
* xdist: two child processes at once, each with its own pools (what ``pytest -n 2``
  runs), both at the same setting; the settings alternate pair by pair;
* pytest -n 2: the real thing, ``pytest -n 2 --opprof`` over a generated module of
  tests (one op each, every op four times so both workers stay busy), with
  ``--opprof-blas-threads=1`` and ``keep``; each test's round wall times (5 rounds)
  from ``--opprof-report``.

Prints, per op, the median ms and interquartile range of each setting and the ratio
of medians (default / 1 thread: above 1, the pinned pool is faster).
Run: ``python bench/bench_blas_threads.py [--repeats 15] [--pairs 3]``.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
from _common import (
    REPO,
    cpu_burners,
    fmt_spread,
    loadavg,
    machine_line,
    now_utc,
    plugin_args,
    spread,
)

from pytest_opprof.capture.threadpools import THREAD_ENV, pinned, thread_counts, thread_env

Op = Callable[[], object]


def _ops() -> dict[str, Op]:
    rng = np.random.default_rng(0)
    ops: dict[str, Op] = {}
    for n in (200, 500, 1000):
        a = rng.standard_normal((n, n))
        b = rng.standard_normal((n, n))
        s = a @ a.T + n * np.eye(n)  # symmetric, well conditioned
        ops[f"matmul {n}"] = functools.partial(np.matmul, a, b)
        ops[f"solve {n}"] = functools.partial(np.linalg.solve, s, b)
        if n <= 500:  # eigh 1000 takes seconds on a busy 2-core machine
            ops[f"eigh {n}"] = functools.partial(np.linalg.eigh, s)
    return ops


def _time_ms(op: Op) -> float:
    start = time.perf_counter_ns()
    op()
    return (time.perf_counter_ns() - start) / 1e6


def interleaved(repeats: int) -> dict[str, dict[str, list[float]]]:
    """op -> {"1": ms, "default": ms}: the two settings alternate call by call."""
    out: dict[str, dict[str, list[float]]] = {}
    for name, op in _ops().items():
        op()  # first call: page faults and pool start-up, not measured
        times: dict[str, list[float]] = {"1": [], "default": []}
        for _ in range(repeats):
            with pinned(1):
                times["1"].append(_time_ms(op))
            times["default"].append(_time_ms(op))
        out[name] = times
    return out


def one_setting(threads: int | None, repeats: int) -> dict[str, list[float]]:
    """op -> ms at one setting (a child of the xdist condition)."""
    out: dict[str, list[float]] = {}
    with pinned(threads):
        for name, op in _ops().items():
            op()
            out[name] = [_time_ms(op) for _ in range(repeats)]
    return out


def _child_env() -> dict[str, str]:
    # The pools' own default: nothing in the environment sizes them.
    env = {k: v for k, v in os.environ.items() if k not in THREAD_ENV}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH", "")) if p)
    return env


def two_workers(repeats: int, pairs: int) -> dict[str, dict[str, list[float]]]:
    """Two children at once per pair, both pinned to 1 or both at the default."""
    out: dict[str, dict[str, list[float]]] = {}
    for _ in range(pairs):
        for setting in ("default", "1"):
            cmd = [sys.executable, __file__, "--child", setting, "--repeats", str(repeats)]
            procs = [
                subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, env=_child_env())
                for _ in range(2)
            ]
            for proc in procs:
                stdout, _ = proc.communicate()
                if proc.returncode != 0:
                    raise SystemExit(f"child failed: {proc.returncode}")
                for name, times in json.loads(stdout).items():
                    out.setdefault(name, {"1": [], "default": []})[setting].extend(times)
    return out


_PYTEST_MODULE = """
import sys
import pytest
sys.path.insert(0, {bench!r})
from bench_blas_threads import _ops

OPS = _ops()

@pytest.mark.parametrize("copy", range(4))
@pytest.mark.parametrize("name", list(OPS))
def test_op(name, copy):
    OPS[name]()
"""


def under_pytest_xdist(rounds: int) -> dict[str, dict[str, list[float]]]:
    """op -> {"1": ms, "default": ms}: round wall times of ``pytest -n 2 --opprof``."""
    out: dict[str, dict[str, list[float]]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        module = Path(tmp) / "test_blas_ops.py"
        module.write_text(_PYTEST_MODULE.format(bench=str(Path(__file__).parent)))
        for setting, value in (("default", "keep"), ("1", "1")):
            report = Path(tmp) / f"report-{setting}.json"
            cmd = [sys.executable, "-m", "pytest", *plugin_args(), "-p", "no:cacheprovider"]
            cmd += [
                "-p",
                "no:randomly",
                "-p",
                "no:benchmark",
                "-q",
                "-n",
                "2",
                "--opprof",
                str(module),
            ]
            cmd += [f"--opprof-rounds={rounds}", f"--opprof-blas-threads={value}"]
            cmd += [
                f"--opprof-report={report}",
                "--opprof-report-details",
                "--opprof-baseline-dir",
                str(Path(tmp) / "b"),
            ]
            subprocess.run(cmd, check=True, cwd=tmp, env=_child_env(), stdout=subprocess.DEVNULL)
            for nodeid, test in json.loads(report.read_text())["tests"].items():
                name = nodeid.split("[", 1)[1].rsplit("-", 1)[0]
                samples = test["summary"]["wall_time"]["samples_ns"]
                times = out.setdefault(name, {"1": [], "default": []})[setting]
                times.extend(ns / 1e6 for ns in samples)
    return {name: out[name] for name in _ops() if name in out}  # the other tables' order


def _print(title: str, results: dict[str, dict[str, list[float]]]) -> None:
    print(f"\n## {title}\n")
    print("| op | 1 thread, ms median [IQR] | default, ms median [IQR] | default max | ratio |")
    print("|---|---|---|---|---|")
    for name, times in results.items():
        one, default = spread(times["1"]), spread(times["default"])
        digits = 2 if one["median"] < 10 else 1
        print(
            f"| {name} | {fmt_spread(one, digits)} | {fmt_spread(default, digits)} "
            f"| {default['max']:.{digits}f} | {default['median'] / one['median']:.2f} |"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--pairs", type=int, default=3, help="child pairs per setting (xdist)")
    parser.add_argument("--child", choices=("1", "default"), help=argparse.SUPPRESS)
    parser.add_argument("--only-pytest", action="store_true", help="the pytest -n 2 part alone")
    args = parser.parse_args()
    if args.child is not None:
        threads = 1 if args.child == "1" else None
        print(json.dumps(one_setting(threads, args.repeats)))
        return
    print(f"# {machine_line()}, {now_utc()}, load {loadavg():.2f}")
    if args.only_pytest:
        _print("pytest -n 2 --opprof (round wall times)", under_pytest_xdist(5))
        return
    # Run it without *_NUM_THREADS set: "default" is then the pools' own default.
    print(f"pools: {thread_counts()}, environment: {thread_env() or 'no *_NUM_THREADS'}")
    _print("quiet", interleaved(args.repeats))
    with cpu_burners(per_core=2, seconds=600):
        _print("busy (2 burners per core)", interleaved(args.repeats))
    _print("xdist (2 processes at once)", two_workers(args.repeats, args.pairs))
    _print("pytest -n 2 --opprof (round wall times)", under_pytest_xdist(5))


if __name__ == "__main__":
    main()
