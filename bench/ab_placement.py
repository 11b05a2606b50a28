"""How much where an array starts moves numpy's speed: why an A/B run's partners start every
numpy block at a cache line (docs/how-it-works.md, "Where a block starts").

In one process, ``np.add(a, b, out=c)`` on operands placed at random offsets within a page,
either anywhere malloc could put them (16-byte steps) or at a cache line (64-byte steps):
the fastest and slowest of ``--draws`` placements, each the best of 5 timings.  The spread
is what two processes whose heaps put the same arrays at different places can differ by
for a whole run.

    python bench/ab_placement.py [--draws 24] [--seed 1]
"""

from __future__ import annotations

import argparse
import random
import statistics
import time

import numpy as np
from _common import loadavg, machine_line, now_utc

SIZES = ((1_000, 2_000), (30_000, 300), (300_000, 40), (1_000_000, 10))
"""Elements of each float64 operand, and calls a timing."""


def placed(n: int, offset: int) -> np.ndarray:
    """``n`` float64s starting ``offset`` bytes into a page."""
    buf = np.empty(n * 8 + 8192, dtype=np.uint8)
    start = (-buf.ctypes.data) % 4096 + offset
    return buf[start : start + n * 8].view(np.float64)


def timed(n: int, calls: int, offsets: list[int]) -> float:
    a, b, c = (placed(n, o) for o in offsets)
    a[:] = 1.0
    b[:] = 2.0
    for _ in range(3):
        np.add(a, b, out=c)
    best = []
    for _ in range(5):
        started = time.perf_counter_ns()
        for _ in range(calls):
            np.add(a, b, out=c)
        best.append((time.perf_counter_ns() - started) / calls)
    return min(best)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--draws", type=int, default=24, help="random placements a row")
    p.add_argument("--seed", type=int, default=1)
    args = p.parse_args()
    rng = random.Random(args.seed)
    print(f"{now_utc()}, {machine_line()}, load {loadavg():.1f}")
    print("| operands | placement | fastest | median | slowest | slowest / fastest |")
    print("|---|---|---|---|---|---|")
    for n, calls in SIZES:
        for label, step in (("16-byte steps (malloc)", 16), ("64-byte steps (a cache line)", 64)):
            took = sorted(
                timed(n, calls, [rng.randrange(4096 // step) * step for _ in range(3)])
                for _ in range(args.draws)
            )
            print(
                f"| 3 x {n * 8 / 1000:g} KB | {label} | {took[0] / 1000:.1f} us "
                f"| {statistics.median(took) / 1000:.1f} us | {took[-1] / 1000:.1f} us "
                f"| {took[-1] / took[0]:.2f} |"
            )


if __name__ == "__main__":
    main()
