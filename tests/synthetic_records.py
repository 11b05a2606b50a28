"""Builders of synthetic :class:`Records` for the model and render tests (no native core)."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from pytest_opprof.native_layout.records import EVENT_DTYPE, KIND_NUMPY, Records


@dataclass
class Ev:
    """One event as a test writes it; ``children`` nest inside ``[start, end)``."""

    name: str
    start: int
    end: int
    children: list[Ev] = field(default_factory=list)
    thread: int = 1
    kind: int = KIND_NUMPY
    alloc: int = 0
    free: int = 0
    device_ns: int = -1
    shape: list[list[int]] | None = None
    stack: list[str] | None = None
    flags: int = 0
    dtypes: list[str] | None = None
    """Per argument (``shape`` given): its dtype text; float64 each when not given."""
    devices: list[str] | None = None
    """Per argument: its device (``Records.devices``); any given makes the records carry
    devices."""


def records_from(roots: list[Ev], *, known_parents: bool = True) -> Records:
    """Records for ``roots`` and their subtrees; parents are ids, or -2 when not known."""
    names: list[str] = []
    shapes: list[object] = [[]]
    stacks: list[list[str]] = [[]]
    rows: list[tuple[Ev, int, int, int]] = []  # event, id, parent id, depth

    def intern(table: list, value: object) -> int:
        if value not in table:
            table.append(value)
        return table.index(value)

    def walk(ev: Ev, parent: int, depth: int) -> None:
        eid = (ev.thread << 20) + len(rows) + 1
        rows.append((ev, eid, parent, depth))
        for child in ev.children:
            child.thread = ev.thread
            walk(child, eid, depth + 1)

    for root in roots:
        walk(root, -1, 0)
    arr = np.zeros(len(rows), dtype=EVENT_DTYPE)
    for i, (ev, eid, parent, depth) in enumerate(rows):
        arr[i] = (
            ev.start,
            ev.end,
            eid,
            parent if known_parents else -2,
            ev.alloc,
            ev.free,
            ev.device_ns,
            ev.thread,
            intern(names, ev.name),
            ev.kind,
            ev.flags,
            intern(shapes, _signature(ev)) if ev.shape is not None else 0,
            intern(stacks, ev.stack) if ev.stack is not None else 0,
            depth if known_parents else 0,
            1 if ev.alloc else 0,
            -1,  # wait for a CPU: not measured
        )
    signatures = [s if isinstance(s, tuple) else (s, None, None) for s in shapes]
    on_device = any(devices is not None for _, _, devices in signatures)
    return Records(
        events=arr,
        names=names,
        shapes=[s for s, _, _ in signatures],
        dtypes=[d if d is not None else ["float64"] * len(s) for s, d, _ in signatures],
        stacks=stacks,
        devices=[v if v is not None else [""] * len(s) for s, _, v in signatures]
        if on_device
        else None,
    )


def _signature(ev: Ev) -> object:
    """The shape table's entry of ``ev``: its shapes, or with dtypes or devices given,
    (shapes, dtypes, devices)."""
    if ev.dtypes is None and ev.devices is None:
        return ev.shape
    return (ev.shape, ev.dtypes, ev.devices)


def without_last(records: Records) -> Records:
    """``records`` as a drain cut at the event limit: the last commit is gone, and its
    children keep a parent id that names nothing."""
    return replace(records, events=records.events[:-1])
