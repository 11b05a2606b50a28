"""A round's event tree folded into a flame (icicle) tree for the HTML report.

Sibling events with the same name are merged into one node (a loop of 1,000
``numpy.add`` calls is one box with ``count`` 1,000), so the tree stays small
however many events the round recorded; the merge runs level by level with
numpy, never once per event in Python.  A node's ``total_ns`` is the summed
interval of its events (its box's width), ``self_ns`` that less its children.
Times are the raw intervals: the per-event profiler overhead that op tables
subtract is left in, which a picture of where the time went can afford.

JSON form (``"flame"`` of a test in the JSON report)::

    {"wall_ns": int,                       # the round's wall time: the root's width
     "names": [str],                       # name table
     "nodes": [[parent, name, kind, total_ns, self_ns, count], ...],
     "omitted": int}                       # nodes left out by the cap

``parent`` indexes ``nodes`` (-1: a top-level event), and a parent always comes
before its children; siblings come in the order they first started.  ``kind``
is ``0`` for a ``record_function`` scope and ``1`` for an op.
"""

from __future__ import annotations

import numpy as np

from pytest_opprof.model.tree import EventTree
from pytest_opprof.native_layout.records import KIND_MEMORY, KIND_SCOPE

FLAME_MAX_NODES = 300
"""Nodes kept per test, the widest first: enough to see where the time went, small
enough that a few hundred flame views keep an HTML report light."""

KIND_SCOPE_NODE = 0
KIND_OP_NODE = 1

_I64 = np.int64


def flame_tree(
    tree: EventTree, *, wall_time_ns: int, max_nodes: int = FLAME_MAX_NODES
) -> dict[str, object]:
    """The merged tree of ``tree``'s events (JSON form in the module docstring)."""
    live = tree.events["kind"] != KIND_MEMORY if len(tree) else np.zeros(0, dtype=bool)
    n = len(tree)
    path = np.full(n, -1, dtype=_I64)
    path_parent: list[np.ndarray] = []
    path_name: list[np.ndarray] = []
    path_level: list[np.ndarray] = []
    count = 0
    depth = tree.depth
    top = int(depth.max()) if n else -1
    for d in range(top + 1):
        rows = np.flatnonzero((depth == d) & live)
        if not len(rows):
            continue
        parents = tree.parent[rows]
        ppath = np.where(parents >= 0, path[np.maximum(parents, 0)], -1)
        key = np.stack([ppath, tree.name[rows]], axis=1)
        unique, inverse = np.unique(key, axis=0, return_inverse=True)
        path[rows] = count + inverse.reshape(-1)
        path_parent.append(unique[:, 0])
        path_name.append(unique[:, 1])
        path_level.append(np.full(len(unique), d, dtype=_I64))
        count += len(unique)
    if not count:
        return {"wall_ns": int(wall_time_ns), "names": [], "nodes": [], "omitted": 0}
    parent_of = np.concatenate(path_parent)
    name_of = np.concatenate(path_name)
    rows = np.flatnonzero(live)
    ids = path[rows]
    total = np.bincount(ids, weights=tree.cpu_total_ns[rows], minlength=count)
    self_ns = np.bincount(ids, weights=np.maximum(tree.cpu_self_ns[rows], 0), minlength=count)
    calls = np.bincount(ids, minlength=count)
    # Rows are in start order, so a path's first row is its earliest start.
    _, first_row = np.unique(ids, return_index=True)
    first_start = first_row  # row ranks: comparable between siblings
    kind = np.where(tree.events["kind"][rows][first_row] == KIND_SCOPE, 0, 1)
    level = np.concatenate(path_level)
    # The widest nodes; a parent is at least as wide as its child and is shallower,
    # so the kept set is closed under "parent of".
    ranked = np.lexsort((level, -total))
    kept = np.sort(ranked[:max_nodes]) if count > max_nodes else np.arange(count)
    kept = kept[np.lexsort((first_start[kept], level[kept]))]
    index = np.full(count, -1, dtype=_I64)
    index[kept] = np.arange(len(kept))
    used_names = np.unique(name_of[kept])
    name_index = {int(v): i for i, v in enumerate(used_names)}
    nodes = [
        [
            int(index[parent_of[k]]) if parent_of[k] >= 0 else -1,
            name_index[int(name_of[k])],
            int(kind[k]),
            round(float(total[k])),
            round(float(self_ns[k])),
            int(calls[k]),
        ]
        for k in kept
    ]
    return {
        "wall_ns": int(wall_time_ns),
        "names": [tree.names[int(v)] for v in used_names],
        "nodes": nodes,
        "omitted": int(count - len(kept)),
    }
