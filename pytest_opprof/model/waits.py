"""Time ops spent waiting for a CPU: what a busy machine adds to them and no op did.

The core flags an event whose thread was switched out while it ran, and records how
long the thread then waited on a run queue (``wait_ns``; ``native/switches.c``).  An
event's wait covers its children's; its *self* wait is its wait less its direct
children's, as its self time is its time less theirs.  Few events wait (one per
context switch and nesting level, not one per op), so this reads only those.
"""

from __future__ import annotations

import numpy as np

from pytest_opprof.native_layout.records import Records


def op_waits_ns(records: Records, *, by_input_shape: bool = False) -> dict[str, tuple[int, int]]:
    """Per op key (as ``key_averages`` keys its rows), ``(self wait, total wait)`` in ns
    summed over the events that waited; empty when none did or waits were not measured."""
    ev = records.events
    if not len(ev) or "wait_ns" not in (ev.dtype.names or ()):
        return {}
    waited = np.flatnonzero(ev["wait_ns"] > 0)
    if not len(waited):
        return {}
    wait = ev["wait_ns"][waited].astype(np.int64)
    ids = ev["id"][waited]
    own = wait.copy()
    # A child that waited lies inside a parent that waited (the switch happened during
    # both): each waited parent gives up its waited children's time.
    order = np.argsort(ids, kind="stable")
    sorted_ids = ids[order]
    at = np.searchsorted(sorted_ids, ev["parent"][waited])
    inside = at < len(sorted_ids)
    inside[inside] = sorted_ids[at[inside]] == ev["parent"][waited][inside]
    np.subtract.at(own, order[at[inside]], wait[inside])
    names = records.names
    out: dict[str, tuple[int, int]] = {}
    for name, shape, self_ns, total_ns in zip(
        ev["name"][waited].tolist(),
        ev["shape"][waited].tolist(),
        np.maximum(own, 0).tolist(),
        wait.tolist(),
        strict=True,
    ):
        key = names[name]
        if by_input_shape and shape:
            shapes = records.shapes[shape]
            if shapes:
                key = f"{key} {shapes}"
        had = out.get(key, (0, 0))
        out[key] = (had[0] + self_ns, had[1] + total_ns)
    return out
