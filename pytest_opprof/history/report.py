"""``pytest-opprof history DIR``: the change points as lines for people, or as JSON.

Steps of one test at one run are one line, its headline first (the wall time where it
stepped, else the largest step), then the ops that stepped at the same run::

    test_fit: wall +18% [+14%, +22%] at 3f2c1ab (2026-11-20), numpy.linalg.svd +41%

Where the history cannot tell the commit from the next (``changes.py``), the line says
``at 3f2c1ab or the next commit``, dated by the first.

Lines are worst first: the largest slowdown or growth first, improvements last.
"""

from __future__ import annotations

import math
import re
from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

from pytest_opprof.history.series import SELF, WALL, ChangePoint, Found, run_date
from pytest_opprof.history.store import RunHead


def pct(x: float) -> str:
    return "new" if math.isinf(x) else f"{x:+.0%}" if abs(x) >= 0.01 else f"{x:+.1%}"


def _exact_text(c: ChangePoint) -> str:
    return f"{pct(c.step.change)} ({c.step.before:,.0f} -> {c.step.after:,.0f})"


def _label(c: ChangePoint, headline: bool) -> str:
    if c.figure == WALL:
        return "wall"
    if c.figure == SELF:
        return str(c.op) if not headline else f"{c.op} self"
    return f"{c.op} {c.figure}" if c.op is not None else c.figure


def _text(c: ChangePoint, headline: bool) -> str:
    if c.exact:
        return f"{_label(c, headline)} {_exact_text(c)}"
    s = c.step
    interval = (
        f" [{pct(s.low)}, {pct(s.high)}]"
        if headline and s.low is not None and s.high is not None
        else ""
    )
    return f"{_label(c, headline)} {pct(s.change)}{interval}"


def _weight(c: ChangePoint) -> tuple[int, bool, float]:
    # Time steps lead a line over figure steps, the test's own over its ops'; within
    # each, the largest change.
    kind = 0 if c.figure == WALL else 1 if c.figure == SELF else 2
    return (kind, c.op is not None, -abs(c.step.change))


def grouped(changes: Sequence[ChangePoint]) -> list[list[ChangePoint]]:
    """Change points by machine, test and run, each group headline first; groups worst
    first (by the headline's change, largest growth first)."""
    groups: dict[tuple[str, str, str], list[ChangePoint]] = defaultdict(list)
    for c in changes:
        groups[(c.machine, c.test, str(c.run.path))].append(c)
    out = [sorted(g, key=_weight) for g in groups.values()]
    out.sort(key=lambda g: (-g[0].step.change, g[0].test))
    return out


def line(group: Sequence[ChangePoint]) -> str:
    """One group as one line (see the module docstring)."""
    head = group[0]
    date = run_date(head.between[0]) if head.between else head.date
    rest = "".join(f", {_text(c, False)}" for c in group[1:])
    return f"{head.test}: {_text(head, True)} at {head.at} ({date}){rest}"


def select(
    found: Found,
    *,
    keyword: str | None = None,
    op: str | None = None,
    since: RunHead | None = None,
) -> list[ChangePoint]:
    """The change points that pass the filters: ``keyword`` (lower case) in the test's
    id, ``op`` (lower case) in the op's name (the ops' own steps only), at or after the
    run ``since``."""
    out = []
    for c in found.changes:
        if keyword is not None and keyword not in c.test.lower():
            continue
        if op is not None and (c.op is None or op not in c.op.lower()):
            continue
        if since is not None and c.run.order_key() < since.order_key():
            continue
        out.append(c)
    return out


def since_run(runs: Sequence[RunHead], ref: str) -> RunHead | None:
    """The first run of commit ``ref`` (a sha or its prefix), or the first run on or after
    the date ``ref`` (``YYYY-MM-DD``); None when no run matches."""
    for head in runs:
        commit = head.commit
        if commit and str(commit["sha"]).startswith(ref):
            return head
    if not _DATE.fullmatch(ref):
        return None
    for head in runs:
        if head.order_key()[0][:10] >= ref:
            return head
    return None


_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")


def text_lines(found: Found, changes: Sequence[ChangePoint]) -> list[str]:
    """The report for people: per machine a header, then a line per group."""
    lines = [f"opprof history: skipped {why}" for why in found.skipped]
    by_machine: dict[str, list[ChangePoint]] = defaultdict(list)
    for c in changes:
        by_machine[c.machine].append(c)
    machines: Mapping[str, Mapping[str, Any]] = found.machines or {}
    lines.append(
        f"opprof history: {found.runs} run(s), {len(machines)} machine(s), "
        f"{found.series:,} series searched; {len(changes)} change point(s)"
    )
    for fingerprint, points in by_machine.items():
        m = machines.get(fingerprint, {})
        lines.append(
            f"machine {fingerprint} ({m.get('cpu_model')} x{m.get('cpu_count')}, "
            f"{m.get('python')}, numpy {m.get('numpy')}):"
        )
        lines += ["  " + line(g) for g in grouped(points)]
    return lines


def json_report(found: Found, changes: Sequence[ChangePoint]) -> dict[str, object]:
    """The change points as JSON, in the order of the text report."""
    return {
        "kind": "opprof-history-changes",
        "runs": found.runs,
        "series": found.series,
        "skipped": found.skipped,
        "machines": found.machines,
        "changes": [c.to_json() for g in grouped(changes) for c in g],
    }
