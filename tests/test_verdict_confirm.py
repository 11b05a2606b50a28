"""``Verdict.time_undecided``: a judged time within ``CONFIRM_BAND`` of its tolerance,
or beyond it, asks ``--opprof-rounds auto`` for confirmation rounds (test_plugin.py runs
them)."""

from __future__ import annotations

from baseline_helpers import Row, entry, machine, summary_of

from pytest_opprof.summary import TestSummary
from pytest_opprof.verdict import CONFIRM_BAND, Tolerances, Verdict, compare

HERE = machine().fingerprint
TOL = Tolerances(time=0.2, speed_scaled=False)  # the band is at 10%


def rounds_of(kernel_ms: float, other_ms: float = 0.0, rounds: int = 5) -> TestSummary:
    """``kernel`` and ``other`` taking the same self time each round (wall = their sum +
    0.01 ms)."""
    rows = [Row("kernel", 1, self_cpu_time_total=kernel_ms * 1000)]
    if other_ms:
        rows.append(Row("other", 1, self_cpu_time_total=other_ms * 1000))
    wall_us = (kernel_ms + other_ms) * 1000 + 10
    return summary_of([(wall_us, rows) for _ in range(rounds)])


def judge(now: TestSummary, base: TestSummary, tol: Tolerances = TOL) -> Verdict:
    return compare(now, entry(base), fingerprint=HERE, tolerances=tol)


def test_the_band_is_half_the_tolerance() -> None:
    assert CONFIRM_BAND == 0.5
    base = rounds_of(2.0)
    assert not judge(rounds_of(2.18), base).time_undecided  # +9%: decided, pass
    close = judge(rounds_of(2.22), base)  # +11%: passes, but close to 20%
    assert close.time_undecided and not close.failed
    beyond = judge(rounds_of(3.0), base)  # +50%: regressed, confirmed before it fails
    assert beyond.time_undecided and beyond.failed


def test_one_op_near_its_tolerance_is_enough() -> None:
    # The kernel is 12% slower; the test's wall time only 4% (the other op is 2x its size).
    verdict = judge(rounds_of(1.12, 2.0), rounds_of(1.0, 2.0))
    assert verdict.time_undecided and not verdict.failed


def test_faster_is_decided() -> None:
    assert not judge(rounds_of(1.0), rounds_of(2.0)).time_undecided


def test_times_under_the_floor_or_not_judged_never_ask() -> None:
    # Both under the 1 ms floor: not judged, however slower.
    assert not judge(rounds_of(0.5), rounds_of(0.3)).time_undecided
    # Under the rounds times are judged from (3): deterministic figures only.
    assert not judge(rounds_of(3.0, rounds=2), rounds_of(2.0, rounds=2)).time_undecided


def test_the_marker_tolerance_moves_the_band() -> None:
    base, now = rounds_of(2.0), rounds_of(2.3)  # +15%
    assert judge(now, base).time_undecided
    wide = Tolerances(time=1.0, speed_scaled=False)  # band at 50%
    assert not judge(now, base, wide).time_undecided
