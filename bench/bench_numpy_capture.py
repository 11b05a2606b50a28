"""Cost of native numpy capture per op, side by side with torch.profiler.

Run: ``python bench/bench_numpy_capture.py [--ops N] [--repeats R]``.

Each figure is ns per op added over the same loop without any profiler.  The
runs of each variant are interleaved and the fastest of R is kept: on a shared
machine the minimum is the figure least disturbed by other load.  "total"
includes everything a user pays for the op: profile start, the loop, profile
exit (stop + drain) and ``key_averages()``, amortised over N ops; the parts
are shown too.  The torch rows do the same with torch.profiler
(ProfilerActivity.CPU) around ``torch.add`` on tensors of the same size.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import numpy as np

import pytest_opprof as opprof
from pytest_opprof.sources.numpy_source import SOURCE


def _ns(fn: Callable[[], None]) -> int:
    t0 = time.perf_counter_ns()
    fn()
    return time.perf_counter_ns() - t0


def numpy_rows(n: int, repeats: int) -> dict[str, float]:
    x, y, z = np.ones(8), np.ones(8), np.empty(8)
    add = np.add

    def loop() -> None:
        for _ in range(n):
            add(x, y, out=z)

    def profiled(record_shapes: bool, parts: list[tuple[int, int, int]]) -> None:
        t0 = time.perf_counter_ns()
        with opprof.profile(
            capture=["numpy"], record_shapes=record_shapes, profile_memory=False
        ) as prof:
            t1 = time.perf_counter_ns()
            loop()
            t2 = time.perf_counter_ns()
        t3 = time.perf_counter_ns()
        prof.key_averages()
        t4 = time.perf_counter_ns()
        parts.append((t2 - t1, t3 - t2, t4 - t3 + t1 - t0))

    plain, idle, total, total_shapes = [], [], [], []
    parts: list[tuple[int, int, int]] = []
    parts_shapes: list[tuple[int, int, int]] = []
    for _ in range(repeats):
        plain.append(_ns(loop))
        SOURCE.acquire()  # installed once per session by the plugin; per run here
        try:
            idle.append(_ns(loop))
            total.append(_ns(lambda: profiled(False, parts)))
            total_shapes.append(_ns(lambda: profiled(True, parts_shapes)))
        finally:
            SOURCE.release()
    base = min(plain)
    return {
        "numpy.add unhooked (ns/op)": base / n,
        "installed, idle (+ns/op)": (min(idle) - base) / n,
        "recording: in the loop (+ns/op)": (min(p[0] for p in parts) - base) / n,
        "recording: exit + drain (ns/op)": min(p[1] for p in parts) / n,
        "recording: start + key_averages (ns/op)": min(p[2] for p in parts) / n,
        "recording: total (+ns/op)": (min(total) - base) / n,
        "with shapes: in the loop (+ns/op)": (min(p[0] for p in parts_shapes) - base) / n,
        "with shapes: total (+ns/op)": (min(total_shapes) - base) / n,
    }


def torch_rows(n: int, repeats: int) -> dict[str, float]:
    import torch
    from torch.profiler import ProfilerActivity, profile

    x, y, z = torch.ones(8), torch.ones(8), torch.empty(8)

    def loop() -> None:
        for _ in range(n):
            torch.add(x, y, out=z)

    def profiled() -> None:
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            loop()
        prof.key_averages()

    plain, total = [], []
    for _ in range(repeats):
        plain.append(_ns(loop))
        total.append(_ns(profiled))
    return {
        "torch.add unprofiled (ns/op)": min(plain) / n,
        "torch.profiler: total (+ns/op)": (min(total) - min(plain)) / n,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--ops", type=int, default=100_000, help="numpy ops per run")
    parser.add_argument("--torch-ops", type=int, default=10_000, help="torch ops per run")
    parser.add_argument("--repeats", type=int, default=9)
    args = parser.parse_args()
    rows = numpy_rows(args.ops, args.repeats)
    try:
        rows.update(torch_rows(args.torch_ops, max(3, args.repeats // 3)))
    except ImportError:
        print("torch is not installed: no comparison")
    else:
        rows["total / torch.profiler total"] = (
            rows["recording: total (+ns/op)"] / rows["torch.profiler: total (+ns/op)"]
        )
    width = max(map(len, rows))
    for name, value in rows.items():
        print(f"{name:<{width}}  {value:10.3f}")


if __name__ == "__main__":
    main()
