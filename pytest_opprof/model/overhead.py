"""The profiler's own cost subtracted from self times.

:func:`self_corrections_ns` turns a calibrated
:class:`~pytest_opprof.capture.overhead.Overhead` into the ns to subtract from
each event's self time, and :func:`corrections_ns` what comes off its self and
total time: an event's total loses what its whole subtree's self times lost, so a
total is still its self time plus its children's totals, as in torch (a scope's
``CPU total %`` read 101.69% when totals kept the cost that self times gave up).
Every row keeps ``self_cpu_time_total_raw`` and ``cpu_time_total_raw`` (us): the
figures before subtraction.

Baselines store the raw self times (see :mod:`pytest_opprof.gate.summary`): the calibration varies
by a few ns per event between sessions, and for an op with thousands of child
events that jitter would enter every comparison, while the raw overhead, a
constant per event of the machine and build, cancels when op counts match.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from pytest_opprof.capture.overhead import Overhead
from pytest_opprof.model.tree import child_sums, depths, subtree_sums
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


def corrections_ns(
    overhead: Overhead, events: np.ndarray, parent: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Per event of ``events`` (``parent``: each one's parent row, -1 for a root), the ns
    subtracted from its self time and from its total time.

    The self time loses its profiler cost, never going below 0; the total loses what
    its subtree's self times lost, so ``total = self + sum(children's totals)`` holds
    after subtraction as it did before.
    """
    parent = np.asarray(parent, dtype=np.int64)
    start = events["start_ns"].astype(np.int64)
    total = np.maximum(events["end_ns"].astype(np.int64), start) - start
    raw_self = total - child_sums(parent, total)
    wanted = self_corrections_ns(overhead, events["kind"], parent)
    self_off = np.minimum(wanted, np.maximum(raw_self, 0).astype(np.float64))
    (total_off,) = subtree_sums(parent, depths(parent), [self_off])
    return self_off, total_off
