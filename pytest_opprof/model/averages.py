"""Per-key statistics: :class:`FunctionEventAvg` and the vectorised group-by.

:func:`average_records` groups a session's events by name (and optionally by
input shapes and the first call-site frames) with ``np.unique`` and
``np.bincount``: Python work is one object per *group*, never per event.
FLOPs are computed once per distinct (name, shapes) and multiplied by counts.
Object-based :func:`average_events` (over :class:`FunctionEvent` objects)
gives the same groups, in the same order, with the same sums.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from pytest_opprof.flops import flops_for
from pytest_opprof.model.tree import EventTree
from pytest_opprof.records import Records

if TYPE_CHECKING:
    from pytest_opprof.model.events import FunctionEvent

_I64 = np.int64
_NS_PER_US = 1000.0


class FunctionEventAvg:
    """Sums over the events that share a key; times in microseconds, memory in bytes.

    ``cpu_time`` and ``device_time`` are per-call averages.  ``is_top_level``
    tells whether the group's first event had no parent (what
    ``table(top_level_events_only=True)`` looks at).  ``cpu_parent`` and
    ``cpu_children`` are the first event's, set only when built from
    :class:`FunctionEvent` objects.
    """

    def __init__(self) -> None:
        self.key: str | None = None
        self.count: int = 0
        self.cpu_time_total: float = 0.0
        self.self_cpu_time_total: float = 0.0
        self.device_time_total: float = 0.0
        self.self_device_time_total: float = 0.0
        self.cpu_memory_usage: int = 0
        self.self_cpu_memory_usage: int = 0
        self.device_memory_usage: int = 0
        self.self_device_memory_usage: int = 0
        self.flops: int = 0
        self.input_shapes: list[list[int]] = []
        self.stack: list[str] = []
        self.is_top_level: bool = True
        self.use_device: str | None = None
        self.cpu_parent: FunctionEvent | None = None
        self.cpu_children: list[FunctionEvent] = []

    @property
    def name(self) -> str | None:
        return self.key

    @property
    def cpu_time(self) -> float:
        """Average CPU time per call, us."""
        return 0.0 if self.count == 0 else self.cpu_time_total / self.count

    @property
    def device_time(self) -> float:
        """Average device time per call, us."""
        return 0.0 if self.count == 0 else self.device_time_total / self.count

    def add(self, other: FunctionEvent | FunctionEventAvg) -> FunctionEventAvg:
        """Accumulate ``other`` (same key); the first one added sets the descriptive fields."""
        if self.key is None:
            self.key = other.key
            self.input_shapes = list(other.input_shapes)
            self.stack = list(other.stack)
            self.is_top_level = other.is_top_level
            self.use_device = other.use_device
            self.cpu_parent = other.cpu_parent
            self.cpu_children = list(other.cpu_children)
        elif other.key != self.key:
            raise ValueError(f"cannot add {other.key!r} to the average of {self.key!r}")
        self.count += other.count
        self.cpu_time_total += other.cpu_time_total
        self.self_cpu_time_total += other.self_cpu_time_total
        self.device_time_total += other.device_time_total
        self.self_device_time_total += other.self_device_time_total
        self.cpu_memory_usage += other.cpu_memory_usage
        self.self_cpu_memory_usage += other.self_cpu_memory_usage
        self.device_memory_usage += other.device_memory_usage
        self.self_device_memory_usage += other.self_device_memory_usage
        self.flops += other.flops
        return self

    def __iadd__(self, other: FunctionEvent | FunctionEventAvg) -> FunctionEventAvg:
        return self.add(other)

    def __repr__(self) -> str:
        return (
            f"<FunctionEventAvg key={self.key} count={self.count} "
            f"self_cpu_time_total={self.self_cpu_time_total:.3f}us "
            f"cpu_time_total={self.cpu_time_total:.3f}us "
            f"cpu_memory_usage={self.cpu_memory_usage} input_shapes={self.input_shapes}>"
        )


def average_events(
    events: Iterable[FunctionEvent | FunctionEventAvg],
    *,
    group_by_input_shape: bool = False,
    group_by_stack_n: int = 0,
) -> list[FunctionEventAvg]:
    """Group objects by key (+ shapes, + first stack frames), in first-seen order."""
    stats: dict[tuple[Any, ...], FunctionEventAvg] = {}
    for evt in events:
        key: tuple[Any, ...] = (evt.key,)
        if group_by_input_shape:
            key += (repr(evt.input_shapes),)
        if group_by_stack_n > 0:
            key += tuple(evt.stack[:group_by_stack_n])
        avg = stats.get(key)
        if avg is None:
            avg = stats[key] = FunctionEventAvg()
        avg.add(evt)
    return [_trim(avg, group_by_input_shape, group_by_stack_n) for avg in stats.values()]


def _trim(avg: FunctionEventAvg, by_shape: bool, stack_n: int) -> FunctionEventAvg:
    avg.stack = avg.stack[:stack_n]
    if not by_shape:
        avg.input_shapes = []
    return avg


def average_records(
    records: Records,
    tree: EventTree,
    *,
    group_by_input_shape: bool = False,
    group_by_stack_n: int = 0,
    with_flops: bool = False,
    use_device: str | None = None,
) -> list[FunctionEventAvg]:
    """Vectorised :func:`average_events` over a session's tree."""
    n = len(tree)
    if n == 0:
        return []
    ev = tree.events
    key = tree.name
    shape_key = _shape_key(records, ev["shape"])
    if group_by_input_shape:
        key = _combine(key, shape_key)
    if group_by_stack_n > 0:
        key = _combine(key, _stack_key(records, ev["stack"], group_by_stack_n))
    _, first, group = np.unique(key, return_index=True, return_inverse=True)
    # Groups numbered in first-seen (canonical) order, like the object path.
    rank = np.empty(len(first), dtype=_I64)
    rank[np.argsort(first, kind="stable")] = np.arange(len(first), dtype=_I64)
    group = rank[group.reshape(-1)]
    first = np.sort(first)
    m = len(first)

    def total(values: np.ndarray) -> list[float]:
        return np.bincount(group, weights=values, minlength=m).tolist()  # type: ignore[no-any-return]

    counts = np.bincount(group, minlength=m).tolist()
    sums = {
        "cpu_time_total": total(tree.cpu_total_ns),
        "self_cpu_time_total": total(tree.cpu_self_ns),
        "device_time_total": total(tree.device_total_ns),
        "self_device_time_total": total(tree.device_self_ns),
    }
    mem_total = total(tree.mem_total_bytes)
    mem_self = total(tree.mem_self_bytes)
    flops = _group_flops(records, tree, group, m) if with_flops else [0] * m

    out = []
    for g, row in enumerate(first.tolist()):
        avg = FunctionEventAvg()
        avg.key = tree.names[int(tree.name[row])]
        avg.count = int(counts[g])
        for attr, values in sums.items():
            setattr(avg, attr, values[g] / _NS_PER_US)
        avg.cpu_memory_usage = round(mem_total[g])
        avg.self_cpu_memory_usage = round(mem_self[g])
        avg.flops = int(flops[g])
        avg.is_top_level = bool(tree.parent[row] < 0)
        avg.use_device = use_device
        if group_by_input_shape:
            avg.input_shapes = records.shapes[int(ev["shape"][row])]
        if group_by_stack_n > 0:
            avg.stack = records.stacks[int(ev["stack"][row])][:group_by_stack_n]
        out.append(avg)
    return out


def _combine(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """One dense id per distinct (a, b) pair."""
    span = int(b.max()) + 1 if len(b) else 1
    _, inverse = np.unique(a.astype(_I64) * span + b.astype(_I64), return_inverse=True)
    return inverse.reshape(-1).astype(_I64)


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


def _group_flops(records: Records, tree: EventTree, group: np.ndarray, m: int) -> np.ndarray:
    """FLOPs per group: ``flops_for`` once per distinct (name, interned shapes and dtypes)."""
    shape_ids = tree.events["shape"]
    pair = _combine(tree.name, shape_ids)
    _, first = np.unique(pair, return_index=True)
    per_pair = np.zeros(len(first), dtype=_I64)
    for p, row in enumerate(first.tolist()):
        name = tree.names[int(tree.name[row])]
        sid = int(shape_ids[row])
        per_pair[p] = flops_for(name, records.shapes[sid], shape_dtypes(records, sid))
    flops = np.zeros(m, dtype=_I64)
    np.add.at(flops, group, per_pair[pair])
    return flops


def shape_dtypes(records: Records, shape_id: int) -> Sequence[str]:
    return records.dtypes[shape_id] if shape_id < len(records.dtypes) else ()
