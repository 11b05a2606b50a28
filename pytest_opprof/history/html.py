"""``pytest-opprof history DIR --html OUT.html``: a history as one self-contained page.

The page holds, for each test with a change point (worst first, up to
:data:`~pytest_opprof.history.charts.CHART_LIMIT` charts), its figure over its
machine's runs with its top ops stacked beneath and each step marked with its commit
and date, and a table of every change point in the order of the terminal's lines.  As
the run's HTML report (``render/html.py``, whose template machinery, JSON escaping and
machine line it shares), it fetches nothing: style, script and data are inline, the
charts are SVG drawn by the script, and every name reaches the page as JSON data put
in through ``textContent``, never as markup.

A report written with ``--opprof-html`` and ``--opprof-history`` links each test to
``#test=<id>`` on this page (``plugin/history.py`` writes both).
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pytest_opprof.gate.files import write_file
from pytest_opprof.history.charts import CHART_LIMIT, FAMILIES, FAMILY, Chart, chart_key, charts
from pytest_opprof.history.report import grouped, line, pct
from pytest_opprof.history.series import ChangePoint, Found
from pytest_opprof.history.store import History, RunHead
from pytest_opprof.render.html import asset, check_available, describe_machine, script_json
from pytest_opprof.render.units import format_memory, format_time

SKIPPED_SHOWN = 20
"""Skipped files named on the page (the terminal names them all)."""


def _round(value: float | None, unit: str) -> float | int | None:
    """Times to 4 significant digits (they are float32 medians: more is noise and
    bytes); counted figures exactly."""
    if value is None:
        return None
    if unit != "ns":
        return int(value)
    if value == 0:
        return 0
    digits = 3 - math.floor(math.log10(abs(value)))
    rounded = round(value, digits)
    return int(rounded) if digits <= 0 else rounded


def _amount(value: float, unit: str) -> str:
    if unit == "ns":
        return format_time(value / 1000)
    if unit == "bytes":
        return format_memory(int(value))
    return f"{value:,.0f}"


def _change_text(c: ChangePoint) -> str:
    s = c.step
    if s.low is None or s.high is None:
        return pct(s.change)
    return f"{pct(s.change)} [{pct(s.low)}, {pct(s.high)}]"


def _commit(head: RunHead) -> tuple[str, str]:
    """The run's commit (12 hex digits, empty without git) and its date."""
    commit = head.commit
    sha = str(commit["sha"])[:12] if commit else ""
    return sha, str((commit or {}).get("time") or head.meta["run_at"])[:10]


def page_data(
    history: History, found: Found, chosen: Sequence[ChangePoint], limit: int = CHART_LIMIT
) -> dict[str, Any]:
    """What the page's script reads: the machines' runs, the charts, the change points."""
    drawn, wanted = charts(history, chosen, limit)
    machines = list(dict.fromkeys(c.machine for c in drawn))
    heads: dict[str, list[RunHead]] = {m: [] for m in machines}
    for head in history.runs:
        if head.fingerprint in heads:
            heads[head.fingerprint].append(head)
    described = found.machines or {}
    machine_rows = []
    for m in machines:
        runs = [[*_commit(h), int(bool((h.commit or {}).get("dirty")))] for h in heads[m]]
        machine_rows.append({"fp": m, "desc": describe_machine(described.get(m, {})), "runs": runs})
    at = {m: {str(h.path): i for i, h in enumerate(heads[m])} for m in machines}
    chart_rows = [_chart(c, machines.index(c.machine), at[c.machine]) for c in drawn]
    index = {(c.machine, c.test, c.family): i for i, c in enumerate(drawn)}
    rows = []
    for group in grouped(chosen):
        for c in group:
            family = FAMILY.get(c.figure, "count")
            unit = FAMILIES[family].unit
            sha, date = _commit(c.between[0] if c.between else c.run)
            rows.append(
                {
                    **({"a": c.at} if c.between else {}),  # "3f2c1ab or the next commit"
                    "t": c.test,
                    "f": c.figure,
                    "o": c.op,
                    "c": None if math.isinf(c.step.change) else round(c.step.change, 4),
                    "ct": _change_text(c),
                    "v": f"{_amount(c.step.before, unit)} → {_amount(c.step.after, unit)}",
                    "s": sha,
                    "d": date,
                    "m": c.machine,
                    "ch": index.get(chart_key(c), -1),
                }
            )
    return {
        "machines": machine_rows,
        "charts": chart_rows,
        "changes": rows,
        "wanted": wanted,
    }


def _chart(c: Chart, machine: int, at: Mapping[str, int]) -> dict[str, Any]:
    family = FAMILIES[c.family]
    steps = []
    for part in c.groups:
        head = part[0]
        sha, date = _commit(head.run)
        text = line(part).removeprefix(f"{c.test}: ")  # the chart's title names the test
        steps.append([at[str(head.run.path)], f"{sha[:7] or 'no commit'} {date}", text,
                      1 if head.step.change > 0 else -1])  # fmt: skip
    return {
        "m": machine,
        "t": c.test,
        "fam": c.family,
        "unit": family.unit,
        "label": family.label,
        "total": [_round(v, family.unit) for v in c.total],
        "ops": [[name, [_round(v, family.unit) for v in values]] for name, values in c.ops],
        "steps": steps,
        "stepped": sorted({x.op for x in c.changes if x.op is not None}),
    }


def render_history_html(
    history: History, found: Found, chosen: Sequence[ChangePoint], *, title: str
) -> str:
    """The page of ``chosen`` (the change points after the command's filters) of
    ``history``; ``title`` names the history (its directory)."""
    check_available()
    return render_page(page_data(history, found, chosen), found, title=title)


def render_page(data: Mapping[str, Any], found: Found, *, title: str) -> str:
    """The page of :func:`page_data`'s ``data`` (``found``: what the history held)."""
    check_available()
    import jinja2
    from markupsafe import Markup

    env = jinja2.Environment(autoescape=True, undefined=jinja2.StrictUndefined)
    template = env.from_string(asset("history.html.j2"))
    return template.render(
        title=title,
        runs=found.runs,
        machines=len(found.machines or {}),
        series=found.series,
        changes=len(data["changes"]),
        charts=len(data["charts"]),
        wanted=data["wanted"],
        skipped=found.skipped[:SKIPPED_SHOWN],
        more_skipped=max(0, len(found.skipped) - SKIPPED_SHOWN),
        style=Markup(asset("report.css") + asset("history.css")),
        script=Markup(asset("units.js") + asset("history.js")),
        data=Markup(script_json(data)),
    )


def write_history_html(
    path: str | os.PathLike[str],
    history: History,
    found: Found,
    chosen: Sequence[ChangePoint],
    *,
    title: str,
) -> None:
    """Render the page and write it to ``path`` (``gate.files.write_file``: atomically
    where it is a regular file); raises ``BaselineError`` naming it when it cannot."""
    write_file(Path(path), render_history_html(history, found, chosen, title=title))
