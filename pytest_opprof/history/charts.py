"""The figures behind the history page's charts, read back from the run files.

Detection (``series.py``) keeps no series once it has searched them: a history of 1,000
runs of 2,000 tests would be hundreds of MB of figures for a page that draws the few
tests that stepped.  So the page reads the runs a second time, for those tests alone:
per chart, the test's figure at each of its machine's runs, and its ops' figures, of
which the largest few are drawn stacked (:data:`TOP_OPS`, and every op that stepped)
and the rest summed as ``other ops``.

A chart is one test on one machine in one *family* of figures: the time (the test's
wall time over its ops' self CPU times), FLOPs, op calls, memory (peak bytes over the
ops' self memory) or leaked bytes (no ops: a leak is not a sum of ops' figures).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from pytest_opprof.errors import BaselineError
from pytest_opprof.history.report import grouped
from pytest_opprof.history.series import SELF, WALL, ChangePoint
from pytest_opprof.history.store import History, RunHead, read_run

CHART_LIMIT = 100
"""Charts drawn on a page (worst first); the table lists every change point."""
TOP_OPS = 5
"""Ops drawn in a chart's stack: those that stepped, then the largest (at least two) to
this many; the rest are one series."""

FAMILY = {
    WALL: "time",
    SELF: "time",
    "flops": "flops",
    "op_count": "count",
    "count": "count",
    "peak_bytes": "memory",
    "self_memory_bytes": "memory",
    "leaked_bytes": "leaked",
}
"""The chart a figure (``ChangePoint.figure``, a test's or an op's) is drawn in."""


@dataclass(frozen=True)
class Family:
    """What a family's chart draws: the test's figure, over its ops' (summed when stacked)."""

    unit: str
    """``ns``, ``flops``, ``calls`` or ``bytes``."""
    label: str
    test_column: tuple[str, int | None]
    """The run array of the test's figure and its column (None: one-dimensional)."""
    op_column: tuple[str, int | None] | None
    """The run array of the ops' figure, None where ops are not drawn."""


FAMILIES = {
    "time": Family("ns", "wall time; ops' self CPU time stacked", ("wall_med_ns", None),
                   ("op_med_ns", None)),
    "flops": Family("flops", "FLOPs; ops' FLOPs stacked", ("test_exact", 0), ("op_exact", 1)),
    "count": Family("calls", "op calls; each op's calls stacked", ("test_exact", 1),
                    ("op_exact", 0)),
    "memory": Family("bytes", "peak memory; ops' self memory stacked", ("test_exact", 2),
                     ("op_exact", 2)),
    "leaked": Family("bytes", "leaked memory", ("test_exact", 3), None),
}  # fmt: skip
_ARRAYS = ("wall_med_ns", "test_exact", "op_test", "op_name", "op_exact", "op_med_ns")


@dataclass
class Chart:
    """One test's figures of one family on one machine, over that machine's runs."""

    machine: str
    test: str
    family: str
    groups: list[list[ChangePoint]] = field(default_factory=list)
    """Its change points, as the text report groups them (one group a line)."""
    total: list[float | None] = field(default_factory=list)
    """The test's figure at each run of the machine (None: not in that run)."""
    ops: list[tuple[str, list[float | None]]] = field(default_factory=list)
    """The ops drawn, bottom of the stack first; ``other ops`` last where there are more."""

    @property
    def changes(self) -> list[ChangePoint]:
        return [c for g in self.groups for c in g]


def machine_runs(history: History) -> dict[str, list[RunHead]]:
    """Each machine's runs, oldest first, as detection groups them."""
    runs: dict[str, list[RunHead]] = defaultdict(list)
    for head in history.runs:
        runs[head.fingerprint].append(head)
    return runs


def chart_key(c: ChangePoint) -> tuple[str, str, str]:
    """The chart a change point is drawn in: machine, test, family."""
    return (c.machine, c.test, FAMILY.get(c.figure, "count"))


def charts(
    history: History, changes: Sequence[ChangePoint], limit: int = CHART_LIMIT
) -> tuple[list[Chart], int]:
    """The charts of ``changes`` (worst first, the first ``limit`` of them) with their
    figures read from ``history``'s runs, and how many there would be without the limit."""
    by_key: dict[tuple[str, str, str], Chart] = {}
    for group in grouped(changes):
        # One line of the text report: one test's steps at one run, which may fall in
        # several charts (a FLOPs step with a memory one).
        parts: dict[tuple[str, str, str], list[ChangePoint]] = defaultdict(list)
        for c in group:
            parts[chart_key(c)].append(c)
        for key, part in parts.items():
            chart = by_key.get(key)
            if chart is None:
                chart = by_key[key] = Chart(*key)
            chart.groups.append(part)
    drawn = list(by_key.values())[:limit]
    runs = machine_runs(history)
    for machine in {c.machine for c in drawn}:
        _read(runs[machine], [c for c in drawn if c.machine == machine])
    return drawn, len(by_key)


def _read(heads: Sequence[RunHead], charts: Sequence[Chart]) -> None:
    """Fill the charts of one machine from its runs (a run that cannot be read: a gap)."""
    tests = sorted({c.test for c in charts})
    n = len(heads)
    totals: dict[tuple[str, str], list[float | None]] = {}
    ops: dict[tuple[str, str], dict[str, list[float | None]]] = {}
    for c in charts:
        totals[(c.test, c.family)] = c.total = [None] * n
        ops[(c.test, c.family)] = {}
    families = defaultdict(list)
    for c in charts:
        families[c.test].append(c.family)
    last: tuple[list[str], dict[str, int]] | None = None
    for r, head in enumerate(heads):
        try:
            run = read_run(head.path, head.meta, _ARRAYS)
        except BaselineError:
            continue  # named as skipped by detection already
        if last is None or last[0] != run.tests:
            last = (run.tests, {name: i for i, name in enumerate(run.tests)})
        index = last[1]
        rows = {index[t]: t for t in tests if t in index}
        if not rows:
            continue
        a = run.arrays
        for row, test in rows.items():
            for family in families[test]:
                totals[(test, family)][r] = _value(a, FAMILIES[family].test_column, row)
        picked = np.flatnonzero(np.isin(a["op_test"], list(rows)))
        names = run.ops
        for j in picked.tolist():
            test = rows[int(a["op_test"][j])]
            op = names[int(a["op_name"][j])]
            for family in families[test]:
                column = FAMILIES[family].op_column
                if column is None:
                    continue
                series = ops[(test, family)].setdefault(op, [None] * n)
                series[r] = _value(a, column, j)
    for c in charts:
        c.ops = _stack(ops[(c.test, c.family)], {x.op for x in c.changes if x.op is not None})


def _value(
    a: Mapping[str, npt.NDArray[Any]], column: tuple[str, int | None], row: int
) -> float | None:
    name, col = column
    value = float(a[name][row] if col is None else a[name][row, col])
    # -1: a figure not measured (memory without tracing); NaN: a time not kept.
    return None if value < 0 or math.isnan(value) else value


def _stack(
    ops: Mapping[str, list[float | None]], stepped: set[str]
) -> list[tuple[str, list[float | None]]]:
    """The ops to draw, bottom of the stack first: those that stepped (at the bottom their
    step shows as a step of their band's top edge), then the largest to :data:`TOP_OPS`;
    the rest summed as ``other ops``; ops that are zero throughout left out."""
    size = {name: sum(v or 0.0 for v in values) for name, values in ops.items()}
    ranked = sorted((n for n in ops if size[n] > 0), key=lambda n: (n not in stepped, -size[n], n))
    shown = [n for n in ranked if n in stepped]
    shown += [n for n in ranked if n not in stepped][: max(2, TOP_OPS - len(shown))]
    rest = [n for n in ranked if n not in shown]
    out = [(name, ops[name]) for name in shown]
    if rest:
        runs = len(next(iter(ops.values())))
        other: list[float | None] = []
        for r in range(runs):
            values = [ops[n][r] for n in rest if ops[n][r] is not None]
            other.append(sum(v for v in values if v is not None) if values else None)
        out.append((OTHER, other))
    return out


OTHER = "other ops"
