"""torch.profiler's event objects: :class:`Interval`, :class:`FunctionEvent`,
:class:`FunctionEventAvg`, :class:`EventList`.

Objects are built only when asked (:func:`build_events`); the metrics they
carry come precomputed from :func:`~pytest_opprof.model.tree.build_tree`.
Times are microseconds (floats), memory is bytes.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from pytest_opprof.capture.overhead import Overhead
from pytest_opprof.model.event_flops import event_flops, shape_dtypes
from pytest_opprof.model.event_traffic import TRAFFIC_FIELDS, event_traffic
from pytest_opprof.model.overhead import corrections_ns
from pytest_opprof.model.tree import EventTree
from pytest_opprof.native_layout.records import FLAG_EXCEPTION, KIND_SCOPE, Records

_NS_PER_US = 1000.0

# _RENDER_LAYERING: data flows records -> model -> render, and each part imports
# only the parts before it, so this module imports no renderer at module level.
# torch's API puts table(), export_chrome_trace() and export_stacks() on
# EventList, so those three methods import their renderer when called: the
# layering holds for every import of the model, the public API stays torch's,
# and there is no registration step (render hooking itself in) to forget.


class Interval:
    """A time range; ``start`` and ``end`` in microseconds."""

    __slots__ = ("end", "start")

    def __init__(self, start: float, end: float) -> None:
        self.start = start
        self.end = end

    def elapsed_us(self) -> float:
        """Length of the interval, us."""
        return self.end - self.start

    def __repr__(self) -> str:
        return f"Interval(start={self.start}, end={self.end})"


class FunctionEvent:
    """One recorded call (an op or a ``record_function`` scope).

    ``cpu_time_total`` is the call's own interval and ``self_cpu_time_total``
    excludes its direct children, each less the profiler's cost where it was
    subtracted (``model/overhead.py``; ``*_raw``: as measured); memory ``self_*``
    fields are the net bytes allocated while the call was innermost, the others
    include the subtree.
    ``self_flops`` is ``flops`` unless a descendant carries FLOPs, then 0
    (see :class:`FunctionEventAvg`).  ``host_to_device_bytes``,
    ``device_to_host_bytes``, ``device_to_device_bytes`` and ``device_syncs``: the
    copies and synchronisations the call made, where no op around it counts them
    (``model/event_traffic.py``).
    """

    __slots__ = (
        "cpu_children",
        "cpu_memory_usage",
        "cpu_parent",
        "cpu_time_total",
        "cpu_time_total_overhead",
        "device_memory_usage",
        "device_syncs",
        "device_time_total",
        "device_to_device_bytes",
        "device_to_host_bytes",
        "flops",
        "host_to_device_bytes",
        "id",
        "input_dtypes",
        "input_shapes",
        "is_exception",
        "kind",
        "name",
        "self_cpu_memory_usage",
        "self_cpu_time_total",
        "self_cpu_time_total_raw",
        "self_device_memory_usage",
        "self_device_time_total",
        "self_flops",
        "stack",
        "thread",
        "time_range",
        "use_device",
    )

    count = 1

    def __init__(
        self,
        id: int,
        name: str,
        thread: int,
        start_us: float,
        end_us: float,
        *,
        self_cpu_time_total: float | None = None,
        self_cpu_time_total_raw: float | None = None,
        device_time_total: float = 0.0,
        self_device_time_total: float = 0.0,
        cpu_memory_usage: int = 0,
        self_cpu_memory_usage: int = 0,
        flops: int = 0,
        self_flops: int | None = None,
        input_shapes: list[list[int] | None] | None = None,
        input_dtypes: list[str] | None = None,
        stack: list[str] | None = None,
        is_exception: bool = False,
        kind: int = 0,
        use_device: str | None = None,
    ) -> None:
        self.id = id
        self.name = name
        self.thread = thread
        self.time_range = Interval(start_us, end_us)
        self.cpu_time_total: float = end_us - start_us
        self.cpu_time_total_overhead: float = 0.0
        """The profiler's cost subtracted from ``cpu_time_total``, us."""
        self.self_cpu_time_total: float = (
            self.cpu_time_total if self_cpu_time_total is None else self_cpu_time_total
        )
        self.self_cpu_time_total_raw: float = (
            self.self_cpu_time_total if self_cpu_time_total_raw is None else self_cpu_time_total_raw
        )
        """Self time before the profiler's overhead was subtracted, us."""
        self.device_time_total = device_time_total
        self.self_device_time_total = self_device_time_total
        self.cpu_memory_usage = cpu_memory_usage
        self.self_cpu_memory_usage = self_cpu_memory_usage
        self.device_memory_usage = 0
        self.self_device_memory_usage = 0
        self.flops = flops
        self.self_flops = flops if self_flops is None else self_flops
        self.host_to_device_bytes = 0
        self.device_to_host_bytes = 0
        self.device_to_device_bytes = 0
        self.device_syncs = 0
        self.input_shapes: list[list[int] | None] = input_shapes if input_shapes is not None else []
        self.input_dtypes: list[str] = input_dtypes if input_dtypes is not None else []
        self.stack: list[str] = stack if stack is not None else []
        self.is_exception = is_exception
        self.kind = kind
        self.use_device = use_device
        self.cpu_parent: FunctionEvent | None = None
        self.cpu_children: list[FunctionEvent] = []

    @property
    def key(self) -> str:
        return self.name

    @property
    def cpu_time_total_raw(self) -> float:
        """Total time before the profiler's overhead was subtracted, us."""
        return self.cpu_time_total + self.cpu_time_total_overhead

    @property
    def is_top_level(self) -> bool:
        return self.cpu_parent is None

    @property
    def is_user_annotation(self) -> bool:
        """Whether this is a region the user marked (``record_function``), not an op."""
        return self.kind == KIND_SCOPE

    @property
    def cpu_time(self) -> float:
        """CPU time per call, us (``count`` is 1)."""
        return self.cpu_time_total

    @property
    def device_time(self) -> float:
        """Device time per call, us."""
        return self.device_time_total

    def __repr__(self) -> str:
        return (
            f"<FunctionEvent id={self.id} name={self.name} thread={self.thread} "
            f"start_us={self.time_range.start} end_us={self.time_range.end} "
            f"cpu_children={[c.id for c in self.cpu_children]} "
            f"input_shapes={self.input_shapes} cpu_memory_usage={self.cpu_memory_usage}>"
        )


class FunctionEventAvg:
    """Sums over the events that share a key; times in microseconds, memory in bytes.

    ``cpu_time`` and ``device_time`` are per-call averages.  ``flops`` sums
    each event's own formula (a composite op such as ``numpy.outer`` counts its
    work even though its ``numpy.multiply`` child counts it too);
    ``self_flops`` counts an event's FLOPs only when none of its descendants
    carries FLOPs ("innermost wins"), so summing ``self_flops`` over keys counts
    each unit of work once: use it for any total.  ``is_top_level``
    tells whether the group's first event had no parent (what
    ``table(top_level_events_only=True)`` looks at), ``is_user_annotation``
    whether it is a ``record_function`` scope (a scope and an op of one name
    share a key; the first event decides, as torch's first event sets it).  The
    traffic figures (``device_to_host_bytes``, ``device_syncs``, ...) sum the
    events', each copy counted once (see :class:`FunctionEvent`).  ``cpu_parent`` and
    ``cpu_children`` are the first event's, set only when built from
    :class:`FunctionEvent` objects.
    """

    def __init__(self) -> None:
        self.key: str | None = None
        self.count: int = 0
        self.cpu_time_total: float = 0.0
        self.cpu_time_total_overhead: float = 0.0
        """The profiler's cost subtracted from ``cpu_time_total``, us."""
        self.self_cpu_time_total: float = 0.0
        self.self_cpu_time_total_raw: float = 0.0
        """Self time before the profiler's overhead was subtracted, us."""
        self.device_time_total: float = 0.0
        self.self_device_time_total: float = 0.0
        self.cpu_memory_usage: int = 0
        self.self_cpu_memory_usage: int = 0
        self.device_memory_usage: int = 0
        self.self_device_memory_usage: int = 0
        self.flops: int = 0
        self.self_flops: int = 0
        self.host_to_device_bytes: int = 0
        self.device_to_host_bytes: int = 0
        self.device_to_device_bytes: int = 0
        self.device_syncs: int = 0
        self.input_shapes: list[list[int] | None] = []
        self.stack: list[str] = []
        self.is_top_level: bool = True
        self.is_user_annotation: bool = False
        self.use_device: str | None = None
        self.cpu_parent: FunctionEvent | None = None
        self.cpu_children: list[FunctionEvent] = []

    @property
    def name(self) -> str | None:
        return self.key

    @property
    def cpu_time_total_raw(self) -> float:
        """Total time before the profiler's overhead was subtracted, us."""
        return self.cpu_time_total + self.cpu_time_total_overhead

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
            self.is_user_annotation = other.is_user_annotation
            self.use_device = other.use_device
            self.cpu_parent = other.cpu_parent
            self.cpu_children = list(other.cpu_children)
        elif other.key != self.key:
            raise ValueError(f"cannot add {other.key!r} to the average of {self.key!r}")
        self.count += other.count
        self.cpu_time_total += other.cpu_time_total
        self.cpu_time_total_overhead += other.cpu_time_total_overhead
        self.self_cpu_time_total += other.self_cpu_time_total
        self.self_cpu_time_total_raw += other.self_cpu_time_total_raw
        self.device_time_total += other.device_time_total
        self.self_device_time_total += other.self_device_time_total
        self.cpu_memory_usage += other.cpu_memory_usage
        self.self_cpu_memory_usage += other.self_cpu_memory_usage
        self.device_memory_usage += other.device_memory_usage
        self.self_device_memory_usage += other.self_device_memory_usage
        self.flops += other.flops
        self.self_flops += other.self_flops
        self.host_to_device_bytes += other.host_to_device_bytes
        self.device_to_host_bytes += other.device_to_host_bytes
        self.device_to_device_bytes += other.device_to_device_bytes
        self.device_syncs += other.device_syncs
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


class EventList(list[Any]):
    """A list of :class:`FunctionEvent` or :class:`FunctionEventAvg` with torch's helpers."""

    memory_samples: np.ndarray | None = None
    """Live-bytes samples (``time_ns``, ``net_bytes``) the trace draws as a counter track."""
    dropped_events: int = 0
    """Events the profile dropped at its limit: the list covers the ones recorded before."""

    def __init__(
        self,
        events: Iterable[Any] = (),
        *,
        use_device: str | None = None,
        profile_memory: bool = False,
        with_flops: bool = False,
        overhead: Overhead | None = None,
    ) -> None:
        super().__init__(events)
        self.use_device = use_device
        self.profile_memory = profile_memory
        self.with_flops = with_flops
        self.overhead = overhead
        """The profiler cost subtracted from self times (None: nothing subtracted)."""

    def _like(self, events: Iterable[Any]) -> EventList:
        out = EventList(
            events,
            use_device=self.use_device,
            profile_memory=self.profile_memory,
            with_flops=self.with_flops,
            overhead=self.overhead,
        )
        out.dropped_events = self.dropped_events
        return out

    @property
    def self_cpu_time_total(self) -> float:
        """Sum of self CPU time over the list, us."""
        return float(sum(evt.self_cpu_time_total for evt in self))

    def __str__(self) -> str:
        return self.table()

    def table(
        self,
        sort_by: str | None = None,
        row_limit: int = 100,
        max_src_column_width: int | None = 75,
        max_name_column_width: int | None = 55,
        max_shapes_column_width: int | None = 80,
        header: str | None = None,
        top_level_events_only: bool = False,
        time_unit: str | None = None,
    ) -> str:
        """The list as a text table (see :func:`pytest_opprof.render.table.table`).

        When the profiler's overhead was subtracted, the footer says how much; when the
        profile dropped events at its limit, it says that the table is partial.
        """
        from pytest_opprof.render.table import table as render_table  # see _RENDER_LAYERING

        text = render_table(
            self,
            sort_by=sort_by,
            row_limit=row_limit,
            max_src_column_width=max_src_column_width,
            max_name_column_width=max_name_column_width,
            max_shapes_column_width=max_shapes_column_width,
            header=header,
            top_level_events_only=top_level_events_only,
            time_unit=time_unit,
            profile_memory=self.profile_memory,
            with_flops=self.with_flops,
            use_device=self.use_device,
        )
        if not text:
            return text
        if self.overhead is not None:
            text += self.overhead.describe() + "\n"
        if self.dropped_events:
            text += (
                f"PARTIAL: {self.dropped_events:,} events dropped at the profile's event limit "
                "(--opprof-max-events); the table covers the events recorded before it\n"
            )
        return text

    def export_chrome_trace(self, path: str) -> None:
        """Write a Chrome/Perfetto trace (JSON) of the events and ``memory_samples`` to ``path``."""
        from pytest_opprof.render.trace import export_chrome_trace  # see _RENDER_LAYERING

        export_chrome_trace(self, path, memory_samples=self.memory_samples)

    def export_stacks(self, path: str, metric: str = "self_cpu_time_total") -> None:
        """Write collapsed stacks (flamegraph input) of ``metric`` to ``path``."""
        from pytest_opprof.render.stacks import export_stacks  # see _RENDER_LAYERING

        export_stacks(self, path, metric)

    def key_averages(
        self, group_by_input_shape: bool = False, group_by_stack_n: int = 0
    ) -> EventList:
        """Group by key (+ input shapes, + first ``group_by_stack_n`` stack frames)."""
        return self._like(
            average_events(
                self,
                group_by_input_shape=group_by_input_shape,
                group_by_stack_n=group_by_stack_n,
            )
        )

    def total_average(self) -> FunctionEventAvg:
        """All events summed into one :class:`FunctionEventAvg` keyed ``"Total"``.

        Its ``flops`` is the sum of ``self_flops``: work that both a composite
        op and its children carry counts once.
        """
        total = FunctionEventAvg()
        for evt in self:
            total.key = None
            total.add(evt)
        total.key = "Total"
        total.flops = total.self_flops
        # The descriptive fields of the last event added mean nothing for a total.
        total.input_shapes, total.stack = [], []
        total.cpu_parent, total.cpu_children = None, []
        total.is_top_level = True
        return total


def build_events(
    records: Records,
    tree: EventTree,
    *,
    profile_memory: bool = False,
    with_flops: bool = False,
    use_device: str | None = None,
    overhead: Overhead | None = None,
) -> EventList:
    """One linked :class:`FunctionEvent` per record, in canonical (start) order.

    With ``overhead``, self times have the profiler's cost subtracted (never below 0).
    """
    ev = tree.events
    raw_self_ns = tree.cpu_self_ns
    self_ns, total_ns = raw_self_ns, tree.cpu_total_ns
    if overhead is not None:
        self_off, total_off = corrections_ns(overhead, ev, tree.parent)
        self_ns, total_ns = raw_self_ns - self_off, total_ns - total_off
    names = tree.names
    if with_flops:
        flops_col, self_flops_col = event_flops(records, tree)
        flops_list, self_flops_list = flops_col.tolist(), self_flops_col.tolist()
    else:
        flops_list = self_flops_list = [0] * len(tree)
    traffic = event_traffic(records, tree)
    traffic_columns = (
        dict(zip(TRAFFIC_FIELDS, traffic.T.tolist(), strict=True))
        if traffic is not None
        else dict.fromkeys(TRAFFIC_FIELDS, [0] * len(tree))
    )
    start_us = ev["start_ns"] / _NS_PER_US
    end_us = (ev["start_ns"] + tree.cpu_total_ns) / _NS_PER_US
    shape_ids = ev["shape"].tolist()
    n = len(tree)
    # Named columns, one per FunctionEvent slot, set column by column through the
    # slots' descriptors: one object per event and no 20-argument call per event.
    columns: dict[str, list[Any]] = {
        "id": ev["id"].tolist(),
        "name": [names[nid] for nid in tree.name.tolist()],
        "thread": ev["thread"].tolist(),
        "time_range": list(map(Interval, start_us.tolist(), end_us.tolist())),
        "cpu_time_total": (total_ns / _NS_PER_US).tolist(),
        "cpu_time_total_overhead": ((tree.cpu_total_ns - total_ns) / _NS_PER_US).tolist(),
        "self_cpu_time_total": (self_ns / _NS_PER_US).tolist(),
        "self_cpu_time_total_raw": (raw_self_ns / _NS_PER_US).tolist(),
        "device_time_total": (tree.device_total_ns / _NS_PER_US).tolist(),
        "self_device_time_total": (tree.device_self_ns / _NS_PER_US).tolist(),
        "cpu_memory_usage": tree.mem_total_bytes.tolist(),
        "self_cpu_memory_usage": tree.mem_self_bytes.tolist(),
        "device_memory_usage": tree.device_mem_total_bytes.tolist(),
        "self_device_memory_usage": tree.device_mem_self_bytes.tolist(),
        "flops": flops_list,
        "self_flops": self_flops_list,
        **traffic_columns,
        "input_shapes": [records.shapes[sid] for sid in shape_ids],
        "input_dtypes": [list(shape_dtypes(records, sid)) for sid in shape_ids],
        "stack": [records.stacks[sid] for sid in ev["stack"].tolist()],
        "is_exception": ((ev["flags"] & FLAG_EXCEPTION) != 0).tolist(),
        "kind": ev["kind"].tolist(),
        "use_device": [use_device] * n,
        "cpu_parent": [None] * n,
        "cpu_children": [[] for _ in range(n)],
    }
    new = FunctionEvent.__new__
    objs: list[FunctionEvent] = [new(FunctionEvent) for _ in range(n)]
    for slot, values in columns.items():
        setter = getattr(FunctionEvent, slot).__set__
        for obj, value in zip(objs, values, strict=True):
            setter(obj, value)
    for child, p in zip(objs, tree.parent.tolist(), strict=True):
        if p >= 0:
            parent = objs[p]
            child.cpu_parent = parent
            parent.cpu_children.append(child)
    return EventList(
        objs,
        use_device=use_device,
        profile_memory=profile_memory,
        with_flops=with_flops,
        overhead=overhead,
    )
