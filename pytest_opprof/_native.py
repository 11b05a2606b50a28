"""The one door to the compiled core (``pytest_opprof._opprof_native``).

Every other module goes through the wrappers here (or at most ``lib``/``ffi``).
A failing entry point raises :class:`~pytest_opprof.errors.NativeError` with
the message the C side left in ``opprof_last_error()``.  cffi releases the GIL
around each call; entry points that need it take it themselves.

One section per native file (core, memory, numpy, cuda, model, buffers,
fastscope).  The module is longer than the ~600 lines modules aim for: keeping
every cffi call in one file is what lets status codes, GIL handling and build
checks live in one place, so it stays whole rather than split by source.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import os
import struct
import sys
import threading
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import numpy as np

from pytest_opprof.errors import NativeBuildError, NativeError, OpprofError
from pytest_opprof.native_layout import shape_table
from pytest_opprof.native_layout.records import EVENT_DTYPE, Records

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


@functools.cache
def clock_source() -> str:
    """``"tsc"`` (calibrated invariant TSC) or ``"clock_gettime"`` (CLOCK_MONOTONIC): chosen
    once, when the core starts (``opprof_init``), so read once."""
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
    if options & _pyfunc_options:
        _pyfunc_arm(True)


def stop() -> None:
    """Stop recording; buffers stay until :func:`drain`."""
    if _pyfunc_options:
        _pyfunc_arm(False)
    check(lib.opprof_stop())


def is_recording() -> bool:
    return bool(lib.opprof_is_recording())


def pending() -> int:
    """Events buffered in the current session."""
    return int(lib.opprof_pending())


DEFAULT_CAPACITY = 4 << 20
"""``OPPROF_DEFAULT_CAPACITY`` in native/core_internal.h: events kept per session."""
_capacity = DEFAULT_CAPACITY


def set_capacity(max_events: int) -> None:
    """Events kept per session (all threads together); later ones are counted as dropped."""
    global _capacity
    check(lib.opprof_set_capacity(max_events))
    _capacity = max_events


def capacity() -> int:
    """The events kept per session, as last set (the native default until then)."""
    return _capacity


# ---- core: names -----------------------------------------------------------

_names_lock = threading.Lock()


def _new_names_lock_in_child() -> None:
    """A forked child starts with this lock free: the parent may have held it (a native
    call under it releases the GIL) while another of its threads forked."""
    global _names_lock
    _names_lock = threading.Lock()


os.register_at_fork(after_in_child=_new_names_lock_in_child)
_name_ids: dict[str, int] = {}
_names: list[str] = []
_names_view: list[str] | None = None
"""The copy of ``_names`` that :func:`names` hands out (None: make a new one)."""
# Scope names (record_function) are forgotten between sessions: a suite that names
# scopes f"step {i}" would otherwise hold every name for good (1M names: ~500 MB
# here, plus the per-name rows they give).  Every id from _scope_from up is a
# scope name interned since the last forget_scope_names(); op names (hooks hold
# their ids for an install's life) sit below it.
_scope_from: int | None = None
_names_generation = 0


def encoded_name(name: str) -> bytes:
    """``name`` as the native table holds it: UTF-8 in a NUL-terminated C string, so a NUL
    is written ``\\x00`` and a lone surrogate ``\\udcff`` (the escapes ``repr`` shows)
    rather than cutting the name short (merging ``"a\\x00b"`` with ``"a\\x00c"``) or
    failing.  Such a name reads back escaped, the same as a name spelled with those
    backslashes, which it is then one row with (docs/python-api.md)."""
    data = name.encode("utf-8", "backslashreplace")
    return data.replace(b"\x00", b"\\x00") if b"\x00" in data else data


def _intern_new(name: str) -> int:
    out = ffi.new("uint32_t *")
    check(lib.opprof_name_intern(encoded_name(name), out))
    _name_ids[name] = int(out[0])
    return int(out[0])


def intern(name: str) -> int:
    """Id of ``name`` in the native name table, kept for the process (op names)."""
    global _scope_from
    found = _name_ids.get(name)
    if found is None:
        found = _intern_new(name)
    if _scope_from is not None and found >= _scope_from:
        _scope_from = found + 1  # kept now: so is every scope name below it
    return found


def intern_scope(name: str) -> int:
    """Id of a scope's name, valid until :func:`forget_scope_names` changes
    ``_names_generation`` (record_function compares it to the one it interned in)."""
    global _scope_from
    found = _name_ids.get(name)
    if found is not None:
        return found
    found = _intern_new(name)
    if _scope_from is None:
        _scope_from = found
    return found


def forget_scope_names() -> None:
    """Drop the scope names interned since the last call (between sessions: no event
    that is still to be drained may hold their ids)."""
    global _scope_from, _names_generation, _names_view
    if _scope_from is None:
        return
    keep = _scope_from
    with _names_lock:
        check(lib.opprof_name_trim(keep))
        for name in [n for n, i in _name_ids.items() if i >= keep]:
            del _name_ids[name]
        del _names[keep:]
        _names_view = None
    _scope_from = None
    _names_generation += 1


def names() -> list[str]:
    """Every interned name, indexed by id.  The same list object until the table changes
    (each drain's records hold it: a copy of thousands of names per drain cost a small
    test's round ~8 us): read it, do not change it."""
    global _names_view
    with _names_lock:
        count = int(lib.opprof_name_count())
        for i in range(len(_names), count):
            _names.append(ffi.string(lib.opprof_name_get(i)).decode("utf-8", "replace"))
        view = _names_view
        if view is None or len(view) != len(_names):
            view = _names_view = list(_names)
        return view


# ---- core: record_function scopes --------------------------------------------


def scope_push(name_id: int) -> None:
    check(lib.opprof_scope_push(name_id))


def scope_pop(flags: int = 0) -> None:
    """Close the innermost scope; ``flags`` are ``OPPROF_FLAG_*`` bits."""
    check(lib.opprof_scope_pop(flags))


def scope_depth() -> int:
    """Events open on the calling thread (scopes, and ops that are running)."""
    return int(lib.opprof_scope_depth())


def scope_unwind(depth: int) -> int:
    """Close the calling thread's open events down to ``depth``; how many were closed."""
    return int(lib.opprof_scope_unwind(depth))


def switches_supported() -> bool:
    """Whether this process's threads can tell when they left their CPU, so that each
    event's wait for one is measured (``native/switches.c``; known once a profile ran)."""
    return bool(lib.opprof_switches_supported() == 1)


def mute_threads(tids: list[int]) -> None:
    """Leave the ops, scopes and allocations of these OS threads (``native_id``) out of
    every session from the next one on (replaces the previous list)."""
    arr = ffi.new("uint64_t[]", tids) if tids else ffi.NULL
    check(lib.opprof_mute_threads(arr, len(tids)))


# ---- core: drain -----------------------------------------------------------


def drain() -> Records:
    """Everything recorded since the last start, as one :class:`Records` (after stop)."""
    capacity = pending()
    if capacity == 0 and int(lib.opprof_stack_count()) <= 1:
        return _empty_records()  # a test with no op: no pool block, no shape table
    events = _pooled_events(capacity)
    written = ffi.new("int64_t *")
    dropped = ffi.new("int64_t *")
    check(lib.opprof_drain(ffi.from_buffer("opprof_event[]", events), capacity, written, dropped))
    if written[0] < capacity:
        events = events[: written[0]]
    shapes, dtypes = shape_table.columns(_shape_table())
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


_NO_EVENTS = np.empty(0, dtype=EVENT_DTYPE)
_NO_EVENTS.flags.writeable = False


def _empty_records() -> Records:
    """The records of a round that recorded nothing (a test with no op): no event array
    from the pool, no shape table copied; only the drop count is read."""
    written = ffi.new("int64_t *")
    dropped = ffi.new("int64_t *")
    check(lib.opprof_drain(ffi.from_buffer("opprof_event[]", _NO_EVENTS), 0, written, dropped))
    return Records(
        events=_NO_EVENTS,
        names=names(),
        shapes=_NO_SHAPES,
        dtypes=_NO_DTYPES,
        stacks=[[]],
        dropped=int(dropped[0]),
        clock_source=clock_source(),
    )


def _shape_table() -> shape_table.ShapeTable:
    """A copy of the core's shape table (two native calls, none per entry), decoded on use."""
    n_ids = int(lib.opprof_shape_count())
    n_words = int(lib.opprof_shape_words())
    words = np.empty(n_words, dtype=np.int64)
    starts = np.zeros(max(n_ids, 1) + 1, dtype=np.int64)
    if n_ids > 1:
        check(
            lib.opprof_shape_export(
                ffi.from_buffer("int64_t[]", words),
                n_words,
                ffi.from_buffer("int64_t[]", starts),
                n_ids,
            )
        )
    return shape_table.ShapeTable(words, starts, _shape_texts)


def _shape_texts(
    words: np.ndarray, starts: np.ndarray, ids: list[int]
) -> tuple[list[shape_table.Shape], list[list[str]]]:
    """The shapes and dtypes of ``ids`` in a copied table: one native call, one JSON document."""
    shape_doc = ffi.new("char **")
    dtype_doc = ffi.new("char **")
    check(
        lib.opprof_shape_texts(
            ffi.from_buffer("int64_t[]", words),
            len(words),
            ffi.from_buffer("int64_t[]", starts),
            len(starts) - 1,
            ffi.from_buffer("uint32_t[]", np.asarray(ids, dtype=np.uint32)),
            len(ids),
            shape_doc,
            dtype_doc,
        )
    )
    try:
        shapes = json.loads(ffi.string(shape_doc[0]).decode("utf-8", "replace"))
        dtypes = ffi.string(dtype_doc[0]).decode("utf-8", "replace").split("\n")
    finally:
        lib.opprof_text_free(shape_doc[0])
        lib.opprof_text_free(dtype_doc[0])
    return shapes, [d.split(";") for d in dtypes]


_NO_SHAPES, _NO_DTYPES = shape_table.columns(
    shape_table.ShapeTable(np.empty(0, dtype=np.int64), np.zeros(2, dtype=np.int64), _shape_texts)
)


def _pooled_events(n: int) -> np.ndarray:
    """An uninitialised event array of length ``n`` in memory from the drain pool.

    The block goes back to the pool when the array (and every view of it) is
    collected, so the next drain writes into pages that are already mapped.
    """
    nbytes = n * EVENT_DTYPE.itemsize
    block = lib.opprof_pool_take(nbytes)
    if block == ffi.NULL:
        raise MemoryError(f"opprof: no memory for {n} drained events ({nbytes} bytes)")
    owned = ffi.gc(block, lib.opprof_pool_give)
    return np.frombuffer(ffi.buffer(owned, nbytes), dtype=EVENT_DTYPE)


def pool_held_bytes() -> int:
    """Bytes the drain pool keeps for the next drains (native/drain_pool.h)."""
    return int(lib.opprof_pool_held())


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
        raise OpprofError(
            f"nest_sorted: thread, start and end differ in length ({n}, {len(start)}, {len(end)})"
        )
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


# ---- memory: numpy handler, Python allocator hooks (native/memory*.c) --------

MEMORY_SAMPLE_DTYPE = np.dtype([("time_ns", "<i8"), ("net_bytes", "<i8")])


class MemoryCounters(NamedTuple):
    """``opprof_memory_stats`` as Python ints (bytes unless named otherwise)."""

    net_bytes: int
    peak_bytes: int
    allocated_bytes: int
    allocations: int
    freed_bytes: int
    held_bytes: int
    samples: int
    samples_dropped: int
    installed: int
    threads_covered: int
    python_installed: int
    python_untracked: int


def memory_install() -> None:
    """Install the counting numpy data-memory handler (refcounted; every thread)."""
    check(lib.opprof_memory_install())


def memory_uninstall() -> None:
    """Undo one :func:`memory_install`; the last one restores numpy's handler."""
    check(lib.opprof_memory_uninstall())


def memory_align(on: bool) -> None:
    """Start numpy's new blocks at a cache line (``on``), or where malloc puts them:
    docs/how-it-works.md, "Where a block starts"."""
    check(lib.opprof_memory_align(1 if on else 0))


def memory_python_install() -> None:
    """Hook Python's PyMem and object allocators (refcounted)."""
    check(lib.opprof_memory_python_install())


def memory_python_uninstall() -> None:
    """Undo one :func:`memory_python_install`; the last one restores the allocators."""
    check(lib.opprof_memory_python_uninstall())


def memory_reset() -> None:
    """Open a measurement window: per-profile memory counters to zero (before start)."""
    check(lib.opprof_memory_reset())


_MEMORY_STATS = struct.Struct("=8q4i")
"""``opprof_memory_stats``'s layout (native/memory.h: eight int64, four int32), unpacked
in one call: a field at a time through cffi cost 5 us, twice per round."""
assert _MEMORY_STATS.size == ffi.sizeof("opprof_memory_stats")


def memory_counters() -> MemoryCounters:
    """The native memory counters now."""
    out = ffi.new("opprof_memory_stats *")
    check(lib.opprof_memory_stats_get(out))
    return MemoryCounters._make(_MEMORY_STATS.unpack(ffi.buffer(out)))


def memory_set_sample_capacity(max_samples: int) -> None:
    """Live-bytes samples kept per profile (takes effect at the next reset)."""
    check(lib.opprof_memory_set_sample_capacity(max_samples))


def memory_samples(count: int | None = None) -> np.ndarray:
    """The window's net-bytes samples, in the order taken; ``count``: how many there are,
    when the caller read the counters already."""
    if count is None:
        count = memory_counters().samples
    out = np.empty(count, dtype=MEMORY_SAMPLE_DTYPE)
    if count == 0:  # most tests take none
        return out
    written = ffi.new("int64_t *")
    check(lib.opprof_memory_samples(ffi.from_buffer("opprof_memory_sample[]", out), count, written))
    return out[: written[0]]


HELD_SLOTS = 16384
"""Op names the held-bytes table tells apart (``OPPROF_MEM_HELD_SLOTS``, less the no-op slot)."""
_NO_NAME = 2**32 - 1


def memory_held_by_name() -> list[tuple[str | None, int]]:
    """Bytes of numpy blocks allocated in the window and still held, by the name of the op
    that allocated them (None: no op was open), most first; call after stop and
    ``gc.collect()``, as for ``held_bytes``."""
    ids = ffi.new("uint32_t[]", HELD_SLOTS)
    held = ffi.new("int64_t[]", HELD_SLOTS)
    written = ffi.new("int64_t *")
    check(lib.opprof_memory_held_by_name(ids, held, HELD_SLOTS, written))
    table = names()
    out: list[tuple[str | None, int]] = []
    for i in range(written[0]):
        name_id = int(ids[i])
        name = None if name_id == _NO_NAME or name_id >= len(table) else table[name_id]
        out.append((name, int(held[i])))
    return sorted(out, key=lambda kv: (-kv[1], kv[0] or ""))


# ---- numpy: call and method hooks (native/numpy_hooks.c) ----------------------

NUMPY_STR_TYPE = int(lib.OPPROF_NP_STR_TYPE)  # dtype "type<N>" marks a recorded string


def numpy_unsupported_reason() -> str | None:
    """Why this build or interpreter cannot hook numpy, or None when it can."""
    if lib.opprof_numpy_supported():
        return None
    return _text(lib.opprof_last_error())


class NumpyHookArgs(NamedTuple):
    """opprof_numpy_install's arrays, built once (numpy_hook_args) and reused by every install."""

    calls: Any
    call_names: Any
    ufunc_names: Any
    n_calls: int
    methods: Any
    method_names: Any
    method_self: Any
    method_index: Any
    n_methods: int
    slot_names: Any


NUMPY_TYPE_SLOTS = int(lib.OPPROF_NP_SLOTS_HOOKED)  # ndarray's __getitem__, __setitem__


def numpy_hook_args(
    calls: list[tuple[int, int, list[int]]],
    methods: list[tuple[int, int, int, int]],
    slot_names: list[int],
) -> NumpyHookArgs:
    """The C arrays for :func:`numpy_install`.

    ``calls``: (id of a ufunc or dispatcher, name id, name ids of its
    ``UFUNC_METHODS`` or zeros); ``methods``: (id of a method descriptor or
    builtin, name id, OPPROF_NP_SELF_* kind, ufunc method index);
    ``slot_names``: name ids of ndarray's hooked type slots (OPPROF_NP_SLOT_*
    order, 0 leaves one alone).  The caller keeps every object alive while the
    arrays may be installed.
    """
    if len(slot_names) != NUMPY_TYPE_SLOTS:
        raise OpprofError(f"numpy hooks: {len(slot_names)} slot names, want {NUMPY_TYPE_SLOTS}")
    width = int(lib.OPPROF_NP_UFUNC_METHODS)
    return NumpyHookArgs(
        ffi.new("intptr_t[]", [c[0] for c in calls]),
        ffi.new("uint32_t[]", [c[1] for c in calls]),
        ffi.new("uint32_t[]", [n for _obj, _name, per in calls for n in (per or [0] * width)]),
        len(calls),
        ffi.new("intptr_t[]", [m[0] for m in methods]),
        ffi.new("uint32_t[]", [m[1] for m in methods]),
        ffi.new("uint8_t[]", [m[2] for m in methods]),
        ffi.new("uint8_t[]", [m[3] for m in methods]),
        len(methods),
        ffi.new("uint32_t[]", slot_names),
    )


def numpy_install(args: NumpyHookArgs) -> int:
    """Install every numpy hook at once; returns how many objects were skipped."""
    skipped = ffi.new("int64_t *")
    check(
        lib.opprof_numpy_install(
            args.calls,
            args.call_names,
            args.ufunc_names,
            args.n_calls,
            args.methods,
            args.method_names,
            args.method_self,
            args.method_index,
            args.n_methods,
            args.slot_names,
            skipped,
        )
    )
    return int(skipped[0])


def numpy_uninstall() -> int:
    """Restore numpy; returns how many pointers someone else had replaced (left alone)."""
    foreign = ffi.new("int64_t *")
    check(lib.opprof_numpy_uninstall(foreign))
    return int(foreign[0])


NUMPY_MAX_ARGS = 8  # OPPROF_MAX_SHAPE_ARGS: arguments a numpy hook can record
NUMPY_DEFAULT_ARGS = 4  # what it records unless numpy_set_all says more


class NumpySetArgs(NamedTuple):
    """opprof_numpy_set_all's arrays (``native/numpy_hooks.h``: opprof_numpy_set_params and
    opprof_numpy_set_method for every object at once), built once (:func:`numpy_set_args`)
    and reused by each install."""

    param_objs: Any
    params: Any
    strings: Any
    max_args: Any
    n_params: int
    method_objs: Any
    instances: Any
    instance_names: Any
    n_methods: int


def numpy_set_args(
    params: list[tuple[int, tuple[str, ...] | None, bool, int]],
    methods: list[tuple[int, int, int]],
) -> NumpySetArgs:
    """The arrays for :func:`numpy_set_all`.

    ``params``: (id of a hooked object, its keyword parameter names in positional order
    or None, record str arguments, arguments recorded at most: 1..8), for hooks that
    record more than positional arguments.  ``methods``: (id of a hooked call made with
    its instance first, id of an instance whose calls record under another name or 0,
    that name's id).  The caller keeps the name tuples and instances alive while hooked."""
    return NumpySetArgs(
        ffi.new("intptr_t[]", [p[0] for p in params]),
        ffi.new("intptr_t[]", [0 if p[1] is None else id(p[1]) for p in params]),
        ffi.new("uint8_t[]", [int(p[2]) for p in params]),
        ffi.new("uint8_t[]", [p[3] for p in params]),
        len(params),
        ffi.new("intptr_t[]", [m[0] for m in methods]),
        ffi.new("intptr_t[]", [m[1] for m in methods]),
        ffi.new("uint32_t[]", [m[2] for m in methods]),
        len(methods),
    )


def numpy_set_all(args: NumpySetArgs) -> None:
    """Set what every hook of an install records besides positional arguments, in one call."""
    check(
        lib.opprof_numpy_set_all(
            args.param_objs,
            args.params,
            args.strings,
            args.max_args,
            args.n_params,
            args.method_objs,
            args.instances,
            args.instance_names,
            args.n_methods,
        )
    )


def numpy_string(dtype: str) -> str | None:
    """The recorded string a dtype text ``"type<N>"`` stands for, or None if it is not one."""
    if not dtype.startswith("type") or not dtype[4:].isdigit():
        return None
    k = int(dtype[4:]) - NUMPY_STR_TYPE
    if k < 0:
        return None
    ptr = lib.opprof_numpy_string_get(k)
    return None if ptr == ffi.NULL else _text(ptr)


class NumpyHookCounts(NamedTuple):
    """State of the numpy hooks: hooks in place and trampoline calls that found no original."""

    installed: bool
    calls: int
    methods: int
    misses: int


def numpy_hook_counts() -> NumpyHookCounts:
    return NumpyHookCounts(
        bool(lib.opprof_numpy_installed()),
        int(lib.opprof_numpy_hooked_calls()),
        int(lib.opprof_numpy_hooked_methods()),
        int(lib.opprof_numpy_misses()),
    )


# ---- cuda: CUDA event timing (native/cuda.c) ----------------------------------


class CudaStats(NamedTuple):
    """``opprof_cuda_stats`` of the last session (counts of calls and event pairs)."""

    calls: int
    timed: int
    resolved: int
    dropped: int
    pool_events: int
    sample_rate: int
    last_error: int
    device_count: int


def cuda_load(path: str) -> None:
    """dlopen the CUDA runtime at ``path``; NativeError says why it cannot be used."""
    check(lib.opprof_cuda_load(path.encode()))


def cuda_loaded_path() -> str | None:
    """Path of the loaded CUDA runtime, None before a successful :func:`cuda_load`."""
    return _text(lib.opprof_cuda_path()) if lib.opprof_cuda_loaded() else None


def cuda_configure(sample_rate: int, max_pairs: int) -> None:
    """Before start: time every ``sample_rate``-th call of each name, ``max_pairs`` at most."""
    check(lib.opprof_cuda_configure(sample_rate, max_pairs))


def cuda_resolve() -> tuple[np.ndarray, np.ndarray]:
    """After stop: (core event ids, elapsed device ns) of every timed pair."""
    check(lib.opprof_cuda_resolve())
    capacity = cuda_stats().resolved
    ids = np.empty(capacity, dtype=np.int64)
    elapsed = np.empty(capacity, dtype=np.int64)
    written = ffi.new("int64_t *")
    check(
        lib.opprof_cuda_results(
            ffi.cast("int64_t *", ffi.from_buffer(ids)),
            ffi.cast("int64_t *", ffi.from_buffer(elapsed)),
            capacity,
            written,
        )
    )
    return ids[: written[0]], elapsed[: written[0]]


def cuda_stats() -> CudaStats:
    out = ffi.new("opprof_cuda_stats *")
    check(lib.opprof_cuda_stats_get(out))
    return CudaStats(*(int(getattr(out, f)) for f in CudaStats._fields))


def cuda_mem_info() -> tuple[int, int]:
    """(free, total) device memory in bytes (cudaMemGetInfo)."""
    free = ffi.new("int64_t *")
    total = ffi.new("int64_t *")
    check(lib.opprof_cuda_mem_info(free, total))
    return int(free[0]), int(total[0])


# ---- model: event-model kernels (native/model_kernels.c) ---------------------

GROUP_COLUMNS = (
    "count",
    "cpu_total_ns",
    "cpu_self_ns",
    "device_total_ns",
    "device_self_ns",
    "mem_total_bytes",
    "mem_self_bytes",
    "flops",
    "self_flops",
)


def _event_ptr(events: np.ndarray) -> Any:
    if events.dtype != EVENT_DTYPE:
        raise OpprofError(f"model kernels need records.EVENT_DTYPE events, got {events.dtype}")
    # A typed from_buffer keeps the array alive for the call (a cast would not).
    return ffi.from_buffer("opprof_event[]", np.ascontiguousarray(events))


def _i64(a: np.ndarray | None) -> Any:
    if a is None:
        return ffi.NULL
    return ffi.from_buffer("int64_t[]", np.ascontiguousarray(a, dtype=np.int64))


def _unless_unsupported(status: int) -> bool:
    """True on success, False for OPPROF_E_UNSUPPORTED (caller takes its numpy path)."""
    if status == lib.OPPROF_E_UNSUPPORTED:
        return False
    check(status)
    return True


def model_parent_rows(events: np.ndarray) -> np.ndarray | None:
    """Row of each event's parent (-1 none, -2 copied as unknown); None when ids are not native."""
    n = len(events)
    rows = np.empty(n, dtype=np.int64)
    ok = _unless_unsupported(lib.opprof_model_parent_rows(_event_ptr(events), n, _i64(rows)))
    return rows if ok else None


def model_pairs(events: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(pair id per row, -1 for memory events; first row of each distinct (name, shape))."""
    n = len(events)
    pair = np.empty(n, dtype=np.int64)
    pair_row = np.empty(n, dtype=np.int64)
    count = ffi.new("int64_t *")
    check(lib.opprof_model_pairs(_event_ptr(events), n, _i64(pair), _i64(pair_row), count))
    return pair, pair_row[: int(count[0])]


class KeySums(NamedTuple):
    """``opprof_model_key_sums``: per-group sums (m, len(GROUP_COLUMNS)) and per-row arrays."""

    sums: np.ndarray
    first_row: np.ndarray
    parent_row: np.ndarray
    device_events: int
    corrections: np.ndarray | None
    """Profiler cost inside each group's self time, ns per group, when cost tables were given."""


def model_key_sums(
    events: np.ndarray,
    *,
    group: np.ndarray | None,
    memory_group: int,
    m: int,
    inside_ns: np.ndarray | None = None,
    outside_ns: np.ndarray | None = None,
) -> KeySums | None:
    """One pass over a native drain; None where it does not hold (then take the numpy path).

    ``group`` None groups by name (memory events in ``memory_group``).  The FLOP
    columns are 0 (:func:`model_flops` fills them).  With ``inside_ns``/``outside_ns``
    (cost per event kind, index = ``records.KIND_*``) the same pass sums the
    profiler's cost inside each group's self time, ns.
    """
    n = len(events)
    sums = np.empty((m, len(GROUP_COLUMNS)), dtype=np.int64)
    first = np.empty(m, dtype=np.int64)
    rows = np.empty(n, dtype=np.int64)
    devices = ffi.new("int64_t *")
    corrections = None
    inside = outside = out = ffi.NULL
    n_kinds = 0
    if inside_ns is not None and outside_ns is not None:
        inside_arr, outside_arr = _kind_costs(inside_ns, outside_ns)
        corrections = np.empty(m, dtype=np.float64)
        inside = ffi.from_buffer("double[]", inside_arr)
        outside = ffi.from_buffer("double[]", outside_arr)
        out = ffi.from_buffer("double[]", corrections)
        n_kinds = len(inside_arr)
    status = lib.opprof_model_key_sums(
        _event_ptr(events),
        n,
        _i64(group),
        memory_group,
        m,
        _i64(rows),
        _i64(sums),
        _i64(first),
        devices,
        inside,
        outside,
        n_kinds,
        out,
    )
    if not _unless_unsupported(status):
        return None
    return KeySums(sums, first, rows, int(devices[0]), corrections)


class RoundSums(NamedTuple):
    """``opprof_model_round_sums``: a round's per-name sums and what its FLOPs need."""

    sums: np.ndarray
    """(len(groups), len(GROUP_COLUMNS)), row j the sums of ``groups[j]``; FLOP columns 0
    until :func:`model_flops` (with ``group=row_group``) fills them."""
    groups: np.ndarray
    """The name ids that have events (memory events as ``memory_group``), ascending."""
    row_group: np.ndarray
    """Per row, its index in ``groups``."""
    parent_row: np.ndarray
    library_self_ns: int
    waited: int
    """How many events waited for a CPU (``wait_ns`` > 0)."""


def model_round_sums(events: np.ndarray, *, memory_group: int, m: int) -> RoundSums | None:
    """Sums by name and the library self time of a native drain in one call; None where
    the pass does not hold (as :func:`model_key_sums`).  Name ids are in ``[0, m)``."""
    n = len(events)
    # One allocation for every int64 output: this runs once per measured round of
    # every test, and each array and buffer costs as much as the pass on a small round.
    # Groups are dense (at most one per row): sized by the name table, the sums of a
    # round of four ops were 100 KB to clear.
    width = len(GROUP_COLUMNS)
    k_max = min(n, m)
    out = np.empty(k_max * (width + 1) + 2 * n + 3, dtype=np.int64)
    buf = ffi.from_buffer("int64_t[]", out)
    counts = buf + (len(out) - 3)  # n_groups, library self ns, events that waited
    at_groups = k_max * width
    at_parents = at_groups + k_max
    at_rows = at_parents + n
    status = lib.opprof_model_round_sums(
        _event_ptr(events),
        n,
        memory_group,
        m,
        buf + at_parents,
        buf,
        buf + at_groups,
        counts,
        buf + at_rows,
        counts + 1,
        counts + 2,
    )
    if not _unless_unsupported(status):
        return None
    n_groups, library_self, waited = out[-3:].tolist()
    return RoundSums(
        out[: n_groups * width].reshape(n_groups, width),
        out[at_groups : at_groups + n_groups],
        out[at_rows : at_rows + n],
        out[at_parents:at_rows],
        library_self,
        waited,
    )


def model_formula_pairs(
    events: np.ndarray, row_group: np.ndarray, formula: Sequence[bool]
) -> tuple[np.ndarray, np.ndarray]:
    """(pair id per row, first row of each distinct (name, shape)) over only the rows with
    a recorded shape whose group ``row_group[i]`` has ``formula[g]`` set (the rest -1)."""
    n = len(events)
    k = len(formula)
    out = np.empty(2 * n, dtype=np.int64)
    buf = ffi.from_buffer("int64_t[]", out)
    count = ffi.new("int64_t *")
    check(
        lib.opprof_model_formula_pairs(
            _event_ptr(events),
            n,
            _i64(row_group),
            ffi.new("uint8_t[]", bytes(formula)),
            k,
            buf,
            buf + n,
            count,
        )
    )
    return out[:n], out[n : n + int(count[0])]


def _kind_costs(inside_ns: np.ndarray, outside_ns: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    inside = np.ascontiguousarray(inside_ns, dtype=np.float64)
    outside = np.ascontiguousarray(outside_ns, dtype=np.float64)
    if len(inside) != len(outside):
        raise OpprofError("model_key_sums: inside_ns and outside_ns differ in length")
    return inside, outside


def model_flops(
    events: np.ndarray,
    sums: np.ndarray,
    *,
    pair: np.ndarray,
    parent_row: np.ndarray,
    group: np.ndarray | None,
    memory_group: int,
    pair_flops: np.ndarray,
) -> None:
    """Fill the FLOP columns of ``sums`` (m, len(GROUP_COLUMNS)) in place.

    ``pair``/``pair_flops`` from :func:`model_pairs` and FLOPs per pair; groups as
    in :func:`model_key_sums`; rows must precede their parents.
    """
    _check_sums(sums, np.int64)
    check(
        lib.opprof_model_flops(
            _event_ptr(events),
            _i64(pair),
            _i64(parent_row),
            _i64(group),
            memory_group,
            len(events),
            _i64(pair_flops),
            len(pair_flops),
            len(sums),
            _i64(sums),
        )
    )


def _check_sums(sums: np.ndarray, dtype: type) -> None:
    if sums.dtype != dtype or not sums.flags.c_contiguous:
        raise OpprofError(f"model kernels write C-contiguous {np.dtype(dtype)} sums in place")


# ---- buffers: memory the core holds (native/buffers.c) -------------------------


class BufferStats(NamedTuple):
    """Bytes held by the core's thread states and how many are live, dead and parked."""

    bytes: int
    live: int
    dead: int
    parked: int


def buffer_stats() -> BufferStats:
    """Call while nothing records (see native/buffers.h)."""
    out = ffi.new("int64_t[4]")
    check(lib.opprof_buffer_stats(out, out + 1, out + 2, out + 3))
    return BufferStats(*(int(v) for v in out))


# ---- a one-round test's op summaries (native/one_round.h) -------------------------


def _one_round_doors() -> tuple[Callable[..., Any], Callable[..., Any]]:
    """The builtins ``one_round_ops`` and ``stored_ops`` (see the header)."""
    module = sys.modules[__name__]
    check(lib.opprof_install_summary_functions(id(module)))
    return module.one_round_ops, module.stored_ops


_one_round_ops, _stored_ops = _one_round_doors()


@functools.cache
def _field_names(cls: type) -> tuple[str, ...]:
    return tuple(f.name for f in dataclasses.fields(cls))


def one_round_ops(
    keys: Any, sums: Any, memory_key: str, exact: int, op_type: type, stats_type: type
) -> tuple[dict[str, Any], int, int, int | None] | None:
    """A one-round test's op summaries (``op_type`` objects with ``stats_type`` times) from
    its round's sums; None where Python must build them (see the header).  The builder is
    given the dataclasses' field names, in field order: the order it fills them in."""
    return _one_round_ops(  # type: ignore[no-any-return]
        keys,
        sums,
        memory_key,
        exact,
        op_type,
        _field_names(op_type),
        stats_type,
        _field_names(stats_type),
    )


def stored_ops(ops: dict[str, Any], op_type: type, stats_type: type) -> dict[str, Any] | None:
    """The stored form of one-sample op summaries, in key order; None where some time has
    more samples (see the header)."""
    return _stored_ops(  # type: ignore[no-any-return]
        ops, op_type, _field_names(op_type), stats_type, _field_names(stats_type)
    )


# ---- record_function's fast path (native/fastscope.h) ----------------------------


def _scope_doors() -> tuple[Callable[[int], int], Callable[[int, int], int]]:
    """(push, pop) for record_function: builtins called with the GIL held.

    ``push(name_id)`` returns the scope's handle (> 0) or minus a status code;
    ``pop(handle, flags)`` closes that scope, innermost or not, and returns a
    status code like ``opprof_scope_pop``; neither makes a cffi call that
    releases and retakes the GIL.
    """
    module = sys.modules[__name__]
    check(lib.opprof_install_scope_functions(id(module)))
    return module.scope_push_fast, module.scope_pop_fast


scope_push_fast, scope_pop_fast = _scope_doors()


def f2py_install(
    type_ids: list[int],
    objects: list[tuple[int, int]],
    other_name: int,
    params: dict[int, tuple[str, ...]] | None = None,
) -> None:
    """Hook the f2py routine types ``type_ids``: (object id, name id) pairs, and the name of
    any other routine of those types.  ``params`` (object id -> parameter names in
    positional order, at most 8) records those routines' keyword arguments at their index.
    The caller keeps the types, objects and parameter tuples alive."""
    params = params or {}
    types = ffi.new("intptr_t[]", type_ids)
    objs = ffi.new("intptr_t[]", [o for o, _ in objects])
    names = ffi.new("uint32_t[]", [n for _, n in objects])
    tuples = ffi.new("intptr_t[]", [id(params[o]) if o in params else 0 for o, _ in objects])
    max_args = ffi.new(
        "uint8_t[]",
        [len(params[o]) if o in params else NUMPY_DEFAULT_ARGS for o, _ in objects],
    )
    check(
        lib.opprof_f2py_install(
            types, len(type_ids), objs, names, tuples, max_args, len(objects), other_name
        )
    )


def f2py_uninstall() -> bool:
    """Restore the f2py types' call slots; False when someone else had replaced one (left)."""
    foreign = ffi.new("int64_t *")
    check(lib.opprof_f2py_uninstall(foreign))
    return not foreign[0]


def vcall_install(objects: list[tuple[int, int]]) -> int:
    """Hook (object id, name id) pairs of Cython functions through their vectorcall
    pointers; returns how many had none (skipped).  The caller keeps the objects alive."""
    objs = ffi.new("intptr_t[]", [o for o, _ in objects])
    names = ffi.new("uint32_t[]", [n for _, n in objects])
    skipped = ffi.new("int64_t *")
    check(lib.opprof_vcall_install(objs, names, len(objects), skipped))
    return int(skipped[0])


def vcall_uninstall() -> bool:
    """Restore the Cython functions' pointers; False when someone else had replaced one."""
    foreign = ffi.new("int64_t *")
    check(lib.opprof_vcall_uninstall(foreign))
    return not foreign[0]


# Python-level library functions (native/pyfunc_hooks.c), by owner (a capture source):
# one native table holds them all.  The frame evaluator costs every Python call while
# armed, so start() arms it only for sessions that record some entry's option bit.
_pyfunc_tables: dict[str, Sequence[tuple[int, int, int]]] = {}
_pyfunc_built: tuple[tuple[Sequence[tuple[int, int, int]], ...], Any, Any, Any, int, int] | None = (
    None
)
"""The tables the arrays were last built from (compared by identity), and the arrays."""
_pyfunc_options = 0
pyfunc_foreign = 0
"""Sessions that found another frame evaluator in place (their Python functions went
unrecorded) or had ours replaced while recording."""


def pyfunc_unsupported() -> str | None:
    """Why Python functions cannot be captured here (None: they can)."""
    if lib.opprof_pyfunc_supported():
        return None
    return str(ffi.string(lib.opprof_last_error()).decode("utf-8", "replace"))


def pyfunc_set(owner: str, entries: Sequence[tuple[int, int, int]]) -> None:
    """Record the (code id, name id, option bit) entries of ``owner`` (none: remove them).
    The caller keeps the code objects alive while they are in the table.  Passing the
    same ``entries`` object again reuses the arrays built for it (a source installs the
    same functions at each profile start: building them cost ~100 us)."""
    global _pyfunc_options, _pyfunc_built
    if entries:
        _pyfunc_tables[owner] = entries
    else:
        _pyfunc_tables.pop(owner, None)
    tables = tuple(_pyfunc_tables.values())
    if not tables:
        _pyfunc_options = 0
        check(lib.opprof_pyfunc_uninstall())
        return
    built = _pyfunc_built
    if (
        built is None
        or len(built[0]) != len(tables)
        or any(a is not b for a, b in zip(built[0], tables, strict=True))
    ):
        merged = [entry for table in tables for entry in table]
        bits = 0
        for _c, _n, option in merged:
            bits |= option
        built = _pyfunc_built = (
            tables,
            ffi.new("intptr_t[]", [c for c, _n, _o in merged]),
            ffi.new("uint32_t[]", [n for _c, n, _o in merged]),
            ffi.new("uint32_t[]", [o for _c, _n, o in merged]),
            len(merged),
            bits,
        )
    _tables, codes, names, options, count, bits = built
    check(lib.opprof_pyfunc_install(codes, names, options, count))
    _pyfunc_options = bits


def _pyfunc_arm(on: bool) -> None:
    global pyfunc_foreign
    foreign = ffi.new("int64_t *")
    check(lib.opprof_pyfunc_arm(1 if on else 0, foreign))
    pyfunc_foreign += foreign[0]
