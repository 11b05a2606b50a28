"""A real two-run project whose second run regresses, for the HTML report's tests.

The first run records baselines; the second grows the matrices of one test, so its
FLOPs (exact, judged at any load) regress on ``numpy.matmul``, inside a
``record_function`` scope that the flame view must draw.  Both are real pytest
runs in subprocesses, made once per test module (the page tests only read them).
"""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from run_helpers import REPO_ROOT, run_in_subprocess

PROJECT = """
import os

import numpy as np
import pytest

N = int(os.environ.get("HTML_TEST_N", "48"))


def test_grows(opprof):
    a = np.ones((N, N))
    with opprof.record_function("solve step"):
        for _ in range(3):
            a = a @ a / N
    assert a.shape == (N, N)


@pytest.mark.profile
@pytest.mark.parametrize("tag", ["<b>bold</b>"])
def test_marked(tag):
    np.add(np.ones(10), len(tag))


@pytest.mark.parametrize("k", [10, 20, 30])
def test_steady(k):
    assert np.sum(np.arange(k)) >= 0
"""

REGRESSED = "test_project.py::test_grows"
MARKED = "test_project.py::test_marked[<b>bold</b>]"


@dataclass(frozen=True)
class Reports:
    directory: Path
    json: Path
    html: Path
    output: str


def run(directory: Path, *args: str, n: int) -> subprocess.CompletedProcess[str]:
    return run_in_subprocess(directory, *args, env={"HTML_TEST_N": str(n)})


def make_reports(directory: Path) -> Reports:
    """Record baselines, then run again grown: the second run's JSON and HTML reports."""
    # The marked test's id holds markup: the page must show it as text.
    (directory / "test_project.py").write_text(PROJECT, encoding="utf-8")
    (directory / "pytest.ini").write_text("[pytest]\n", encoding="utf-8")
    first = run(directory, "--opprof-update-baselines", "--opprof-rounds", "3", n=48)
    assert first.returncode == 0, first.stdout + first.stderr
    second = run(
        directory,
        "--opprof",
        "--opprof-rounds",
        "3",
        "--opprof-warn-only",
        "--opprof-time-tolerance",
        "1000%",
        "--opprof-report",
        "out/report.json",
        "--opprof-html",
        "out/report.html",
        n=96,
    )
    assert second.returncode == 0, second.stdout + second.stderr
    return Reports(
        directory, directory / "out/report.json", directory / "out/report.html", second.stdout
    )


BENCH = REPO_ROOT / "bench"


def bench_module(name: str) -> object:
    """A module of bench/ (the browser driver, the report synthesiser), imported by name."""
    import importlib

    if str(BENCH) not in sys.path:
        sys.path.insert(0, str(BENCH))
    return importlib.import_module(name)
