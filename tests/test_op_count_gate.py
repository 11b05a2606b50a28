"""Op counts: reported, not judged, by default; judged with ``--opprof-count-tolerance``.

Why not by default is a measurement (``gate/tolerance.py``, ``DEFAULT_COUNT_TOLERANCE``):
numpy and capture upgrades move counts too.  Asked for, a change that only adds calls (no
FLOPs, no bytes) fails, and the report says the count was reported where it was not.
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


@pytest.mark.slow
def test_a_change_that_only_adds_calls_is_reported_and_fails_where_counts_are_judged(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, run_pytest: PytestRunner
) -> None:
    pytester.makepyfile(test_calls=TESTS)
    run_pytest("--opprof-update-baselines").assert_outcomes(passed=1)
    monkeypatch.setenv("OPPROF_EXTRA_CALLS", "20")
    default = run_pytest("--opprof", "--opprof-report", "rep.json")
    default.assert_outcomes(passed=1)
    rows = _rows(pytester)
    assert rows["op count"]["status"] == "info" and rows["op count"]["change"] > 0.25
    judged = run_pytest(
        "--opprof", "--opprof-count-tolerance", "25%", "--opprof-report", "rep.json"
    )
    judged.assert_outcomes(failed=1)
    judged.stdout.fnmatch_lines(["*op count*REGRESSED*"])
    rows = _rows(pytester)
    assert rows["op count"]["status"] == "regressed"
    assert rows["flops"]["status"] == "pass"


def _rows(pytester: pytest.Pytester) -> dict[str, dict[str, object]]:
    verdict = json.loads((pytester.path / "rep.json").read_text())["tests"][
        "test_calls.py::test_views"
    ]["verdict"]
    return {m["metric"]: m for m in verdict["metrics"]}


def test_count_tolerance_option_names_its_forms(run_pytest: PytestRunner) -> None:
    result = run_pytest.inprocess("--opprof", "--opprof-count-tolerance", "lots")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--opprof-count-tolerance*or off*"])
