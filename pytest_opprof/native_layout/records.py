"""Event records as they leave the native core: one numpy structured array.

``EVENT_DTYPE`` mirrors ``struct opprof_event`` in ``native/opprof.h`` field for
field (``_native`` checks the item size at import).  A :class:`Records` holds
one drained session: the array plus the string tables its integer ids point
into.  Everything downstream (model, summary, render) starts from here, and
sources other than the native core (torch) produce the same shape.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

KIND_SCOPE = 0
KIND_NUMPY = 1
KIND_TORCH = 2
KIND_MEMORY = 3

FLAG_EXCEPTION = 1
FLAG_TRUNCATED = 2
FLAG_SWITCHED = 4
"""The thread left its CPU while the event ran (another process took it, or it slept)."""

MEMORY_EVENT_NAME = "[memory]"

EVENT_DTYPE = np.dtype(
    [
        ("start_ns", "<i8"),
        ("end_ns", "<i8"),
        ("id", "<i8"),
        ("parent", "<i8"),  # id of the enclosing event, -1 for none
        ("self_alloc_bytes", "<i8"),
        ("self_free_bytes", "<i8"),
        ("device_ns", "<i8"),  # -1 when not measured
        ("thread", "<u8"),
        ("name", "<u4"),  # index into Records.names
        ("kind", "<u2"),
        ("flags", "<u2"),
        ("shape", "<u4"),  # index into Records.shapes, 0 = none
        ("stack", "<u4"),  # index into Records.stacks, 0 = none
        ("depth", "<u4"),
        ("self_alloc_count", "<u4"),
        ("wait_ns", "<i8"),  # ns waiting for a CPU during the event, -1 when not measured
    ]
)


@dataclass
class Records:
    """One session's events and the string tables their ids index.

    ``names[e["name"]]`` is the op name; ``shapes[e["shape"]]`` the input
    shapes as a list of per-argument dimension lists (``[]`` for a non-array);
    ``dtypes[e["shape"]]`` the matching dtype names (``""`` for a non-array);
    ``stacks[e["stack"]]`` the call-site frames, innermost first, each
    ``"file(line): function"``.  Index 0 of shapes/dtypes/stacks is "none".
    A native drain's shapes and dtypes are read-only sequences decoded on first
    use (native_layout/shape_table.py); other sources give lists.  ``devices[e["shape"]]``
    each argument's device (``"cpu"``, ``"cuda:0"``; ``""``: none), or ``devices`` is
    None: no argument was seen off the host (the torch observer fills it, for the
    traffic rule of ``flops/device_traffic.py``).  ``device_memory[i]`` the net bytes the
    device allocators (CUDA's caching allocator) reported while event ``i`` was the
    innermost open one, as ``self_alloc_bytes - self_free_bytes`` is for the host; None
    where no device allocator reported (the torch source fills it).
    """

    events: np.ndarray
    names: list[str]
    shapes: Sequence[list[list[int] | None]] = field(default_factory=lambda: [[]])
    dtypes: Sequence[list[str]] = field(default_factory=lambda: [[]])
    stacks: list[list[str]] = field(default_factory=lambda: [[]])
    dropped: int = 0
    clock_source: str = "unknown"
    devices: list[list[str]] | None = None
    device_memory: np.ndarray | None = None

    def __post_init__(self) -> None:
        # One figure per event, or every op's device bytes would land on another op.
        if self.device_memory is not None and len(self.device_memory) != len(self.events):
            raise ValueError(
                f"device_memory has {len(self.device_memory)} figures for {len(self.events)} events"
            )

    @classmethod
    def empty(cls) -> Records:
        return cls(events=np.zeros(0, dtype=EVENT_DTYPE), names=[])

    def __len__(self) -> int:
        return int(self.events.shape[0])

    def concat(self, other: Records) -> Records:
        """Merge another source's records into one session (ids re-indexed)."""
        name_map = _merge_table(self.names, other.names)
        on_device = self.devices is not None or other.devices is not None
        shape_map = _merge_table(_signatures(self, on_device), _signatures(other, on_device))
        stack_map = _merge_table(
            ["\n".join(s) for s in self.stacks], ["\n".join(s) for s in other.stacks]
        )
        names = list(self.names)
        shapes, dtypes, stacks = list(self.shapes), list(self.dtypes), list(self.stacks)
        for i, n in enumerate(other.names):
            if name_map[i] >= len(names):
                names.append(n)
        devices = [_devices_of(self, i) for i in range(len(shapes))] if on_device else None
        for i in range(len(other.shapes)):
            if shape_map[i] >= len(shapes):
                shapes.append(other.shapes[i])
                dtypes.append(other.dtypes[i])
                if devices is not None:
                    devices.append(_devices_of(other, i))
        for i, st in enumerate(other.stacks):
            if stack_map[i] >= len(stacks):
                stacks.append(st)
        ev = other.events.copy()
        if len(ev):
            ev["name"] = np.asarray(name_map, dtype=np.uint32)[ev["name"]]
            ev["shape"] = np.asarray(shape_map, dtype=np.uint32)[ev["shape"]]
            ev["stack"] = np.asarray(stack_map, dtype=np.uint32)[ev["stack"]]
        return Records(
            events=np.concatenate([self.events, ev]),
            names=names,
            shapes=shapes,
            dtypes=dtypes,
            stacks=stacks,
            dropped=self.dropped + other.dropped,
            clock_source=self.clock_source,
            devices=devices,
            device_memory=_device_memory(self, other),
        )


def _device_memory(*parts: Records) -> np.ndarray | None:
    """The parts' ``device_memory`` end to end (zeros for a part without), or None."""
    if all(r.device_memory is None for r in parts):
        return None
    return np.concatenate(
        [
            r.device_memory if r.device_memory is not None else np.zeros(len(r), dtype=np.int64)
            for r in parts
        ]
    )


def _devices_of(records: Records, i: int) -> list[str]:
    return records.devices[i] if records.devices is not None else []


def _signatures(records: Records, with_devices: bool) -> list[str]:
    """Each shape id's arguments as a key: equal keys are one entry of the merged table."""
    if not with_devices:
        return [repr((s, d)) for s, d in zip(records.shapes, records.dtypes, strict=True)]
    return [
        repr((s, d, _devices_of(records, i)))
        for i, (s, d) in enumerate(zip(records.shapes, records.dtypes, strict=True))
    ]


def _merge_table(mine: list[str], theirs: list[str]) -> list[int]:
    """Index in the merged table of each of ``theirs`` (appended after ``mine``)."""
    index = {s: i for i, s in enumerate(mine)}
    out = []
    nxt = len(mine)
    for s in theirs:
        if s not in index:
            index[s] = nxt
            nxt += 1
        out.append(index[s])
    return out
