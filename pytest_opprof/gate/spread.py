"""How far this machine moves each op's time from one session to the next.

A baseline pools the rounds of several update runs (``pooling.py``), and the
verdict judges a time beyond the range of those sessions (``judge.session_bounds``).  Three
sessions of one test are too few to see how an op's time moves on this machine:
on a shared VM, memory-bound library ops (``numpy.add`` of a million floats,
``add.reduce``, ``linalg.solve``) ran 10-100% slower or faster for minutes at a
time, with no wait for a CPU to subtract and no speed reference that moved with
them (their L3 share and memory bandwidth are other tenants' to take).  When the
three sessions happen to agree, the next one fails the test.

But an op key recurs across the tests of a baseline file, and each test's sessions
show the same machine.  So for each op key, :func:`op_spreads` takes, per test, the
standard deviation of the log of its per-session figure (the verdict's statistic over
the session's clean rounds, at the session's own machine speed: ``speed.at_speed``),
and keeps the median over the file's tests.  Measured in a quiet baseline of
``bench/busy_study.py`` (5 files of 20 tests, 2026-11-24 21:10 UTC; the plain deviation,
about 0.7 of the estimate below): ``kernel`` (a
Python loop) 0.02-0.035, ``numpy.matmul`` 0.04-0.06, ``numpy.ndarray.sort`` 0.02-0.08,
``numpy.add`` and ``add.reduce`` 0.035-0.12.

The deviation of two or three values is mostly smaller than the deviation they are
drawn from (the median sample deviation of three is 0.83 of it): each test's is divided
by that median (``_MEDIAN_SD``), so that the median over tests estimates the machine's.

A time is then judged beyond its tolerance or beyond what that spread allows,
whichever is wider (:func:`allowance`): ``SPREAD_Z`` standard deviations of the
difference of two sessions, so a ``numpy.add`` of spread 0.13 is judged beyond 25%
and a Python scope of 0.04 keeps the 15% default (8%).  A test's own time is allowed the
sum of its ops' allowances weighted by their share of it (:func:`test_allowance`):
the slow phases move all memory-bound ops of a round together, so their shares add.

The rest of a test's time, what no op with a spread covers (ops too short or in too few
tests to have one, the test's own code), is allowed what the file's tests' own times show
(``TEST_KEY``: each test's wall time per session, the same way, ``TEST_Z`` standard
deviations).  On the example suite (``bench/gate_sessions.py``, 2026-11-25) nearly every
false failure was the test's time: 16-40% slower with its refs flat, while its ops' spreads
covered half of it.  Measured on 42 kept gate sessions, judged against baselines pooled
from three of them in a row: false failures 78 -> 25 of about 3,050 judged verdicts,
sessions failing 57 -> 23 of 546; on 30 sessions run after the rule was chosen, 24 -> 18
of 1,650 and 21 -> 15 of 270 (against the baselines committed before, 4 of 30 sessions failing
either way).  Re-scored on the four kept ``bench/busy_study.py`` runs, false failures
29 -> 19 of 11,292 (numpy's ``test_linalg`` 16 -> 9), slowed tests detected 420 -> 422
of those judged.  ``SPREAD_Z`` 1.4 on the unbiased spread is about the 2.0 the op rule
was scored with on the plain deviation of three sessions (0.82 x 0.83 = 0.68 of it);
2.0 there lost 9 of 25 detections in the numpy scenario.

The gate computes the table once per baseline file and session (``BaselineSession.spreads``):
92 us an entry of 15 pooled rounds and 10 ops (the study's files), so about a second for a
suite of 10,000 such entries.

Re-scored on ``bench/busy_study.py``'s kept runs (``bench/rescore_busy.py``: seven runs,
identical measurements judged by the gate before and after, the co-run rule of
``verdict.py`` included; the last two runs were recorded after the rules were chosen),
false failures on unchanged code: loaded 46 -> 23 of 2,100, quiet 21 -> 12 of 1,800,
``-n 2`` 7 -> 1 of 1,200, baseline loaded and judged quiet 66 -> 26 of 1,800, the
reverse 48 -> 31 of 2,100, numpy's ``test_linalg`` 25 -> 25 of 3,969; slowed tests
detected the same in every scenario but one more and one fewer in the crossed ones.
On the first six runs, ``SPREAD_Z`` 1.5 left 24, 14, 2, 29 and 33 false failures
(loaded, quiet, ``-n 2``, crossed) against 22, 11, 1, 27 and 30 at 2; 2.5 left 19, 9,
1, 21 and 29 and missed 3 more slowed tests.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Mapping, Sequence

from pytest_opprof.gate import speed
from pytest_opprof.gate.summary import TestSummary, TimeStats
from pytest_opprof.gate.waiting import WAIT_SHARE_LIMIT, clean_rounds

Spreads = Mapping[str, float]
"""Op key -> the standard deviation of the log of its per-session figure, over a
baseline file's tests (module docstring); ``TEST_KEY`` -> the same of the tests' times."""

_MEDIAN_SD = (1.0, 0.6745, 0.8326, 0.8881, 0.9161, 0.9330)
"""The median of the sample standard deviation of n normal values over their sd, n = 1..6."""
TEST_KEY = "[test]"
"""The key under which :func:`op_spreads` gives the spread of the tests' own times (no op
key is bracketed but ``[other ops]``)."""
SPREAD_Z = 1.4
"""Standard deviations of the difference of two sessions' figures that an op's time may
move before it is judged to have changed (module docstring for the numbers)."""
TEST_Z = 2.0
"""The same for the part of a test's time that its ops' spreads do not cover."""
MIN_TESTS = 3
"""Tests of a file that must show an op's spread before it counts: fewer is no estimate."""
FLOOR_NS = 100_000
"""Ops whose session figure is under this are left out: their time is argument parsing
and dispatch, Python work that the Python speed reference follows."""


def op_spreads(
    summaries: Iterable[TestSummary],
    statistic: str = "median",
    limit: float | None = WAIT_SHARE_LIMIT,
) -> dict[str, float]:
    """Per op key, the median over ``summaries`` (a baseline file's entries) of the
    spread of its per-session figure; only keys that ``MIN_TESTS`` pooled summaries
    show (two sessions or more, a clean round in each, a figure of ``FLOOR_NS``)."""
    seen: dict[str, list[float]] = {}
    for summary in summaries:
        if len(summary.sessions) < 2 or sum(summary.sessions) != summary.rounds:
            continue
        sessions = _clean_sessions(summary, limit)
        if sessions is None:
            continue
        # At the session's own machine speed (speed.at_speed), without building the
        # scaled summary: this runs over every entry of a file, once a session.
        scale = speed.factors(summary, summary) if speed.usable(summary) else None
        walls: Sequence[float] = summary.wall_time.samples_ns
        if scale is not None and all(
            len(op.self_cpu_time.samples_ns) == summary.rounds for op in summary.ops.values()
        ):
            by_round = speed.wall_factors(summary, summary, *scale)
            walls = [w * f for w, f in zip(walls, by_round, strict=True)]
        figures = [_figure([walls[i] for i in rounds], statistic) for rounds in sessions]
        if min(figures) >= FLOOR_NS:
            seen.setdefault(TEST_KEY, []).append(_log_spread(figures))
        for key, op in summary.ops.items():
            samples: Sequence[float] = op.self_cpu_time.samples_ns
            if len(samples) != summary.rounds or max(samples) < FLOOR_NS / 2:
                continue
            if scale is not None:
                by = scale[1] if speed.follows_native(key, op, summary) else scale[0]
                samples = [s * f for s, f in zip(samples, by, strict=True)]
            figures = [_figure([samples[i] for i in rounds], statistic) for rounds in sessions]
            if min(figures) < FLOOR_NS:
                continue
            seen.setdefault(key, []).append(_log_spread(figures))
    return {key: statistics.median(s) for key, s in seen.items() if len(s) >= MIN_TESTS}


def _log_spread(figures: Sequence[float]) -> float:
    """The standard deviation of the logs of ``figures``, scaled so that its median over
    many tests is the machine's (the sample deviation of few values is mostly smaller)."""
    logs = [math.log(f) for f in figures]
    mean = sum(logs) / len(logs)
    sd = math.sqrt(sum((x - mean) ** 2 for x in logs) / (len(logs) - 1))
    return sd / _MEDIAN_SD[min(len(logs), len(_MEDIAN_SD)) - 1]


def _clean_sessions(summary: TestSummary, limit: float | None) -> list[list[int]] | None:
    """Per pooled session, the indexes of its rounds that waited at most ``limit`` of their
    wall time (every round where waiting was not measured, or ``limit`` is None); None when
    a session has none."""
    clean = clean_rounds(summary, limit) if limit is not None else None
    kept = set(range(summary.rounds) if clean is None else clean)
    out, start = [], 0
    for n in summary.sessions:
        rounds = [i for i in range(start, start + n) if i in kept]
        if not rounds:
            return None
        out.append(rounds)
        start += n
    return out


def _figure(samples: Sequence[float], statistic: str) -> float:
    """The verdict's statistic of raw samples (``statistics.median`` was a third of
    :func:`op_spreads` on 3-5 samples)."""
    if statistic == "min":
        return float(min(samples))
    ordered = sorted(samples)
    mid = len(ordered) // 2
    return float(ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2)


def _stat(stats: TimeStats, statistic: str) -> int:
    """The verdict's statistic of a time (``Tolerances.figure``)."""
    return stats.min_ns if statistic == "min" else stats.median_ns


def allowance(spread: float, z: float = SPREAD_Z) -> float:
    """The relative change two sessions of an op of this spread show at ``z`` standard
    deviations (the difference of two has sqrt(2) times the spread)."""
    return z * math.sqrt(2.0) * spread


def test_allowance(base: TestSummary, spreads: Spreads, statistic: str = "median") -> float:
    """The change this machine's sessions allow a test's time: its ops' allowances,
    weighted by their share of the baseline's time (at most the whole of it each), and
    the file's test-time allowance for the share that no op's spread covers."""
    if not spreads:
        return 0.0
    wall = max(_stat(base.wall_time, statistic), 1)
    total = explained = 0.0
    for key, op in base.ops.items():
        spread = spreads.get(key)
        if spread:
            share = min(1.0, _stat(op.self_cpu_time, statistic) / wall)
            total += share * allowance(spread)
            explained += share
    own = spreads.get(TEST_KEY)
    if own:
        total += max(0.0, 1.0 - explained) * allowance(own, TEST_Z)
    return total
