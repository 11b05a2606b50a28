"""The profiler's own cost per event, and its subtraction from self times.

Recording an event costs time in two places: *inside* its interval (between
the start and end clock reads: the event's own self time grows) and *outside*
it (before the start read and after the end read: its parent's self time
grows, once per child).  :class:`Overhead` holds both per event kind, in ns,
as calibrated by ``capture.calibration.calibrate`` at the first profile of a
process and again about once a minute (the median of the last few is used);
:func:`self_corrections_ns` turns them into the ns to subtract from each event's
self time.  Totals (``cpu_time_total``) stay as measured, and every
row keeps ``self_cpu_time_total_raw`` (us): the figure before subtraction.

Baselines store the raw self times (see :mod:`pytest_opprof.gate.summary`): the calibration varies
by a few ns per event between sessions, and for an op with thousands of child
events that jitter would enter every comparison, while the raw overhead, a
constant per event of the machine and build, cancels when op counts match.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from pytest_opprof.capture.records import KIND_MEMORY, KIND_NUMPY, KIND_SCOPE

_KIND_NAMES = {KIND_SCOPE: "scope", KIND_NUMPY: "numpy op"}


@dataclass(frozen=True)
class Overhead:
    """Profiler cost per recorded event by event kind (``records.KIND_*``), ns."""

    inside_ns: Mapping[int, float] = field(default_factory=dict)
    """Cost inside the event's own interval: subtracted from the event's self time."""
    outside_ns: Mapping[int, float] = field(default_factory=dict)
    """Cost outside the event's interval: subtracted from its parent's self time."""

    def per_event_ns(self, kind: int) -> float:
        """Whole cost of one event of ``kind``, ns."""
        return self.inside_ns.get(kind, 0.0) + self.outside_ns.get(kind, 0.0)

    @classmethod
    def median(cls, overheads: Sequence[Overhead]) -> Overhead:
        """Per kind, the median of each figure over ``overheads`` (at least one): one
        calibration made while other work had the CPU is outvoted by the others."""
        inside = {
            kind: statistics.median(o.inside_ns[kind] for o in overheads if kind in o.inside_ns)
            for kind in {k for o in overheads for k in o.inside_ns}
        }
        outside = {
            kind: statistics.median(o.outside_ns[kind] for o in overheads if kind in o.outside_ns)
            for kind in {k for o in overheads for k in o.outside_ns}
        }
        return cls(inside_ns=inside, outside_ns=outside)

    def describe(self) -> str:
        """``"profiler overhead subtracted: 31 ns/numpy op, 610 ns/scope"``."""
        kinds = sorted(set(self.inside_ns) | set(self.outside_ns))
        parts = [
            f"{self.per_event_ns(k):.0f} ns/{_KIND_NAMES.get(k, f'kind {k} event')}" for k in kinds
        ]
        return "profiler overhead subtracted: " + (", ".join(parts) or "none")

    def _table(self, which: Mapping[int, float], kinds: np.ndarray) -> np.ndarray:
        size = max(int(kinds.max(initial=0)), *which.keys(), 0) + 1
        table = np.zeros(size)
        for kind, ns in which.items():
            if kind != KIND_MEMORY:  # memory instants are not timed calls
                table[kind] = ns
        out: np.ndarray = table[kinds]
        return out


def self_corrections_ns(overhead: Overhead, kinds: np.ndarray, parent: np.ndarray) -> np.ndarray:
    """Per event, the ns of profiler cost inside its self time.

    ``parent`` holds each event's parent row (-1 for a root), aligned with ``kinds``.
    """
    kinds = np.asarray(kinds, dtype=np.int64)
    parent = np.asarray(parent, dtype=np.int64)
    out = overhead._table(overhead.inside_ns, kinds)
    has = parent >= 0
    outside = overhead._table(overhead.outside_ns, kinds)
    out = out + np.bincount(parent[has], weights=outside[has], minlength=len(kinds))
    return out
