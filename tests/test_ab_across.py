"""Ops judged across the run's tests (``pytest_opprof/ab/across.py``): each op's paired
changes pooled over the tests that time it, so a library op slowed inside tests that each
scatter too much to fail alone still fails the run, naming the op."""

from __future__ import annotations

import json
import math
import textwrap

import numpy as np
import pytest
from test_ab import KERNEL, commit_base, run_ab

from pytest_opprof.ab.across import MIN_TESTS, AcrossTests, OpInTest, apart, pooled


def _ops(
    changes: list[float], se: float, processes: tuple[float, float] | None = None
) -> AcrossTests:
    across = AcrossTests()
    for c in changes:
        mean = math.log1p(c)
        procs = processes if processes is not None else (mean, mean)
        across.add(
            "numpy.linalg.svd",
            OpInTest(mean, se, tuple(math.log1p(p) if processes else p for p in procs)),
        )
    return across


def test_pooled_is_dersimonian_laird() -> None:
    """The random-effects mean, its standard error and tau, computed as the method's
    paper states them (numpy, by hand)."""
    y = np.array([0.10, 0.20, 0.05, 0.30, -0.02])
    v = np.array([0.01, 0.02, 0.015, 0.04, 0.01]) ** 2
    w = 1 / v
    fixed = (w * y).sum() / w.sum()
    q = (w * (y - fixed) ** 2).sum()
    tau2 = max(0.0, (q - (len(y) - 1)) / (w.sum() - (w**2).sum() / w.sum()))
    ws = 1 / (v + tau2)
    mean, se, tau = pooled(list(y), list(v))
    assert mean == pytest.approx((ws * y).sum() / ws.sum())
    assert se == pytest.approx(1 / math.sqrt(ws.sum()))
    assert tau == pytest.approx(math.sqrt(tau2)) and tau > 0.05
    # Agreeing studies: no spread between them, the fixed-effect mean.
    assert pooled([0.1, 0.1, 0.1], [0.01, 0.02, 0.03])[2] == 0.0


def test_an_op_each_test_cannot_decide_regresses_across_them() -> None:
    """Nine tests read svd +12% with standard errors of 6% (intervals some 20 points wide,
    as numpy's test_linalg gave): none decides alone; pooled, it regressed."""
    rng = np.random.default_rng(0)
    changes = list(0.12 + rng.normal(0, 0.03, 9))
    (verdict,) = _ops(changes, 0.06).judge(0.05, 0.1, 0.9)
    assert verdict.status == "regressed", verdict
    assert (
        verdict.tests == 9 and verdict.low > 0.025 and verdict.low < verdict.change < verdict.high
    )
    assert "numpy.linalg.svd: +" in verdict.line(0.05) and " slower (" in verdict.line(0.05)
    assert verdict.to_json()["status"] == "regressed"


def test_faster_across_tests_is_improved() -> None:
    (verdict,) = _ops([-0.15] * 6, 0.05).judge(0.05, 0.1, 0.9)
    assert verdict.status == "improved", verdict


def test_one_process_alone_cannot_move_an_op_across_tests() -> None:
    """Every test +12%, but one process's pairs read no change: a partner that runs the
    op slower for the whole run, which pooling over tests does not average out."""
    (verdict,) = _ops([0.12] * 9, 0.03, processes=(0.24, 0.0)).judge(0.05, 0.1, 0.9)
    assert verdict.status == "pass", verdict
    assert verdict.processes == pytest.approx((0.24, 0.0))


def test_an_op_whose_processes_of_one_side_disagree_is_not_moved_across_tests() -> None:
    """Both process pairs read +12%, but the base's two processes ran the op 20% apart:
    each process brings an offset of that size to every test's pairs (the generated
    suite's numpy.add: one head process +68% for a whole A/A run, the other -2%), so the
    same reading may be two offsets that happen to agree; the interval holds them."""
    across = AcrossTests()
    for _ in range(9):
        across.add(
            "numpy.add",
            OpInTest(math.log(1.12), 0.03, (math.log(1.12),) * 2, (0.1, -0.1), (0.0, 0.0)),
        )
    (verdict,) = across.judge(0.05, 0.1, 0.9)
    assert verdict.status == "pass" and verdict.apart == pytest.approx(math.expm1(0.2)), verdict
    assert verdict.low < 0 < verdict.high, verdict
    assert "one side's processes 22.1% apart" in verdict.line(0.05)
    # Processes of each side within a few percent of each other: the change stands.
    close = AcrossTests()
    for _ in range(9):
        close.add(
            "numpy.add",
            OpInTest(math.log(1.12), 0.03, (math.log(1.12),) * 2, (0.01, -0.01), (0.0, 0.0)),
        )
    assert close.judge(0.05, 0.1, 0.9)[0].status == "regressed"


def test_apart_is_each_process_from_the_processes_mean() -> None:
    assert apart([[1.0, 1.2], [0.9]]) == pytest.approx((0.1, -0.1))
    assert apart([[1.0], []]) == (None, None)  # one process with rounds: nothing to compare
    low, missing, high = apart([[1.0], [], [2.0]])
    assert (low, missing, high) == (pytest.approx(-0.5), None, pytest.approx(0.5))


def test_unchanged_and_scattered_ops_pass() -> None:
    rng = np.random.default_rng(1)
    (still,) = _ops(list(rng.normal(0, 0.05, 20)), 0.05).judge(0.05, 0.1, 0.9)
    assert still.status == "pass", still
    # Tests that disagree (half +30%, half -30%): the spread between them widens the
    # interval instead of letting their mean decide.
    (split,) = _ops([0.3, -0.3] * 4 + [0.35], 0.02).judge(0.05, 0.1, 0.9)
    assert split.status == "pass" and split.high - split.low > 0.2, split


def test_a_change_under_the_tolerance_or_in_too_few_tests_is_not_failed() -> None:
    (small,) = _ops([0.03] * 30, 0.005).judge(0.05, 0.1, 0.9)
    assert small.status == "pass" and small.p < 1e-6, small  # measurable, not worth failing
    assert _ops([0.5] * (MIN_TESTS - 1), 0.01).judge(0.05, 0.1, 0.9) == []
    # Beyond the tolerance, but not wholly: numpy's assert_almost_equal read the head's
    # side -8.2% [-12.1%, -4.1%] over 10 tests of an A/A run, both processes alike.
    (side,) = _ops([-0.082] * 10, 0.07).judge(0.05, 0.1, 0.9)
    assert side.status == "pass" and side.p < 0.1 and side.high > -0.05, side


def test_rows_travel_as_json() -> None:
    """A pytest-xdist worker ships each test's rows; the controller pools them alike."""
    here = _ops([0.12] * 9, 0.06)
    rows = [op.to_json("numpy.linalg.svd") for op in here.by_op["numpy.linalg.svd"]]
    there = AcrossTests()
    there.add_rows(json.loads(json.dumps(rows)))
    assert there.judge(0.05, 0.1, 0.9) == here.judge(0.05, 0.1, 0.9)


SEVERAL = """
import pytest
from work import kernel


@pytest.mark.parametrize("i", range(6))
def test_kernel(i):
    assert kernel({n}) > 0
"""


@pytest.mark.slow
@pytest.mark.alone  # its times are judged
@pytest.mark.parametrize("workers", [None, "2"])
def test_a_scope_slower_in_every_test_is_named_across_them_though_no_test_fails(
    pytester: pytest.Pytester, workers: str | None
) -> None:
    """Six tests whose ``kernel`` scope takes twice as long, each held to one pair a process
    (a test's failure needs two): no test fails, and the scope is named slower across them
    in every report (reported, not failed: docs/ab.md, "Ops across tests"); under
    pytest-xdist the workers' estimates reach the controller."""
    (pytester.path / "work.py").write_text(textwrap.dedent(KERNEL))
    (pytester.path / "test_work.py").write_text(textwrap.dedent(SEVERAL.format(n=60_000)))
    commit_base(pytester.path)
    # Twice the work, not +30%: with one pair a process, a CI box busy enough to swing one
    # pair by a third read +30% as "none moved" once.
    (pytester.path / "test_work.py").write_text(textwrap.dedent(SEVERAL.format(n=120_000)))
    args = ["--opprof-report=ab.json", "--opprof-ab-min-pairs=2", "--opprof-ab-max-pairs=2"]
    args += ["--opprof-markdown=ab.md", "--opprof-html=ab.html"]
    result = run_ab(pytester, *args, *(["-n", workers] if workers else []))
    result.assert_outcomes(passed=6)
    assert result.ret == 0
    result.stdout.fnmatch_lines(
        [
            "opprof A/B against HEAD *: 6 pass, 1 op(s) slower across tests",
            "ops across tests: * op(s) timed in 3 tests or more, *; moved beyond the 5% tolerance:",
            "  kernel: +*% [[]+*%, +*%] over 6 tests  slower (tolerance 5%; each process: *)",
            "  reported, not failed: *",
        ]
    )
    ops = json.loads((pytester.path / "ab.json").read_text())["ab_ops"]
    kernel = next(o for o in ops if o["op"] == "kernel")
    assert kernel["status"] == "regressed" and kernel["tests"] == 6, kernel
    assert "Across tests: kernel: +" in (pytester.path / "ab.md").read_text()
    page = (pytester.path / "ab.html").read_text()
    assert 'id="across"' in page and "<code>kernel</code>" in page
    assert "over 6 tests, slower (reported, not failed)" in page
    assert kernel["change"] > 0.3 and all(c >= 0.05 for c in kernel["processes"]), kernel


@pytest.mark.slow
@pytest.mark.alone  # its times are judged
def test_unchanged_ops_across_tests_pass(pytester: pytest.Pytester) -> None:
    (pytester.path / "work.py").write_text(textwrap.dedent(KERNEL))
    (pytester.path / "test_work.py").write_text(textwrap.dedent(SEVERAL.format(n=60_000)))
    commit_base(pytester.path)
    result = run_ab(pytester, "--opprof-report=ab.json", "--opprof-ab-max-pairs=2")
    result.assert_outcomes(passed=6)
    assert result.ret == 0
    result.stdout.fnmatch_lines(["ops across tests: *: none moved beyond the 5% tolerance"])
    ops = json.loads((pytester.path / "ab.json").read_text())["ab_ops"]
    assert [o["status"] for o in ops] == ["pass"] * len(ops) and ops, ops
