"""Cost per captured indexing op (``a[i]``, ``a[i] = v``) next to ``np.add``, hooks off vs on.

Run: ``python bench/bench_indexing.py [--ops N] [--repeats R] [--json PATH]``.

Indexing is captured through ndarray's mapping slots (``numpy.ndarray.__getitem__``,
``__setitem__``), a different trampoline from the ufunc's; this measures what it adds
per op, in one run, side by side with ``np.add(x, y, out=z)`` through the ufunc hook:

- "hooks off": the loop with numpy unhooked (the baseline of every row);
- "installed, idle": the hooks in place, nothing recording (what every op pays
  between tests of an ``--opprof`` session);
- "recording: in the loop" and "recording: total" (start, loop, stop + drain,
  key_averages, amortised over N ops), without and with ``record_shapes``.

Variants run interleaved in each repeat between two runs of the unhooked loop, and a
variant's added cost is taken against their mean; the median over repeats is reported
with its interquartile range, and an "at full speed" twin scales the ratio to the runs
around it by the fastest unhooked run (this VM's core speed drifts, see
bench_numpy_capture.py).
"""

from __future__ import annotations

import argparse
import json
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from _common import fmt_spread, spread

import pytest_opprof as opprof
from pytest_opprof.capture.sources.numpy_source import SOURCE


def _loops(n: int) -> dict[str, tuple[str, Callable[[], None]]]:
    """op -> (the name it records as, one run of n ops)."""
    a = np.arange(8.0)
    x, y, z = np.ones(8), np.ones(8), np.empty(8)
    add = np.add

    def getitem() -> None:
        for _ in range(n):
            a[3]

    def setitem() -> None:
        for _ in range(n):
            a[3] = 1.0

    def ufunc() -> None:
        for _ in range(n):
            add(x, y, out=z)

    return {
        "a[i]": ("numpy.ndarray.__getitem__", getitem),
        "a[i] = v": ("numpy.ndarray.__setitem__", setitem),
        "np.add(8 floats)": ("numpy.add", ufunc),
    }


def _variants(name: str, loop: Callable[[], None], n: int) -> dict[str, Callable[[], Any]]:
    def idle() -> dict[str, int]:
        SOURCE.acquire()  # installed once per session by the plugin; per run here
        try:
            t0 = time.perf_counter_ns()
            loop()
            return {"loop": time.perf_counter_ns() - t0}
        finally:
            SOURCE.release()

    def recording(shapes: bool) -> Callable[[], dict[str, int]]:
        def run() -> dict[str, int]:
            t0 = time.perf_counter_ns()
            with opprof.profile(
                capture=["numpy"], record_shapes=shapes, profile_memory=False
            ) as prof:
                t1 = time.perf_counter_ns()
                loop()
                t2 = time.perf_counter_ns()
            rows = prof.key_averages()
            t3 = time.perf_counter_ns()
            assert any(r.key == name and r.count == n for r in rows), name
            return {"loop": t2 - t1, "all": t3 - t0}

        return run

    return {"idle": idle, "rec": recording(False), "shapes": recording(True)}


def _measure_op(
    op: str, name: str, loop: Callable[[], None], ops: int, repeats: int
) -> dict[str, dict[str, float]]:
    """One op's variants, interleaved between unhooked runs, ``repeats`` times."""
    variants = _variants(name, loop, ops)
    for run in variants.values():
        run()
    loop()
    off: list[float] = []
    parts: dict[str, list[dict[str, int]]] = defaultdict(list)
    for _ in range(repeats):
        t0 = time.perf_counter_ns()
        loop()
        before = time.perf_counter_ns() - t0
        for key in ("idle", "rec", "shapes"):
            parts[key].append(variants[key]())
        t0 = time.perf_counter_ns()
        loop()
        off.append((before + time.perf_counter_ns() - t0) / 2)
    fastest = min(off)

    def added(key: str, part: str, full_speed: bool = False) -> dict[str, float]:
        runs = [p[part] for p in parts[key]]
        if full_speed:
            return spread([(t / b - 1) * fastest / ops for t, b in zip(runs, off, strict=True)])
        return spread([(t - b) / ops for t, b in zip(runs, off, strict=True)])

    return {
        f"{op}: hooks off, ns/op": spread([b / ops for b in off]),
        f"{op}: installed, idle": added("idle", "loop"),
        f"{op}: recording, in the loop": added("rec", "loop"),
        f"{op}: recording, total": added("rec", "all"),
        f"{op}: recording, total, at full speed": added("rec", "all", True),
        f"{op}: with record_shapes, total": added("shapes", "all"),
    }


def measure(ops: int, repeats: int) -> dict[str, Any]:
    """Every op's rows of added ns per op."""
    rows: dict[str, dict[str, float]] = {}
    for op, (name, loop) in _loops(ops).items():
        rows.update(_measure_op(op, name, loop, ops, repeats))
    return {"ops": ops, "repeats": repeats, "unit": "ns per op", "rows": rows}


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--ops", type=int, default=100_000, help="ops per run")
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    result = measure(args.ops, args.repeats)
    print(
        f"added ns per op over the unhooked loop, median [IQR] of {args.repeats} repeats "
        f"({args.ops} ops per run)"
    )
    width = max(map(len, result["rows"]))
    for row, s in result["rows"].items():
        print(f"  {row:<{width}}  {fmt_spread(s, 1)}")
    if args.json:
        args.json.write_text(json.dumps(result, indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":
    main()
