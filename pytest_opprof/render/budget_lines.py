"""A test's budgets for people: the failure's lines, the Markdown's and JUnit's.

One wording everywhere: ``peak memory 3.20 MB over its budget of 2.00 MB
(max_memory): numpy.ones 2.40 MB``, so a budget failure reads the same in the
terminal, the Markdown summary and a JUnit property.
"""

from __future__ import annotations

from pytest_opprof.gate.budgets import BudgetRow
from pytest_opprof.gate.verdict import Verdict
from pytest_opprof.render.markdown_text import md_code, md_text
from pytest_opprof.render.units import format_memory, format_time

OVER_LABEL = "OVER BUDGET"


def _value(value: float, unit: str) -> str:
    if unit == "bytes":
        return format_memory(int(value))
    if unit == "ns":
        return format_time(value / 1000)
    for scale, prefix in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if value >= scale:
            return f"{value / scale:.2f} {prefix}FLOP"
    return f"{int(value):,} FLOP"


def ops_text(row: BudgetRow) -> str:
    """``numpy.ones 2.40 MB, numpy.zeros 800.00 kB``: the ops that used the budget."""
    return ", ".join(f"{op} {_value(value, row.unit)}" for op, value in row.ops)


def _head(row: BudgetRow) -> str:
    """``peak memory 3.20 MB over its budget of 2.00 MB (max_memory)``."""
    now = _value(row.now, row.unit) if row.now is not None else "not measured"
    limit = f"its budget of {_value(row.limit, row.unit)} ({row.budget})"
    if row.status == "over":
        return f"{row.metric} {now} over {limit}"
    if row.status == "within":
        return f"{row.metric} {now} within {limit}"
    return f"{row.metric} against {limit}: not judged"


def budget_sentence(row: BudgetRow) -> str:
    """The row in one line, without markup: its head, the ops that used it, its note."""
    used = f": {ops_text(row)}" if row.ops else ""
    note = f"; {row.note}" if row.note else ""
    return f"{_head(row)}{used}{note}"


def budget_lines(verdict: Verdict) -> list[str]:
    """The failure text's ``@@ budgets @@`` section (none without budgets)."""
    if not verdict.budgets:
        return []
    lines = ["@@ budgets @@"]
    for row in verdict.budgets:
        now = _value(row.now, row.unit) if row.now is not None else "-"
        limit = f"budget {_value(row.limit, row.unit)} ({row.budget})"
        tail = OVER_LABEL if row.status == "over" else row.status.upper()
        mark = "+" if row.status == "over" else " "
        lines.append(f"{mark} {row.metric:<18}{now:<16}{limit}  {tail}")
        if row.ops:
            lines.append(f"    used by {ops_text(row)}")
        if row.note:
            lines.append(f"    {row.note}")
    return lines


def is_budget_failure_only(verdict: Verdict) -> bool:
    """Whether the verdict failed by its budgets alone (no figure regressed against a
    baseline): its text says OVER BUDGET, not REGRESSED."""
    if not verdict.over_budget:
        return False
    statuses = [m.status for m in verdict.metrics] + [r.status for r in verdict.reasons]
    return "regressed" not in statuses


def markdown_budget_lines(verdict: Verdict) -> list[str]:
    """The Markdown details' budget lines (quoted, as its notes are; op names as code)."""
    lines = []
    for row in verdict.budgets:
        mark = "❌ " if row.status == "over" else ""
        used = ", ".join(f"{md_code(op)} {_value(value, row.unit)}" for op, value in row.ops)
        note = f"; {md_text(row.note)}" if row.note else ""
        lines.append(f"> {mark}{md_text(_head(row))}{': ' + used if used else ''}{note}")
    return lines


def junit_budget_properties(verdict: Verdict) -> list[tuple[str, object]]:
    """A ``opprof_budget_<name>`` property per budget: its sentence."""
    return [(f"opprof_budget_{row.budget}", budget_sentence(row)) for row in verdict.budgets]
