"""The history gate: a test fails whose figure crept beyond tolerance against the level
its history held before the creep began, though no single step was beyond it.

A pooled baseline follows a creep: five commits that each make a test 5% slower each
pass a 15% gate against a baseline that pools their times.  With ``--opprof-history``
the gate also reads the history's runs of this machine (same fingerprint: times of
other machines are not comparable), finds each series' change points
(``series.py``), and judges the test's figures against them (``docs/history.md``):

* **the creep**: the trailing run of upward steps of a series, from the last run that
  replaced the test's baseline (an update that accepted a change) on; a deterministic
  figure's creep is of steps each within tolerance alone (one beyond it is a
  regression the baseline gate judges), a time's of steps of any size (where runs are
  few or noisy the detector finds several commits' steps as one);
* **the level before**: the median of the runs between the change point before the
  creep and its first step (a robust estimate over many runs), the runs corrected by the
  suite's reference as the detector searched them (``reference.py``: a phase of the
  machine that moved every test since is not the test's creep);
* **a time crept** when this run's median, the median of the runs since the last step
  with this run, and those runs against the level before's runs (a one-sided
  Mann-Whitney test over runs, at :data:`LEVEL_ALPHA`, against the runs before scaled
  by the tolerance) are all beyond tolerance, and this run's rounds agree as a time
  verdict's do (``gate/judge.py``); times under the time floor are not judged;
* **a deterministic figure crept** when this run's value is beyond tolerance of the
  value before the creep's first step (``judge_exact``).

A test's time is its CPU time, not its wall time: on a busy machine the waits for a CPU
swell wall times for many runs in a row, which a history reads as a step (the baseline
gate has its waits and speed reference to tell; a history keeps medians), while CPU time
stays (``docs/history.md`` has the numbers).  It fails the test naming the ops whose
self time grew with it; an op's self time alone fails it only when it added
``OP_ALONE_TOLERANCES`` time tolerances of the test's time (as the baseline gate's op
reasons).  Knows nothing of pytest: ``gate/session.py`` asks it.
"""

from __future__ import annotations

import dataclasses
import math
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from pytest_opprof.errors import BaselineError
from pytest_opprof.gate.creep import CreepStep, Crept
from pytest_opprof.gate.judge import change, judge_exact
from pytest_opprof.gate.reasons import OP_ALONE_TOLERANCES
from pytest_opprof.gate.stats import mann_whitney_greater
from pytest_opprof.gate.summary import TestSummary, TimeStats
from pytest_opprof.gate.tolerance import Tolerances
from pytest_opprof.gate.waiting import WORK_WAIT_LIMIT, clean_rounds
from pytest_opprof.history.changes import MIN_CHANGE, MIN_SIZE
from pytest_opprof.history.series import (
    CPU,
    SELF,
    ChangePoint,
    Detection,
    Found,
    MachineSeries,
    run_date,
)
from pytest_opprof.history.store import TEST_EXACT, History, scan

GATE_ALPHA = 0.05
"""The detector's threshold for the gate's segmentation, looser than the report's: a
split only chooses which runs are the level before and which the level now; whether a
test fails is the level test's (:data:`LEVEL_ALPHA`) on those runs."""
LEVEL_ALPHA = 0.01
"""The one-sided p-value below which the runs now are beyond tolerance of the runs
before the creep."""
OP_SHARE = 0.25
"""An op is named beside a test's crept time when it added this share of its growth."""
OPS_NAMED = 3
"""The ops named beside a crept figure, those that stepped most with it."""

Series = npt.NDArray[np.floating[Any]]


@dataclass(frozen=True)
class Creep:
    """One figure of one test that crept beyond tolerance against its history."""

    test: str
    figure: str
    """``cpu`` (the test's CPU time), ``self`` (an op's) or a deterministic figure
    (``store.py``)."""
    op: str | None
    before: float
    """The level before the creep (ns, or the figure's unit)."""
    now: float
    """This run's figure."""
    steps: tuple[ChangePoint, ...]
    """The creep's steps, oldest first."""
    ops: tuple[str, ...] = ()
    """The ops that stepped with it."""
    start: int = 0
    """The first run of the level before (an index of the machine's runs)."""
    this_run: float | None = None
    """This run's own step from the level of the runs since the creep's last step."""

    def record(self) -> Crept:
        """What the verdict carries to the reports (``gate/creep.py``): the steps' commits
        and changes, nothing of the history."""
        steps = tuple(
            CreepStep(
                sha=c.sha,
                date=run_date(c.between[0]) if c.between else c.date,
                run_at=str(c.run.meta["run_at"]),
                change=_step_change(c),
                low=None if c.exact else c.step.low,
                high=None if c.exact else c.step.high,
                between=_between(c),
            )
            for c in self.steps
        )
        return Crept(
            self.test, self.figure, self.op, self.before, self.now, steps, self.ops, self.this_run
        )

    def text(self) -> str:
        """``test_fit: cpu +16% against its level before 3f2c1ab (2026-11-20): stepped +5%
        at 3f2c1ab, +6% at 9e01d2c, +5% at a1b2c3d; op numpy.linalg.svd``: the terminal's
        line (``Crept.text``)."""
        return self.record().text()


def _between(c: ChangePoint) -> tuple[str, ...]:
    """The commits a step may be at (``ChangePoint.between``); none where a run between
    has no commit: such a step is named by its own run."""
    commits = [h.commit for h in c.between]
    return tuple(str(k["sha"]) for k in commits if k) if all(commits) else ()


def _step_change(c: ChangePoint) -> float:
    if c.exact:
        moved = change(c.step.before, c.step.after)
        return math.inf if moved is None else moved
    return c.step.change


BASELINE_SIDE = ("machine", "rounds", "busy", "speed")
"""Why a time verdict did not judge a time, where the reason may lie with the baseline
(``gate/unjudged.py``): the history gate judges against the history's runs, not the
baseline, so it judges the time when this run's own rounds allow it."""


class HistoryGate:
    """The history of one directory as the gate reads it, loaded at the first test judged
    (each process that judges loads it: a pytest-xdist worker, and its controller)."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.notes: list[str] = []
        """Lines for the terminal summary: files skipped, why nothing was judged."""
        self.runs = 0
        """The runs of this machine the gate judges against."""
        self._loaded = False
        self._series: MachineSeries | None = None
        self._changes: dict[tuple[str, str | None, str], list[ChangePoint]] = {}
        self._accepted: dict[str, int] = {}
        """Test -> the last run that replaced its baseline: its level starts there."""
        self.unjudged: dict[str, tuple[ChangePoint, ...]] = {}
        """Test -> the upward steps of its CPU time since its level before, where this run's
        times were not judged (:meth:`judge` with ``times`` false): the terminal says so,
        where it would otherwise count the test among those that did not creep."""

    def load(self, fingerprint: str) -> None:
        """Read this machine's runs and find their change points (once)."""
        if self._loaded:
            return
        self._loaded = True
        try:
            history = scan(self.directory)
        except BaselineError:  # no directory yet: this run writes the first file
            history = History([], [])
        self.notes += [f"opprof: history: skipped {why}" for why in history.skipped]
        heads = [h for h in history.runs if h.fingerprint == fingerprint]
        if not heads:
            where = (
                f"none of its {len(history.runs)} run(s) was measured on this machine "
                f"(fingerprint {fingerprint})"
                if history.runs
                else "no run recorded yet"
            )
            self.notes.append(f"opprof: history: not judged against history: {where}")
            return
        for r, head in enumerate(heads):
            for test in head.meta.get("replaced") or ():
                self._accepted[str(test)] = r
        found = Found([], [], machines={})
        series = MachineSeries(fingerprint, heads, Detection(alpha=GATE_ALPHA), found, cpu=True)
        series.run()
        self.notes += [f"opprof: history: skipped {why}" for why in found.skipped]
        self.runs = found.runs
        if not found.runs:
            self.notes.append("opprof: history: not judged against history: no readable run")
            return
        self._series = series
        for c in found.changes:
            self._changes.setdefault((c.test, c.op, c.figure), []).append(c)
        for points in self._changes.values():
            points.sort(key=lambda c: c.step.at)

    def has(self, nodeid: str) -> bool:
        """Whether the history holds runs of ``nodeid`` on this machine (after :meth:`load`)."""
        return self._series is not None and nodeid in self._series.tests.ids

    def judge(
        self, nodeid: str, summary: TestSummary, tol: Tolerances, *, times: bool = True
    ) -> list[Creep]:
        """The figures of ``summary`` that crept beyond ``tol`` against the history (after
        :meth:`load`); ``times``: whether its times may be judged (not on a busy machine)."""
        s = self._series
        if s is None or nodeid not in s.tests.ids:
            return []
        tid = s.tests.ids[nodeid]
        out: list[Creep] = []
        if not times:
            accepted = self._accepted.get(nodeid, 0)
            points = [c for c in self._changes.get((nodeid, None, CPU), []) if c.step.at > accepted]
            trail = _time_trail(points)
            if trail:
                self.unjudged[nodeid] = tuple(trail)
        if times:
            assert s.cpu_referenced is not None and s.self_time_referenced is not None
            cpu = self._time(nodeid, None, s.cpu_referenced[:, tid], summary.cpu_time, tol)
            if cpu is not None:
                out.append(self._with_ops(cpu, summary, tid))
            else:
                # An op alone: only where it added enough of the test's time to matter.
                floor = OP_ALONE_TOLERANCES * tol.time * summary.cpu_time.median_ns
                for key, op in summary.ops.items():
                    sid = self._op_series(tid, key)
                    if sid is None:
                        continue
                    found = self._time(
                        nodeid, key, s.self_time_referenced[:, sid], op.self_cpu_time, tol
                    )
                    if found is not None and found.now - found.before >= floor:
                        out.append(found)
        for c, name in enumerate(TEST_EXACT):
            tolerance, floor_bytes = _exact_tolerance(name, tol)
            now = _test_exact(summary, c)
            if tolerance is None or now is None or name in summary.ranges:
                continue
            accepted = self._accepted.get(nodeid, 0)
            points = [
                c for c in self._changes.get((nodeid, None, name), []) if c.step.at > accepted
            ]
            trail = _exact_trail(points, tolerance, floor_bytes)
            if not trail:
                continue
            before = trail[0].step.before
            if judge_exact((round(before), round(before)), now, tolerance, floor_bytes) != (
                "regressed"
            ):
                continue
            ops = self._ops_stepped(nodeid, _OP_FIGURE[name], trail[0].step.at)
            last = round(trail[-1].step.after)
            this_run = change(last, now) if now != last else None
            out.append(
                Creep(nodeid, name, None, before, float(now), tuple(trail), ops, this_run=this_run)
            )
        return out

    def times_judged(self, summary: TestSummary, tol: Tolerances, unjudged: str | None) -> bool:
        """Whether the history gate judges ``summary``'s times, given why the time verdict
        did not (``unjudged``, a ``gate/unjudged.py`` reason; None where it judged): where
        the verdict judged them, or where its reason may be the baseline's and this run has
        ``tol.time_min_rounds`` rounds that waited for a CPU at most
        ``WORK_WAIT_LIMIT`` of their time (the rounds a work-time verdict uses).  A history
        gate that followed the baseline's reasons judged nothing once a busy moment had
        recorded the baseline: in ``bench/history_study.py`` beside a bursty neighbour, the
        update run's rounds waited 91% and the crept test passed."""
        if unjudged is None:
            return True
        if unjudged not in BASELINE_SIDE:
            return False
        keep = clean_rounds(summary, WORK_WAIT_LIMIT)
        rounds = len(summary.wall_time.samples_ns) if keep is None else len(keep)
        return rounds >= tol.time_min_rounds

    def _op_series(self, tid: int, op: str) -> int | None:
        s = self._series
        assert s is not None
        oid = s.ops.ids.get(op)
        if oid is None or tid >= s.table.shape[0] or oid >= s.table.shape[1]:
            return None
        sid = int(s.table[tid, oid])
        return sid if sid >= 0 else None

    def _time(
        self, test: str, op: str | None, values: Series, now: TimeStats, tol: Tolerances
    ) -> Creep | None:
        figure = CPU if op is None else SELF
        accepted = self._accepted.get(test, 0)
        points = [c for c in self._changes.get((test, op, figure), []) if c.step.at > accepted]
        trail = _time_trail(points)
        if not trail:
            return None
        i = points.index(trail[0])
        start = points[i - 1].step.at if i else accepted
        before = _present(values[start : trail[0].step.at])
        since = _present(values[trail[-1].step.at :])
        if len(before) < MIN_SIZE or len(since) < MIN_SIZE:
            return None
        level = float(np.median(before))
        current = float(now.median_ns)
        if max(level, current) < tol.min_time_ns:
            return None  # times under the floor are not judged (gate/judge.py)
        limit = level * (1 + tol.time)
        runs_now = np.append(since, current)
        if current <= limit or float(np.median(runs_now)) <= limit:
            return None
        scaled = before * (1 + tol.time)
        if mann_whitney_greater(runs_now.tolist(), scaled.tolist()) >= LEVEL_ALPHA:
            return None
        rounds = now.samples_ns
        if (
            len(rounds) >= tol.min_rounds
            and mann_whitney_greater(rounds, scaled.tolist()) >= tol.alpha
        ):
            return None
        own = current / float(np.median(since)) - 1
        this_run = own if abs(own) >= MIN_CHANGE else None
        return Creep(test, figure, op, level, current, tuple(trail), start=start, this_run=this_run)

    def _with_ops(self, time: Creep, summary: TestSummary, tid: int) -> Creep:
        """``time`` (the test's) naming the ops whose self time grew most over the same
        runs: each that added at least :data:`OP_SHARE` of the test's growth (the ops' own
        steps may be too small for the detector)."""
        s = self._series
        assert s is not None
        grown = time.now - time.before
        added: dict[str, float] = {}
        for key, op in summary.ops.items():
            sid = self._op_series(tid, key)
            if sid is None:
                continue
            before = _present(s.self_time[time.start : time.steps[0].step.at, sid])
            if len(before):
                added[key] = op.self_cpu_time.median_ns - float(np.median(before))
        named = sorted(
            (k for k, v in added.items() if v >= OP_SHARE * grown), key=lambda k: -added[k]
        )
        return dataclasses.replace(time, ops=tuple(named[:OPS_NAMED]))

    def _ops_stepped(self, test: str, figure: str, since: int) -> tuple[str, ...]:
        """The ops of ``test`` whose ``figure`` stepped up at or after the run before
        ``since``, those that stepped most first."""
        moved: dict[str, float] = defaultdict(float)
        for (t, op, fig), points in self._changes.items():
            if t != test or op is None or fig != figure:
                continue
            for c in points:
                grew = _step_change(c)
                if c.step.at >= since - 1 and grew > 0:
                    moved[op] = max(moved[op], grew)
        ranked = sorted(moved, key=lambda op: (-moved[op], op))
        return tuple(ranked[:OPS_NAMED])


_OP_FIGURE = {
    "flops": "flops",
    "op_count": "count",
    "peak_bytes": "self_memory_bytes",
    "leaked_bytes": "self_memory_bytes",
}
"""The op figure whose steps name the ops beside a test's crept figure."""


def _present(values: Series) -> npt.NDArray[np.float64]:
    v = values.astype(np.float64)
    return v[~np.isnan(v)]


def _time_trail(points: Sequence[ChangePoint]) -> list[ChangePoint]:
    """The trailing upward steps of a time: the creep.  Of any size: where runs are few
    or noisy the detector finds several commits' steps as one."""
    trail: list[ChangePoint] = []
    for c in reversed(points):
        if c.step.change <= 0:
            break
        trail.append(c)
    return trail[::-1]


def _exact_trail(points: Sequence[ChangePoint], tolerance: float, floor: int) -> list[ChangePoint]:
    """A deterministic figure's trailing upward steps, each within tolerance alone."""
    trail: list[ChangePoint] = []
    for c in reversed(points):
        before, after = round(c.step.before), round(c.step.after)
        if after <= before or judge_exact((before, before), after, tolerance, floor) != "pass":
            break
        trail.append(c)
    return trail[::-1]


def _exact_tolerance(name: str, tol: Tolerances) -> tuple[float | None, int]:
    """A deterministic figure's tolerance (None: not judged) and absolute floor."""
    if name == "flops":
        return tol.flops, 0
    if name in ("op_count", "count"):
        return tol.count, tol.count_floor
    return tol.memory, tol.memory_floor_bytes


def _test_exact(s: TestSummary, column: int) -> int | None:
    """``summary``'s deterministic figure in ``TEST_EXACT``'s column (None: not measured)."""
    name = TEST_EXACT[column]
    if name == "flops":
        return s.flops
    if name == "op_count":
        return s.op_count
    if s.memory is None:
        return None
    return s.memory.peak_bytes if name == "peak_bytes" else s.memory.leaked_bytes


def gate_lines(gate: HistoryGate, crept: Mapping[str, Sequence[str]]) -> list[str]:
    """The terminal summary's lines of the history gate: its notes, then each test that
    crept (a line per figure)."""
    lines = list(gate.notes)
    if gate.runs:
        lines.append(
            f"opprof: history: judged against {gate.runs} run(s) of this machine in "
            f"{gate.directory}: {len(crept)} test(s) crept beyond tolerance"
        )
    for texts in crept.values():
        lines += [f"  {text}" for text in texts]
    if gate.unjudged:
        lines.append(
            f"opprof: history: {len(gate.unjudged)} test(s) whose CPU time stepped up in the "
            "history not judged on their times: this run's rounds waited for a CPU, or its "
            "time verdict could not judge them"
        )
        for test, steps in gate.unjudged.items():
            stepped = ", ".join(f"{_step_change(c):+.0%} at {c.at}" for c in steps)
            lines.append(f"  {test}: cpu stepped {stepped}")
    return lines
