"""A verdict's test-level rows: each figure of the test, baseline against now, judged.

:func:`metric_rows` reads the time basis (``time_basis.py``) and judges each row by
``judge.py``; deterministic figures are judged whatever the basis says of times, except
one beyond tolerance that this run's rounds disagree on (:data:`UNSTEADY`).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

from pytest_opprof.gate.judge import (
    RowStatus,
    Sessions,
    Widths,
    change,
    judge_exact,
    judge_time,
    session_bounds,
)
from pytest_opprof.gate.round_figures import TRAFFIC_FIGURES
from pytest_opprof.gate.summary import TestSummary, TimeStats
from pytest_opprof.gate.time_basis import TimeBasis
from pytest_opprof.gate.tolerance import Tolerances

WORK_TIME = "work time"
"""The metric row of a test-level time judged as wall time less waiting (``waiting.py``)."""
UNSTEADY = "varies between rounds of the same code"
UNSTEADY_ADVICE = "; record baselines with --opprof-rounds 2 or more to keep its range"
"""What an :data:`UNSTEADY` note advises a baseline gate (an A/B run has no baseline)."""
"""The note of a deterministic figure's row left "not judged" because this run's rounds
gave it two values or more and it moved beyond tolerance: the figure depends on data the
test draws anew each call (unseeded random data), and one baseline value against another
run's says nothing of the code (``docs/gate.md``, "Exact figures are not always exact")."""
MOVED = ("regressed", "improved")


def json_change(change: float | None) -> float | None:
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
            "change": json_change(self.change),
            "tolerance": self.tolerance,
            "status": self.status,
            "note": self.note,
        }


class VaryingFigure(NamedTuple):
    """A test-level deterministic figure whose baseline spans a range, not one value."""

    metric: str
    unit: str
    low: int
    high: int

    def to_json(self) -> dict[str, object]:
        return {"metric": self.metric, "unit": self.unit, "low": self.low, "high": self.high}


class MetricRows(NamedTuple):
    """A verdict's rows, and the notes on how its time was judged."""

    rows: tuple[MetricRow, ...]
    notes: tuple[str, ...] = ()


RANGED_METRICS = {
    "flops": ("flops", "flops"),
    "op_count": ("op count", "ops"),
    "peak_bytes": ("peak memory", "bytes"),
    "allocated_bytes": ("allocated memory", "bytes"),
    "allocations": ("allocations", "allocations"),
    "leaked_bytes": ("leaked memory", "bytes"),
    "device_memory_bytes": ("device memory peak", "bytes"),
    "host_to_device_bytes": ("host->device", "bytes"),
    "device_to_host_bytes": ("device->host", "bytes"),
    "device_to_device_bytes": ("device->device", "bytes"),
    "device_syncs": ("syncs", "syncs"),
}
"""``TestSummary.ranges`` names -> (metric row name, unit)."""
TRAFFIC_METRICS = frozenset(RANGED_METRICS[name][0] for name in TRAFFIC_FIGURES)
"""The rows of host<->device traffic: bytes, but copied, not held (no memory row)."""
DEVICE_MEMORY_METRIC = RANGED_METRICS["device_memory_bytes"][0]
"""The row of the device's memory peak: the total an op's device memory belongs to."""


def metric_rows(basis: TimeBasis, tol: Tolerances) -> MetricRows:
    """The test-level rows of ``basis``, with the notes of a time that the sessions' range
    or this machine's spread decided; on work time, the judged row is named "work time"
    (as a wall-time regression it would be read as one), the measured wall time shown
    beside it, not judged."""
    now, base = basis.now, basis.base
    rows = _rows(now, base, tol, basis.judged, basis.whole, basis.sessions, basis.widths.test)
    notes = (
        _widened(rows, base, basis.widths, tol, basis.sessions),
        _within_sessions(now.wall_time, base, tol, basis.sessions) if basis.judged else None,
        *(unsteady_note(figure, now.rounds) for figure in unsteady(rows, now)),
    )
    if basis.walls is not None:
        rows = _on_work(rows, basis.walls, tol)
    return MetricRows(tuple(rows), tuple(note for note in notes if note is not None))


def totals_status(metrics: Sequence[MetricRow]) -> dict[str, RowStatus]:
    """Status of each test-level total an op figure belongs to (the host's memory rows as
    one, ``"memory"``; the device's peak its own)."""
    status = {m.metric: m.status for m in metrics}
    memory = {
        m.status
        for m in metrics
        if m.unit in ("bytes", "allocations")
        and m.metric not in TRAFFIC_METRICS
        and m.metric != DEVICE_MEMORY_METRIC
    }
    status["memory"] = (
        "regressed" if "regressed" in memory else "improved" if "improved" in memory else "pass"
    )
    return status


def varying(base: TestSummary, tol: Tolerances) -> tuple[VaryingFigure, ...]:
    """The figures whose range weakens their gate: a spread of bytes within the memory
    floor (allocator granularity) weakens nothing, and a report listing it would be noise."""
    figures = (  # in the rows' order, however the file listed them
        VaryingFigure(*metric, *base.ranges[name])
        for name, metric in RANGED_METRICS.items()
        if name in base.ranges
    )
    return tuple(f for f in figures if f.unit != "bytes" or f.high - f.low > tol.memory_floor_bytes)


def names(keys: Sequence[str]) -> str:
    """Op keys as a note names them: each in backquotes, the last joined by "and"."""
    quoted = [f"`{k}`" for k in keys]
    return quoted[0] if len(quoted) == 1 else ", ".join(quoted[:-1]) + " and " + quoted[-1]


def row(
    metric: str,
    unit: str,
    baseline: float,
    now: float,
    tolerance: float | None,
    status: RowStatus,
    note: str = "",
) -> MetricRow:
    return MetricRow(metric, unit, baseline, now, change(baseline, now), tolerance, status, note)


def _rows(
    now: TestSummary,
    base: TestSummary,
    tol: Tolerances,
    time_judged: bool,
    whole: bool,
    sessions: Sessions,
    width: float | None,
) -> list[MetricRow]:
    """The test-level rows; without ``whole`` (events dropped, ops not captured) the sums
    of op figures (FLOPs, op count, device time) are shown, not judged; ``width``, wider
    than the time tolerance, is the test's time's (``Widths``)."""
    time_tol = dataclasses.replace(tol, time=width) if width is not None else tol
    wall = judge_time(base.wall_time, now.wall_time, time_tol, time_judged, sessions)
    fig = tol.figure
    exact = _Exact(base, now)
    rows = [
        row("wall time", "ns", fig(base.wall_time), fig(now.wall_time), time_tol.time, wall),
        row("cpu time", "ns", fig(base.cpu_time), fig(now.cpu_time), None, "info"),
        exact.row("flops", tol.flops, judged=whole),
        exact.row("op_count", tol.count, tol.count_floor, judged=whole),
    ]
    if base.memory is not None and now.memory is not None:
        for key in ("peak_bytes", "allocated_bytes", "allocations", "leaked_bytes"):
            floor = tol.memory_floor_bytes if RANGED_METRICS[key][1] == "bytes" else 0
            rows.append(exact.row(key, tol.memory, floor))
    if base.device_time is not None and now.device_time is not None:
        device = judge_time(base.device_time, now.device_time, tol, time_judged and whole, sessions)
        rows.append(
            row("device time", "ns", fig(base.device_time), fig(now.device_time), tol.time, device)
        )
    if base.device_memory_bytes is not None and now.device_memory_bytes is not None:
        rows.append(exact.row("device_memory_bytes", tol.memory, tol.memory_floor_bytes))
    if base.device_traffic is not None and now.device_traffic is not None:
        rows += [exact.row(name, tol.traffic) for name in TRAFFIC_FIGURES]
    rows.append(row("op time share", "share", base.op_time_share, now.op_time_share, None, "info"))
    return rows


class _Exact:
    """The rows of the deterministic figures of ``now`` against ``base``."""

    def __init__(self, base: TestSummary, now: TestSummary) -> None:
        self.base, self.now = base, now
        self.was, self.values = base.exact_values(), now.exact_values()

    def row(
        self, key: str, tolerance: float | None, floor: int = 0, *, judged: bool = True
    ) -> MetricRow:
        """The row of the figure ``key`` (a ``RANGED_METRICS`` name), judged beyond the
        baseline's range (``judge_exact``); "not judged" without ``judged`` (a sum of op
        figures over dropped events or ops not captured), and, as :data:`UNSTEADY`, where
        it moved beyond tolerance and this run's rounds disagree on it."""
        name, unit = RANGED_METRICS[key]
        b, c = self.was[key], self.values[key]
        if not judged:
            return row(name, unit, b, c, tolerance, "not judged")
        status = judge_exact(self.base.ranges.get(key, (b, b)), c, tolerance, floor)
        if status in MOVED and key in self.now.ranges:
            return row(name, unit, b, c, tolerance, "not judged", UNSTEADY)
        return row(name, unit, b, c, tolerance, status)


def unsteady(metrics: Sequence[MetricRow], now: TestSummary) -> tuple[VaryingFigure, ...]:
    """The figures of ``metrics`` not judged because this run's rounds disagree on them
    (:data:`UNSTEADY`), with the range the rounds spanned."""
    keys = {metric: key for key, (metric, _) in RANGED_METRICS.items()}
    return tuple(
        VaryingFigure(m.metric, m.unit, *now.ranges[keys[m.metric]])
        for m in metrics
        if m.note == UNSTEADY
    )


def unsteady_note(figure: VaryingFigure, rounds: int) -> str:
    """One line on a figure :func:`unsteady` names: its values in this run and why it was
    not judged."""
    values = (
        f"{figure.low:,} and {figure.high:,}"
        if rounds == 2
        else f"{figure.low:,} to {figure.high:,} over {rounds} rounds"
    )
    return (
        f"{figure.metric} {UNSTEADY} ({values} {figure.unit} in this run): not judged "
        f"exactly{UNSTEADY_ADVICE}"
    )


def _on_work(
    metrics: list[MetricRow], walls: tuple[TimeStats, TimeStats], tol: Tolerances
) -> list[MetricRow]:
    """``metrics`` with the judged time renamed "work time" and the measured wall time
    (``walls``: baseline, now) beside it, not judged."""
    out = []
    for metric in metrics:
        if metric.metric == "wall time":
            base, now = walls
            out.append(
                row("wall time", "ns", tol.figure(base), tol.figure(now), tol.time, "not judged")
            )
            metric = dataclasses.replace(metric, metric=WORK_TIME)
        out.append(metric)
    return out


def _widened(
    metrics: Sequence[MetricRow],
    base: TestSummary,
    widths: Widths,
    tol: Tolerances,
    sessions: Sessions,
) -> str | None:
    """The note of a test's time beyond its tolerance that passed because this machine's
    sessions move its ops' times more (``spread.py``); None when that changed nothing."""
    width = widths.test
    if width is None:
        return None
    wall = next((m for m in metrics if m.metric == "wall time"), None)
    if wall is None or wall.status != "pass" or wall.change is None or abs(wall.change) <= tol.time:
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
        moves = f"the times of {names(moving)} by up to {max(widths.ops[k] for k in moving):.0%}"
    return (
        f"this machine moves {moves} from one session to the next (their spread over this "
        f"file's baseline tests): the test's time is judged beyond {of} here, not "
        f"{tol.time:.0%}"
    )


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
