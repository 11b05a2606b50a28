"""The captured share of a test (``op_time_share``): library ops only, shown and flagged.

A ``record_function`` scope marks any code, a pure-Python loop included, so its
time is not time in captured ops: a loop read 0.004 bare and 0.99 inside a
scope before scopes were left out.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pytest
from synthetic_records import Ev, records_from

import pytest_opprof as opprof
from pytest_opprof.model import library_self_ns
from pytest_opprof.native_layout.records import KIND_SCOPE, KIND_TORCH

if TYPE_CHECKING:
    from run_helpers import PytestRunner


def python_loop(n: int = 300_000) -> int:
    total = 0
    for i in range(n):
        total += i
    return total


@pytest.mark.parametrize("known_parents", [True, False])
def test_library_self_time_skips_scopes_inside_and_around_ops(known_parents: bool) -> None:
    records = records_from(
        [
            Ev(
                "outer scope",
                0,
                1000,
                kind=KIND_SCOPE,
                children=[
                    Ev("numpy.linalg.solve", 100, 600, children=[Ev("callback", 200, 300, kind=0)]),
                    Ev("numpy.add", 700, 750),
                ],
            ),
            Ev("aten::mm", 2000, 2400, kind=KIND_TORCH, children=[Ev("aten::mul", 2100, 2200)]),
        ],
        known_parents=known_parents,
    )
    # solve 500 less its scope child 100, add 50, mm and its child op 400 in all.
    assert library_self_ns(records) == 400 + 50 + 400


def test_a_scoped_python_loop_is_not_captured_time() -> None:
    with opprof.profile(capture=["numpy"]) as bare:
        python_loop()
    with opprof.profile(capture=["numpy"]) as scoped:
        with opprof.record_function("loop"):
            python_loop()
    for prof in (bare, scoped):
        assert library_self_ns(prof.records()) < 0.05 * prof.wall_time_ns
    x = np.random.default_rng(0).random(2_000_000)
    with opprof.profile(capture=["numpy"]) as numpy_work:
        with opprof.record_function("sorting"):
            np.sort(x)
    assert library_self_ns(numpy_work.records()) > 0.5 * numpy_work.wall_time_ns


TESTS = """
import numpy as np
import pytest_opprof as opprof

def test_python_in_a_scope():
    with opprof.record_function("loop"):
        total = 0
        for i in range(300_000):
            total += i
    assert total > 0

def test_numpy_sort():
    x = np.random.default_rng(0).random(2_000_000)
    for _ in range(3):
        np.sort(x)
"""


@pytest.mark.slow
def test_summary_line_shows_the_share_and_flags_the_low_one(
    pytester: pytest.Pytester, run_pytest: PytestRunner
) -> None:
    pytester.makepyfile(TESTS)
    result = run_pytest("--opprof-update-baselines", "--opprof-capture", "numpy")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["   self CPU    ops   in ops  top op * test"])
    python = next(line for line in result.outlines if line.endswith("::test_python_in_a_scope"))
    sort = next(line for line in result.outlines if line.endswith("::test_numpy_sort"))
    assert " LOW " in python, python
    assert " LOW " not in sort, sort
    share = int(sort.split()[2].rstrip("%"))
    assert share >= 50, sort
    result.stdout.fnmatch_lines(["LOW: 1 test(s) spent under 50% of their time in captured*"])
    (path,) = Path(pytester.path, "baselines").rglob("*.json")
    tests = json.loads(path.read_text())["tests"]
    assert tests["test_python_in_a_scope"]["summary"]["op_time_share"] < 0.05
    assert tests["test_numpy_sort"]["summary"]["op_time_share"] >= 0.5


def test_nothing_is_flagged_when_no_op_source_records(
    pytester: pytest.Pytester, run_pytest: PytestRunner
) -> None:
    pytester.makepyfile(TESTS)
    result = run_pytest("--opprof", "--opprof-capture", "none")
    result.assert_outcomes(passed=2)
    lines = [line for line in result.outlines if line.endswith(("_scope", "_sort")) and "%" in line]
    assert len(lines) == 2 and all(" 0% " in line for line in lines), lines
    assert not any("LOW" in line for line in result.outlines)
