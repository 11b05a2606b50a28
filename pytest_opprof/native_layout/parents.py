"""Each record's parent row: the layout's parent ids resolved within one drain.

``parent >= 0`` is the enclosing event's id, ``-1`` none.  A thread holding any
event with ``parent == -2`` ("unknown", from sources without native parents
such as torch) is nested by intervals instead: all its events are sorted by
(start asc, end desc) and swept with a stack, as torch's
``_populate_cpu_children`` does.  A child must lie within ``[start, end)`` of
its parent; partial overlaps give no relation.  The event model builds its tree
on these rows (``model/tree.py``), and the CUDA source subtracts children's
device time along them (``capture/sources/cuda_source.py``).
"""

from __future__ import annotations

import numpy as np

PARENT_NONE = -1
PARENT_UNKNOWN = -2

_I64 = np.int64


def parent_rows(raw: np.ndarray, *, native: bool = True) -> np.ndarray:
    """Row (in ``raw``, record order) of each event's parent, or -1.

    With ``native``, native ids are looked up in one linear pass
    (``opprof_model_parent_rows``); otherwise, or where ids are not native, by
    sorting ids.
    """
    n = len(raw)
    if n == 0:
        return np.full(0, PARENT_NONE, dtype=_I64)
    # Imported on first use, here and below: importing the layout loads no extension.
    from pytest_opprof import _native

    parent_ids = raw["parent"]
    rows = _native.model_parent_rows(raw) if native else None
    if rows is None:
        rows = _parent_rows_sorted(raw)
    unknown = parent_ids == PARENT_UNKNOWN
    if unknown.any():
        threads = raw["thread"]
        nest = np.isin(threads, np.unique(threads[unknown]))
        sub = np.flatnonzero(nest)
        start = raw["start_ns"][sub].astype(_I64)
        end = np.maximum(raw["end_ns"][sub].astype(_I64), start)
        rows[sub] = _nest_by_interval(raw[sub], start, end, sub)
    return rows


def _parent_rows_sorted(raw: np.ndarray) -> np.ndarray:
    """Parent rows by binary search over sorted ids (-2 parents stay unresolved: -1)."""
    n = len(raw)
    rows = np.full(n, PARENT_NONE, dtype=_I64)
    ids = raw["id"].astype(_I64)
    parent_ids = raw["parent"].astype(_I64)
    known = parent_ids >= 0
    if known.any():
        by_id = np.argsort(ids, kind="stable")
        sorted_ids = ids[by_id]
        at = np.searchsorted(sorted_ids, parent_ids[known])
        at_clipped = np.minimum(at, n - 1)
        # A parent id that is not in the records (dropped at capacity) makes a root.
        found = sorted_ids[at_clipped] == parent_ids[known]
        rows[known] = np.where(found, by_id[at_clipped], PARENT_NONE)
    return rows


def _nest_by_interval(
    raw: np.ndarray, start: np.ndarray, end: np.ndarray, rows: np.ndarray
) -> np.ndarray:
    """Parent rows by interval containment on each thread (O(N log N))."""
    from pytest_opprof import _native

    order = np.lexsort((raw["id"], raw["depth"], -end, start, raw["thread"]))
    thread = np.ascontiguousarray(raw["thread"][order], dtype=np.uint64)
    s = np.ascontiguousarray(start[order])
    e = np.ascontiguousarray(end[order])
    parent_sorted = _native.nest_sorted(thread, s, e)
    out = np.full(len(rows), PARENT_NONE, dtype=_I64)
    has = parent_sorted >= 0
    out[order[has]] = rows[order[parent_sorted[has]]]
    return out
