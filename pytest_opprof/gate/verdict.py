"""Compare a test's summary with its baseline: metric rows, op-level reasons, a status.

:func:`compare` takes three steps, each reading the one before: the time basis
(``time_basis.py``: which rounds of both sides, at which speed, judged or why not, on
wall or work time), the test's metric rows from it (``rows.py``), and the op reasons
(``reasons.py``), with the late steps of ``machine_moved.py`` between them.  The rules,
each threshold a :class:`Tolerances` field (``docs/gate.md`` has the numbers that chose
them):

* Deterministic figures (FLOPs, memory, op counts, host<->device traffic) regress beyond
  their tolerance of the baseline's range, a range that varied widened by its own width
  (:func:`judge_exact`); memory changes within ``memory_floor_bytes`` are ignored; op
  counts are judged only when ``count`` is set.  One this run's rounds disagree on is
  not judged where it moved (``rows.UNSTEADY``): the test draws its data anew each call.
* A time (the test's wall time, each op's self time, device time) regresses when its
  statistic (``median`` or ``min`` of its rounds) is beyond tolerance and, with
  ``min_rounds`` rounds on both sides, a one-sided Mann-Whitney test over the rounds
  agrees (p < ``alpha``); times under ``min_time_ns`` on both sides are not judged.
  Times are judged with ``time_min_rounds`` rounds on both sides on the baseline's
  machine, or with ``force_time``.
* A pooled baseline's time is judged beyond its slowest (fastest) in-phase session.
* Times are scaled to the baseline's machine speed (``speed.py``); beyond
  ``max_speed_change`` they are not judged.
* On a busy machine times are judged on clean rounds, else on work time, else not at
  all (``waiting.py``).
* An op's time is a reason for the test's time: it fails the test when the test's time
  moved the same way, or alone beyond ``OP_ALONE_TOLERANCES`` tolerances of the test's
  time on steady sessions and clean rounds; not a library op beside other processes.
* Times are judged no finer than this machine's sessions move them (``spread.py``).
* A test's time moved by library ops beside other processes, or slower in every part
  alike, is not judged (``machine_moved.py``).
* A judged time beyond ``CONFIRM_BAND`` of its tolerance asks for confirmation rounds
  (``time_undecided``); improvements never fail.
* Absolute budgets (``budgets.py``) are judged beside the comparison, with or without a
  baseline (``session.py``): one beyond its limit makes the verdict ``regressed``.
* So does a figure that crept against the history (``--opprof-history``, ``creep.py``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from pytest_opprof.gate.budgets import BudgetRow
from pytest_opprof.gate.creep import Crept
from pytest_opprof.gate.judge import (
    RowStatus,
    Sessions,
    judge_exact,
    session_bounds,
    session_figures,
    steady,
)
from pytest_opprof.gate.machine import MachineInfo
from pytest_opprof.gate.machine_moved import Unjudged, library_moved, uniformly_slower
from pytest_opprof.gate.reasons import (
    OP_ALONE_TOLERANCES,
    OpReason,
    ReasonContext,
    leak_note,
    name_folded,
    op_reasons,
)
from pytest_opprof.gate.rows import (
    MOVED,
    RANGED_METRICS,
    MetricRow,
    VaryingFigure,
    json_change,
    metric_rows,
    unsteady,
    varying,
)
from pytest_opprof.gate.spread import Spreads
from pytest_opprof.gate.store import BaselineEntry
from pytest_opprof.gate.summary import OTHER_OPS, TestSummary, TimeStats
from pytest_opprof.gate.time_basis import BASELINE, TimeBasis, baseline_basis, judges_time
from pytest_opprof.gate.tolerance import Statistic, Tolerances
from pytest_opprof.gate.traffic_sites import traffic_note
from pytest_opprof.gate.unjudged import TimeUnjudged, fingerprint_differs

__all__ = [
    "CONFIRM_BAND",
    "NEW",
    "UPDATE_HINT",
    "MetricRow",
    "OpReason",
    "RowStatus",
    "Sessions",
    "Statistic",
    "Status",
    "TimeLimit",
    "Tolerances",
    "VaryingFigure",
    "Verdict",
    "compare",
    "compare_limits",
    "judge_exact",
    "judges_time",
    "session_bounds",
    "session_figures",
]

Status = Literal["pass", "regressed", "improved", "new"]

UPDATE_HINT = "run with --opprof-update-baselines to record the improvement"
CONFIRM_BAND = 1.0
"""A judged time slower than its baseline by more than this fraction of its tolerance
makes the verdict ``time_undecided`` (``docs/gate.md``, "Confirmation rounds")."""


@dataclass(frozen=True)
class TimeLimit:
    """A judged time of this run and the figure beyond which it is ``time_undecided``."""

    name: str
    """``wall time``, ``device time`` or the op's key."""
    limit_ns: float
    """Beyond this (by the judged statistic) the time asks for confirmation rounds: its
    baseline's bound widened by ``CONFIRM_BAND`` of its tolerance."""
    now: TimeStats
    """This run's judged rounds of the time (at the baseline's speed)."""
    figure: Callable[[TimeStats], int]
    """The judged statistic (``Tolerances.figure``)."""

    @property
    def beyond(self) -> bool:
        """The time is beyond its limit: more rounds could fail the test."""
        return self.figure(self.now) > self.limit_ns


CREPT = "crept"
"""The label of a test that only its creep against the history failed (``Verdict.label``)."""
OVER_BUDGET = "over budget"
"""The label of a test that only its absolute budgets failed (``Verdict.label``)."""


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
    time_unjudged: TimeUnjudged | None = None
    """Why the test's time was not judged at all (another machine, too few rounds, a busy
    machine, too short ...: ``unjudged.REASONS``); None where it was."""
    unsteady: tuple[VaryingFigure, ...] = ()
    """Deterministic figures that moved beyond tolerance but that this run's rounds
    disagree on, each with the range they spanned: not judged (``rows.UNSTEADY``)."""
    basis: str = BASELINE
    """What the times were judged against (``TimeBasis.kind``): ``baseline`` (the committed
    baselines), or an A/B run's base revision (``A/B against REF (sha)``,
    ``pytest_opprof/ab/``)."""
    budgets: tuple[BudgetRow, ...] = ()
    """The test's absolute budgets judged (``budgets.py``), with or without a baseline."""
    crept: tuple[Crept, ...] = ()
    """The figures that crept beyond tolerance against the history (``--opprof-history``,
    ``creep.py``), with or without a baseline."""

    @property
    def failed(self) -> bool:
        return self.status == "regressed"

    @property
    def exact_moved(self) -> bool:
        """A deterministic figure (FLOPs, op count, memory) judged beyond tolerance of its
        baseline, either way: a round more of the same code tells a figure the test's
        data decides (:attr:`unsteady` once it differs) from a change of the code."""
        return any(m.status in MOVED and m.metric in _EXACT_METRICS for m in self.metrics)

    @property
    def over_budget(self) -> tuple[BudgetRow, ...]:
        """The budgets the test went beyond: each fails it (``status`` is then ``regressed``)."""
        return tuple(row for row in self.budgets if row.status == "over")

    def with_budgets(self, rows: tuple[BudgetRow, ...]) -> Verdict:
        """This verdict with ``rows`` judged: ``regressed`` when one is over."""
        if not rows:
            return self
        over = any(row.status == "over" for row in rows)
        return dataclasses.replace(self, budgets=rows, status="regressed" if over else self.status)

    def with_crept(self, crept: tuple[Crept, ...]) -> Verdict:
        """This verdict with the figures that crept against the history: ``regressed``
        (as a budget it went beyond, each fails the test)."""
        if not crept:
            return self
        return dataclasses.replace(self, crept=crept, status="regressed")

    @property
    def crept_only(self) -> bool:
        """Whether only its creep against the history failed it (no figure regressed
        against a baseline, no budget went over): its text says CREPT, not REGRESSED."""
        return bool(self.crept) and not self.over_budget and not self._rows_regressed()

    @property
    def label(self) -> str:
        """The status people read: :data:`OVER_BUDGET` or :data:`CREPT` where that alone
        failed the test (its ``status`` is ``regressed``), else ``status``."""
        if self.crept_only:
            return CREPT
        if self.over_budget and not self.crept and not self._rows_regressed():
            return OVER_BUDGET
        return self.status

    def _rows_regressed(self) -> bool:
        """Whether a figure or an op regressed against the baseline (or the A/B base)."""
        statuses = [m.status for m in self.metrics] + [r.status for r in self.reasons]
        return "regressed" in statuses

    def to_json(self) -> dict[str, object]:
        return {
            "status": self.status,
            "time_judged": self.time_judged,
            "time_not_judged": self.time_not_judged,
            "time_unjudged": self.time_unjudged.to_json() if self.time_unjudged else None,
            "time_judged_on": ("work time" if self.work_time else "wall time")
            if self.time_judged
            else None,
            "baseline_recorded_at": self.baseline_recorded_at,
            "time_basis": self.basis,
            "speed_change": json_change(self.speed_change),
            "metrics": [row.to_json() for row in self.metrics],
            "reasons": [reason.to_json() for reason in self.reasons],
            "notes": list(self.notes),
            "varying": [figure.to_json() for figure in self.varying],
            **({"budgets": [row.to_json() for row in self.budgets]} if self.budgets else {}),
            **({"crept": [c.to_json() for c in self.crept]} if self.crept else {}),
            **({"unsteady": [f.to_json() for f in self.unsteady]} if self.unsteady else {}),
        }


_EXACT_METRICS = frozenset(metric for metric, _ in RANGED_METRICS.values())

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
    unmeasured: str | None = None,
) -> Verdict:
    """Judge ``summary`` (measured on the machine ``fingerprint``) against ``baseline``;
    ``machine``, the record of now, lets a note say that the thread pools differ;
    ``spreads``, how this machine's sessions move each op's time (``spread.py``, from the
    baseline's file), widens the tolerance of times that move more than it allows;
    ``op_waits``: the op times of both sides have each op's wait for a CPU left out
    (``native/switches.c`` works in this process, and the baseline, recorded on a machine
    of the same fingerprint, is taken to have had it too), so that on rounds judged as
    work time a Python scope's time is judged as on clean rounds
    (``waiting.scope_judged_on_work``); ``unmeasured``: why ``summary``'s op figures,
    FLOPs and op counts were not measured (``Plan.unmeasured``), which are then not
    judged, nor where the baseline's were not (``MachineInfo.ops_unmeasured``): a figure
    not measured reads as 0, never as an improvement or a regression."""
    return compare_limits(
        summary,
        baseline,
        fingerprint=fingerprint,
        tolerances=tolerances,
        force_time=force_time,
        machine=machine,
        spreads=spreads,
        op_waits=op_waits,
        unmeasured=unmeasured,
    )[0]


def compare_limits(
    summary: TestSummary,
    baseline: BaselineEntry | None,
    *,
    fingerprint: str,
    tolerances: Tolerances | None = None,
    force_time: bool = False,
    machine: MachineInfo | None = None,
    spreads: Spreads | None = None,
    op_waits: bool = False,
    unmeasured: str | None = None,
) -> tuple[Verdict, tuple[TimeLimit, ...]]:
    """:func:`compare`'s verdict, and its judged times that could fail the test, each with
    its limit (none where times are not judged): what the rounds policy reads to stop a
    test's rounds once none of them could (``plugin/round_noise.py``)."""
    tol = tolerances or Tolerances()
    if baseline is None:
        return NEW, ()
    # 1. Every decision about times, made once, before any row.
    basis = baseline_basis(
        summary,
        baseline,
        fingerprint=fingerprint,
        tol=tol,
        force_time=force_time,
        spreads=spreads,
        op_waits=op_waits,
        unmeasured=unmeasured,
    )
    # 2. The test's rows from it; a test's time that the machine moved is then taken out
    # of judgement (``machine_moved.py``).
    rows = metric_rows(basis, tol)
    moved = library_moved(rows.rows, basis, tol)
    uniform = uniformly_slower(rows.rows, basis, tol) if moved is None else None
    uniform_note = f"time not judged: the test's {uniform.why}" if uniform else None
    if uniform_note is not None:
        # Every part moved alike: no op's time is any more a code change than the
        # test's, so none is judged alone either.
        basis = basis.unjudged(uniform_note)
    metrics = moved.rows if moved else uniform.rows if uniform else rows.rows
    # 3. The op reasons, which settle a time that library ops moved.
    ctx = ReasonContext.of(basis, metrics, tol)
    found = op_reasons(ctx)
    found = found._replace(
        reasons=name_folded(found.reasons, summary, basis.now.ops, ctx.other_ops_differ)
    )
    basis, settled = _settle_library(basis, moved, found.reasons)
    limits = _time_limits(basis, tol)
    statuses = {m.status for m in metrics} | {r.status for r in found.reasons}
    status: Status = (
        "regressed" if "regressed" in statuses else "improved" if "improved" in statuses else "pass"
    )
    pools = machine.threads_differ(baseline.machine) if machine is not None else None
    notes = (
        *basis.notes,
        *rows.notes,
        uniform_note,
        *found.notes,
        leak_note(metrics, summary),
        traffic_note(metrics, basis.base, summary),
        settled,
        f"some figures improved beyond tolerance; {UPDATE_HINT}"
        if "improved" in statuses
        else None,
        pools,
    )
    verdict = Verdict(
        status=status,
        metrics=metrics,
        reasons=found.reasons,
        notes=tuple(note for note in notes if note is not None),
        time_judged=basis.judged,
        baseline_recorded_at=baseline.recorded_at,
        speed_change=basis.speed_change,
        time_not_judged=basis.not_judged,
        time_undecided=any(limit.beyond for limit in limits),
        work_time=basis.work_time,
        varying=varying(basis.base, tol),
        unsteady=unsteady(metrics, summary),
        time_unjudged=_time_unjudged(basis, baseline, machine, tol),
        basis=basis.kind,
    )
    return verdict, limits


def _time_unjudged(
    basis: TimeBasis, baseline: BaselineEntry, machine: MachineInfo | None, tol: Tolerances
) -> TimeUnjudged | None:
    """Why no time of the test was judged (``unjudged.REASONS``); None where one was."""
    # Under the floor on both sides (``judge.judge_time``), and so are its ops: whatever
    # else kept it from being judged, nothing but a lower floor would have it judged.
    fig = tol.figure
    if max(fig(basis.base.wall_time), fig(basis.now.wall_time)) < tol.min_time_ns:
        return TimeUnjudged("short", floor_ns=tol.min_time_ns)
    reason = basis.unjudged_reason
    if reason == "machine":
        differs = fingerprint_differs(machine, baseline.machine) if machine is not None else ()
        return TimeUnjudged(reason, differs=differs)
    if reason == "rounds":
        return TimeUnjudged(reason, rounds_needed=tol.time_min_rounds)
    return TimeUnjudged(reason) if reason is not None else None


def _settle_library(
    basis: TimeBasis, moved: Unjudged | None, reasons: tuple[OpReason, ...]
) -> tuple[TimeBasis, str | None]:
    """The basis once the op reasons are known, where library ops beside other processes
    moved the test's time (``machine_moved.library_moved``), and the note that says so:
    where a scope failed the test alone its time was judged, by that op; otherwise the
    test's time is not judged at all."""
    if moved is None:
        return basis, None
    if any(r.unit == "ns" and r.status == "regressed" for r in reasons):
        return basis, f"the test's {moved.why}; that time is not judged, its ops' are"
    unjudged = basis.unjudged(f"time not judged: the test's {moved.why}")
    return unjudged, unjudged.not_judged


def _time_limits(basis: TimeBasis, tol: Tolerances) -> tuple[TimeLimit, ...]:
    """The judged times at or above the floor (the wall time, an op's self time, the
    device time), each with the figure beyond which it is ``time_undecided``: slower than
    the baseline by more than ``CONFIRM_BAND`` of the time tolerance, what confirmation
    rounds should settle.  Op times count only where they are judged (every event kept,
    clean rounds).  Empty where times are not judged."""
    if not basis.judged:
        return ()
    now, base, sessions, widths = basis.now, basis.base, basis.sessions, basis.widths
    ops = basis.whole and basis.walls is None
    pairs = [("wall time", base.wall_time, now.wall_time, widths.test or tol.time)]
    if ops:
        # Only an op that could fail the test alone (OP_ALONE_TOLERANCES): a smaller one
        # explains, and more rounds for it would buy nothing.
        alone = OP_ALONE_TOLERANCES * tol.time * tol.figure(base.wall_time)
        pairs += [
            (key, op.self_cpu_time, now.ops[key].self_cpu_time, widths.of_op(key, tol))
            for key, op in base.ops.items()
            if key in now.ops
            and not (key == OTHER_OPS and now.left_out != base.left_out)
            and tol.figure(now.ops[key].self_cpu_time) - tol.figure(op.self_cpu_time) >= alone
            and steady(op.self_cpu_time, sessions, tol)
        ]
    if ops and base.device_time is not None and now.device_time is not None:
        pairs.append(("device time", base.device_time, now.device_time, tol.time))
    limits = []
    for name, b_stats, c_stats, width in pairs:
        b, c = session_bounds(b_stats, sessions, tol)[1], tol.figure(c_stats)
        if max(b, c) >= tol.min_time_ns:
            limits.append(TimeLimit(name, b * (1 + width * CONFIRM_BAND), c_stats, tol.figure))
    return tuple(limits)
