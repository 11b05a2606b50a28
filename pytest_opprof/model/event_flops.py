"""FLOPs of a session's events: one formula call per distinct (op, shapes, dtypes).

:func:`event_flops` gives each tree row its FLOPs and self FLOPs ("innermost
wins"); the key averages' passes take the pairs' counts from
:func:`flops_of_pairs` and :func:`flops_into`.  Counts are memoised across
sessions: the same pairs recur from test to test and round to round.  The
formulas themselves are ``pytest_opprof.flops``'.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from pytest_opprof.flops import flops_for, has_formula
from pytest_opprof.model.tree import EventTree, combine_ids, subtree_sums
from pytest_opprof.native_layout.records import FLAG_EXCEPTION, KIND_MEMORY, Records
from pytest_opprof.native_layout.shape_table import prefetch, raw_entries

_I64 = np.int64
# FLOP counts stop here (2^63 - 1, 9.2e18) instead of wrapping: no op that ran gets
# near it (it would take years), only the shapes of one that raised (an outer
# product of two 2^32-element views: 2^64), and a call that raised counts 0.
FLOPS_MAX = int(np.iinfo(_I64).max)


def formula_table(records: Records, name_ids: np.ndarray) -> np.ndarray | None:
    """``has[name id]``: that op has a FLOP formula; None when no op in ``name_ids`` has one
    (most drains of indexing and creation ops: their FLOP columns stay 0)."""
    present = np.flatnonzero(np.bincount(name_ids, minlength=1)).tolist()
    if not present:
        return None
    has = np.zeros(present[-1] + 1, dtype=bool)
    for n in present:
        has[n] = n < len(records.names) and op_has_formula(records.names[n])
    return has if has.any() else None


def flops_of_pairs(
    records: Records, ev: np.ndarray, pair_row: np.ndarray, formulas: np.ndarray
) -> np.ndarray:
    """FLOPs of each distinct (name, shapes) pair, given the pair's first row in ``ev``;
    ``formulas`` from :func:`formula_table` of ``ev``."""
    name_ids = ev["name"][pair_row]
    shape_ids = ev["shape"][pair_row]
    out = np.zeros(len(pair_row), dtype=_I64)
    # Only the pairs pair_flops_for would look at leave numpy's 0: 2.5M distinct
    # slices (no formula) cost 2 s in a loop over every pair.
    rows = np.flatnonzero(formulas[name_ids] & (shape_ids != 0))
    shape_ids = shape_ids[rows]
    todo = list(zip(rows.tolist(), name_ids[rows].tolist(), shape_ids.tolist(), strict=True))
    flops_into(records, todo, out)
    return out


def flops_into(records: Records, todo: list[tuple[int, int, int]], out: np.ndarray) -> None:
    """``out[k]``: the FLOPs of each ``(k, name id, shape id)`` of ``todo``, which are pairs
    of ``records`` with a formula and a recorded shape."""
    names = records.names
    raw = raw_entries(records.shapes, [sid for _, _, sid in todo])
    if raw is None:
        prefetch(records.shapes, [sid for _, _, sid in todo])
        for k, nid, sid in todo:
            out[k] = pair_flops_for(records, names[nid], sid)
        return
    # Looked up by the entry's raw words: most pairs recur from test to test, and
    # decoding their shapes into lists to find them in _flops_memo cost more than
    # the rest of a round's figures.
    missed = []
    for (k, nid, sid), words in zip(todo, raw, strict=True):
        flops = _flops_by_words.get((names[nid], words))
        if flops is None:
            missed.append((k, nid, sid, words))
        else:
            out[k] = flops
    if missed:
        if len(_flops_by_words) > _FLOPS_BY_WORDS_MAX:
            _flops_by_words.clear()
        prefetch(records.shapes, [sid for _, _, sid, _ in missed])
        for k, nid, sid, words in missed:
            out[k] = _flops_by_words[names[nid], words] = pair_flops_for(records, names[nid], sid)


_flops_by_words: dict[tuple[str, bytes], int] = {}
"""FLOPs by (op name, raw shape entry words): :func:`pair_flops_for` of any drain's pair
with those words (see ``ShapeTable.raw``)."""
_FLOPS_BY_WORDS_MAX = 1 << 16


def pair_flops_for(records: Records, name: str, shape_id: int) -> int:
    """``flops_for`` of one (name, shape id) of ``records``, memoised across sessions.

    0 without recorded shapes (id 0): a formula given no shapes would count an
    elementwise op as one scalar FLOP."""
    if shape_id == 0 or not op_has_formula(name):
        return 0  # most ops: no need to look at their shapes
    shapes = records.shapes[shape_id]
    flops = _flops_memo(
        name,
        tuple(None if s is None else tuple(s) for s in shapes),
        tuple(shape_dtypes(records, shape_id)),
    )
    return min(flops, FLOPS_MAX)


# Plain dicts, not functools.lru_cache: their keys (str, tuples of ints and str) and
# int values hold nothing the garbage collector tracks, so it stops walking them,
# while an lru_cache's 65,536 linked entries were walked by every full collection
# (numpy's own tests run tens of them; each took a third longer).
_formula_known: dict[str, bool] = {}
_flops_memo_by_key: dict[tuple[str, tuple[tuple[int, ...] | None, ...], tuple[str, ...]], int] = {}
_FLOPS_MEMO_MAX = 1 << 16


def op_has_formula(name: str) -> bool:
    known = _formula_known.get(name)
    if known is None:
        if len(_formula_known) >= 1 << 12:
            _formula_known.clear()
        known = _formula_known[name] = has_formula(name)
    return known


def _flops_memo(
    name: str, shapes: tuple[tuple[int, ...] | None, ...], dtypes: tuple[str, ...]
) -> int:
    # The same (op, shapes, dtypes) recur from test to test and round to round;
    # einsum's recorded subscripts are process-lifetime ids, so a key means one count.
    key = (name, shapes, dtypes)
    flops = _flops_memo_by_key.get(key)
    if flops is None:
        if len(_flops_memo_by_key) >= _FLOPS_MEMO_MAX:
            _flops_memo_by_key.clear()
        flops = _flops_memo_by_key[key] = flops_for(name, shapes, dtypes)
    return flops


def event_flops(records: Records, tree: EventTree) -> tuple[np.ndarray, np.ndarray]:
    """(FLOPs, self FLOPs) per tree row; ``flops_for`` once per distinct (name, shapes, dtypes).

    Self FLOPs follow "innermost wins": an event's FLOPs count toward totals
    only when no descendant carries FLOPs (``outer`` -> ``multiply``: the
    ``multiply`` counts once, the ``outer`` not again).  A call that raised
    counts 0, as in the native pass (``opprof_model_flops``).
    """
    shape_ids = tree.events["shape"]
    pair = combine_ids(tree.name, shape_ids)
    _, first = np.unique(pair, return_index=True)
    per_pair = np.zeros(len(first), dtype=_I64)
    for p, row in enumerate(first.tolist()):
        if tree.events["kind"][row] == KIND_MEMORY:
            continue
        per_pair[p] = pair_flops_for(records, tree.names[int(tree.name[row])], int(shape_ids[row]))
    raised = (tree.events["flags"] & FLAG_EXCEPTION) != 0
    flops = np.where(raised, 0, per_pair[pair])
    carries = (flops > 0).astype(_I64)
    (under,) = subtree_sums(tree.parent, tree.depth, [carries])
    return flops, np.where(under - carries > 0, 0, flops)


def shape_dtypes(records: Records, shape_id: int) -> Sequence[str]:
    return records.dtypes[shape_id] if shape_id < len(records.dtypes) else ()
