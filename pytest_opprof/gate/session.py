"""The regression gate: each profiled test judged against its baseline, and what follows.

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
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath, PureWindowsPath

from pytest_opprof.baselines import BaselineRun
from pytest_opprof.errors import BaselineError
from pytest_opprof.gate.pooling import POOLED_SESSIONS
from pytest_opprof.gate.store import split_nodeid
from pytest_opprof.gate.summary import TestSummary
from pytest_opprof.gate.verdict import UPDATE_HINT, Tolerances, judges_time
from pytest_opprof.plugin.options import AUTO_ROUNDS, GateOptions
from pytest_opprof.render.report import TestResult, render_text, write_json_report, write_markdown

REQUIRE_HINT = (
    "no baseline yet and --opprof-require-baselines is set; "
    "record one with --opprof-update-baselines"
)


@dataclass(frozen=True)
class Judgement:
    """What the gate decided for one test: a result, or the baseline file's error."""

    result: TestResult | None
    error: str | None = None
    fail_text: str | None = None
    """The failure's text when the test must fail; ``None`` when it passes."""

    @property
    def label(self) -> str:
        """The verdict (``pass``, ``regressed``, ..., ``error``, ``not judged``)."""
        if self.result is not None:
            return self.result.verdict.status
        return "error" if self.error is not None else "not judged"


@dataclass
class Gate:
    """One process's part of the comparison with baselines (see the module docstring)."""

    options: GateOptions
    row_limit: int = 20
    errors: dict[str, str] = field(default_factory=dict)
    """node id -> why its baseline could not be used (the message names the file)."""
    written: list[Path] = field(default_factory=list)
    write_error: str | None = None
    outside: dict[str, None] = field(default_factory=dict)
    """Node ids of tests outside the rootdir (not judged, not staged), in order."""
    _run: BaselineRun | None = None
    _bad_paths: dict[Path, BaselineError] = field(default_factory=dict)
    _passed_calls: dict[str, TestSummary] = field(default_factory=dict)

    @property
    def run(self) -> BaselineRun:
        """The session's :class:`BaselineRun`, made at first use (it reads the machine)."""
        if self._run is None:
            o = self.options
            self._run = BaselineRun(
                o.baseline_dir,
                tolerances=Tolerances(
                    time=o.time_tolerance,
                    memory=o.memory_tolerance,
                    flops=o.flops_tolerance,
                    min_time_ns=o.min_time_ns,
                    statistic="median" if o.time_statistic == "median" else "min",
                    speed_scaled=not o.raw_times,
                ),
                force_time=o.force_time,
            )
        return self._run

    @property
    def results(self) -> list[TestResult]:
        return self.run.results if self._run is not None else []

    def tolerances(self, overrides: Mapping[str, float]) -> Tolerances | None:
        """The run's tolerances with a marker's ``{"time": ..., ...}`` overrides applied."""
        if not overrides:
            return None
        base = self.run.tolerances
        return dataclasses.replace(
            base,
            time=overrides.get("time", base.time),
            memory=overrides.get("memory", base.memory),
            flops=overrides.get("flops", base.flops),
        )

    def times_judged(self, nodeid: str) -> bool:
        """Whether rounds of this test would buy a time verdict: always when updating
        (the baseline being recorded), else when ``verdict.judges_time`` says its stored
        baseline would have its times judged against ``AUTO_ROUNDS`` rounds."""
        if _outside_rootdir(nodeid):
            return False  # never judged nor written
        if self.options.update:
            return True
        try:
            stored = self.run.stored(nodeid)
        except BaselineError:
            return False  # judge() reports the file
        return stored is not None and judges_time(
            stored,
            AUTO_ROUNDS,
            self.run.machine.fingerprint,
            self.run.tolerances,
            self.options.force_time,
        )

    def undecided(self, nodeid: str, summary: TestSummary, overrides: Mapping[str, float]) -> bool:
        """Whether the verdict on these rounds is ``time_undecided`` (a time beyond its
        tolerance): more rounds could change it.  Judges nothing."""
        if _outside_rootdir(nodeid):
            return False
        try:
            verdict = self.run.verdict(nodeid, summary, self.tolerances(overrides))
        except BaselineError:
            return False  # judge() reports the file
        return verdict.time_undecided

    def judge(self, nodeid: str, summary: TestSummary, overrides: Mapping[str, float]) -> Judgement:
        """Judge one test whose call passed; say whether (and how) it must fail."""
        if _outside_rootdir(nodeid):
            self.outside[nodeid] = None
            return Judgement(None)
        try:
            path = self.run.path_of(nodeid)
            bad = self._bad_paths.get(path)
            if bad is not None:
                raise bad
            result = self.run.judge(nodeid, summary, self.tolerances(overrides))
        except BaselineError as exc:
            self._bad_paths.setdefault(Path(exc.path), exc)
            message = f"opprof: unusable baseline: {exc}"
            if self.options.update:
                message += " (left untouched: fix or delete it, then update again)"
            self.errors[nodeid] = message
            return Judgement(None, message, None if self.options.warn_only else message)
        return Judgement(result, None, self._fail_text(result))

    def _fail_text(self, result: TestResult) -> str | None:
        o = self.options
        if o.warn_only or o.update:
            return None
        if result.verdict.failed:
            return render_text(result, row_limit=self.row_limit)
        if result.verdict.status == "new" and o.require_baselines:
            return f"opprof NEW: {result.nodeid}\n{REQUIRE_HINT}"
        return None

    # -- controller side -------------------------------------------------------

    def call_passed(self, nodeid: str, summary: TestSummary) -> None:
        """The call passed (after the verdict): a candidate for the baselines."""
        if self.options.update:
            self._passed_calls[nodeid] = summary

    def teardown_done(self, nodeid: str, passed: bool) -> None:
        """Stage the test's figures when its call and teardown passed."""
        summary = self._passed_calls.pop(nodeid, None)
        if summary is None or not passed or nodeid in self.outside:
            return
        try:
            if self.run.path_of(nodeid) in self._bad_paths:
                return
            self.run.stage(nodeid, summary)
        except BaselineError as exc:
            self.errors.setdefault(nodeid, f"opprof: unusable baseline: {exc}")

    def finish(self) -> bool:
        """Write baselines (with ``update``) and the reports; False when a write failed."""
        ok = True
        if self.options.update and self._run is not None:
            try:
                self.written = self.run.write()
            except (BaselineError, OSError) as exc:
                self.write_error = f"opprof: baselines not written: {exc}"
                ok = False
        o = self.options
        try:
            if o.report_path is not None:
                write_json_report(o.report_path, self.results, machine=self.run.machine)
            if o.markdown_path is not None:
                write_markdown(o.markdown_path, self.results, machine=self.run.machine)
        except BaselineError as exc:
            error = f"opprof: report not written: {exc}"
            self.write_error = f"{self.write_error}\n{error}" if self.write_error else error
            ok = False
        return ok

    def summary_lines(self) -> list[str]:
        """The terminal summary of the comparison: counts, then each notable test."""
        results = self.results
        counts = {s: 0 for s in ("regressed", "improved", "new", "pass")}
        for r in results:
            counts[r.verdict.status] += 1
        shown = ", ".join(f"{n} {s}" for s, n in counts.items() if n)
        if self.errors:
            shown += (", " if shown else "") + f"{len(self.errors)} unusable baseline"
        if self.outside:
            shown += (", " if shown else "") + f"{len(self.outside)} outside the rootdir"
        where = _shown_path(self.options.baseline_dir)
        lines = [f"opprof baselines ({where}): {shown or 'nothing judged'}"]
        if self.options.warn_only:
            lines.append("(--opprof-warn-only: regressions are reported, not failed)")
        if self.options.update:
            lines.append("(--opprof-update-baselines: regressions are reported, not failed)")
        for r in results:
            if r.verdict.status != "regressed":
                continue
            if self._fail_text(r) is None:  # not failed: this is the only place it shows
                lines += ["", render_text(r, row_limit=self.row_limit)]
            else:
                lines.append(f"REGRESSED {r.nodeid} (failed; the diff is in its failure)")
        improved = [r.nodeid for r in results if r.verdict.status == "improved"]
        if improved:
            lines += ["", "improved beyond tolerance:"]
            lines += [f"  {nodeid}" for nodeid in improved]
            if not self.options.update:
                lines.append(f"  hint: {UPDATE_HINT}")
        new = [r.nodeid for r in results if r.verdict.status == "new"]
        if new:
            lines += ["", "new (no baseline):"] + [f"  {nodeid}" for nodeid in new]
        if self.errors:
            lines += ["", "unusable baselines:"]
            lines += [f"  {nodeid}: {message}" for nodeid, message in self.errors.items()]
        if self.outside:
            first = next(iter(self.outside))
            lines += [
                "",
                f"not compared: {len(self.outside)} test(s) outside the rootdir (e.g. {first}) "
                "have no baseline file; to gate them, run with a --rootdir that contains them",
            ]
        if self.options.update:
            lines += ["", f"wrote {len(self.written)} baseline file(s)"]
            lines += [f"  {_shown_path(p)}" for p in self.written]
            if self._run is not None and self._run.pooled:
                lines.append(
                    f"{len(self._run.pooled)} test(s) passed against their baseline: their "
                    f"rounds joined it (the last {POOLED_SESSIONS} runs' rounds are kept)"
                )
        if self.write_error is not None:
            lines.append(self.write_error)
        return lines


def _outside_rootdir(nodeid: str) -> bool:
    """Whether a node id's file part names no file under the rootdir (empty, absolute, ``..``)."""
    module = split_nodeid(nodeid)[0]
    posix, windows = PurePosixPath(module), PureWindowsPath(module)
    return (
        not module
        or posix.is_absolute()
        or windows.is_absolute()
        or bool(windows.drive)
        or ".." in posix.parts
        or ".." in windows.parts
    )


def _shown_path(path: Path) -> str:
    try:
        return os.path.relpath(path)
    except ValueError:  # another drive (Windows)
        return str(path)
