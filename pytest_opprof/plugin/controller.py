"""The side that collects: every profiled test's payload, the baselines, the summary.

Registered only in the process that reports, the pytest-xdist controller or a
single process, never on an xdist worker: workers never write shared files
(baselines, reports), and what they measured reaches this side on their call
reports.  In a single process the worker side hands each payload over in memory
(:meth:`Controller.take`) with the verdict it reached; a worker's payload is parsed
from the report and judged again here (a pure function of the figures, so the
same verdict), which is what lets this side stage and write the baselines.
"""

from __future__ import annotations

import contextlib
import heapq
import os
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

import pytest

from pytest_opprof.capture.plan import Plan
from pytest_opprof.errors import BaselineError
from pytest_opprof.gate.session import BaselineSession
from pytest_opprof.history.store import RunWriter
from pytest_opprof.plugin import rounds as policy
from pytest_opprof.plugin.kept import Lines, SummaryLine
from pytest_opprof.plugin.options import OpprofOptions
from pytest_opprof.plugin.payload import (
    LEFT_BEHIND_ATTRIBUTE,
    REPORT_ATTRIBUTE,
    STEPPED_ASIDE_ATTRIBUTE,
    WORKER_NOTES,
    ProfiledTest,
    attached,
)
from pytest_opprof.plugin.repeatable import BENCHMARK_PLUGIN
from pytest_opprof.render.html import HistoryLinks, write_html
from pytest_opprof.render.report import session_lines, write_markdown
from pytest_opprof.render.units import format_memory, format_time


class Controller:
    """Collects the session's profiled tests and settles the comparison with baselines."""

    def __init__(self, options: OpprofOptions, gate: BaselineSession, chosen: Plan) -> None:
        self.options = options
        self.gate = gate
        self.plan = chosen
        self.results = Lines()
        """Every profiled test's summary line (kept.py)."""
        self.not_measured: set[str] = set()
        """"what: why" lines from the profiles run in this process (a pytest-xdist
        controller runs none, so it has none)."""
        self.own_profile: list[str] = []  # tests that ran their own profile (not profiled)
        self.left_behind: list[tuple[str, str]] = []  # (test, what it left that was reset)
        self._handed: dict[str, ProfiledTest] = {}  # from this process's worker side
        self.worker_notes: set[str] = set()
        """Session notes of pytest-xdist workers (the torch observer's build or why Kineto
        collected), each printed once."""
        self.history = RunWriter() if options.history is not None else None
        """The passed tests' figures for ``--opprof-history``, written at the end."""
        self.history_line: str | None = None

    def take(self, payload: ProfiledTest) -> None:
        """The worker side of this process hands over a test's payload (before its call
        report is logged)."""
        self._handed[payload.nodeid] = payload

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: object, error: object) -> None:
        """A pytest-xdist worker finished: keep its session notes for the summary."""
        output = getattr(node, "workeroutput", None) or {}
        self.worker_notes.update(output.get(WORKER_NOTES, ()))

    def pytest_report_header(self, config: pytest.Config) -> str:
        names = ", ".join(s.name for s in self.plan.capture) or "none"
        extra = "; python memory" if self.options.python_memory else ""
        rounds = policy.rounds_line(self.options.rounds, self.options.gate.min_time_ns)
        line = f"opprof: capture {names}; rounds {rounds}, warmup {self.options.warmup}{extra}"
        if config.pluginmanager.hasplugin(BENCHMARK_PLUGIN):  # benchmark_loops_off
            line += (
                "\nopprof: pytest-benchmark's timing loops are off (--benchmark-disable): "
                "each benchmark(...) call runs its function once, in every round"
            )
        return line

    def _payload(self, report: pytest.TestReport) -> ProfiledTest | None:
        """The call report's payload: handed over in memory, or parsed from the report."""
        handed = self._handed.pop(report.nodeid, None)
        if handed is not None:
            return handed
        data = attached(report)
        if data is None:
            return None
        # The parsed copy is the one kept; reports live for the whole session.
        delattr(report, REPORT_ATTRIBUTE)
        return ProfiledTest.from_json(report.nodeid, data)

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.when == "teardown":
            self.gate.teardown_done(report.nodeid, report.passed)
            left = getattr(report, LEFT_BEHIND_ATTRIBUTE, None)
            if left is not None:
                self.left_behind.append((report.nodeid, str(left)))
        if getattr(report, STEPPED_ASIDE_ATTRIBUTE, False):
            self.own_profile.append(report.nodeid)
        if report.when != "call":
            return
        result = self._payload(report)
        if result is None:
            return
        judgement = result.judgement
        if result.judged and judgement is None:  # judged on a pytest-xdist worker
            judgement = self.gate.judge(report.nodeid, result.summary, result.tolerances)
        self.results.append(result)
        if result.marked:
            self.gate.marked.add(report.nodeid)
        if result.flame is not None:
            self.gate.flames[report.nodeid] = result.flame
        if result.judged and report.passed:
            self.gate.call_passed(report.nodeid, result.summary)
        if self.history is not None and result.judged:  # the body passed, the gate may fail it
            self.history.add(report.nodeid, result.summary)

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        ok = self.gate.finish()
        markdown = self.options.gate.markdown_path
        if markdown is not None:
            try:
                write_markdown(
                    markdown,
                    self.gate.results_at_end(),
                    machine=self.gate.machine,
                    notes=self.gate.markdown_notes(),
                )
            except BaselineError as exc:
                self.gate.report_failed(exc)
                ok = False
        if self.history is not None and self.options.history is not None:
            from pytest_opprof.plugin.history import write_history

            # Before the HTML report: its history page includes this run.
            self.history_line, written = write_history(
                self.history,
                self.options.history,
                self.gate.machine,
                session.config.rootpath,
                self.gate.replaced if not self.gate.write_failures else (),
            )
            ok = ok and written
        html = self.options.gate.html_path
        if html is not None:
            links = None
            try:
                links = self._history_page(html)
            except BaselineError as exc:  # the page, or a history that is no directory
                self.gate.report_failed(exc)
                ok = False
            try:
                write_html(html, self.gate.report(), links)
            except BaselineError as exc:
                self.gate.report_failed(exc)
                ok = False
        if not ok and session.exitstatus == pytest.ExitCode.OK:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED

    def _history_page(self, html: Path) -> HistoryLinks | None:
        """With ``--opprof-history``, write the history's page beside the HTML report and
        return the report's links to it (None: no history, or no file to put it beside)."""
        if self.options.history is None or not self.options.history.is_dir():
            return None  # no run written to it yet: no page, no links
        from pytest_opprof.plugin.history import history_page_path, write_history_page

        page = history_page_path(html)
        if page is None:
            return None
        links, line = write_history_page(self.options.history, page)
        self.history_line = f"{self.history_line}\n{line}" if self.history_line else line
        return links

    def _statuses(self) -> dict[str, str]:
        """Node id -> what the gate made of the test, as the summary shows it; a profiled
        test missing here was not judged."""
        statuses = dict.fromkeys(self.gate.errors, "error")
        for j in self.gate.judged:
            statuses[j.nodeid] = "time not judged" if j.busy and j.shown == "pass" else j.shown
        return statuses

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        tr = terminalreporter
        tr.write_sep("=", "opprof")
        if self.not_measured:
            tr.write_line("opprof: not measured: " + "; ".join(sorted(self.not_measured)))
        for note in sorted(self.worker_notes):
            tr.write_line(note)
        if self.own_profile:
            tr.write_line(
                f"opprof: not profiled: {len(self.own_profile)} test(s) started their own "
                f"opprof profile (e.g. {self.own_profile[0]}); the plugin stepped aside for them"
            )
        if self.left_behind:
            nodeid, left = self.left_behind[0]
            tr.write_line(
                f"opprof: {len(self.left_behind)} test(s) left something behind (e.g. "
                f"{nodeid}: {left}); the plugin reset it after each, so later tests were "
                "measured as usual"
            )
        if not self.results:
            tr.write_line("no test was profiled")
            return
        partial = self.results.partial()
        # With no op source (--opprof-capture none) every test would read 0% in ops.
        flag_low = bool(self.plan.capture)
        show_all = self.options.summary == "all" or tr.config.get_verbosity() >= 1
        lines = summary_lines(
            self.results,
            self._statuses(),
            show_all=show_all,
            min_wall_ns=self.options.gate.min_time_ns,
            flag_low=flag_low,
            unlisted_status="not judged",
        )
        if partial:
            # The first of the most dropped, as max() over the results picked it.
            dropped, nodeid = max(partial, key=lambda p: p[0])
            tr.write_line(
                f"opprof: PARTIAL: {len(partial)} test(s) recorded more events in a round than "
                f"--opprof-max-events ({self.options.max_events}) keeps, e.g. "
                f"{nodeid} ({dropped:,} dropped): their op figures "
                "cover part of the test and are not judged (wall time and memory are)"
            )
        if self.gate.unmeasured is not None:
            tr.write_line(
                f"opprof: NOT MEASURED: {self.gate.unmeasured}: no test's FLOPs, op counts "
                "or op figures were measured, so none is judged or recorded (wall time and "
                "memory are judged)"
            )
        for line in lines:
            tr.write_line(line)
        for result in self.results.with_tables():
            assert result.table is not None
            tr.write_sep("-", f"opprof: {result.nodeid}")
            tr.write_line(result.table.rstrip("\n"))
            if result.trace_path is not None:
                tr.write_line(f"trace: {result.trace_path}")
        if self.options.trace_dir is not None:
            tr.write_line(
                trace_line(
                    self.results.trace_paths(), self.options.trace_dir, self.options.trace_which
                )
            )
        if self.history_line is not None:
            tr.write_line(self.history_line)
        if self.gate.history is not None:
            from pytest_opprof.history.gate import gate_lines

            for line in gate_lines(self.gate.history, self.gate.crept):
                tr.write_line(line)
        tr.write_sep("-", "opprof: baselines")
        for line in session_lines(self.gate, row_limit=self.options.row_limit):
            tr.write_line(line)


def trace_line(trace_paths: Sequence[str], trace_dir: Path, which: str) -> str:
    """How many traces ``--opprof-trace-dir`` got this session, and their size on disk."""
    sizes = []
    for path in trace_paths:
        with contextlib.suppress(OSError):  # removed since: no size to add
            sizes.append(os.stat(path).st_size)
    only = " (--opprof-trace-which regressed: only tests that regressed)" if which != "all" else ""
    return (
        f"opprof: {len(sizes)} trace(s) written to {trace_dir}, "
        f"{format_memory(sum(sizes))} in all{only}"
    )


LOW_CAPTURE_SHARE = 0.5
"""Below this share of its wall time in captured ops a test is flagged: most of its time
is in code the op tables cannot see (Python, or a library no source captures), so its
op figures miss most of what a regression could change."""
SLOWEST_SHOWN = 10
"""The slowest passing tests (by median wall time) listed beside those needing attention."""
NEW_SHOWN = 10
"""New tests (no baseline) listed among those needing attention: a first run of a large
suite has thousands, every one new, and a line each buried the rest."""


def summary_lines(
    results: Iterable[SummaryLine],
    statuses: Mapping[str, str] | None = None,
    *,
    show_all: bool = True,
    slowest: int = SLOWEST_SHOWN,
    new_shown: int = NEW_SHOWN,
    min_wall_ns: int = 1_000_000,
    flag_low: bool = True,
    unlisted_status: str = "-",
) -> list[str]:
    """A header, a line per listed test (self CPU time in captured ops, op count, the share
    of its wall time in library ops (``op_time_share``), top op, the gate's status), a
    totals line, and a note on the tests whose share is below :data:`LOW_CAPTURE_SHARE`
    (unless not ``flag_low``; tests shorter than ``min_wall_ns``, the time floor, are not
    flagged: their time is not judged).

    ``show_all=False`` lists what needs attention: every test whose status is not
    ``pass`` (of the new ones, the first ``new_shown``), the marked ones and the
    ``slowest``; the totals line counts the rest.
    ``statuses``: node id -> status (``unlisted_status`` for a test not in it).

    ``results`` is read once, one test at a time: only the listed tests' rows are made.
    """
    statuses = statuses or {}
    listed: list[tuple[int, tuple[str, ...]]] = []  # (position, row)
    # The slowest by (wall, node id): a min-heap of the `slowest` largest seen so far,
    # each with its row (kept out of `listed` when listed anyway).
    slow: list[tuple[float, str, int, tuple[str, ...] | None]] = []
    counts: Counter[str] = Counter()
    low = 0
    n = 0
    new_listed = 0
    for i, r in enumerate(results):
        n += 1
        share = r.op_time_share
        wall = r.wall_ns
        long_enough = wall >= min_wall_ns
        flag = " LOW" if flag_low and share < LOW_CAPTURE_SHARE and long_enough else ""
        low += bool(flag)
        status = statuses.get(r.nodeid, unlisted_status)
        counts[status] += 1
        anyway = show_all or r.marked or status not in ("pass", "-")
        if anyway and status == "new" and not (show_all or r.marked):
            anyway = new_listed < new_shown
            new_listed += anyway
        if not anyway and slowest <= 0:
            continue
        key = (wall, r.nodeid)
        if not anyway and len(slow) >= slowest and key <= slow[0][:2]:
            continue  # neither listed nor among the slowest: no row to make
        row = _row(r, share, flag, status)
        if anyway:
            listed.append((i, row))
        if not show_all and slowest > 0:
            entry = (wall, r.nodeid, i, None if anyway else row)
            if len(slow) < slowest:
                heapq.heappush(slow, entry)
            elif key > slow[0][:2]:
                heapq.heapreplace(slow, entry)
    listed += [(i, row) for _wall, _nodeid, i, row in slow if row is not None]
    rows = [row for _i, row in sorted(listed)]
    lines = []
    if rows:
        top_width = min(max(len(row[3]) for row in rows), 48)
        status_width = max(len("status"), *(len(row[4]) for row in rows))
        lines.append(
            f"{'self CPU':>11} {'ops':>6} {'in ops':>8}  {'top op':<{top_width}}  "
            f"{'status':<{status_width}}  test"
        )
        lines += [
            f"{cpu:>11} {count:>6} {share:>8}  {top:<{top_width}}  {status:<{status_width}}  "
            f"{nodeid}"
            for cpu, count, share, top, status, nodeid in rows
        ]
    counted = ", ".join(f"{n} {status}" for status, n in sorted(counts.items(), key=_by_status))
    total = f"opprof: {n} profiled test(s) ({counted})"
    hidden = sum(counts.values()) - len(rows)
    hidden_new = counts["new"] - sum(row[4] == "new" for row in rows)
    if hidden:
        if not hidden_new:
            which = "passing test(s) not listed"
        elif hidden_new == hidden:
            which = "new test(s) not listed"
        else:
            which = f"test(s) not listed ({hidden_new} new, {hidden - hidden_new} passing)"
        total += (
            f"; {hidden} {which}: -v or --opprof-summary all lists every "
            "test, and the JSON and HTML reports have them all"
        )
    lines.append(total)
    if low:
        lines.append(
            f"LOW: {low} test(s) spent under {LOW_CAPTURE_SHARE:.0%} of their time in "
            "captured library ops (in ops: library ops' self time / wall time; "
            "record_function scopes do not count): their time lives in code the op tables "
            "cannot see, so their op figures gate little of it"
        )
    return lines


def _row(r: SummaryLine, share: float, flag: str, status: str) -> tuple[str, ...]:
    top = f"{r.top_op} {format_time(r.top_self_ns / 1000)}" if r.top_op is not None else "-"
    cpu, count = format_time(r.ops_self_ns / 1000), str(r.op_count)
    return (cpu, count, f"{share:.0%}{flag}", top, status, r.nodeid)


_STATUS_ORDER = (
    "regressed",
    "over budget",
    "crept",
    "improved",
    "new",
    "not judged",
    "error",
    "time not judged",
    "pass",
)


def _by_status(item: tuple[str, int]) -> tuple[int, str]:
    status = item[0]
    return (_STATUS_ORDER.index(status) if status in _STATUS_ORDER else len(_STATUS_ORDER), status)
