"""The group-by behind ``key_averages``: a session's records as :class:`FunctionEventAvg` rows.

:func:`average_records` groups a session's events by name (and optionally by
input shapes and the first call-site frames): one pass in C over a native drain
(``opprof_model_key_sums``), numpy (``np.unique``, ``np.bincount``) over the
canonical tree for records the pass refuses.  Python work is one object per
*group*, never per event; FLOPs are computed once per distinct (name, shapes)
(``event_flops.py``).  Object-based ``average_events`` (``EventList.key_averages``
over :class:`FunctionEvent` objects, ``events.py``) gives the same groups, in the
same order, with the same sums: the property tests hold both record paths to it."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

from pytest_opprof.capture.overhead import Overhead
from pytest_opprof.model.event_flops import (
    FLOPS_MAX,
    event_flops,
    flops_into,
    flops_of_pairs,
    formula_table,
    op_has_formula,
)
from pytest_opprof.model.event_traffic import TRAFFIC_FIELDS, event_traffic
from pytest_opprof.model.events import FunctionEventAvg
from pytest_opprof.model.overhead import corrections_ns
from pytest_opprof.model.tree import (
    EventTree,
    build_tree,
    combine_ids,
    library_self_ns,
    names_with_memory,
)
from pytest_opprof.native_layout.records import KIND_MEMORY, KIND_SCOPE, MEMORY_EVENT_NAME, Records
from pytest_opprof.native_layout.shape_table import prefetch

if TYPE_CHECKING:
    from pytest_opprof._native import RoundSums

_I64 = np.int64
_NS_PER_US = 1000.0


def average_records(
    records: Records,
    *,
    group_by_input_shape: bool = False,
    group_by_stack_n: int = 0,
    with_flops: bool = False,
    use_device: str | None = None,
    native: bool = True,
    overhead: Overhead | None = None,
) -> tuple[list[FunctionEventAvg], str | None]:
    """Vectorised :func:`average_events` over a session's records, and the device name.

    ``use_device`` None becomes ``"cuda"`` when any event has a device time.
    Over a native drain (children before parents on each thread), cut at the
    event limit or not, the tree and the per-key sums are one linear pass in C
    with no per-event ordering; otherwise (torch's unknown parents, another
    order) or with ``native=False``, numpy over the canonical tree.  Both give
    the same groups, order and sums.  With ``overhead``, each row's
    ``self_cpu_time_total`` has the profiler's cost subtracted (never below 0;
    ``self_cpu_time_total_raw`` keeps the measured figure), and ``cpu_time_total`` what
    the self times of its events' subtrees lost (``model/overhead.py``).
    """
    if len(records) == 0:
        return [], use_device
    if native:
        # Imported on first use: importing the model loads no extension.
        from pytest_opprof import _native

        out = _average_native(
            _native, records, group_by_input_shape, group_by_stack_n, with_flops, overhead
        )
        if out is not None:
            rows, device_events = out
            device = _device(use_device, device_events > 0)
            for avg in rows:
                avg.use_device = device
            if records.devices is not None:
                tree = build_tree(records)
                _add_traffic(rows, records, tree, group_by_input_shape, group_by_stack_n)
            return rows, device
    tree = build_tree(records, native=native)
    device = default_device(records, use_device)
    rows = _average_numpy(
        records, tree, group_by_input_shape, group_by_stack_n, with_flops, device, overhead
    )
    _add_traffic(rows, records, tree, group_by_input_shape, group_by_stack_n)
    return rows, device


def _add_traffic(
    rows: list[FunctionEventAvg], records: Records, tree: EventTree, by_shape: bool, stack_n: int
) -> None:
    """Each row's traffic: the sums of its events' (``event_traffic``), looked up by the
    group's key for the few events that carry any."""
    counted = event_traffic(records, tree)
    if counted is None:
        return
    carrying = np.flatnonzero(counted.any(axis=1)).tolist()
    if not carrying:
        return

    def key(name: str, shapes: object, stack: list[str]) -> tuple[object, ...]:
        return (name, repr(shapes) if by_shape else None, tuple(stack[:stack_n]))

    by_key = {key(str(r.key), r.input_shapes, r.stack): r for r in rows}
    ev = tree.events
    for row in carrying:
        avg = by_key.get(
            key(
                tree.names[int(tree.name[row])],
                records.shapes[int(ev["shape"][row])],
                records.stacks[int(ev["stack"][row])],
            )
        )
        if avg is None:
            continue
        for field, value in zip(TRAFFIC_FIELDS, counted[row].tolist(), strict=True):
            setattr(avg, field, getattr(avg, field) + value)


def _device(use_device: str | None, measured: bool) -> str | None:
    return use_device if use_device is not None or not measured else "cuda"


def default_device(records: Records, use_device: str | None) -> str | None:
    """``use_device``, or ``"cuda"`` where any event has a device time or memory."""
    measured = records.device_memory is not None or bool(
        len(records) and (records.events["device_ns"] >= 0).any()
    )
    return _device(use_device, measured)


class _NativeGroups(NamedTuple):
    """What the C pass gives, per group (see :func:`_native_groups`)."""

    ev: np.ndarray
    """The events it ran over (orphans made roots where the drain had any)."""
    names: list[str]
    memory_group: int
    parent_rows: np.ndarray
    device_events: int
    first_rows: list[int]
    kinds: list[int]
    name_ids: list[int]
    top_level: list[bool]
    sums: list[list[int]]
    """Per group, its ``GROUP_COLUMNS`` sums."""
    corrections: list[tuple[float, float]]
    """Per group, the profiler's cost subtracted from its (self, total) time, ns."""


def _native_groups(
    module: Any,
    records: Records,
    by_shape: bool,
    stack_n: int,
    with_flops: bool,
    overhead: Overhead | None,
    ordered: bool = True,
) -> _NativeGroups | None:
    """The C one-pass's groups, in canonical order (``ordered``: the order of their first
    events, as the rows are; else by group id); None where the pass does not apply.

    ``opprof_model_key_sums`` needs every parent to follow its children on the
    same thread (a native drain).  A session cut at the event limit leaves orphans
    (children of dropped events, whose parent id names nothing): the pass makes them
    roots itself, as the tree does.  Where it refuses them anyway (an orphan in the
    way of a child whose parent is there), they are made roots here and the pass
    runs again.  Unknown parents (torch) or another order are left to the numpy path, as
    are records with device memory (the pass has no column for it).
    """
    if records.device_memory is not None:
        return None
    ev = records.events
    names, memory_group = names_with_memory(records)
    group: np.ndarray | None = None
    m = len(names)
    if by_shape or stack_n > 0:
        key = np.where(ev["kind"] == KIND_MEMORY, memory_group, ev["name"]).astype(_I64)
        if by_shape:
            key = combine_ids(key, _shape_key(records, ev["shape"]))
        if stack_n > 0:
            key = combine_ids(key, _stack_key(records, ev["stack"], stack_n))
        group, m = key, int(key.max()) + 1

    def key_sums(events: np.ndarray) -> Any:
        return module.model_key_sums(events, group=group, memory_group=memory_group, m=m)

    fast = key_sums(ev)
    if fast is None:
        repaired = _orphans_as_roots(module, ev)
        if repaired is None:
            return None
        ev = repaired
        fast = key_sums(ev)
        if fast is None:
            return None
    sums, first, rows, device_events, _ = fast
    # FLOPs come from recorded shapes (pair_flops_for): with none, every count is 0.
    formulas = (
        formula_table(records, ev["name"]) if with_flops and len(records.shapes) > 1 else None
    )
    if formulas is not None:
        pair, pair_row = module.model_pairs(ev)
        module.model_flops(
            ev,
            sums,
            pair=pair,
            parent_row=rows,
            group=group,
            memory_group=memory_group,
            pair_flops=flops_of_pairs(records, ev, pair_row, formulas),
        )
    groups = np.flatnonzero(first >= 0)
    if ordered:
        firsts = ev[first[groups]]
        canonical = np.lexsort(
            (
                first[groups],
                firsts["id"],
                firsts["depth"],
                -np.maximum(firsts["end_ns"], firsts["start_ns"]),
                firsts["start_ns"],
            )
        )
        groups = groups[canonical]
    # Every group's figures read in one call per column, not a numpy item (a field view
    # and a scalar) per group and column: this runs once per measured round of every test.
    first_rows = first[groups]
    return _NativeGroups(
        ev=ev,
        names=names,
        memory_group=memory_group,
        parent_rows=rows,
        device_events=device_events,
        first_rows=first_rows.tolist(),
        kinds=ev["kind"][first_rows].tolist(),
        name_ids=ev["name"][first_rows].tolist(),
        top_level=(rows[first_rows] < 0).tolist(),
        sums=sums[groups].tolist(),
        corrections=_group_corrections(
            overhead,
            ev,
            rows,
            group
            if group is not None
            else np.where(ev["kind"] == KIND_MEMORY, memory_group, ev["name"]).astype(_I64),
            m,
            groups,
        ),
    )


def _group_corrections(
    overhead: Overhead | None,
    ev: np.ndarray,
    parent: np.ndarray,
    group: np.ndarray,
    m: int,
    groups: np.ndarray,
) -> list[tuple[float, float]]:
    """Per group of ``groups`` (of ``m``; ``group``: each event's), the ns subtracted from
    its (self, total) time: its events' (``model/overhead.py``)."""
    if overhead is None:
        return [(0.0, 0.0)] * len(groups)
    self_off, total_off = corrections_ns(overhead, ev, parent)
    by_group = (
        np.bincount(group, weights=self_off, minlength=m)[groups],
        np.bincount(group, weights=total_off, minlength=m)[groups],
    )
    return list(zip(by_group[0].tolist(), by_group[1].tolist(), strict=True))


def _average_native(
    module: Any,
    records: Records,
    by_shape: bool,
    stack_n: int,
    with_flops: bool,
    overhead: Overhead | None,
) -> tuple[list[FunctionEventAvg], int] | None:
    """:func:`_native_groups` as rows, and the number of events with a device time."""
    g = _native_groups(module, records, by_shape, stack_n, with_flops, overhead)
    if g is None:
        return None
    columns = module.GROUP_COLUMNS
    names, memory_group = g.names, g.memory_group
    out = [
        _avg(
            records,
            g.ev,
            names[memory_group if kind == KIND_MEMORY else name],
            dict(zip(columns, group_sums, strict=True)),
            row=row,
            is_top_level=top,
            by_shape=by_shape,
            stack_n=stack_n,
            use_device=None,
            correction_ns=correction,
        )
        for row, kind, name, top, group_sums, correction in zip(
            g.first_rows, g.kinds, g.name_ids, g.top_level, g.sums, g.corrections, strict=True
        )
    ]
    return out, g.device_events


class OpSums(NamedTuple):
    """Per-key sums of a native drain without a row object per key (:func:`op_sums`)."""

    keys: list[str]
    """Each group's key (groups in no particular order): its name, and with
    ``by_input_shape`` its first event's input shapes after a space where it has any
    (as ``gate.summary`` keys a row)."""
    sums: list[list[int]]
    """Each group's sums in ``_native.GROUP_COLUMNS`` order (ns, bytes, FLOPs; raw self
    time: no profiler cost subtracted)."""
    library_self_ns: int
    """``tree.library_self_ns`` of the same records."""
    waited: int | None = None
    """How many events waited for a CPU (``model.waits`` has nothing to say when none
    did); None when not counted."""


def op_sums(
    records: Records, *, by_input_shape: bool = False, with_flops: bool = False
) -> OpSums | None:
    """The integer sums behind :func:`average_records`' rows, one list per group, for the
    figures a test's round keeps (``RoundFigures.from_sums``): a row object per group
    cost more than the C pass itself, and only a printed table reads rows.  None where
    the C pass does not apply (then take the rows).
    """
    if len(records) == 0:
        return OpSums([], [], 0)
    if records.device_memory is not None:  # the C passes sum no device memory
        return None
    from pytest_opprof import _native

    if not by_input_shape:
        fast = _round_sums(_native, records, with_flops)
        if fast is not None:
            return fast
    return _grouped_sums(_native, records, by_input_shape, with_flops)


def _grouped_sums(
    module: Any, records: Records, by_input_shape: bool, with_flops: bool
) -> OpSums | None:
    """:func:`op_sums` through the rows' own C pass (:func:`_native_groups`): grouped by
    input shape too, or over a drain cut at the event limit."""
    # Unordered: a test's figures are keyed by op, and sorting the groups as the rows
    # are took a tenth of this function.
    g = _native_groups(module, records, by_input_shape, 0, with_flops, None, ordered=False)
    if g is None:
        return None
    names, memory_group = g.names, g.memory_group
    keys = [
        names[memory_group if kind == KIND_MEMORY else name]
        for kind, name in zip(g.kinds, g.name_ids, strict=True)
    ]
    if by_input_shape:
        shape_ids = g.ev["shape"][g.first_rows].tolist()
        prefetch(records.shapes, shape_ids)
        for i, sid in enumerate(shape_ids):
            shapes = records.shapes[sid]
            if shapes:
                keys[i] = f"{keys[i]} {shapes}"
    return OpSums(keys, g.sums, library_self_ns(records, g.parent_rows))


def _round_sums(module: Any, records: Records, with_flops: bool) -> OpSums | None:
    """:func:`op_sums` by name in one C pass (sums, library self time) and, where some op
    of the round has a FLOP formula, its shaped pairs and one more pass for the FLOPs:
    the numpy glue around five kernel calls cost more than the passes on a test's round.
    None where the pass does not apply (then the general path, which can make orphans
    roots first)."""
    names = records.names
    memory_group = _memory_id(names)
    m = max(len(names), memory_group + 1)
    out = module.model_round_sums(records.events, memory_group=memory_group, m=m)
    if out is None:
        return None
    groups = out.groups.tolist()
    if with_flops and len(records.shapes) > 1:
        _round_flops(module, records, out, groups, memory_group)
    keys = [names[g] if g != memory_group else MEMORY_EVENT_NAME for g in groups]
    return OpSums(keys, out.sums.tolist(), out.library_self_ns, out.waited)


def _round_flops(
    module: Any, records: Records, out: RoundSums, groups: list[int], memory_group: int
) -> None:
    """Fill the FLOP columns of a round's sums (``model_round_sums``' ``out``) from the
    pairs of its ops that have a formula: a round of many shapes is mostly indexing
    (each scalar index is recorded by value), whose rows need no pair at all."""
    ev, names = records.events, records.names
    formula = [g < len(names) and g != memory_group and op_has_formula(names[g]) for g in groups]
    if not any(formula):
        return
    pair, pair_row = module.model_formula_pairs(ev, out.row_group, formula)
    if not len(pair_row):
        return
    todo = list(
        zip(
            range(len(pair_row)),
            ev["name"][pair_row].tolist(),
            ev["shape"][pair_row].tolist(),
            strict=True,
        )
    )
    pair_flops = np.zeros(len(pair_row), dtype=_I64)
    flops_into(records, todo, pair_flops)
    module.model_flops(
        ev,
        out.sums,
        pair=pair,
        parent_row=out.parent_row,
        group=out.row_group,
        memory_group=memory_group,
        pair_flops=pair_flops,
    )


def _memory_id(names: list[str]) -> int:
    """``names_with_memory``'s id of ``[memory]`` without copying the table."""
    try:
        return names.index(MEMORY_EVENT_NAME)
    except ValueError:
        return len(names)


def _orphans_as_roots(module: Any, ev: np.ndarray) -> np.ndarray | None:
    """``ev`` with parent ids that name no recorded event set to -1; None if there are none.

    None too for what no rewrite of parents makes a drain: unknown parents, ids
    that are not native.
    """
    if (ev["parent"] < -1).any():
        return None
    rows = module.model_parent_rows(ev)
    if rows is None:
        return None
    roots = np.flatnonzero(rows < 0)
    orphan = roots[ev["parent"][roots] >= 0]
    if not len(orphan):
        return None
    out = np.empty_like(ev)
    # Copied as bytes: numpy copies a structured array item by item, ~5x slower.
    out.view(np.uint8)[:] = np.ascontiguousarray(ev).view(np.uint8)
    out["parent"][orphan] = -1
    return out


def _avg(
    records: Records,
    events: np.ndarray,
    key: str,
    c: dict[str, int],
    *,
    row: int,
    is_top_level: bool,
    by_shape: bool,
    stack_n: int,
    use_device: str | None,
    correction_ns: tuple[float, float] = (0.0, 0.0),
) -> FunctionEventAvg:
    """One group's average from its integer sums (ns, bytes) and first row (in ``events``).

    ``correction_ns``: profiler overhead to subtract from the group's (self, total) time.
    """
    self_off, total_off = correction_ns
    avg = FunctionEventAvg()
    avg.key = key
    avg.count = int(c["count"])
    avg.cpu_time_total_overhead = total_off / _NS_PER_US
    avg.cpu_time_total = (c["cpu_total_ns"] - total_off) / _NS_PER_US
    avg.self_cpu_time_total_raw = c["cpu_self_ns"] / _NS_PER_US
    avg.self_cpu_time_total = (c["cpu_self_ns"] - self_off) / _NS_PER_US
    avg.device_time_total = c["device_total_ns"] / _NS_PER_US
    avg.self_device_time_total = c["device_self_ns"] / _NS_PER_US
    avg.cpu_memory_usage = int(c["mem_total_bytes"])
    avg.self_cpu_memory_usage = int(c["mem_self_bytes"])
    # The C passes have no device memory column: they never see records that have it.
    avg.device_memory_usage = int(c.get("device_mem_total_bytes", 0))
    avg.self_device_memory_usage = int(c.get("device_mem_self_bytes", 0))
    avg.flops = int(c["flops"])
    avg.self_flops = int(c["self_flops"])
    avg.is_top_level = is_top_level
    avg.is_user_annotation = bool(events["kind"][row] == KIND_SCOPE)
    avg.use_device = use_device
    if by_shape:
        avg.input_shapes = records.shapes[int(events["shape"][row])]
    if stack_n > 0:
        avg.stack = records.stacks[int(events["stack"][row])][:stack_n]
    return avg


def _average_numpy(
    records: Records,
    tree: EventTree,
    by_shape: bool,
    stack_n: int,
    with_flops: bool,
    use_device: str | None,
    overhead: Overhead | None = None,
) -> list[FunctionEventAvg]:
    """The numpy path over the canonical tree: ``np.unique`` keys, ``np.bincount`` sums."""
    ev = tree.events
    key = tree.name
    if by_shape:
        key = combine_ids(key, _shape_key(records, ev["shape"]))
    if stack_n > 0:
        key = combine_ids(key, _stack_key(records, ev["stack"], stack_n))
    _, first, group = np.unique(key, return_index=True, return_inverse=True)
    # Groups numbered in first-seen (canonical) order, like the object path.
    rank = np.empty(len(first), dtype=_I64)
    rank[np.argsort(first, kind="stable")] = np.arange(len(first), dtype=_I64)
    group = rank[group.reshape(-1)]
    first = np.sort(first)
    m = len(first)

    def total(values: np.ndarray) -> np.ndarray:
        return np.bincount(group, weights=values, minlength=m)

    flops, self_flops = (
        event_flops(records, tree) if with_flops else (np.zeros(len(tree), dtype=_I64),) * 2
    )
    columns = {
        "count": np.bincount(group, minlength=m),
        "cpu_total_ns": total(tree.cpu_total_ns),
        "cpu_self_ns": total(tree.cpu_self_ns),
        "device_total_ns": total(tree.device_total_ns),
        "device_self_ns": total(tree.device_self_ns),
        "mem_total_bytes": total(tree.mem_total_bytes),
        "mem_self_bytes": total(tree.mem_self_bytes),
        "device_mem_total_bytes": total(tree.device_mem_total_bytes),
        "device_mem_self_bytes": total(tree.device_mem_self_bytes),
        "flops": _int_sums(group, flops, m),
        "self_flops": _int_sums(group, self_flops, m),
    }
    rounded = {k: np.rint(v).astype(_I64).tolist() for k, v in columns.items()}
    corrections = _group_corrections(overhead, ev, tree.parent, group, m, np.arange(m))
    return [
        _avg(
            records,
            tree.events,
            tree.names[int(tree.name[row])],
            {k: v[g] for k, v in rounded.items()},
            row=row,
            is_top_level=bool(tree.parent[row] < 0),
            by_shape=by_shape,
            stack_n=stack_n,
            use_device=use_device,
            correction_ns=corrections[g],
        )
        for g, row in enumerate(first.tolist())
    ]


def _int_sums(group: np.ndarray, values: np.ndarray, m: int) -> np.ndarray:
    """Exact integer sums per group (FLOPs overflow float64's 53 bits sooner than int64),
    ``FLOPS_MAX`` where a sum would pass it."""
    out = np.zeros(m, dtype=_I64)
    np.add.at(out, group, values)
    # int64 wraps silently; a float sum this large is off by far less than the margin.
    too_big = np.bincount(group, weights=values.astype(np.float64), minlength=m) >= 2.0**62
    out[too_big] = FLOPS_MAX
    return out


def _shape_key(records: Records, shape_ids: np.ndarray) -> np.ndarray:
    """Shape ids merged by shapes alone (interned ids also differ by dtype)."""
    canon: dict[str, int] = {}
    table = np.array(
        [canon.setdefault(repr(s), len(canon)) for s in records.shapes] or [0], dtype=_I64
    )
    return table[shape_ids.astype(_I64)]


def _stack_key(records: Records, stack_ids: np.ndarray, n: int) -> np.ndarray:
    """Stack ids merged by their first ``n`` frames."""
    canon: dict[tuple[str, ...], int] = {}
    table = np.array(
        [canon.setdefault(tuple(s[:n]), len(canon)) for s in records.stacks] or [0], dtype=_I64
    )
    return table[stack_ids.astype(_I64)]
