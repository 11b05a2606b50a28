"""A time that varies between a baseline's pooled sessions is judged beyond their range,
and an op whose sessions disagree fails no test alone."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import pytest
from baseline_helpers import Row, entry, machine, pooled, summary_of

from pytest_opprof.gate.summary import RoundFigures, TestSummary, summarize_rounds
from pytest_opprof.gate.verdict import Sessions, Tolerances, Verdict, compare, session_figures
from pytest_opprof.gate.waiting import as_work, only_rounds

HERE = machine().fingerprint
TOL = Tolerances(time=0.15, speed_scaled=False)


def session(
    kernel_us: float, add_us: float = 100.0, rounds: int = 5, speed_ref_us: float | None = None
) -> TestSummary:
    """One session's rounds of a test: ``kernel`` and ``numpy.add``, a little noise;
    with ``speed_ref_us``, the speed references ran beside each round (both that long)."""
    if speed_ref_us is None:
        out = []
        for i in range(rounds):
            wobble = 1 + 0.01 * (i - rounds // 2)
            k, a = kernel_us * wobble, add_us * wobble
            out.append((k + a, [Row("kernel", 1, k, k), Row("numpy.add", 1, a, a)]))
        return summary_of(out)
    ref_ns = round(speed_ref_us * 1000)
    figures = []
    for i in range(rounds):
        wobble = 1 + 0.01 * (i - rounds // 2)
        k, a = kernel_us * wobble, add_us * wobble
        figures.append(
            RoundFigures.from_events(
                [Row("kernel", 1, k, k), Row("numpy.add", 1, a, a)],
                wall_time_ns=round((k + a) * 1000),
                cpu_time_ns=round((k + a) * 1000),
                speed_ref_ns=ref_ns,
                native_ref_ns=ref_ns,
            )
        )
    return summarize_rounds(figures)


def judge(now: TestSummary, base: TestSummary) -> Verdict:
    return compare(now, entry(base), fingerprint=HERE, tolerances=TOL)


def test_a_time_is_judged_beyond_the_slowest_session() -> None:
    base = pooled(session(1000.0), session(1000.0), session(1250.0))
    assert base.sessions == (5, 5, 5)
    assert session_figures(base.wall_time, base.sessions, TOL) == [1100000, 1100000, 1350000]
    # +20% against the pooled rounds (1.1 ms), within 15% of the slowest session (1.35).
    verdict = judge(session(1220.0), base)
    assert verdict.status == "pass"
    (note,) = [n for n in verdict.notes if "sessions ran" in n]
    assert "+19% against the baseline's pooled rounds" in note
    assert "its 3 sessions ran 1.1-1.35 ms" in note
    # Beyond the slowest session by more than the tolerance: a regression.
    assert judge(session(1500.0), base).status == "regressed"


def test_without_pooled_sessions_the_same_rounds_judge_the_pooled_figure() -> None:
    # The same 15 rounds recorded as one session: no range is known, +20% regresses.
    samples = [session(1000.0), session(1000.0), session(1250.0)]
    one = summary_of(
        [
            (k + a, [Row("kernel", 1, k, k), Row("numpy.add", 1, a, a)])
            for s in samples
            for k, a in zip(
                s.ops["kernel"].self_cpu_time.samples_ns,
                s.ops["numpy.add"].self_cpu_time.samples_ns,
                strict=True,
            )
            for k, a in [(k / 1000, a / 1000)]
        ]
    )
    assert one.sessions == ()
    assert judge(session(1220.0), one).status == "regressed"


def op_sessions(adds: Sequence[float]) -> TestSummary:
    return pooled(*(session(20000.0, add) for add in adds))


def test_an_op_whose_sessions_disagree_fails_no_test_alone() -> None:
    # numpy.add 40% slower adds 3% to a test within its tolerance: an op alone.
    now = session(20000.0, 2100.0)
    steady = judge(now, op_sessions([1500.0, 1500.0, 1500.0]))
    assert steady.status == "regressed"
    (add,) = [r for r in steady.reasons if r.op == "numpy.add"]
    assert add.status == "regressed"
    # Its sessions ran 1.2-1.5 ms (a co-runner sharing the memory bandwidth, say): the
    # same slowdown, beyond the slowest session too, is shown and fails nothing.
    varying = judge(now, op_sessions([1200.0, 1500.0, 1500.0]))
    assert varying.status == "pass"
    (add,) = [r for r in varying.reasons if r.op == "numpy.add"]
    assert add.kind == "slower" and add.status == "info"


def test_rounds_left_out_keep_their_sessions() -> None:
    base = pooled(session(1000.0), session(1000.0, rounds=4), session(1250.0))
    assert base.sessions == (5, 4, 5)
    kept = only_rounds(base, [0, 1, 5, 6, 7, 8])
    assert kept.sessions == (2, 4)
    assert kept.wall_time.samples_ns == tuple(
        base.wall_time.samples_ns[i] for i in (0, 1, 5, 6, 7, 8)
    )
    # Rounds of one session only: no range to judge beyond.
    assert only_rounds(base, [9, 10, 11]).sessions == ()


@pytest.mark.parametrize("statistic", ["min", "median"])
def test_session_figures_use_the_judged_statistic(statistic: str) -> None:
    base = pooled(session(1000.0), session(1250.0))
    tol = Tolerances(statistic=statistic)  # type: ignore[arg-type]
    figures = session_figures(base.wall_time, base.sessions, tol)
    first, second = base.wall_time.samples_ns[:5], base.wall_time.samples_ns[5:]
    pick = min if statistic == "min" else (lambda xs: sorted(xs)[2])
    assert figures == [pick(first), pick(second)]


def test_a_session_in_a_slow_phase_of_the_machine_does_not_widen_the_range() -> None:
    # The first update run met a slow phase: the speed references ran 1.7x slower and
    # the kernel more so than they correct (scaling applies part of their change).
    slow = session(1900.0, speed_ref_us=80.0)
    base = pooled(slow, session(1000.0, speed_ref_us=47.0), session(1000.0, speed_ref_us=47.0))
    assert Sessions.of(base).in_phase == (False, True, True)
    now = session(1300.0, speed_ref_us=47.0)  # 30% slower, at the same speed
    verdict = judge_at_speed(now, base)
    assert verdict.status == "regressed"
    assert not [n for n in verdict.notes if "sessions ran" in n]
    # The same sessions all in phase: the slow one's level is one the test reached.
    level = pooled(
        session(1900.0, speed_ref_us=47.0),
        session(1000.0, speed_ref_us=47.0),
        session(1000.0, speed_ref_us=47.0),
    )
    assert Sessions.of(level).in_phase == (True, True, True)
    assert judge_at_speed(now, level).status == "pass"


def judge_at_speed(now: TestSummary, base: TestSummary) -> Verdict:
    tol = Tolerances(time=0.15)
    return compare(now, entry(base), fingerprint=HERE, tolerances=tol)


def test_work_time_is_judged_against_the_pooled_rounds() -> None:
    # A busy side's sessions' levels follow how much they waited: no range there.
    base = pooled(session(1000.0), session(1000.0), session(1250.0))
    waited = dataclasses.replace(base, wait_time=base.wall_time)
    assert as_work(waited).sessions == ()
