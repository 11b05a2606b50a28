"""The one door to the compiled core (``pytest_opprof._opprof_native``).

Every other module goes through the wrappers here (or at most ``lib``/``ffi``).
A failing entry point raises :class:`~pytest_opprof.errors.NativeError` with
the message the C side left in ``opprof_last_error()``.  cffi releases the GIL
around each call; entry points that need it take it themselves.

Sections: core (this engineer), then one section per source, appended below.
"""

from __future__ import annotations

import json
import os
import threading
from typing import Any

import numpy as np

from pytest_opprof.errors import NativeError, OpprofError
from pytest_opprof.records import EVENT_DTYPE, Records


class NativeBuildError(OpprofError, ImportError):
    """The compiled core is missing or does not match this Python package."""


try:
    from pytest_opprof._opprof_native import ffi, lib
except ImportError as exc:  # pragma: no cover - depends on the install
    raise NativeBuildError(
        f"pytest-opprof's native core is not built ({exc}); "
        "run `pip install -e .` or `python setup.py build_ext --inplace` in the source tree"
    ) from exc

__all__ = ["ffi", "lib"]

PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))


def check(status: int) -> None:
    """Raise :class:`NativeError` for a non-zero status from an ``opprof_`` call."""
    if status != 0:
        raise NativeError(status, ffi.string(lib.opprof_last_error()).decode("utf-8", "replace"))


check(lib.opprof_init())
if ffi.sizeof("opprof_event") != EVENT_DTYPE.itemsize:  # pragma: no cover - build mismatch
    raise NativeBuildError(
        f"native opprof_event is {ffi.sizeof('opprof_event')} bytes but records.EVENT_DTYPE is "
        f"{EVENT_DTYPE.itemsize}; rebuild the extension (`pip install -e .`)"
    )

# ---- core: clock -----------------------------------------------------------


def clock_source() -> str:
    """``"tsc"`` (calibrated invariant TSC) or ``"clock_gettime"`` (CLOCK_MONOTONIC)."""
    return str(ffi.string(lib.opprof_clock_source()).decode())


def ns_per_tick() -> float:
    """Nanoseconds per raw clock tick (1.0 for clock_gettime)."""
    return float(lib.opprof_ns_per_tick())


def now_ns() -> int:
    """The core clock now, in ns on the same time base as drained events."""
    return int(lib.opprof_now_ns())


# ---- core: sessions --------------------------------------------------------


def start(options: int) -> None:
    """Start recording in all threads with ``OPPROF_OPT_*`` bits; clears the last session."""
    check(lib.opprof_start(options))


def stop() -> None:
    """Stop recording; buffers stay until :func:`drain`."""
    check(lib.opprof_stop())


def is_recording() -> bool:
    return bool(lib.opprof_is_recording())


def pending() -> int:
    """Events buffered in the current session."""
    return int(lib.opprof_pending())


def set_capacity(max_events: int) -> None:
    """Events kept per session (all threads together); later ones are counted as dropped."""
    check(lib.opprof_set_capacity(max_events))


# ---- core: names -----------------------------------------------------------

_names_lock = threading.Lock()
_name_ids: dict[str, int] = {}
_names: list[str] = []


def intern(name: str) -> int:
    """Id of ``name`` in the native name table (cached; ids live for the process)."""
    found = _name_ids.get(name)
    if found is not None:
        return found
    out = ffi.new("uint32_t *")
    check(lib.opprof_name_intern(name.encode("utf-8"), out))
    _name_ids[name] = int(out[0])
    return int(out[0])


def names() -> list[str]:
    """Every interned name, indexed by id (a fresh list)."""
    with _names_lock:
        count = int(lib.opprof_name_count())
        for i in range(len(_names), count):
            _names.append(ffi.string(lib.opprof_name_get(i)).decode("utf-8", "replace"))
        return list(_names)


# ---- core: record_function scopes --------------------------------------------


def scope_push(name_id: int) -> None:
    check(lib.opprof_scope_push(name_id))


def scope_pop(flags: int = 0) -> None:
    """Close the innermost scope; ``flags`` are ``OPPROF_FLAG_*`` bits."""
    check(lib.opprof_scope_pop(flags))


# ---- core: drain -----------------------------------------------------------


def drain() -> Records:
    """Everything recorded since the last start, as one :class:`Records` (after stop)."""
    capacity = pending()
    events = np.empty(capacity, dtype=EVENT_DTYPE)
    written = ffi.new("int64_t *")
    dropped = ffi.new("int64_t *")
    check(lib.opprof_drain(ffi.from_buffer("opprof_event[]", events), capacity, written, dropped))
    if written[0] < capacity:
        events = events[: written[0]]
    shapes: list[list[list[int]]] = [[]]
    dtypes: list[list[str]] = [[]]
    for i in range(1, int(lib.opprof_shape_count())):
        shapes.append(json.loads(_text(lib.opprof_shape_get(i))))
        dtypes.append(_text(lib.opprof_shape_dtypes_get(i)).split(","))
    stacks: list[list[str]] = [[]]
    for i in range(1, int(lib.opprof_stack_count())):
        stacks.append(_user_frames(_text(lib.opprof_stack_get(i)).split("\n")))
    return Records(
        events=events,
        names=names(),
        shapes=shapes,
        dtypes=dtypes,
        stacks=stacks,
        dropped=int(dropped[0]),
        clock_source=clock_source(),
    )


def _text(ptr: Any) -> str:
    return "" if ptr == ffi.NULL else str(ffi.string(ptr).decode("utf-8", "replace"))


def _user_frames(frames: list[str]) -> list[str]:
    """Drop the innermost frames that are pytest-opprof's own (record_function's enter)."""
    own = PACKAGE_DIR + os.sep
    i = 0
    while i < len(frames) - 1 and frames[i].startswith(own):
        i += 1
    return frames[i:]


# ---- core: tree helper -------------------------------------------------------


def nest_sorted(thread: np.ndarray, start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Row of each event's innermost container on its thread, -1 for none.

    Rows must be sorted by (thread, start ascending, end descending).
    """
    thread = np.ascontiguousarray(thread, dtype=np.uint64)
    start = np.ascontiguousarray(start, dtype=np.int64)
    end = np.ascontiguousarray(end, dtype=np.int64)
    n = len(thread)
    if len(start) != n or len(end) != n:
        raise OpprofError(f"nest_sorted: thread, start and end differ in length ({n}, "
                          f"{len(start)}, {len(end)})")
    parent = np.empty(n, dtype=np.int64)
    check(
        lib.opprof_nest_sorted(
            ffi.cast("const uint64_t *", ffi.from_buffer(thread)),
            ffi.cast("const int64_t *", ffi.from_buffer(start)),
            ffi.cast("const int64_t *", ffi.from_buffer(end)),
            n,
            ffi.cast("int64_t *", ffi.from_buffer(parent)),
        )
    )
    return parent
