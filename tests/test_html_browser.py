"""The HTML report in a real browser: headless Chromium loads pages the plugin wrote.

Screenshots go under each test's ``tmp_path`` (kept by pytest for the last runs, never
committed).  The ``browser`` fixture (tests/conftest.py) skips without Chromium (or
``websocket-client``), unless ``OPPROF_REQUIRE_BROWSER=1`` (set by ``.ci/run``) makes
that a failure.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from html_helpers import MARKED, REGRESSED, Reports, bench_module, make_reports

from pytest_opprof.gate.compact import median_ns
from pytest_opprof.render.html import render_html


@pytest.fixture(scope="module")
def reports(tmp_path_factory: pytest.TempPathFactory) -> Reports:
    return make_reports(tmp_path_factory.mktemp("html"))


def ids_in_table(b: Any) -> list[str]:
    return b.evaluate(
        "[...document.querySelectorAll('#tests tbody tr.row')].map(r => r.dataset.id)"
    )


def click(b: Any, selector: str) -> None:
    b.evaluate(f"document.querySelector({json.dumps(selector)}).click()")


def test_report_page_in_chromium(reports: Reports, browser: Any, tmp_path: Path) -> None:
    b = browser
    seconds = b.load(reports.html)
    assert b.errors == []
    assert seconds < 10  # a 5-test page; the 20,000-test figure is bench_html_report.py's
    b.screenshot(tmp_path / "report-1280x800.png")
    assert (tmp_path / "report-1280x800.png").stat().st_size > 10_000

    # The regressed test leads, with its op among the reasons.
    card = f".card[data-id={json.dumps(REGRESSED)}]"
    first = b.evaluate("document.querySelector('#attention .card').dataset.id")
    assert first == REGRESSED
    reasons = b.evaluate(f"document.querySelector('{card} table.reasons').textContent")
    assert "numpy.matmul" in reasons and "more flops" in reasons
    bars = b.evaluate(f"document.querySelectorAll('{card} .bars .bar.now.regressed').length")
    assert bars >= 1  # flops drawn as a regressed bar

    # The flame view: the scope and the op nested in it, one merged box each.
    scopes = b.evaluate(
        f"[...document.querySelectorAll('{card} .fl-scope')].map(e => e.textContent)"
    )
    ops = b.evaluate(f"[...document.querySelectorAll('{card} .fl-op')].map(e => e.textContent)")
    assert scopes == ["solve step"]
    assert ops.count("numpy.matmul") == 1
    geometry = b.evaluate(
        f"(() => {{ const s = document.querySelector('{card} .fl-scope').getBoundingClientRect();"
        f" const o = [...document.querySelectorAll('{card} .fl-op')]"
        f".find(e => e.textContent === 'numpy.matmul').getBoundingClientRect();"
        f" return [s.left, s.right, s.top, o.left, o.right, o.top]; }})()"
    )
    s_left, s_right, s_top, o_left, o_right, o_top = geometry
    assert s_left <= o_left + 0.5 and o_right <= s_right + 0.5 and o_top > s_top  # nested below
    # Hovering the op shows its figures.
    tip = b.evaluate(
        f"(() => {{ const o = [...document.querySelectorAll('{card} .fl-op')]"
        f".find(e => e.textContent === 'numpy.matmul');"
        f" o.dispatchEvent(new MouseEvent('mouseover', {{bubbles: true}}));"
        f" const t = document.getElementById('tip'); return [t.hidden, t.textContent]; }})()"
    )
    assert tip[0] is False and tip[1].startswith("numpy.matmul: total ") and "3 calls" in tip[1]

    # The marked test's id is shown as text, never as markup.
    assert MARKED in ids_in_table(b)
    assert b.evaluate("document.querySelectorAll('#tests tbody b, #attention b').length") == 0

    # Sorting: by name both ways, by wall time largest first.
    data = json.loads(reports.json.read_text(encoding="utf-8"))["tests"]
    click(b, "#tests th[data-key=id]")
    assert ids_in_table(b) == sorted(data)
    click(b, "#tests th[data-key=id]")
    assert ids_in_table(b) == sorted(data, reverse=True)
    click(b, "#tests th[data-key=w]")
    by_wall = sorted(data, key=lambda k: (-(_shown_wall(data[k]) or 0), k))
    assert ids_in_table(b) == by_wall

    # Filtering, and a row's own panel with its op table.
    b.evaluate(
        "(() => { const s = document.getElementById('filter-status'); s.value = 'regressed';"
        " s.dispatchEvent(new Event('change')); })()"
    )
    assert ids_in_table(b) == [REGRESSED]
    click(b, "#tests tbody tr.row")
    panel_ops = b.evaluate("document.querySelector('#tests .detail-row table.ops').textContent")
    assert "numpy.matmul" in panel_ops
    assert b.errors == []


def test_report_page_at_phone_width(reports: Reports, browser: Any, tmp_path: Path) -> None:
    b = browser
    b.resize(390, 844, mobile=True)
    b.load(reports.html)
    assert b.errors == []
    # Nothing wider than the screen: the page does not scroll sideways.
    assert b.evaluate("document.documentElement.scrollWidth") <= 390
    hidden = b.evaluate("getComputedStyle(document.querySelector('#tests th[data-key=f]')).display")
    assert hidden == "none"  # the optional columns step aside
    b.screenshot(tmp_path / "report-phone.png", full_page=True)
    assert (tmp_path / "report-phone.png").stat().st_size > 10_000


@pytest.mark.slow
def test_large_report_pages_its_table(browser: Any, tmp_path: Path) -> None:
    b = browser
    synth: Any = bench_module("bench_html_report")
    page = tmp_path / "big.html"
    page.write_text(render_html(synth.synthetic_report(2_000)), encoding="utf-8")
    seconds = b.load(page)
    assert b.errors == []
    assert seconds < 10
    assert b.evaluate("document.querySelectorAll('#tests tbody tr.row').length") == 200
    click(b, "#more")
    assert b.evaluate("document.querySelectorAll('#tests tbody tr.row').length") == 400
    assert "showing 400 of 2000" in b.evaluate("document.getElementById('shown-count').textContent")
    cards = b.evaluate("document.querySelectorAll('#attention .card').length")
    assert cards == 20  # the rest are counted, not drawn
    assert b.evaluate(
        "document.querySelector('#attention .card').classList.contains('st-regressed')"
    )
    b.screenshot(tmp_path / "big.png")


def test_units_read_as_the_terminal_writes_them(
    reports: Reports, browser: Any, tmp_path: Path
) -> None:
    # Bytes are B, KB, MB (the terminal's and the Markdown's spelling, never bits), and one
    # round is "1 round".
    b = browser
    report = json.loads(reports.json.read_text(encoding="utf-8"))
    report["tests"][REGRESSED]["rounds"] = 1
    page = tmp_path / "one-round.html"
    page.write_text(render_html(report), encoding="utf-8")
    b.load(page)
    assert b.errors == []
    memory = b.evaluate(
        "[...document.querySelectorAll('#tests tbody tr.row td:nth-child(7)')]"
        ".map(td => td.textContent)"
    )
    assert memory and all(m.endswith((" B", " KB", " MB")) for m in memory), memory
    card = f".card[data-id={json.dumps(REGRESSED)}]"
    text = b.evaluate(f"document.querySelector('{card}').textContent")
    assert "1 round;" in text and "1 rounds" not in text
    assert " KB" in text and " Kb" not in text and " b " not in text


def _shown_wall(test: dict[str, Any]) -> float | None:
    """The wall time the page shows and sorts by: the figure the verdict judged, the
    measured median where there is no verdict row (a new test)."""
    row = next((m for m in test["verdict"]["metrics"] if m["metric"] == "wall time"), None)
    if row is not None and row.get("now") is not None:
        return float(row["now"])
    return median_ns(test["summary"]["wall_time"])
