"""A test whose work runs in child processes: their waits for a CPU are not the thread's.

Its thread sleeps on the children's results, so its own wait is near zero however busy
the machine, while its wall time grows with theirs: two of two gate runs on a shared
machine failed such a test at +45%.  A round that ran children counts the machine's CPU
pressure as its wait (``capture/children.py``).  Real children: a spawn
``ProcessPoolExecutor`` on one CPU shared with a CPU-bound process.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import pytest
from load_helpers import busy_machine

from pytest_opprof.capture.children import (
    CHILDREN_NOTE,
    ChildrenRound,
    cpu_pressure_ns,
    round_wait_ns,
)

if TYPE_CHECKING:
    from run_helpers import PytestRunner

TESTS = """
import multiprocessing
from concurrent.futures import ProcessPoolExecutor


def spin(n):
    total = 0
    for i in range(n):
        total += i * i
    return total


def test_in_children():
    with ProcessPoolExecutor(2, mp_context=multiprocessing.get_context("spawn")) as pool:
        assert len(list(pool.map(spin, [300_000] * 4))) == 4
"""


def test_a_round_that_ran_children_counts_the_machines_pressure_as_its_wait() -> None:
    quiet = ChildrenRound(cpu_ns=0, stall_ns=9_000)
    assert round_wait_ns(100, 10_000, quiet) == 100  # no child: the thread's wait alone
    assert round_wait_ns(100, 10_000, ChildrenRound(5_000, 4_000)) == 4_000
    assert round_wait_ns(6_000, 10_000, ChildrenRound(5_000, 4_000)) == 6_000
    assert round_wait_ns(None, 10_000, ChildrenRound(5_000, 40_000)) == 10_000  # at most all
    assert round_wait_ns(None, 10_000, ChildrenRound(5_000, None)) == 10_000  # unknown: all


@pytest.mark.slow
def test_children_on_a_busy_cpu_make_the_rounds_wait(
    pytester: pytest.Pytester, run_pytest: PytestRunner
) -> None:
    pytester.makepyfile(test_pool=TESTS)
    args = ("--opprof-rounds", "3", "--opprof-report", "rep.json", "--opprof-report-details")
    with busy_machine(seconds=120, per_core=1, one_cpu=True, last_cpu=True):
        run_pytest("--opprof-update-baselines", *args).assert_outcomes(passed=1)
        result = run_pytest("--opprof", *args)
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["opprof: not measured:*" + CHILDREN_NOTE[:60] + "*"])
    test = json.loads((pytester.path / "rep.json").read_text())["tests"][
        "test_pool.py::test_in_children"
    ]
    wall, waits = test["summary"]["wall_time"], test["summary"]["wait_time"]
    assert waits is not None
    share = sum(waits["samples_ns"]) / sum(wall["samples_ns"])
    # The children shared one CPU with a CPU-bound process: the rounds count the machine's
    # pressure as their wait, where the test's own thread, asleep on the children's
    # results, waited for almost nothing.
    if cpu_pressure_ns() is None:
        assert share == pytest.approx(1.0)
    else:
        assert share > 0.2, test["summary"]
    # So the time is judged on what the waits leave, or not judged, saying why.
    verdict = test["verdict"]
    assert verdict.get("time_judged_on") == "work time" or "child processes" in (
        verdict.get("time_not_judged") or ""
    ), verdict
