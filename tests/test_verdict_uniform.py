"""A test whose every part ran slower alike, with the same op counts, is not judged on
time: that is a slower machine, not a code change (``machine_moved.uniformly_slower``)."""

from __future__ import annotations

import pytest
from baseline_helpers import Row, entry, machine

from pytest_opprof.gate.summary import RoundFigures, TestSummary, summarize_rounds
from pytest_opprof.gate.verdict import Tolerances, Verdict, compare

HERE = machine().fingerprint
TOL = Tolerances(time=0.15, speed_scaled=False)


def parts(
    kernel_ms: float, add_ms: float, own_ms: float, *, add_calls: int = 4, rounds: int = 7
) -> TestSummary:
    """Rounds of a ``kernel`` scope, ``numpy.add`` calls and the test's own code between them."""
    out = []
    for i in range(rounds):
        jitter = 1 + 0.002 * i
        rows = [
            Row("kernel", 1, self_cpu_time_total=kernel_ms * 1000 * jitter),
            Row("numpy.add", add_calls, self_cpu_time_total=add_ms * 1000 * jitter),
        ]
        wall_ms = (kernel_ms + add_ms + own_ms) * jitter
        out.append(
            RoundFigures.from_events(
                rows, wall_time_ns=round(wall_ms * 1e6), cpu_time_ns=round(wall_ms * 1e6)
            )
        )
    return summarize_rounds(out)


BASE = parts(4.0, 3.0, 3.0)


def judge(now: TestSummary) -> Verdict:
    return compare(now, entry(BASE), fingerprint=HERE, tolerances=TOL)


def test_every_part_slower_alike_is_a_slower_machine_and_not_judged() -> None:
    verdict = judge(parts(4.0 * 1.35, 3.0 * 1.3, 3.0 * 1.4))
    assert verdict.status == "pass" and not verdict.time_judged
    assert verdict.time_not_judged is not None
    assert verdict.time_not_judged.startswith(
        "time not judged: the test's wall time moved +35.0% with all 3 of its parts slower "
        "alike (+30% to +40%)"
    )
    rows = {m.metric: m for m in verdict.metrics}
    assert rows["wall time"].status == "not judged"
    assert not [r for r in verdict.reasons if r.status == "regressed"]


def test_one_part_slower_is_a_code_change_and_fails_naming_it() -> None:
    verdict = judge(parts(4.0 * 1.6, 3.0, 3.0))
    assert verdict.status == "regressed" and verdict.time_judged
    assert [r.op for r in verdict.reasons if r.status == "regressed"] == ["kernel"]


@pytest.mark.parametrize(
    "now",
    [
        # The test's own code held its speed: a part did not move.
        parts(4.0 * 1.4, 3.0 * 1.4, 3.0),
        # More calls of an op: the work changed, whatever the machine did.
        parts(4.0 * 1.35, 3.0 * 1.3, 3.0 * 1.4, add_calls=5),
    ],
    ids=["a-part-held", "more-calls"],
)
def test_uniform_only_when_every_part_moved_with_the_same_counts(now: TestSummary) -> None:
    verdict = judge(now)
    assert verdict.status == "regressed" and verdict.time_judged


def test_a_test_of_fewer_parts_is_judged_as_ever() -> None:
    # One op is nearly all of it: its slowing down is all there is to see.
    base = parts(9.0, 0.3, 0.3)
    now = parts(9.0 * 1.3, 0.3 * 1.3, 0.3 * 1.3)
    verdict = compare(now, entry(base), fingerprint=HERE, tolerances=TOL)
    assert verdict.status == "regressed" and verdict.time_judged
