"""The plugin's own work after a big test body, per op, beside the body's own cost.

One pytest session per run, in a child process: a warm-up test, then a body of
``--ops`` ``np.add`` calls on 8 floats, the same file plain and with ``--opprof
--opprof-rounds 1``, alternated ``--repeats`` times.  A plugin loaded beside
(:data:`TIMERS`) times, with ``perf_counter_ns``: the body (inside the test), the call
phase (pytest's report duration, what ``--durations`` and a test's own clock see),
the drain of the round's events and the summary of the round (the post-processing:
what the plugin does with the events once the body is over), in wall time and in the
thread's CPU time (on a loaded machine the wall time waits for a CPU).  Prints ns per
op, the median over the runs with its range, and the ratios side by side.

    python bench/bench_post_processing.py [--ops 1070000] [--repeats 5]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from _common import loadavg, machine_line, now_utc, plugin_args, subprocess_env

TEST = """
import time

import numpy as np


def test_a_warm():
    np.add(np.ones(8), 1.0)


def test_body():
    x, y, z = np.ones(8), np.ones(8), np.empty(8)
    add = np.add
    start = time.perf_counter_ns()
    for _ in range({ops}):
        add(x, y, out=z)
    with open("body.json", "w") as f:
        f.write(str(time.perf_counter_ns() - start))
"""

TIMERS = """
import json
import time

import pytest

TIMES = {"drain": 0, "summary": 0, "call": 0, "drain_cpu": 0, "summary_cpu": 0}


def _timed(owner, name, key):
    inner = getattr(owner, name)

    def timed(*args, **kwargs):
        start, cpu = time.perf_counter_ns(), time.thread_time_ns()
        try:
            return inner(*args, **kwargs)
        finally:
            TIMES[key] += time.perf_counter_ns() - start
            TIMES[key + "_cpu"] += time.thread_time_ns() - cpu

    setattr(owner, name, timed)


def pytest_configure(config):
    if not config.getoption("opprof"):
        return
    from pytest_opprof import _native
    from pytest_opprof.plugin.worker import Worker

    _timed(_native, "drain", "drain")
    _timed(Worker, "end_call", "summary")


def pytest_runtest_logreport(report):
    if report.when == "call" and report.nodeid.endswith("test_body"):
        TIMES["call"] = int(report.duration * 1e9)


def pytest_unconfigure(config):
    with open("times.json", "w") as f:
        json.dump(TIMES, f)
"""


def _run(directory: Path, opprof: bool) -> dict[str, int]:
    """One session; the body's, the call's and (with ``opprof``) the plugin's ns."""
    args = [sys.executable, "-m", "pytest", "-q", "-p", "no:randomly", "-p", "no:cacheprovider"]
    args += ["-p", "timers", *plugin_args()]
    if opprof:
        args += ["--opprof", "--opprof-rounds", "1"]
    env = subprocess_env(PYTHONPATH=str(directory))
    proc = subprocess.run(args, cwd=directory, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"pytest failed:\n{proc.stdout}\n{proc.stderr}")
    times: dict[str, int] = json.loads((directory / "times.json").read_text())
    times["body"] = int((directory / "body.json").read_text())
    return times


def _line(label: str, values: list[float]) -> str:
    return (
        f"  {label:<34} {statistics.median(values):8.1f} ns/op"
        f"  [{min(values):.1f}-{max(values):.1f}]"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ops", type=int, default=1_070_000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--json", type=Path, help="write the figures here")
    ns = parser.parse_args()
    plain: list[dict[str, int]] = []
    profiled: list[dict[str, int]] = []
    load = loadavg()
    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp)
        (directory / "test_body.py").write_text(TEST.format(ops=ns.ops))
        (directory / "timers.py").write_text(TIMERS)
        for _ in range(ns.repeats):
            plain.append(_run(directory, opprof=False))
            profiled.append(_run(directory, opprof=True))
    per_op = float(ns.ops)

    def col(runs: list[dict[str, int]], key: str) -> list[float]:
        return [r[key] / per_op for r in runs]

    post = [(r["drain"] + r["summary"]) / per_op for r in profiled]
    post_cpu = [(r["drain_cpu"] + r["summary_cpu"]) / per_op for r in profiled]
    body = col(plain, "body")
    print(f"{machine_line()}; {now_utc()}; load {load:.2f}")
    print(f"{ns.ops} np.add calls on 8 floats, {ns.repeats} runs each way, alternated")
    print(_line("body, plain", body))
    print(_line("body, recorded", col(profiled, "body")))
    print(_line("call phase, plain", col(plain, "call")))
    print(_line("call phase, --opprof", col(profiled, "call")))
    print(_line("post-processing: drain", col(profiled, "drain")))
    print(_line("post-processing: summary", col(profiled, "summary")))
    print(_line("post-processing, all", post))
    print(_line("post-processing, all, CPU time", post_cpu))
    ratio = [p / b for p, b in zip(post, body, strict=True)]
    call = [p["call"] / b["call"] for p, b in zip(profiled, plain, strict=True)]
    print(f"  post-processing / plain op      {statistics.median(ratio):.3f}x")
    print(f"  call phase --opprof / plain     {statistics.median(call):.3f}x")
    if ns.json is not None:
        figures = {
            "ops": ns.ops,
            "load": load,
            "post_ns_per_op": statistics.median(post),
            "post_cpu_ns_per_op": statistics.median(post_cpu),
            "body_plain_ns_per_op": statistics.median(body),
            "call_ratio": statistics.median(call),
        }
        ns.json.write_text(json.dumps(figures, indent=2, sort_keys=True))


if __name__ == "__main__":
    main()
