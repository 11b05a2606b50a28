"""Machine-speed reference: a fixed workload timed beside every measured round.

A shared or virtual machine runs the same code 10-50% slower for seconds at a
time (other tenants, frequency, cache pressure), and the slow phases last long
enough to cover every round of a test.  No statistic over one side's rounds
can tell such a phase from a real slowdown.  So each round is bracketed by a
fixed pure-Python loop (about 0.1 ms; before the round's profile starts and
after it stops, so it records nothing), and the verdict scales each round's
times by the baseline's reference over that round's: times are compared at
the baseline's machine speed.

A pure-Python loop, not a C loop: in bench/verdict_study.py and its probes
the interpreter's speed drifted with the Python-level work of tests (and
partly with numpy's), while a C integer loop stayed flat through the same
phases and did not track them.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Sequence
from dataclasses import replace

from pytest_opprof.summary import OpSummary, TestSummary, TimeStats

REFERENCE_ITERATIONS = 3000
"""Loop iterations of one reference run (about 0.1 ms on a 2020s x86 core)."""


def _spin(iterations: int) -> int:
    acc = 0
    for i in range(iterations):
        acc += i ^ 7
    return acc


def reference_ns() -> int:
    """Time of one reference run, ns."""
    t0 = time.perf_counter_ns()
    _spin(REFERENCE_ITERATIONS)
    return time.perf_counter_ns() - t0


def warm_up() -> None:
    """Run the reference until the interpreter has specialised it (first runs are slower)."""
    for _ in range(3):
        reference_ns()


def usable(summary: TestSummary) -> bool:
    """Whether ``summary`` has one positive reference time per round."""
    ref = summary.speed_ref
    return ref is not None and len(ref.samples_ns) == summary.rounds and min(ref.samples_ns) > 0


def speed_change(now: TestSummary, base: TestSummary) -> float:
    """How much slower the reference ran now than in the baseline (0.1 = 10% slower)."""
    assert now.speed_ref is not None and base.speed_ref is not None
    return now.speed_ref.median_ns / base.speed_ref.median_ns - 1.0


def at_speed(summary: TestSummary, reference_ns: float) -> TestSummary:
    """``summary`` with every CPU time of round i scaled by ``reference_ns / ref_i``.

    Device times stay as measured: the GPU does not run the reference.
    """
    ref = summary.speed_ref
    assert ref is not None and usable(summary)
    factors = [reference_ns / r for r in ref.samples_ns]
    return replace(
        summary,
        wall_time=_scaled(summary.wall_time, factors),
        cpu_time=_scaled(summary.cpu_time, factors),
        ops={key: _scaled_op(op, factors) for key, op in summary.ops.items()},
    )


def _scaled(stats: TimeStats, factors: Sequence[float]) -> TimeStats:
    return TimeStats.from_samples([s * f for s, f in zip(stats.samples_ns, factors, strict=True)])


def _scaled_op(op: OpSummary, factors: Sequence[float]) -> OpSummary:
    return replace(
        op,
        self_cpu_time=_scaled(op.self_cpu_time, factors),
        cpu_time=_scaled(op.cpu_time, factors),
    )


def baseline_speed_ns(base: TestSummary) -> float:
    """The reference time both sides are scaled to: the baseline's median."""
    assert base.speed_ref is not None
    return float(statistics.median(base.speed_ref.samples_ns))
