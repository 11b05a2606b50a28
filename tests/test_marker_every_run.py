"""``@pytest.mark.profile(...)`` is checked at collection in every run, not only under
``--opprof``: a typo (``row_limt=20``) used to pass silently in the plain run and show only
in the profiled CI job.  The check loads neither numpy nor the native core."""

from __future__ import annotations

import pytest
from run_helpers import PytestRunner

MARKED = """
import sys

import pytest


@pytest.mark.profile(row_limt=20)
def test_typo():
    pass


@pytest.mark.profile(rounds="often")
def test_bad_value():
    pass


@pytest.mark.profile(row_limit=5, rounds="auto", time_tolerance="20%")
def test_fine():
    pass


def test_nothing_heavy_loaded():
    # Collection checked three markers: the plain run is still a plain run.
    loaded = {"numpy", "pytest_opprof._native", "pytest_opprof._opprof_native"} & set(sys.modules)
    assert not loaded, loaded
"""

TYPO = (
    "*@pytest.mark.profile got unknown keyword(s) row_limt; accepted keywords: row_limit, "
    "sort_by, time_unit, rounds, warmup, time_tolerance, memory_tolerance, flops_tolerance, "
    "max_memory, max_leaked, max_flops, max_time, group_by_input_shape, top_level_events_only*"
)
BAD_VALUE = "*@pytest.mark.profile(rounds=...): expected auto or a positive integer*'often'*"


@pytest.mark.parametrize("profiled", [False, True], ids=["plain", "opprof"])
def test_a_bad_marker_errors_its_test_in_every_run(
    run_pytest: PytestRunner, pytester: pytest.Pytester, profiled: bool
) -> None:
    pytester.makepyfile(test_marked=MARKED)
    if profiled:
        pytester.makepyfile(test_marked=MARKED.replace("assert not loaded", "assert loaded"))
    result = run_pytest(*(["--opprof"] if profiled else []), "-p", "no:randomly")
    result.assert_outcomes(passed=2, errors=2)
    result.stdout.fnmatch_lines(["*ERROR at setup of test_typo*", TYPO])
    result.stdout.fnmatch_lines(["*ERROR at setup of test_bad_value*", BAD_VALUE])
    result.stdout.no_fnmatch_line("*Traceback*")


def test_collect_only_runs_no_setup(run_pytest: PytestRunner, pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_marked=MARKED)
    result = run_pytest.inprocess("--collect-only", "-q")
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(["4 tests collected*"])
