"""An output is never written onto an input or another output: refused in one line
naming both, before anything is written.

``pytest-opprof html rep.json -o rep.json`` replaced the JSON with the page;
``--opprof-report baselines/test_m.json`` replaced a committed baseline (the next gate
failed the file's tests on an unusable baseline); three report options at one path kept
only the last.
"""

from __future__ import annotations

import fnmatch
import os
import subprocess
import sys
from pathlib import Path

import pytest
from run_helpers import REPO_ROOT, PytestRunner

KERNEL = """
import numpy as np


def test_m():
    assert float((np.ones((16, 16)) @ np.ones(16)).sum()) == 256.0
"""


@pytest.fixture
def recorded(run_pytest: PytestRunner, pytester: pytest.Pytester) -> Path:
    """A real baseline file, written by an update run."""
    pytester.makepyfile(test_m=KERNEL)
    run_pytest("--opprof", "--opprof-update-baselines").assert_outcomes(passed=1)
    path = pytester.path / "baselines" / "test_m.json"
    assert path.is_file()
    return path


def _files(root: Path) -> dict[Path, bytes]:
    """Every file under ``root`` but the run's captured output (pytester's)."""
    captured = {root / "stdout", root / "stderr"}
    return {p: p.read_bytes() for p in root.rglob("*") if p.is_file() and p not in captured}


@pytest.mark.parametrize(
    "args, first, second",
    [
        (
            ["--opprof-report=baselines/test_m.json"],
            "--opprof-report / opprof_report */baselines/test_m.json",
            "the baseline directory */baselines (--opprof-baseline-dir / opprof_baseline_dir)",
        ),
        (
            ["--opprof-report=baselines/report.json"],
            "--opprof-report / opprof_report */baselines/report.json",
            "the baseline directory */baselines (--opprof-baseline-dir / opprof_baseline_dir)",
        ),
        (
            ["--opprof-trace-dir=baselines/traces"],
            "--opprof-trace-dir / opprof_trace_dir */baselines/traces",
            "the baseline directory */baselines (--opprof-baseline-dir / opprof_baseline_dir)",
        ),
        (
            ["--opprof-report=out", "--opprof-markdown=out", "--opprof-html=out"],
            "--opprof-report / opprof_report */out",
            "--opprof-markdown / opprof_markdown */out are one file",
        ),
        (
            ["--opprof-report=out.json", "--opprof-markdown=sub/../out.json"],
            "--opprof-report / opprof_report */out.json",
            "--opprof-markdown / opprof_markdown */out.json are one file",
        ),
    ],
    ids=["onto-baseline", "into-baselines", "traces-in-baselines", "three-at-one", "one-by-dots"],
)
def test_outputs_onto_inputs_or_each_other_are_refused(
    run_pytest: PytestRunner,
    pytester: pytest.Pytester,
    recorded: Path,
    args: list[str],
    first: str,
    second: str,
) -> None:
    before = _files(pytester.path)
    for profiled in (["--opprof"], ["--opprof-update-baselines"]):
        result = run_pytest(*profiled, *args)
        assert result.ret == pytest.ExitCode.USAGE_ERROR
        errors = [line for line in result.stderr.lines if line.startswith("ERROR:")]
        assert len(errors) == 1, result.stderr.lines
        result.stderr.fnmatch_lines([f"ERROR: {first}*{second}*(nothing was written)"])
    assert _files(pytester.path) == before  # nothing overwritten, nothing created
    assert not (pytester.path / "baselines" / "traces").exists()


def test_one_report_option_each_is_written(
    run_pytest: PytestRunner, pytester: pytest.Pytester, recorded: Path
) -> None:
    before = recorded.read_bytes()
    result = run_pytest("--opprof", "--opprof-report=out.json", "--opprof-markdown=out.md")
    result.assert_outcomes(passed=1)
    assert (pytester.path / "out.json").is_file() and (pytester.path / "out.md").is_file()
    assert recorded.read_bytes() == before


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    return subprocess.run(
        [sys.executable, "-m", "pytest_opprof", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=env,
        timeout=120,
    )


@pytest.mark.slow
def test_html_page_onto_its_report_is_refused(
    run_pytest: PytestRunner, pytester: pytest.Pytester, recorded: Path
) -> None:
    pytest.importorskip("jinja2")
    run_pytest("--opprof", "--opprof-report=rep.json").assert_outcomes(passed=1)
    report = pytester.path / "rep.json"
    text = report.read_bytes()
    (pytester.path / "rep.html").write_bytes(text)  # a JSON report named .html
    (pytester.path / "link.html").symlink_to("rep.json")
    for args, out in (
        (["rep.json", "-o", "rep.json"], "rep.json"),
        (["rep.json", "-o", "./sub/../rep.json"], "*rep.json"),
        (["rep.json", "-o", "link.html"], "link.html"),
        (["rep.html"], "rep.html"),
    ):
        done = _cli("html", *args, cwd=pytester.path)
        assert done.returncode == 2, done
        lines = done.stderr.splitlines()
        assert len(lines) == 1, lines
        source = "rep.html" if args[0] == "rep.html" else "rep.json"
        assert fnmatch.fnmatchcase(
            lines[0],
            f"error: the page {out} would be written onto the JSON report {source}: "
            "give another path with -o (nothing was written)",
        ), lines
    assert report.read_bytes() == text and (pytester.path / "rep.html").read_bytes() == text
    done = _cli("html", "rep.json", cwd=pytester.path)
    assert done.returncode == 0, done
    assert (pytester.path / "rep.html").read_bytes() != text
