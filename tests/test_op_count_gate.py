"""Op counts gate by default: a change that only adds calls (no FLOPs, no bytes) fails.

The default tolerance comes from a measurement (``gate/tolerance.py``,
``DEFAULT_COUNT_TOLERANCE``): a numpy upgrade moved the example suite's test counts by
under 3%, a change adding 20 ``asarray``/``view`` calls to a test adds 91%.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from run_helpers import PytestRunner

TESTS = """
import os

import numpy as np


def test_views():
    x = np.arange(64.0)
    for _ in range(int(os.environ.get("OPPROF_EXTRA_CALLS", "0"))):
        np.asarray(x).view()
    np.add(x, x)
    np.multiply(x, 2.0)
    x.sum()
"""


def test_a_change_that_only_adds_calls_fails_and_off_reports_it(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, run_pytest: PytestRunner
) -> None:
    pytester.makepyfile(test_calls=TESTS)
    run_pytest("--opprof-update-baselines").assert_outcomes(passed=1)
    monkeypatch.setenv("OPPROF_EXTRA_CALLS", "20")
    result = run_pytest("--opprof", "--opprof-report", "rep.json")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*op count*REGRESSED*"])
    verdict = json.loads((pytester.path / "rep.json").read_text())["tests"][
        "test_calls.py::test_views"
    ]["verdict"]
    rows = {m["metric"]: m for m in verdict["metrics"]}
    assert rows["op count"]["status"] == "regressed"
    assert rows["op count"]["change"] > 0.25
    assert rows["flops"]["status"] == "pass"
    # Off: the same change is reported, not judged.
    off = run_pytest("--opprof", "--opprof-count-tolerance", "off", "--opprof-report", "rep.json")
    off.assert_outcomes(passed=1)
    verdict = json.loads((pytester.path / "rep.json").read_text())["tests"][
        "test_calls.py::test_views"
    ]["verdict"]
    assert {m["metric"]: m["status"] for m in verdict["metrics"]}["op count"] == "info"


def test_count_tolerance_option_names_its_forms(run_pytest: PytestRunner) -> None:
    result = run_pytest.inprocess("--opprof", "--opprof-count-tolerance", "lots")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--opprof-count-tolerance*or off*"])
