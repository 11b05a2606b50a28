"""Every report carries the absolute budgets: a real run in which one test goes over its
peak-memory budget, one over its leak budget and one stays within its FLOPs budget writes
the JSON report, JUnit XML, the Markdown summary and the HTML report, and each says which
test went over which budget, naming the op that used it, as the terminal does; the HTML
report shows it in headless Chromium.

The browser test skips without Chromium unless ``OPPROF_REQUIRE_BROWSER=1``.
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from run_helpers import run_in_subprocess

from pytest_opprof.render.markdown_text import md_text

PROJECT = """
import pytest
import numpy as np

HELD = []


@pytest.mark.profile(max_memory="1 MiB")
def test_big():
    a = np.zeros(250_000)  # 2 MB
    assert float(a.sum()) == 0.0


@pytest.mark.profile(max_leaked="0 B")
def test_leaks():
    HELD.append(np.arange(50_000.0))  # 400 kB kept by the module


@pytest.mark.profile(max_flops="1 GFLOP")
def test_within():
    a = np.ones((20, 20))
    assert (a @ a).sum() > 0
"""

BIG = "test_project.py::test_big"
LEAKS = "test_project.py::test_leaks"
WITHIN = "test_project.py::test_within"


@dataclass(frozen=True)
class Run:
    out: Path
    stdout: str

    def json(self) -> Any:
        return json.loads((self.out / "report.json").read_text(encoding="utf-8"))

    def budget(self, nodeid: str) -> dict[str, Any]:
        (row,) = self.json()["tests"][nodeid]["verdict"]["budgets"]
        return dict(row)


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Run:
    root = tmp_path_factory.mktemp("budgets")
    (root / "test_project.py").write_text(PROJECT, encoding="utf-8")
    args = ["--opprof", "--opprof-capture", "numpy", "--opprof-report=out/report.json"]
    args += ["--opprof-markdown=out/report.md", "--opprof-html=out/report.html"]
    done = run_in_subprocess(root, *args, "--junitxml=out/junit.xml", "-p", "no:xdist")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "2 failed, 1 passed" in done.stdout, done.stdout
    return Run(root / "out", done.stdout)


def test_the_terminal_and_json_name_the_op_that_used_each_budget(run: Run) -> None:
    """What every other report is held to: the terminal's and the JSON's account."""
    assert f"opprof OVER BUDGET: {BIG}" in run.stdout
    assert f"opprof OVER BUDGET: {LEAKS}" in run.stdout
    # Counted under what failed them, not under the comparison's "regressed".
    lines = run.stdout.splitlines()
    assert "opprof: 3 profiled test(s) (2 over budget, 1 new)" in lines
    assert "opprof baselines (baselines): 2 over budget, 1 new" in lines
    assert f"OVER BUDGET {BIG} (failed; its budgets are in its failure)" in lines
    big, leak, within = run.budget(BIG), run.budget(LEAKS), run.budget(WITHIN)
    assert (big["status"], big["ops"][0]["op"]) == ("over", "numpy.zeros")
    assert (leak["status"], leak["ops"][0]["op"]) == ("over", "numpy.arange")
    assert within["status"] == "within"


def test_the_markdown_report_says_which_tests_went_over_their_budgets(run: Run) -> None:
    text = (run.out / "report.md").read_text(encoding="utf-8")
    rows = {
        line.split(" | ")[0][3:-1]: line.split(" | ")[1]
        for line in text.splitlines()
        if line.startswith("| `test_project.py::")
    }
    assert rows[BIG] == "❌ over budget"
    assert rows[LEAKS] == "❌ over budget"
    assert rows[WITHIN].endswith(" new")
    assert f"<details><summary>{BIG}: over budget</summary>" in text
    leak_line = next(line for line in text.splitlines() if "(max\\_leaked)" in line)
    assert leak_line.startswith("> ❌ leaked memory ")
    assert ": `numpy.arange` 390.62 KB" in leak_line


def test_junit_xml_says_which_tests_went_over_their_budgets(run: Run) -> None:
    cases = {
        f"{c.get('classname')}::{c.get('name')}": c
        for c in ET.parse(run.out / "junit.xml").getroot().iter("testcase")
    }
    props = {
        p.get("name"): p.get("value") for p in cases["test_project::test_leaks"].iter("property")
    }
    assert props["opprof_verdict"] == "regressed"
    assert "over its budget of 0 B (max_leaked): numpy.arange" in props["opprof_budget_max_leaked"]
    failure = cases["test_project::test_leaks"].find("failure")
    assert failure is not None and f"opprof OVER BUDGET: {LEAKS}" in (failure.text or "")
    within = {
        p.get("name"): p.get("value") for p in cases["test_project::test_within"].iter("property")
    }
    assert within["opprof_budget_max_flops"].startswith("flops ")
    assert "within its budget of 1.00 GFLOP" in within["opprof_budget_max_flops"]


def _embedded(page: Path) -> Any:
    text = page.read_text(encoding="utf-8")
    marker = '<script type="application/json" id="opprof-data">'
    start = text.index(marker) + len(marker)
    return json.loads(text[start : text.index("</script>", start)])


def test_the_html_report_embeds_each_budget_with_the_op_that_used_it(run: Run) -> None:
    rows = {r["id"]: r for r in _embedded(run.out / "report.html")["rows"]}
    assert rows[BIG]["st"] == "regressed" and rows[BIG]["lb"] == "over budget"
    ((status, text),) = rows[LEAKS]["bu"]
    assert status == "over"
    assert text.startswith("leaked memory 390.62 KB over its budget of 0 B (max_leaked): ")
    assert "numpy.arange 390.62 KB" in text
    ((status, text),) = rows[WITHIN]["bu"]
    assert status == "within" and "within its budget of 1.00 GFLOP (max_flops)" in text
    assert "lb" not in rows[WITHIN]


def test_the_html_report_shows_the_budgets_in_chromium(run: Run, browser: Any) -> None:
    b = browser
    page = run.out / "report.html"
    b.load(page)
    assert b.errors == []
    assert b.requests == [page.resolve().as_uri()]
    shown = {}
    for nodeid in (BIG, LEAKS):
        card = f".card[data-id={json.dumps(nodeid)}]"
        shown[nodeid] = b.evaluate(
            f"(() => {{ const c = document.querySelector('{card}'); return ["
            "c.querySelector('h3 .badge').textContent,"
            " [...c.querySelectorAll('p.budget.over')].map(p => p.textContent)]; })()"
        )
    badge, lines = shown[LEAKS]
    assert badge == "OVER BUDGET "
    (line,) = lines
    assert line.startswith("over budget: leaked memory 390.62 KB over its budget of 0 B")
    assert "numpy.arange 390.62 KB" in line
    badge, lines = shown[BIG]
    assert badge == "OVER BUDGET " and len(lines) == 1
    assert "over its budget of 1.00 MB (max_memory): numpy.zeros" in lines[0]
    row_badge = b.evaluate(
        f"document.querySelector('#tests tr.row[data-id={json.dumps(BIG)}] td.badge').textContent"
    )
    assert row_badge == "over budget ★"  # each carries a profile marker
    # A test within its budget says so in its own panel (its row, clicked).
    b.evaluate(f"document.querySelector('#tests tr.row[data-id={json.dumps(WITHIN)}]').click()")
    within = b.evaluate(
        "[...document.querySelectorAll('#tests .detail-row p.budget')].map(p => p.textContent)"
    )
    assert len(within) == 1 and "within its budget of 1.00 GFLOP (max_flops)" in within[0]
    assert b.errors == []


def test_the_markdown_sentence_is_the_html_one(run: Run) -> None:
    """One wording everywhere (``render/budget_lines.py``)."""
    rows = {r["id"]: r for r in _embedded(run.out / "report.html")["rows"]}
    ((_, html_line),) = rows[BIG]["bu"]
    text = (run.out / "report.md").read_text(encoding="utf-8")
    assert md_text(html_line.split(": numpy.zeros")[0]) in text
