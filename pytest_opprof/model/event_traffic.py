"""Host<->device traffic of a session's events, after the fact: the rule once per distinct
(op, arguments), never per event.

:func:`event_traffic` gives each tree row the traffic it counts
(``flops/device_traffic.py``'s rule of its name and arguments), "outermost wins": the
copy ops nest (``aten::to`` > ``aten::_to_copy`` > ``aten::copy_``, ``aten::item`` >
``aten::_local_scalar_dense``) and each carries the same copy, so a row counts only
when no op around it carries traffic.  The op named is then the one the test called
(``.cpu()`` is ``aten::to``, ``.item()`` is ``aten::item``) on a GPU as on fake
tensors, whose ops nest differently below it.  :func:`round_traffic` sums a round's
traffic and names where it happened: by op and innermost ``record_function`` scope.

Records without devices (``Records.devices`` None: no argument off the host, or
Kineto collected them) count nothing: a host-only test pays no pass at all.
"""

from __future__ import annotations

import numpy as np

from pytest_opprof.flops.device_traffic import (
    NONE,
    SCOPE_SEPARATOR,
    TRAFFIC_OPS,
    Traffic,
    op_traffic,
)
from pytest_opprof.model.tree import EventTree, build_tree
from pytest_opprof.native_layout.records import KIND_SCOPE, KIND_TORCH, Records

_I64 = np.int64
TRAFFIC_FIELDS = Traffic._fields
"""The traffic figures of ``FunctionEvent`` and ``FunctionEventAvg``, in ``Traffic`` order."""
WIDTH = len(TRAFFIC_FIELDS)


def site_key(op: str, scope: str | None) -> str:
    """The key of a traffic site: the op, and the innermost scope around it if any."""
    return op if not scope else f"{op}{SCOPE_SEPARATOR}{scope}"


_memo: dict[tuple[object, ...], Traffic] = {}
_MEMO_MAX = 1 << 14


def pair_traffic(records: Records, name: str, shape_id: int) -> Traffic:
    """:func:`op_traffic` of one (name, shape id) of ``records``, memoised across sessions."""
    if records.devices is None or shape_id == 0 or shape_id >= len(records.devices):
        return NONE
    shapes = tuple(None if s is None else tuple(s) for s in records.shapes[shape_id])
    key = (name, shapes, tuple(records.dtypes[shape_id]), tuple(records.devices[shape_id]))
    found = _memo.get(key)
    if found is None:
        if len(_memo) >= _MEMO_MAX:
            _memo.clear()
        found = _memo[key] = op_traffic(name, shapes, key[2], key[3])
    return found


def event_traffic(records: Records, tree: EventTree) -> np.ndarray | None:
    """Per tree row, the traffic it counts (``Traffic``'s fields as int64 columns);
    None where ``records`` have no devices."""
    if records.devices is None or len(tree) == 0:
        return None
    ev = tree.events
    ruled = np.array([n in TRAFFIC_OPS for n in tree.names] or [False], dtype=bool)
    rows = np.flatnonzero(ruled[tree.name] & (ev["kind"] == KIND_TORCH) & (ev["shape"] != 0))
    out = np.zeros((len(tree), WIDTH), dtype=_I64)
    if len(rows) == 0:
        return out
    pairs = np.stack([tree.name[rows].astype(_I64), ev["shape"][rows].astype(_I64)], axis=1)
    distinct, inverse = np.unique(pairs, axis=0, return_inverse=True)
    per_pair = np.array(
        [pair_traffic(records, tree.names[n], s) for n, s in distinct.tolist()], dtype=_I64
    ).reshape(len(distinct), WIDTH)
    out[rows] = per_pair[inverse.reshape(-1)]
    carries = np.asarray(out.any(axis=1), dtype=bool)
    counted = rows[carries[rows]]
    # Up the tree from every carrying row at once, one level a step.
    above = tree.parent[counted]
    inner = np.zeros(len(counted), dtype=bool)
    while (live := above >= 0).any():
        inner[live] |= carries[above[live]]
        above[live] = tree.parent[above[live]]
    out[counted[inner]] = 0
    return out


def scope_rows(tree: EventTree, rows: np.ndarray) -> np.ndarray:
    """The row of the innermost ``record_function`` scope around each of ``rows``, -1 if none."""
    found = np.full(len(rows), -1, dtype=_I64)
    above = tree.parent[rows].astype(_I64)
    while (live := (above >= 0) & (found < 0)).any():
        idx = np.flatnonzero(live)
        is_scope = tree.events["kind"][above[idx]] == KIND_SCOPE
        found[idx[is_scope]] = above[idx[is_scope]]
        above[idx] = tree.parent[above[idx]]
    return found


def round_traffic(records: Records) -> tuple[Traffic, dict[str, Traffic]] | None:
    """A round's traffic, and by site (:func:`site_key`) where it was not 0; None where
    its records have no devices (nothing was off the host)."""
    if records.devices is None:
        return None
    tree = build_tree(records)
    counted = event_traffic(records, tree)
    if counted is None:
        return None
    total = Traffic(*(int(v) for v in counted.sum(axis=0).tolist()))
    rows = np.flatnonzero(counted.any(axis=1))
    scopes = scope_rows(tree, rows)
    # One key per distinct (op name, scope name), then summed: no Python per event.
    scope_names = np.where(scopes >= 0, tree.name[np.maximum(scopes, 0)].astype(_I64), -1)
    pairs = np.stack([tree.name[rows].astype(_I64), scope_names], axis=1).reshape(-1, 2)
    distinct, inverse = np.unique(pairs, axis=0, return_inverse=True)
    sums = np.zeros((len(distinct), WIDTH), dtype=_I64)
    np.add.at(sums, inverse.reshape(-1), counted[rows])
    names = tree.names
    sites = {
        site_key(names[op], names[scope] if scope >= 0 else None): Traffic(*figures)
        for (op, scope), figures in zip(distinct.tolist(), sums.tolist(), strict=True)
    }
    return total, dict(sorted(sites.items()))
