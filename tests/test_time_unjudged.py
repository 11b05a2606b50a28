"""A gate run whose times were not judged says so, in one line of each report: how many
tests, why (the machine's fields that differ, too few rounds, too short ...), what to do.

A fresh clone gating against baselines recorded on another machine printed ``12 pass``
and nothing else, with every wall time unjudged in the JSON."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from run_helpers import PytestRunner

PROJECT = """
import numpy as np


def test_moved():
    np.ones((40, 40)) @ np.ones((40, 40))


def test_here():
    np.ones((40, 40)) @ np.ones((40, 40))
"""

REPORTS = ("--opprof-report", "r.json", "--opprof-markdown", "r.md", "--opprof-html", "r.html")


def _line(text: str) -> str:
    return next(line for line in text.splitlines() if "imes not judged for" in line)


def _recorded_elsewhere(path: Path, test: str) -> None:
    """Give ``test``'s baseline the record of a machine with another CPU (a fresh clone of
    a project whose baselines another machine recorded)."""
    data = json.loads(path.read_text(encoding="utf-8"))
    machine = dict(data["machines"][data["tests"][test]["machine"]])
    machine["cpu_id"] = "family 6 model 85 stepping 7, avx512f"
    machine["fingerprint"] = "0123456789abcdef"
    data["machines"]["elsewhere"] = machine
    data["tests"][test]["machine"] = "elsewhere"
    path.write_text(json.dumps(data, indent=1, sort_keys=True), encoding="utf-8")


@pytest.mark.slow
def test_unjudged_times_are_counted_with_why_and_what_to_do(
    pytester: pytest.Pytester, run_pytest: PytestRunner
) -> None:
    pytester.makepyfile(test_gate=PROJECT)
    # Every round judged at any load and speed: only the reasons under test keep times
    # from being judged; what the judged times say (a loaded machine slowed a 50 us test
    # 35-fold) fails no test.
    steady = ("--opprof-rounds", "3", "--opprof-time-tolerance", "1000%", "-p", "no:randomly")
    steady += ("--opprof-max-wait", "100%", "--opprof-max-speed-change", "off")
    steady += ("--opprof-warn-only",)
    run_pytest("--opprof-update-baselines", *steady).assert_outcomes(passed=2)
    _recorded_elsewhere(pytester.path / "baselines" / "test_gate.json", "test_moved")

    # One test's baseline from another machine; the other's times judged (no floor).
    result = run_pytest("--opprof", *steady, "--opprof-min-time", "0", *REPORTS)
    result.assert_outcomes(passed=2)
    line = _line(result.stdout.str())
    assert line.startswith("times not judged for 1 of 2 test(s)"), line
    assert "1 with baselines recorded on another machine (cpu_id differ)" in line
    assert "--opprof-update-baselines" in line and "--opprof-force-time" in line
    index = result.outlines.index(line)
    assert result.outlines[index - 1].startswith("opprof baselines (baselines): ")
    # The same line in the Markdown (escaped) and the page.
    markdown = (pytester.path / "r.md").read_text(encoding="utf-8")
    assert _line(markdown).replace("\\", "") == line
    page = (pytester.path / "r.html").read_text(encoding="utf-8")
    assert f'<p class="contention" id="unjudged">{line}</p>' in page
    report = json.loads((pytester.path / "r.json").read_text(encoding="utf-8"))
    why = report["tests"]["test_gate.py::test_moved"]["verdict"]["time_unjudged"]
    assert why == {"reason": "machine", "differs": ["cpu_id"], "rounds_needed": 0, "floor_ns": 0}
    assert report["tests"]["test_gate.py::test_here"]["verdict"].get("time_unjudged") is None

    # One round: the other test has too few; a floor above both: too short to judge.
    one = run_pytest("--opprof", *steady, "--opprof-min-time", "0", "--opprof-rounds", "1")
    one.assert_outcomes(passed=2)
    line = _line(one.stdout.str())
    assert line.startswith("times not judged for 2 of 2 test(s)"), line
    assert "1 with fewer than 3 rounds on a side: run with --opprof-rounds 3" in line
    short = run_pytest("--opprof", *steady, "--opprof-min-time", "1s")
    short.assert_outcomes(passed=2)
    line = _line(short.stdout.str())
    assert line.startswith("times not judged for 2 of 2 test(s)"), line
    assert "2 under 1 s on both sides (--opprof-min-time)" in line

    # Every time judged: no line.
    (pytester.path / "baselines" / "test_gate.json").unlink()
    run_pytest("--opprof-update-baselines", *steady).assert_outcomes(passed=2)
    judged = run_pytest("--opprof", *steady, "--opprof-min-time", "0", *REPORTS)
    judged.assert_outcomes(passed=2)
    assert "times not judged" not in judged.stdout.str()
    assert "imes not judged for" not in (pytester.path / "r.md").read_text(encoding="utf-8")
