"""Calibrate the profiler's own cost per event: at a process's first profile, then about
once a minute (the profiler uses the median of the last few).

For each event kind the same loop runs with the profiler idle (hooks installed,
nothing recording) and recording inside an open scope; the difference per
iteration is the whole cost of one recorded event.  The part inside the
event's interval is the median duration of an empty event (a ``record_function``
scope with an empty body); numpy's trampolines read the start clock right
before calling the op and the end clock right after, so their whole cost is
counted outside.  The figures are the minimum over a few short batches, idle
and recording alternating: the batch least disturbed by other load.  About 15 ms in all.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable

import numpy as np

from pytest_opprof import _native
from pytest_opprof.capture.overhead import Overhead
from pytest_opprof.native_layout.records import KIND_NUMPY, KIND_SCOPE

# Scopes run long batches: recording costs more per event once the event buffer no longer
# fits in the caches, as in a real test's thousands of events, and 300-scope batches
# measured a scope's cost outside its interval 30 ns short (a nested test's root read 3%
# high after subtraction).  numpy ops keep short ones: their figure did not move.
_SCOPE_BATCH = 3000
_OP_BATCH = 300
_BATCHES = 5


def _timed_ns(loop: Callable[[], object]) -> int:
    t0 = time.perf_counter_ns()
    loop()
    return time.perf_counter_ns() - t0


def _recorded_ns(loop: Callable[[], object], options: int) -> tuple[int, np.ndarray]:
    """(ns, the recorded child events) of one run of ``loop`` in a native session."""
    root = _native.intern("opprof.calibration")
    _native.start(options)
    try:
        _native.scope_push(root)
        try:
            ns = _timed_ns(loop)
        finally:
            _native.scope_pop()
    finally:
        _native.stop()
    events = _native.drain().events
    return ns, events[events["name"] != root]


def _idle_and_busy(
    loop: Callable[[], object], iterations: int, options: int, set_recording: Callable[[bool], None]
) -> tuple[float, float, np.ndarray, float]:
    """(idle ns, recording ns) per iteration of ``loop`` (``iterations`` of them), its
    events, and the median per-iteration difference of the pairs (recording less idle).

    Idle and recording batches alternate after a warm-up pair, and each side keeps its
    fastest batch: a process's first thousand iterations run slower here (caches, branch
    predictors, the interpreter specialising the loop: 231 against 172 ns a scope), and
    with one side measured first that warm-up would land on that side only.
    """
    idle = busy = float("inf")
    kept = np.empty(0)
    differences = []
    for batch in range(_BATCHES + 1):
        idle_ns = _timed_ns(loop)
        set_recording(True)
        try:
            busy_ns, events = _recorded_ns(loop, options)
        finally:
            set_recording(False)
        if batch:  # the first pair warms up
            idle = min(idle, idle_ns)
            busy = min(busy, busy_ns)
            differences.append((busy_ns - idle_ns) / iterations)
            kept = events if len(kept) == 0 else np.concatenate([kept, events])
    return idle / iterations, busy / iterations, kept, statistics.median(differences)


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
        for _ in range(_SCOPE_BATCH):
            with rf:  # type: ignore[attr-defined]
                pass

    idle, busy, events, _ = _idle_and_busy(scopes, _SCOPE_BATCH, options, set_recording)
    durations = (
        events["end_ns"][events["kind"] == KIND_SCOPE]
        - events["start_ns"][events["kind"] == KIND_SCOPE]
    )
    inside[KIND_SCOPE] = float(np.median(durations)) if len(durations) else 0.0
    outside[KIND_SCOPE] = max(busy - idle - inside[KIND_SCOPE], 0.0)

    if numpy_hooked:
        x, y, z = np.ones(8), np.ones(8), np.empty(8)
        add = np.add

        def ops() -> None:
            for _ in range(_OP_BATCH):
                add(x, y, out=z)

        numpy_options = options | int(_native.lib.OPPROF_OPT_CAPTURE_NUMPY)
        idle, busy, _, paired = _idle_and_busy(ops, _OP_BATCH, numpy_options, lambda on: None)
        inside[KIND_NUMPY] = 0.0
        # A batch of 300 ops is 30-60 us: on a VM whose speed swings from moment to moment
        # the two sides' fastest batches can fall in different moments, and their
        # difference came out 0 in one CI run here.  The pairs, each measured together,
        # carry the same moment on both sides; their median stands in then.
        fastest = busy - idle
        outside[KIND_NUMPY] = max(fastest if fastest > 0 else paired, 0.0)
    return Overhead(inside_ns=inside, outside_ns=outside)
