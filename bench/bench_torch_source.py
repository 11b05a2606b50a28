"""Overhead per aten op: pytest-opprof's torch source vs torch.profiler vs a TorchDispatchMode.

Each variant runs the same loop of ``torch.add`` on small tensors (an aten op
whose own cost is small, so the profiler's share shows) inside one profile,
median of several repeats.  "loop" is the time inside the profile; "total"
adds start, stop and collection up to a key_averages() table's rows.

    .venv/bin/python bench/bench_torch_source.py [--ops 2000] [--repeats 7]
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import torch
from torch.utils._python_dispatch import TorchDispatchMode

import pytest_opprof as opprof


class CountingMode(TorchDispatchMode):  # type: ignore[no-untyped-call]  # torch's, untyped
    """The cheapest Python-per-op capture: count calls, nothing else."""

    def __init__(self) -> None:
        super().__init__()  # type: ignore[no-untyped-call]
        self.calls = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
        self.calls += 1
        return func(*args, **(kwargs or {}))


def run(variant: str, ops: int) -> tuple[float, float]:
    """(loop ns, total ns) for one repeat."""
    a, b = torch.ones(8), torch.ones(8)

    def loop() -> float:
        t0 = time.perf_counter_ns()
        for _ in range(ops):
            torch.add(a, b)
        return time.perf_counter_ns() - t0

    t0 = time.perf_counter_ns()
    if variant == "no profiler":
        inner = loop()
    elif variant == "opprof torch source":
        with opprof.profile(capture=["torch"], profile_memory=True) as prof:
            inner = loop()
        prof.key_averages()
    elif variant == "opprof torch, no memory":
        with opprof.profile(capture=["torch"], profile_memory=False) as prof:
            inner = loop()
        prof.key_averages()
    elif variant == "torch.profiler":
        with torch.profiler.profile(record_shapes=True, profile_memory=True) as tp:
            inner = loop()
        tp.key_averages()
    elif variant == "torch.profiler, plain":
        with torch.profiler.profile() as tp:
            inner = loop()
        tp.key_averages()
    elif variant == "TorchDispatchMode (Python per op)":
        with CountingMode():
            inner = loop()
    else:
        raise ValueError(variant)
    return inner, time.perf_counter_ns() - t0


VARIANTS = [
    "no profiler",
    "opprof torch source",
    "opprof torch, no memory",
    "torch.profiler",
    "torch.profiler, plain",
    "TorchDispatchMode (Python per op)",
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ops", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    measure: Callable[[str], tuple[float, float]] = lambda v: run(v, args.ops)  # noqa: E731
    for v in VARIANTS:  # warm every path once
        measure(v)
    results: dict[str, list[tuple[float, float]]] = {v: [] for v in VARIANTS}
    for _ in range(args.repeats):
        for v in VARIANTS:  # interleaved, so drift hits every variant alike
            results[v].append(measure(v))
    base_loop = statistics.median(r[0] for r in results["no profiler"]) / args.ops
    base_total = statistics.median(r[1] for r in results["no profiler"]) / args.ops
    print(f"torch {torch.__version__}; {args.ops} x torch.add(8 floats), median of {args.repeats}")
    print(f"{'variant':36} {'loop ns/op':>11} {'+ns/op':>8} {'total ns/op':>12} {'+ns/op':>8}")
    for v in VARIANTS:
        loop_ns = statistics.median(r[0] for r in results[v]) / args.ops
        total_ns = statistics.median(r[1] for r in results[v]) / args.ops
        print(
            f"{v:36} {loop_ns:11.0f} {loop_ns - base_loop:8.0f} "
            f"{total_ns:12.0f} {total_ns - base_total:8.0f}"
        )


if __name__ == "__main__":
    main()
