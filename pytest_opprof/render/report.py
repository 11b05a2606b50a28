"""A verdict for people: the diff-like text of one test, and a run's Markdown summary.

The text is what a regressed test fails with; the Markdown suits CI step summaries
and pull-request comments.  The JSON report is :mod:`pytest_opprof.gate.results`.
"""

from __future__ import annotations

import math
import os
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from pytest_opprof.gate.creep import Crept
from pytest_opprof.gate.files import write_file
from pytest_opprof.gate.machine import MachineInfo
from pytest_opprof.gate.pooling import POOLED_SESSIONS
from pytest_opprof.gate.results import STATUSES, TestResult
from pytest_opprof.gate.session import BaselineSession, Judgement
from pytest_opprof.gate.tolerance import DEFAULT_ROW_LIMIT, format_tolerance
from pytest_opprof.gate.unjudged import UnjudgedTally
from pytest_opprof.gate.verdict import (
    CREPT,
    OVER_BUDGET,
    UPDATE_HINT,
    MetricRow,
    OpReason,
    Verdict,
)
from pytest_opprof.gate.waiting import WORK_NOTE_MARK
from pytest_opprof.render.budget_lines import (
    OVER_LABEL,
    budget_lines,
    is_budget_failure_only,
    markdown_budget_lines,
)
from pytest_opprof.render.creep_lines import markdown_creep_lines
from pytest_opprof.render.markdown_text import html_text, md_code, md_text, utf16_units
from pytest_opprof.render.units import format_memory, format_time


def format_value(value: float | None, unit: str) -> str:
    """A figure in its unit for people: ``1.230ms``, ``64.00 MB``, ``2.00 GFLOP``, ``12``."""
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


def render_text(result: TestResult, *, row_limit: int = DEFAULT_ROW_LIMIT) -> str:
    """The test's comparison as a unified-diff-like section (``-`` baseline, ``+`` now)."""
    verdict = result.verdict
    label = OVER_LABEL if is_budget_failure_only(verdict) else verdict.status.upper()
    lines = [f"opprof {label}: {result.nodeid}"]
    if verdict.status == "new" or (verdict.over_budget and not verdict.metrics):
        lines.append(f"  {_rounds(result.summary.rounds)}, {len(result.summary.ops)} ops recorded")
    else:
        if verdict.basis != "baseline":  # an A/B run: the base revision, run beside it
            lines.append(f"--- base      {verdict.basis}, this run")
            lines.append(f"+++ head      {_rounds(result.summary.rounds)}")
        else:
            where = f"  {result.baseline_file}" if result.baseline_file else ""
            lines.append(f"--- baseline  {verdict.baseline_recorded_at}{where}")
            lines.append(f"+++ now       {_rounds(result.summary.rounds)}")
        lines.append("@@ test @@")
        lines.extend(_metric_lines(row) for row in verdict.metrics)
        raw = raw_wall_line(result)
        if raw is not None:
            lines.append(raw)
        if verdict.reasons:
            lines.append("@@ ops, by impact @@")
            shown = verdict.reasons[:row_limit]
            lines.extend(_reason_lines(reason) for reason in shown)
            if len(verdict.reasons) > len(shown):
                lines.append(f"  ... {len(verdict.reasons) - len(shown)} more op changes")
    lines.extend(budget_lines(verdict))
    lines.extend(f"note: {note}" for note in verdict.notes)
    if any(reason.op == MEMORY_ROW for reason in verdict.reasons[:row_limit]):
        lines.append(f"note: {MEMORY_ROW_MEANING}")
    if verdict.varying:
        lines.append(f"note: {varying_note(verdict)}")
    return "\n".join(lines)


def _rounds(n: int) -> str:
    return f"{n} round" if n == 1 else f"{n} rounds"


SHOWN_STATUSES = ("regressed", OVER_BUDGET, CREPT, "improved", "new", "pass")
"""The terminal's counts, in order: the verdicts' statuses, with what alone failed a test
in place of ``regressed`` or of its comparison's status (``Verdict.label``)."""

MEMORY_ROW = "[memory]"
MEMORY_ROW_MEANING = (
    "[memory] is the memory allocated or freed outside any captured op: by the test's own "
    "code, or by a library no capture source sees"
)
VARYING_MEANING = (
    "judged beyond that range widened by its width, so a change smaller than the spread "
    "cannot be seen"
)


UNSTEADY_MEANING = (
    "not judged exactly where they moved (the test draws its data anew); record baselines "
    "with --opprof-rounds 2 or more to keep their range"
)


def _span(low: int, high: int, unit: str) -> str:
    return f"{format_value(low, unit)}-{format_value(high, unit)}"


def varying_figures(verdict: Verdict) -> str:
    """``flops 1.20 GFLOP-1.31 GFLOP, op count 10-12``: the figures that vary, their ranges."""
    return ", ".join(f"{f.metric} {_span(f.low, f.high, f.unit)}" for f in verdict.varying)


def varying_note(verdict: Verdict) -> str:
    """Why a test whose deterministic figures vary has a weaker gate on them: ``flops vary
    between runs (1.20 GFLOP-1.31 GFLOP in the baseline's runs): judged beyond ...``."""
    figures = verdict.varying
    names = [f.metric for f in figures]
    named = names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"
    verb = "varies" if len(names) == 1 and names[0] != "flops" else "vary"
    spans = "; ".join(_span(f.low, f.high, f.unit) for f in figures)
    return f"{named} {verb} between runs ({spans} in the baseline's runs): {VARYING_MEANING}"


def _tail(change: float | None, tolerance: float | None, status: str) -> str:
    parts = [format_change(change)]
    if tolerance is not None:
        parts.append(f"(tolerance {format_tolerance(tolerance)})")
    if status in ("regressed", "improved", "not judged"):
        parts.append(status.upper())
    return "  ".join(p for p in parts if p)


def _metric_lines(row: MetricRow) -> str:
    name = f"{row.metric:<17} "  # a space after the longest ("device memory peak")
    if row.baseline == row.now:
        return f"  {name}{format_value(row.now, row.unit)}"
    return (
        f"- {name}{format_value(row.baseline, row.unit)}\n"
        f"+ {name}{format_value(row.now, row.unit):<16}"
        f"{_tail(row.change, row.tolerance, row.status)}"
        # An A/B pair set's change is its pairs', with an interval (pytest_opprof/ab/).
        + (f"  ({row.note})" if row.note.startswith("A/B") else "")
    )


def _reason_lines(reason: OpReason) -> str:
    if reason.kind == "new":
        return f"+ {reason.op}  new op, {format_value(reason.now, 'ops')} calls"
    if reason.kind == "vanished":
        return f"- {reason.op}  vanished, was {format_value(reason.baseline, 'ops')} calls"
    label = f"{reason.op}  {reason.kind}: "
    if reason.note:  # an A/B pair set's interval
        label = f"{reason.op}  {reason.kind} ({reason.note}): "
    return (
        f"- {label}{format_value(reason.baseline, reason.unit)}\n"
        f"+ {label}{format_value(reason.now, reason.unit):<16}"
        f"{_tail(reason.change, None, reason.status)}"
    )


_ICONS = {"regressed": "❌", "improved": "🚀", "new": "🆕", "pass": "✅"}


def _metric(verdict: Verdict, name: str) -> MetricRow | None:
    return next((row for row in verdict.metrics if row.metric == name), None)


def time_basis(verdict: Verdict) -> str:
    """What the judged test-level time is: ``wall time of the rounds judged, scaled to the
    baseline's machine speed (...)``; why not, where it was not judged."""
    if not verdict.time_judged:
        return "not judged" + (f": {verdict.time_not_judged}" if verdict.time_not_judged else "")
    what = "work time (wall time less waiting for a CPU)" if verdict.work_time else "wall time"
    change = verdict.speed_change
    if change is None:
        return f"{what} of the rounds judged, as measured"
    way = "slower" if change > 0 else "faster"
    return (
        f"{what} of the rounds judged, scaled to the baseline's machine speed (the speed "
        f"references ran {abs(change):.0%} {way})"
    )


def judged_wall_ns(result: TestResult) -> float:
    """The test's wall time as its verdict compared it (rounds judged, at the baseline's
    speed); the measured median where the verdict has no wall-time row (a new test)."""
    row = _metric(result.verdict, "wall time")
    return (
        row.now if row is not None and row.now is not None else result.summary.wall_time.median_ns
    )


def raw_wall_line(result: TestResult) -> str | None:
    """``wall time (raw)  4.900ms  ...``: the measured median where it differs from the
    judged figure, labelled, with what the judged one is."""
    raw = result.summary.wall_time.median_ns
    if judged_wall_ns(result) == raw:
        return None
    return (
        f"  {'wall time (raw)':<18}{format_value(raw, 'ns'):<16}"
        f"{_raw_rounds(result.summary.rounds)} as measured; the judged figure above: "
        f"{time_basis(result.verdict)}"
    )


def _work_note(verdict: Verdict) -> str:
    """The note of a verdict judged on work time that says why (``waiting.work_rounds``)."""
    return next((n for n in verdict.notes if WORK_NOTE_MARK in n), "")


def render_markdown(
    results: Sequence[TestResult],
    *,
    machine: MachineInfo,
    row_limit: int = 10,
    notes: Sequence[str] = (),
) -> str:
    """A run's summary as GitHub-flavoured Markdown (step summaries, PR comments), always
    under :data:`MARKDOWN_LIMIT` characters and UTF-16 code units: regressions first, the
    rest counted."""
    # Read once: each pass over a session's spool reads every result back from disk, and
    # the ranking below holds them all anyway.
    results = list(results)
    totals: Counter[str] = Counter(r.verdict.status for r in results)
    counts = ", ".join(f"{totals[s]} {s}" for s in STATUSES if totals.get(s))
    out = [
        f"## pytest-opprof: {counts or 'no profiled tests'}",
        "",
        f"Machine: {md_text(machine.describe())}",
        "",
    ]
    basis = next((r.verdict.basis for r in results if r.verdict.basis != "baseline"), None)
    out += [
        f"Times judged: {md_text(basis)}, interleaved on this machine"
        if basis is not None
        else "Times judged: against the committed baselines",
        "",
        "Wall time below is the figure each verdict judged (the rounds judged, at the "
        "baseline's machine speed where it was scaled), beside its change; a changed test's "
        "details give the raw median, as measured.",
        "",
    ]
    if notes:  # an A/B run's ops judged across its tests
        out += [md_text(n) for n in notes] + [""]
    unjudged = UnjudgedTally()
    for r in results:
        if r.verdict.status != "new":
            unjudged.add(r.verdict.time_unjudged)
    line = unjudged.line() if basis is None else None  # an A/B run has its own lines
    if line is not None:
        out += [md_text(line), ""]
    busy = [r for r in results if r.verdict.time_not_judged]
    if busy:
        # An A/B run's times go without a verdict when undecided as well as when busy:
        # the note says which.
        why = (
            "Times without a verdict"
            if basis is not None
            else ("Times not judged (the machine was busy)")
        )
        out += [
            f"{why}: {len(busy)} test(s), e.g. "
            f"{md_code(busy[0].nodeid)}: {md_text(busy[0].verdict.time_not_judged or '')}",
            "",
        ]
    worked = [r for r in results if r.verdict.work_time]
    if worked:
        out += [
            f"Times judged on work time (wall time less waiting for a CPU): {len(worked)} "
            f"test(s), e.g. {md_code(worked[0].nodeid)}: {md_text(_work_note(worked[0].verdict))}",
            "",
        ]
    varying = [r for r in results if r.verdict.varying]
    if varying:
        out += [
            f"Figures that vary between runs: {len(varying)} test(s), {VARYING_MEANING}; e.g. "
            f"{md_code(varying[0].nodeid)}: {md_text(varying_figures(varying[0].verdict))}",
            "",
        ]
    if not results:
        return "\n".join(out)
    order = {s: i for i, s in enumerate(STATUSES)}
    ranked = sorted(results, key=lambda r: (order[r.verdict.status], r.nodeid))
    head = [
        "| test | status | wall time | change | FLOPs | change | peak memory | change |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    # Rows and details go in while they fit under GitHub's comment limit: first each
    # changed test's row and op table (regressions first), then the other rows, so what
    # failed is always there in full unless it alone overflows; the rest is counted.
    budget = MARKDOWN_LIMIT - _length(out) - _length(head) - _length(_left_out(results, results))
    rows: dict[str, str] = {}
    blocks: dict[str, list[str]] = {}
    changed = [r for r in ranked if r.verdict.status in ("regressed", "improved")]
    for r in changed:
        row, block = _markdown_row(r), _markdown_details(r, row_limit)
        if _length([row, *block]) > budget:
            break
        rows[r.nodeid], blocks[r.nodeid] = row, block
        budget -= _length([row, *block])
    for r in ranked:
        if r.nodeid in rows:  # a changed test whose op table did not fit still gets its row
            continue
        row = _markdown_row(r)
        if _length([row]) > budget:
            break
        rows[r.nodeid] = row
        budget -= _length([row])
    detailed = len(blocks)
    listed = [r for r in ranked if r.nodeid in rows]
    details = [line for r in listed if r.nodeid in blocks for line in blocks[r.nodeid]]
    out += head + [rows[r.nodeid] for r in listed] + details
    left = [r for r in ranked if r.nodeid not in rows]
    out += _left_out(left, changed[detailed:])
    return "\n".join(out) + "\n"


MARKDOWN_LIMIT = 65_536
"""GitHub's limit on a comment (and a step summary's practical size), in characters; held
in UTF-16 code units too, which count an emoji as two."""


def _length(lines: Sequence[str]) -> int:
    """What ``lines`` take of :data:`MARKDOWN_LIMIT`: UTF-16 code units, never fewer than
    characters, and a line break each."""
    return sum(utf16_units(line) + 1 for line in lines)


def _left_out(left: Sequence[TestResult], undetailed: Sequence[TestResult]) -> list[str]:
    """The closing lines that count the tests ``left`` out of the table and the changed
    tests whose op tables were (``undetailed``); none when nothing was left out."""
    if not left and not undetailed:
        return []
    counts_left: Counter[str] = Counter(r.verdict.status for r in left)
    parts = [f"{counts_left[s]} {s}" for s in STATUSES if counts_left.get(s)]
    what = f"{len(left)} test(s) not listed ({', '.join(parts)})" if left else ""
    if undetailed:
        skipped = f"op tables of {len(undetailed)} changed test(s) left out"
        what = f"{what}; {skipped}" if what else skipped
    return ["", f"_{what} to stay under GitHub's comment limit: the JSON and HTML reports "
            "have every test._"]  # fmt: skip


def _markdown_row(r: TestResult) -> str:
    s = r.summary
    cells = [
        md_code(r.nodeid, in_table=True),
        f"{_ICONS[r.verdict.status]} {r.verdict.label}",
    ]
    peak = s.memory.peak_bytes if s.memory else None
    for name, unit, now in (
        ("wall time", "ns", judged_wall_ns(r)),
        ("flops", "flops", s.flops),
        ("peak memory", "bytes", peak),
    ):
        row = _metric(r.verdict, name)
        cells += [format_value(now, unit), format_change(row.change) if row else ""]
    return "| " + " | ".join(cells) + " |"


def _markdown_details(r: TestResult, row_limit: int) -> list[str]:
    status = r.verdict.label
    out = ["", f"<details><summary>{html_text(r.nodeid)}: {status}</summary>", ""]
    if r.verdict.reasons:  # none where only a budget or the history failed it
        out += [
            "| op | change | baseline | now | Δ | status |",
            "| --- | --- | ---: | ---: | ---: | --- |",
        ]
        for reason in r.verdict.reasons[:row_limit]:
            out.append(
                f"| {md_code(reason.op, in_table=True)} | {reason.kind} | "
                f"{format_value(reason.baseline, reason.unit)} | "
                f"{format_value(reason.now, reason.unit)} | {format_change(reason.change)} | "
                f"{reason.status} |"
            )
        out.append("")
    out += [f"> wall time judged: {md_text(time_basis(r.verdict))}"]
    raw = r.summary.wall_time.median_ns
    if judged_wall_ns(r) != raw:
        out.append(
            f"> wall time (raw): {format_value(raw, 'ns')}, "
            f"{_raw_rounds(r.summary.rounds)} as measured"
        )
    out += markdown_budget_lines(r.verdict)
    out += markdown_creep_lines(r.verdict)
    out += [f"> {md_text(note)}" for note in r.verdict.notes] + ["", "</details>"]
    return out


def write_markdown(
    path: str | os.PathLike[str],
    results: Sequence[TestResult],
    *,
    machine: MachineInfo,
    notes: Sequence[str] = (),
) -> None:
    """Write :func:`render_markdown` to ``path`` (see ``gate.files.write_file``)."""
    write_file(Path(path), render_markdown(results, machine=machine, notes=notes))


REQUIRE_HINT = (
    "no baseline yet and --opprof-require-baselines is set; "
    "record one with --opprof-update-baselines"
)


def failure_text(judgement: Judgement, *, row_limit: int = DEFAULT_ROW_LIMIT) -> str:
    """What a test that the gate fails shows as its failure: the diff, or why it failed."""
    if judgement.result is None:
        return judgement.error or "opprof: not judged"
    result = judgement.result
    verdict = result.verdict
    parts = []
    if verdict.status == "new":
        parts.append(f"opprof NEW: {result.nodeid}\n{REQUIRE_HINT}")
    elif not verdict.crept_only:
        parts.append(render_text(result, row_limit=row_limit))
    if verdict.crept:
        parts.append(creep_text(result.nodeid, verdict.crept))
    return "\n".join(parts)


def creep_text(nodeid: str, crept: Sequence[Crept]) -> str:
    """What a test whose figures crept against the history shows as its failure."""
    lines = "".join(f"\n  {c.text()}" for c in crept)
    return (
        f"opprof CREPT: {nodeid}: beyond tolerance against its history's level before the "
        f"creep began (docs/history.md){lines}"
    )


def _listed(nodeids: list[str], row_limit: int) -> list[str]:
    """The first ``row_limit`` node ids, a line each, then how many more (a first run of a
    large suite has every test new: a line each buried the rest of the summary)."""
    lines = [f"  {nodeid}" for nodeid in nodeids[:row_limit]]
    if len(nodeids) > row_limit:
        lines.append(f"  ... {len(nodeids) - row_limit} more (the JSON and HTML reports list all)")
    return lines


def session_lines(session: BaselineSession, *, row_limit: int = DEFAULT_ROW_LIMIT) -> list[str]:
    """The terminal summary of a session's comparison: counts, then each notable test."""
    # From the statuses kept in memory: a result is read back from the spool (which
    # decodes its figures) only where its lines need more than its status.
    # Under what failed each test: a test only its budgets or its creep against the history
    # failed is counted so, not under its comparison's status.
    counts = dict.fromkeys(SHOWN_STATUSES, 0)
    regressed: list[list[str]] = []  # per regressed test, its lines
    busy: list[tuple[str, Verdict]] = []  # the first one's (node id, verdict)
    worked: list[tuple[str, Verdict]] = []
    varying: list[str] = []  # the first row_limit tests' lines
    n_varying = 0
    unsteady: list[str] = []  # the same, of the tests whose rounds disagreed
    n_unsteady = 0
    improved: list[str] = []
    new: list[str] = []
    n_busy = n_worked = 0
    unjudged = UnjudgedTally()
    for i, j in enumerate(session.judged):
        counts[j.shown] = counts.get(j.shown, 0) + 1
        if j.status != "new":
            unjudged.add(j.unjudged)
        if j.status == "regressed":
            r = session.result_of(i)
            if not session.fails(r):  # not failed: this is the only place it shows
                regressed.append(["", render_text(r, row_limit=row_limit)])
            elif j.shown == OVER_BUDGET:
                regressed.append(
                    [f"{OVER_LABEL} {j.nodeid} (failed; its budgets are in its failure)"]
                )
            else:
                regressed.append([f"REGRESSED {j.nodeid} (failed; the diff is in its failure)"])
        elif j.status == "improved":
            improved.append(j.nodeid)
        elif j.status == "new":
            new.append(j.nodeid)
        if j.busy:
            n_busy += 1
            busy = busy or [(j.nodeid, session.result_of(i).verdict)]
        if j.work_time:
            n_worked += 1
            worked = worked or [(j.nodeid, session.result_of(i).verdict)]
        if j.varying:
            n_varying += 1
            if n_varying <= row_limit:
                varying.append(f"  {j.nodeid}: {varying_figures(session.result_of(i).verdict)}")
        if j.unsteady:
            n_unsteady += 1
            if n_unsteady <= row_limit:
                figures = session.result_of(i).verdict.unsteady
                shown_figures = ", ".join(
                    f"{f.metric} {_span(f.low, f.high, f.unit)}" for f in figures
                )
                unsteady.append(f"  {j.nodeid}: {shown_figures}")
    shown = ", ".join(f"{n} {s}" for s, n in counts.items() if n)
    if session.errors:
        shown += (", " if shown else "") + f"{len(session.errors)} unusable baseline"
    if session.outside:
        shown += (", " if shown else "") + f"{len(session.outside)} outside the rootdir"
    basis = getattr(session, "basis", None)  # an A/B run's (pytest_opprof/ab/session.py)
    if basis is not None:
        across = getattr(session, "across_counts", str)()
        shown += (", " if shown and across else "") + across
        lines = [f"opprof {basis}: {shown or 'nothing judged'}"]
    else:
        where = _shown_path(session.options.baseline_dir)
        lines = [f"opprof baselines ({where}): {shown or 'nothing judged'}"]
        line = unjudged.line()
        if line is not None:
            lines.append(line)
    if session.options.warn_only:
        lines.append("(--opprof-warn-only: regressions are reported, not failed)")
    if session.options.update:
        lines.append("(--opprof-update-baselines: regressions are reported, not failed)")
    for regressed_lines in regressed:
        lines += regressed_lines
    if busy:
        # An A/B run's times go without a verdict when undecided as well as when busy:
        # the note says which.
        why = (
            "times without a verdict: {} test(s), e.g. {}:"
            if basis is not None
            else "times not judged: {} test(s) ran while the machine was busy, e.g. {}:"
        )
        lines += ["", why.format(n_busy, busy[0][0]), f"  {busy[0][1].time_not_judged}"]
    if worked:
        lines += [
            "",
            f"times judged on work time: {n_worked} test(s) ran while the machine was busy, "
            f"e.g. {worked[0][0]}:",
            f"  {_work_note(worked[0][1])}",
        ]
    if varying:
        lines += [
            "",
            f"figures that vary between runs: {n_varying} test(s), {VARYING_MEANING}:",
        ]
        lines += varying
        if n_varying > row_limit:
            lines.append(f"  ... {n_varying - row_limit} more")
    if unsteady:
        lines += [
            "",
            f"figures that vary between rounds of the same code: {n_unsteady} test(s), "
            f"{UNSTEADY_MEANING}:",
        ]
        lines += unsteady
        if n_unsteady > row_limit:
            lines.append(f"  ... {n_unsteady - row_limit} more")
    if improved:
        lines += ["", "improved beyond tolerance:"]
        lines += _listed(improved, row_limit)
        if not session.options.update and basis is None:  # A/B records no baselines
            lines.append(f"  hint: {UPDATE_HINT}")
    if new:
        heading = "new (not in the base)" if basis is not None else "new (no baseline)"
        lines += ["", f"{heading}:", *_listed(new, row_limit)]
    lines += getattr(session, "extra_lines", list)()
    if session.errors:
        lines += ["", "unusable baselines:"]
        lines += [f"  {nodeid}: {message}" for nodeid, message in session.errors.items()]
    if session.outside:
        first = next(iter(session.outside))
        lines += [
            "",
            f"not compared: {len(session.outside)} test(s) outside the rootdir (e.g. {first}) "
            "have no baseline file; to gate them, run with a --rootdir that contains them",
        ]
    if session.options.update:
        lines += ["", f"wrote {len(session.written)} baseline file(s)"]
        lines += [f"  {_shown_path(p)}" for p in session.written]
        if session.pooled:
            lines.append(
                f"{len(session.pooled)} test(s) showed no real change: their "
                f"rounds joined it (the last {POOLED_SESSIONS} runs' rounds are kept)"
            )
        if session.replaced:
            first, why = next(iter(session.replaced.items()))
            lines.append(
                f"{len(session.replaced)} test(s) changed for real and replaced their baseline, "
                f"e.g. {first}: {why}"
            )
    if session.write_error is not None:
        lines.append(session.write_error)
    return lines


def _shown_path(path: Path) -> str:
    try:
        return os.path.relpath(path)
    except ValueError:  # another drive (Windows)
        return str(path)


def _raw_rounds(rounds: int) -> str:
    """``the median of all 5 rounds``, or ``its one round``."""
    return "its one round" if rounds == 1 else f"the median of all {rounds} rounds"
