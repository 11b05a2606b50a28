"""A test function's round is its own call: other plugins' call-phase hooks stay outside it,
and items that are not test functions (unittest cases) are still measured, over their call
phase."""

from __future__ import annotations

import json
from pathlib import Path

from run_helpers import PytestRunner

# What pytest-randomly does in its pytest_runtest_call hook: reseed numpy's global generator
# before each test's call. Its op must not become the test's.
RESEEDING_PLUGIN = """
import numpy as np
import pytest

@pytest.hookimpl
def pytest_runtest_call(item):
    np.random.seed(1234)
"""

TESTS = """
import unittest
import numpy as np

def test_function():
    np.add(np.ones(4), 1.0)

class TestCase(unittest.TestCase):
    def test_method(self):
        np.multiply(np.ones(4), 2.0)
"""


def _ops(report: Path) -> dict[str, dict[str, object]]:
    tests = json.loads(report.read_text())["tests"]
    return {nodeid.rsplit("::", 1)[-1]: test["ops"] for nodeid, test in tests.items()}


def test_another_plugins_call_hook_is_outside_the_round(
    run_pytest: PytestRunner, tmp_path: Path
) -> None:
    run_pytest.pytester.makeconftest(RESEEDING_PLUGIN)
    run_pytest.pytester.makepyfile(test_it=TESTS)
    report = tmp_path / "r.json"
    result = run_pytest(
        "--opprof",
        "-p",
        "no:randomly",
        "--opprof-rounds",
        "3",
        "--opprof-report",
        str(report),
        "--opprof-report-details",
    )
    result.assert_outcomes(passed=2)
    ops = _ops(report)
    assert ops["test_function"]["numpy.add"]["count"] == 1
    assert not any("seed" in name for name in ops["test_function"])
    # A unittest case runs no pytest_pyfunc_call: its round is the call phase, hooks and all.
    assert ops["test_method"]["numpy.multiply"]["count"] == 1
    assert any("seed" in name for name in ops["test_method"])
