"""record_function cost: pytest-opprof vs torch.profiler, side by side in one run.

Per enter+exit of an empty scope, under an active profile (CPU activity only
for torch), two figures each, in ns per scope (median over repeats):

- "in loop": the scopes alone, profile already running;
- "incl. collection": the whole ``with profile(): <n scopes>`` block plus
  getting the events out (opprof: stop + drain into Records; torch: exit +
  ``prof.events()``), divided by n.

    .venv/bin/python bench/bench_record_function.py [--n 20000] [--repeats 7]

(with the package importable: ``pip install -e .``, or ``PYTHONPATH=.`` in the checkout)
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import pytest_opprof as opprof


def median_ns(fn: Callable[[], int], repeats: int) -> float:
    return statistics.median(fn() for _ in range(repeats))


def opprof_case(n: int) -> tuple[int, int]:
    """(ns for the scopes alone, ns for the block including stop and drain)."""
    t0 = time.perf_counter_ns()
    with opprof.profile(capture=["none"], profile_memory=False, record_shapes=False) as prof:
        t1 = time.perf_counter_ns()
        for _ in range(n):
            with opprof.record_function("scope"):
                pass
        t2 = time.perf_counter_ns()
    assert len(prof.records()) == n
    t3 = time.perf_counter_ns()
    return t2 - t1, t3 - t0


def torch_case(n: int) -> tuple[int, int]:
    from torch.profiler import ProfilerActivity, profile, record_function

    t0 = time.perf_counter_ns()
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        t1 = time.perf_counter_ns()
        for _ in range(n):
            with record_function("scope"):
                pass
        t2 = time.perf_counter_ns()
    events = prof.events()
    assert sum(e.name == "scope" for e in events) == n
    t3 = time.perf_counter_ns()
    return t2 - t1, t3 - t0


def idle_opprof_ns(n: int) -> int:
    t0 = time.perf_counter_ns()
    for _ in range(n):
        with opprof.record_function("scope"):
            pass
    return time.perf_counter_ns() - t0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=20000, help="scopes per profile")
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    n, repeats = args.n, args.repeats

    rows = {}
    for label, case in (("pytest_opprof", opprof_case), ("torch.profiler", torch_case)):
        case(min(n, 1000))  # warm-up: imports, first-use setup
        runs = [case(n) for _ in range(repeats)]
        rows[label] = (
            statistics.median(r[0] for r in runs) / n,
            statistics.median(r[1] for r in runs) / n,
        )
    idle = median_ns(lambda: idle_opprof_ns(n), repeats) / n

    print(f"record_function enter+exit, ns per scope (n={n}, median of {repeats})")
    print(f"{'':<16} {'in loop':>10} {'incl. collection':>18}")
    for label, (loop, total) in rows.items():
        print(f"{label:<16} {loop:>10.0f} {total:>18.0f}")
    ours, theirs = rows["pytest_opprof"], rows["torch.profiler"]
    print(f"{'torch / opprof':<16} {theirs[0] / ours[0]:>9.1f}x {theirs[1] / ours[1]:>17.1f}x")
    print(f"pytest_opprof with no profile active: {idle:.0f} ns per scope")


if __name__ == "__main__":
    main()
