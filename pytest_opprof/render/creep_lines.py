"""A test's creep against the history for people: the Markdown's lines and JUnit's.

The wording is the verdict's rows' own (``gate/creep.py``), with each step's date and
interval, so a creep reads the same in the JSON report's ``text``, the Markdown
summary, a JUnit property and the HTML report.
"""

from __future__ import annotations

from pytest_opprof.gate.verdict import Verdict
from pytest_opprof.render.markdown_text import md_text


def markdown_creep_lines(verdict: Verdict) -> list[str]:
    """The Markdown details' creep lines (quoted, as its notes are)."""
    return [
        f"> ❌ crept beyond tolerance against its history: {md_text(c.sentence())}"
        for c in verdict.crept
    ]


def junit_creep_properties(verdict: Verdict) -> list[tuple[str, object]]:
    """An ``opprof_crept`` property per figure that crept: its sentence."""
    return [("opprof_crept", c.sentence()) for c in verdict.crept]
