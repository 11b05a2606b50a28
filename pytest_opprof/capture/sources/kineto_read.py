"""What the torch source reads from its collector: :class:`KinetoRead`.

Both collectors fill one: Kineto's event list (``torch_source.read_events``)
and the native observer's buffers (``torch_observer.read``), so the records
downstream are built by the same code (``torch_source``).  On its own so the
observer's module needs nothing of the source that loads it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

HOST_MEMORY = -1
"""A memory instant's device where the host's allocator reported it (the observer's
``HOST_MEMORY``): torch.profiler's CPU, MKLDNN and IDEEP memory."""


@dataclass
class KinetoRead:
    """What a collector's read gives the torch source, in arrays and tables."""

    # int64 rows: start_ns, end_ns, thread, name id, shape id, device ns (the op's
    # CUDA event pair, children included; -1: not timed, and always with Kineto)
    ops: np.ndarray
    mem: np.ndarray  # int64 rows: time_ns, thread, bytes (negative: freed), device
    # (HOST_MEMORY, or the device's type << 8 | its index: CUDA's caching allocator)
    names: list[str]  # op names, in order of first appearance
    shapes: list[list[list[int] | None]]
    dtypes: list[list[str]]
    marker_starts: list[int]
    devices: list[list[str]] | None = None
    """Per shape id, each argument's device (``"cpu"``, ``"cuda:0"``, ``""``: none); None
    where no argument was off the host, or the collector records no devices (Kineto)."""
