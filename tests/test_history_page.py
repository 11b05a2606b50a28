"""The history page (``pytest-opprof history DIR --html``, and beside ``--opprof-html``):
real runs of a real git repository write the history; the page holds its change points
and names safely, and in headless Chromium draws the charts, marks the step at its
commit, sorts its table and requests nothing but itself.  The run's HTML report links
each test to its place on the page.

The browser tests skip without Chromium unless ``OPPROF_REQUIRE_BROWSER=1``.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from history_helpers import git as _git
from html_helpers import bench_module
from run_helpers import run_in_subprocess

from pytest_opprof.__main__ import main
from pytest_opprof.history.html import page_data, render_history_html
from pytest_opprof.history.series import find_changes
from pytest_opprof.history.store import scan
from pytest_opprof.plugin.history import history_page_path

# Names that would end the page's script or open markup if pasted into it as text.
TAG = "</script><script>document.title='pwned'</script>&amp;\"q\"'"
SCOPE = "</script><b>solve</b> & 'step'"
SUITE = f"""
import json
import pathlib

import numpy as np
import pytest

KNOB = json.loads((pathlib.Path(__file__).parent / "knob.json").read_text())


@pytest.mark.parametrize("tag", [{TAG!r}])
def test_matmul(tag, opprof):
    n = KNOB["n"]
    for _ in range(KNOB["calls"]):
        with opprof.record_function({SCOPE!r}):
            np.matmul(np.ones((n, n)), np.ones((n, n)))


def test_add():
    np.add(np.ones(1000), 1.0)
"""
STEPPED = f"test_suite.py::test_matmul[{TAG}]"
STEADY = "test_suite.py::test_add"
KNOBS = [(32, 1), (32, 1), (48, 2), (48, 2)]
"""Per commit: the matmul's size and calls; the third commit steps FLOPs and counts."""


@dataclass(frozen=True)
class Project:
    root: Path
    history: Path
    report: Path
    page: Path
    shas: list[str]
    output: str


def _pytest(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return run_in_subprocess(root, "-p", "no:xdist", *args)


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Project:
    """Four commits, one run each into a history; the last run also writes the HTML report."""
    root = tmp_path_factory.mktemp("project")
    (root / "test_suite.py").write_text(SUITE, encoding="utf-8")
    (root / "pytest.ini").write_text("[pytest]\n", encoding="utf-8")
    (root / ".gitignore").write_text("out/\n__pycache__/\n", encoding="utf-8")
    history = root.parent / f"{root.name}-history"  # outside the checkout
    _git(root, "init", "-q", "-b", "main")
    shas, done = [], None
    for day, (n, calls) in enumerate(KNOBS):
        (root / "knob.json").write_text(json.dumps({"n": n, "calls": calls}), encoding="utf-8")
        _git(root, "add", "-A", day=day)
        _git(root, "commit", "-q", "--allow-empty", "-m", f"n={n} calls={calls}", day=day)
        shas.append(_git(root, "rev-parse", "HEAD"))
        args = ["--opprof", "--opprof-capture", "numpy", "--opprof-rounds", "2"]
        args += [f"--opprof-history={history}"]
        if day == len(KNOBS) - 1:
            args += ["--opprof-html", "out/report.html"]
        done = _pytest(root, *args)
        assert done.returncode == 0, done.stdout + done.stderr
    assert done is not None
    return Project(
        root,
        history,
        root / "out/report.html",
        root / "out/report.history.html",
        shas,
        done.stdout,
    )


def _embedded(page: Path, element: str) -> Any:
    text = page.read_text(encoding="utf-8")
    marker = f'<script type="application/json" id="{element}">'
    start = text.index(marker) + len(marker)
    return json.loads(text[start : text.index("</script>", start)])


def _cli_page(project: Project, out: Path, *more: str) -> str:
    assert main(["history", str(project.history), "--html", str(out), *more]) == 0
    return out.read_text(encoding="utf-8")


def test_the_run_writes_the_page_beside_its_report(project: Project) -> None:
    assert (
        f"opprof: history page: {project.page} (" in project.output
        and "in 4 run(s); the HTML report links each test to it)" in project.output
    ), project.output
    assert project.page.is_file() and project.report.is_file()
    links = _embedded(project.report, "opprof-data")["history"]
    assert links["page"] == "report.history.html"
    assert links["changes"][STEPPED] >= 2  # flops and counts, of the test and its ops
    assert STEADY not in links["changes"]  # no change point: linked, without a count


def test_the_page_holds_every_change_point_worst_first(
    project: Project, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "page.html"
    _cli_page(project, out)
    printed = capsys.readouterr().out
    assert printed.rstrip().endswith(f"wrote {out}")
    assert main(["history", str(project.history), "--json"]) == 0
    terminal = json.loads(capsys.readouterr().out)["changes"]
    data = _embedded(out, "opprof-history")
    rows = data["changes"]
    # The table is the terminal's order, each row with its commit and date.
    assert [(r["t"], r["f"], r["o"]) for r in rows] == [
        (c["test"], c["figure"], c["op"]) for c in terminal
    ]
    assert {r["s"] for r in rows} == {project.shas[2][:12]}
    assert {r["d"] for r in rows} == {"2026-11-03"}
    assert STEADY not in {r["t"] for r in rows}
    flops = next(r for r in rows if r["t"] == STEPPED and r["f"] == "flops" and r["o"] is None)
    grown = (2 * 48**3) / (32**3) - 1  # twice the calls, each (48/32)^3 the work
    assert flops["c"] == pytest.approx(grown, abs=1e-4)
    assert flops["v"] == f"{2 * 32**3:,} → {2 * 2 * 48**3:,}"
    scope_calls = next(r for r in rows if r["o"] == SCOPE and r["f"] == "count")
    assert scope_calls["ct"] == "+100%" and scope_calls["v"] == "1 → 2"
    # A chart per family that stepped, the stepped ops at the bottom of its stack.
    charts = {c["fam"]: c for c in data["charts"]}
    assert {"flops", "count"} <= set(charts)
    assert all(c["t"] == STEPPED for c in data["charts"])
    flops_chart = charts["flops"]
    assert flops_chart["total"] == [2 * 32**3, 2 * 32**3, 4 * 48**3, 4 * 48**3]
    assert flops_chart["ops"][0][0] == "numpy.matmul" and "numpy.matmul" in flops_chart["stepped"]
    assert [s[0] for s in flops_chart["steps"]] == [2]  # the third run, the third commit
    assert flops_chart["steps"][0][1] == f"{project.shas[2][:7]} 2026-11-03"
    assert SCOPE in [name for name, _ in charts["count"]["ops"]]
    assert data["machines"][0]["runs"][2][:2] == [project.shas[2][:12], "2026-11-03"]


def test_the_page_is_self_contained_and_names_stay_text(project: Project, tmp_path: Path) -> None:
    page = _cli_page(project, tmp_path / "page.html")
    assert page.startswith("<!DOCTYPE html>")
    lowered = page.lower()
    assert "default-src 'none'" in page  # the page forbids loading anything
    # The SVG namespace is a name the script passes to createElementNS, never fetched.
    assert lowered.count("http://") == lowered.count('"http://www.w3.org/2000/svg"') == 1
    for fetch in ("src=", "href=", "url(", "@import", "https://", "fetch(", "xmlhttp"):
        assert fetch not in lowered, fetch
    # Three scripts: the data, the page's own, and none a name could open.
    assert page.count("<script") == 2 and page.count("</script>") == 2
    assert TAG not in page and SCOPE not in page and "<b>solve" not in page
    assert "\\u003c/script\\u003e\\u003cscript\\u003edocument.title=" in page
    assert "\\u0026amp;" in page


def test_filters_reach_the_page(project: Project, tmp_path: Path) -> None:
    _cli_page(project, tmp_path / "op.html", "--op", "matmul")
    rows = _embedded(tmp_path / "op.html", "opprof-history")["changes"]
    assert rows and {r["o"] for r in rows} == {"numpy.matmul"}
    _cli_page(project, tmp_path / "none.html", "-k", "test_add")
    data = _embedded(tmp_path / "none.html", "opprof-history")
    assert data["changes"] == [] and data["charts"] == []
    assert "No change point" in (tmp_path / "none.html").read_text(encoding="utf-8")


def test_charts_are_capped_and_the_table_is_not(project: Project) -> None:
    history = scan(project.history)
    found = find_changes(history)
    data = page_data(history, found, found.changes, limit=1)
    assert len(data["charts"]) == 1 and data["wanted"] >= 2
    assert len(data["changes"]) == len(found.changes)
    assert {r["ch"] for r in data["changes"]} == {0, -1}
    page = render_history_html(history, found, found.changes, title="h")
    assert "Charts for the first" not in page  # the default limit draws them all


def test_history_html_errors_are_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["history", str(tmp_path / "none"), "--html", str(tmp_path / "p.html")]) == 2
    assert "not a directory" in capsys.readouterr().err
    blocked = tmp_path / "file"
    blocked.write_text("", encoding="utf-8")
    (tmp_path / "h").mkdir()
    assert main(["history", str(tmp_path / "h"), "--html", str(blocked / "p.html")]) == 2
    assert "cannot be written" in capsys.readouterr().err


def test_the_page_goes_beside_a_report_file(tmp_path: Path) -> None:
    assert history_page_path(tmp_path / "out" / "run.html") == tmp_path / "out/run.history.html"
    fifo = tmp_path / "fifo.html"  # as /dev/stdout: no file of its own to be beside
    os.mkfifo(fifo)
    assert history_page_path(fifo) is None


# -- in the browser -----------------------------------------------------------------------


def test_the_page_in_chromium(project: Project, browser: Any, tmp_path: Path) -> None:
    b = browser
    page = tmp_path / "page.html"
    _cli_page(project, page)
    data = _embedded(page, "opprof-history")
    seconds = b.load(page)
    assert b.errors == []
    assert b.requests == [page.resolve().as_uri()]  # nothing but the page itself
    assert seconds < 10
    assert b.evaluate("document.title").startswith("pytest-opprof history")  # not 'pwned'
    b.screenshot(tmp_path / "history.png", full_page=True)
    assert (tmp_path / "history.png").stat().st_size > 10_000

    # A chart per family that stepped, each with its line, its stacked ops and the step.
    charts = b.evaluate(
        "[...document.querySelectorAll('.chart')].map(f => [f.dataset.test, f.dataset.family,"
        " f.querySelectorAll('path.total').length, f.querySelectorAll('path.area').length,"
        " [...f.querySelectorAll('.step text')].map(t => t.textContent),"
        " f.querySelector('h3').textContent])"
    )
    assert len(charts) == len(data["charts"]) >= 2
    step_label = f"{project.shas[2][:7]} 2026-11-03"
    for test, _family, lines, areas, marks, title in charts:
        assert test == STEPPED and title == STEPPED  # the hostile id, as text
        assert lines >= 1 and areas >= 1
        assert marks == [step_label]
    # The mark stands between the second run and the third.
    xs = b.evaluate(
        "(() => { const f = document.querySelector('.chart[data-family=flops]');"
        " const dots = [...f.querySelectorAll('circle.dot')].map(c => +c.getAttribute('cx'));"
        " return [dots, +f.querySelector('.step line').getAttribute('x1')]; })()"
    )
    dots, mark = xs
    assert len(dots) == 4 and dots[1] < mark < dots[2]
    # Hovering the third run shows its commit and its figures.
    tip = b.evaluate(
        "(() => { const f = document.querySelector('.chart[data-family=flops]');"
        " const dot = f.querySelectorAll('circle.dot')[2].getBoundingClientRect();"
        " f.querySelector('rect.hit').dispatchEvent(new MouseEvent('mousemove',"
        " {clientX: dot.left + dot.width / 2, clientY: dot.top, bubbles: true}));"
        " const t = document.getElementById('tip'); return [t.hidden, t.textContent]; })()"
    )
    assert tip[0] is False
    assert tip[1].startswith(f"{project.shas[2][:7]} (2026-11-03)")
    assert f"numpy.matmul: {4 * 48**3 / 1e3:.2f} KFLOP" in tip[1]
    assert "step: flops +" in tip[1]

    # The table: every change point, worst first; the hostile names as text.
    cells = b.evaluate(
        "[...document.querySelectorAll('#changes tbody tr')].map(r =>"
        " [...r.children].map(td => td.textContent))"
    )
    assert [(c[1], c[2], c[3]) for c in cells] == [
        (r["t"], r["f"], r["o"] or "") for r in data["changes"]
    ]
    assert all(c[6] == project.shas[2][:7] and c[7] == "2026-11-03" for c in cells)
    assert SCOPE in [c[3] for c in cells]
    assert b.evaluate("document.querySelectorAll('b, main script, header script').length") == 0
    # Sorted by change, largest first, then back to worst first.
    b.evaluate("document.querySelector('#changes th[data-key=c]').click()")
    shown = b.evaluate(
        "[...document.querySelectorAll('#changes tbody tr')].map(r => +r.children[0].textContent)"
    )
    by_change = sorted(
        range(len(data["changes"])),
        key=lambda i: (
            -(data["changes"][i]["c"] if data["changes"][i]["c"] is not None else 1e9),
            i,
        ),
    )
    assert shown == [i + 1 for i in by_change]
    # The filter keeps the rows of one op (a word of it the test id lacks).
    b.evaluate(
        "(() => { const f = document.getElementById('filter-text'); f.value = 'SOLVE';"
        " f.dispatchEvent(new Event('input')); })()"
    )
    ops = b.evaluate(
        "[...document.querySelectorAll('#changes tbody td.op')].map(t => t.textContent)"
    )
    assert ops and set(ops) == {SCOPE}
    assert b.errors == []


def test_the_report_links_each_test_to_the_page(project: Project, browser: Any) -> None:
    b = browser
    b.load(project.report)
    assert b.errors == []
    assert b.requests == [project.report.resolve().as_uri()]
    links = b.evaluate(
        "Object.fromEntries([...document.querySelectorAll('#tests tbody tr.row')].map(r =>"
        " [r.dataset.id, [r.querySelector('a.hist').getAttribute('href'),"
        " r.querySelector('a.hist').textContent]]))"
    )
    assert set(links) == {STEPPED, STEADY}
    href, text = links[STEPPED]
    assert href == "report.history.html#test=" + quote(STEPPED, safe="-_.!~*'()")
    assert text.startswith("history: ") and text.endswith(" change points")
    assert links[STEADY][1] == "history"

    # Following the link lands on the test's charts.
    b.load(project.page, fragment=href.partition("#")[2])
    assert b.errors == []
    assert b.requests == [project.page.resolve().as_uri()]
    targeted = b.evaluate(
        "[...document.querySelectorAll('.chart.target')].map(f => f.dataset.test)"
    )
    assert targeted and set(targeted) == {STEPPED}
    rows = b.evaluate(
        "[...document.querySelectorAll('#changes tbody tr')].map(r => r.dataset.test)"
    )
    assert rows and set(rows) == {STEPPED}
    # A test with no change point says so (a link followed from the page already open).
    b.evaluate(
        f"new Promise(done => {{ window.addEventListener('hashchange', () => setTimeout(done, 0),"
        f" {{once: true}}); location.hash = {json.dumps(links[STEADY][0].partition('#')[2])}; }})"
    )
    note = b.evaluate(
        "[document.getElementById('target').hidden, document.getElementById('target').textContent]"
    )
    assert note == [False, f"{STEADY}: no change point in this history"]
    assert b.evaluate("document.querySelectorAll('#changes tbody tr').length") == 0
    assert b.errors == []


def test_a_large_history_page_loads(browser: Any, tmp_path: Path) -> None:
    """60 runs x 400 tests written by the store's own format (bench/history_synthetic.py):
    only the tests that stepped are charted, and the page loads quickly."""
    synth: Any = bench_module("history_synthetic")
    directory = tmp_path / "history"
    directory.mkdir()
    synth.write_history(directory, 60, 400, 8, 3)
    page = tmp_path / "big.html"
    assert main(["history", str(directory), "--html", str(page)]) == 0
    data = _embedded(page, "opprof-history")
    charted = {c["t"] for c in data["charts"]}
    assert "tests/test_mod2.py::test_case_44" in charted  # the injected FLOPs step
    assert len(charted) <= 20  # of 400 tests
    times = [c for c in data["charts"] if c["fam"] == "time"]
    assert times and all(c["stepped"] and c["ops"][0][0] in c["stepped"] for c in times)
    assert all(len(c["total"]) == 60 for c in data["charts"])
    rows = [r for r in data["changes"] if r["f"] == "self"]
    as_time = re.compile(r"\d+\.\d{3}m?u?s → \d+\.\d{3}m?u?s")  # render/units.py's times
    assert rows and all(r["ct"].count("[") == 1 and as_time.fullmatch(r["v"]) for r in rows)
    b = browser
    seconds = b.load(page)
    assert b.errors == [] and b.requests == [page.resolve().as_uri()]
    assert seconds < 10
    assert b.evaluate("document.querySelectorAll('.chart svg path.total').length") >= len(charted)
