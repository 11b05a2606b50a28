"""Compare a test's summary with its baseline: metric rows, op-level reasons, a status.

Rules (each threshold is a :class:`Tolerances` field):

* Deterministic figures (FLOPs, memory bytes and allocations, op counts) compare
  directly: ``now > baseline * (1 + tolerance)`` is a regression,
  ``now * (1 + tolerance) < baseline`` an improvement.  A figure that varied in the
  baseline's rounds or pooled sessions (``TestSummary.ranges``: unseeded random
  sizes, threads interleaving) is judged beyond its range widened by its own width
  on each side (:func:`judge_exact`): ``now > high' * (1 + tolerance)`` regresses,
  ``now * (1 + tolerance) < low'`` improves, and the verdict
  lists it in ``varying``, since a change smaller than the spread cannot be seen.
  Memory changes of at most ``memory_floor_bytes`` are ignored (allocator
  granularity, caches).  Op counts are reported but judged only when ``count`` is set.
* Time is noisy.  Each time (the test's wall time; each op's per-round self
  CPU time) is judged by one statistic over its rounds, the same on both
  sides: ``median`` (the default: with the speed references below, the
  steadiest) or ``min`` (the fastest round: noise from other processes only
  adds time, which suits raw times).  A time regresses when its statistic
  exceeds ``baseline * (1 + time)`` and, when both sides have at least
  ``min_rounds`` rounds, a one-sided Mann-Whitney U test also says the rounds
  are slower than the baseline's rounds scaled by ``1 + time`` with p <
  ``alpha``: the slowdown must show in the statistic *and* across the rounds.
  ``alpha`` 0.3 is a tuned threshold, not a significance level: in the verdict
  study it halved the false regressions of 5-round sessions and kept most
  detections (0.05 lost half of them).  Improvements mirror this.  Times whose
  statistics are both under ``min_time_ns`` are too short to judge.  Time is
  judged only when both sides have at least ``time_min_rounds`` rounds and the
  machine fingerprint matches the baseline's (or with ``force_time``);
  otherwise times are reported, a note says why they are not judged, and only
  deterministic figures count.  One round is no measurement of a time under
  load: in the verdict study (BENCHMARKS.md) a single round judged at 20%
  flagged 19-50% of the unchanged tests.
* A baseline refined by update runs pools the rounds of up to three sessions
  (``pooling.py``), and a session has a level of its own: what ran beside it under
  ``-n``, which memory the allocator reused.  So a time regresses only beyond the
  slowest pooled session's statistic (and improves only beyond the fastest's), by
  the tolerance; the verdict notes when that range, not the pooled figure, decided
  it.  A session whose speed references ran more than ``SESSION_PHASE`` off the
  pooled rounds' met a slow (or fast) phase of the machine that the scaling below
  corrects only in part: it does not widen the range.  An op whose in-phase
  sessions' statistics spread wider than its tolerance fails no test alone (the
  rule below).  Work time (``waiting.py``) is judged against the pooled rounds.
  Re-scored on ``bench/busy_study.py``'s kept reports (10 scenario runs, 3,000
  unchanged verdicts and 331 slowed tests judged): false failures 37 -> 23, detected
  305 -> 305.  The range over every session gave 23 false and 282 detected (a
  session in a slow phase hid slowdowns); over every session and for work time too,
  23 and 282; the median or second-slowest session instead of the slowest, 36-37
  and 304.  numpy's ``test_linalg`` (2 runs of 1,323): 3 and 17 false -> 3 and 11,
  12 and 11 detected -> 11 and 11.
* Before times are judged, when both sides ran the machine-speed references
  beside every round (``speed``), each round's CPU times are scaled to the
  baseline's speed (``pytest_opprof/gate/speed.py``: partly, by the slopes the
  verdict study measured): a slow phase of a shared machine slows the references
  with the test, so it largely cancels; a slower op does not slow the references.
  ``speed_scaled=False`` (``--opprof-raw-times``) judges times as measured.
* On a busy machine (``waiting.py``) times are judged on the rounds whose thread
  waited for a CPU at most ``max_wait_share`` of their wall time.  When a side has
  too few of them, the test-level time is judged on *work time* (wall less wait,
  over the rounds that waited at most ``waiting.WORK_WAIT_LIMIT``): a "work time"
  row judged like wall time, the "wall time" row not judged, and a note that says
  why.  Op times of such rounds are explanations (status ``info``), except a Python
  scope's where each op's wait was left out of its time (``op_waits``): it is judged as
  on clean rounds (``waiting.scope_judged_on_work``); one switched out in all but fewer
  than ``waiting.UNSWITCHED_ROUNDS`` of them fails alone only where even its fastest
  round is beyond tolerance.  Scored on
  bench/verdict_study.py's sessions (100 tests, 3 unchanged sessions, one with
  ``kernel`` 30% slower in 34 tests; the machine shared, load 0.2-9 on 2 cores):
  with ``auto`` rounds 229 of 300 unchanged verdicts had their time judged (77-162
  on clean rounds, 67-152 on work time; before, 75-162) with no false regression,
  and 29-33 of the 34 slowed tests failed naming ``kernel`` (85-97%).  A limit of
  85% or more judged a few more tests and gave 0.3-1.3% false regressions; 75% or
  less judged fewer for no fewer false ones.
* An op's time is a *reason* for the test's time, not a tripwire of its own.  An
  op whose self time regressed (its statistic and its rounds, as above) fails the
  test when the test's time regressed too, or when the op alone added
  ``OP_ALONE_TOLERANCES`` time tolerances of the test's time (other ops' gains hid
  it), and only on clean rounds; otherwise it is shown as ``info``.  When the
  test's time regressed, an op that grew beyond tolerance by its statistic by at
  least ``EXPLAINS_SHARE`` of the test's time is named as a reason even if its own
  rounds could not show it (too short, too few rounds).  Numbers that chose it:
  op times as tripwires failed 5-10 tests a run on op times alone on the real suites
  of issue 16 (``numpy.array`` +21.8% with the wall +12.9%, on a loaded machine: op
  times of contended rounds are no longer judged at all); with ops as reasons only,
  detection of a 30% slower ``kernel`` fell to 91% (31/34), because a 30% slower op
  that is under half its test moves the test's time less than its tolerance.  On
  numpy's own ``test_linalg`` (``bench/busy_study.py``'s numpy scenario: 441 tests,
  ``numpy.linalg.svd`` made 30% slower inside), svd takes 1.4-22 ms of tests of 13-175
  ms, and a bar of half a tolerance (an op alone adding 7.5% of its test's time)
  detected 1 of the 10 tests with >= 1 ms of svd; a quarter 8, a tenth all 10.  The
  same sessions re-scored (unchanged runs: numpy 0/1323 false failures at every bar;
  the synthetic suite quiet 0-2/300, loaded 0-1/300, ``-n 2`` 2/300 at half, 4/300 at
  a tenth) and then run end to end at a tenth (quiet 0/300 false, 34/34 detected;
  ``-n 2`` 0/300, 34/34; numpy 0/1323, 10/10; in numpy's slowed run 2 ops of 430
  unslowed tests failed alone, eigvalsh +29% and inv +20%) chose a tenth: an op fails
  a test alone when it added 1.5% of the test's time at the default 15%.  Only
  an op that could fail alone asks for confirmation rounds (``time_undecided``):
  ``auto`` confirmed 2-5% of the unchanged tests instead of 25%, with the same verdicts.
* Times are judged no finer than this machine's sessions move them (``spread.py``):
  where the gate passes ``spreads`` (each op key's session-to-session spread over the
  baseline file's tests), a test's time is judged beyond the wider of its tolerance and
  its ops' allowances weighted by their shares (``Widths.test``, shown as the row's
  tolerance, with a note when it decided the verdict), and an op fails a test alone
  only beyond the wider of the tolerance and its own allowance.
* A library op (``speed.is_native``), or ``[other ops]`` (``waiting.library_like``),
  fails no test alone when a round of either side
  waited for a CPU beyond ``max_wait_share``: the machine ran other processes, and in
  ``bench/busy_study.py``'s loaded runs those slowed memory-bound ops by 20-70% on the
  clean rounds too, with no wait to subtract (a note names the ops held back).  Python
  scopes still fail alone: the Python speed reference follows them.  Re-scored alone
  (without the spreads) on five kept runs: loaded false failures 34 -> 20 of 1,500,
  the crossed scenarios 54 -> 31 and 38 -> 33, detection unchanged (the slowed op there
  is a Python scope); with the spreads, ``spread.py`` has the numbers.  And the test's
  own time, on such a run, is not judged when its change less its library ops' added
  time is within tolerance (``_library_moved``): the loaded study runs' remaining false
  failures were wall times of clean rounds moved by library ops alone.
* A verdict with a judged time whose statistic is beyond its tolerance (regressed,
  or held back only by the Mann-Whitney test) is ``time_undecided``:
  ``--opprof-rounds auto`` then runs ``options.CONFIRM_ROUNDS`` more rounds and
  judges all of them (the plugin asks ``BaselineSession.undecided``).  In the
  verdict study this sequential design gave what 9 rounds for every test give, at
  the cost of 4 more rounds for the 2-4% of unchanged tests it confirmed.
* Improvements beyond tolerance never fail; they carry a hint to update baselines.
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal, NamedTuple

from pytest_opprof.gate import speed
from pytest_opprof.gate.machine import MachineInfo
from pytest_opprof.gate.spread import Spreads, allowance, test_allowance
from pytest_opprof.gate.stats import mann_whitney_greater
from pytest_opprof.gate.store import BaselineEntry
from pytest_opprof.gate.summary import OTHER_OPS, OpSummary, Span, TestSummary, TimeStats
from pytest_opprof.gate.tolerance import (
    DEFAULT_FLOPS_TOLERANCE,
    DEFAULT_MAX_SPEED_CHANGE,
    DEFAULT_MEMORY_TOLERANCE,
    DEFAULT_MIN_TIME_NS,
    DEFAULT_TIME_STATISTIC,
    DEFAULT_TIME_TOLERANCE,
)
from pytest_opprof.gate.trim import align
from pytest_opprof.gate.waiting import (
    WAIT_SHARE_LIMIT,
    as_work,
    clean_rounds,
    judged_rounds,
    library_like,
    scope_judged_on_work,
    switched_out,
    work_rounds,
)
from pytest_opprof.native_layout.records import MEMORY_EVENT_NAME

Status = Literal["pass", "regressed", "improved", "new"]
Statistic = Literal["min", "median"]
RowStatus = Literal["pass", "regressed", "improved", "info", "not judged"]

EXPLAINS_SHARE = 0.02
"""An op whose time changed by less than this share of the test's time explains nothing."""
OP_ALONE_TOLERANCES = 0.1
"""An op's slowdown fails a test whose own time is within tolerance only when the op alone
added this many time tolerances of the test's time (module docstring): a bar against ops
too small to matter, not a test-level tolerance."""
WORK_TIME = "work time"
"""The metric row of a test-level time judged as wall time less waiting (``waiting.py``)."""
UPDATE_HINT = "run with --opprof-update-baselines to record the improvement"
SPEED_NOTE_AT = 0.05
"""Machine-speed changes from this size on get a note in the verdict."""
SESSION_PHASE = 0.1
"""A pooled session whose Python speed reference ran more than this off the pooled rounds'
median ran in another phase of the machine: its level does not widen a time's range
(module docstring)."""
CONFIRM_BAND = 1.0
"""A judged time slower than its baseline by more than this fraction of its tolerance
makes the verdict ``time_undecided``.  The verdict study (bench/NOTES.md) tried 0.33-1.0:
lower bands confirmed up to 5x more tests (17% against 2-4%) for no better verdicts."""


@dataclass(frozen=True)
class Tolerances:
    """Thresholds of a comparison; relative ones are fractions (0.2 = 20%)."""

    time: float = DEFAULT_TIME_TOLERANCE
    memory: float = DEFAULT_MEMORY_TOLERANCE
    flops: float = DEFAULT_FLOPS_TOLERANCE
    count: float | None = None
    """Relative op-count growth allowed; ``None`` reports count changes without judging them."""
    min_time_ns: int = DEFAULT_MIN_TIME_NS
    memory_floor_bytes: int = 4096
    alpha: float = 0.3
    min_rounds: int = 5
    statistic: Statistic = DEFAULT_TIME_STATISTIC
    """How a time's rounds are summarised on both sides: the fastest (``min``) or ``median``."""
    time_min_rounds: int = 3
    """Rounds both sides need before times are judged (``force_time`` judges them anyway)."""
    speed_scaled: bool = True
    """Scale times to the baseline's machine speed when both sides ran the reference."""
    max_wait_share: float | None = WAIT_SHARE_LIMIT
    """Judge times on rounds whose thread waited for a CPU at most this share of their wall
    time (``waiting.py``); None judges every round."""
    max_speed_change: float | None = DEFAULT_MAX_SPEED_CHANGE
    """Beyond this machine-speed change against the baseline, times are not judged; None
    judges at any speed."""

    def figure(self, stats: TimeStats) -> int:
        """The judged figure of ``stats`` in ns: its min or its median."""
        return stats.min_ns if self.statistic == "min" else stats.median_ns


def _json_change(change: float | None) -> float | None:
    """``change`` for JSON: null when the baseline was 0 (infinite growth is not valid JSON)."""
    return None if change is None or math.isinf(change) else round(change, 4)


@dataclass(frozen=True)
class MetricRow:
    """One test-level figure, baseline against now (``change`` relative, 0.1 = +10%)."""

    metric: str
    unit: str
    baseline: float | None
    now: float | None
    change: float | None
    tolerance: float | None
    status: RowStatus
    note: str = ""

    def to_json(self) -> dict[str, object]:
        return {
            "metric": self.metric,
            "unit": self.unit,
            "baseline": self.baseline,
            "now": self.now,
            "change": _json_change(self.change),
            "tolerance": self.tolerance,
            "status": self.status,
            "note": self.note,
        }


@dataclass(frozen=True)
class OpReason:
    """One op-level change; ``impact`` is |change| as a share of the test's total of that unit."""

    op: str
    kind: str
    """slower, faster, more flops, fewer flops, more memory, less memory, count, new, vanished"""
    unit: str
    baseline: float | None
    now: float | None
    change: float | None
    status: RowStatus
    impact: float
    note: str = ""
    """How the change was judged, where more than its figures say (an A/B pair set's
    interval: ``+12.0% [+8.1%, +16.0%] over 4 pairs``)."""

    def to_json(self) -> dict[str, object]:
        out: dict[str, object] = {
            "op": self.op,
            "kind": self.kind,
            "unit": self.unit,
            "baseline": self.baseline,
            "now": self.now,
            "change": _json_change(self.change),
            "status": self.status,
            "impact": round(self.impact, 4),
        }
        if self.note:
            out["note"] = self.note
        return out


class VaryingFigure(NamedTuple):
    """A test-level deterministic figure whose baseline spans a range, not one value."""

    metric: str
    unit: str
    low: int
    high: int

    def to_json(self) -> dict[str, object]:
        return {"metric": self.metric, "unit": self.unit, "low": self.low, "high": self.high}


@dataclass(frozen=True)
class Verdict:
    """Outcome of one test's comparison; ``failed`` when something regressed."""

    status: Status
    metrics: tuple[MetricRow, ...] = ()
    reasons: tuple[OpReason, ...] = ()
    notes: tuple[str, ...] = ()
    time_judged: bool = True
    baseline_recorded_at: str | None = None
    speed_change: float | None = None
    """How much slower the machine-speed reference ran than in the baseline (0.1 = 10%);
    None when times were not scaled."""
    time_not_judged: str | None = None
    """Why the times were not judged although they could have been (the machine was too
    busy: ``waiting.py``), in one line; None otherwise."""
    time_undecided: bool = False
    """A judged time is slower than ``CONFIRM_BAND`` of its tolerance allows (by its
    statistic, whatever the Mann-Whitney test says): more rounds could change the verdict."""
    work_time: bool = False
    """The test-level time judged is work time (wall less the thread's wait for a CPU,
    ``waiting.work_rounds``): too few rounds were clean; op times are explanations only."""
    varying: tuple[VaryingFigure, ...] = ()
    """Deterministic figures that varied in the baseline's runs, judged beyond their range."""
    basis: str = "baseline"
    """What the times were judged against: ``baseline`` (the committed baselines), or an
    A/B run's base revision (``A/B against REF (sha)``, ``pytest_opprof/ab/``)."""

    @property
    def failed(self) -> bool:
        return self.status == "regressed"

    def spool_short_values(self) -> list[object] | None:
        """The result spool's short form (``spool.SHORT_VALUES``): none of values for the
        verdict of a test without a baseline, the verdict of most tests of a first run."""
        return [] if self is NEW else None

    @classmethod
    def from_spool_short_values(cls, values: list[object]) -> Verdict:
        """What :meth:`spool_short_values` wrote."""
        return NEW

    def to_json(self) -> dict[str, object]:
        return {
            "status": self.status,
            "time_judged": self.time_judged,
            "time_not_judged": self.time_not_judged,
            "time_judged_on": ("work time" if self.work_time else "wall time")
            if self.time_judged
            else None,
            "baseline_recorded_at": self.baseline_recorded_at,
            "time_basis": self.basis,
            "speed_change": _json_change(self.speed_change),
            "metrics": [row.to_json() for row in self.metrics],
            "reasons": [reason.to_json() for reason in self.reasons],
            "notes": list(self.notes),
            "varying": [figure.to_json() for figure in self.varying],
        }


NEW = Verdict(
    status="new", notes=("no baseline yet; run with --opprof-update-baselines to record one",)
)
"""The verdict of a test without a baseline."""


def compare(
    summary: TestSummary,
    baseline: BaselineEntry | None,
    *,
    fingerprint: str,
    tolerances: Tolerances | None = None,
    force_time: bool = False,
    machine: MachineInfo | None = None,
    spreads: Spreads | None = None,
    op_waits: bool = False,
) -> Verdict:
    """Judge ``summary`` (measured on the machine ``fingerprint``) against ``baseline``;
    ``machine``, the record of now, lets a note say that the thread pools differ;
    ``spreads``, how this machine's sessions move each op's time (``spread.py``, from the
    baseline's file), widens the tolerance of times that move more than it allows;
    ``op_waits``: the op times of both sides have each op's wait for a CPU left out
    (``native/switches.c`` works in this process, and the baseline, recorded on a machine
    of the same fingerprint, is taken to have had it too), so that on rounds judged as
    work time a Python scope's time is judged as on clean rounds
    (``waiting.scope_judged_on_work``)."""
    tol = tolerances or Tolerances()
    if baseline is None:
        return NEW
    # A trimmed baseline keeps the ops that explain its test (trim.py): the other side's
    # ops that it left out are folded the same way, so they compare as "[other ops]".
    summary, base = align(summary, baseline.summary)
    notes: list[str] = []
    same_machine = baseline.machine.fingerprint == fingerprint
    time_judged = judges_time(baseline, summary.rounds, fingerprint, tol, force_time)
    if not force_time and not same_machine:
        notes.append(
            f"baseline recorded on another machine ({baseline.machine.describe()}, fingerprint "
            f"{baseline.machine.fingerprint}, now {fingerprint}): times are not judged, "
            "only FLOPs, memory and op counts"
            + (
                "; its record predates the CPU's family and model and OpenBLAS's kernels in "
                "the fingerprint: --opprof-update-baselines on this machine re-records it"
                if baseline.machine.cpu_id is None and baseline.machine.blas_core is None
                else ""
            )
        )
    elif not time_judged:
        notes.append(
            f"times are judged from {tol.time_min_rounds} rounds on both sides (baseline "
            f"{base.rounds}, now {summary.rounds}; set --opprof-rounds, or --opprof-force-time "
            "to judge anyway): only FLOPs, memory and op counts are judged"
        )
    busy = None
    walls = None  # the measured wall times, when the time judged is work time
    co_run = _waited(summary, tol) or _waited(base, tol)
    if time_judged and tol.max_wait_share is not None:
        summary, base, busy = judged_rounds(summary, base, tol.time_min_rounds, tol.max_wait_share)
        worked = (
            work_rounds(summary, base, tol.time_min_rounds, op_waits=op_waits)
            if busy is not None
            else None
        )
        if worked is not None:
            walls = (base.wall_time, summary.wall_time)
            summary, base, work_note = worked
            busy = None
            notes.append(work_note)
        elif busy is not None:
            time_judged = False
            notes.append(busy)
    speed_change = None
    if time_judged and tol.speed_scaled and speed.usable(summary) and speed.usable(base):
        speed_change = speed.speed_change(summary, base)
        limit = tol.max_speed_change
        if limit is not None and abs(speed_change) > limit:
            time_judged = False
            busy = (
                f"time not judged: this machine ran the speed references "
                f"{abs(speed_change):.0%} {'slower' if speed_change > 0 else 'faster'} than "
                f"when the baseline was recorded, beyond the {limit:.0%} its times can be "
                "scaled across to within their tolerance (--opprof-max-speed-change)"
            )
            notes.append(busy)
    if time_judged and speed_change is not None:
        summary, base = speed.at_speed(summary, base), speed.at_speed(base, base)
        if abs(speed_change) >= SPEED_NOTE_AT:
            notes.append(
                f"this machine ran the speed references {abs(speed_change):.0%} "
                f"{'slower' if speed_change > 0 else 'faster'} than when the baseline was "
                "recorded; times are compared at the baseline's speed (--opprof-raw-times "
                "judges them as measured)"
            )
    switched: frozenset[str] = frozenset()
    if walls is not None:
        switched = switched_out(summary, op_waits)
        summary, base = as_work(summary, op_waits), as_work(base, op_waits)
    whole = not (summary.dropped_events or base.dropped_events)
    if not whole:
        notes.append(
            "events were dropped at the profile's event limit (worst round: "
            f"{summary.dropped_events:,} now, {base.dropped_events:,} in the baseline; raise "
            "--opprof-max-events): op figures, FLOPs, op counts and device time cover part of "
            "the test and are not judged; wall time and memory are"
        )
    sessions = Sessions.of(base)
    # A scope switched out in nearly every work round fails alone only where even its
    # fastest round is beyond tolerance (waiting.UNSWITCHED_ROUNDS).
    switched = frozenset(
        key
        for key in switched
        if key in base.ops
        and key in summary.ops
        and summary.ops[key].self_cpu_time.min_ns
        <= session_bounds(base.ops[key].self_cpu_time, sessions, tol)[1] * (1 + tol.time)
    )
    widths = Widths.of(base, spreads or {}, tol)
    metrics = _metric_rows(summary, base, tol, time_judged, whole, sessions, widths.test)
    widened = _widened(metrics, base, widths, tol, sessions)
    if widened is not None:
        notes.append(widened)
    spread = _within_sessions(summary.wall_time, base, tol, sessions) if time_judged else None
    if spread is not None:
        notes.append(spread)
    if walls is not None:
        metrics = _on_work(metrics, walls, tol)
    untold = None
    if co_run and time_judged:
        metrics, untold = _library_moved(metrics, summary, base, tol)
    if time_judged and untold is None:
        metrics, uniform = _uniformly_slower(metrics, summary, base, tol)
        if uniform is not None:
            # Every part moved alike: no op's time is any more a code change than the
            # test's, so none is judged alone either.
            busy = f"time not judged: the test's {uniform}"
            time_judged = False
            notes.append(busy)
    totals = _totals_status(metrics)
    if not whole:  # no op figure is judged, whatever the test's totals did
        totals = dict.fromkeys(totals, "not judged")
    other_ops_differ = OTHER_OPS in base.ops and summary.left_out != base.left_out
    if other_ops_differ:
        notes.append(
            f"{OTHER_OPS} holds other ops than the baseline's (a new code path, or a capture "
            "that names more ops than when it was recorded): its time explains the test's "
            "time and fails no test alone; --opprof-update-baselines re-records it"
        )
    held: list[str] | None = [] if co_run else None
    reasons = _op_reasons(
        summary,
        base,
        tol,
        time_judged and whole,
        totals,
        walls is None,
        other_ops_differ,
        sessions,
        widths,
        held,
        op_waits,
        switched,
    )
    explained = sorted(
        {r.op for r in reasons if r.op in switched and r.unit == "ns" and r.kind == "slower"}
    )
    if explained:
        notes.append(
            f"{_names(explained)} ran slower but left its CPU in nearly every round, and "
            "its fastest round is within tolerance: a span switched out can run longer than "
            "its work and its wait (by up to 80% on a shared VM), so its time explains the "
            "test's time and fails no test alone"
        )
    if held:
        notes.append(
            f"{_names(held)} ran slower beyond tolerance but fail{'s' if len(held) == 1 else ''} "
            "no test alone here: rounds of this run or of the baseline waited for a CPU, and "
            "processes running beside a test slow library code by 20-70% without a wait "
            "to measure; a library op's time explains the test's time instead"
        )
    if untold is not None:
        if any(r.unit == "ns" and r.status == "regressed" for r in reasons):
            # A scope failed alone: the test's time was judged, by that op.
            notes.append(f"the test's {untold}; that time is not judged, its ops' are")
        else:
            busy = f"time not judged: the test's {untold}"
            time_judged = False
            notes.append(busy)
    statuses = {m.status for m in metrics} | {r.status for r in reasons}
    status: Status = (
        "regressed" if "regressed" in statuses else "improved" if "improved" in statuses else "pass"
    )
    if "improved" in statuses:
        notes.append(f"some figures improved beyond tolerance; {UPDATE_HINT}")
    pools = machine.threads_differ(baseline.machine) if machine is not None else None
    if pools is not None:
        notes.append(pools)
    return Verdict(
        status=status,
        metrics=tuple(metrics),
        reasons=tuple(reasons),
        notes=tuple(notes),
        time_judged=time_judged,
        baseline_recorded_at=baseline.recorded_at,
        speed_change=speed_change,
        time_not_judged=busy,
        time_undecided=time_judged
        and _times_to_confirm(summary, base, tol, whole and walls is None, sessions, widths),
        work_time=walls is not None,
        varying=_varying(base, tol),
    )


def judges_time(
    baseline: BaselineEntry, rounds: int, fingerprint: str, tol: Tolerances, force_time: bool
) -> bool:
    """Whether a summary of ``rounds`` rounds measured on ``fingerprint`` has its times
    judged against ``baseline``: both sides have ``time_min_rounds`` rounds and the
    baseline was recorded on this machine, or ``force_time``."""
    same_machine = baseline.machine.fingerprint == fingerprint
    enough = min(rounds, baseline.summary.rounds) >= tol.time_min_rounds
    return force_time or (same_machine and enough)


def _times_to_confirm(
    now: TestSummary,
    base: TestSummary,
    tol: Tolerances,
    ops: bool,
    sessions: Sessions,
    widths: Widths | None = None,
) -> bool:
    """Whether the wall time, an op's self time or the device time, judged (at or above
    the floor), is slower than the baseline by more than ``CONFIRM_BAND`` of the time
    tolerance: what confirmation rounds should settle.  Without ``ops`` (events were
    dropped), only the wall time is judged."""
    widths = widths or Widths()
    pairs = [(base.wall_time, now.wall_time, widths.test or tol.time)]
    if ops:
        # Only an op that could fail the test alone (OP_ALONE_TOLERANCES): a smaller one
        # explains, and more rounds for it would buy nothing.
        alone = OP_ALONE_TOLERANCES * tol.time * tol.figure(base.wall_time)
        pairs += [
            (op.self_cpu_time, now.ops[key].self_cpu_time, widths.of_op(key, tol))
            for key, op in base.ops.items()
            if key in now.ops
            and not (key == OTHER_OPS and now.left_out != base.left_out)
            and tol.figure(now.ops[key].self_cpu_time) - tol.figure(op.self_cpu_time) >= alone
            and _steady(op.self_cpu_time, sessions, tol)
        ]
    if ops and base.device_time is not None and now.device_time is not None:
        pairs.append((base.device_time, now.device_time, tol.time))
    for b_stats, c_stats, width in pairs:
        b, c = session_bounds(b_stats, sessions, tol)[1], tol.figure(c_stats)
        if max(b, c) >= tol.min_time_ns and c > b * (1 + width * CONFIRM_BAND):
            return True
    return False


def _on_work(
    metrics: list[MetricRow], walls: tuple[TimeStats, TimeStats], tol: Tolerances
) -> list[MetricRow]:
    """The rows of a verdict judged on work time: the judged row is named "work time"
    (as a wall-time regression it would be read as one), and the measured wall time is
    shown beside it, not judged."""
    out = []
    for row in metrics:
        if row.metric == "wall time":
            base, now = walls
            out.append(
                _row("wall time", "ns", tol.figure(base), tol.figure(now), tol.time, "not judged")
            )
            row = dataclasses.replace(row, metric=WORK_TIME)
        out.append(row)
    return out


def _totals_status(metrics: list[MetricRow]) -> dict[str, RowStatus]:
    """Status of each test-level total an op figure belongs to (all memory rows as one)."""
    status = {m.metric: m.status for m in metrics}
    memory = {m.status for m in metrics if m.unit in ("bytes", "allocations")}
    status["memory"] = (
        "regressed" if "regressed" in memory else "improved" if "improved" in memory else "pass"
    )
    return status


def _change(baseline: float, now: float) -> float | None:
    """The relative change, signed by the direction of ``now``: an op's self memory can be
    negative (it frees more than it allocates), and -7.5 MB -> -8.2 MB is a fall."""
    if baseline == 0:
        return None if now == 0 else math.inf
    return (now - baseline) / abs(baseline)


def judge_exact(span: Span, now: int, tolerance: float | None, floor: int = 0) -> RowStatus:
    """A deterministic figure ``now`` against the baseline's ``(low, high)``, widened by
    ``tolerance`` and by ``floor`` (absolute); a figure that never varied has low == high.

    A range that varied is first widened by its own width on each side: the range of n
    recorded values holds the next value with probability (n - 1) / (n + 1) only (15
    rounds: 88%), and a one-round gate run of a test whose FLOPs vary from round to round
    fell outside it in 2 of 3 unchanged runs of scikit-learn's tests."""
    if tolerance is None:
        return "info"
    low, high = span
    if high > low:
        width = high - low
        low, high = low - width, high + width
    # Tolerances are shares of the figure's size, so of its magnitude: a negative figure
    # (an op's self memory when it frees more than it allocates) moves the same way.
    if now - high > max(floor, tolerance * abs(high)):
        return "regressed"
    if low - now > max(floor, tolerance * abs(now)):
        return "improved"
    return "pass"


_RANGED_METRICS = {
    "flops": ("flops", "flops"),
    "op_count": ("op count", "ops"),
    "peak_bytes": ("peak memory", "bytes"),
    "allocated_bytes": ("allocated memory", "bytes"),
    "allocations": ("allocations", "allocations"),
    "leaked_bytes": ("leaked memory", "bytes"),
    "device_memory_bytes": ("device memory peak", "bytes"),
}
"""``TestSummary.ranges`` names -> (metric row name, unit)."""


def _varying(base: TestSummary, tol: Tolerances) -> tuple[VaryingFigure, ...]:
    """The figures whose range weakens their gate: a spread of bytes within the memory
    floor (allocator granularity) weakens nothing, and a report listing it would be noise."""
    figures = (  # in the rows' order, however the file listed them
        VaryingFigure(*metric, *base.ranges[name])
        for name, metric in _RANGED_METRICS.items()
        if name in base.ranges
    )
    return tuple(f for f in figures if f.unit != "bytes" or f.high - f.low > tol.memory_floor_bytes)


class Sessions(NamedTuple):
    """A baseline's pooled sessions, as a time verdict uses them: the rounds of each (in
    the samples' order), and whether each ran in the pooled rounds' speed phase."""

    counts: tuple[int, ...] = ()
    in_phase: tuple[bool, ...] = ()

    @classmethod
    def of(cls, base: TestSummary) -> Sessions:
        """``base``'s sessions; a session whose Python speed reference ran more than
        ``SESSION_PHASE`` off the pooled rounds' median is out of phase."""
        ref = base.speed_ref
        if len(base.sessions) < 2:
            return NO_SESSIONS
        if ref is None or len(ref.samples_ns) != sum(base.sessions):
            return cls(base.sessions, (True,) * len(base.sessions))
        pooled = statistics.median(ref.samples_ns)
        in_phase, start = [], 0
        for n in base.sessions:
            own = statistics.median(ref.samples_ns[start : start + n])
            start += n
            in_phase.append(abs(own / pooled - 1) <= SESSION_PHASE)
        return cls(base.sessions, tuple(in_phase))


NO_SESSIONS = Sessions()


@dataclass(frozen=True)
class Widths:
    """The tolerances times are judged beyond where this machine's sessions move them
    more than the time tolerance allows (``spread.py``): the test's time, and each op's
    time where it could fail the test alone."""

    test: float | None = None
    ops: Mapping[str, float] = dataclasses.field(default_factory=dict)

    @classmethod
    def of(cls, base: TestSummary, spreads: Spreads, tol: Tolerances) -> Widths:
        if not spreads:
            return cls()
        # Whole percents: a tolerance is read, and 25.77% says no more than 26%.
        test = round(test_allowance(base, spreads, tol.statistic), 2)
        ops = {key: round(allowance(spreads[key]), 2) for key in base.ops if key in spreads}
        return cls(
            test if test > tol.time else None,
            {key: width for key, width in ops.items() if width > tol.time},
        )

    def of_op(self, key: str, tol: Tolerances) -> float:
        return self.ops.get(key, tol.time)


def _library_moved(
    metrics: list[MetricRow], now: TestSummary, base: TestSummary, tol: Tolerances
) -> tuple[list[MetricRow], str | None]:
    """The rows, with a test-level time that regressed only by its library ops' slowdowns
    marked not judged, and why (``"wall time moved +30.0% with ..."``); ``(metrics, None)``
    where none did.

    Called where other processes ran beside the test (``_waited``): they share caches and
    memory bandwidth with its library code, which then runs 20-70% slower with no wait to
    measure, and a test made mostly of such calls moves beyond tolerance with it.  A time
    whose change less its library ops' added time (each op's judged figure, now less the
    baseline's, where it grew) is within tolerance cannot be told from that; one that
    stays beyond it (a Python scope, or the test's own code, slower) is judged as ever.
    """

    def why(row: MetricRow, baseline: float, now_total: float, change: float) -> str | None:
        grown = {
            key: tol.figure(c.self_cpu_time) - tol.figure(b.self_cpu_time)
            for key, c in now.ops.items()
            if speed.is_native(key) and (b := base.ops.get(key)) is not None
        }
        added = sum(d for d in grown.values() if d > 0)
        rest = (now_total - added - baseline) / baseline
        if added <= 0 or row.tolerance is None or rest > row.tolerance:
            return None
        slowest = sorted((k for k, d in grown.items() if d > 0), key=lambda k: -grown[k])
        return (
            f"{row.metric} moved {change:+.1%} with "
            f"{_names(slowest[:3])}{' and others' if len(slowest) > 3 else ''}, "
            f"{rest:+.1%} without them, while other processes ran beside it (a round "
            "waited for a CPU): they slow library code with no wait to measure"
        )

    return _left_unjudged(metrics, why)


def _left_unjudged(
    metrics: list[MetricRow], why: Callable[[MetricRow, float, float, float], str | None]
) -> tuple[list[MetricRow], str | None]:
    """The rows with each regressed test-level time (wall or work time) that ``why`` (the
    row, its baseline, now and change) explains marked not judged, and the reason."""
    out: list[MetricRow] = []
    reason = None
    for row in metrics:
        if (
            row.metric in ("wall time", WORK_TIME)
            and row.status == "regressed"
            and row.baseline
            and row.now is not None
            and row.change is not None
        ):
            because = why(row, row.baseline, row.now, row.change)
            if because is not None:
                row = dataclasses.replace(row, status="not judged")
                reason = because
        out.append(row)
    return out, reason


UNIFORM_PARTS = 3
UNIFORM_SHARE = 0.05
"""A test's time that regressed with every part of it slower alike is not judged
(:func:`_uniformly_slower`) when it has at least ``UNIFORM_PARTS`` parts of at least
``UNIFORM_SHARE`` of its time each (ops, and its own code between them)."""


def _uniformly_slower(
    metrics: list[MetricRow], now: TestSummary, base: TestSummary, tol: Tolerances
) -> tuple[list[MetricRow], str | None]:
    """The rows, with a test-level time marked not judged where every sizeable part of the
    test ran slower (:func:`_alike`) with the same op counts, and why.

    A code change slows some ops, or adds work that the op counts, FLOPs or bytes show;
    one that slows a test's Python asserts, its LAPACK calls, its ufuncs and its own code
    alike, with every count the same, is a slower machine.  On this VM such phases ran
    whole sessions 20-50% slower while the speed references moved 0-24% (numpy's
    ``test_linalg`` in bench/busy_study.py: ``assert_array_compare``, ``logical_and.reduce``
    and ``linalg.qr`` 30-75% slower together).  A test made of fewer parts is judged as
    ever: one slower op could be all of it.
    """

    def why(row: MetricRow, baseline: float, now_total: float, change: float) -> str | None:
        parts = _part_changes(now, base, tol, baseline, now_total)
        if parts is None or not _alike(list(parts.values()), tol.time):
            return None
        low, high = min(parts.values()), max(parts.values())
        return (
            f"{row.metric} moved {change:+.1%} with all {len(parts)} of its parts "
            f"slower alike ({low:+.0%} to {high:+.0%}) and the same op counts: a slow "
            "phase of the machine that the speed references did not follow, not a "
            "code change"
        )

    return _left_unjudged(metrics, why)


def _alike(changes: list[float], tolerance: float) -> bool:
    """Whether parts' relative changes are a slowdown of them all: at least
    ``UNIFORM_PARTS`` of them, each slower by more than half the tolerance.

    Re-scored on four kept bench/busy_study.py runs (2026-11-25): numpy's ``test_linalg``
    false failures 53 -> 16 of 5,292; no synthetic scenario's changed; 1-6 slowed tests a
    scenario, whose slowed scope ran in such a phase, became not judged (of the judged,
    92-97% still caught).  Also asking that no part be slower than the median part by
    more than the tolerance (so that a slower scope inside a slow phase stands out) kept
    32 false failures and not one of those slowed tests more."""
    return len(changes) >= UNIFORM_PARTS and min(changes) > tolerance / 2


def _part_changes(
    now: TestSummary, base: TestSummary, tol: Tolerances, base_total: float, now_total: float
) -> dict[str, float] | None:
    """Each sizeable part's relative change (ops by key, the test's own code as ``""``);
    None where an op's count differs (the work changed, not the machine)."""
    changes: dict[str, float] = {}
    own_base, own_now = base_total, now_total
    for key, b in base.ops.items():
        c = now.ops.get(key)
        if c is None:
            continue
        if c.count != b.count:
            return None
        bt, ct = tol.figure(b.self_cpu_time), tol.figure(c.self_cpu_time)
        own_base -= bt
        own_now -= ct
        if bt >= UNIFORM_SHARE * base_total:
            changes[key] = (ct - bt) / bt
    if set(now.ops) != set(base.ops):
        return None
    if own_base >= UNIFORM_SHARE * base_total:
        changes[""] = (own_now - own_base) / own_base
    return changes


def _waited(summary: TestSummary, tol: Tolerances) -> bool:
    """Whether a round of ``summary`` waited for a CPU beyond ``max_wait_share`` of its
    wall time: other processes ran on this machine, beside the test's thread too."""
    if tol.max_wait_share is None:
        return False
    clean = clean_rounds(summary, tol.max_wait_share)
    return clean is not None and len(clean) < summary.rounds


def _names(keys: Sequence[str]) -> str:
    quoted = [f"`{k}`" for k in keys]
    return quoted[0] if len(quoted) == 1 else ", ".join(quoted[:-1]) + " and " + quoted[-1]


def _widened(
    metrics: Sequence[MetricRow],
    base: TestSummary,
    widths: Widths,
    tol: Tolerances,
    sessions: Sessions = NO_SESSIONS,
) -> str | None:
    """The note of a test's time beyond its tolerance that passed because this machine's
    sessions move its ops' times more (``spread.py``); None when that changed nothing."""
    width = widths.test
    if width is None:
        return None
    row = next((m for m in metrics if m.metric == "wall time"), None)
    if row is None or row.status != "pass" or row.change is None or abs(row.change) <= tol.time:
        return None
    high = session_bounds(base.wall_time, sessions, tol)[1]
    of = (
        f"{width:.0%} of its slowest pooled session ({high / 1e6:.3g} ms)"
        if high > tol.figure(base.wall_time)
        else f"{width:.0%}"
    )
    if not widths.ops:
        moves = "the times of this file's tests"
    else:
        moving = sorted(widths.ops, key=lambda k: -tol.figure(base.ops[k].self_cpu_time))[:3]
        moves = f"the times of {_names(moving)} by up to {max(widths.ops[k] for k in moving):.0%}"
    return (
        f"this machine moves {moves} from one session to the next (their spread over this "
        f"file's baseline tests): the test's time is judged beyond {of} here, not "
        f"{tol.time:.0%}"
    )


def _judge_time(
    base: TimeStats,
    now: TimeStats,
    tol: Tolerances,
    judged: bool,
    sessions: Sessions = NO_SESSIONS,
) -> RowStatus:
    if not judged:
        return "not judged"
    b, c = tol.figure(base), tol.figure(now)
    if max(b, c) < tol.min_time_ns:
        return "not judged"
    low, high = session_bounds(base, sessions, tol)
    enough = min(len(base.samples_ns), len(now.samples_ns)) >= tol.min_rounds
    if c > high * (1 + tol.time):
        if not enough:
            return "regressed"
        scaled = [s * (1 + tol.time) for s in base.samples_ns]
        p = mann_whitney_greater(now.samples_ns, scaled)
        return "regressed" if p < tol.alpha else "pass"
    if c * (1 + tol.time) < low:
        if not enough:
            return "improved"
        scaled = [s * (1 + tol.time) for s in now.samples_ns]
        p = mann_whitney_greater(base.samples_ns, scaled)
        return "improved" if p < tol.alpha else "pass"
    return "pass"


def session_figures(stats: TimeStats, counts: tuple[int, ...], tol: Tolerances) -> list[int]:
    """The judged statistic of each pooled session's rounds of ``stats`` (``counts``:
    rounds per session, in the samples' order); empty for one session."""
    if len(counts) < 2 or sum(counts) != len(stats.samples_ns):
        return []
    out, start = [], 0
    for n in counts:
        part = stats.samples_ns[start : start + n]
        start += n
        out.append(min(part) if tol.statistic == "min" else round(statistics.median(part)))
    return out


def session_bounds(stats: TimeStats, sessions: Sessions, tol: Tolerances) -> tuple[int, int]:
    """What a time is judged beyond (module docstring): the baseline's statistic, or the
    fastest and slowest of its in-phase pooled sessions' where they lie outside it."""
    figure = tol.figure(stats)
    per_session = [
        f
        for f, in_phase in zip(
            session_figures(stats, sessions.counts, tol), sessions.in_phase, strict=False
        )
        if in_phase
    ]
    return min([figure, *per_session]), max([figure, *per_session])


def _beyond(
    base: TimeStats, now: int, sessions: Sessions, tol: Tolerances, tolerance: float | None
) -> bool:
    """Whether ``now`` lies beyond ``tolerance`` (None: the time tolerance) of the range of
    ``base``'s sessions, either way."""
    width = tol.time if tolerance is None else max(tol.time, tolerance)
    low, high = session_bounds(base, sessions, tol)
    return now > high * (1 + width) or now * (1 + width) < low


def _steady(stats: TimeStats, sessions: Sessions, tol: Tolerances) -> bool:
    """Whether a time's in-phase pooled sessions agree within its tolerance (one session:
    yes)."""
    low, high = session_bounds(stats, sessions, tol)
    return high <= max(low, 1) * (1 + tol.time)


def _within_sessions(
    now: TimeStats, base: TestSummary, tol: Tolerances, sessions: Sessions
) -> str | None:
    """The note of a test's time beyond tolerance of its baseline's pooled rounds that
    passed because it is within tolerance of the slowest session (or the fastest)."""
    b, c = tol.figure(base.wall_time), tol.figure(now)
    low, high = session_bounds(base.wall_time, sessions, tol)
    slower = b * (1 + tol.time) < c <= high * (1 + tol.time)
    faster = c * (1 + tol.time) < b and c * (1 + tol.time) >= low
    if not (slower or faster):
        return None
    n = sum(sessions.in_phase)
    return (
        f"the time is {c / b - 1:+.0%} against the baseline's pooled rounds, within tolerance "
        f"of its {'slowest' if slower else 'fastest'} session: its {n} sessions ran "
        f"{low / 1e6:.3g}-{high / 1e6:.3g} ms, and a time that varies between sessions is "
        "judged beyond their range"
    )


def _row(
    metric: str,
    unit: str,
    baseline: float,
    now: float,
    tolerance: float | None,
    status: RowStatus,
    note: str = "",
) -> MetricRow:
    return MetricRow(metric, unit, baseline, now, _change(baseline, now), tolerance, status, note)


def _metric_rows(
    now: TestSummary,
    base: TestSummary,
    tol: Tolerances,
    time_judged: bool,
    whole: bool,
    sessions: Sessions = NO_SESSIONS,
    width: float | None = None,
) -> list[MetricRow]:
    """The test-level rows; without ``whole`` (events dropped) the sums of op figures
    (FLOPs, op count, device time) are shown, not judged; ``width``, wider than the time
    tolerance, is the test's time's (``Widths``)."""
    time_tol = dataclasses.replace(tol, time=width) if width is not None else tol
    wall = _judge_time(base.wall_time, now.wall_time, time_tol, time_judged, sessions)
    fig = tol.figure
    partial: RowStatus = "not judged"
    rows = [
        _row("wall time", "ns", fig(base.wall_time), fig(now.wall_time), time_tol.time, wall),
        _row("cpu time", "ns", fig(base.cpu_time), fig(now.cpu_time), None, "info"),
        _row(
            "flops",
            "flops",
            base.flops,
            now.flops,
            tol.flops,
            judge_exact(base.span("flops"), now.flops, tol.flops) if whole else partial,
        ),
        _row(
            "op count",
            "ops",
            base.op_count,
            now.op_count,
            tol.count,
            judge_exact(base.span("op_count"), now.op_count, tol.count) if whole else partial,
        ),
    ]
    if base.memory is not None and now.memory is not None:
        for key in ("peak_bytes", "allocated_bytes", "allocations", "leaked_bytes"):
            name, unit = _RANGED_METRICS[key]
            b, c = getattr(base.memory, key), getattr(now.memory, key)
            floor = tol.memory_floor_bytes if unit == "bytes" else 0
            status = judge_exact(base.span(key), c, tol.memory, floor)
            rows.append(_row(name, unit, b, c, tol.memory, status))
    if base.device_time is not None and now.device_time is not None:
        device = _judge_time(
            base.device_time, now.device_time, tol, time_judged and whole, sessions
        )
        rows.append(
            _row(
                "device time",
                "ns",
                fig(base.device_time),
                fig(now.device_time),
                tol.time,
                device,
            )
        )
    if base.device_memory_bytes is not None and now.device_memory_bytes is not None:
        b, c = base.device_memory_bytes, now.device_memory_bytes
        status = judge_exact(
            base.span("device_memory_bytes"), c, tol.memory, tol.memory_floor_bytes
        )
        rows.append(_row("device memory peak", "bytes", b, c, tol.memory, status))
    rows.append(_row("op time share", "share", base.op_time_share, now.op_time_share, None, "info"))
    return rows


def _op_reasons(
    now: TestSummary,
    base: TestSummary,
    tol: Tolerances,
    time_judged: bool,
    metric_status: dict[str, RowStatus],
    clean: bool = True,
    other_ops_differ: bool = False,
    sessions: Sessions = NO_SESSIONS,
    widths: Widths | None = None,
    held: list[str] | None = None,
    op_waits: bool = False,
    switched: frozenset[str] = frozenset(),
) -> list[OpReason]:
    """Op-level changes; ``clean``: the op times are of clean rounds (not of work rounds,
    where they are explanations only); ``other_ops_differ``: ``[other ops]`` folds other
    op keys on the two sides, so its time is no one op's and cannot fail a test alone;
    ``widths``: the tolerance an op's time must exceed to fail a test alone; ``held``,
    where given (a side's rounds waited for a CPU), collects the library ops whose time
    would have failed the test alone and now only explains it; ``op_waits``: on work
    rounds, Python scopes' times are judged as on clean ones (``compare``), except those
    in ``switched`` (``waiting.switched_out``)."""
    wall_ref = max(tol.figure(base.wall_time), 1)
    flops_ref = max(base.flops, 1)
    memory_ref = max(base.memory.allocated_bytes if base.memory else 0, 1)
    count_ref = max(base.op_count, 1)
    reasons: list[OpReason] = []
    for key in sorted(set(now.ops) | set(base.ops)):
        c, b = now.ops.get(key), base.ops.get(key)
        if b is None and c is not None:
            reasons.append(_presence(key, "new", c, tol.figure(c.self_cpu_time) / wall_ref))
        elif c is None and b is not None:
            reasons.append(_presence(key, "vanished", b, tol.figure(b.self_cpu_time) / wall_ref))
        elif b is not None and c is not None:
            reasons.extend(
                _op_changes(
                    key,
                    b,
                    c,
                    tol,
                    time_judged,
                    metric_status,
                    (wall_ref, flops_ref, memory_ref, count_ref),
                    clean or (op_waits and scope_judged_on_work(key) and key not in switched),
                    alone=not (other_ops_differ and key == OTHER_OPS),
                    sessions=sessions,
                    alone_tolerance=(widths or Widths()).of_op(key, tol),
                    held=held if library_like(key) else None,
                )
            )
    severity = {"regressed": 0, "improved": 1}
    reasons.sort(key=lambda r: (severity.get(r.status, 2), -r.impact, r.op, r.kind))
    return reasons


def _presence(key: str, kind: str, op: OpSummary, impact: float) -> OpReason:
    return OpReason(
        op=key,
        kind=kind,
        unit="ops",
        baseline=op.count if kind == "vanished" else None,
        now=op.count if kind == "new" else None,
        change=None,
        status="info",
        impact=impact,
    )


class _ExactFigure(NamedTuple):
    """One deterministic figure of an op, baseline and now, with how to judge and word it."""

    kind_up: str
    kind_down: str
    unit: str
    baseline: int
    now: int
    span: Span
    """The baseline's ``(low, high)`` of the figure (``OpSummary.span``)."""
    metric: str
    tolerance: float | None
    floor: int
    ref: int
    """The test's total of ``unit``: ``impact`` is the change as a share of it."""


def _op_changes(
    key: str,
    b: OpSummary,
    c: OpSummary,
    tol: Tolerances,
    time_judged: bool,
    metric_status: dict[str, RowStatus],
    refs: tuple[int, int, int, int],
    clean: bool,
    alone: bool = True,
    sessions: Sessions = NO_SESSIONS,
    alone_tolerance: float | None = None,
    held: list[str] | None = None,
) -> list[OpReason]:
    wall_ref, flops_ref, memory_ref, count_ref = refs
    out: list[OpReason] = []
    bt, ct = tol.figure(b.self_cpu_time), tol.figure(c.self_cpu_time)
    time_status = _judge_time(b.self_cpu_time, c.self_cpu_time, tol, time_judged, sessions)
    test_time = metric_status.get(WORK_TIME, metric_status.get("wall time"))
    if time_status in ("pass", "not judged") and test_time in ("regressed", "improved"):
        # The test's time moved: an op that moved the same way beyond tolerance by its
        # statistic, by a share of the test's time that counts, explains it, whatever its
        # own rounds' Mann-Whitney test says or its time floor (a 0.9 ms scope 20% slower
        # in a test 35% slower is the reason, though too short to judge on its own).
        beyond = judge_exact((bt, bt), ct, tol.time)
        explains = beyond == test_time and abs(ct - bt) >= EXPLAINS_SHARE * wall_ref
        time_status = beyond if explains else "pass"
    if time_status != "pass" and time_status != "not judged":
        kind = "slower" if ct > bt else "faster"
        impact = abs(ct - bt) / wall_ref
        # An op's time is a reason for the test's time, not a tripwire of its own
        # (module docstring): it counts when the test's time moved the same way.
        # Alone, only an op whose time its baseline's sessions agreed on: one that moved
        # between them by more than its tolerance moves with what runs beside it.
        fails_alone = (
            alone
            and impact >= OP_ALONE_TOLERANCES * tol.time
            and _steady(b.self_cpu_time, sessions, tol)
            and _beyond(b.self_cpu_time, ct, sessions, tol, alone_tolerance)
        )
        if fails_alone and held is not None and test_time != time_status:
            fails_alone = False
            if clean and time_status == "regressed":
                held.append(key)
        counts = clean and (test_time == time_status or fails_alone)
        status: RowStatus = time_status if counts else "info"
        out.append(OpReason(key, kind, "ns", bt, ct, _change(bt, ct), status, impact))
    # An op's deterministic change fails only when the test's total of that figure fails:
    # work moved between ops is a change to explain, not a regression.
    exact = (
        _ExactFigure(
            "more flops",
            "fewer flops",
            "flops",
            b.flops,
            c.flops,
            b.span("flops"),
            "flops",
            tol.flops,
            0,
            flops_ref,
        ),
        _ExactFigure(
            "more memory",
            "less memory",
            "bytes",
            b.self_memory_bytes,
            c.self_memory_bytes,
            b.span("self_memory_bytes"),
            "memory",
            tol.memory,
            tol.memory_floor_bytes,
            memory_ref,
        ),
        _ExactFigure(
            "count",
            "count",
            "ops",
            b.count,
            c.count,
            b.span("count"),
            "op count",
            tol.count,
            0,
            count_ref,
        ),
    )
    for f in exact:
        if f.unit == "ops" and key == MEMORY_EVENT_NAME:
            # How many [memory] events there are says how they were recorded (one per
            # allocation for a trace, else one per thread), not what the code did.
            continue
        beyond = judge_exact(f.span, f.now, f.tolerance or 0.0, f.floor)
        if beyond == "pass" and not (f.unit == "ops" and not f.span[0] <= f.now <= f.span[1]):
            continue  # within tolerance; an op count outside its range is always worth a line
        judged = f.tolerance is not None and metric_status.get(f.metric) == beyond
        out.append(
            OpReason(
                key,
                f.kind_up if f.now > f.baseline else f.kind_down,
                f.unit,
                f.baseline,
                f.now,
                _change(f.baseline, f.now),
                beyond if judged else "info",
                abs(f.now - f.baseline) / f.ref,
            )
        )
    return out
