"""``Verdict.time_undecided``: a judged time whose statistic is beyond its tolerance asks
``--opprof-rounds auto`` for confirmation rounds before the test can fail
(test_plugin.py runs them)."""

from __future__ import annotations

from collections.abc import Sequence

from baseline_helpers import Row, entry, machine, summary_of

from pytest_opprof.gate.summary import TestSummary
from pytest_opprof.gate.verdict import CONFIRM_BAND, Tolerances, Verdict, compare

HERE = machine().fingerprint
TOL = Tolerances(time=0.2, speed_scaled=False)


def rounds_of(kernel_ms: float | Sequence[float], other_ms: float = 0.0) -> TestSummary:
    """``kernel`` (the same time in 5 rounds, or one per round) and ``other`` ops; the
    wall time is their sum + 0.01 ms."""
    kernel = [kernel_ms] * 5 if isinstance(kernel_ms, float) else list(kernel_ms)
    out = []
    for ms in kernel:
        rows = [Row("kernel", 1, self_cpu_time_total=ms * 1000)]
        if other_ms:
            rows.append(Row("other", 1, self_cpu_time_total=other_ms * 1000))
        out.append(((ms + other_ms) * 1000 + 10, rows))
    return summary_of(out)


def judge(now: TestSummary, base: TestSummary, tol: Tolerances = TOL) -> Verdict:
    return compare(now, entry(base), fingerprint=HERE, tolerances=tol)


def test_a_time_beyond_its_tolerance_is_undecided() -> None:
    assert CONFIRM_BAND == 1.0
    base = rounds_of(2.0)
    assert not judge(rounds_of(2.3), base).time_undecided  # +15%: within 20%
    beyond = judge(rounds_of(3.0), base)  # +50%: regressed, confirmed before it fails
    assert beyond.time_undecided and beyond.failed


def test_a_median_beyond_tolerance_that_the_rounds_do_not_bear_out_is_undecided() -> None:
    # The median is 25% slower, but two baseline rounds were far slower still: the
    # Mann-Whitney test keeps it from regressing, and more rounds may settle it.
    base = rounds_of([2.0, 2.0, 2.0, 4.0, 4.0])
    verdict = judge(rounds_of([2.5, 2.5, 2.5, 2.0, 2.0]), base)
    assert verdict.time_undecided and not verdict.failed


def test_an_op_beyond_its_tolerance_explains_and_fails_only_what_it_could_fail_alone() -> None:
    # The kernel is 30% slower; it adds 1.4% of the test's time (the other op is 20x its
    # size), under a tenth of the tolerance (20%): a reason shown, not a failure, and no
    # confirmation rounds are asked.
    verdict = judge(rounds_of(1.3, 20.0), rounds_of(1.0, 20.0))
    wall = next(m for m in verdict.metrics if m.metric == "wall time")
    assert wall.status == "pass"
    assert not verdict.failed and not verdict.time_undecided
    (kernel,) = [r for r in verdict.reasons if r.op == "kernel"]
    assert kernel.kind == "slower" and kernel.status == "info"
    # The kernel adds 23% of the test's time while the other op got faster: alone it is
    # beyond the test's tolerance (20%), so it fails the test, confirmed first.
    verdict = judge(rounds_of(1.7, 1.4), rounds_of(1.0, 2.0))
    assert next(m for m in verdict.metrics if m.metric == "wall time").status == "pass"
    assert verdict.time_undecided and verdict.failed
    assert [r.op for r in verdict.reasons if r.status == "regressed"] == ["kernel"]


def test_faster_is_decided() -> None:
    assert not judge(rounds_of(1.0), rounds_of(2.0)).time_undecided


def test_times_under_the_floor_or_not_judged_never_ask() -> None:
    # Both under the 1 ms floor: not judged, however slower.
    assert not judge(rounds_of(0.5), rounds_of(0.3)).time_undecided
    # Under the rounds times are judged from (3): deterministic figures only.
    assert not judge(rounds_of([3.0, 3.0]), rounds_of([2.0, 2.0])).time_undecided


def test_the_marker_tolerance_moves_the_line() -> None:
    base, now = rounds_of(2.0), rounds_of(2.6)  # +30%
    assert judge(now, base).time_undecided
    wide = Tolerances(time=1.0, speed_scaled=False)
    assert not judge(now, base, wide).time_undecided
