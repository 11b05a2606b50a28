"""torch.profiler's event model over :class:`~pytest_opprof.native_layout.records.Records`.

``build_events`` makes one :class:`FunctionEvent` per record (only when
asked); ``key_averages`` groups the structured array directly (one C pass
over a native drain, numpy otherwise).
Times are microseconds, memory bytes.
"""

from __future__ import annotations

from pytest_opprof.capture.overhead import Overhead
from pytest_opprof.model import events as _events
from pytest_opprof.model.averages import average_records, default_device
from pytest_opprof.model.events import EventList, FunctionEvent, FunctionEventAvg, Interval
from pytest_opprof.model.tree import EventTree, build_tree, library_self_ns
from pytest_opprof.native_layout.records import Records

__all__ = [
    "EventList",
    "EventTree",
    "FunctionEvent",
    "FunctionEventAvg",
    "Interval",
    "build_events",
    "build_tree",
    "key_averages",
    "library_self_ns",
]


def build_events(
    records: Records,
    *,
    profile_memory: bool = False,
    with_flops: bool = False,
    use_device: str | None = None,
    overhead: Overhead | None = None,
) -> EventList:
    """One linked :class:`FunctionEvent` per record, ordered by start time.

    ``use_device`` defaults to ``"cuda"`` when any event has a device time or memory;
    ``overhead``: the profiler cost to subtract from self times.
    """
    tree = build_tree(records)
    return _events.build_events(
        records,
        tree,
        profile_memory=profile_memory,
        with_flops=with_flops,
        use_device=default_device(records, use_device),
        overhead=overhead,
    )


def key_averages(
    records: Records,
    *,
    group_by_input_shape: bool = False,
    group_by_stack_n: int = 0,
    profile_memory: bool = False,
    with_flops: bool = False,
    use_device: str | None = None,
    overhead: Overhead | None = None,
) -> EventList:
    """:class:`FunctionEventAvg` per name (+ input shapes, + first stack frames), vectorised.

    Same groups, order and sums as ``build_events(records).key_averages(...)``;
    ``overhead``: the profiler cost to subtract from self times.
    """
    rows, device = average_records(
        records,
        group_by_input_shape=group_by_input_shape,
        group_by_stack_n=group_by_stack_n,
        with_flops=with_flops,
        use_device=use_device,
        overhead=overhead,
    )
    return EventList(
        rows,
        use_device=device,
        profile_memory=profile_memory,
        with_flops=with_flops,
        overhead=overhead,
    )
