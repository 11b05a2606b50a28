"""How far transparent huge pages move numpy's memory-bound ops, and that the A/B partners
go without them.

numpy asks the kernel for huge pages for arrays of 4 MB or more (``madvise``); whether an
array gets them depends on the machine's free memory when its pages are first touched. Two
8 MB arrays in one process, one allowed huge pages and one not, are timed in turn within
each 100 ms window (this VM's memory speed moves from window to window, both arrays with
it), and the ratio of their best times per window is reported. Then a child started as the
A/B partners are (``PR_SET_THP_DISABLE``, ``pytest_opprof/ab/base_side.py``) makes the same
array and reports how much of it lies on huge pages.

    python bench/ab_hugepages.py [--windows 30]
"""

from __future__ import annotations

import argparse
import re
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
from _common import loadavg, machine_line, now_utc

ELEMENTS = 1_000_000  # 8 MB of float64


def huge_kb(array: np.ndarray) -> int:
    """The kB of ``array``'s memory that lie on transparent huge pages: numpy's advice
    splits its mapping, so every mapping it overlaps counts."""
    start, end = array.ctypes.data, array.ctypes.data + array.nbytes
    total = 0
    for block in re.split(r"\n(?=[0-9a-f]+-[0-9a-f]+ )", open("/proc/self/smaps").read()):
        low, high = (int(x, 16) for x in block.split()[0].split("-"))
        found = re.search(r"AnonHugePages:\s+(\d+) kB", block)
        if low < end and start < high and found:
            total += int(found.group(1))
    return total


def allowed(huge: bool) -> np.ndarray:
    """An 8 MB array whose pages numpy asks to be huge or not."""
    from numpy._core.multiarray import _set_madvise_hugepage  # type: ignore[attr-defined]

    before = _set_madvise_hugepage(huge)
    try:
        return np.random.default_rng(0).standard_normal(ELEMENTS)
    finally:
        _set_madvise_hugepage(before)


def ratios(
    op: Callable[[np.ndarray], object], a: np.ndarray, b: np.ndarray, windows: int
) -> list[float]:
    """Per 100 ms window, ``b``'s best time over ``a``'s, the two timed in turn."""
    out = []
    for _ in range(windows):
        best = [float("inf"), float("inf")]
        end = time.perf_counter() + 0.1
        while time.perf_counter() < end:
            for i, x in enumerate((a, b)):
                t0 = time.perf_counter_ns()
                op(x)
                best[i] = min(best[i], time.perf_counter_ns() - t0)
        out.append(best[1] / best[0])
    return out


CHILD = """
import ctypes, sys
sys.path.insert(0, {bench!r})
ctypes.CDLL(None, use_errno=True).prctl(41, 1, 0, 0, 0)  # PR_SET_THP_DISABLE
from ab_hugepages import allowed, huge_kb
print(huge_kb(allowed(True)))
"""


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--windows", type=int, default=30)
    args = p.parse_args()
    print(f"{now_utc()}, {machine_line()}, load {loadavg()}")
    with_huge, without = allowed(True), allowed(False)
    print(
        f"huge pages: {huge_kb(with_huge)} kB of the array allowed them, "
        f"{huge_kb(without)} kB of the other"
    )
    print("| op (8 MB operands) | without / with huge pages, median of windows | range |")
    print("|---|---|---|")
    out = np.empty_like(with_huge)
    for name, op in (
        ("numpy.add.reduce (x.sum())", lambda x: x.sum()),
        ("numpy.add (x + x, into a buffer)", lambda x: np.add(x, x, out=out)),
    ):
        r = ratios(op, with_huge, without, args.windows)
        print(f"| {name} | {statistics.median(r):.3f} | {min(r):.2f}-{max(r):.2f} |")
    bench = str(Path(__file__).resolve().parent)
    child = subprocess.run(
        [sys.executable, "-c", CHILD.format(bench=bench)],
        capture_output=True,
        text=True,
        check=True,
    )
    print(
        f"a process started as the partners are: {child.stdout.strip()} kB of the array "
        "on huge pages"
    )


if __name__ == "__main__":
    main()
