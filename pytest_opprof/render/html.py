"""The HTML report: one self-contained page drawn from a JSON report.

The plugin (``--opprof-html``) and ``pytest-opprof html REPORT.json`` both render
from the JSON report's dict (:func:`~pytest_opprof.gate.results.build_report`),
so the two pages are the same.  The page fetches nothing when opened: the style,
the script and the data are inline.  Jinja2 (the ``html`` extra) fills the
template; the browser script draws the table, the per-test panels and the flame
views from the embedded data.  With a history page beside it (``--opprof-history``,
``history/html.py``), every test links to its place there (:class:`HistoryLinks`).

The embedded data is a digest, sized for suites of tens of thousands of tests:
every test has a table row, its top ops (op names stored once, by index) and the
budgets it went over; the full figures (metric rows, op reasons, op table, flame tree,
every budget judged) go with the tests that
need attention (not ``pass``, marked, or whose time was not judged) and with the
slowest of the rest, up to :data:`DETAIL_LIMIT` tests in all.
"""

from __future__ import annotations

import json
import os
import statistics
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from pytest_opprof.errors import OpprofError
from pytest_opprof.gate.budgets import BudgetRow
from pytest_opprof.gate.compact import median_ns
from pytest_opprof.gate.files import write_file
from pytest_opprof.gate.results import STATUSES
from pytest_opprof.gate.unjudged import TimeUnjudged, UnjudgedTally
from pytest_opprof.gate.verdict import CREPT, OVER_BUDGET
from pytest_opprof.render.budget_lines import budget_sentence

DETAIL_LIMIT = 2000
"""Tests whose full figures are embedded (all tests needing attention come first)."""
DETAIL_OPS = 25
"""Op rows embedded per test with full figures."""
ROW_OPS = 3
"""Op rows embedded for the other tests."""
MEMORY_OP = "[memory]"

HTML_EXTRA_HINT = "the HTML report needs Jinja2: pip install 'pytest-opprof[html]'"


def check_available() -> None:
    """Raise :class:`OpprofError` with the install hint when Jinja2 is missing."""
    try:
        import jinja2  # noqa: F401
    except ImportError:
        raise OpprofError(HTML_EXTRA_HINT) from None


def _num(value: object) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _get(data: object, *path: str) -> Any:
    for key in path:
        if not isinstance(data, Mapping):
            return None
        data = data.get(key)
    return data


def _median(times: object) -> float | None:
    """A time's median (ns): a statistics object (schema 1) or a per-round string
    (schema 2, ``gate/compact.py``)."""
    if isinstance(times, str):
        return median_ns(times)
    return _num(_get(times, "median_ns"))


def _ops(test: Mapping[str, Any], limit: int) -> list[list[object]]:
    """Top ops by self time: ``[name, count, self_ns, total_ns, self_bytes, flops]``."""
    ops = test.get("ops")
    if not isinstance(ops, Mapping):
        return []
    rows = []
    for name, op in ops.items():
        if name == MEMORY_OP or not isinstance(op, Mapping):
            continue
        rows.append(
            [
                str(name),
                op.get("count"),
                _median(op.get("self_cpu_time")),
                _median(op.get("cpu_time")),
                op.get("self_memory_bytes"),
                op.get("flops"),
            ]
        )
    rows.sort(key=lambda r: (-(_num(r[2]) or 0.0), str(r[0])))
    return rows[:limit]


def _mapping(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _across(report: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """An A/B report's ops that moved across its tests, the ones whole enough to show."""
    ops = report.get("ab_ops")
    return [
        o
        for o in (ops if isinstance(ops, list) else ())
        if isinstance(o, Mapping)
        and o.get("status") in ("regressed", "improved")
        and isinstance(o.get("op"), str)
        and isinstance(o.get("tests"), int)
        and all(isinstance(o.get(k), (int, float)) for k in ("change", "low", "high"))
    ]


def _metric(verdict: Mapping[str, Any], name: str) -> Mapping[str, Any]:
    for row in verdict.get("metrics") or ():
        if isinstance(row, Mapping) and row.get("metric") == name:
            return row
    return {}


def _label(verdict: Mapping[str, Any], budgets: list[list[str]]) -> str | None:
    """``crept`` or ``over budget`` where that alone failed the test (``Verdict.label``,
    from the JSON form), else None: the status says it."""
    rows = [*(verdict.get("metrics") or ()), *(verdict.get("reasons") or ())]
    if any(_mapping(r).get("status") == "regressed" for r in rows):
        return None
    crept = bool(verdict.get("crept"))
    over = any(status == "over" for status, _ in budgets)
    if crept and not over:
        return CREPT
    if over and not crept:
        return OVER_BUDGET
    return None


def _budgets(verdict: Mapping[str, Any]) -> list[list[str]]:
    """``[status, sentence]`` per budget judged (``budget_lines.budget_sentence``: the
    terminal's wording, naming the ops that used it); a row that is not one is left out."""
    out = []
    for data in verdict.get("budgets") or ():
        try:
            row = BudgetRow.from_json(data)
        except ValueError:
            continue
        out.append([row.status, budget_sentence(row)])
    return out


def _attention(row: Mapping[str, Any]) -> bool:
    return row["st"] != "pass" or bool(row.get("mk")) or bool(row.get("tn"))


def page_data(report: Mapping[str, Any]) -> dict[str, Any]:
    """The digest the page's script reads (keys kept short: 20,000 tests fit in a few MB)."""
    tests = report.get("tests")
    if not isinstance(tests, Mapping):
        raise OpprofError("not an opprof JSON report: it has no 'tests' object")
    rows: list[dict[str, Any]] = []
    full: dict[str, Mapping[str, Any]] = {}
    speed: list[float] = []
    unjudged = UnjudgedTally()
    for nodeid, test in tests.items():
        if not isinstance(test, Mapping):
            continue
        verdict = _mapping(test.get("verdict"))
        if test.get("status") != "new":
            unjudged.add(TimeUnjudged.from_json(verdict.get("time_unjudged")))
        wall = _metric(verdict, "wall time")
        ops = _ops(test, DETAIL_OPS)
        row: dict[str, Any] = {
            "id": str(nodeid),
            "st": test.get("status") if test.get("status") in STATUSES else "pass",
            # The figure the verdict judged, as its baseline and change are; measured where
            # there is no verdict row (a new test).
            "w": wall["now"]
            if wall.get("now") is not None
            else _median(_get(test, "summary", "wall_time")),
            "wb": wall.get("baseline"),
            "wc": wall.get("change"),
            "f": _get(test, "summary", "flops"),
            "m": _get(test, "summary", "memory", "peak_bytes"),
            "sh": _get(test, "summary", "op_time_share"),
            "ops": ops,
        }
        if test.get("marked"):
            row["mk"] = 1
        crept = [str(c["text"]) for c in verdict.get("crept") or () if _mapping(c).get("text")]
        if crept:  # the history gate's sentences (gate/creep.py), each naming its steps
            row["cr"] = crept
        budgets = _budgets(verdict)
        if budgets:
            row["bu"] = budgets
        label = _label(verdict, budgets)
        if label is not None:
            row["lb"] = label
        if verdict.get("time_not_judged"):
            row["tn"] = verdict["time_not_judged"]
        elif wall.get("status") == "not judged":  # too few rounds, another machine
            row["nj"] = 1
        change = _num(verdict.get("speed_change"))
        if change is not None:
            speed.append(change)
        rows.append(row)
        full[row["id"]] = test
    order = {s: i for i, s in enumerate(STATUSES)}
    rows.sort(key=lambda r: (order[r["st"]], -abs(_num(r["wc"]) or 0.0), r["id"]))
    ranked = [r for r in rows if _attention(r)]
    ranked += sorted((r for r in rows if not _attention(r)), key=lambda r: -(_num(r["w"]) or 0.0))
    detailed = {id(r) for r in ranked[:DETAIL_LIMIT]}
    for row in rows:
        test = full[row["id"]]
        if id(row) not in detailed:
            row["ops"] = row["ops"][:ROW_OPS]
            # A budget within its limit is said where the test's figures are embedded;
            # one over it fails the test, which is said everywhere.
            over = [b for b in row.get("bu", ()) if b[0] == "over"]
            if over:
                row["bu"] = over
            else:
                row.pop("bu", None)
            continue
        verdict = _mapping(test.get("verdict"))
        row["d"] = {
            "metrics": [
                [
                    m.get("metric"),
                    m.get("unit"),
                    m.get("baseline"),
                    m.get("now"),
                    m.get("change"),
                    m.get("tolerance"),
                    m.get("status"),
                ]
                for m in verdict.get("metrics") or ()
                if isinstance(m, Mapping)
            ],
            "reasons": [
                [
                    r.get("op"),
                    r.get("kind"),
                    r.get("unit"),
                    r.get("baseline"),
                    r.get("now"),
                    r.get("change"),
                    r.get("status"),
                ]
                for r in (verdict.get("reasons") or ())[:DETAIL_OPS]
                if isinstance(r, Mapping)
            ],
            "more_reasons": max(0, len(verdict.get("reasons") or ()) - DETAIL_OPS),
            "notes": [str(n) for n in verdict.get("notes") or ()],
            "baseline_at": verdict.get("baseline_recorded_at"),
            "rounds": test.get("rounds"),
            "flame": test.get("flame"),
        }
    # Op names repeat across tests: each is stored once, the op rows hold its index.
    names: dict[str, int] = {}
    for row in rows:
        for op in row["ops"]:
            op[0] = names.setdefault(str(op[0]), len(names))
    return {
        "rows": rows,
        "names": list(names),
        "detailed": len(detailed),
        "speed_change": statistics.median(speed) if speed else None,
        "unjudged": unjudged.line(),
    }


def script_json(data: object) -> str:
    """JSON that is safe inside ``<script>`` (no ``<``, ``>`` or ``&`` to end it), keys sorted:
    a report read back from its file (keys sorted) gives the same page."""
    text = json.dumps(data, separators=(",", ":"), allow_nan=False, sort_keys=True)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def asset(name: str) -> str:
    """The text of a page's part in ``html_assets`` (template, style, script)."""
    return (
        resources.files("pytest_opprof.render")
        .joinpath("html_assets")
        .joinpath(name)
        .read_text(encoding="utf-8")
    )


@dataclass(frozen=True)
class HistoryLinks:
    """The history page a report links its tests to (``history/html.py``)."""

    page: str
    """Its address relative to the report (a file beside it)."""
    changes: Mapping[str, int]
    """Test id -> how many change points the page lists for it."""


def render_html(report: Mapping[str, Any], history: HistoryLinks | None = None) -> str:
    """The page of a JSON report (the dict :func:`build_report` makes, or one read back);
    with ``history``, each test links to its place on that history page."""
    check_available()
    import jinja2
    from markupsafe import Markup

    data = page_data(report)
    totals = _mapping(report.get("totals"))
    counts = [(s, int(totals.get(s, 0) or 0)) for s in STATUSES]
    not_judged = [r for r in data["rows"] if r.get("tn")]
    machine = _mapping(report.get("machine"))
    tests = _mapping(report.get("tests"))
    bases = {
        str(_mapping(_mapping(t).get("verdict")).get("time_basis") or "") for t in tests.values()
    }
    basis = next((b for b in sorted(bases) if b and b != "baseline"), None)
    embedded: dict[str, Any] = {"rows": data["rows"], "names": data["names"]}
    if history is not None:
        embedded["history"] = {
            "page": history.page,
            "changes": {
                r["id"]: history.changes[r["id"]]
                for r in data["rows"]
                if r["id"] in history.changes
            },
        }
    env = jinja2.Environment(autoescape=True, undefined=jinja2.StrictUndefined)
    template = env.from_string(asset("report.html.j2"))
    return template.render(
        created_at=str(report.get("created_at") or ""),
        machine=describe_machine(machine),
        basis=f"times judged {basis}, interleaved" if basis else "times judged against baselines",
        counts=counts,
        total=len(data["rows"]),
        speed_change=data["speed_change"],
        not_judged=not_judged,
        unjudged=None if basis else data["unjudged"],  # an A/B run has its own lines
        across=_across(report),
        times_unjudged=any(r.get("tn") or r.get("nj") for r in data["rows"]),
        flames_omitted=report.get("flames_omitted") or 0,
        detailed=data["detailed"],
        style=Markup(asset("report.css")),
        script=Markup(asset("units.js") + asset("report.js")),
        data=Markup(script_json(embedded)),
    )


def describe_machine(machine: Mapping[str, Any]) -> str:
    """``AMD EPYC, 2 CPUs, x86_64, CPython 3.11, numpy 2.4.6, BLAS ...`` from the JSON form."""
    parts = [
        str(machine.get("cpu_model") or ""),
        f"{machine['cpu_count']} CPUs" if machine.get("cpu_count") else "",
        str(machine.get("arch") or ""),
        str(machine.get("python") or ""),
        f"numpy {machine['numpy']}" if machine.get("numpy") else "",
        f"torch {machine['torch']}" if machine.get("torch") else "",
        f"BLAS {machine['blas']}" if machine.get("blas") else "",
    ]
    return ", ".join(p for p in parts if p) or "unknown machine"


def write_html(
    path: str | os.PathLike[str], report: Mapping[str, Any], history: HistoryLinks | None = None
) -> None:
    """Render ``report`` and write it to ``path`` (see ``gate.files.write_file``: through a
    symlink or FIFO, atomically where it is a regular file)."""
    write_file(Path(path), render_html(report, history))
