"""Per-test CPU time covers the test body only, not the profiler's own set-up."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from run_helpers import PytestRunner


def test_first_test_cpu_time_excludes_hook_install_and_calibration(
    pytester: pytest.Pytester, run_pytest: PytestRunner
) -> None:
    pytester.makeini("[pytest]\n")
    pytester.makepyfile(
        """
        def test_first():
            pass

        def test_second():
            pass
        """
    )
    report = pytester.path / "report.json"
    result = run_pytest("--opprof", f"--opprof-report={report}", "--opprof-report-details")
    assert result.ret == 0, result.stdout.str()
    tests = json.loads(report.read_text(encoding="utf-8"))["tests"]
    cpu_ns = {
        nodeid.split("::")[-1]: t["summary"]["cpu_time"]["median_ns"] for nodeid, t in tests.items()
    }
    # The first profile of a session installs the numpy hooks and calibrates the
    # profiler (several ms of CPU); none of it belongs to an empty test body.
    assert cpu_ns["test_first"] < 2_000_000, cpu_ns
    assert cpu_ns["test_second"] < 2_000_000, cpu_ns
