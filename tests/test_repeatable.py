"""Bodies that keep state between runs run again in warm-ups and rounds: a doctest from the
globals it began with, a test calling pytest-benchmark's fixture once a run."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from run_helpers import PytestRunner

MODULE = '''
import numpy as np


def total(n):
    """
    >>> 'seen' in globals()
    False
    >>> seen = total(1000)
    >>> seen
    1000.0
    """
    return float(np.ones(n).sum())
'''


def test_a_doctest_passes_every_round_and_warm_up(
    pytester: pytest.Pytester, run_pytest: PytestRunner
) -> None:
    """doctest's runner empties a doctest's globals once it has run: without a fresh
    copy each run, the second failed with ``NameError: name 'np' is not defined``; kept
    from the run before, ``seen`` would be in them."""
    pytester.makepyfile(ones=MODULE)
    result = run_pytest(
        "--opprof",
        "--opprof-rounds=3",
        "--opprof-warmup=1",
        "--doctest-modules",
        "--opprof-report=report.json",
        "ones.py",
    )
    result.assert_outcomes(passed=1)
    test = json.loads((pytester.path / "report.json").read_text())["tests"]["ones.py::ones.total"]
    assert test["rounds"] == 3, test


BENCHMARKED = """
import numpy as np

CALLS = []


def step():
    CALLS.append(1)
    return np.ones(1000).sum()


def test_step(benchmark):
    assert benchmark(step) == 1000


def test_calls():
    assert len(CALLS) == 1 + 3  # a warm-up and three rounds, one call each
"""


def test_a_benchmark_runs_its_function_once_a_round(
    pytester: pytest.Pytester, run_pytest: PytestRunner
) -> None:
    """pytest-benchmark's fixture may be called once a test (``FixtureAlreadyUsed`` failed
    every benchmark under rounds, an update run or A/B); its timing loops are off under
    ``--opprof``, so each run calls the function once and the op counts are the same in
    every run (its loop count is calibrated anew each run)."""
    pytester.makepyfile(test_bench=BENCHMARKED)
    counts = []
    for run in range(2):
        result = run_pytest(
            "--opprof",
            "--opprof-rounds=3",
            "--opprof-warmup=1",
            f"--opprof-report=report{run}.json",
            "-p",
            "no:randomly",
        )
        result.assert_outcomes(passed=2)
        result.stdout.fnmatch_lines(["opprof: pytest-benchmark's timing loops are off*"])
        report = json.loads((pytester.path / f"report{run}.json").read_text())
        counts.append(report["tests"]["test_bench.py::test_step"]["summary"]["op_count"])
    assert counts[0] == counts[1], counts


def test_benchmark_enable_is_refused_naming_it(
    pytester: pytest.Pytester, run_pytest: PytestRunner
) -> None:
    pytester.makepyfile(test_bench=BENCHMARKED)
    result = run_pytest("--opprof", "--benchmark-enable")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--benchmark-enable cannot be used with --opprof*"])
    assert "passed" not in result.stdout.str()
