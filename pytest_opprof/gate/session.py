"""One session's comparison with baselines: judge each test, stage, write, and what follows.

Where each step runs, so that one process writes and the right test fails:

* The verdict is reached in the process that ran the test, in the call phase's
  ``pytest_runtest_makereport``: a regression turns that passed report into a
  failed one whose ``longrepr`` is the diff.  Under pytest-xdist that is a
  worker, which only *reads* baselines; the failed report then travels to the
  controller like any other.
* The controller (or the single process) keeps the results for the terminal
  summary and the reports.  A worker's result is judged again there from the
  figures on the report: :func:`~pytest_opprof.gate.verdict.compare` is a pure
  function of the figures, the stored entry and the tolerances (sent along), so
  both sides reach the same verdict.
* Only the controller writes baselines, once, at the end of the session; a
  test is staged when its call and teardown both passed.
* A test whose file lies outside the rootdir (``--pyargs`` of an installed
  package, a path beside the rootdir) has a node id that names no file under
  the rootdir (``::test_x``, ``../x/test_y.py::test_x``): it has no baseline
  file, so it is neither judged nor staged, and the summary says so once.

Files are read once, lazily; with ``update`` the tests that passed are staged
(pooled with their stored rounds unless they changed for real, see ``pooling.py``)
and :meth:`BaselineSession.write` merges them into their module files once.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath, PureWindowsPath
from typing import TYPE_CHECKING, NamedTuple

from pytest_opprof import _native
from pytest_opprof.errors import BaselineError
from pytest_opprof.gate.budgets import Budgets, judge_budgets, judge_time
from pytest_opprof.gate.creep import Crept
from pytest_opprof.gate.machine import MachineInfo, machine_info
from pytest_opprof.gate.pooling import pool, replace_reason
from pytest_opprof.gate.results import (
    TestResult,
    build_report,
    report_text,
    stamp,
    write_json_report,
)
from pytest_opprof.gate.spool import Spool
from pytest_opprof.gate.spread import Spreads, op_spreads
from pytest_opprof.gate.store import BaselineEntry, baseline_path, load, split_nodeid, update
from pytest_opprof.gate.summary import TestSummary
from pytest_opprof.gate.tolerance import DEFAULT_MAX_SPEED_CHANGE, DEFAULT_MAX_WAIT
from pytest_opprof.gate.unjudged import TimeUnjudged
from pytest_opprof.gate.verdict import (
    TimeLimit,
    Tolerances,
    Verdict,
    compare_limits,
    judges_time,
)

if TYPE_CHECKING:
    from pytest_opprof.history.gate import HistoryGate


@dataclass(frozen=True)
class GateOptions:
    """Settings of the baseline comparison (tolerances are fractions, times ns)."""

    baseline_dir: Path
    update: bool = False
    time_tolerance: float = Tolerances.time
    memory_tolerance: float = Tolerances.memory
    flops_tolerance: float = Tolerances.flops
    count_tolerance: float | None = Tolerances.count
    min_time_ns: int = Tolerances.min_time_ns
    time_statistic: str = Tolerances.statistic
    force_time: bool = False
    raw_times: bool = False
    max_wait_share: float = DEFAULT_MAX_WAIT
    max_speed_change: float | None = DEFAULT_MAX_SPEED_CHANGE
    budgets: Budgets = dataclasses.field(default_factory=Budgets)
    """The session's absolute budgets (``--opprof-max-*``); a marker's replace them."""
    warn_only: bool = False
    require_baselines: bool = False
    report_path: Path | None = None
    report_details: bool = False
    """The JSON report with every op and each time's statistics, not the compact form."""
    markdown_path: Path | None = None
    html_path: Path | None = None
    blas_threads: int | None = None
    """The pools' size in the measured rounds where pinned (``--opprof-blas-threads``)."""
    keep_results: bool = True
    """Keep every judged test's result for the reports.  False (the plugin, when no report
    is asked for) keeps only those the terminal summary reads back: regressed, busy, judged
    on work time, or with figures that vary (spooling every result cost a judged trivial
    test 60 us)."""

    def tolerances(self) -> Tolerances:
        """The session's thresholds as the verdict takes them."""
        return Tolerances(
            time=self.time_tolerance,
            memory=self.memory_tolerance,
            flops=self.flops_tolerance,
            count=self.count_tolerance,
            min_time_ns=self.min_time_ns,
            statistic="median" if self.time_statistic == "median" else "min",
            speed_scaled=not self.raw_times,
            max_wait_share=self.max_wait_share,
            max_speed_change=self.max_speed_change,
        )


@dataclass(frozen=True)
class Judgement:
    """What the gate decided for one test: a result, or the baseline file's error."""

    result: TestResult | None
    error: str | None = None
    fails: bool = False
    """Whether the test must fail (a regression, a required baseline, an unusable file,
    a figure that crept against the history: ``result.verdict.crept``)."""

    @property
    def label(self) -> str:
        """The verdict (``pass``, ``regressed``, ..., ``error``, ``not judged``)."""
        if self.result is not None:
            return self.result.verdict.status
        return "error" if self.error is not None else "not judged"


class Judged(NamedTuple):
    """What the end of the session's lines need of a judged test, kept in memory beside
    its result in the spool (whose every read decodes the test's figures)."""

    nodeid: str
    status: str
    """The comparison with the baseline's (a creep against the history is
    :attr:`BaselineSession.crept`'s)."""
    busy: bool
    """Its time was not judged: the machine was too busy (``time_not_judged``)."""
    work_time: bool
    varying: bool
    unjudged: TimeUnjudged | None = None
    """Why its time was not judged at all (``Verdict.time_unjudged``)."""
    label: str | None = None
    """What failed it where not the comparison (``Verdict.label`` with the creep:
    ``crept``, ``over budget``); None where :attr:`status` says it."""
    unsteady: bool = False
    """A deterministic figure moved but varied between its rounds (``Verdict.unsteady``)."""

    @property
    def shown(self) -> str:
        """The status the terminal counts it under: :attr:`label`, else :attr:`status`."""
        return self.label or self.status


class BaselineSession:
    """One process's part of the comparison with baselines (see the module docstring)."""

    def __init__(
        self,
        options: GateOptions,
        *,
        machine: MachineInfo | None = None,
        unmeasured: str | None = None,
    ) -> None:
        self.options = options
        self.unmeasured = unmeasured
        """Why this process measures no test's op figures, FLOPs and op counts
        (``Plan.unmeasured``), None when it does: they are then neither judged nor
        recorded, since 0 in them is no measurement."""
        self.baseline_dir = Path(options.baseline_dir)
        self.tolerances = options.tolerances()
        self._machine = machine
        self.results: Spool[TestResult] = Spool()
        """The judged tests' results, on disk until the reports read them (see spool.py):
        every one's, or with ``keep_results`` False those :meth:`result_of` can be asked for."""
        self._read_back: list[TestResult] | None = None
        """:meth:`results_at_end`, once read."""
        self._kept_at: dict[int, int] = {}
        """Without ``keep_results``: a judged test's place in :attr:`results`, by its place
        in :attr:`judged`."""
        self.judged: list[Judged] = []
        """Per result, in the same order: its status and flags (about 100 bytes a test)."""
        self.errors: dict[str, str] = {}
        """node id -> why its baseline could not be used (the message names the file)."""
        self.outside: dict[str, None] = {}
        """Node ids of tests outside the rootdir (not judged, not staged), in order."""
        self.pooled: list[str] = []
        """Node ids whose staged entry pools their rounds with the stored ones."""
        self.replaced: dict[str, str] = {}
        """Node id -> why its staged entry replaces the stored one (``pooling.replace_reason``)."""
        self.refused: list[str] = []
        """Node ids not staged with ``update`` because of :attr:`unmeasured` (their stored
        entries stay as they are)."""
        self.written: list[Path] = []
        self.write_error: str | None = None
        self.write_failures: list[str] = []
        """Why each baseline file that could not be written was not (names the file)."""
        self._paths: dict[str, Path | BaselineError] = {}
        self._shown: dict[Path, str] = {}  # baseline file -> as a result names it
        self._files: dict[Path, Mapping[str, BaselineEntry]] = {}
        self._spreads: dict[Path, Spreads] = {}
        """Per baseline file, how this machine's sessions move each op's time (``spread.py``)."""
        self._bad_paths: dict[Path, BaselineError] = {}
        self._verdicts: dict[str, tuple[Verdict, Tolerances]] = {}
        self._passed_calls: dict[str, TestSummary] = {}
        self._staged: dict[Path, dict[str, BaselineEntry]] = {}
        self.flames: dict[str, Mapping[str, object]] = {}
        """Node id -> flame tree of its median round (``render.flame``), for the reports."""
        self.marked: set[str] = set()
        """Node ids of tests with a ``profile`` marker (the reports flag them)."""
        self._report: dict[str, object] | None = None
        self.created_at = stamp()
        """The time stamp of the session's JSON and HTML reports (the same in both)."""
        self.history: HistoryGate | None = None
        """With ``--opprof-history``: the runs a test's figures are also judged against."""
        self.crept: dict[str, tuple[str, ...]] = {}
        """Node id -> a line per figure that crept against the history."""

    @property
    def wants_flames(self) -> bool:
        """Whether a report that draws flame trees is written (JSON or HTML)."""
        return self.options.report_path is not None or self.options.html_path is not None

    @property
    def machine(self) -> MachineInfo:
        """This machine, read at first use (a session that judges nothing never reads it)."""
        if self._machine is None:
            self._machine = machine_info(self.options.blas_threads)
        return self._machine

    # -- reading -----------------------------------------------------------------

    def path_of(self, nodeid: str) -> Path:
        """The baseline file of a test (raises ``BaselineError`` for an unsafe module path).

        Once per module and session: resolving it (symlinks included) took two
        ``realpath`` walks, a third of a trivial test's cost, asked for twice per test."""
        module = split_nodeid(nodeid)[0]
        known = self._paths.get(module)
        if known is None:
            try:
                known = baseline_path(self.baseline_dir, module)
            except BaselineError as exc:
                known = exc
            self._paths[module] = known
        if isinstance(known, BaselineError):
            raise known.with_traceback(None)
        return known

    def stored(self, nodeid: str) -> BaselineEntry | None:
        """The test's stored entry, if any (raises ``BaselineError`` for an unusable file)."""
        path = self.path_of(nodeid)
        bad = self._bad_paths.get(path)
        if bad is not None:
            raise bad
        if path not in self._files:
            try:
                self._files[path] = load(path)
            except BaselineError as exc:
                self._bad_paths[path] = exc
                raise
        return self._files[path].get(split_nodeid(nodeid)[1])

    def with_overrides(self, overrides: Mapping[str, float]) -> Tolerances:
        """The session's tolerances with a marker's ``{"time": ..., ...}`` overrides applied."""
        if not overrides:
            return self.tolerances
        base = self.tolerances
        return dataclasses.replace(
            base,
            time=overrides.get("time", base.time),
            memory=overrides.get("memory", base.memory),
            flops=overrides.get("flops", base.flops),
        )

    def spreads(self, nodeid: str) -> Spreads:
        """How this machine's sessions move each op's time, over the entries of the test's
        baseline file recorded on this machine (once per file and session)."""
        path = self.path_of(nodeid)
        known = self._spreads.get(path)
        if known is None:
            here = self.machine.fingerprint
            entries = self._files.get(path, {}).values()
            known = self._spreads[path] = op_spreads(
                (e.summary for e in entries if e.machine.fingerprint == here),
                self.tolerances.statistic,
                self.tolerances.max_wait_share,
            )
        return known

    def verdict(
        self, nodeid: str, summary: TestSummary, overrides: Mapping[str, float] | None = None
    ) -> Verdict:
        """The verdict on ``summary`` against the stored entry, recorded nowhere."""
        return self._limits(nodeid, summary, overrides)[0]

    def _limits(
        self, nodeid: str, summary: TestSummary, overrides: Mapping[str, float] | None
    ) -> tuple[Verdict, tuple[TimeLimit, ...]]:
        """:meth:`verdict` and its judged times with their limits (``compare_limits``)."""
        stored = self.stored(nodeid)
        return compare_limits(
            summary,
            stored,
            fingerprint=self.machine.fingerprint,
            tolerances=self.with_overrides(overrides or {}),
            force_time=self.options.force_time,
            machine=self.machine,
            spreads=self.spreads(nodeid) if stored is not None else None,
            op_waits=_native.switches_supported(),
            unmeasured=self.unmeasured,
        )

    # -- what the rounds policy asks -----------------------------------------------

    def times_judged(self, nodeid: str, rounds: int) -> bool:
        """Whether ``rounds`` rounds of this test buy a time verdict: always when updating
        (the baseline being recorded), else when ``verdict.judges_time`` says its stored
        baseline would have its times judged against that many rounds."""
        if _outside_rootdir(nodeid):
            return False  # never judged nor written
        if self.options.update:
            return True
        if self.history is not None:
            self.history.load(self.machine.fingerprint)
            if self.history.has(nodeid):
                return True
        try:
            stored = self.stored(nodeid)
        except BaselineError:
            return False  # judge() reports the file
        return stored is not None and judges_time(
            stored, rounds, self.machine.fingerprint, self.tolerances, self.options.force_time
        )

    def undecided(self, nodeid: str, summary: TestSummary, overrides: Mapping[str, float]) -> bool:
        """Whether the verdict on these rounds is ``time_undecided`` (a time beyond its
        tolerance): more rounds could change it.  Judges nothing."""
        if _outside_rootdir(nodeid):
            return False
        if self.time_over_budget(summary, overrides):
            return True
        try:
            return self.verdict(nodeid, summary, overrides).time_undecided
        except BaselineError:
            return False  # judge() reports the file

    def exact_moved(
        self, nodeid: str, rounds: Callable[[], TestSummary], overrides: Mapping[str, float]
    ) -> bool:
        """Whether the verdict on the summary ``rounds()`` builds (asked only for a test
        with a baseline) judges a deterministic figure beyond tolerance
        (``Verdict.exact_moved``): a round more tells whether the test's data decides it.
        Judges nothing; reaches no verdict for a test whose figures all lie within its
        baseline's ranges (an unchanged suite's every test)."""
        if _outside_rootdir(nodeid):
            return False
        try:
            stored = self.stored(nodeid)
        except BaselineError:
            return False  # judge() reports the file
        if stored is None:
            return False
        summary = rounds()
        if _within(summary, stored.summary):
            return False
        return self.verdict(nodeid, summary, overrides).exact_moved

    def settling(
        self, nodeid: str, summary: TestSummary, overrides: Mapping[str, float]
    ) -> tuple[Verdict, tuple[TimeLimit, ...]] | None:
        """The verdict on these rounds and its judged times with their limits
        (``compare_limits``), where a gate run could stop the test's rounds early: a
        stored baseline, none being recorded (it keeps its rounds), no budget on time.
        None otherwise.  Judges nothing."""
        if _outside_rootdir(nodeid) or self.options.update:
            return None
        if self.budgets_for(overrides).max_time is not None:
            return None
        try:
            return self._limits(nodeid, summary, overrides)
        except BaselineError:
            return None

    def budgets_for(self, overrides: Mapping[str, float] | None) -> Budgets:
        """The test's budgets: the session's, with its marker's (``overrides``) in place."""
        return self.options.budgets.with_marker(overrides)

    def time_over_budget(self, summary: TestSummary, overrides: Mapping[str, float]) -> bool:
        """Whether these rounds judge the test's time over its budget: more rounds, judged
        with them, confirm it (as a time beyond its tolerance)."""
        limit = self.budgets_for(overrides).max_time
        if limit is None:
            return False
        tol = self.with_overrides(overrides)
        return judge_time(summary, limit, tol, force_time=self.options.force_time).status == "over"

    def with_budgets(
        self, verdict: Verdict, summary: TestSummary, overrides: Mapping[str, float]
    ) -> Verdict:
        """``verdict`` with the test's budgets judged (``budgets.py``)."""
        budgets = self.budgets_for(overrides)
        if not budgets.any():
            return verdict
        rows = judge_budgets(
            summary, budgets, self.with_overrides(overrides), force_time=self.options.force_time
        )
        return verdict.with_budgets(rows)

    # -- judging -----------------------------------------------------------------------

    def shipment(self, nodeid: str, verdict: Verdict) -> dict[str, object] | None:
        """What a pytest-xdist worker sends its controller beside a test's figures for it to
        take as judged (None: the controller judges the figures again)."""
        return None

    def compares(self, nodeid: str) -> bool:
        """Whether :meth:`judge` compares ``nodeid``'s figures with a baseline at all (a
        test outside the rootdir has no baseline file it could be given)."""
        return not _outside_rootdir(nodeid)

    def judge(self, nodeid: str, summary: TestSummary, overrides: Mapping[str, float]) -> Judgement:
        """Judge one test whose call passed; say whether it must fail."""
        if _outside_rootdir(nodeid):
            self.outside[nodeid] = None
            return Judgement(None)
        tolerances = self.with_overrides(overrides)
        try:
            path = self.path_of(nodeid)
            verdict = self.with_budgets(
                self.verdict(nodeid, summary, overrides), summary, overrides
            )
        except BaselineError as exc:
            message = f"opprof: unusable baseline: {exc}"
            if self.options.update:
                message += " (left untouched: fix or delete it, then update again)"
            self.errors[nodeid] = message
            return Judgement(None, message, fails=not self.options.warn_only)
        shown = self._shown.get(path)
        if shown is None:  # once per baseline file: three pure-path steps each time
            try:
                shown = path.relative_to(self.baseline_dir.parent).as_posix()
            except ValueError:
                shown = str(path)
            self._shown[path] = shown
        if self.options.update:  # only staging reads it: the comparison with the baseline
            self._verdicts[nodeid] = (verdict, tolerances)
        status = verdict.status
        verdict = verdict.with_crept(self._crept(nodeid, summary, verdict, tolerances))
        judged = Judged(
            nodeid,
            status,
            verdict.time_not_judged is not None,
            bool(verdict.work_time),
            bool(verdict.varying),
            verdict.time_unjudged,
            verdict.label if verdict.label != status else None,
            bool(verdict.unsteady),
        )
        result = TestResult(nodeid, summary, verdict, baseline_file=shown)
        if self.options.keep_results:
            self.results.append(result)
        elif (
            judged.status == "regressed"
            or judged.busy
            or judged.work_time
            or judged.varying
            or judged.unsteady
        ):
            self._kept_at[len(self.judged)] = len(self.results)
            self.results.append(result)
        self.judged.append(judged)
        return Judgement(result, None, self.fails(result))

    def _crept(
        self, nodeid: str, summary: TestSummary, verdict: Verdict, tolerances: Tolerances
    ) -> tuple[Crept, ...]:
        """The figures of ``summary`` that crept beyond tolerance against the history (none
        without a history); times where the verdict judged them, or where this run's own
        rounds allow it (``HistoryGate.times_judged``)."""
        if self.history is None:
            return ()
        self.history.load(self.machine.fingerprint)
        reason = None
        if verdict.time_not_judged is not None:
            reason = verdict.time_unjudged.reason if verdict.time_unjudged else "unknown"
        times = self.history.times_judged(summary, tolerances, reason)
        found = tuple(
            c.record() for c in self.history.judge(nodeid, summary, tolerances, times=times)
        )
        if found:
            self.crept[nodeid] = tuple(c.text() for c in found)
        return found

    def result_of(self, i: int) -> TestResult:
        """The result of :attr:`judged`'s ``i``-th test (kept for a test the terminal
        summary reads: regressed, busy, judged on work time, varying or unsteady)."""
        return self.results[i if self.options.keep_results else self._kept_at[i]]

    def fails(self, result: TestResult) -> bool:
        """Whether a judged test fails: a regression, or no baseline where one is required,
        never with ``warn_only`` or while updating; beyond a budget, which needs no
        baseline, also while updating."""
        o = self.options
        if o.warn_only:
            return False
        if result.verdict.over_budget:
            return True
        if o.update:
            return False
        return result.verdict.failed or (result.verdict.status == "new" and o.require_baselines)

    # -- recording (the controller, or the single process) ------------------------------

    def call_passed(self, nodeid: str, summary: TestSummary) -> None:
        """The call passed (after the verdict): a candidate for the baselines."""
        if self.options.update:
            self._passed_calls[nodeid] = summary

    def teardown_done(self, nodeid: str, passed: bool) -> None:
        """Stage the test's figures when its call and teardown passed."""
        summary = self._passed_calls.pop(nodeid, None)
        judged = self._verdicts.pop(nodeid, None)
        if summary is None or not passed or nodeid in self.outside:
            return
        try:
            if self.path_of(nodeid) in self._bad_paths:
                return
            self.stage(nodeid, summary, judged)
        except BaselineError as exc:
            self.errors.setdefault(nodeid, f"opprof: unusable baseline: {exc}")

    def stage(
        self,
        nodeid: str,
        summary: TestSummary,
        judged: tuple[Verdict, Tolerances] | None = None,
    ) -> None:
        """Record ``summary`` as the test's new baseline when :meth:`write` runs: pooled
        with the stored rounds unless it changed for real (by ``judged``, the verdict
        reached on it), else replacing them; nothing while :attr:`unmeasured`, whose
        zeros would replace measured figures (the test goes to :attr:`refused`)."""
        if self.unmeasured is not None:
            self.refused.append(nodeid)
            return
        stored = self.stored(nodeid)
        if stored is not None and judged is not None:
            verdict, tolerances = judged
            why = replace_reason(summary, stored, verdict, self.machine.fingerprint, tolerances)
            if why is None:
                summary = pool(summary, stored.summary)
                self.pooled.append(nodeid)
            else:
                self.replaced[nodeid] = why
        entry = BaselineEntry.record(summary, self.machine)
        self._staged.setdefault(self.path_of(nodeid), {})[split_nodeid(nodeid)[1]] = entry

    def write(self) -> list[Path]:
        """Merge staged entries into their files; the files that changed.  A file that
        cannot be written (a read-only directory, an unreadable file) stops no other:
        why is kept in :attr:`write_failures`."""
        changed: list[Path] = []
        for path, entries in sorted(self._staged.items()):
            try:
                if update(path, entries):
                    changed.append(path)
            except (BaselineError, OSError) as exc:
                self.write_failures.append(str(exc))
        self._staged.clear()
        return changed

    def results_at_end(self) -> Sequence[TestResult]:
        """The judged results for the end-of-session reports: read back from the spool
        once where the Markdown report is asked for (it ranks them all in memory anyway),
        so that the JSON and HTML reports do not read every one back again; else the
        spool itself (the JSON report alone is written one test at a time)."""
        if self.options.markdown_path is None:
            return self.results
        if self._read_back is None:
            self._read_back = list(self.results)
        return self._read_back

    def finish(self) -> bool:
        """Write the baselines (with ``update``) and the JSON report; False when a write failed.

        The Markdown summary is the renderer's, written by the plugin beside this."""
        ok = True
        if self.refused:
            self.write_failures.append(
                f"{len(self.refused)} test(s) not recorded (e.g. {self.refused[0]}): "
                f"{self.unmeasured}, so their FLOPs and op counts were not measured; "
                "their stored entries are kept as they were"
            )
        if self.options.update and self._staged:
            self.written = self.write()
        if self.write_failures:
            self.write_error = "\n".join(
                f"opprof: baselines not written: {e}" for e in self.write_failures
            )
            ok = False
        if self.options.report_path is not None:
            try:
                # With an HTML page the report's dict is built anyway; without one the
                # JSON is written one test at a time from the spool (flat memory).
                write_json_report(
                    self.options.report_path,
                    self.report()
                    if self.options.html_path is not None
                    else report_text(
                        self.results_at_end(),
                        machine=self.machine,
                        flames=self.flames,
                        marked=self.marked,
                        created_at=self.created_at,
                        details=self.options.report_details,
                        extra=self.report_extra(),
                    ),
                )
            except BaselineError as exc:
                self.report_failed(exc)
                ok = False
        return ok

    def report(self) -> dict[str, object]:
        """The JSON report of the session (built once: the JSON and HTML reports of a run
        carry the same figures and time stamp)."""
        if self._report is None:
            self._report = build_report(
                self.results_at_end(),
                machine=self.machine,
                flames=self.flames,
                marked=self.marked,
                created_at=self.created_at,
                details=self.options.report_details,
                extra=self.report_extra(),
            )
        return self._report

    def markdown_notes(self) -> list[str]:
        """Paragraphs the Markdown summary adds for this kind of run; none here."""
        return []

    def report_extra(self) -> dict[str, object]:
        """Top-level entries the JSON report adds for this kind of run (A/B's ops judged
        across its tests); none for a baseline run."""
        return {}

    def report_failed(self, exc: BaselineError) -> None:
        """Keep a report's write error for the summary, beside any baseline write error."""
        error = f"opprof: report not written: {exc}"
        self.write_error = f"{self.write_error}\n{error}" if self.write_error else error


def _within(summary: TestSummary, base: TestSummary) -> bool:
    """Whether each of ``summary``'s test-level deterministic figures lies within ``base``'s
    range of it: none can be judged beyond tolerance, nor an op's (which counts only with
    its test's total)."""
    was = base.exact_values()
    for key, value in summary.exact_values().items():
        if key in was:
            low, high = base.ranges.get(key, (was[key], was[key]))
            if not low <= value <= high:
                return False
    return True


def _outside_rootdir(nodeid: str) -> bool:
    """Whether a node id's file part names no file under the rootdir (empty, absolute, ``..``)."""
    return _module_outside_rootdir(split_nodeid(nodeid)[0])


@functools.lru_cache(maxsize=4096)
def _module_outside_rootdir(module: str) -> bool:
    """:func:`_outside_rootdir` of one module path, once per module (two pure paths each
    time were a tenth of a trivial test's fixed cost)."""
    posix, windows = PurePosixPath(module), PureWindowsPath(module)
    return (
        not module
        or posix.is_absolute()
        or windows.is_absolute()
        or bool(windows.drive)
        or ".." in posix.parts
        or ".." in windows.parts
    )
