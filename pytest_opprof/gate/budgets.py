"""Absolute budgets: a test's peak memory, leak, FLOPs and time against fixed limits.

No baseline is needed (as pytest-memray's ``limit_memory``): ``--opprof-max-memory``,
``--opprof-max-leaked``, ``--opprof-max-flops`` and ``--opprof-max-time`` set them for
every profiled test, the ``profile`` marker's keywords of the same names for one
(``budget_forms.py`` parses them).  :func:`judge_budgets` judges a test's summary
against them, one :class:`BudgetRow` per budget set; a row ``over`` fails the test
(``session.py``), with or without a baseline, in an A/B run too.

Each row names the op(s) that used the budget, from the figures a summary keeps:

* the leak: the ops that allocated the numpy data still held at the test's end, measured
  block by block (``native/memory.c`` keeps each block's op; ``TestSummary.leaked_ops``);
* peak memory: the ops holding the most bytes they allocated and did not free
  themselves (an op's net self bytes), largest first, as many as it takes to cover the
  figure (at most ``NAMED_OPS``), never ``[other ops]``;
* FLOPs: the ops with the most FLOPs; time: the ops with the most self time.

Times are judged with the gate's care (``waiting.py``): on the rounds that did not wait
for a CPU, else on work time (wall less the wait), by the session's statistic; with
fewer than ``Tolerances.time_min_rounds`` such rounds a test is within its budget when
its fastest round's work was (a wait, a cold cache only add time), and otherwise its
time is not judged, saying why, rather than failed on a guess.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Literal

from pytest_opprof.gate.summary import OTHER_OPS, TestSummary
from pytest_opprof.gate.tolerance import Tolerances
from pytest_opprof.gate.waiting import WORK_WAIT_LIMIT, as_work, clean_rounds, only_rounds

NAMED_OPS = 3
"""Ops a budget row names at most."""

BudgetStatus = Literal["within", "over", "not judged"]

BUDGET_KEYS = ("max_memory", "max_leaked", "max_flops", "max_time")
"""The budgets' names: the marker's keywords, and their keys where a test's overrides travel
(``ProfiledTest.tolerances``)."""


@dataclass(frozen=True)
class Budgets:
    """A test's limits; None: no budget."""

    max_memory: int | None = None
    """Peak memory, bytes."""
    max_leaked: int | None = None
    """Bytes still held at the test's end."""
    max_flops: int | None = None
    max_time: int | None = None
    """The test's wall time (its rounds' statistic), ns."""

    def any(self) -> bool:
        return any(getattr(self, key) is not None for key in BUDGET_KEYS)

    def with_marker(self, overrides: Mapping[str, float] | None) -> Budgets:
        """These budgets with a marker's (``overrides``' keys of :data:`BUDGET_KEYS`)
        in place of the session's."""
        if not overrides:
            return self
        values = {key: getattr(self, key) for key in BUDGET_KEYS}
        values.update({k: round(v) for k, v in overrides.items() if k in values})
        return Budgets(**values)


@dataclass(frozen=True)
class BudgetRow:
    """One budget judged: the figure ``now`` against its ``limit`` (in ``unit``)."""

    budget: str
    """Which (:data:`BUDGET_KEYS`)."""
    metric: str
    unit: str
    limit: int
    now: float | None
    status: BudgetStatus
    ops: tuple[tuple[str, float], ...] = ()
    """The ops that used it, with their share of the figure (in ``unit``), most first."""
    note: str = ""
    """How the figure was judged, or why it was not."""

    def to_json(self) -> dict[str, object]:
        return {
            "budget": self.budget,
            "metric": self.metric,
            "unit": self.unit,
            "limit": self.limit,
            "now": self.now,
            "status": self.status,
            "ops": [{"op": op, "value": value} for op, value in self.ops],
            "note": self.note,
        }

    @classmethod
    def from_json(cls, data: object) -> BudgetRow:
        """A row read back from a JSON report (:meth:`to_json`); ValueError naming what is
        wrong where ``data`` is not one."""
        if not isinstance(data, Mapping):
            raise ValueError("not a budget row: not an object")
        status = data.get("status")
        if status not in ("within", "over", "not judged"):
            raise ValueError(f"not a budget row: status {status!r}")
        try:
            now = data["now"]
            ops = tuple((str(o["op"]), float(o["value"])) for o in data.get("ops") or ())
            return cls(
                budget=str(data["budget"]),
                metric=str(data["metric"]),
                unit=str(data["unit"]),
                limit=int(data["limit"]),
                now=None if now is None else float(now),
                status=status,
                ops=ops,
                note=str(data.get("note") or ""),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"not a budget row: {exc!r}") from None


def judge_budgets(
    summary: TestSummary, budgets: Budgets, tol: Tolerances, *, force_time: bool = False
) -> tuple[BudgetRow, ...]:
    """A row per budget set, in :data:`BUDGET_KEYS`' order."""
    rows = []
    memory = summary.memory
    if budgets.max_memory is not None:
        peak = memory.peak_bytes if memory is not None else None
        rows.append(_exact("max_memory", "peak memory", "bytes", budgets.max_memory, peak, summary))
    if budgets.max_leaked is not None:
        leaked = memory.leaked_bytes if memory is not None else None
        row = _exact("max_leaked", "leaked memory", "bytes", budgets.max_leaked, leaked, summary)
        if row.status == "over":
            row = replace(row, ops=leak_users(summary), note=_leak_note(summary))
        rows.append(row)
    if budgets.max_flops is not None:
        rows.append(
            _exact("max_flops", "flops", "flops", budgets.max_flops, summary.flops, summary)
        )
    if budgets.max_time is not None:
        rows.append(judge_time(summary, budgets.max_time, tol, force_time=force_time))
    return tuple(rows)


def _exact(
    budget: str, metric: str, unit: str, limit: int, now: int | None, summary: TestSummary
) -> BudgetRow:
    """A deterministic figure against its budget (memory not measured: not judged)."""
    if now is None:
        return BudgetRow(budget, metric, unit, limit, None, "not judged", note="not measured")
    if now <= limit:
        return BudgetRow(budget, metric, unit, limit, now, "within")
    return BudgetRow(budget, metric, unit, limit, now, "over", _users(summary, unit, now))


def _users(summary: TestSummary, unit: str, figure: float) -> tuple[tuple[str, float], ...]:
    """The ops that used ``figure`` (module docstring): those with the most of it, as many
    as cover it, at most :data:`NAMED_OPS`."""
    ops = summary.ops
    if unit == "bytes":
        values = {k: float(o.self_memory_bytes) for k, o in ops.items()}
    elif unit == "flops":
        values = {k: float(o.flops) for k, o in ops.items()}
    else:
        values = {k: float(o.self_cpu_time.median_ns) for k, o in ops.items()}
    ranked = sorted(
        ((k, v) for k, v in values.items() if v > 0 and k != OTHER_OPS),
        key=lambda kv: (-kv[1], kv[0]),
    )
    named: list[tuple[str, float]] = []
    for key, value in ranked[:NAMED_OPS]:
        named.append((key, value))
        if sum(v for _, v in named) >= figure:
            break
    return tuple(named)


def leak_users(summary: TestSummary) -> tuple[tuple[str, float], ...]:
    """The ops that allocated the numpy data still held at the test's end, most first (at
    most :data:`NAMED_OPS`): ``TestSummary.leaked_ops``, measured block by block."""
    held = sorted(summary.leaked_ops.items(), key=lambda kv: (-kv[1], kv[0]))
    return tuple((op, float(n)) for op, n in held[:NAMED_OPS])


def _leak_note(summary: TestSummary) -> str:
    """What of the leak no op is named for (Python objects, other libraries' memory)."""
    leaked = summary.memory.leaked_bytes if summary.memory is not None else 0
    named = sum(summary.leaked_ops.values())
    if named >= leaked:
        return ""
    if not named:
        return "none of it is numpy data, which is what ops are named for"
    return f"{leaked - named:,} bytes of it are not numpy data, which is what ops are named for"


def judge_time(
    summary: TestSummary, limit_ns: int, tol: Tolerances, *, force_time: bool = False
) -> BudgetRow:
    """The test's time against ``limit_ns`` (module docstring): judged on clean rounds,
    else on work time, else within by its fastest round or not judged."""
    needed = 1 if force_time else tol.time_min_rounds
    walls = summary.wall_time.samples_ns
    waits = summary.wait_time.samples_ns if summary.wait_time is not None else None
    if waits is not None and len(waits) != len(walls):
        waits = None
    work = [max(0, w - wait) for w, wait in zip(walls, waits, strict=True)] if waits else walls
    limit = tol.max_wait_share
    clean = clean_rounds(summary, limit) if limit is not None else tuple(range(len(walls)))
    figure: int | None = None
    on = ""
    if clean is None:  # the waiting was not measured: every round, as the verdict does
        if len(walls) >= needed:
            figure, on = tol.figure(summary.wall_time), f"wall time of {_n(len(walls))}"
    elif len(clean) >= needed:
        picked = only_rounds(summary, clean)
        figure, on = tol.figure(picked.wall_time), f"wall time of {_n(len(clean), 'clean ')}"
    else:
        workable = clean_rounds(summary, WORK_WAIT_LIMIT) or ()
        if len(workable) >= needed:
            picked = as_work(only_rounds(summary, workable))
            figure = tol.figure(picked.wall_time)
            on = f"work time (wall time less the wait for a CPU) of {_n(len(workable))}"
    row = BudgetRow("max_time", "wall time", "ns", limit_ns, figure, "within")
    if figure is not None:
        note = f"judged on the {tol.statistic} {on}"
        if figure <= limit_ns:
            return replace(row, note=note)
        return replace(row, status="over", note=note, ops=_users(summary, "ns", figure))
    fastest = min(work)
    if fastest <= limit_ns:
        return replace(
            row,
            now=fastest,
            note=f"its fastest round's work was within (of {_n(len(walls))}: waits only add time)",
        )
    if clean is not None and len(walls) >= needed:
        share = summary.wait_share() or 0.0
        why = (
            f"time not judged: the test's thread waited for a CPU in {share:.0%} of its "
            f"rounds' time ({len(walls) - len(clean)} of {len(walls)} rounds waited more than "
            f"{limit or 0:.0%}, {needed} clean rounds are needed, or {needed} that waited at "
            f"most {WORK_WAIT_LIMIT:.0%} to judge work time): the machine was busy"
        )
    else:
        why = (
            f"time not judged: {_n(len(walls))}, {needed} are needed (auto rounds repeat a "
            "test whose first round is over its time budget; --opprof-force-time judges one)"
        )
    return replace(row, status="not judged", now=fastest, note=why)


def _n(rounds: int, kind: str = "") -> str:
    return f"{rounds} {kind}round" if rounds == 1 else f"{rounds} {kind}rounds"
