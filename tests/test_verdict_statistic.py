"""The time statistic: times judged by their fastest round (``min``) or their ``median``,
the same statistic on both sides, with the significance test still required at 5+ rounds;
and the option that sets it (command line, ini, bad values)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest
from baseline_helpers import Row, entry, machine, summary_of

from pytest_opprof.errors import OptionValueError
from pytest_opprof.gate.session import BaselineSession
from pytest_opprof.gate.summary import TestSummary
from pytest_opprof.gate.verdict import Tolerances, Verdict, compare
from pytest_opprof.plugin.options import parse_time_statistic, read_gate_options

if TYPE_CHECKING:
    from run_helpers import PytestRunner

HERE = machine().fingerprint


def rounds_of(*self_ms: float) -> TestSummary:
    """One op, ``kernel``, whose self time per round is given in ms (wall = self + 0.1 ms)."""
    return summary_of(
        [(ms * 1000 + 100, [Row("kernel", 1, self_cpu_time_total=ms * 1000)]) for ms in self_ms]
    )


def judge(now: TestSummary, base: TestSummary, statistic: str) -> Verdict:
    tol = Tolerances(statistic="min" if statistic == "min" else "median")
    return compare(now, entry(base), fingerprint=HERE, tolerances=tol)


def kernel_status(verdict: Verdict) -> str:
    found = [r.status for r in verdict.reasons if r.op == "kernel" and r.unit == "ns"]
    return found[0] if found else "pass"


def test_min_ignores_slow_rounds_that_move_the_median() -> None:
    base = rounds_of(1.0, 1.0, 1.0)
    bursts = rounds_of(1.0, 1.6, 1.6)  # two rounds hit by another process, one clean
    assert kernel_status(judge(bursts, base, "median")) == "regressed"
    assert kernel_status(judge(bursts, base, "min")) == "pass"
    assert not judge(bursts, base, "min").failed


def test_min_finds_a_slowdown_in_every_round() -> None:
    base = rounds_of(1.0, 1.1, 1.4)
    slower = rounds_of(1.3, 1.35, 1.5)
    verdict = judge(slower, base, "min")
    assert verdict.failed and kernel_status(verdict) == "regressed"
    reason = next(r for r in verdict.reasons if r.op == "kernel" and r.unit == "ns")
    # The figures shown are the statistic's: the fastest rounds, 1.0 ms -> 1.3 ms.
    assert (reason.baseline, reason.now) == (1_000_000, 1_300_000)
    wall = next(m for m in verdict.metrics if m.metric == "wall time")
    assert (wall.baseline, wall.now) == (1_100_000, 1_400_000)
    assert wall.status == "regressed"


def test_median_rows_show_medians() -> None:
    verdict = judge(rounds_of(1.3, 1.35, 1.5), rounds_of(1.0, 1.1, 1.4), "median")
    wall = next(m for m in verdict.metrics if m.metric == "wall time")
    assert (wall.baseline, wall.now) == (1_200_000, 1_450_000)


def test_min_with_enough_rounds_also_needs_the_significance_test() -> None:
    # The fastest round is 30% slower, but the baseline's other rounds were slower
    # still: across the rounds nothing shows a slowdown beyond tolerance.
    base = rounds_of(1.0, 2.0, 2.0, 2.0, 2.0)
    now = rounds_of(1.3, 1.3, 1.3, 1.3, 1.3)
    assert kernel_status(judge(now, base, "min")) == "pass"
    # The same fastest rounds with agreeing rounds: significant, regressed.
    steady = rounds_of(1.0, 1.0, 1.01, 1.0, 1.02)
    assert kernel_status(judge(now, steady, "min")) == "regressed"
    # Under 5 rounds the statistic alone decides.
    three = rounds_of(1.3, 1.3, 1.3)
    assert kernel_status(judge(three, rounds_of(1.0, 2.0, 2.0), "min")) == "regressed"


def test_times_need_three_rounds_on_both_sides_unless_forced() -> None:
    slower, base = rounds_of(2.0), rounds_of(1.0)
    verdict = judge(slower, base, "min")
    assert not verdict.failed and not verdict.time_judged
    assert kernel_status(verdict) == "pass"
    wall = next(m for m in verdict.metrics if m.metric == "wall time")
    assert wall.status == "not judged" and (wall.baseline, wall.now) == (1_100_000, 2_100_000)
    assert any("judged from 3 rounds" in note and "now 1" in note for note in verdict.notes)
    # Three rounds now against a one-round baseline: still not judged.
    assert not judge(rounds_of(2.0, 2.0, 2.0), base, "min").time_judged
    forced = compare(slower, entry(base), fingerprint=HERE, force_time=True)
    assert forced.failed and kernel_status(forced) == "regressed"
    assert judge(rounds_of(2.0, 2.0, 2.0), rounds_of(1.0, 1.0, 1.0), "min").failed


def test_improvements_use_the_statistic_too() -> None:
    base = rounds_of(2.0, 2.0, 2.0)
    once_fast = rounds_of(2.0, 1.0, 2.0)
    assert kernel_status(judge(once_fast, base, "min")) == "improved"
    assert kernel_status(judge(once_fast, base, "median")) == "pass"


@pytest.mark.parametrize(("text", "value"), [("min", "min"), (" MEDIAN ", "median")])
def test_parse_time_statistic(text: str, value: str) -> None:
    assert parse_time_statistic(text) == value


@pytest.mark.parametrize("bad", ["mean", "", "p90", None, 1])
def test_parse_time_statistic_names_the_accepted_forms(bad: object) -> None:
    with pytest.raises(OptionValueError, match="expected one of min, median"):
        parse_time_statistic(bad)


def test_option_and_ini_reach_the_gate(pytester: pytest.Pytester, run_pytest: PytestRunner) -> None:
    pytester.makeini("[pytest]\nopprof_time_statistic = median\n")
    from_ini = read_gate_options(run_pytest.parseconfig())
    assert from_ini.time_statistic == "median"
    assert BaselineSession(from_ini).tolerances.statistic == "median"
    from_cli = read_gate_options(run_pytest.parseconfig("--opprof-time-statistic=min"))
    assert BaselineSession(from_cli).tolerances.statistic == "min"


@pytest.mark.parametrize(
    ("args", "ini", "expected"),
    [
        (["--opprof-time-statistic=mean"], "", "*--opprof-time-statistic*expected one of min*"),
        ([], "opprof_time_statistic = p99", "*ini setting opprof_time_statistic*expected one of*"),
    ],
)
def test_bad_time_statistic_is_a_usage_error(
    pytester: pytest.Pytester,
    run_pytest: PytestRunner,
    args: list[str],
    ini: str,
    expected: str,
) -> None:
    pytester.makeini(f"[pytest]\n{ini}\n")
    pytester.makepyfile("def test_a(): pass")
    result = run_pytest.inprocess("--opprof", *args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([expected])
