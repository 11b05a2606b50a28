"""When a gate run has rounds enough of a test: its time verdict settled before ``auto``'s
``AUTO_ROUNDS``, judged against how far rounds of the same work scatter on this machine now.

A test judged against its committed baseline fails where a time's median round lies
beyond its limit (``gate/verdict.py``: the baseline's bound and the tolerance).  An
unchanged test's rounds lie well inside it, and more rounds would only confirm the pass:
``auto`` stops them once the verdict passes and every judged time's interval, from its
rounds so far, lies below its limit.  The interval is the A/B judge's moderated t
(``ab/paired.py``: :func:`~pytest_opprof.ab.paired.estimate`) on the log of each round
over the limit, its variance shrunk towards a pool of the run's tests
(:class:`~pytest_opprof.ab.paired.NoiseModel`: the differences of each test's successive
log round times, by duration bin), so that three rounds decide what their own scatter,
two degrees of freedom, could not.  A test whose time leans towards its limit, or whose
rounds scatter wider than the pool's, gets every round ``auto`` gave it before.

The rule and the numbers that chose it are in ``docs/gate.md`` ("Rounds in a gate run").
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from pytest_opprof.ab.paired import NoiseModel, estimate
from pytest_opprof.gate.summary import TestSummary
from pytest_opprof.gate.verdict import TimeLimit, Verdict

SETTLE_CONFIDENCE = 0.9
"""The two-sided confidence of a judged time's interval: the rounds stop where its high
end lies below the limit, a one-sided test at 5% that the time is within it (the A/B
judge's pass, ``paired.DEFAULT_CONFIDENCE``)."""
TEST_TIMES = frozenset({"wall time", "device time"})
"""The names of :class:`TimeLimit` that are a test's times, not an op's."""


class RoundNoise:
    """How far rounds of the same test scatter in this run: one pool for test times and
    one for op self times (ops are shorter and scatter more)."""

    def __init__(self) -> None:
        self.tests = NoiseModel()
        self.ops = NoiseModel()

    def add(self, summary: TestSummary, floor_ns: int) -> None:
        """Pool a finished test's rounds: its work time (wall time less the round's wait
        for a CPU: what a verdict judges on rounds that waited, and on clean ones within
        ``max_wait_share`` of it), and the self time of each op whose median reaches
        ``floor_ns`` (the times a verdict judges; their waits are left out already).  One
        round adds nothing."""
        if summary.rounds < 2:
            return
        walls = summary.wall_time.samples_ns
        waits = summary.wait_time.samples_ns if summary.wait_time is not None else ()
        if len(waits) == len(walls):
            walls = tuple(wall - wait for wall, wait in zip(walls, waits, strict=True))
        _add(self.tests, walls)
        for op in summary.ops.values():
            if op.self_cpu_time.median_ns >= floor_ns:
                _add(self.ops, op.self_cpu_time.samples_ns)

    def settled(self, judged: tuple[Verdict, Sequence[TimeLimit]] | None) -> bool:
        """Whether the verdict on a test's rounds so far is settled: it passes, its times
        judged on clean rounds (not work time), and every judged time lies below its limit with
        ``SETTLE_CONFIDENCE``.  ``judged``: the verdict and its limits
        (``compare_limits``; None where the rounds may not stop early)."""
        if judged is None:
            return False
        verdict, limits = judged
        # Not on work time: there an op's time only explains (waiting.py), so a slowed op
        # is no limit, and 5 rounds may yet bring clean ones that judge it.  Measured
        # (bench/gate_rounds.py, load 10): a +20% kernel settled on 4 work rounds, passed.
        if (
            verdict.status != "pass"
            or not verdict.time_judged
            or verdict.work_time
            or verdict.time_undecided
        ):
            return False
        return all(self._below(limit) for limit in limits)

    def _below(self, limit: TimeLimit) -> bool:
        samples = limit.now.samples_ns
        if limit.beyond or limit.limit_ns <= 0 or not samples or min(samples) <= 0:
            return False
        model = self.tests if limit.name in TEST_TIMES else self.ops
        sigma, df = model.sigma(limit.now.median_ns)
        values = [math.log(ns / limit.limit_ns) for ns in samples]
        return estimate(values, sigma, df, SETTLE_CONFIDENCE).high < 0


def _add(model: NoiseModel, samples_ns: Sequence[int]) -> None:
    if len(samples_ns) >= 2 and min(samples_ns) > 0:
        model.add(sorted(samples_ns)[len(samples_ns) // 2], [math.log(ns) for ns in samples_ns])
