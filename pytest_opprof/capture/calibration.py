"""Calibrate the profiler's own cost per event, once per process, at the first profile.

For each event kind the same loop runs with the profiler idle (hooks installed,
nothing recording) and recording inside an open scope; the difference per
iteration is the whole cost of one recorded event.  The part inside the
event's interval is the median duration of an empty event (a ``record_function``
scope with an empty body); numpy's trampolines read the start clock right
before calling the op and the end clock right after, so their whole cost is
counted outside.  The figures are the minimum over a few short batches: the
batch least disturbed by other load.  About 5 ms in all.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable

import numpy as np

from pytest_opprof import _native
from pytest_opprof.capture.records import KIND_NUMPY, KIND_SCOPE
from pytest_opprof.model.overhead import Overhead

_BATCH = 300
_BATCHES = 5


def _best_ns(loop: Callable[[], object]) -> float:
    """Fastest of a few runs of ``loop`` (``_BATCH`` iterations), ns per iteration."""
    best = float("inf")
    for _ in range(_BATCHES):
        t0 = time.perf_counter_ns()
        loop()
        best = min(best, time.perf_counter_ns() - t0)
    return best / _BATCH


def _recorded(loop: Callable[[], object], options: int) -> tuple[float, np.ndarray]:
    """(ns per iteration, the recorded child events) of ``loop`` run in a native session."""
    root = _native.intern("opprof.calibration")
    _native.start(options)
    try:
        _native.scope_push(root)
        try:
            ns = _best_ns(loop)
        finally:
            _native.scope_pop()
    finally:
        _native.stop()
    events = _native.drain().events
    return ns, events[events["name"] != root]


def calibrate(
    set_recording: Callable[[bool], None],
    scope: Callable[[str], object],
    numpy_hooked: bool,
    options: int,
) -> Overhead:
    """Measure the cost per event of scopes (and of numpy ops when ``numpy_hooked``).

    ``set_recording`` flips ``record_function``'s recording flag; ``scope``
    makes a ``record_function``; ``options`` are the session's OPPROF_OPT_* bits
    that change what an event records (shapes, stacks).  Runs while no profile records.
    """
    inside: dict[int, float] = {}
    outside: dict[int, float] = {}
    rf = scope("opprof.calibration.scope")

    def scopes() -> None:
        for _ in range(_BATCH):
            with rf:  # type: ignore[attr-defined]
                pass

    idle = _best_ns(scopes)
    set_recording(True)
    try:
        busy, events = _recorded(scopes, options)
    finally:
        set_recording(False)
    durations = (
        events["end_ns"][events["kind"] == KIND_SCOPE]
        - events["start_ns"][events["kind"] == KIND_SCOPE]
    )
    inside[KIND_SCOPE] = float(statistics.median(durations.tolist())) if len(durations) else 0.0
    outside[KIND_SCOPE] = max(busy - idle - inside[KIND_SCOPE], 0.0)

    if numpy_hooked:
        x, y, z = np.ones(8), np.ones(8), np.empty(8)
        add = np.add

        def ops() -> None:
            for _ in range(_BATCH):
                add(x, y, out=z)

        idle = _best_ns(ops)
        busy, _ = _recorded(ops, options | int(_native.lib.OPPROF_OPT_CAPTURE_NUMPY))
        inside[KIND_NUMPY] = 0.0
        outside[KIND_NUMPY] = max(busy - idle, 0.0)
    return Overhead(inside_ns=inside, outside_ns=outside)
