"""The side that runs tests: profile the call phase of each test and judge it there.

Registered wherever tests may run (a single process, every pytest-xdist worker;
on an xdist controller it stays idle, since sources are acquired at the first
profiled test).  How many rounds run is ``rounds.py``'s policy, what one round
measures is ``measure.py``'s.  Per test it keeps the measured rounds until the
call phase ends, then only a :class:`~pytest_opprof.plugin.payload.ProfiledTest` (per-op
figures over the rounds and, for marked tests, the rendered op table): never the
events, so memory stays flat over thousands of tests.

The verdict is reached here, in the call phase's ``pytest_runtest_makereport``, so
a regression fails *that* test's report, wherever it ran (``gate/session.py`` says
which process judges and which writes).  The payload then goes to the collecting
side: in memory in a single process, on the report through pytest-xdist.
"""

from __future__ import annotations

import gc
import hashlib
import re
from collections.abc import Callable, Generator
from pathlib import Path

import pytest

from pytest_opprof import _native
from pytest_opprof.capture import speed_probe, threadpools
from pytest_opprof.capture.contention import ContentionProbe
from pytest_opprof.capture.plan import Plan
from pytest_opprof.capture.sources import Source
from pytest_opprof.errors import MarkerUsageError
from pytest_opprof.gate.session import BaselineSession
from pytest_opprof.gate.summary import TestSummary, summarize_rounds
from pytest_opprof.gate.waiting import WORK_WAIT_LIMIT
from pytest_opprof.plugin import rounds as policy
from pytest_opprof.plugin.marker import MARKER_NAME, TestSettings, settings_for
from pytest_opprof.plugin.measure import Rounds
from pytest_opprof.plugin.options import OpprofOptions
from pytest_opprof.plugin.payload import REPORT_ATTRIBUTE, STEPPED_ASIDE_ATTRIBUTE, ProfiledTest
from pytest_opprof.render.report import failure_text

settings_key = pytest.StashKey[TestSettings]()
finished_key = pytest.StashKey[ProfiledTest]()
"""The test's figures, from the end of its call phase until its call report is made."""
stepped_aside_key = pytest.StashKey[bool]()


def _overrides(settings: TestSettings) -> dict[str, float]:
    """The marker's tolerance overrides (``time``, ``memory``, ``flops``) that are set."""
    overrides = {
        "time": settings.time_tolerance,
        "memory": settings.memory_tolerance,
        "flops": settings.flops_tolerance,
    }
    return {k: v for k, v in overrides.items() if v is not None}


class Worker:
    """Holds the session's capture sources and runs each test's rounds.

    ``deliver``: the collecting side in this process (None on a pytest-xdist worker,
    whose payloads ride on the reports).  ``not_measured`` collects the profiles'
    "what: why" lines; a single process shares the set with its collecting side.
    """

    def __init__(
        self,
        config: pytest.Config,
        options: OpprofOptions,
        gate: BaselineSession,
        chosen: Plan,
        deliver: Callable[[ProfiledTest], None] | None = None,
        not_measured: set[str] | None = None,
    ) -> None:
        self.config = config
        self.options = options
        self.gate = gate
        self.plan = chosen
        self.deliver = deliver
        self.not_measured = not_measured if not_measured is not None else set()
        self._acquired: list[Source] = []
        self._capacity: int | None = None  # the event limit before this session set its own
        self._frozen = False
        self._probe = ContentionProbe()

    # -- session lifecycle -------------------------------------------------

    def _acquire(self) -> None:
        """Install the sources' hooks once, at the first profiled test, and hold them
        for the session, so each round's profile only counts a reference.

        Lazily rather than at session start, so a pytest-xdist controller, which
        runs no tests, never installs anything.
        """
        if self._acquired:
            return
        if self._capacity is None:
            self._capacity = _native.capacity()
            _native.set_capacity(self.options.max_events)
        for source in self.plan.sources:
            source.acquire()
            self._acquired.append(source)
        speed_probe.warm_up()
        if self.plan.helpers and not self._frozen:
            # Memory figures run gc.collect() after every test; freezing what exists
            # now (collected items, imported modules) keeps that scan to the objects
            # tests create, instead of tens of milliseconds per test in a big session.
            gc.freeze()
            self._frozen = True

    def close(self) -> None:
        """Remove every hook this worker installed (called from ``pytest_unconfigure``)."""
        first_error: BaseException | None = None
        while self._acquired:
            source = self._acquired.pop()
            try:
                source.release()
            except BaseException as exc:  # release the others before reporting it
                first_error = first_error or exc
        self._probe.close()
        if self._frozen:
            gc.unfreeze()
            self._frozen = False
        if self._capacity is not None:
            _native.set_capacity(self._capacity)
            self._capacity = None
        if first_error is not None:
            raise first_error

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
        rounds = Rounds()
        # The pools keep their pinned size from the warmup (which warms them at that size)
        # to the last round, and get their own back however the test ends.
        pin = threadpools.pinned(self.options.blas_threads)
        pin.__enter__()
        try:
            for _ in range(settings.warmup):
                item.runtest()
            # The first round is pytest's own call (its outcome is the test's); the
            # others run the body again, and any failure among them fails the test.
            with rounds.measure(self.options, self.not_measured, self._probe):
                result = yield
            more = policy.more_rounds(
                settings.rounds,
                rounds.profiles[0].wall_time_ns if rounds.profiles else 0,
                self.options.gate.min_time_ns,
                lambda n: self.gate.times_judged(item.nodeid, n),
                preempted=rounds.preempted,
            )
            for _ in range(more):
                with rounds.measure(self.options, self.not_measured, self._probe):
                    item.runtest()
            replaced = 0
            while policy.another_clean_round(
                settings.rounds,
                len(rounds.profiles),
                rounds.clean(self.options.gate.max_wait_share),
                replaced,
                preempted=rounds.preempted,
                workable=rounds.clean(WORK_WAIT_LIMIT),
            ):
                with rounds.measure(self.options, self.not_measured, self._probe):
                    item.runtest()
                replaced += 1
            if policy.needs_confirmation(
                settings.rounds,
                len(rounds.profiles),
                lambda: self.gate.undecided(
                    item.nodeid,
                    summarize_rounds(rounds.summarised(settings)),
                    _overrides(settings),
                ),
                preempted=rounds.preempted,
            ):
                for _ in range(policy.CONFIRM_ROUNDS):
                    with rounds.measure(self.options, self.not_measured, self._probe):
                        item.runtest()
            return result
        finally:
            pin.__exit__(None, None, None)
            if rounds.preempted:
                item.stash[stepped_aside_key] = True
            elif rounds.profiles:
                item.stash[finished_key] = self._finish(item, settings, rounds)

    def _finish(self, item: pytest.Item, settings: TestSettings, rounds: Rounds) -> ProfiledTest:
        figures = rounds.summarised(settings)
        shown = rounds.shown()
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
        if item.stash.get(stepped_aside_key, False):
            del item.stash[stepped_aside_key]
            setattr(report, STEPPED_ASIDE_ATTRIBUTE, True)
        result = item.stash.get(finished_key, None)
        if result is None:
            return report
        del item.stash[finished_key]
        verdict = "not judged"
        busy: str | None = None
        work = False
        result.judged = report.passed and not hasattr(report, "wasxfail")
        data: dict[str, object] | None = None
        if self.deliver is None:  # a pytest-xdist worker: the figures travel as JSON
            data, sent = result.as_sent()
        else:
            sent = result.as_stored()
        if result.judged:
            judgement = self.gate.judge(item.nodeid, sent.summary, sent.tolerances)
            verdict = judgement.label
            if judgement.result is not None:
                busy = judgement.result.verdict.time_not_judged
                work = judgement.result.verdict.work_time
            if judgement.fails:
                report.outcome = "failed"
                report.longrepr = failure_text(judgement, row_limit=self.options.row_limit)
            sent.judgement = judgement
        if self.deliver is not None:
            self.deliver(sent)
        else:
            setattr(report, REPORT_ATTRIBUTE, data)
        item.user_properties.extend(junit_properties(result.summary, verdict, busy, work))
        return report


def junit_properties(
    summary: TestSummary, verdict: str, time_not_judged: str | None = None, work: bool = False
) -> list[tuple[str, object]]:
    """The main figures as ``record_property`` pairs (JUnit XML ``<property>``): us, bytes,
    the share of the rounds' wall time the test's thread waited for a CPU, why the
    time was not judged when the machine was too busy, and ``opprof_time_judged_on``
    ``work time`` when it was judged as wall time less that wait."""
    props: list[tuple[str, object]] = [
        ("opprof_wall_time_us", round(summary.wall_time.median_ns / 1000, 3)),
        ("opprof_cpu_time_us", round(summary.cpu_time.median_ns / 1000, 3)),
        ("opprof_op_count", summary.op_count),
        ("opprof_flops", summary.flops),
    ]
    if summary.memory is not None:
        props.append(("opprof_peak_bytes", summary.memory.peak_bytes))
    share = summary.wait_share()
    if share is not None:
        props.append(("opprof_wait_share", round(share, 4)))
    props.append(("opprof_verdict", verdict))
    if time_not_judged is not None:
        props.append(("opprof_time_not_judged", time_not_judged))
    if work:
        props.append(("opprof_time_judged_on", "work time"))
    return props


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
