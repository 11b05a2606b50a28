"""How one figure is judged against its baseline, whatever basis the times are on.

A deterministic figure is judged beyond its baseline's range (:func:`judge_exact`); a
time by its statistic and its rounds beyond the range of its baseline's pooled sessions
(:func:`judge_time`, :func:`session_bounds`), by a tolerance that this machine's
session-to-session spread may widen (:class:`Widths`).  ``docs/gate.md`` has the rules
and the numbers that chose them.
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal, NamedTuple

from pytest_opprof.gate.spread import Spreads, allowance, test_allowance
from pytest_opprof.gate.stats import mann_whitney_greater
from pytest_opprof.gate.summary import Span, TestSummary, TimeStats
from pytest_opprof.gate.tolerance import Tolerances

RowStatus = Literal["pass", "regressed", "improved", "info", "not judged"]

SESSION_PHASE = 0.1
"""A pooled session whose Python speed reference ran more than this off the pooled rounds'
median met another phase of the machine: its level does not widen a time's range
(``docs/gate.md``, "Pooled sessions")."""


def change(baseline: float, now: float) -> float | None:
    """The relative change, signed by the direction of ``now``: an op's self memory can be
    negative (it frees more than it allocates), and -7.5 MB -> -8.2 MB is a fall."""
    if baseline == 0:
        return None if now == 0 else math.inf
    return (now - baseline) / abs(baseline)


def judge_exact(span: Span, now: int, tolerance: float | None, floor: int = 0) -> RowStatus:
    """A deterministic figure ``now`` against the baseline's ``(low, high)``, widened by
    ``tolerance`` and by ``floor`` (absolute); a figure that never varied has low == high.

    A range that varied is first widened by its own width on each side: the range of n
    recorded values holds the next value with probability (n - 1) / (n + 1) only (15
    rounds: 88%), and a one-round gate run of a test whose FLOPs vary from round to round
    fell outside it in 2 of 3 unchanged runs of scikit-learn's tests."""
    if tolerance is None:
        return "info"
    low, high = span
    if high > low:
        width = high - low
        low, high = low - width, high + width
    # Tolerances are shares of the figure's size, so of its magnitude: a negative figure
    # (an op's self memory when it frees more than it allocates) moves the same way.
    if now - high > max(floor, tolerance * abs(high)):
        return "regressed"
    if low - now > max(floor, tolerance * abs(now)):
        return "improved"
    return "pass"


class Sessions(NamedTuple):
    """A baseline's pooled sessions, as a time verdict uses them: the rounds of each (in
    the samples' order), and whether each ran in the pooled rounds' speed phase."""

    counts: tuple[int, ...] = ()
    in_phase: tuple[bool, ...] = ()

    @classmethod
    def of(cls, base: TestSummary) -> Sessions:
        """``base``'s sessions; a session whose Python speed reference ran more than
        ``SESSION_PHASE`` off the pooled rounds' median is out of phase."""
        ref = base.speed_ref
        if len(base.sessions) < 2:
            return NO_SESSIONS
        if ref is None or len(ref.samples_ns) != sum(base.sessions):
            return cls(base.sessions, (True,) * len(base.sessions))
        pooled = statistics.median(ref.samples_ns)
        in_phase, start = [], 0
        for n in base.sessions:
            own = statistics.median(ref.samples_ns[start : start + n])
            start += n
            in_phase.append(abs(own / pooled - 1) <= SESSION_PHASE)
        return cls(base.sessions, tuple(in_phase))


NO_SESSIONS = Sessions()


def session_figures(stats: TimeStats, counts: tuple[int, ...], tol: Tolerances) -> list[int]:
    """The judged statistic of each pooled session's rounds of ``stats`` (``counts``:
    rounds per session, in the samples' order); empty for one session."""
    if len(counts) < 2 or sum(counts) != len(stats.samples_ns):
        return []
    out, start = [], 0
    for n in counts:
        part = stats.samples_ns[start : start + n]
        start += n
        out.append(min(part) if tol.statistic == "min" else round(statistics.median(part)))
    return out


def session_bounds(stats: TimeStats, sessions: Sessions, tol: Tolerances) -> tuple[int, int]:
    """What a time is judged beyond: the baseline's statistic, or the fastest and slowest
    of its in-phase pooled sessions' where they lie outside it."""
    figure = tol.figure(stats)
    per_session = [
        f
        for f, in_phase in zip(
            session_figures(stats, sessions.counts, tol), sessions.in_phase, strict=False
        )
        if in_phase
    ]
    return min([figure, *per_session]), max([figure, *per_session])


def judge_time(
    base: TimeStats,
    now: TimeStats,
    tol: Tolerances,
    judged: bool,
    sessions: Sessions = NO_SESSIONS,
) -> RowStatus:
    """A time: beyond tolerance of its sessions' range by its statistic, and, with
    ``min_rounds`` rounds on both sides, across its rounds (Mann-Whitney, ``alpha``)."""
    if not judged:
        return "not judged"
    b, c = tol.figure(base), tol.figure(now)
    if max(b, c) < tol.min_time_ns:
        return "not judged"
    low, high = session_bounds(base, sessions, tol)
    enough = min(len(base.samples_ns), len(now.samples_ns)) >= tol.min_rounds
    if c > high * (1 + tol.time):
        if not enough:
            return "regressed"
        scaled = [s * (1 + tol.time) for s in base.samples_ns]
        p = mann_whitney_greater(now.samples_ns, scaled)
        return "regressed" if p < tol.alpha else "pass"
    if c * (1 + tol.time) < low:
        if not enough:
            return "improved"
        scaled = [s * (1 + tol.time) for s in now.samples_ns]
        p = mann_whitney_greater(base.samples_ns, scaled)
        return "improved" if p < tol.alpha else "pass"
    return "pass"


def beyond(
    base: TimeStats, now: int, sessions: Sessions, tol: Tolerances, tolerance: float | None
) -> bool:
    """Whether ``now`` lies beyond ``tolerance`` (None: the time tolerance) of the range of
    ``base``'s sessions, either way."""
    width = tol.time if tolerance is None else max(tol.time, tolerance)
    low, high = session_bounds(base, sessions, tol)
    return now > high * (1 + width) or now * (1 + width) < low


def steady(stats: TimeStats, sessions: Sessions, tol: Tolerances) -> bool:
    """Whether a time's in-phase pooled sessions agree within its tolerance (one session:
    yes)."""
    low, high = session_bounds(stats, sessions, tol)
    return high <= max(low, 1) * (1 + tol.time)


@dataclass(frozen=True)
class Widths:
    """The tolerances times are judged beyond where this machine's sessions move them
    more than the time tolerance allows (``spread.py``): the test's time, and each op's
    time where it could fail the test alone."""

    test: float | None = None
    ops: Mapping[str, float] = dataclasses.field(default_factory=dict)

    @classmethod
    def of(cls, base: TestSummary, spreads: Spreads, tol: Tolerances) -> Widths:
        if not spreads:
            return cls()
        # Whole percents: a tolerance is read, and 25.77% says no more than 26%.
        test = round(test_allowance(base, spreads, tol.statistic), 2)
        ops = {key: round(allowance(spreads[key]), 2) for key in base.ops if key in spreads}
        return cls(
            test if test > tol.time else None,
            {key: width for key, width in ops.items() if width > tol.time},
        )

    def of_op(self, key: str, tol: Tolerances) -> float:
        return self.ops.get(key, tol.time)
