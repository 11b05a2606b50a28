"""A gate run's early stop (``plugin/round_noise.py``): a test's rounds end once its verdict
is settled, judged against how far rounds scatter in this run.  Unit tests on real
verdicts (``compare_limits``), then real pytest runs: an unchanged test of a few ms stops
early, a slowed one still fails naming its op."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from baseline_helpers import Row, entry, machine, summary_of

from pytest_opprof.gate.summary import TestSummary
from pytest_opprof.gate.tolerance import Tolerances
from pytest_opprof.gate.verdict import TimeLimit, Verdict, compare_limits
from pytest_opprof.plugin.options import AUTO_ROUNDS, CONFIRM_ROUNDS
from pytest_opprof.plugin.round_noise import RoundNoise

if TYPE_CHECKING:
    from run_helpers import PytestRunner

HERE = machine().fingerprint
TOL = Tolerances(speed_scaled=False)
MIN_ROUNDS = TOL.time_min_rounds


def rounds_of(kernel_ms: Sequence[float]) -> TestSummary:
    """A test whose rounds run ``kernel`` for these ms each (wall time + 0.01 ms)."""
    return summary_of(
        [(ms * 1000 + 10, [Row("kernel", 1, self_cpu_time_total=ms * 1000)]) for ms in kernel_ms]
    )


def judged(now: TestSummary, base: TestSummary) -> tuple[Verdict, tuple[TimeLimit, ...]]:
    return compare_limits(now, entry(base), fingerprint=HERE, tolerances=TOL)


BASE = rounds_of([2.0, 2.02, 1.98, 2.01, 1.99])


def fed(*tests: Sequence[float]) -> RoundNoise:
    """A pool fed these tests' rounds, as a run's earlier tests feed it."""
    noise = RoundNoise()
    for kernel_ms in tests:
        noise.add(rounds_of(kernel_ms), TOL.min_time_ns)
    return noise


def test_an_unchanged_time_settles_on_the_rounds_a_verdict_needs() -> None:
    verdict, limits = judged(rounds_of([2.01, 1.99, 2.0]), BASE)
    assert verdict.status == "pass" and verdict.time_judged
    # Both the wall time and the kernel (it could fail the test alone) have a limit.
    assert {limit.name for limit in limits} >= {"wall time"}
    assert RoundNoise().settled((verdict, limits))  # the default sigma alone is enough


STEADY = [[2.0, 2.01, 1.99, 2.0, 2.005]] * 6
"""Earlier tests of a run whose rounds scatter 0.4%."""


def test_a_time_near_its_limit_takes_more_rounds_until_the_pool_knows_the_noise() -> None:
    # +12% against a 15% tolerance: a pass, but three rounds alone, judged with the
    # default sigma (5% a round), cannot say it stays one; in a run whose rounds scatter
    # 0.4%, they can.
    near = rounds_of([2.25, 2.26, 2.24])
    verdict, limits = judged(near, BASE)
    assert verdict.status == "pass" and not verdict.time_undecided
    assert not RoundNoise().settled((verdict, limits))
    assert fed(*STEADY).settled((verdict, limits))
    # At the limit, not even then.
    assert not fed(*STEADY).settled(judged(rounds_of([2.31, 2.3, 2.29]), BASE))


def test_in_a_run_whose_rounds_scatter_widely_three_close_rounds_settle_nothing() -> None:
    # +5%, three rounds within 0.5% of each other: with the 5% prior alone that is a pass
    # well inside 15%; where the run's tests scatter 14% a round, three rounds are too
    # few to say so, whatever their own scatter.
    verdict, limits = judged(rounds_of([2.1, 2.11, 2.09]), BASE)
    assert RoundNoise().settled((verdict, limits))
    noisy = fed(*[[2.0, 2.2, 1.85, 2.15, 1.9]] * 6)
    assert noisy.tests.sigma(2e6)[0] > 0.1
    assert not noisy.settled((verdict, limits))


def test_rounds_that_scatter_wider_than_the_pool_take_more_rounds() -> None:
    # Median +1%, but one round 13% slower: the pool of steady tests does not describe
    # this test's rounds, which are then judged on their own scatter.
    verdict, limits = judged(rounds_of([2.02, 2.26, 1.9]), BASE)
    assert verdict.status == "pass"
    assert not fed(*STEADY).settled((verdict, limits))


def test_a_verdict_that_could_still_change_never_settles() -> None:
    assert not RoundNoise().settled(None)
    # Beyond the tolerance: undecided, confirmed with more rounds.
    assert not RoundNoise().settled(judged(rounds_of([3.0, 3.0, 3.0]), BASE))
    # Two rounds: times not judged yet.
    verdict, limits = judged(rounds_of([2.0, 2.0]), BASE)
    assert not verdict.time_judged and limits == ()
    assert not RoundNoise().settled((verdict, limits))


# -- real runs ----------------------------------------------------------------------------

SUITE = """
import os
import time

from pytest_opprof import record_function


def spin(seconds):
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        pass


def test_steady():
    with record_function("kernel"):
        spin(0.004)


def test_slowed():
    with record_function("kernel"):
        spin(0.004 * float(os.environ.get("SLOWER", "1")))
"""

# Every round judged whatever other processes did (tests/test_verdict_busy.py covers busy
# rounds), at any machine speed: the counts below are the policy's, not the machine's.
ANY_MACHINE = ("--opprof-max-wait=100%", "--opprof-max-speed-change=off", "-p", "no:randomly")


def rounds_in(report: Path) -> dict[str, int]:
    tests = json.loads(report.read_text())["tests"]
    return {nid.rsplit("::", 1)[1]: int(t["rounds"]) for nid, t in tests.items()}


def walls_in(report: Path) -> dict[str, str]:
    """Each test's rounds' wall times, as the report keeps them (for a failure's message)."""
    tests = json.loads(report.read_text())["tests"]
    return {nid.rsplit("::", 1)[1]: t["summary"]["wall_time"] for nid, t in tests.items()}


# How many times an unchanged run is tried for its tests to settle in MIN_ROUNDS: a
# policy that never stops early fails every try.  Rounds that scatter do not settle (the
# policy's point), and a shared CI box once scattered test_slowed's past settling in three
# with no other test running (it took five); a second try came clean there.
TRIES = 3


@pytest.mark.slow
@pytest.mark.alone  # how many rounds settle a time depends on how far they scatter
def test_a_gate_run_stops_an_unchanged_test_early_and_still_fails_a_slowed_op(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, run_pytest: PytestRunner
) -> None:
    pytester.makepyfile(SUITE)
    # A tolerance that an unchanged 4 ms test stays well within on a loaded machine, whose
    # rounds, waits for a CPU and all, scatter by tens of percent (they settle later).
    pytester.makeini("[pytest]\nopprof_time_tolerance = 200%\n")
    report = pytester.path / "report.json"
    result = run_pytest("--opprof-update-baselines", f"--opprof-report={report}", *ANY_MACHINE)
    result.assert_outcomes(passed=2)
    # A baseline being recorded keeps auto's rounds.
    assert rounds_in(report) == {"test_steady": AUTO_ROUNDS, "test_slowed": AUTO_ROUNDS}

    tried = []
    for _ in range(TRIES):
        result = run_pytest("--opprof", f"--opprof-report={report}", *ANY_MACHINE)
        result.assert_outcomes(passed=2)
        rounds = rounds_in(report)
        # Never more than auto's rounds: a pass is not confirmed.
        assert set(rounds.values()) <= {MIN_ROUNDS, AUTO_ROUNDS}, rounds
        tried.append((rounds, walls_in(report)))
        if rounds == {"test_steady": MIN_ROUNDS, "test_slowed": MIN_ROUNDS}:
            break
    else:
        pytest.fail(f"no unchanged run settled in {MIN_ROUNDS} rounds: {tried}")

    # 10x the kernel: confirmed with every round auto has, failed, the kernel named.
    monkeypatch.setenv("SLOWER", "10")
    tried = []
    for _ in range(TRIES):
        result = run_pytest("--opprof", f"--opprof-report={report}", *ANY_MACHINE)
        result.assert_outcomes(passed=1, failed=1)
        rounds = rounds_in(report)
        assert rounds["test_slowed"] == AUTO_ROUNDS + CONFIRM_ROUNDS, rounds
        tried.append((rounds, walls_in(report)))
        if rounds["test_steady"] == MIN_ROUNDS:
            break
    else:
        pytest.fail(f"the unchanged test never settled in {MIN_ROUNDS} rounds: {tried}")
    result.stdout.fnmatch_lines(["+ kernel  slower:*REGRESSED", "REGRESSED *::test_slowed *"])
    tests = json.loads(report.read_text())["tests"]
    (slowed,) = [t for nid, t in tests.items() if nid.endswith("::test_slowed")]
    assert slowed["status"] == "regressed"
    assert any(
        r["op"] == "kernel" and r["status"] == "regressed" for r in slowed["verdict"]["reasons"]
    )

    # A fixed number of rounds runs all of them.
    result = run_pytest("--opprof", "--opprof-rounds=4", f"--opprof-report={report}", *ANY_MACHINE)
    assert rounds_in(report) == {"test_steady": 4, "test_slowed": 4}
