"""The per-session manager: profiles the call phase of each test and keeps its figures.

Registered as a plugin object only when ``--opprof`` is given (see ``plugin.py``),
so importing this module, which pulls in numpy and the native core, is itself a
sign that profiling was asked for.

Per test it keeps a :class:`~pytest_opprof.gate.summary.TestSummary` (per-op figures
over the measured rounds) and, for marked tests, the rendered op table: never the
events, so memory stays flat over thousands of tests.  The figures travel on the
call-phase ``TestReport`` (attribute ``opprof``, plain JSON), so a pytest-xdist
controller collects them from its workers' reports like a single process does.
The comparison with baselines is :class:`~pytest_opprof.gate.session.BaselineSession`'s (see there
which process judges and which writes).
"""

from __future__ import annotations

import contextlib
import gc
import hashlib
import re
import statistics
import time
from collections.abc import Generator, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from pytest_opprof import _native
from pytest_opprof.capture import speed_probe
from pytest_opprof.capture.profiler import profile
from pytest_opprof.capture.records import MEMORY_EVENT_NAME
from pytest_opprof.capture.sources import Source, resolve
from pytest_opprof.capture.sources import get as get_source
from pytest_opprof.errors import BaselineError, MarkerUsageError, OpprofError
from pytest_opprof.gate.jsonio import Fields
from pytest_opprof.gate.session import BaselineSession, Judgement
from pytest_opprof.gate.summary import RoundFigures, TestSummary, summarize_rounds
from pytest_opprof.model import EventList
from pytest_opprof.plugin.marker import MARKER_NAME, TestSettings, settings_for
from pytest_opprof.plugin.options import AUTO_ROUNDS, CONFIRM_ROUNDS, OpprofOptions, rounds_text
from pytest_opprof.render.report import failure_text, session_lines, write_markdown
from pytest_opprof.render.units import format_time

settings_key = pytest.StashKey[TestSettings]()

REPORT_ATTRIBUTE = "opprof"
STEPPED_ASIDE_ATTRIBUTE = "opprof_stepped_aside"
"""Set on the call report of a test that started its own profile (the plugin stepped
aside), so a pytest-xdist controller learns it from its workers too."""


@dataclass
class ProfiledTest:
    """What the terminal summary (and later the verdict) needs of one profiled test."""

    __test__ = False  # not a pytest test class

    nodeid: str
    marked: bool
    summary: TestSummary
    table: str | None = None
    trace_path: str | None = None
    tolerances: dict[str, float] = field(default_factory=dict)
    """The marker's tolerance overrides (``time``, ``memory``, ``flops``), fractions."""
    judged: bool = False
    """Whether the gate judged it (only tests whose call passed are judged)."""

    def to_json(self) -> dict[str, object]:
        """Plain JSON, small enough to ride on a ``TestReport`` through pytest-xdist."""
        return {
            "marked": self.marked,
            "summary": self.summary.to_json(),
            "table": self.table,
            "trace_path": self.trace_path,
            "tolerances": self.tolerances,
            "judged": self.judged,
        }

    @classmethod
    def from_json(cls, nodeid: str, data: object) -> ProfiledTest:
        f = Fields(data)
        raw = data if isinstance(data, dict) else {}
        tolerances = raw.get("tolerances")
        return cls(
            nodeid=nodeid,
            marked=bool(raw.get("marked")),
            summary=TestSummary.from_json(f.obj("summary")),
            table=f.opt_text("table"),
            trace_path=f.opt_text("trace_path"),
            tolerances=(
                {str(k): float(v) for k, v in tolerances.items()}
                if isinstance(tolerances, dict)
                else {}
            ),
            judged=bool(raw.get("judged")),
        )


@dataclass
class _Rounds:
    """The measured rounds of the test being run; dropped once it is summarised."""

    profiles: list[profile] = field(default_factory=list)
    cpu_times_ns: list[int] = field(default_factory=list)
    speed_refs_ns: list[int] = field(default_factory=list)
    native_refs_ns: list[int] = field(default_factory=list)
    preempted: bool = False
    """The test started its own profile inside a round: the plugin stepped aside."""
    figures: list[RoundFigures] = field(default_factory=list)
    averages: list[EventList] = field(default_factory=list)
    """Per summarised round: its figures and its ``key_averages()`` (for the table)."""


def _overrides(settings: TestSettings) -> dict[str, float]:
    """The marker's tolerance overrides (``time``, ``memory``, ``flops``) that are set."""
    overrides = {
        "time": settings.time_tolerance,
        "memory": settings.memory_tolerance,
        "flops": settings.flops_tolerance,
    }
    return {k: v for k, v in overrides.items() if v is not None}


class OpprofManager:
    """Holds the session's capture sources and the figures of every profiled test."""

    def __init__(self, config: pytest.Config, options: OpprofOptions) -> None:
        self.config = config
        self.options = options
        try:
            self.sources: list[Source] = resolve(
                list(options.capture) if options.capture is not None else None
            )
        except OpprofError as exc:
            raise pytest.UsageError(f"--opprof-capture / opprof_capture: {exc}") from None
        # Held for the whole session too, so each test's profile only counts a reference.
        helpers = ["memory", "python_memory"] if options.python_memory else ["memory"]
        found = (get_source(name) for name in helpers)
        self._helpers = [h for h in found if h is not None and h.available()]
        self._acquired: list[Source] = []
        self._capacity: int | None = None  # the event limit before this session set its own
        self._frozen = False
        self._pending: dict[str, ProfiledTest] = {}
        self._sent: dict[str, ProfiledTest] = {}  # parsed report data, this process's tests
        self._judged: dict[str, Judgement] = {}
        self.results: list[ProfiledTest] = []
        self.gate = BaselineSession(options.gate)
        self.is_worker = hasattr(config, "workerinput")  # a pytest-xdist worker
        self.not_measured: set[str] = set()  # "what: why" lines from the profiles
        self.own_profile: list[str] = []  # tests that ran their own profile (not profiled)
        self._stepped_aside: set[str] = set()  # ... whose call report is not made yet

    # -- session lifecycle -------------------------------------------------

    def _acquire(self) -> None:
        """Install the sources' hooks once, at the first profiled test.

        Lazily rather than at session start, so a pytest-xdist controller, which
        runs no tests, never installs anything.
        """
        if self._acquired:
            return
        if self._capacity is None:
            self._capacity = _native.capacity()
            _native.set_capacity(self.options.max_events)
        for source in [*self.sources, *self._helpers]:
            source.acquire()
            self._acquired.append(source)
        speed_probe.warm_up()
        if self._helpers and not self._frozen:
            # Memory figures run gc.collect() after every test; freezing what exists
            # now (collected items, imported modules) keeps that scan to the objects
            # tests create, instead of tens of milliseconds per test in a big session.
            gc.freeze()
            self._frozen = True

    def close(self) -> None:
        """Remove every hook this manager installed (called from ``pytest_unconfigure``)."""
        first_error: BaseException | None = None
        while self._acquired:
            source = self._acquired.pop()
            try:
                source.release()
            except BaseException as exc:  # release the others before reporting it
                first_error = first_error or exc
        if self._frozen:
            gc.unfreeze()
            self._frozen = False
        if self._capacity is not None:
            _native.set_capacity(self._capacity)
            self._capacity = None
        if first_error is not None:
            raise first_error

    def pytest_report_header(self, config: pytest.Config) -> str:
        names = ", ".join(s.name for s in self.sources) or "none"
        extra = "; python memory" if self.options.python_memory else ""
        return (
            f"opprof: capture {names}; rounds {self._rounds_line()}, "
            f"warmup {self.options.warmup}{extra}"
        )

    def _rounds_line(self) -> str:
        if self.options.rounds is not None:
            return rounds_text(self.options.rounds)
        floor_ms = self.options.gate.min_time_ns / 1e6
        return (
            f"auto ({AUTO_ROUNDS} for tests of {floor_ms:g} ms or more when recording baselines "
            f"or when the baseline has 3+ rounds, {CONFIRM_ROUNDS} more to confirm a time beyond "
            "its tolerance, else 1)"
        )

    # -- per test ------------------------------------------------------------

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_setup(self, item: pytest.Item) -> None:
        """Validate the test's marker before its fixtures run: a bad one errors that test."""
        mark = item.get_closest_marker(MARKER_NAME)
        try:
            settings = settings_for(
                mark.args if mark is not None else None,
                mark.kwargs if mark is not None else None,
                self.options,
            )
        except MarkerUsageError as exc:
            pytest.fail(str(exc), pytrace=False)
        item.stash[settings_key] = settings

    # trylast: innermost among the wrappers, so output capture and logging
    # enclose every round and their own work stays out of the measurement.
    @pytest.hookimpl(wrapper=True, trylast=True)
    def pytest_runtest_call(self, item: pytest.Item) -> Generator[None, object, object]:
        settings = item.stash[settings_key]
        self._acquire()
        rounds = _Rounds()
        try:
            for _ in range(settings.warmup):
                item.runtest()
            # The first round is pytest's own call (its outcome is the test's); the
            # others run the body again, and any failure among them fails the test.
            with self._round(rounds):
                result = yield
            for _ in range(self._more_rounds(item, settings, rounds)):
                with self._round(rounds):
                    item.runtest()
            if self._undecided(item, settings, rounds):
                for _ in range(CONFIRM_ROUNDS):
                    with self._round(rounds):
                        item.runtest()
            return result
        finally:
            if rounds.preempted:
                self._stepped_aside.add(item.nodeid)
            elif rounds.profiles:
                self._pending[item.nodeid] = self._finish(item, settings, rounds)

    def _more_rounds(self, item: pytest.Item, settings: TestSettings, rounds: _Rounds) -> int:
        """How many rounds to run after the first.

        ``auto`` repeats a test only when its times can be judged: its first round
        reached the time floor, and a baseline is being recorded or the stored one
        has enough rounds.  Without baselines, ``--opprof`` costs one round.
        """
        if rounds.preempted:
            return 0  # the test profiles itself: repeating it measures nothing
        if settings.rounds is not None:
            return settings.rounds - 1
        if rounds.profiles[0].wall_time_ns < self.options.gate.min_time_ns:
            return 0
        return AUTO_ROUNDS - 1 if self.gate.times_judged(item.nodeid, AUTO_ROUNDS) else 0

    def _undecided(self, item: pytest.Item, settings: TestSettings, rounds: _Rounds) -> bool:
        """Whether ``auto`` confirms: its ``AUTO_ROUNDS`` rounds put a time beyond its
        tolerance against the stored baseline (``verdict.time_undecided``).

        Judging all the rounds then buys what ``AUTO_ROUNDS + CONFIRM_ROUNDS`` rounds for
        every test buy, at the cost of the few tests that look slower.
        """
        if settings.rounds is not None or rounds.preempted or len(rounds.profiles) < AUTO_ROUNDS:
            return False
        summary = summarize_rounds(self._figures(settings, rounds))
        return self.gate.undecided(item.nodeid, summary, _overrides(settings))

    @contextlib.contextmanager
    def _round(self, rounds: _Rounds) -> Iterator[None]:
        prof = profile(
            record_shapes=True,
            profile_memory=True,
            with_flops=True,
            capture=list(self.options.capture) if self.options.capture is not None else None,
            python_memory=self.options.python_memory,
            cuda_sample_rate=self.options.cuda_sample_rate,
        )
        # The machine-speed references bracket the round, outside the profile.
        py_before_ns, native_before_ns = speed_probe.references_ns()
        prof.yields = True  # a profile the test starts itself stops this one
        prof.start()
        # CPU time of the body only, like the wall time: the first start installs
        # hooks and calibrates, and every stop drains and collects garbage.
        cpu_start_ns = time.process_time_ns()
        try:
            yield
        finally:
            cpu_ns = time.process_time_ns() - cpu_start_ns
            prof.stop()
            if prof.preempted:
                rounds.preempted = True
            else:
                py_after_ns, native_after_ns = speed_probe.references_ns()
                self.not_measured.update(prof.not_measured)
                rounds.cpu_times_ns.append(cpu_ns)
                rounds.speed_refs_ns.append((py_before_ns + py_after_ns) // 2)
                rounds.native_refs_ns.append((native_before_ns + native_after_ns) // 2)
                rounds.profiles.append(prof)

    def _figures(self, settings: TestSettings, rounds: _Rounds) -> list[RoundFigures]:
        """Each measured round's figures (its ``key_averages`` kept for the table), made
        once per round."""
        for i in range(len(rounds.figures), len(rounds.profiles)):
            prof = rounds.profiles[i]
            rows = prof.key_averages(group_by_input_shape=settings.group_by_input_shape)
            rounds.averages.append(rows)
            rounds.figures.append(
                RoundFigures.from_events(
                    rows,
                    wall_time_ns=prof.wall_time_ns,
                    cpu_time_ns=rounds.cpu_times_ns[i],
                    memory=prof.memory,
                    by_input_shape=settings.group_by_input_shape,
                    device_memory_bytes=(
                        prof.device_memory.peak_bytes if prof.device_memory is not None else None
                    ),
                    speed_ref_ns=rounds.speed_refs_ns[i],
                    native_ref_ns=rounds.native_refs_ns[i],
                    dropped_events=prof.dropped_events,
                )
            )
        return rounds.figures

    def _finish(self, item: pytest.Item, settings: TestSettings, rounds: _Rounds) -> ProfiledTest:
        figures = self._figures(settings, rounds)
        # The printed table and the trace show one actual round: the median by wall time.
        walls = [f.wall_time_ns for f in figures]
        shown = walls.index(statistics.median_low(walls))
        table = None
        if settings.marked or self.config.get_verbosity() >= 2:
            table = rounds.averages[shown].table(
                sort_by=settings.sort_by,
                row_limit=settings.row_limit,
                time_unit=settings.time_unit,
                top_level_events_only=settings.top_level_events_only,
            )
            item.add_report_section("call", "opprof", table)
        trace_path = None
        if self.options.trace_dir is not None:
            path = trace_file(self.options.trace_dir, item.nodeid)
            path.parent.mkdir(parents=True, exist_ok=True)
            if path.is_symlink():  # a planted link must not redirect the write outside
                path.unlink()
            rounds.profiles[shown].export_chrome_trace(str(path))
            trace_path = str(path)
        return ProfiledTest(
            nodeid=item.nodeid,
            marked=settings.marked,
            summary=summarize_rounds(figures),
            table=table,
            trace_path=trace_path,
            tolerances=_overrides(settings),
        )

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(
        self, item: pytest.Item, call: pytest.CallInfo[None]
    ) -> Generator[None, pytest.TestReport, pytest.TestReport]:
        report = yield
        if call.when != "call":
            return report
        if item.nodeid in self._stepped_aside:
            self._stepped_aside.discard(item.nodeid)
            setattr(report, STEPPED_ASIDE_ATTRIBUTE, True)
        result = self._pending.pop(item.nodeid, None)
        if result is None:
            return report
        verdict = "not judged"
        result.judged = report.passed and not hasattr(report, "wasxfail")
        data = result.to_json()
        # The figures as they travel (times rounded like a baseline's): judged here, so
        # a pytest-xdist controller judging them again reaches the same verdict, and
        # kept for pytest_runtest_logreport, which need not parse them again.
        sent = ProfiledTest.from_json(item.nodeid, data)
        if not self.is_worker:
            self._sent[item.nodeid] = sent
        if result.judged:
            judgement = self.gate.judge(item.nodeid, sent.summary, sent.tolerances)
            verdict = judgement.label
            if judgement.fails:
                report.outcome = "failed"
                report.longrepr = failure_text(judgement, row_limit=self.options.row_limit)
            if not self.is_worker:
                self._judged[item.nodeid] = judgement
        setattr(report, REPORT_ATTRIBUTE, data)
        item.user_properties.extend(junit_properties(result.summary, verdict))
        return report

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if self.is_worker:
            return  # a pytest-xdist worker: its controller collects from the report
        if report.when == "teardown":
            self.gate.teardown_done(report.nodeid, report.passed)
        if getattr(report, STEPPED_ASIDE_ATTRIBUTE, False):
            self.own_profile.append(report.nodeid)
        data = getattr(report, REPORT_ATTRIBUTE, None)
        if report.when != "call" or data is None:
            return
        sent = self._sent.pop(report.nodeid, None)
        result = sent if sent is not None else ProfiledTest.from_json(report.nodeid, data)
        self.results.append(result)
        # The parsed copy above is the one kept; reports live for the whole session.
        delattr(report, REPORT_ATTRIBUTE)
        if not result.judged:
            return
        if report.nodeid not in self._judged:  # judged on a pytest-xdist worker
            self.gate.judge(report.nodeid, result.summary, result.tolerances)
        self._judged.pop(report.nodeid, None)
        if report.passed:
            self.gate.call_passed(report.nodeid, result.summary)

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        if self.is_worker:
            return  # only the controller writes baselines and reports
        ok = self.gate.finish()
        markdown = self.options.gate.markdown_path
        if markdown is not None:
            try:
                write_markdown(markdown, self.gate.results, machine=self.gate.machine)
            except BaselineError as exc:
                self.gate.report_failed(exc)
                ok = False
        if not ok and session.exitstatus == pytest.ExitCode.OK:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED

    # -- terminal ------------------------------------------------------------

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        tr = terminalreporter
        tr.write_sep("=", "opprof")
        if self.not_measured:
            tr.write_line("opprof: not measured: " + "; ".join(sorted(self.not_measured)))
        if self.own_profile:
            tr.write_line(
                f"opprof: not profiled: {len(self.own_profile)} test(s) started their own "
                f"opprof profile (e.g. {self.own_profile[0]}); the plugin stepped aside for them"
            )
        if not self.results:
            tr.write_line("no test was profiled")
            return
        partial = [r for r in self.results if r.summary.dropped_events]
        if partial:
            worst = max(partial, key=lambda r: r.summary.dropped_events)
            tr.write_line(
                f"opprof: PARTIAL: {len(partial)} test(s) recorded more events in a round than "
                f"--opprof-max-events ({self.options.max_events}) keeps, e.g. "
                f"{worst.nodeid} ({worst.summary.dropped_events:,} dropped): their op figures "
                "cover part of the test and are not judged (wall time and memory are)"
            )
        for line in summary_lines(self.results):
            tr.write_line(line)
        for result in self.results:
            if result.table is not None:
                tr.write_sep("-", f"opprof: {result.nodeid}")
                tr.write_line(result.table.rstrip("\n"))
                if result.trace_path is not None:
                    tr.write_line(f"trace: {result.trace_path}")
        tr.write_sep("-", "opprof: baselines")
        for line in session_lines(self.gate, row_limit=self.options.row_limit):
            tr.write_line(line)


def junit_properties(summary: TestSummary, verdict: str) -> list[tuple[str, object]]:
    """The main figures as ``record_property`` pairs (JUnit XML ``<property>``): us, bytes."""
    props: list[tuple[str, object]] = [
        ("opprof_wall_time_us", round(summary.wall_time.median_ns / 1000, 3)),
        ("opprof_cpu_time_us", round(summary.cpu_time.median_ns / 1000, 3)),
        ("opprof_op_count", summary.op_count),
        ("opprof_flops", summary.flops),
    ]
    if summary.memory is not None:
        props.append(("opprof_peak_bytes", summary.memory.peak_bytes))
    props.append(("opprof_verdict", verdict))
    return props


def summary_lines(results: list[ProfiledTest]) -> list[str]:
    """A header and one line per test: self CPU time in captured ops, op count, top op."""
    rows = []
    for r in results:
        ops = [op for key, op in r.summary.ops.items() if key != MEMORY_EVENT_NAME]
        self_us = sum(op.self_cpu_time.median_ns for op in ops) / 1000
        top = max(ops, key=lambda op: op.self_cpu_time.median_ns, default=None)
        top_text = f"{top.key} {format_time(top.self_cpu_time.median_ns / 1000)}" if top else "-"
        rows.append((format_time(self_us), str(r.summary.op_count), top_text, r.nodeid))
    top_width = min(max(len(row[2]) for row in rows), 48)
    header = f"{'self CPU':>11} {'ops':>6}  {'top op':<{top_width}}  test"
    return [header] + [
        f"{cpu:>11} {count:>6}  {top:<{top_width}}  {nodeid}" for cpu, count, top, nodeid in rows
    ]


_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]+")


def trace_file(trace_dir: Path, nodeid: str) -> Path:
    """Where the Chrome trace of ``nodeid`` goes: a flat, safe name inside ``trace_dir``.

    Separators (``/``, ``::``), brackets and dot runs become ``_`` so no nodeid
    can climb out of the directory; a short hash of the nodeid keeps two ids that
    sanitise alike apart.
    """
    stem = _UNSAFE.sub("_", nodeid)
    stem = re.sub(r"\.{2,}", "_", stem).strip("._-")[:120] or "test"
    digest = hashlib.sha1(nodeid.encode("utf-8")).hexdigest()[:10]
    return trace_dir / f"{stem}-{digest}.trace.json"
