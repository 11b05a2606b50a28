"""What a verdict judges times on: the rounds of both sides, at which speed, judged or why
not, on wall or work time.

:func:`baseline_basis` decides it once, for a test's summary against its committed
baseline, before any row is built: the rows and the op reasons only read it.  Each
decision and the rule behind it is in ``docs/gate.md``: whether times can be judged at
all (rounds, machine), which rounds (``waiting.py``: clean ones, or work time), the
machine's speed (``speed.py``: scaled to the baseline's, or beyond what scaling can
cross), whether every event was kept, and the pooled sessions and widths times are
judged beyond (``judge.py``).  A later step that takes the time out of judgement
(``machine_moved.py``) returns a new basis with :meth:`TimeBasis.unjudged`.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import NamedTuple

from pytest_opprof.gate import speed
from pytest_opprof.gate.judge import NO_SESSIONS, Sessions, Widths, session_bounds
from pytest_opprof.gate.spread import Spreads
from pytest_opprof.gate.store import BaselineEntry
from pytest_opprof.gate.summary import TestSummary, TimeStats
from pytest_opprof.gate.tolerance import Tolerances
from pytest_opprof.gate.trim import align
from pytest_opprof.gate.waiting import (
    as_work,
    clean_rounds,
    judged_rounds,
    switched_out,
    work_rounds,
)

BASELINE = "baseline"
"""The name of the basis of a test judged against its committed baseline."""
SPEED_NOTE_AT = 0.05
"""Machine-speed changes from this size on get a note in the verdict."""


@dataclass(frozen=True)
class TimeBasis:
    """The two sides a verdict's times are judged on, and how (``docs/gate.md``)."""

    now: TestSummary
    """This run's summary: its judged rounds, at the baseline's speed, as work time where
    ``walls`` is set."""
    base: TestSummary
    """The baseline's summary, chosen and scaled the same way."""
    judged: bool
    """Whether times are judged; deterministic figures always are."""
    not_judged: str | None = None
    """Why times are not judged although they could have been (a busy machine, a speed
    change beyond scaling, the machine moving the test's time), in one line."""
    unjudged_reason: str | None = None
    """Why times are not judged, as one of ``unjudged.REASONS``; None where they are."""
    speed_change: float | None = None
    """How much slower the speed reference ran than in the baseline (0.1 = 10%); None
    where times are not scaled."""
    walls: tuple[TimeStats, TimeStats] | None = None
    """Where the test-level time is work time, the measured wall times (baseline, now), to
    show beside it."""
    switched: frozenset[str] = frozenset()
    """Python scopes judged on work rounds that were switched out in nearly all of them
    (``waiting.UNSWITCHED_ROUNDS``) and whose fastest round is within tolerance."""
    whole: bool = True
    """No events were dropped on either side and the ops were captured now: op figures
    cover the whole test."""
    op_waits: bool = False
    """Each op's wait for a CPU was left out of its times on both sides
    (``native/switches.c``): on work rounds a Python scope's time is judged as on clean
    ones (``waiting.scope_judged_on_work``)."""
    co_run: bool = False
    """A round of either side waited for a CPU beyond ``max_wait_share``: other processes
    ran beside the test."""
    sessions: Sessions = NO_SESSIONS
    widths: Widths = dataclasses.field(default_factory=Widths)
    notes: tuple[str, ...] = ()
    """What the verdict says about these decisions, in the order they were made."""
    kind: str = BASELINE
    """Which basis this is (``Verdict.basis``)."""

    @property
    def work_time(self) -> bool:
        """The test-level time judged is work time (wall less the thread's wait)."""
        return self.walls is not None

    def unjudged(self, why: str, reason: str = "moved") -> TimeBasis:
        """This basis with its times no longer judged, because of ``why`` (``reason``: one
        of ``unjudged.REASONS``)."""
        return dataclasses.replace(self, judged=False, not_judged=why, unjudged_reason=reason)


def judges_time(
    baseline: BaselineEntry, rounds: int, fingerprint: str, tol: Tolerances, force_time: bool
) -> bool:
    """Whether a summary of ``rounds`` rounds measured on ``fingerprint`` has its times
    judged against ``baseline``: both sides have ``time_min_rounds`` rounds and the
    baseline was recorded on this machine, or ``force_time``."""
    same_machine = baseline.machine.fingerprint == fingerprint
    enough = min(rounds, baseline.summary.rounds) >= tol.time_min_rounds
    return force_time or (same_machine and enough)


def baseline_basis(
    summary: TestSummary,
    baseline: BaselineEntry,
    *,
    fingerprint: str,
    tol: Tolerances,
    force_time: bool = False,
    spreads: Spreads | None = None,
    op_waits: bool = False,
    unmeasured: str | None = None,
) -> TimeBasis:
    """The basis of ``summary`` (measured on ``fingerprint``) against ``baseline``; the
    arguments are :func:`~pytest_opprof.gate.verdict.compare`'s."""
    # A trimmed baseline keeps the ops that explain its test (trim.py): the other side's
    # ops that it left out are folded the same way, so they compare as "[other ops]".
    aligned, aligned_base = align(summary, baseline.summary)
    judgeable = judges_time(baseline, aligned.rounds, fingerprint, tol, force_time)
    rounds = (
        _chosen_rounds(aligned, aligned_base, tol.time_min_rounds, tol.max_wait_share, op_waits)
        if judgeable and tol.max_wait_share is not None
        else _Rounds(aligned, aligned_base)
    )
    rounds_judged = judgeable and rounds.not_judged is None
    pace = _pace(rounds.now, rounds.base, tol) if rounds_judged else _Pace()
    judged = rounds_judged and pace.not_judged is None
    now, base = rounds.now, rounds.base
    if judged and pace.change is not None:
        now, base = speed.at_speed(now, base), speed.at_speed(base, base)
    switched = switched_out(now, op_waits) if rounds.walls is not None else frozenset()
    if rounds.walls is not None:
        now, base = as_work(now, op_waits), as_work(base, op_waits)
    waits_explain = (
        _waits_explain(rounds.walls, now, base, tol)
        if judged and rounds.walls is not None
        else None
    )
    if waits_explain is not None:
        judged = False
    unmeasured = unmeasured or baseline.machine.ops_unmeasured()
    dropped = bool(now.dropped_events or base.dropped_events)
    whole = not dropped and unmeasured is None
    sessions = Sessions.of(base)
    return TimeBasis(
        now=now,
        base=base,
        judged=judged,
        not_judged=rounds.not_judged or pace.not_judged or waits_explain,
        unjudged_reason=(
            None
            if judged
            else ("busy" if rounds.not_judged or waits_explain else "speed")
            if judgeable
            else "machine"
            if not force_time and baseline.machine.fingerprint != fingerprint
            else "rounds"
        ),
        speed_change=pace.change,
        walls=rounds.walls,
        switched=_switched_within(switched, now, base, sessions, tol),
        whole=whole,
        op_waits=op_waits,
        co_run=_waited(aligned, tol) or _waited(aligned_base, tol),
        sessions=sessions,
        widths=Widths.of(base, spreads or {}, tol),
        notes=tuple(
            note
            for note in (
                _judgeable_note(
                    baseline, aligned, aligned_base, fingerprint, tol, force_time, judgeable
                ),
                rounds.note,
                pace.not_judged,
                pace.note,
                _dropped_note(now, base) if dropped else None,
                _unmeasured_note(unmeasured) if unmeasured is not None else None,
            )
            if note is not None
        ),
    )


def _judgeable_note(
    baseline: BaselineEntry,
    now: TestSummary,
    base: TestSummary,
    fingerprint: str,
    tol: Tolerances,
    force_time: bool,
    judgeable: bool,
) -> str | None:
    """Why times cannot be judged at all (another machine, too few rounds); None where
    they can."""
    if not force_time and baseline.machine.fingerprint != fingerprint:
        return (
            f"baseline recorded on another machine ({baseline.machine.describe()}, fingerprint "
            f"{baseline.machine.fingerprint}, now {fingerprint}): times are not judged, "
            "only FLOPs and memory"
            + (
                "; its record predates the CPU's family and model and OpenBLAS's kernels in "
                "the fingerprint: --opprof-update-baselines on this machine re-records it"
                if baseline.machine.cpu_id is None and baseline.machine.blas_core is None
                else ""
            )
        )
    if not judgeable:
        return (
            f"times are judged from {tol.time_min_rounds} rounds on both sides (baseline "
            f"{base.rounds}, now {now.rounds}; set --opprof-rounds, or --opprof-force-time "
            "to judge anyway): only FLOPs and memory are judged"
        )
    return None


class _Rounds(NamedTuple):
    """Both sides restricted to the rounds their times are judged on (``waiting.py``)."""

    now: TestSummary
    base: TestSummary
    walls: tuple[TimeStats, TimeStats] | None = None
    """Set where the rounds are work rounds: the measured wall times (baseline, now)."""
    not_judged: str | None = None
    """Why no rounds can be judged (the machine was too busy)."""
    note: str | None = None
    """The verdict's note: the work-time note, or ``not_judged``."""


def _chosen_rounds(
    now: TestSummary, base: TestSummary, needed: int, max_wait_share: float, op_waits: bool
) -> _Rounds:
    """The clean rounds of both sides; where a side has fewer than ``needed``, the work
    rounds of both; where it has too few of those as well, why times are not judged."""
    clean_now, clean_base, busy = judged_rounds(now, base, needed, max_wait_share)
    if busy is None:
        return _Rounds(clean_now, clean_base)
    worked = work_rounds(clean_now, clean_base, needed, op_waits=op_waits)
    if worked is None:
        return _Rounds(clean_now, clean_base, not_judged=busy, note=busy)
    work_now, work_base, note = worked
    return _Rounds(work_now, work_base, (clean_base.wall_time, clean_now.wall_time), note=note)


WALL_SHARE_OF_WORK = 0.5
"""A work time's growth counts as the test's only where the wall time grew by at least
this share of it: with the waits unchanged, more work adds its whole amount to the wall
time (a share of 1).  Two unchanged child-process tests in CI grew their work time by 28
and 40 ms while their wall time moved -5 and +3 ms (shares -0.2 and 0.08): their waits
were the machine's CPU pressure, which other processes moved."""


def _waits_explain(
    walls: tuple[TimeStats, TimeStats], now: TestSummary, base: TestSummary, tol: Tolerances
) -> str | None:
    """Why a test's work time cannot be failed although it grew beyond its tolerance: its
    measured wall time grew by less than ``WALL_SHARE_OF_WORK`` of that growth, so the
    work-time change is mostly the two sides' waits as measured.  Where a round ran child
    processes the wait is the machine's CPU pressure (``capture/children.py``), which other
    processes anywhere on the machine move.  None where the rule does not apply."""
    base_wall, now_wall = walls
    work_grew = now.wall_time.median_ns - base.wall_time.median_ns
    if now.wall_time.median_ns <= base.wall_time.median_ns * (1 + tol.time):
        return None
    wall_grew = now_wall.median_ns - base_wall.median_ns
    if wall_grew >= WALL_SHARE_OF_WORK * work_grew:
        return None
    change = now.wall_time.median_ns / max(base.wall_time.median_ns, 1) - 1
    wall = now_wall.median_ns / max(base_wall.median_ns, 1) - 1
    return (
        f"time not judged: its work time (wall time less the wait for a CPU) grew "
        f"{change:+.0%} ({work_grew / 1e6:+.1f} ms) while its wall time grew "
        f"{wall:+.1%} ({wall_grew / 1e6:+.1f} ms): the waits measured on the two sides "
        "explain it, not the test (the machine was busy; in rounds that ran child "
        "processes the wait is the machine's CPU pressure). FLOPs and memory are judged"
    )


class _Pace(NamedTuple):
    """The machine's speed against the baseline's, as the speed references measured it."""

    change: float | None = None
    """How much slower the references ran now (``speed.speed_change``); None where times
    are not scaled."""
    not_judged: str | None = None
    """Why times are not judged: the change is beyond ``max_speed_change``."""
    note: str | None = None
    """The note of a change of ``SPEED_NOTE_AT`` or more, judged at the baseline's speed."""


def _pace(now: TestSummary, base: TestSummary, tol: Tolerances) -> _Pace:
    if not (tol.speed_scaled and speed.usable(now) and speed.usable(base)):
        return _Pace()
    change = speed.speed_change(now, base)
    way = "slower" if change > 0 else "faster"
    limit = tol.max_speed_change
    if limit is not None and abs(change) > limit:
        return _Pace(
            change,
            not_judged=(
                f"time not judged: this machine ran the speed references "
                f"{abs(change):.0%} {way} than "
                f"when the baseline was recorded, beyond the {limit:.0%} its times can be "
                "scaled across to within their tolerance (--opprof-max-speed-change)"
            ),
        )
    if abs(change) < SPEED_NOTE_AT:
        return _Pace(change)
    return _Pace(
        change,
        note=(
            f"this machine ran the speed references {abs(change):.0%} "
            f"{way} than when the baseline was "
            "recorded; times are compared at the baseline's speed (--opprof-raw-times "
            "judges them as measured)"
        ),
    )


def _switched_within(
    switched: frozenset[str],
    now: TestSummary,
    base: TestSummary,
    sessions: Sessions,
    tol: Tolerances,
) -> frozenset[str]:
    """The scopes of ``switched`` whose fastest round is within tolerance: only those fail
    no test alone (``waiting.UNSWITCHED_ROUNDS``)."""
    return frozenset(
        key
        for key in switched
        if key in base.ops
        and key in now.ops
        and now.ops[key].self_cpu_time.min_ns
        <= session_bounds(base.ops[key].self_cpu_time, sessions, tol)[1] * (1 + tol.time)
    )


def _dropped_note(now: TestSummary, base: TestSummary) -> str:
    return (
        "events were dropped at the profile's event limit (worst round: "
        f"{now.dropped_events:,} now, {base.dropped_events:,} in the baseline; raise "
        "--opprof-max-events): op figures, FLOPs, op counts and device time cover part of "
        "the test and are not judged; wall time and memory are"
    )


def _unmeasured_note(why: str) -> str:
    return (
        f"{why}: op figures, FLOPs and op counts were not measured, so they are not "
        "judged (nor is device time); wall time and memory are"
    )


def _waited(summary: TestSummary, tol: Tolerances) -> bool:
    """Whether a round of ``summary`` waited for a CPU beyond ``max_wait_share`` of its
    wall time: other processes ran on this machine, beside the test's thread too."""
    if tol.max_wait_share is None:
        return False
    clean = clean_rounds(summary, tol.max_wait_share)
    return clean is not None and len(clean) < summary.rounds
