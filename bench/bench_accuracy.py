"""Accuracy: a busy-wait of known length, and the profiler's overhead subtracted from self times.

1. A ``record_function`` scope around a busy-wait of known length (the spin
   loop's own ``perf_counter_ns`` reading is the truth): error of the scope's
   total, median and worst over repeats.
2. Nested tiny scopes around a busy-wait: a root scope spins for ``--spin-ms``
   and holds ``--children`` empty scope trees ``--depth`` deep.  The root's true
   self time is the spin plus, per child, one nesting level's work with the
   profiler idle (the unprofiled tree's time over its levels, fastest of 7 runs).  Error of the
   root's self time before (``self_cpu_time_total_raw``) and after
   (``self_cpu_time_total``) subtracting the calibrated overhead; and the mean
   self time of the scopes in between, whose true self time is one level's work.

    .venv/bin/python bench/bench_accuracy.py [--repeats 7] [--quick] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from _common import fmt_spread, spread

import pytest_opprof as opprof
from pytest_opprof.native_layout.records import KIND_SCOPE


def spin(ns: int) -> int:
    """Busy-wait ``ns``; return the duration the loop itself measured (ns)."""
    t0 = time.perf_counter_ns()
    while (t := time.perf_counter_ns()) - t0 < ns:
        pass
    return t - t0


def busy_wait_errors(ms: float, repeats: int) -> list[float]:
    """Relative error of the scope's total time, per repeat."""
    out = []
    for _ in range(repeats):
        with opprof.profile(capture=["none"], profile_memory=False) as prof:
            with opprof.record_function("wait"):
                truth = spin(int(ms * 1e6))
        (row,) = [r for r in prof.key_averages() if r.key == "wait"]
        out.append(row.cpu_time_total * 1000 / truth - 1)
    return out


def nest(depth: int) -> Callable[[], None]:
    """A function opening ``depth`` nested empty scopes."""
    scopes = [opprof.record_function(f"level{i}") for i in range(1, depth + 1)]

    def run(i: int = 0) -> None:
        if i < depth:
            with scopes[i]:
                run(i + 1)

    return run


def idle_per_level_ns(children: int, depth: int, tree: Callable[[], None]) -> float:
    """Unprofiled ns per nesting level of ``tree`` (fastest of 7 runs of ``children`` trees).

    Each level's own work (a Python call, a test, an idle ``with``) is the true
    self time of the scope around it, and of the root per child.
    """
    best = float("inf")
    for _ in range(7):
        t0 = time.perf_counter_ns()
        for _ in range(children):
            tree()
        best = min(best, (time.perf_counter_ns() - t0) / children)
    return best / (depth + 1)


def nested_case(spin_ms: float, children: int, depth: int) -> dict[str, float]:
    tree = nest(depth)
    per_level = idle_per_level_ns(children, depth, tree)
    with opprof.profile(capture=["none"], profile_memory=False) as prof:
        with opprof.record_function("root"):
            spun = spin(int(spin_ms * 1e6))
            for _ in range(children):
                tree()
    truth_us = (spun + children * per_level) / 1000
    events = prof.events()
    root = next(e for e in events if e.name == "root")
    inner = [e for e in events if e.name.startswith("level") and e.cpu_children]
    overhead = prof.overhead
    assert overhead is not None
    return {
        "truth_us": truth_us,
        "raw_error": root.self_cpu_time_total_raw / truth_us - 1,
        "corrected_error": root.self_cpu_time_total / truth_us - 1,
        "inner_raw_ns": statistics.fmean(e.self_cpu_time_total_raw for e in inner) * 1000,
        "inner_corrected_ns": statistics.fmean(e.self_cpu_time_total for e in inner) * 1000,
        "inner_truth_ns": per_level,
        "overhead_scope_ns": overhead.per_event_ns(KIND_SCOPE),
    }


def measure(repeats: int, spin_ms: float, children: int, depth: int) -> dict[str, Any]:
    with opprof.profile(capture=["none"]):  # the first profile calibrates
        pass
    waits = {ms: busy_wait_errors(ms, repeats) for ms in (1.0, 10.0, 50.0)}
    nested = [nested_case(spin_ms, children, depth) for _ in range(repeats)]
    result: dict[str, Any] = {
        "repeats": repeats,
        "busy_wait": {
            f"{ms:g} ms": {
                "error_pct": spread([e * 100 for e in errs]),
                "worst_abs_pct": max(abs(e) for e in errs) * 100,
            }
            for ms, errs in waits.items()
        },
        "nested": {
            "spin_ms": spin_ms,
            "children": children,
            "depth": depth,
            **{
                key: spread([n[key] * (100 if key.endswith("error") else 1) for n in nested])
                for key in nested[0]
            },
        },
    }
    result["markdown"] = markdown(result)
    return result


def markdown(r: dict[str, Any]) -> str:
    n = r["nested"]
    lines = [
        f"Busy-wait inside a `record_function` scope; error of the scope's CPU total against "
        f"the spin loop's own clock ({r['repeats']} repeats):",
        "",
        "| busy-wait | error % (median [IQR]) | worst abs error % |",
        "|---|---|---|",
    ]
    for label, b in r["busy_wait"].items():
        lines.append(f"| {label} | {fmt_spread(b['error_pct'], 3)} | {b['worst_abs_pct']:.3f} |")
    lines += [
        "",
        f"Nested tiny scopes: a root scope spins {n['spin_ms']:g} ms and opens {n['children']:,} "
        f"empty scope trees {n['depth']} deep. Calibrated overhead: "
        f"{n['overhead_scope_ns']['median']:.0f} ns per scope "
        "(table footer: `profiler overhead subtracted: N ns/scope, M ns/numpy op`).",
        "",
        "| figure | before subtraction (raw) | after subtraction | truth |",
        "|---|---|---|---|",
        f"| root self time error % | {fmt_spread(n['raw_error'], 2)} | "
        f"{fmt_spread(n['corrected_error'], 2)} | 0 |",
        f"| mean self time of an inner scope, ns | {fmt_spread(n['inner_raw_ns'])} | "
        f"{fmt_spread(n['inner_corrected_ns'])} | {n['inner_truth_ns']['median']:.0f} |",
    ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--spin-ms", type=float, default=5.0)
    parser.add_argument("--children", type=int, default=2000)
    parser.add_argument("--depth", type=int, default=8)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    if args.quick:
        args.repeats, args.children = 3, 500
    result = measure(args.repeats, args.spin_ms, args.children, args.depth)
    print(result["markdown"])
    if args.json:
        args.json.write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
