"""Reports of verdicts: a diff-like text section per test, a JSON report and Markdown for a run.

JSON report schema (``--opprof-report``, version :data:`REPORT_SCHEMA`)::

    {
      "kind": "opprof-report",
      "schema": 1,
      "created_at": "2025-01-31T12:00:00Z",          # UTC
      "machine": {...},                               # as in a baseline entry
      "totals": {"pass": int, "regressed": int, "improved": int, "new": int},
      "tests": {
        "<node id>": {
          "status": "pass" | "regressed" | "improved" | "new",
          "baseline_file": "baselines/tests/test_a.json" | null,
          "rounds": int, "summary": {...}, "ops": {...},   # as in a baseline entry
          "verdict": {
            "status": ..., "time_judged": bool, "baseline_recorded_at": str | null,
            "notes": [str],
            "metrics": [{"metric", "unit", "baseline", "now", "change", "tolerance",
                         "status", "note"}],
            "reasons": [{"op", "kind", "unit", "baseline", "now", "change",
                         "status", "impact"}]      # regressions first, then by impact
          }
        }
      }
    }

``change`` is relative (0.25 = +25%; null when the baseline is 0), ``unit`` one
of ``ns``, ``bytes``, ``flops``, ``ops``, ``allocations``, ``share``.  Statuses of
rows and reasons: ``pass``, ``regressed``, ``improved``, ``info``, ``not judged``.
A report's tests read back as baseline entries (:func:`read_report`), so two
reports, or a report and a baseline file, compare with ``python -m pytest_opprof``.
"""

from __future__ import annotations

import datetime
import json
import math
import os
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from pytest_opprof.errors import BaselineError
from pytest_opprof.gate.jsonio import FieldError, Fields, dumps_stable
from pytest_opprof.gate.machine import MachineInfo
from pytest_opprof.gate.store import BaselineEntry, write_atomic
from pytest_opprof.gate.summary import TestSummary
from pytest_opprof.gate.tolerance import format_tolerance
from pytest_opprof.gate.verdict import MetricRow, OpReason, Verdict
from pytest_opprof.render.units import format_memory, format_time

REPORT_SCHEMA = 1
REPORT_KIND = "opprof-report"
STATUSES = ("regressed", "improved", "new", "pass")


@dataclass(frozen=True)
class TestResult:
    """One profiled test of a run: its node id, summary, verdict and baseline file."""

    __test__ = False

    nodeid: str
    summary: TestSummary
    verdict: Verdict
    baseline_file: str | None = None


def format_value(value: float | None, unit: str) -> str:
    """A figure in its unit for people: ``1.230ms``, ``64.00 Mb``, ``2.00 GFLOP``, ``12``."""
    if value is None:
        return "-"
    if unit == "ns":
        return format_time(value / 1000)
    if unit == "bytes":
        return format_memory(int(value))
    if unit == "flops":
        return _format_flops(value)
    if unit == "share":
        return f"{value * 100:.1f}%"
    return f"{int(value):,}"


def _format_flops(value: float) -> str:
    for scale, prefix in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "K")):
        if abs(value) >= scale:
            return f"{value / scale:.2f} {prefix}FLOP"
    return f"{int(value)} FLOP"


def format_change(change: float | None) -> str:
    """``+12.5%``; ``new`` when the baseline was 0."""
    if change is None:
        return ""
    if math.isinf(change):
        return "new"
    return f"{change * 100:+.1f}%"


def render_text(result: TestResult, *, row_limit: int = 20) -> str:
    """The test's comparison as a unified-diff-like section (``-`` baseline, ``+`` now)."""
    verdict = result.verdict
    lines = [f"opprof {verdict.status.upper()}: {result.nodeid}"]
    if verdict.status == "new":
        lines.append(f"  {result.summary.rounds} rounds, {len(result.summary.ops)} ops recorded")
    else:
        where = f"  {result.baseline_file}" if result.baseline_file else ""
        lines.append(f"--- baseline  {verdict.baseline_recorded_at}{where}")
        lines.append(f"+++ now       {result.summary.rounds} rounds")
        lines.append("@@ test @@")
        lines.extend(_metric_lines(row) for row in verdict.metrics)
        if verdict.reasons:
            lines.append("@@ ops, by impact @@")
            shown = verdict.reasons[:row_limit]
            lines.extend(_reason_lines(reason) for reason in shown)
            if len(verdict.reasons) > len(shown):
                lines.append(f"  ... {len(verdict.reasons) - len(shown)} more op changes")
    lines.extend(f"note: {note}" for note in verdict.notes)
    return "\n".join(lines)


def _tail(change: float | None, tolerance: float | None, status: str) -> str:
    parts = [format_change(change)]
    if tolerance is not None:
        parts.append(f"(tolerance {format_tolerance(tolerance)})")
    if status in ("regressed", "improved", "not judged"):
        parts.append(status.upper())
    return "  ".join(p for p in parts if p)


def _metric_lines(row: MetricRow) -> str:
    name = f"{row.metric:<18}"
    if row.baseline == row.now:
        return f"  {name}{format_value(row.now, row.unit)}"
    return (
        f"- {name}{format_value(row.baseline, row.unit)}\n"
        f"+ {name}{format_value(row.now, row.unit):<16}"
        f"{_tail(row.change, row.tolerance, row.status)}"
    )


def _reason_lines(reason: OpReason) -> str:
    if reason.kind == "new":
        return f"+ {reason.op}  new op, {format_value(reason.now, 'ops')} calls"
    if reason.kind == "vanished":
        return f"- {reason.op}  vanished, was {format_value(reason.baseline, 'ops')} calls"
    label = f"{reason.op}  {reason.kind}: "
    return (
        f"- {label}{format_value(reason.baseline, reason.unit)}\n"
        f"+ {label}{format_value(reason.now, reason.unit):<16}"
        f"{_tail(reason.change, None, reason.status)}"
    )


def _stamp() -> str:
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def build_report(results: Sequence[TestResult], *, machine: MachineInfo) -> dict[str, object]:
    """The JSON report of a run as a dict (schema in this module's docstring)."""
    totals: Counter[str] = Counter(r.verdict.status for r in results)
    return {
        "kind": REPORT_KIND,
        "schema": REPORT_SCHEMA,
        "created_at": _stamp(),
        "machine": machine.to_json(),
        "totals": {status: totals.get(status, 0) for status in STATUSES},
        "tests": {
            r.nodeid: {
                "status": r.verdict.status,
                "baseline_file": r.baseline_file,
                **r.summary.to_json(),
                "verdict": r.verdict.to_json(),
            }
            for r in results
        },
    }


def write_json_report(
    path: str | os.PathLike[str], results: Sequence[TestResult], *, machine: MachineInfo
) -> None:
    """Write the JSON report of a run (atomically, sorted keys)."""
    write_atomic(Path(path), dumps_stable(build_report(results, machine=machine)))


def read_report(path: str | os.PathLike[str]) -> dict[str, BaselineEntry]:
    """A JSON report's tests as baseline entries keyed by node id (raises BaselineError)."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise BaselineError(path, f"cannot be read: {exc}") from None
    except json.JSONDecodeError as exc:
        raise BaselineError(path, f"not valid JSON: {exc.msg} at line {exc.lineno}") from None
    try:
        f = Fields(data)
        if f.text("kind") != REPORT_KIND:
            raise FieldError("kind", f"expected {REPORT_KIND!r}")
        schema = f.integer("schema", minimum=1)
        if schema > REPORT_SCHEMA:
            raise FieldError("schema", f"report schema {schema} is newer than {REPORT_SCHEMA}")
        machine = MachineInfo.from_json(f.obj("machine"))
        created = f.text("created_at")
        return {
            nodeid: BaselineEntry(TestSummary.from_json(test), machine, created)
            for nodeid, test in f.obj("tests").entries()
        }
    except FieldError as exc:
        raise BaselineError(path, exc.reason, field=exc.field or None) from None


_ICONS = {"regressed": "❌", "improved": "🚀", "new": "🆕", "pass": "✅"}


def _md(text: str) -> str:
    return text.replace("|", "\\|").replace("`", "'")


def _metric(verdict: Verdict, name: str) -> MetricRow | None:
    return next((row for row in verdict.metrics if row.metric == name), None)


def render_markdown(
    results: Sequence[TestResult], *, machine: MachineInfo, row_limit: int = 10
) -> str:
    """A run's summary as GitHub-flavoured Markdown (step summaries, PR comments)."""
    totals: Counter[str] = Counter(r.verdict.status for r in results)
    counts = ", ".join(f"{totals[s]} {s}" for s in STATUSES if totals.get(s))
    out = [
        f"## pytest-opprof: {counts or 'no profiled tests'}",
        "",
        f"Machine: {_md(machine.describe())}",
        "",
    ]
    if not results:
        return "\n".join(out)
    out += [
        "| test | status | wall time | change | FLOPs | change | peak memory | change |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    order = {s: i for i, s in enumerate(STATUSES)}
    ranked = sorted(results, key=lambda r: (order[r.verdict.status], r.nodeid))
    for r in ranked:
        s = r.summary
        cells = [f"`{_md(r.nodeid)}`", f"{_ICONS[r.verdict.status]} {r.verdict.status}"]
        peak = s.memory.peak_bytes if s.memory else None
        for name, unit, now in (
            ("wall time", "ns", s.wall_time.median_ns),
            ("flops", "flops", s.flops),
            ("peak memory", "bytes", peak),
        ):
            row = _metric(r.verdict, name)
            cells += [format_value(now, unit), format_change(row.change) if row else ""]
        out.append("| " + " | ".join(cells) + " |")
    for r in ranked:
        if r.verdict.status not in ("regressed", "improved"):
            continue
        out += ["", f"<details><summary>{_md(r.nodeid)}: {r.verdict.status}</summary>", ""]
        out += [
            "| op | change | baseline | now | Δ | status |",
            "| --- | --- | ---: | ---: | ---: | --- |",
        ]
        for reason in r.verdict.reasons[:row_limit]:
            out.append(
                f"| `{_md(reason.op)}` | {reason.kind} | "
                f"{format_value(reason.baseline, reason.unit)} | "
                f"{format_value(reason.now, reason.unit)} | {format_change(reason.change)} | "
                f"{reason.status} |"
            )
        out += [""] + [f"> {_md(note)}" for note in r.verdict.notes] + ["", "</details>"]
    return "\n".join(out) + "\n"


def write_markdown(
    path: str | os.PathLike[str], results: Sequence[TestResult], *, machine: MachineInfo
) -> None:
    """Write :func:`render_markdown` to ``path`` (atomically)."""
    write_atomic(Path(path), render_markdown(results, machine=machine))
