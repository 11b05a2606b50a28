"""The profiler's own cost per event, as calibration measures it.

Recording an event costs time in two places: *inside* its interval (between
the start and end clock reads: the event's own self time grows) and *outside*
it (before the start read and after the end read: its parent's self time
grows, once per child).  :class:`Overhead` holds both per event kind, in ns,
as calibrated by ``capture.calibration.calibrate`` at the first profile of a
process and again about once a minute (the median of the last few is used).
The event model subtracts it from self times (``model/overhead.py``).
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from pytest_opprof.native_layout.records import KIND_NUMPY, KIND_SCOPE

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
