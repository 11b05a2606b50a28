"""A verdict's op reasons: which ops changed, and whether a change counts against the test.

An op's time is a reason for the test's time, not a tripwire of its own; an op's
deterministic figure fails only with the test's total of that figure.
:func:`op_reasons` reads one :class:`ReasonContext` (the time basis, the tolerances and
what the test's rows decided); ``docs/gate.md`` has the rules and the numbers that
chose them.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import NamedTuple

from pytest_opprof.gate.judge import RowStatus, beyond, change, judge_exact, judge_time, steady
from pytest_opprof.gate.rows import (
    DEVICE_MEMORY_METRIC,
    WORK_TIME,
    MetricRow,
    json_change,
    names,
    totals_status,
)
from pytest_opprof.gate.summary import OTHER_OPS, OpSummary, Span, TestSummary
from pytest_opprof.gate.time_basis import TimeBasis
from pytest_opprof.gate.tolerance import Tolerances
from pytest_opprof.gate.waiting import library_like, scope_judged_on_work
from pytest_opprof.native_layout.records import MEMORY_EVENT_NAME

EXPLAINS_SHARE = 0.02
"""An op whose time changed by less than this share of the test's time explains nothing."""
OP_ALONE_TOLERANCES = 0.1
"""An op's slowdown fails a test whose own time is within tolerance only when the op alone
added this many time tolerances of the test's time (``docs/gate.md``): a bar against ops
too small to matter, not a test-level tolerance."""


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
            "change": json_change(self.change),
            "status": self.status,
            "impact": round(self.impact, 4),
        }
        if self.note:
            out["note"] = self.note
        return out


@dataclass(frozen=True)
class ReasonContext:
    """What judges a test's op figures: its time basis, its tolerances, and what its rows
    decided."""

    basis: TimeBasis
    tol: Tolerances
    totals: Mapping[str, RowStatus]
    """The status of each test-level total an op figure belongs to (``rows.totals_status``);
    all "not judged" where events were dropped."""
    other_ops_differ: bool
    """``[other ops]`` folds other op keys on the two sides: its time is no one op's and
    fails no test alone."""

    @classmethod
    def of(cls, basis: TimeBasis, metrics: Sequence[MetricRow], tol: Tolerances) -> ReasonContext:
        totals = totals_status(metrics)
        now, base = basis.now, basis.base
        return cls(
            basis=basis,
            tol=tol,
            # Where events were dropped, no op figure is judged, whatever the totals did.
            totals=totals if basis.whole else dict.fromkeys(totals, "not judged"),
            other_ops_differ=OTHER_OPS in base.ops and now.left_out != base.left_out,
        )

    @property
    def times_judged(self) -> bool:
        """Whether op times are judged: the basis's times are, and every event was kept."""
        return self.basis.judged and self.basis.whole

    @property
    def test_time(self) -> RowStatus | None:
        """The status of the test's judged time (work time, else wall time)."""
        return self.totals.get(WORK_TIME, self.totals.get("wall time"))

    def counts(self, key: str) -> bool:
        """Whether ``key``'s time may count against the test: on clean rounds, or on work
        rounds a Python scope whose wait was left out (``waiting.scope_judged_on_work``)
        unless it was switched out in nearly every round."""
        basis = self.basis
        return basis.walls is None or (
            basis.op_waits and scope_judged_on_work(key) and key not in basis.switched
        )


class OpFindings(NamedTuple):
    """A verdict's op reasons (regressions first, then by impact), and its notes on them."""

    reasons: tuple[OpReason, ...]
    notes: tuple[str, ...] = ()


def op_reasons(ctx: ReasonContext) -> OpFindings:
    """The op-level changes of ``ctx``'s basis, judged."""
    now, base, tol = ctx.basis.now, ctx.basis.base, ctx.tol
    refs = _Refs.of(ctx)
    reasons: list[OpReason] = []
    held: list[str] = []
    for key in sorted(set(now.ops) | set(base.ops)):
        c, b = now.ops.get(key), base.ops.get(key)
        if b is None and c is not None:
            reasons.append(_presence(key, "new", c, tol.figure(c.self_cpu_time) / refs.wall_ns))
            # What a new op allocated or computed, against none: a new op that leaks is
            # named with its bytes (its calls are the line above).
            absent = dataclasses.replace(
                c, count=0, flops=0, self_memory_bytes=0, self_device_memory_bytes=0, ranges={}
            )
            reasons.extend(r for r in _exact_reasons(ctx, key, absent, c, refs) if r.unit != "ops")
        elif c is None and b is not None:
            reasons.append(
                _presence(key, "vanished", b, tol.figure(b.self_cpu_time) / refs.wall_ns)
            )
        elif b is not None and c is not None:
            timed = _time_reason(ctx, key, b, c, refs.wall_ns)
            if timed is not None:
                reasons.append(timed.reason)
                if timed.held:
                    held.append(key)
            reasons.extend(_exact_reasons(ctx, key, b, c, refs))
    severity = {"regressed": 0, "improved": 1}
    reasons.sort(key=lambda r: (severity.get(r.status, 2), -r.impact, r.op, r.kind))
    return OpFindings(tuple(reasons), _notes(ctx, reasons, held))


class _Refs(NamedTuple):
    """The test's totals an op's change is a share of (``OpReason.impact``), at least 1."""

    wall_ns: int
    flops: int
    memory_bytes: int
    ops: int
    device_memory_bytes: int

    @classmethod
    def of(cls, ctx: ReasonContext) -> _Refs:
        base = ctx.basis.base
        return cls(
            max(ctx.tol.figure(base.wall_time), 1),
            max(base.flops, 1),
            max(base.memory.allocated_bytes if base.memory else 0, 1),
            max(base.op_count, 1),
            max(base.device_memory_bytes or 0, 1),
        )


class _TimeReason(NamedTuple):
    reason: OpReason
    held: bool
    """The op (a library one, beside other processes) would have failed the test alone,
    and only explains it."""


def _time_reason(
    ctx: ReasonContext, key: str, b: OpSummary, c: OpSummary, wall_ref: int
) -> _TimeReason | None:
    """The reason of an op's time, where it changed beyond tolerance; None otherwise."""
    tol, sessions = ctx.tol, ctx.basis.sessions
    bt, ct = tol.figure(b.self_cpu_time), tol.figure(c.self_cpu_time)
    status = judge_time(b.self_cpu_time, c.self_cpu_time, tol, ctx.times_judged, sessions)
    test_time = ctx.test_time
    if status in ("pass", "not judged") and test_time in ("regressed", "improved"):
        # The test's time moved: an op that moved the same way beyond tolerance by its
        # statistic, by a share of the test's time that counts, explains it, whatever its
        # own rounds' Mann-Whitney test says or its time floor (a 0.9 ms scope 20% slower
        # in a test 35% slower is the reason, though too short to judge on its own).
        moved = judge_exact((bt, bt), ct, tol.time)
        explains = moved == test_time and abs(ct - bt) >= EXPLAINS_SHARE * wall_ref
        status = moved if explains else "pass"
    if status in ("pass", "not judged"):
        return None
    impact = abs(ct - bt) / wall_ref
    # An op's time is a reason for the test's time, not a tripwire of its own: it counts
    # when the test's time moved the same way.  Alone, only an op whose time its
    # baseline's sessions agreed on: one that moved between them by more than its
    # tolerance moves with what runs beside it.
    fails_alone = (
        not (ctx.other_ops_differ and key == OTHER_OPS)
        and impact >= OP_ALONE_TOLERANCES * tol.time
        and steady(b.self_cpu_time, sessions, tol)
        and beyond(b.self_cpu_time, ct, sessions, tol, ctx.basis.widths.of_op(key, tol))
    )
    counts = ctx.counts(key)
    held = False
    # Beside other processes a library op's slowdown has no wait to measure: it explains
    # the test's time and fails no test alone.
    if fails_alone and ctx.basis.co_run and library_like(key) and test_time != status:
        fails_alone = False
        held = counts and status == "regressed"
    judged: RowStatus = status if counts and (test_time == status or fails_alone) else "info"
    kind = "slower" if ct > bt else "faster"
    return _TimeReason(OpReason(key, kind, "ns", bt, ct, change(bt, ct), judged, impact), held)


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
    unsteady: bool
    """This run's rounds disagree on the figure (``rows.UNSTEADY``): it fails nothing."""


def _exact_reasons(
    ctx: ReasonContext, key: str, b: OpSummary, c: OpSummary, refs: _Refs
) -> list[OpReason]:
    """The reasons of an op's deterministic figures beyond tolerance, and of an op count
    outside its range.  An op's figure fails only when the test's total of it fails: work
    moved between ops is a change to explain, not a regression."""
    tol = ctx.tol
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
            refs.flops,
            "flops" in c.ranges,
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
            refs.memory_bytes,
            "self_memory_bytes" in c.ranges,
        ),
        _ExactFigure(
            "more device memory",
            "less device memory",
            "bytes",
            b.self_device_memory_bytes,
            c.self_device_memory_bytes,
            b.span("self_device_memory_bytes"),
            DEVICE_MEMORY_METRIC,
            tol.memory,
            tol.memory_floor_bytes,
            refs.device_memory_bytes,
            "self_device_memory_bytes" in c.ranges,
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
            tol.count_floor,
            refs.ops,
            "count" in c.ranges,
        ),
    )
    out: list[OpReason] = []
    for f in exact:
        if f.unit == "ops" and key == MEMORY_EVENT_NAME:
            # How many [memory] events there are says how they were recorded (one per
            # allocation for a trace, else one per thread), not what the code did.
            continue
        moved = judge_exact(f.span, f.now, f.tolerance or 0.0, f.floor)
        if moved == "pass" and not (f.unit == "ops" and not f.span[0] <= f.now <= f.span[1]):
            continue  # within tolerance; an op count outside its range is always worth a line
        judged = f.tolerance is not None and not f.unsteady and ctx.totals.get(f.metric) == moved
        out.append(
            OpReason(
                key,
                f.kind_up if f.now > f.baseline else f.kind_down,
                f.unit,
                f.baseline,
                f.now,
                change(f.baseline, f.now),
                moved if judged else "info",
                abs(f.now - f.baseline) / f.ref,
            )
        )
    return out


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


def _notes(ctx: ReasonContext, reasons: Sequence[OpReason], held: Sequence[str]) -> tuple[str, ...]:
    """The notes of ops whose time explains the test's and fails no test alone."""
    notes = []
    if ctx.other_ops_differ:
        notes.append(
            f"{OTHER_OPS} holds other ops than the baseline's (a new code path, or a capture "
            "that names more ops than when it was recorded): its time explains the test's "
            "time and fails no test alone; --opprof-update-baselines re-records it"
        )
    switched = ctx.basis.switched
    explained = sorted(
        {r.op for r in reasons if r.op in switched and r.unit == "ns" and r.kind == "slower"}
    )
    if explained:
        notes.append(
            f"{names(explained)} ran slower but left its CPU in nearly every round, and "
            "its fastest round is within tolerance: a span switched out can run longer than "
            "its work and its wait (by up to 80% on a shared VM), so its time explains the "
            "test's time and fails no test alone"
        )
    if held:
        notes.append(
            f"{names(held)} ran slower beyond tolerance but fail{'s' if len(held) == 1 else ''} "
            "no test alone here: rounds of this run or of the baseline waited for a CPU, and "
            "processes running beside a test slow library code by 20-70% without a wait "
            "to measure; a library op's time explains the test's time instead"
        )
    return tuple(notes)


FOLDED_OWN_SHARE = 0.9
"""Where ``[other ops]`` holds other ops than the baseline's, a growth of it in bytes or
FLOPs is named for one op when that op now holds at least this share of the growth more
than the baseline's whole ``[other ops]``: whatever the baseline folded of it, the growth
is that op's."""


def name_folded(
    reasons: Sequence[OpReason],
    summary: TestSummary,
    compared: Collection[str],
    other_ops_differ: bool = False,
) -> tuple[OpReason, ...]:
    """``reasons`` with each ``[other ops]`` growth in bytes or FLOPs noted with the op of
    ``summary`` (this run, before folding) that holds the most of it, among those the
    comparison folded (not in ``compared``, the op keys compared): a leak in an op the
    baseline left out names that op, not only ``[other ops]``.

    Where ``[other ops]`` holds other ops than the baseline's (``other_ops_differ``: an op
    ran in place of one the baseline folded, so none is provably new, ``trim.new_ops``),
    the two ``[other ops]`` compare unlike sets; an op that holds the growth by itself
    (:data:`FOLDED_OWN_SHARE`) is then the reason, against the baseline's whole ``[other
    ops]`` (what it can have held there at most)."""
    folded = _folded_values(reasons, summary, compared)
    if not folded:
        return tuple(reasons)
    out = []
    for r in reasons:
        top = folded.get(r.unit) if r.op == OTHER_OPS and r.kind.startswith("more") else None
        if top is None:
            out.append(r)
            continue
        own = _own_growth(r, summary, top) if other_ops_differ else None
        out.append(own or dataclasses.replace(r, note=f"most in {top}"))
    return tuple(out)


def _own_growth(r: OpReason, summary: TestSummary, key: str) -> OpReason | None:
    """``r`` (an ``[other ops]`` growth) as ``key``'s own, where ``key`` holds it by itself
    (:func:`name_folded`); None where it does not."""
    op = summary.ops[key]
    own = float(op.self_memory_bytes if r.unit == "bytes" else op.flops)
    if r.baseline is None or r.now is None or r.status != "regressed":
        return None
    if own - r.baseline < FOLDED_OWN_SHARE * (r.now - r.baseline):
        return None
    change = own / r.baseline - 1 if r.baseline > 0 else math.inf
    note = f"folded in the baseline: at most its {OTHER_OPS}"
    return dataclasses.replace(r, op=key, now=own, change=change, note=note)


def _folded_values(
    reasons: Sequence[OpReason], summary: TestSummary, compared: Collection[str]
) -> dict[str, str]:
    """Per unit (``bytes``, ``flops``) of an ``[other ops]`` reason, the op of ``summary``
    not in ``compared`` with the most of it (none where no op has any)."""
    units = {r.unit for r in reasons if r.op == OTHER_OPS and r.unit in ("bytes", "flops")}
    if not units:
        return {}
    named = set(compared)
    out = {}
    for unit in units:
        values = {
            key: op.self_memory_bytes if unit == "bytes" else op.flops
            for key, op in summary.ops.items()
            if key not in named and key not in (OTHER_OPS, MEMORY_EVENT_NAME)
        }
        top = max(values, key=lambda k: (values[k], k), default=None)
        if top is not None and values[top] > 0:
            out[unit] = top
    return out


def leak_note(metrics: Sequence[MetricRow], summary: TestSummary) -> str | None:
    """Where the test's leaked memory regressed, the ops that allocated what it still holds
    (``TestSummary.leaked_ops``, measured block by block), most first."""
    leaked = next((m for m in metrics if m.metric == "leaked memory"), None)
    if leaked is None or leaked.status != "regressed" or not summary.leaked_ops:
        return None
    held = sorted(summary.leaked_ops.items(), key=lambda kv: (-kv[1], kv[0]))
    ops = ", ".join(f"{op} ({n:,} bytes)" for op, n in held[:3])
    more = f" and {len(held) - 3} more" if len(held) > 3 else ""
    return f"the leaked memory was allocated by {ops}{more}"
