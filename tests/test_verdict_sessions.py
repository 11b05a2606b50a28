"""A pooled baseline's times are judged beyond the range its sessions spanned, as its
deterministic figures are: each session ran in its own process and machine phase."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import pytest
from baseline_helpers import Row, entry, machine, summary_of

from pytest_opprof.gate.summary import TestSummary, TimeStats
from pytest_opprof.gate.verdict import SPREAD_CAP, Tolerances, compare, session_spread

HERE = machine().fingerprint


def rounds(kernel_ms: Sequence[float], sessions: tuple[int, ...] = ()) -> TestSummary:
    """A test that is one 'kernel' scope (ms per round) and 0.1 ms of its own code."""
    summary = summary_of(
        [(ms * 1000 + 100, [Row("kernel", 1, self_cpu_time_total=ms * 1000)]) for ms in kernel_ms]
    )
    return dataclasses.replace(summary, sessions=sessions)


# Three update runs that put the test at 10, 10.5 and 11 ms (pooled median 10.5 ms).
POOLED = rounds([10.0] * 5 + [10.5] * 5 + [11.0] * 5, sessions=(5, 5, 5))


def status(now: TestSummary, base: TestSummary) -> str:
    return compare(now, entry(base), fingerprint=HERE).status


def test_session_spread_is_each_sessions_figure_over_the_pooled_one() -> None:
    tol = Tolerances()
    low, high = session_spread(POOLED.wall_time, POOLED.sessions, tol)
    assert low == pytest.approx(10.1 / 10.6, rel=1e-6)
    assert high == pytest.approx(11.1 / 10.6, rel=1e-6)
    # One session, or rounds that do not add up to the sessions: no spread.
    assert session_spread(POOLED.wall_time, (), tol) == (1.0, 1.0)
    assert session_spread(POOLED.wall_time, (5, 5), tol) == (1.0, 1.0)
    # The same times from one session (no "sessions" in the file): judged on the median.
    assert session_spread(TimeStats.from_samples([1, 2, 3]), (3,), tol) == (1.0, 1.0)


def test_a_time_within_the_slowest_session_widened_by_the_tolerance_passes() -> None:
    # 12.6 ms is +19% on the pooled 10.6 ms, but +13.5% on the slowest session's 11.1.
    assert status(rounds([12.5] * 5), POOLED) == "pass"
    # Beyond the slowest session by more than the tolerance: regressed.
    assert status(rounds([12.9] * 5), POOLED) == "regressed"
    # And faster than the fastest session by more than it: improved.
    assert status(rounds([8.5] * 5), POOLED) == "improved"


def test_a_baseline_of_one_session_is_judged_with_the_widest_range() -> None:
    # One session at the pooled median: its offset unknown, so its range is taken as
    # 1.15 ** SPREAD_CAP each side, wider than the three sessions above measured.
    single = rounds([10.5] * 15)
    bar = 10.6 * 1.15**SPREAD_CAP * 1.15  # 13.1 ms
    assert status(rounds([12.9] * 5), single) == "pass"  # regressed against POOLED
    assert status(rounds([bar * 1.02 - 0.1] * 5), single) == "regressed"
    low = 10.6 / 1.15**SPREAD_CAP / 1.15
    assert status(rounds([low * 0.98 - 0.1] * 5), single) == "improved"


def test_a_session_range_widens_a_tolerance_by_at_most_half_of_it() -> None:
    # One session ran 40% slower (a phase the references did not see): the range would
    # let +60% pass; capped, the bar is 15% beyond 1.15 ** SPREAD_CAP of the pooled.
    wide = rounds([10.0] * 5 + [10.0] * 5 + [14.0] * 5, sessions=(5, 5, 5))
    bar = 10.1 * 1.15**SPREAD_CAP * 1.15
    assert status(rounds([bar * 0.98 - 0.1] * 5), wide) == "pass"
    assert status(rounds([bar * 1.03 - 0.1] * 5), wide) == "regressed"
