"""Times are judged on rounds that did not wait for a CPU; a busy machine gets 'not judged'."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from typing import TYPE_CHECKING
from xml.etree import ElementTree

import pytest
from baseline_helpers import Row, entry, machine
from conftest import busy_machine

from pytest_opprof.gate.summary import RoundFigures, TestSummary, summarize_rounds
from pytest_opprof.gate.verdict import Tolerances, Verdict, compare
from pytest_opprof.gate.waiting import clean_rounds, only_rounds
from pytest_opprof.plugin.rounds import AUTO_ROUNDS, BUSY_ROUNDS, another_clean_round

if TYPE_CHECKING:
    from conftest import PytestRunner

HERE = machine().fingerprint
TOL = Tolerances(time=0.15, speed_scaled=False)


def rounds(work_ms: Sequence[float], wait_ms: Sequence[float] | None = None) -> TestSummary:
    """One op, ``kernel``, taking each round's work plus its wait (ms): what a round that
    waited for a CPU measures."""
    waits = list(wait_ms) if wait_ms is not None else [0.0] * len(work_ms)
    out = []
    for work, wait in zip(work_ms, waits, strict=True):
        wall_us = (work + wait) * 1000
        out.append(
            RoundFigures.from_events(
                [Row("kernel", 1, self_cpu_time_total=wall_us, cpu_time_total=wall_us)],
                wall_time_ns=round(wall_us * 1000),
                cpu_time_ns=round(work * 1e6),
                wait_ns=round(wait * 1e6),
            )
        )
    return summarize_rounds(out)


def judge(now: TestSummary, base: TestSummary, tol: Tolerances = TOL) -> Verdict:
    return compare(now, entry(base), fingerprint=HERE, tolerances=tol)


QUIET = rounds([10.0, 10.1, 9.9, 10.0, 10.05])


def test_rounds_that_waited_for_a_cpu_are_not_judged_and_the_verdict_says_why() -> None:
    # The diff: wall time doubled, all of it waiting; the work is unchanged.
    busy = rounds([10.0] * 5, [9.0, 10.0, 11.0, 8.0, 10.0])
    verdict = judge(busy, QUIET)
    assert verdict.status == "pass"
    assert not verdict.time_judged
    assert verdict.time_not_judged is not None
    assert "waited for a CPU in 49% of its rounds' time" in verdict.time_not_judged
    assert "5 of 5 rounds" in verdict.time_not_judged
    wall = next(m for m in verdict.metrics if m.metric == "wall time")
    assert wall.status == "not judged"
    assert verdict.to_json()["time_not_judged"] == verdict.time_not_judged


def test_without_the_limit_the_same_rounds_regress() -> None:
    busy = rounds([10.0] * 5, [9.0, 10.0, 11.0, 8.0, 10.0])
    verdict = judge(busy, QUIET, dataclasses.replace(TOL, max_wait_share=None))
    assert verdict.status == "regressed"


def test_clean_rounds_are_judged_and_the_waiting_ones_left_out() -> None:
    # Two rounds waited (and look 2x slower); the three clean ones carry the verdict.
    mixed = rounds([10.0, 10.0, 10.1, 9.9, 10.0], [10.0, 0.1, 12.0, 0.0, 0.2])
    assert clean_rounds(mixed) == (1, 3, 4)
    verdict = judge(mixed, QUIET)
    assert verdict.time_judged and verdict.time_not_judged is None
    assert verdict.status == "pass"
    # A real slowdown in the clean rounds still regresses, naming the op.
    slower = rounds([13.0, 13.0, 13.1, 12.9, 13.0], [10.0, 0.1, 12.0, 0.0, 0.2])
    verdict = judge(slower, QUIET)
    assert verdict.status == "regressed"
    assert any(r.op == "kernel" and r.status == "regressed" for r in verdict.reasons)


def test_a_baseline_recorded_on_a_busy_machine_is_judged_on_its_clean_rounds() -> None:
    base = rounds([10.0] * 5, [10.0, 0.0, 0.1, 12.0, 0.0])
    assert judge(QUIET, base).time_judged
    busy_base = rounds([10.0] * 5, [10.0, 9.0, 0.1, 12.0, 8.0])
    verdict = judge(QUIET, busy_base)
    assert not verdict.time_judged
    assert verdict.time_not_judged is not None
    assert verdict.time_not_judged.startswith("time not judged: the baseline: ")


def test_rounds_without_the_figure_keep_every_round() -> None:
    unmeasured = dataclasses.replace(QUIET, wait_time=None)
    assert clean_rounds(unmeasured) is None
    assert judge(unmeasured, QUIET).time_judged
    assert only_rounds(QUIET, range(5)) is QUIET


def test_only_rounds_picks_every_per_round_series() -> None:
    mixed = rounds([10.0, 11.0, 12.0], [0.0, 5.0, 0.0])
    picked = only_rounds(mixed, (0, 2))
    assert picked.rounds == 2
    assert picked.wall_time.samples_ns == (10_000_000, 12_000_000)
    assert picked.cpu_time.samples_ns == (10_000_000, 12_000_000)
    assert picked.ops["kernel"].self_cpu_time.samples_ns == (10_000_000, 12_000_000)
    assert picked.wait_time is not None and picked.wait_time.samples_ns == (0, 0)


@pytest.mark.parametrize(
    ("fixed", "measured", "clean", "replaced", "expected"),
    [
        (None, AUTO_ROUNDS, AUTO_ROUNDS, 0, False),  # enough clean rounds
        (None, AUTO_ROUNDS, AUTO_ROUNDS - 1, 0, True),  # one waited: replace it
        (None, AUTO_ROUNDS + 2, 1, BUSY_ROUNDS, False),  # budget spent
        (None, 1, 0, 0, False),  # auto did not repeat this test
        (5, 5, 0, 0, False),  # fixed rounds are what the user asked for
        (None, AUTO_ROUNDS, None, 0, False),  # waiting not measured
    ],
)
def test_auto_replaces_rounds_that_waited_within_a_budget(
    fixed: int | None, measured: int, clean: int | None, replaced: int, expected: bool
) -> None:
    assert another_clean_round(fixed, measured, clean, replaced) is expected


SORTS = """
import numpy as np

DATA = np.random.default_rng(0).standard_normal(200_000)

def test_sorts():
    for _ in range(4):
        np.sort(DATA)
"""


def test_a_busy_machine_does_not_fail_unchanged_code_on_time_and_says_why(
    pytester: pytest.Pytester, run_pytest: PytestRunner
) -> None:
    pytester.makepyfile(test_sorts=SORTS)
    run_pytest("--opprof-update-baselines").assert_outcomes(passed=1)
    with busy_machine():
        result = run_pytest("--opprof", "--opprof-report=report.json", "--junitxml=junit.xml")
    result.assert_outcomes(passed=1)
    (test,) = json.loads((pytester.path / "report.json").read_text())["tests"].values()
    reason = test["verdict"]["time_not_judged"]
    # Two CPU-bound processes per core: every round of ~20 ms waited for a CPU.
    assert reason.startswith("time not judged: ") and "waited for a CPU in" in reason
    wall = next(m for m in test["verdict"]["metrics"] if m["metric"] == "wall time")
    assert wall["status"] == "not judged"
    result.stdout.fnmatch_lines(["*times not judged: 1 test(s) ran while the machine was busy*"])
    props = {
        p.get("name"): p.get("value")
        for p in ElementTree.parse(pytester.path / "junit.xml").iter("property")
    }
    assert props["opprof_time_not_judged"] == reason
