"""A test's time that regressed because the machine moved, not the code.

Two late steps of a verdict, taken once its rows exist (``verdict.compare``): each
looks at a regressed test-level time and its ops, and where the machine explains the
change it returns the rows with that time marked not judged and the reason (an
:class:`Unjudged`); the verdict then takes the time basis out of judgement
(``TimeBasis.unjudged``).  ``docs/gate.md`` has the rules and their numbers.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import NamedTuple

from pytest_opprof.gate import speed
from pytest_opprof.gate.rows import WORK_TIME, MetricRow, names
from pytest_opprof.gate.summary import TestSummary
from pytest_opprof.gate.time_basis import TimeBasis
from pytest_opprof.gate.tolerance import Tolerances

UNIFORM_PARTS = 3
UNIFORM_SHARE = 0.05
"""A test's time that regressed with every part of it slower alike is not judged
(:func:`uniformly_slower`) when it has at least ``UNIFORM_PARTS`` parts of at least
``UNIFORM_SHARE`` of its time each (ops, and its own code between them)."""


class Unjudged(NamedTuple):
    """A verdict's rows with a regressed test-level time marked not judged, and why
    (``"wall time moved +30.0% with ..."``)."""

    rows: tuple[MetricRow, ...]
    why: str


def library_moved(
    metrics: Sequence[MetricRow], basis: TimeBasis, tol: Tolerances
) -> Unjudged | None:
    """A judged test-level time of a run beside other processes (``TimeBasis.co_run``)
    that regressed only by its library ops' slowdowns; None where there is none.

    Other processes share caches and memory bandwidth with a test's library code, which
    then runs 20-70% slower with no wait to measure.  A time whose change less its
    library ops' added time (each op's judged figure, now less the baseline's, where it
    grew) is within tolerance cannot be told from that; one that stays beyond it (a
    Python scope, or the test's own code, slower) is judged as ever.  Whether the time
    stays judged after all depends on the op reasons (``verdict.compare``).
    """
    if not (basis.co_run and basis.judged):
        return None
    now, base = basis.now, basis.base

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
            f"{names(slowest[:3])}{' and others' if len(slowest) > 3 else ''}, "
            f"{rest:+.1%} without them, while other processes ran beside it (a round "
            "waited for a CPU): they slow library code with no wait to measure"
        )

    return _left_unjudged(metrics, why)


def uniformly_slower(
    metrics: Sequence[MetricRow], basis: TimeBasis, tol: Tolerances
) -> Unjudged | None:
    """A judged test-level time that regressed with every sizeable part of the test
    slower alike (:func:`_alike`) and the same op counts; None where there is none.

    A code change slows some ops, or adds work that the op counts, FLOPs or bytes show;
    one that slows a test's Python asserts, its LAPACK calls, its ufuncs and its own code
    alike, with every count the same, is a slower machine.  A test made of fewer parts
    is judged as ever: one slower op could be all of it.
    """
    if not basis.judged:
        return None
    now, base = basis.now, basis.base

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


def _left_unjudged(
    metrics: Sequence[MetricRow],
    why: Callable[[MetricRow, float, float, float], str | None],
) -> Unjudged | None:
    """The rows with each regressed test-level time (wall or work time) that ``why`` (the
    row, its baseline, now and change) explains marked not judged, and the reason; None
    where ``why`` explains none."""
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
    return None if reason is None else Unjudged(tuple(out), reason)


def _alike(changes: list[float], tolerance: float) -> bool:
    """Whether parts' relative changes are a slowdown of them all: at least
    ``UNIFORM_PARTS`` of them, each slower by more than half the tolerance."""
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
