"""The time basis: every decision a verdict makes about times, made once before its rows,
and what the verdict reports of it."""

from __future__ import annotations

import dataclasses

from baseline_helpers import Row, entry, machine, summary_of

from pytest_opprof.gate.summary import TestSummary, TimeStats
from pytest_opprof.gate.time_basis import BASELINE, baseline_basis
from pytest_opprof.gate.verdict import Tolerances, compare

HERE = machine().fingerprint


def measured(kernel_ms: list[float], ref_us: list[float]) -> TestSummary:
    summary = summary_of(
        [(ms * 1000 + 100, [Row("kernel", 1, self_cpu_time_total=ms * 1000)]) for ms in kernel_ms]
    )
    refs = TimeStats.from_samples([us * 1000 for us in ref_us])
    return dataclasses.replace(summary, speed_ref=refs, native_ref=refs)


BASE = measured([10, 10.2, 10.1, 10.3, 10.0], [100, 101, 99, 100, 102])


def test_a_speed_change_beyond_the_limit_is_decided_by_the_basis_and_reported_as_is() -> None:
    slow = measured([15, 15.3, 15.1, 15.4, 15.0], [150, 151, 149, 150, 152])
    tol = Tolerances()
    basis = baseline_basis(slow, entry(BASE), fingerprint=HERE, tol=tol)
    assert not basis.judged
    assert basis.speed_change is not None and basis.speed_change > 0.25
    assert basis.not_judged is not None and "--opprof-max-speed-change" in basis.not_judged
    assert basis.notes == (basis.not_judged,)
    # Not judged, the rounds stay as measured: no scaling across a change that large.
    assert basis.now.wall_time == slow.wall_time
    verdict = compare(slow, entry(BASE), fingerprint=HERE, tolerances=tol)
    assert not verdict.time_judged
    assert verdict.time_not_judged == basis.not_judged
    assert verdict.speed_change == basis.speed_change
    assert verdict.notes[: len(basis.notes)] == basis.notes


def test_the_verdict_names_the_basis_its_times_were_judged_on() -> None:
    same = measured([10.1, 10.0, 10.2, 10.1, 10.3], [100, 100, 101, 99, 100])
    verdict = compare(same, entry(BASE), fingerprint=HERE)
    assert verdict.status == "pass" and verdict.time_judged
    assert verdict.basis == BASELINE == "baseline"
    assert verdict.to_json()["time_basis"] == "baseline"


def test_a_basis_taken_out_of_judgement_keeps_its_figures_and_says_why() -> None:
    basis = baseline_basis(BASE, entry(BASE), fingerprint=HERE, tol=Tolerances())
    assert basis.judged and basis.not_judged is None
    out = basis.unjudged("time not judged: the test's wall time moved with the machine")
    assert not out.judged and out.not_judged is not None and "moved" in out.not_judged
    assert (out.now, out.base, out.notes) == (basis.now, basis.base, basis.notes)
    assert basis.judged  # frozen: the basis it came from is unchanged
