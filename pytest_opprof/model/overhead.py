"""The profiler's own cost subtracted from self times.

:func:`self_corrections_ns` turns a calibrated
:class:`~pytest_opprof.capture.overhead.Overhead` into the ns to subtract from
each event's self time.  Totals (``cpu_time_total``) stay as measured, and every
row keeps ``self_cpu_time_total_raw`` (us): the figure before subtraction.

Baselines store the raw self times (see :mod:`pytest_opprof.gate.summary`): the calibration varies
by a few ns per event between sessions, and for an op with thousands of child
events that jitter would enter every comparison, while the raw overhead, a
constant per event of the machine and build, cancels when op counts match.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from pytest_opprof.capture.overhead import Overhead
from pytest_opprof.native_layout.records import KIND_MEMORY


def _per_event(which: Mapping[int, float], kinds: np.ndarray) -> np.ndarray:
    """``which[kind]`` of each event (0 for a kind not in it, and for memory instants)."""
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
    out = _per_event(overhead.inside_ns, kinds)
    has = parent >= 0
    outside = _per_event(overhead.outside_ns, kinds)
    out = out + np.bincount(parent[has], weights=outside[has], minlength=len(kinds))
    return out
