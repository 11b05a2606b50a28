"""Every report carries the history gate's verdict: real runs at real commits of a git
repository write a history in which a test's FLOPs crept by steps each within tolerance;
the run that fails it writes the JSON report, JUnit XML, the Markdown summary and the HTML
report (under pytest-xdist: its workers judge, its controller writes), and each says the
test failed because it crept, from which level to which, at which commits, naming the op;
the HTML report's link takes the test to its charts on the history page.

The browser test skips without Chromium unless ``OPPROF_REQUIRE_BROWSER=1``.
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from history_helpers import SUITE
from history_helpers import git as _git
from run_helpers import run_in_subprocess

from pytest_opprof.render.markdown_text import md_text

MATMUL = "test_suite.py::test_matmul"
ADD = "test_suite.py::test_add"
SIZES = (32, 32, 33, 34)
"""Per commit, the matmul's size: +9.7% FLOPs at the third, +9.4% at the fourth (each
within the 10% FLOPs tolerance), +20% since the first."""


def _flops(n: int) -> int:
    return 2 * n**3


@dataclass(frozen=True)
class Run:
    """The run that failed ``test_matmul`` for its creep: where it wrote, the commits."""

    root: Path
    shas: list[str]

    @property
    def out(self) -> Path:
        return self.root / "out"

    @property
    def sentence(self) -> str:
        """The creep as every report words it: each step with its commit and date."""
        sha = self.shas[2][:7]
        grew = f"{_flops(34) / _flops(32) - 1:+.0%}"
        return (
            f"flops {grew} ({_flops(32):,} -> {_flops(34):,}) against its level before "
            f"{sha} (2026-11-03): stepped +10% at {sha} (2026-11-03), +9% in this run; "
            "op numpy.matmul"
        )


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Run:
    """A run per commit into a history; the last also writes every report."""
    root = tmp_path_factory.mktemp("crept")
    (root / "test_suite.py").write_text(SUITE, encoding="utf-8")
    (root / ".gitignore").write_text("out/\n__pycache__/\n", encoding="utf-8")
    history = root.parent / f"{root.name}-history"  # outside the checkout: commits stay clean
    _git(root, "init", "-q", "-b", "main")
    args = ["--opprof", "--opprof-capture", "numpy", f"--opprof-history={history}"]
    args += ["--opprof-flops-tolerance=10%", "--opprof-memory-tolerance=100%"]
    shas = []
    for day, n in enumerate(SIZES):
        (root / "knob.json").write_text(json.dumps({"n": n}), encoding="utf-8")
        _git(root, "add", "-A", day=day)
        _git(root, "commit", "-q", "--allow-empty", "-m", f"n={n}", day=day)
        shas.append(_git(root, "rev-parse", "HEAD"))
        if day < len(SIZES) - 1:
            done = run_in_subprocess(root, *args, "-p", "no:xdist")
            assert done.returncode == 0, done.stdout + done.stderr
    reports = ["--opprof-report=out/report.json", "--opprof-markdown=out/report.md"]
    reports += ["--opprof-html=out/report.html", "--junitxml=out/junit.xml"]
    done = run_in_subprocess(root, *args, *reports, "-n", "2")
    assert done.returncode == 1, done.stdout + done.stderr
    assert f"opprof CREPT: {MATMUL}: " in done.stdout
    assert "1 failed, 1 passed" in done.stdout
    return Run(root, shas)


def test_the_json_report_says_the_test_crept(run: Run) -> None:
    report = json.loads((run.out / "report.json").read_text(encoding="utf-8"))
    assert report["totals"]["regressed"] == 1
    test = report["tests"][MATMUL]
    assert test["status"] == "regressed"
    (crept,) = test["verdict"]["crept"]
    assert crept == {
        "figure": "flops",
        "unit": "flops",
        "before": _flops(32),
        "now": _flops(34),
        "change": round(_flops(34) / _flops(32) - 1, 4),
        "steps": [
            {
                "sha": run.shas[2],
                "date": "2026-11-03",
                "run_at": crept["steps"][0]["run_at"],
                "change": round(_flops(33) / _flops(32) - 1, 4),
            }
        ],
        "ops": ["numpy.matmul"],
        "this_run": round(_flops(34) / _flops(33) - 1, 4),
        "text": run.sentence,
    }
    # No baseline was recorded: the creep alone failed it, the other test is new.
    assert "baseline_recorded_at" not in test["verdict"]
    assert "crept" not in report["tests"][ADD]["verdict"]
    assert report["tests"][ADD]["status"] == "new"


def test_junit_xml_says_the_test_crept(run: Run) -> None:
    cases = {
        f"{c.get('classname')}::{c.get('name')}": c
        for c in ET.parse(run.out / "junit.xml").getroot().iter("testcase")
    }
    case = cases["test_suite::test_matmul"]
    props = [(p.get("name"), p.get("value")) for p in case.iter("property")]
    assert ("opprof_crept", run.sentence) in props
    assert ("opprof_verdict", "regressed") in props
    failure = case.find("failure")
    assert failure is not None
    assert f"opprof CREPT: {MATMUL}: beyond tolerance" in (failure.text or "")
    other = [p.get("name") for p in cases["test_suite::test_add"].iter("property")]
    assert "opprof_crept" not in other


def test_the_markdown_report_says_the_test_crept(run: Run) -> None:
    text = (run.out / "report.md").read_text(encoding="utf-8")
    row = next(line for line in text.splitlines() if line.startswith(f"| `{MATMUL}` |"))
    assert row.split(" | ")[1] == "❌ crept"
    assert f"<details><summary>{MATMUL}: crept</summary>" in text
    line = f"> ❌ crept beyond tolerance against its history: {md_text(run.sentence)}"
    assert line in text.splitlines()


def _embedded(page: Path) -> Any:
    text = page.read_text(encoding="utf-8")
    marker = '<script type="application/json" id="opprof-data">'
    start = text.index(marker) + len(marker)
    return json.loads(text[start : text.index("</script>", start)])


def test_the_html_report_says_the_test_crept(run: Run) -> None:
    data = _embedded(run.out / "report.html")
    rows = {r["id"]: r for r in data["rows"]}
    assert rows[MATMUL]["st"] == "regressed"
    assert rows[MATMUL]["lb"] == "crept"
    assert rows[MATMUL]["cr"] == [run.sentence]
    assert "cr" not in rows[ADD] and "lb" not in rows[ADD]
    # The history page beside it has the test's steps: its link counts them.
    assert data["history"]["page"] == "report.history.html"
    assert data["history"]["changes"][MATMUL] >= 1


def test_the_html_report_shows_the_creep_and_links_to_its_history(run: Run, browser: Any) -> None:
    b = browser
    page = run.out / "report.html"
    b.load(page)
    assert b.errors == []
    assert b.requests == [page.resolve().as_uri()]
    card = f".card[data-id={json.dumps(MATMUL)}]"
    shown = b.evaluate(
        f"(() => {{ const c = document.querySelector('{card}'); return ["
        "c.querySelector('h3 .badge').textContent,"
        " [...c.querySelectorAll('p.crept')].map(p => p.textContent),"
        " c.querySelector('a.hist').getAttribute('href')]; })()"
    )
    badge, lines, href = shown
    assert badge == "CREPT "
    assert lines == [f"crept beyond tolerance against its history: {run.sentence}"]
    assert href == "report.history.html#test=" + quote(MATMUL, safe="-_.!~*'()")
    row_badge = b.evaluate(
        f"document.querySelector('#tests tr.row[data-id={json.dumps(MATMUL)}] td.badge')"
        ".textContent"
    )
    assert row_badge == "crept"
    # Following the link lands on the test's charts, its steps in the table.
    history = run.out / "report.history.html"
    b.load(history, fragment=href.partition("#")[2])
    assert b.errors == []
    targeted = b.evaluate(
        "[...document.querySelectorAll('.chart.target')].map(f => f.dataset.test)"
    )
    assert targeted and set(targeted) == {MATMUL}
    shas = b.evaluate("[...document.querySelectorAll('#changes tbody tr')].map(r => r.textContent)")
    assert any(run.shas[2][:7] in row for row in shas)
    assert b.errors == []
