"""The event tree over :class:`~pytest_opprof.native_layout.records.Records`, computed with numpy.

:func:`build_tree` puts the events in one canonical order (start ascending,
end descending, then depth and id, so a parent always comes before its
children), finds each event's parent row, and derives the per-event metrics
of torch's model:

* CPU time: ``total`` is the event's own interval, ``self`` is ``total`` minus
  the totals of its direct children.
* memory: the core records the net bytes allocated while an event was the
  innermost open one (``self``); ``total`` sums ``self`` over the subtree.
* device time: ``device_ns`` is the device time of the event's own work
  (``-1`` when not measured); ``total`` sums it over the subtree.
* device memory: ``Records.device_memory`` (net bytes of the device allocators while
  the event was the innermost open one; zeros where none reported) is ``self``, and
  ``total`` sums it over the subtree, as for the host's.

Parents come from the native ids, or for sources without them (torch) from
interval nesting on each thread (``native_layout/parents.py``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from pytest_opprof.native_layout.parents import PARENT_NONE, parent_rows
from pytest_opprof.native_layout.records import KIND_MEMORY, KIND_SCOPE, MEMORY_EVENT_NAME, Records

_I64 = np.int64


@dataclass(frozen=True)
class EventTree:
    """Per-event arrays, all in canonical order (row ``i`` is ``events[i]``).

    Times are nanoseconds, memory is bytes.  ``parent`` holds the row of the
    enclosing event or -1; ``name`` indexes ``names`` (``[memory]`` events are
    mapped to that name whatever their record says).
    """

    events: np.ndarray
    names: list[str]
    name: np.ndarray
    parent: np.ndarray
    depth: np.ndarray
    cpu_total_ns: np.ndarray
    cpu_self_ns: np.ndarray
    device_total_ns: np.ndarray
    device_self_ns: np.ndarray
    mem_total_bytes: np.ndarray
    mem_self_bytes: np.ndarray
    device_mem_total_bytes: np.ndarray
    device_mem_self_bytes: np.ndarray

    def __len__(self) -> int:
        return int(self.events.shape[0])


def build_tree(records: Records, *, native: bool = True) -> EventTree:
    """Order the events, link parents and compute self/total metrics.

    ``native=False`` links native parent ids with numpy only (the path the
    property tests and benchmarks hold the C lookup to).
    """
    raw = records.events
    start = raw["start_ns"].astype(_I64)
    end = np.maximum(raw["end_ns"].astype(_I64), start)
    rows = parent_rows(raw, native=native)
    order = _canonical_order(raw, start, end)
    # np.take gathers structured rows far faster than fancy indexing does.
    events = np.take(raw, order)
    position = np.empty(len(order), dtype=_I64)
    position[order] = np.arange(len(order), dtype=_I64)
    ordered_rows = rows[order]
    parent = np.where(ordered_rows >= 0, position[np.maximum(ordered_rows, 0)], PARENT_NONE)
    depth = depths(parent)
    names, name = _names(records, events)

    cpu_total = end[order] - start[order]
    cpu_self = cpu_total - child_sums(parent, cpu_total)
    mem_self = events["self_alloc_bytes"].astype(_I64) - events["self_free_bytes"].astype(_I64)
    dev_self = np.maximum(events["device_ns"].astype(_I64), 0)
    if records.device_memory is None:
        dmem_self = np.zeros(len(order), dtype=_I64)
    else:
        dmem_self = records.device_memory.astype(_I64)[order]
    mem_total, dev_total, dmem_total = subtree_sums(parent, depth, [mem_self, dev_self, dmem_self])
    return EventTree(
        events=events,
        names=names,
        name=name,
        parent=parent,
        depth=depth,
        cpu_total_ns=cpu_total,
        cpu_self_ns=cpu_self,
        device_total_ns=dev_total,
        device_self_ns=dev_self,
        mem_total_bytes=mem_total,
        mem_self_bytes=mem_self,
        device_mem_total_bytes=dmem_total,
        device_mem_self_bytes=dmem_self,
    )


def library_self_ns(records: Records, parents: np.ndarray | None = None) -> int:
    """Self CPU time (ns) of the library ops: every event but scopes and ``[memory]``.

    The time a test spent inside the op tables' view.  ``record_function``
    scopes are the user's own marks around any code, Python loops included, so
    their time is not "captured" time.  The sum of self times over a set of
    events is their totals less the totals of their direct children, which
    needs parents, not the whole tree: ``parents``, the parent row of each event
    (``parent_rows``) where the caller has them already.
    """
    raw = records.events
    if not len(raw):
        return 0
    start = raw["start_ns"].astype(_I64)
    total = np.maximum(raw["end_ns"].astype(_I64), start) - start
    kind = raw["kind"]
    library = (kind != KIND_SCOPE) & (kind != KIND_MEMORY)
    rows = parent_rows(raw) if parents is None else parents
    under_library = (rows >= 0) & library[np.maximum(rows, 0)]
    return int(total[library].sum() - total[under_library].sum())


def _canonical_order(raw: np.ndarray, start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Start ascending, then end descending, depth and id: parents before children."""
    order = np.argsort(start, kind="stable")
    ordered = start[order]
    if len(order) > 1 and (ordered[1:] == ordered[:-1]).any():
        # Equal starts need the tie-breakers; a plain sort is enough without them.
        order = np.lexsort((raw["id"], raw["depth"], -end, start))
    return order


def depths(parent: np.ndarray) -> np.ndarray:
    """Number of ancestors of each row, by pointer jumping over live rows."""
    n = len(parent)
    depth = np.zeros(n, dtype=_I64)
    live = np.flatnonzero(parent >= 0)
    anc = parent[live]
    steps = 0
    while len(live):
        steps += 1
        if steps > n:
            raise ValueError("event parents form a cycle")
        depth[live] += 1
        anc = parent[anc]
        keep = anc >= 0
        live, anc = live[keep], anc[keep]
    return depth


def child_sums(parent: np.ndarray, values: np.ndarray) -> np.ndarray:
    """Sum of ``values`` over each row's direct children."""
    has = parent >= 0
    if not has.any():
        return np.zeros(len(parent), dtype=_I64)
    sums = np.bincount(parent[has], weights=values[has], minlength=len(parent))
    return np.rint(sums).astype(_I64)


def subtree_sums(
    parent: np.ndarray, depth: np.ndarray, values: list[np.ndarray]
) -> list[np.ndarray]:
    """Each of ``values`` summed over each row's subtree, deepest level first."""
    totals = [v.copy() for v in values]
    # All-zero columns (no memory profiling, no device) have nothing to add up.
    totals_to_sum = [t for t in totals if t.any()]
    if not len(parent) or not totals_to_sum:
        return totals
    by_depth = np.argsort(depth, kind="stable")
    bounds = np.searchsorted(depth[by_depth], np.arange(int(depth.max()) + 2))
    for d in range(int(depth.max()), 0, -1):
        level = by_depth[bounds[d] : bounds[d + 1]]
        targets = parent[level]
        for total in totals_to_sum:
            np.add.at(total, targets, total[level])
    return totals


def names_with_memory(records: Records) -> tuple[list[str], int]:
    """The name table with ``[memory]`` in it (appended when missing) and its id."""
    names = list(records.names)
    if MEMORY_EVENT_NAME not in names:
        names.append(MEMORY_EVENT_NAME)
    return names, names.index(MEMORY_EVENT_NAME)


def _names(records: Records, events: np.ndarray) -> tuple[list[str], np.ndarray]:
    """Name table and per-event name ids, with ``[memory]`` for memory events."""
    name = events["name"].astype(_I64)
    memory = events["kind"] == KIND_MEMORY
    if not memory.any():
        return list(records.names), name
    names, memory_id = names_with_memory(records)
    name[memory] = memory_id
    return names, name


def combine_ids(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """One dense id per distinct (a, b) pair."""
    span = int(b.max()) + 1 if len(b) else 1
    _, inverse = np.unique(a.astype(_I64) * span + b.astype(_I64), return_inverse=True)
    return inverse.reshape(-1).astype(_I64)
