"""The torch source's reader of Kineto's event list as it was before the bulk reader.

One Python iteration per event, every accessor called on each (as of commit
bc95fe1).  Kept as the "before" of ``bench_torch_source.py --phases`` and as the
reference that ``tests/test_torch_source.py`` holds
:func:`~pytest_opprof.capture.sources.torch_source.read_events` to: both readers
must give the same ops, memory instants, names, shapes and dtypes.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from pytest_opprof.capture.sources.kineto_read import KinetoRead
from pytest_opprof.capture.sources.torch_observer import CONCRETE_OPS
from pytest_opprof.capture.sources.torch_source import MARKER, _dtype_text, _memory_device
from pytest_opprof.native_layout.records import MEMORY_EVENT_NAME


def read_events_per_event(events: list[Any]) -> KinetoRead:
    marker_starts = []
    names: dict[str, int] = {}
    shape_ids: dict[tuple[str, ...], int] = {}
    shapes: list[list[list[int] | None]] = [[]]
    dtypes: list[list[str]] = [[]]
    rows: list[tuple[int, int, int, int, int, int]] = []
    mem: list[tuple[int, int, int, int]] = []
    for e in events:
        name = e.name()
        if name == MARKER:
            marker_starts.append(e.start_ns())
            continue
        kind = e.activity_type()
        if name == MEMORY_EVENT_NAME:
            where = _memory_device(e.device_type(), e.device_index())
            mem.append((e.start_ns(), e.device_resource_id(), e.nbytes(), where))
            continue
        if kind not in ("cpu_op", "user_annotation"):
            continue
        ev_shapes = e.shapes()
        ev_dtypes = e.dtypes()
        if name in CONCRETE_OPS:
            ev_dtypes = [
                _dtype_text(d, v) for d, v in zip(ev_dtypes, e.concrete_inputs(), strict=False)
            ]
        key = (repr(ev_shapes), *ev_dtypes)
        sid = shape_ids.get(key)
        if sid is None:
            sid = shape_ids[key] = len(shapes)
            shapes.append([list(s) for s in ev_shapes])
            dtypes.append(list(ev_dtypes))
        nid = names.setdefault(name, len(names))
        rows.append((e.start_ns(), e.end_ns(), e.device_resource_id(), nid, sid, -1))
    return KinetoRead(
        ops=np.array(rows, dtype=np.int64).reshape(-1, 6),  # Kineto times no device here
        mem=np.array(mem, dtype=np.int64).reshape(-1, 4),
        names=list(names),
        shapes=shapes,
        dtypes=dtypes,
        marker_starts=marker_starts,
    )
