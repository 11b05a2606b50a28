"""The side that runs tests: profile the call phase of each test and judge it there.

Registered wherever tests may run (a single process, every pytest-xdist worker;
on an xdist controller it stays idle, since sources are acquired at the first
profiled test).  How many rounds run is ``rounds.py``'s policy, what one round
measures is ``measure.py``'s; the sources it holds are ``sources_held.py``'s, the
threads it leaves out ``muted_threads.py``'s, and a test's trace, flame and JUnit
properties ``outputs.py``'s.  Per test it keeps the measured rounds, each reduced to
its figures before the next records, until the call phase's report, then only a
:class:`~pytest_opprof.plugin.payload.ProfiledTest` (per-op figures over the rounds
and, for marked tests, the rendered op table): never the events, so memory stays flat
over thousands of tests.  The last round is summarised as the call's report is made,
outside the call's duration and with pytest-timeout's timer held (``timeout_window.py``):
the plugin's own work is never charged to the test.

The verdict is reached here, in the call phase's ``pytest_runtest_makereport``, so
a regression fails *that* test's report, wherever it ran (``gate/session.py`` says
which process judges and which writes).  The payload then goes to the collecting
side: in memory in a single process, on the report through pytest-xdist.
"""

from __future__ import annotations

import contextlib
import gc
import threading
from collections.abc import Callable, Generator, Iterator
from typing import Literal

import pytest

from pytest_opprof.capture import recorder, threadpools
from pytest_opprof.capture.contention import ContentionProbe
from pytest_opprof.capture.plan import Plan
from pytest_opprof.capture.sources import torch_source
from pytest_opprof.errors import MarkerUsageError
from pytest_opprof.gate.results import wants_flame
from pytest_opprof.gate.session import BaselineSession
from pytest_opprof.gate.waiting import WORK_WAIT_LIMIT
from pytest_opprof.plugin import rounds as policy
from pytest_opprof.plugin.layout import Layout
from pytest_opprof.plugin.marker import MARKER_NAME, TestSettings, settings_for
from pytest_opprof.plugin.measure import Rounds
from pytest_opprof.plugin.muted_threads import MutedThreads
from pytest_opprof.plugin.options import OpprofOptions
from pytest_opprof.plugin.outputs import flame, junit_properties, trace_writer
from pytest_opprof.plugin.payload import (
    LEFT_BEHIND_ATTRIBUTE,
    STEPPED_ASIDE_ATTRIBUTE,
    WORKER_NOTES,
    ProfiledTest,
    attach,
)
from pytest_opprof.plugin.round_noise import RoundNoise
from pytest_opprof.plugin.sources_held import HeldSources
from pytest_opprof.plugin.table_note import table_footer
from pytest_opprof.plugin.timeout_window import held_timer
from pytest_opprof.render.report import failure_text

settings_key = pytest.StashKey[TestSettings]()
rounds_key = pytest.StashKey[Rounds]()
"""The test's rounds, from the end of its call phase until its call report is made."""
finished_key = pytest.StashKey[ProfiledTest]()
"""The test's figures, from the end of its call phase until its call report is made."""
stepped_aside_key = pytest.StashKey[bool]()
pending_trace_key = pytest.StashKey[Callable[[], str | None]]()
"""Writes the test's trace and returns its path: with ``--opprof-trace-which regressed``,
called once the verdict says the test regressed (and dropped either way)."""
scopes_left_key = pytest.StashKey[int]()
threads_before_key = pytest.StashKey[frozenset[threading.Thread]]()
window_key = pytest.StashKey[Callable[[], contextlib.AbstractContextManager[None]] | None]()
"""Set while a round runs a test function: the window :meth:`pytest_pyfunc_call` opens."""


RoundReason = Literal["more", "clean", "confirm", "exact"]
"""Why :meth:`Worker.further_rounds` asks for another round."""


def _overrides(settings: TestSettings) -> dict[str, float]:
    """The marker's tolerance overrides (``time``, ``memory``, ``flops``) and budgets
    (``budgets.BUDGET_KEYS``) that are set."""
    overrides = {
        "time": settings.time_tolerance,
        "memory": settings.memory_tolerance,
        "flops": settings.flops_tolerance,
        "max_memory": settings.max_memory,
        "max_leaked": settings.max_leaked,
        "max_flops": settings.max_flops,
        "max_time": settings.max_time,
    }
    return {k: float(v) for k, v in overrides.items() if v is not None}


class Worker:
    """Holds the session's capture sources (:class:`HeldSources`) and runs each test's rounds.

    ``deliver``: the collecting side in this process (None on a pytest-xdist worker,
    whose payloads ride on the reports).  ``not_measured`` collects the profiles'
    "what: why" lines; a single process shares the set with its collecting side.
    """

    collector_paused = False
    """Whether the cyclic garbage collector is paused inside each measured round, as
    ``timeit`` pauses it (A/B runs, both sides): a collection that lands inside one round
    of a test of a few ms adds as much again to that round alone, and a pair's two rounds
    need the same work to compare.  Garbage a round leaves is collected between rounds.
    The committed gate keeps it running, so its memory figures stay those of the
    baselines it recorded (docs/ab.md, "Pairs without the collector")."""

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
        self.deliver = deliver
        self.not_measured = not_measured if not_measured is not None else set()
        self.sources = HeldSources(options, chosen)
        self._probe = ContentionProbe()
        self.threads = MutedThreads()
        self.layout: Layout | None = None
        """Shuffles the heap before each round (A/B runs: ``ab/layout.py``)."""
        """The threads tests left running, left out of the figures."""
        self.noise = RoundNoise()
        """How far rounds of the same test scatter in this run (``round_noise.py``)."""

    # -- session lifecycle -------------------------------------------------

    def close(self) -> None:
        """Remove every hook this worker installed (called from ``pytest_unconfigure``)."""
        try:
            self.sources.release(self._note)
        finally:
            # The torch source is held by the profiles themselves when torch was imported
            # after the plan was made (by the test modules): its note is read here.  A
            # pytest-xdist worker's terminal goes nowhere: it sent the note at session finish.
            if torch_source.SOURCE.note and not hasattr(self.config, "workeroutput"):
                self._note(torch_source.SOURCE.note)
            self._probe.close()

    def pytest_sessionfinish(self) -> None:
        """A pytest-xdist worker hands its session notes to the controller, which prints
        them (xdist sends ``workeroutput`` once this hook has run)."""
        output = getattr(self.config, "workeroutput", None)
        if output is not None and torch_source.SOURCE.note:
            output[WORKER_NOTES] = [torch_source.SOURCE.note]

    def _note(self, line: str) -> None:
        """One line after the summary (the session is over: no section to put it in)."""
        reporter = self.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            reporter.write_line(line)

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
        self.sources.acquire()
        item.stash[threads_before_key] = self.threads.at_call_start()
        rounds = Rounds(
            references=policy.needs_references(
                settings.rounds, lambda n: self.gate.times_judged(item.nodeid, n)
            ),
            keep_events=self._shows_events(settings),
        )
        # The pools keep their pinned size from the warmup (which warms them at that size)
        # to the last round, and get their own back however the test ends.
        pin = threadpools.pinned(self.options.blas_threads)
        pin.__enter__()
        try:
            for _ in range(settings.warmup):
                item.runtest()
            # The first round is pytest's own call (its outcome is the test's); the
            # others run the body again, and any failure among them fails the test.
            with self._round(item, rounds):
                result = yield
            for _ in self.further_rounds(item, settings, rounds):
                self.run_round(item, rounds)
            return result
        finally:
            pin.__exit__(None, None, None)
            # Summarised as the call's report is made (pytest_runtest_makereport).
            item.stash[rounds_key] = rounds

    def _shows_events(self, settings: TestSettings) -> bool:
        """Whether a test's shown round keeps its events: for its table, trace or flame."""
        return (
            settings.marked
            or self.config.get_verbosity() >= 2
            or self.options.trace_dir is not None
            or self.gate.wants_flames
        )

    def end_call(self, item: pytest.Item, settings: TestSettings, rounds: Rounds) -> bool:
        """Keep what the call's rounds leave for the reports (scopes left open, a test that
        profiled itself, the figures); whether figures were kept."""
        if rounds.scopes_left_open:
            item.stash[scopes_left_key] = rounds.scopes_left_open
        if rounds.preempted:
            item.stash[stepped_aside_key] = True
            return False
        if not rounds.measured:
            return False
        item.stash[finished_key] = self._finish(item, settings, rounds)
        return True

    def further_rounds(
        self, item: pytest.Item, settings: TestSettings, rounds: Rounds
    ) -> Iterator[RoundReason]:
        """The rounds after the first, as ``rounds.py``'s policy decides from the rounds
        measured so far: one item per round to run, naming why, each decided once the
        caller ran the one before.  ``more``: the ``rounds`` setting's count, or ``auto``'s
        for a test whose times can be judged, fewer where a gate's verdict is settled
        first (``rounds.settled``); ``clean``: in place of a round that waited
        for a CPU; ``confirm``: a time beyond its tolerance, judged on all the rounds;
        ``exact``: ``auto``'s, after one round, for a FLOPs, op count or memory figure
        beyond tolerance, judged where the second round agrees (``rounds.confirms_exact``)."""
        nodeid = item.nodeid
        # A first round over the test's time budget is repeated whatever the floor: one
        # round never fails a budget (budgets.judge_time).
        limit = self.gate.budgets_for(_overrides(settings)).max_time
        over = limit is not None and rounds.first_work_ns() > limit
        more = policy.more_rounds(
            settings.rounds,
            rounds.first_work_ns(),
            0 if over else self.options.gate.min_time_ns,
            lambda n: over or self.gate.times_judged(nodeid, n),
            preempted=rounds.preempted,
        )
        for _ in range(more):
            yield "more"
            if policy.settled(
                settings.rounds,
                rounds.measured,
                self.gate.tolerances.time_min_rounds,
                lambda: self.noise.settled(
                    self.gate.settling(nodeid, rounds.summary(settings), _overrides(settings))
                ),
                preempted=rounds.preempted,
            ):
                return
        replaced = 0
        while policy.another_clean_round(
            settings.rounds,
            rounds.measured,
            rounds.clean(self.options.gate.max_wait_share),
            replaced,
            preempted=rounds.preempted,
            workable=rounds.clean(WORK_WAIT_LIMIT),
        ):
            yield "clean"
            replaced += 1
        if policy.needs_confirmation(
            settings.rounds,
            rounds.measured,
            lambda: self.gate.undecided(nodeid, rounds.summary(settings), _overrides(settings)),
            preempted=rounds.preempted,
        ):
            for _ in range(policy.CONFIRM_ROUNDS):
                yield "confirm"
        if policy.confirms_exact(
            settings.rounds,
            rounds.measured,
            lambda: self._exact_moved(item, settings, rounds),
            preempted=rounds.preempted,
        ):
            yield "exact"

    def _exact_moved(self, item: pytest.Item, settings: TestSettings, rounds: Rounds) -> bool:
        """Whether the verdict on the rounds so far judges a FLOPs, op count or memory
        figure beyond tolerance.  A test with a baseline has its round summarised here,
        inside the call phase, not as its report is made: pytest-timeout's timer is held
        as it is there."""
        with held_timer(item):
            return self.gate.exact_moved(
                item.nodeid, lambda: rounds.summary(settings), _overrides(settings)
            )

    def run_round(self, item: pytest.Item, rounds: Rounds) -> None:
        """One more measured round: ``item``'s body run again (a failure fails the test)."""
        with self._round(item, rounds):
            if self.layout is None:
                item.runtest()
            else:
                self.layout.call(item.runtest)

    @contextlib.contextmanager
    def _round(self, item: pytest.Item, rounds: Rounds) -> Iterator[None]:
        """One round of ``item``'s body run inside.

        A test function's round is measured around the function's own call
        (:meth:`pytest_pyfunc_call`), not around pytest's whole call phase: in the first
        round that phase also runs other plugins' hooks (pytest-randomly reseeds numpy's
        generator there, which made its ``seed`` an op of every test) and pytest's own
        bookkeeping, 20-60 us that later rounds, which call ``item.runtest()``, skip.
        Other items (unittest cases, doctests, plugins' own) run no such hook: their
        round is the call phase.
        """

        def window() -> contextlib.AbstractContextManager[None]:
            measure = rounds.measure(self.options, self.not_measured, self._probe)
            if self.collector_paused:
                measure = _collector_paused(measure)
            return measure if self.layout is None else _shuffled(self.layout, measure)

        # The round before is reduced to its figures first: its events go (or become
        # the round shown) before this one records.
        rounds.summarised(item.stash[settings_key])

        if type(item).runtest is not pytest.Function.runtest:
            with window():
                yield
            return
        item.stash[window_key] = window
        try:
            yield
        finally:
            item.stash[window_key] = None

    @pytest.hookimpl(wrapper=True, trylast=True)
    def pytest_pyfunc_call(self, pyfuncitem: pytest.Function) -> Generator[None, object, object]:
        """The round's window around the test function (see :meth:`_round`); innermost, so
        a plugin that runs the function itself (async tests) is inside it."""
        window = pyfuncitem.stash.get(window_key, None)
        if window is None:
            return (yield)
        pyfuncitem.stash[window_key] = None  # one window per round
        with window():
            return (yield)

    def _left_behind(self, item: pytest.Item) -> str | None:
        """What the test left that would skew or break the tests after it (after its
        teardown, so its own fixtures could still clean up), reset here: a profile still
        recording is stopped, scopes left open were closed after each round, and threads
        its call started that still run are left out of later tests' figures.  None when
        it left nothing."""
        left = []
        scopes = item.stash.get(scopes_left_key, 0)
        if scopes:
            del item.stash[scopes_left_key]
            left.append(f"{scopes} record_function scope(s) open")
        if recorder.stop_abandoned():
            left.append("a profile recording")
        before = item.stash.get(threads_before_key, None)
        if before is not None:
            del item.stash[threads_before_key]
            new = self.threads.left_running(before)
            if new:
                names = ", ".join(sorted(new.values())[:3])
                left.append(
                    f"{len(new)} thread(s) still running ({names}), whose ops are left out "
                    "of later tests' figures"
                )
        return " and ".join(left) or None

    def _finish(self, item: pytest.Item, settings: TestSettings, rounds: Rounds) -> ProfiledTest:
        summary = rounds.summary(settings)
        table = None
        if settings.marked or self.config.get_verbosity() >= 2:
            table = rounds.shown_rows(settings).table(
                sort_by=settings.sort_by,
                row_limit=settings.row_limit,
                time_unit=settings.time_unit,
                top_level_events_only=settings.top_level_events_only,
            )
            table += table_footer(rounds, by_input_shape=settings.group_by_input_shape)
            item.add_report_section("call", "opprof", table)
        trace_path = None
        if self.options.trace_dir is not None:
            write_trace = trace_writer(
                self.options.trace_dir, item.nodeid, rounds.shown_profile(), self.not_measured
            )
            if self.options.trace_which == "all":
                trace_path = write_trace()
            else:  # the verdict, reached in makereport, decides
                item.stash[pending_trace_key] = write_trace
        if settings.rounds is None and not self.options.gate.update:
            # Only where a later test's rounds may stop early (rounds.settled): the pool's
            # statistics call numpy, which a run that stops nothing need not do.
            self.noise.add(summary, self.options.gate.min_time_ns)
        return ProfiledTest(
            nodeid=item.nodeid,
            marked=settings.marked,
            summary=summary,
            table=table,
            trace_path=trace_path,
            tolerances=_overrides(settings),
            shown_round=rounds.shown_profile() if self.gate.wants_flames else None,
        )

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(
        self, item: pytest.Item, call: pytest.CallInfo[None]
    ) -> Generator[None, pytest.TestReport, pytest.TestReport]:
        rounds = item.stash.get(rounds_key, None) if call.when == "call" else None
        if rounds is not None:
            del item.stash[rounds_key]
            # Before pytest's report is made, which takes the table's section.
            with held_timer(item):
                self.end_call(item, item.stash[settings_key], rounds)
        report = yield
        if call.when == "teardown":
            left = self._left_behind(item)
            if left is not None:
                setattr(report, LEFT_BEHIND_ATTRIBUTE, left)
            return report
        if call.when != "call":
            return report
        if item.stash.get(stepped_aside_key, False):
            del item.stash[stepped_aside_key]
            setattr(report, STEPPED_ASIDE_ATTRIBUTE, True)
        write_trace = item.stash.get(pending_trace_key, None)
        if write_trace is not None:
            del item.stash[pending_trace_key]  # the profile it holds goes with it
        result = item.stash.get(finished_key, None)
        if result is None:
            return report
        del item.stash[finished_key]
        verdict = "not judged"
        busy: str | None = None
        work = False
        judgement_basis: str | None = None
        # An xpassed test (non-strict xfail that passed) ran its body to the end like a
        # passed one: judged and baselined the same, or a flaky test would never be gated.
        result.judged = report.passed
        data: dict[str, object] | None = None
        if self.deliver is None:  # a pytest-xdist worker: the figures travel as JSON
            data, sent = result.as_sent()
        elif result.judged and self.gate.compares(item.nodeid):
            sent = result.as_stored()
        else:
            # Never compared: no rounding to judge as stored figures are (the terminal
            # summary's line shows the figures at its own precision).
            sent = result
        if result.judged:
            judgement = self.gate.judge(item.nodeid, sent.summary, sent.tolerances)
            verdict = judgement.label
            if judgement.result is not None:
                busy = judgement.result.verdict.time_not_judged
                work = judgement.result.verdict.work_time
                judgement_basis = judgement.result.verdict.basis
            if judgement.fails:
                report.outcome = "failed"
                # A failed report that keeps wasxfail reads as "xpassed"/skipped in JUnit XML.
                if hasattr(report, "wasxfail"):
                    del report.wasxfail
                report.longrepr = failure_text(judgement, row_limit=self.options.row_limit)
            sent.judgement = judgement
            if write_trace is not None and verdict == "regressed":
                result.trace_path = sent.trace_path = write_trace()
                if data is not None:
                    data["trace_path"] = sent.trace_path
            if result.shown_round is not None and wants_flame(verdict, result.marked):
                sent.flame = flame(result.shown_round)
                if data is not None:
                    data["flame"] = sent.flame
        result.shown_round = None  # the events go now, whatever the verdict
        if self.deliver is not None:
            self.deliver(sent)
        else:
            reached = getattr(sent.judgement, "result", None)
            shipment = (
                self.gate.shipment(item.nodeid, reached.verdict)
                if data is not None and self.gate is not None and reached is not None
                else None
            )
            if data is not None and shipment is not None:
                # An A/B verdict depends on this worker's base side and run: it travels
                # as reached, where a baseline verdict is reached again from the figures.
                data["ab_verdict"] = shipment
            if data is not None:
                attach(report, data)
        judged = sent.judgement.result if sent.judgement is not None else None
        item.user_properties.extend(junit_properties(result.summary, verdict, busy, work, judged))
        if judgement_basis not in (None, "baseline"):
            item.user_properties.append(("opprof_time_basis", judgement_basis))
        return report


@contextlib.contextmanager
def _collector_paused(measure: contextlib.AbstractContextManager[None]) -> Iterator[None]:
    """``measure`` with the cyclic garbage collector paused, restarted on every way out
    (unless the test had paused it itself)."""
    running = gc.isenabled()
    gc.disable()
    try:
        with measure:
            yield
    finally:
        if running:
            gc.enable()


@contextlib.contextmanager
def _shuffled(layout: Layout, measure: contextlib.AbstractContextManager[None]) -> Iterator[None]:
    with layout.round(), measure:
        yield
