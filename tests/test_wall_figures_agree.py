"""One wall time per test in every report: the terminal diff, the Markdown summary, the
JUnit properties and the HTML page show the figure the verdict judged (its rounds, at the
baseline's machine speed) beside its change, and the measured median only labelled raw.

They had shown three: the diff the judged figure, the Markdown the measured median with
the judged change, JUnit the measured median.
"""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from typing import TYPE_CHECKING

import pytest

from pytest_opprof.render.html import page_data
from pytest_opprof.render.report import format_value

if TYPE_CHECKING:
    from run_helpers import PytestRunner

TESTS = """
import time


def test_spin():
    end = time.perf_counter() + 0.002 * {slower}
    while time.perf_counter() < end:
        pass
"""

# Every round judged whatever the machine's load, and rounds enough on both sides whatever
# the rounds policy decides (CI once recorded too few): the test must regress here.
ARGS = ("--opprof-max-wait=100%", "--opprof-capture", "none", "--opprof-rounds=5")


def test_every_report_shows_the_judged_wall_time_and_labels_the_raw_one(
    pytester: pytest.Pytester, run_pytest: PytestRunner
) -> None:
    pytester.makepyfile(test_wall=TESTS.format(slower=1))
    run_pytest("--opprof-update-baselines", *ARGS).assert_outcomes(passed=1)
    pytester.makepyfile(test_wall=TESTS.format(slower=10))
    result = run_pytest(
        "--opprof",
        *ARGS,
        "--opprof-report=rep.json",
        "--opprof-report-details",
        "--opprof-markdown=rep.md",
        "--junitxml=junit.xml",
    )
    result.assert_outcomes(failed=1)
    test = json.loads((pytester.path / "rep.json").read_text())["tests"]["test_wall.py::test_spin"]
    (row,) = [m for m in test["verdict"]["metrics"] if m["metric"] == "wall time"]
    assert row["status"] == "regressed"
    judged, raw = row["now"], test["summary"]["wall_time"]["median_ns"]
    change = row["change"] * 100

    text = result.stdout.str()
    # The diff shows in the failure and again where the output repeats it (CI's -rA): alike.
    (diff,) = set(re.findall(r"^\+ wall time +(\S+) +(\S+)%", text, re.MULTILINE))
    assert diff[0] == format_value(judged, "ns")
    assert float(diff[1]) == pytest.approx(change, abs=0.1)  # the JSON rounds it

    markdown = (pytester.path / "rep.md").read_text(encoding="utf-8")
    (cells,) = [line for line in markdown.splitlines() if line.startswith("| `test_wall.py")]
    cell, cell_change = cells.split(" | ")[2:4]
    assert cell == diff[0] and cell_change == f"{diff[1]}%"

    props = {
        p.get("name"): p.get("value")
        for p in ET.parse(pytester.path / "junit.xml").getroot().iter("property")
    }
    # The JSON report keeps three significant digits, JUnit the whole figure.
    assert float(props["opprof_wall_time_us"]) == pytest.approx(judged / 1000, rel=5e-3)
    assert float(props["opprof_wall_time_raw_us"]) == pytest.approx(raw / 1000, rel=5e-3)
    assert props["opprof_wall_time_basis"].startswith("wall time of the rounds judged")

    html = {
        r["id"]: r for r in page_data(json.loads((pytester.path / "rep.json").read_text()))["rows"]
    }
    assert html["test_wall.py::test_spin"]["w"] == judged

    if judged != raw:  # scaled to the baseline's speed: the raw figure shows, labelled
        raw_text = format_value(raw, "ns")
        assert re.search(rf"^  wall time \(raw\) +{re.escape(raw_text)} ", text, re.MULTILINE)
        assert f"> wall time (raw): {raw_text}" in markdown
    # Only labelled: no unlabelled wall time in any report differs from the judged one.
    assert set(re.findall(r"^[+ ] wall time {2,}(\S+)", text, re.MULTILINE)) == {diff[0]}
