"""The machine-speed references, measured: fixed workloads timed beside every round.

What they are for and how the verdict applies them is in
:mod:`pytest_opprof.gate.speed`; this module only runs and times them, before a
round's profile starts and after it stops, so nothing they do is recorded.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable

import numpy as np

PYTHON_ITERATIONS = 1000
"""Loop iterations of one Python reference run (about 35 us on a 2020s x86 core)."""
SORT_VALUES = 1700
COPY_BYTES = 320_000
"""One native reference run: a sort and a copy larger than L2 (about 35 us together)."""
REPEATS = 3
"""A reference is the fastest of this many runs: noise only adds time, and a burst that
hits one run is dropped (3 x 35 us had a third to half the jitter of one 0.1 ms run)."""


@functools.cache
def _native_inputs() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(values to sort, copy source, copy destination), made at first use."""
    source = np.ones(COPY_BYTES // 8)
    return np.random.default_rng(0).standard_normal(SORT_VALUES), source, np.empty_like(source)


def _spin(iterations: int) -> int:
    acc = 0
    for i in range(iterations):
        acc += i ^ 7
    return acc


def _fastest_ns(run: Callable[[], object]) -> int:
    """The fastest of ``REPEATS`` timed calls of ``run``, ns."""
    times = []
    for _ in range(REPEATS):
        t0 = time.perf_counter_ns()
        run()
        times.append(time.perf_counter_ns() - t0)
    return min(times)


def _sort_and_copy() -> None:
    values, source, destination = _native_inputs()
    np.sort(values)
    np.copyto(destination, source)


def python_reference_ns() -> int:
    """The Python reference: the fastest of ``REPEATS`` runs of the loop, ns."""
    return _fastest_ns(lambda: _spin(PYTHON_ITERATIONS))


def native_reference_ns() -> int:
    """The native reference: the fastest of ``REPEATS`` runs of a sort and a copy, ns."""
    return _fastest_ns(_sort_and_copy)


def references_ns() -> tuple[int, int]:
    """(Python reference, native reference), ns: what brackets a round."""
    return python_reference_ns(), native_reference_ns()


def warm_up() -> None:
    """Run both references until they are warm (the interpreter specialised, pages mapped)."""
    for _ in range(3):
        references_ns()
