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
import json
import time
from pathlib import Path

from _common import fmt_spread, spread

import pytest_opprof as opprof


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
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    if args.quick:
        args.n, args.repeats = 2000, 3
    n, repeats = args.n, args.repeats

    cases = (("pytest_opprof", opprof_case), ("torch.profiler", torch_case))
    runs: dict[str, list[tuple[int, int]]] = {label: [] for label, _ in cases}
    idle_runs = []
    for _, case in cases:
        case(min(n, 1000))  # warm-up: imports, first-use setup
    for _ in range(repeats):  # interleaved, so drift hits both alike
        for label, case in cases:
            runs[label].append(case(n))
        idle_runs.append(idle_opprof_ns(n) / n)
    rows = {
        label: {
            "in loop": spread([r[0] / n for r in rs]),
            "incl. collection": spread([r[1] / n for r in rs]),
        }
        for label, rs in runs.items()
    }
    ratios = {
        part: spread(
            [
                t[i] / o[i]
                for t, o in zip(runs["torch.profiler"], runs["pytest_opprof"], strict=True)
            ]
        )
        for i, part in enumerate(("in loop", "incl. collection"))
    }
    idle = spread(idle_runs)

    print(f"record_function enter+exit, ns per scope (n={n}, median [IQR] of {repeats})")
    print(f"{'':<16} {'in loop':>20} {'incl. collection':>22}")
    for label, parts in rows.items():
        print(
            f"{label:<16} {fmt_spread(parts['in loop']):>20} "
            f"{fmt_spread(parts['incl. collection']):>22}"
        )
    print(
        f"{'torch / opprof':<16} {fmt_spread(ratios['in loop'], 1):>19}x "
        f"{fmt_spread(ratios['incl. collection'], 1):>21}x"
    )
    print(f"pytest_opprof with no profile active: {fmt_spread(idle)} ns per scope")
    if args.json:
        result = {"n": n, "repeats": repeats, "rows": rows, "ratios": ratios, "idle": idle}
        args.json.write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
