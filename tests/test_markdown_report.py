"""The Markdown report as GitHub renders it: hostile test ids, op and scope names show as
written and never become markup, and the report stays under GitHub's limit however it counts.

The Markdown is rendered by cmark-gfm (GitHub's own renderer, ``cmarkgfm``) with raw HTML
let through, as GitHub lets it through to a sanitiser that keeps links and images; the
HTML is then read with ``html.parser``.
"""

from __future__ import annotations

from html.parser import HTMLParser

import cmarkgfm
import pytest
from baseline_helpers import Row, entry, machine, summary_of
from cmarkgfm.cmark import Options
from run_helpers import PytestRunner

from pytest_opprof.gate.results import TestResult
from pytest_opprof.gate.summary import TestSummary
from pytest_opprof.gate.verdict import compare
from pytest_opprof.render.markdown_text import utf16_units
from pytest_opprof.render.report import MARKDOWN_LIMIT, render_markdown

HOSTILE_IDS = [
    'x</summary></details><a href="https://evil.example/">click</a>'
    '<img src="https://evil.example/i.png">',
    "a|b `tick`` *star* _under_ [l](https://evil.example/) ![i](https://evil.example/i.png)",
    "# heading <script>alert(1)</script> &amp; www.evil.example",
]
SCOPE = "scope <img src=https://evil.example/s.png> `x` | [l](http://evil.example)"

PROJECT = f"""
import os

import numpy as np
import pytest

from pytest_opprof import record_function

N = int(os.environ.get("MD_TEST_N", "8"))


@pytest.mark.parametrize("tag", {HOSTILE_IDS!r})
def test_hostile(tag):
    # The hostile scope holds the test's work in both runs, so the baseline keeps it, and
    # its own Python loop makes it the op of most self time, so the op tables name it
    # whatever the load (a new scope that only takes time would fold into [other ops]).
    with record_function({SCOPE!r}):
        sum(range(20_000))
        np.ones((N, N)) @ np.ones((N, N))


@pytest.mark.parametrize("f", [lambda: 1])
def test_f(f):
    np.ones((N, N)) @ np.ones((N, N)) + f()
"""

# A directory whose name holds a line break and a heading.
DIRECTORY = "sub\n# injected heading"
IN_DIRECTORY = """
import os

import numpy as np


def test_there():
    N = int(os.environ.get("MD_TEST_N", "8"))
    np.ones((N, N)) @ np.ones((N, N))
"""


class Elements(HTMLParser):
    """The elements of a page, in order, and the text inside each ``<code>`` and ``<summary>``."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[str] = []
        self.open: list[str] = []
        self.texts: dict[str, list[str]] = {"code": [], "summary": []}

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        self.open.append(tag)
        if tag in self.texts:
            self.texts[tag].append("")

    def handle_endtag(self, tag: str) -> None:
        if tag in self.open:
            del self.open[len(self.open) - 1 - self.open[::-1].index(tag) :]

    def handle_data(self, data: str) -> None:
        for tag in self.texts:
            if tag in self.open:
                self.texts[tag][-1] += data


def rendered(markdown: str) -> Elements:
    html = cmarkgfm.github_flavored_markdown_to_html(markdown, options=Options.CMARK_OPT_UNSAFE)
    parser = Elements()
    parser.feed(html)
    parser.close()
    return parser


ALLOWED = {"h2", "p", "table", "thead", "tbody", "tr", "th", "td", "code", "details", "summary"}
ALLOWED |= {"blockquote", "em"}


def test_hostile_names_show_as_written(
    pytester: pytest.Pytester, run_pytest: PytestRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytester.makepyfile(test_names=PROJECT)
    there = pytester.path / DIRECTORY
    there.mkdir()
    (there / "test_there.py").write_text(IN_DIRECTORY, encoding="utf-8")
    args = ("--opprof-rounds", "1", "--opprof-warmup", "0", "-p", "no:randomly")
    run_pytest("--opprof-update-baselines", *args).assert_outcomes(passed=5)
    monkeypatch.setenv("MD_TEST_N", "16")  # 8x the FLOPs: every test regresses
    result = run_pytest("--opprof", "--opprof-warn-only", "--opprof-markdown", "md.md", *args)
    result.assert_outcomes(passed=5)
    markdown = (pytester.path / "md.md").read_text(encoding="utf-8")
    # The terminal's diffs of these one-round runs say so in the singular.
    result.stdout.fnmatch_lines(["+++ now       1 round"])
    assert "1 rounds" not in result.stdout.str()

    page = rendered(markdown)
    assert set(page.tags) <= ALLOWED, markdown  # no link, image, script or other heading
    assert page.tags.count("h2") == 1 and page.tags.count("details") == 5
    ids = [f"test_names.py::test_hostile[{tag}]" for tag in HOSTILE_IDS]
    ids += ["test_names.py::test_f[<lambda>]", f"{DIRECTORY}/test_there.py::test_there"]
    shown = {i.replace("\n", "\\n") for i in ids}  # a line break shows as its escape
    assert {s.removesuffix(": regressed") for s in page.texts["summary"]} == shown
    assert shown <= set(page.texts["code"])  # the table's cells
    assert SCOPE in page.texts["code"]  # the op tables name the scope as written


def _summary(name: str, flops: int) -> TestSummary:
    return summary_of([(1500.0, [Row(name, 1, 800.0, 800.0, flops=flops)])])


def test_emoji_stay_under_the_limit_in_utf16_code_units() -> None:
    # Ids beyond the Basic Multilingual Plane count two UTF-16 code units a character, and
    # so does an improved test's rocket: by characters alone the page went over.
    base = entry(_summary("numpy.matmul", 2_000_000))
    now = _summary("numpy.matmul", 1_000_000)
    verdict = compare(now, base, fingerprint=machine().fingerprint)
    assert verdict.status == "improved"
    rockets = "\N{ROCKET}" * 40
    results = [TestResult(f"t.py::test_{i}[{rockets}]", now, verdict) for i in range(1_500)]
    text = render_markdown(results, machine=machine())
    assert len(text.encode("utf-16-le")) // 2 == utf16_units(text)
    assert len(text) <= utf16_units(text) <= MARKDOWN_LIMIT
    assert "test(s) not listed" in text  # it was cut, and says so
    assert utf16_units(text) > MARKDOWN_LIMIT * 0.9  # and not far under


def test_an_overlong_name_is_cut_and_says_so() -> None:
    long = "y" * 100_000
    now = _summary(long, 4_000_000)
    verdict = compare(now, entry(_summary(long, 2_000_000)), fingerprint=machine().fingerprint)
    text = render_markdown([TestResult(f"t.py::test[{long}]", now, verdict)], machine=machine())
    assert utf16_units(text) <= MARKDOWN_LIMIT
    assert text.count(" more characters)") == 3  # the row, the summary, the op
    assert text.count("<details>") == 1
