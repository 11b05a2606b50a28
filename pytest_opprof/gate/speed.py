"""Machine-speed references: fixed workloads timed beside every measured round.

A shared or virtual machine runs the same code 10-50% slower for seconds at a
time (other tenants, frequency, cache and memory-bandwidth pressure), and the
slow phases last long enough to cover every round of a test.  No statistic
over one side's rounds can tell such a phase from a real slowdown.  So each
round is bracketed (before its profile starts and after it stops, so nothing
is recorded) by two references, and the verdict scales each round's times by
the baseline's reference over that round's: times are compared at the
baseline's machine speed.

* The Python reference, a pure-Python loop, scales the self times of
  ``record_function`` scopes: their self time is Python code.
* The native reference, ``np.sort`` of 1,700 floats plus a 320 kB copy, scales
  the self times of captured library ops (numpy, torch): compiled code that is
  compute- or memory-bound.  A library op whose calls take under
  ``SHORT_CALL_NS`` each (in the baseline) follows the Python reference instead:
  a call of a few microseconds is argument parsing, dispatch and allocation.
* Each is the fastest of 3 runs of about 35 us, before and after the round
  (measured by :mod:`pytest_opprof.capture.speed_probe`).
* A reference is applied partly: a round's factor is the reference ratio to the
  power ``PYTHON_EXPONENT`` (0.9) or ``NATIVE_EXPONENT`` (0.5), the slopes the
  study's sessions showed (below the constants).
* Wall and CPU time are scaled as the sum of their parts: each op's self time
  by its own factor, the rest of the round (test code between ops) by the
  Python one.

Why two: in bench/verdict_study.py's probes (8 processes, the same work), a
Python loop tracked the drift of Python work (false regressions at 15%: 28% raw,
10% scaled) but over-corrected BLAS and sort, while a sort plus a copy tracked
those better and not Python work.  A C integer loop tracked neither.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import replace

from pytest_opprof.gate.summary import OpSummary, TestSummary, TimeStats

PYTHON_EXPONENT = 0.9
NATIVE_EXPONENT = 0.5
"""How much of a reference's change is applied: a round's factor is (baseline's reference /
round's reference) ** exponent.  Fitted in bench/verdict_study.py's sessions (15 sessions
of 200 tests, log time change against log reference change): Python scopes followed the
Python reference with slope 0.8-0.9; library ops followed the native one with slopes
0.3 (matmul) to 0.85 (solve), about 0.5 for sort and add.  A full correction (1.0)
over-corrected them: it made matmul and sort noisier than raw times."""
SHORT_CALL_NS = 100_000
"""Library ops whose calls average less than this in the baseline are scaled by the Python
reference (to ``PYTHON_EXPONENT``).  Measured: the example suite (tests of 1-2 ms made of
hundreds of calls of 1-20 us) judged against baselines two hours old flagged 22 of 96 test
runs scaled by the native reference, 6 scaled this way; the verdict study's 11 runs
(big library ops, 0.1-10 ms a call) gave the same or slightly better verdicts."""


def is_native(key: str) -> bool:
    """Whether an op key names a captured library op (numpy, scipy, torch) rather than a scope."""
    return key.startswith(("numpy.", "scipy.")) or "::" in key


def usable(summary: TestSummary) -> bool:
    """Whether ``summary`` has both references, one positive time per round each."""
    return all(
        ref is not None and len(ref.samples_ns) == summary.rounds and min(ref.samples_ns) > 0
        for ref in (summary.speed_ref, summary.native_ref)
    )


def speed_change(now: TestSummary, base: TestSummary) -> float:
    """How much slower both references ran now than in the baseline (0.1 = 10% slower)."""
    assert now.speed_ref and base.speed_ref and now.native_ref and base.native_ref
    python = now.speed_ref.median_ns / base.speed_ref.median_ns
    native = now.native_ref.median_ns / base.native_ref.median_ns
    return (python + native) / 2 - 1.0


def at_speed(summary: TestSummary, base: TestSummary) -> TestSummary:
    """``summary``'s CPU times, round by round, at the machine speed of ``base``'s rounds.

    A scope's times in round i are scaled by ((baseline's median Python reference) /
    (round i's)) ** ``PYTHON_EXPONENT``; a library op's by the same ratio of native
    references ** ``NATIVE_EXPONENT`` (by the Python factor when its calls are short,
    ``SHORT_CALL_NS``); wall and CPU time as the sum of those scaled
    parts plus the rest of the round at the Python factor.  Device times stay as
    measured: the GPU runs neither reference.
    """
    python, native = factors(summary, base)
    ops = {
        key: _scaled_op(op, native if follows_native(key, op, base) else python)
        for key, op in summary.ops.items()
    }
    wall = wall_factors(summary, base, python, native)
    return replace(
        summary,
        wall_time=_scaled(summary.wall_time, wall),
        cpu_time=_scaled(summary.cpu_time, wall),
        # Scaled with the wall time it is part of, so that wall less wait (work time,
        # ``waiting.as_work``) is the work at the baseline's speed.
        wait_time=_scaled(summary.wait_time, wall) if summary.wait_time is not None else None,
        ops=ops,
    )


def factors(summary: TestSummary, base: TestSummary) -> tuple[list[float], list[float]]:
    """Per round of ``summary``, the factors that bring a time to ``base``'s machine speed:
    (Python scopes' and short library calls', library ops') (:func:`at_speed`)."""
    assert usable(summary) and usable(base)
    assert summary.speed_ref and summary.native_ref and base.speed_ref and base.native_ref
    py_base = float(statistics.median(base.speed_ref.samples_ns))
    nat_base = float(statistics.median(base.native_ref.samples_ns))
    python = [(py_base / r) ** PYTHON_EXPONENT for r in summary.speed_ref.samples_ns]
    native = [(nat_base / r) ** NATIVE_EXPONENT for r in summary.native_ref.samples_ns]
    return python, native


def follows_native(key: str, op: OpSummary, base: TestSummary) -> bool:
    """Whether an op's times follow the native reference: a library op whose calls took
    ``SHORT_CALL_NS`` or more each in the baseline (``op``'s own figures for a new op)."""
    if not is_native(key):
        return False
    judged = base.ops.get(key, op)
    return judged.self_cpu_time.median_ns >= SHORT_CALL_NS * max(1, judged.count)


def wall_factors(
    summary: TestSummary, base: TestSummary, python: Sequence[float], native: Sequence[float]
) -> list[float]:
    """Per round, the factor that scales the wall time as the sum of its parts.

    Each op's self time is scaled by its own kind's factor (:func:`follows_native`, by
    ``base``'s figures); the rest of the round (the test's Python code between ops) by
    the Python factor.
    """
    parts = [
        (op.self_cpu_time.samples_ns, native if follows_native(key, op, base) else python)
        for key, op in summary.ops.items()
    ]
    out = []
    for i, wall in enumerate(summary.wall_time.samples_ns):
        own = sum(samples[i] for samples, _ in parts)
        scaled = sum(samples[i] * by[i] for samples, by in parts)
        rest = max(0, wall - own)
        out.append((scaled + rest * python[i]) / wall if wall > 0 else 1.0)
    return out


def _scaled(stats: TimeStats, factors: Sequence[float]) -> TimeStats:
    return TimeStats.from_samples([s * f for s, f in zip(stats.samples_ns, factors, strict=True)])


def _scaled_op(op: OpSummary, factors: Sequence[float]) -> OpSummary:
    return replace(
        op,
        self_cpu_time=_scaled(op.self_cpu_time, factors),
        cpu_time=_scaled(op.cpu_time, factors) if op.cpu_time is not None else None,
    )
