"""What recording libraries' Python functions costs: per captured call, and per other call.

Run: ``python bench/bench_python_api.py [--calls N] [--repeats R] [--json PATH]``.

A frame evaluator (``native/pyfunc_hooks.c``) is armed while a round records with a source
that has Python functions in the table (numpy's: ``np.ones``, ``numpy.testing``). It sees
every Python frame, so it costs every Python call made while recording, not only the
captured ones. Side by side in one run, in the loop (``perf_counter`` around N calls inside
the profile), added ns per call over the same loop with no profile:

- "evaluator off": recording numpy capture with numpy's Python entries removed, so the
  evaluator stays disarmed (what a round cost before Python functions were captured);
- "evaluator on": recording with them (the default).

Loops: a Python function that is in no table (what every other Python call pays), a captured
Python function (``np.isscalar``: the smallest numpy one, so the figure is the op's cost, not
its work), and ``np.add`` on 8 floats (a C op: the evaluator must not touch it).
Variants run interleaved in each repeat; the median over repeats is reported with its
interquartile range.
"""

from __future__ import annotations

import argparse
import json
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path

import numpy as np
from _common import fmt_spread, spread

import pytest_opprof as opprof
from pytest_opprof.capture.sources.numpy_source import SOURCE


def _loops(n: int) -> dict[str, Callable[[], None]]:
    x, y, z = np.ones(8), np.ones(8), np.empty(8)
    add, isscalar = np.add, np.isscalar

    def own(v: float) -> float:
        return v

    def python_call() -> None:
        for _ in range(n):
            own(1.0)

    def captured_call() -> None:
        for _ in range(n):
            isscalar(1.0)

    def ufunc() -> None:
        for _ in range(n):
            add(x, y, out=z)

    return {
        "Python call, not captured": python_call,
        "np.isscalar (captured Python function)": captured_call,
        "np.add, 8 floats (C op)": ufunc,
    }


def _timed(loop: Callable[[], None]) -> float:
    t0 = time.perf_counter_ns()
    loop()
    return float(time.perf_counter_ns() - t0)


def _recorded(loop: Callable[[], None], evaluator: bool) -> float:
    SOURCE.acquire()  # held across the profile, so its Python entries can be taken out
    try:
        if not evaluator:
            SOURCE._python.remove()
        with opprof.profile(capture=["numpy"], profile_memory=False):
            ns = _timed(loop)
    finally:
        if not evaluator:
            SOURCE._python.install(SOURCE.start_options())
        SOURCE.release()
    return ns


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--calls", type=int, default=20_000)
    p.add_argument("--repeats", type=int, default=15)
    p.add_argument("--json", type=Path)
    args = p.parse_args()
    loops = _loops(args.calls)
    added: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for loop in loops.values():  # warm: call sites specialised, hooks installed once
        loop()
        _recorded(loop, True)
    for _ in range(args.repeats):
        for name, loop in loops.items():
            before = _timed(loop)
            off = _recorded(loop, False)
            on = _recorded(loop, True)
            after = _timed(loop)
            plain = (before + after) / 2
            added[name]["evaluator off"].append((off - plain) / args.calls)
            added[name]["evaluator on"].append((on - plain) / args.calls)
    results = {}
    print(f"added ns per call in the loop, {args.calls} calls, median (IQR) of {args.repeats}")
    for name, variants in added.items():
        row = {v: spread(samples) for v, samples in variants.items()}
        results[name] = row
        cells = ", ".join(f"{v} {fmt_spread(s)}" for v, s in row.items())
        print(f"  {name}: {cells}")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
