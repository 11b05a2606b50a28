"""torch capture source: aten ops from a native observer (or Kineto), merged into our records.

Mechanism (chosen by measured overhead, see ``bench/bench_torch_source.py``):
the plugin's source (:data:`SOURCE`) collects with the native RecordFunction
observer of :mod:`~pytest_opprof.capture.sources.torch_observer`, compiled
against the installed torch on first use (2.6 us an aten op in total, against
29 us with Kineto: Kineto's own stop alone costs more than the goal).  When it
cannot be built it falls back to Kineto, driven at its lowest Python level,
``torch.autograd``'s ``_prepare_profiler`` / ``_enable_profiler`` /
``_disable_profiler`` with CPU activity, input shapes and memory on.  Both
record what ``torch.profiler`` records: the thread that starts the profile and
the threads torch itself hands work to (autograd, intra-op pools); Kineto's
``profile_all_threads`` would add other Python threads but then reports no
memory events (measured with torch 2.13), and per-op CPU memory is worth more
here.  No Python runs per op.  After stop, :meth:`TorchSource.collect` reads
the observer's buffers (:func:`torch_observer.read`) or Kineto's
``_KinetoEvent`` list (:func:`read_events`) in bulk into one
:class:`KinetoRead` and turns it into :class:`Records`:

* names are torch's (``aten::mm``); input shapes and dtypes as torch reports
  them; for ops in :data:`~pytest_opprof.capture.sources.torch_observer.CONCRETE_OPS`
  the concrete non-tensor arguments are kept in the dtype text
  (``"ScalarList=[2, 2]"``) so the FLOP formulas and the traffic rule can use them;
  the observer also records each argument's device (``Records.devices``, where one is
  off the host; Kineto records none);
* ``[memory]`` instants are attributed to the innermost torch op around them on
  their thread (self CPU memory, as torch's model does); the rest stay
  ``[memory]`` events;
* ``parent = -2`` (unknown): the model nests torch events with our scopes and
  numpy events by interval on each thread;
* ``thread`` is the OS thread id (Kineto's ``device_resource_id`` of a CPU
  event, the observer's ``gettid``: the same the native core records);
* times are mapped onto the core clock (:class:`ClockMap`): at start and at
  stop a marker ``RecordFunction`` is opened between two reads of
  ``_native.now_ns()``; the collector's start of the marker lies between the
  two, so the tightest of a few tries gives the offset to within half its
  bracket (typically < 1 us); times in between are mapped by interpolating the
  two offsets (Kineto's clock is wall time, the observer's ``CLOCK_MONOTONIC``,
  ours the TSC scaled to it).  The markers are dropped from the records.

The source records when torch is already imported when a profile starts (a
test module importing torch has been imported by then); an install of torch
that nothing imported is not imported just to find no ops.  Another active
torch profiler (Kineto allows one) makes the source warn and record nothing
for that profile.
"""

from __future__ import annotations

import functools
import importlib.util
import itertools
import sys
import warnings
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np

from pytest_opprof import _native
from pytest_opprof.capture.sources.kineto_read import HOST_MEMORY, KinetoRead
from pytest_opprof.capture.sources.torch_observer import CONCRETE_OPS
from pytest_opprof.native_layout.records import (
    EVENT_DTYPE,
    KIND_MEMORY,
    KIND_TORCH,
    MEMORY_EVENT_NAME,
    Records,
)

MARKER = "__opprof_clock_marker__"
MARKER_TRIES = 5
ID_BASE = 1 << 62  # torch events' ids: above every native id ((slot << 40) | seq)
PARENT_UNKNOWN = -2


@dataclass(frozen=True)
class ClockMap:
    """Maps torch event times (ns) onto the core clock: ``core = torch - offset(torch)``.

    ``offset`` is linear between the two marker points; ``error_ns`` is the
    larger half-bracket of the two markers (the bound on the mapping error).
    """

    torch_ns: tuple[int, int]
    offset_ns: tuple[float, float]
    error_ns: float

    def to_core(self, t: np.ndarray) -> np.ndarray:
        (t0, t1), (o0, o1) = self.torch_ns, self.offset_ns
        if t1 == t0:
            return (t - o0).astype(np.int64)
        offset = o0 + (o1 - o0) * (t.astype(np.float64) - t0) / (t1 - t0)
        return np.rint(t - offset).astype(np.int64)


class _Marker:
    """Core-clock brackets of marker RecordFunctions, matched to torch's times after stop."""

    def __init__(self) -> None:
        self.brackets: list[tuple[int, int]] = []

    def emit(self, fast: Any) -> None:
        for _ in range(MARKER_TRIES):
            before = _native.now_ns()
            with fast(MARKER):
                after = _native.now_ns()
            self.brackets.append((before, after))


def clock_map(brackets: list[tuple[int, int]], marker_starts: list[int]) -> ClockMap:
    """The tightest bracket of the first and of the second half of the markers."""
    half = len(brackets) // 2
    points = []
    for lo, hi in ((0, half), (half, len(brackets))):
        best = min(range(lo, hi), key=lambda i: brackets[i][1] - brackets[i][0])
        before, after = brackets[best]
        points.append(
            (marker_starts[best], marker_starts[best] - (before + after) / 2, (after - before) / 2)
        )
    (t0, o0, e0), (t1, o1, e1) = points
    return ClockMap(torch_ns=(t0, t1), offset_ns=(o0, o1), error_ns=max(e0, e1))


def _dtype_text(dtype: str, value: object) -> str:
    if dtype == "ScalarList" and isinstance(value, list):
        return f"ScalarList={value}"
    if dtype == "Scalar" and isinstance(value, (bool, int)):
        return f"Scalar={value}"
    return dtype


@functools.cache
def _installed() -> bool:
    """Whether torch can be imported: a search of sys.path, done once (it took 0.25 ms,
    and every profile start asks, through :meth:`TorchSource.available`)."""
    return importlib.util.find_spec("torch") is not None


class TorchSource:
    """The "torch" capture source (see the module docstring).

    ``collector``: ``"kineto"``, or ``"auto"``: the native observer
    (:mod:`~pytest_opprof.capture.sources.torch_observer`) when it builds and
    loads, else Kineto (``collector_reason`` says why).

    ``time_device`` and ``device_sample_rate``: set by each profile before it
    starts; true when it times device work (its ``cuda`` helper source is
    acquired).  The observer then times every ``device_sample_rate``-th call of
    each op with a CUDA input by a CUDA event pair (Kineto, with CPU activity
    only, times none)."""

    name = "torch"

    def __init__(self, collector: str = "kineto") -> None:
        if collector not in ("kineto", "auto"):
            raise ValueError(f"TorchSource: collector is 'kineto' or 'auto', not {collector!r}")
        self.reason: str | None = None
        self.last_clock: ClockMap | None = None
        self.collector = collector
        self.collector_reason: str | None = None
        self._refs = 0
        self._enabled = False
        self._observer: Any = None  # the loaded observer module while it records
        self._tried: tuple[Any, str | None] | None = None  # torch_observer.load()'s answer
        self._marker = _Marker()
        self.time_device = False
        self.device_sample_rate = 1

    def _observer_module(self) -> Any | None:
        """The native observer when this source uses it (built on first use)."""
        if self.collector != "auto":
            return None
        from pytest_opprof.capture.sources import torch_observer

        self._tried = torch_observer.load()
        module, self.collector_reason = self._tried
        return module

    @property
    def note(self) -> str | None:
        """A line for the session's end, once the observer was tried: its build, or
        why Kineto collected instead."""
        if self.collector != "auto" or self._tried is None:
            return None
        module, reason = self._tried
        if module is None:
            if reason and reason.startswith("OPPROF_TORCH_OBSERVER"):
                return None  # chosen by the user
            return f"opprof: torch ops collected by Kineto (slower), not the observer: {reason}"
        if module.compiled:
            return (
                f"opprof: compiled the native torch op observer in {module.load_s:.0f} s, "
                f"cached in {module.build_dir}"
            )
        return None

    def available(self) -> bool:
        """True when torch is imported in this process; ``reason`` says why not."""
        if "torch" in sys.modules:
            self.reason = None
        elif not _installed():
            self.reason = "torch is not installed"
        else:
            self.reason = "torch is installed but not imported by the tests"
        return self.reason is None

    def prepare(self) -> None:
        """Load the observer (building it the first time: about 15 s) if torch is
        imported, so that the first profile does not wait for it."""
        if "torch" in sys.modules:
            self._observer_module()

    def acquire(self) -> None:
        """Count a user; the collector itself runs per profile (:meth:`start_options`)."""
        self._refs += 1
        self.prepare()

    def _start(self) -> None:
        from torch._C import _autograd, _profiler

        self._stop_stale()
        self._marker = _Marker()
        if _autograd._profiler_enabled():
            warnings.warn(
                "pytest-opprof: another torch profiler is running; torch ops not captured "
                "by this profile",
                RuntimeWarning,
                stacklevel=3,
            )
            return
        observer = self._observer_module()
        if observer is not None:
            observer.start(time_device=self.time_device, sample_rate=self.device_sample_rate)
            self._observer = observer
            self._marker.emit(_profiler._RecordFunctionFast)
            return
        config = _profiler.ProfilerConfig(
            _profiler.ProfilerState.KINETO,
            True,  # report_input_shapes
            True,  # profile_memory
            False,  # with_stack
            False,  # with_flops: ours come from pytest_opprof.flops.aten
            False,  # with_modules
            _profiler._ExperimentalConfig(),
            "",
        )
        activities = {_profiler.ProfilerActivity.CPU}
        _autograd._prepare_profiler(config, activities)
        _autograd._enable_profiler(config, activities, set())  # type: ignore[call-arg]
        self._enabled = True
        self._marker.emit(_profiler._RecordFunctionFast)

    def release(self) -> None:
        """On the last release, stop Kineto if collect() did not (error paths)."""
        if self._refs == 0:
            return
        self._refs -= 1
        if self._refs == 0:
            self._stop_stale()

    def _stop_stale(self) -> None:
        if self._observer is not None:
            observer, self._observer = self._observer, None
            observer.stop()
        if self._enabled:
            self._enabled = False
            from torch._C import _autograd

            _autograd._disable_profiler()

    def start_options(self) -> int:
        """Called by each profile right before the native start: starts Kineto and the markers.

        (acquire/release may span many profiles: the plugin holds sources for the session.)
        """
        self._start()
        return 0

    def collect(self) -> Records | None:
        """Stop the observer or Kineto and turn its events into records on the core clock."""
        if self._observer is not None:
            from torch._C import _profiler

            from pytest_opprof.capture.sources import torch_observer

            observer = self._observer
            self._marker.emit(_profiler._RecordFunctionFast)
            self._observer = None
            observer.stop()
            return self.records_of(torch_observer.read(observer, MARKER))
        result = self.stop_kineto()
        if result is None:
            return None
        return self.records_of(read_events(result.events()))

    def stop_kineto(self) -> Any | None:
        """Emit the closing markers and stop Kineto: its ``_ProfilerResult``, or None
        when this source was not recording."""
        if not self._enabled:
            return None
        from torch._C import _autograd, _profiler

        self._marker.emit(_profiler._RecordFunctionFast)
        self._enabled = False
        return _autograd._disable_profiler()

    def records_of(self, read: KinetoRead) -> Records:
        """Records on the core clock from what :func:`read_events` read (sets ``last_clock``)."""
        self.last_clock = clock = clock_map(self._marker.brackets, read.marker_starts)
        records = _to_records(read.ops, read.mem, read.names, read.shapes, read.dtypes, clock)
        records.devices = read.devices
        return records


def _is_op(name: str, event: Any) -> bool:
    """Whether events of this name are ops; asked of one event per distinct name."""
    if name in (MARKER, MEMORY_EVENT_NAME):
        return False
    return event.activity_type() in ("cpu_op", "user_annotation")  # not [OutOfMemory]


def _columns(n: int, *columns: Iterable[int]) -> np.ndarray:
    """``n`` rows of int64, one column per iterable (one numpy call for all: a small
    profile pays its fixed cost once, not per column)."""
    flat = np.fromiter(itertools.chain(*columns), dtype=np.int64, count=len(columns) * n)
    rows: np.ndarray = flat.reshape(len(columns), n).T.copy()
    return rows


@functools.cache
def _memory_device(device_type: Any, index: int) -> int:
    """A Kineto memory instant's device as the observer codes it: ``HOST_MEMORY`` for
    what torch.profiler counts as CPU memory, else the device's type << 8 | its index."""
    from torch._C._autograd import DeviceType

    if device_type in (DeviceType.CPU, DeviceType.MKLDNN, DeviceType.IDEEP):
        return HOST_MEMORY
    return (int(device_type) << 8) | (int(index) & 0xFF)


def _arguments_key(shapes: list[list[int]], dtypes: list[str]) -> tuple[object, ...]:
    """Hashable and equal exactly when the shapes and dtypes are (the cheapest such key
    measured: 0.5 us an op, repr 1.2 us)."""
    return (tuple(map(tuple, shapes)), tuple(dtypes))


@functools.cache
def _event_class() -> Any:
    from torch._C._autograd import _KinetoEvent

    return _KinetoEvent


def read_events(events: list[Any]) -> KinetoRead:
    """Kineto's ``_KinetoEvent`` list in bulk: each accessor mapped over the events it
    concerns, and no Python bytecode run per event (only C-level ``map``,
    ``compress`` and dict builds).

    Every accessor call crosses pybind (100-600 ns each, measured), so only what
    the records use is read: the names of all events, the kind of one event per
    distinct name (with CPU activity only, a name is always the same kind:
    ``cpu_op`` / ``user_annotation``, or an instant such as ``[memory]``),
    times, threads, shapes and dtypes of ops, concrete inputs only of the ops
    whose FLOP formulas need them, and time, thread and size of memory
    instants."""
    kind = _event_class()
    all_names = list(map(kind.name, events))
    # Last index per name; any event of a name tells the name's kind.
    some_index = dict(zip(all_names, range(len(all_names)), strict=True))
    op_names = {n for n, i in some_index.items() if _is_op(n, events[i])}
    is_op = list(map(op_names.__contains__, all_names))
    ops = list(itertools.compress(events, is_op))
    names_of_ops = list(itertools.compress(all_names, is_op))
    name_id = {n: i for i, n in enumerate(dict.fromkeys(names_of_ops))}  # first appearance

    ev_shapes = list(map(kind.shapes, ops))
    ev_dtypes = list(map(kind.dtypes, ops))
    if not op_names.isdisjoint(CONCRETE_OPS):
        for j, name in enumerate(names_of_ops):
            if name in CONCRETE_OPS:
                values = ops[j].concrete_inputs()
                ev_dtypes[j] = [
                    _dtype_text(d, v) for d, v in zip(ev_dtypes[j], values, strict=False)
                ]
    keys = list(map(_arguments_key, ev_shapes, ev_dtypes))
    distinct = dict(zip(keys, zip(ev_shapes, ev_dtypes, strict=True), strict=True))
    shape_id = {k: i for i, k in enumerate(distinct, start=1)}  # shape 0 is "none"
    shapes: list[list[list[int] | None]] = [[]]
    shapes += [[list(dims) for dims in s] for s, _ in distinct.values()]
    dtypes: list[list[str]] = [[]]
    dtypes += [list(d) for _, d in distinct.values()]

    rows = _columns(
        len(ops),
        map(kind.start_ns, ops),
        map(kind.end_ns, ops),
        map(kind.device_resource_id, ops),
        map(name_id.__getitem__, names_of_ops),
        map(shape_id.__getitem__, keys),
        itertools.repeat(-1, len(ops)),
    )
    mems = list(itertools.compress(events, map(MEMORY_EVENT_NAME.__eq__, all_names)))
    mem = _columns(
        len(mems),
        map(kind.start_ns, mems),
        map(kind.device_resource_id, mems),
        map(kind.nbytes, mems),
        map(_memory_device, map(kind.device_type, mems), map(kind.device_index, mems)),
    )

    markers = itertools.compress(events, map(MARKER.__eq__, all_names))
    return KinetoRead(rows, mem, list(name_id), shapes, dtypes, list(map(kind.start_ns, markers)))


def _interval_parents(thread: np.ndarray, start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Row of each interval's innermost enclosing interval on its thread, or -1."""
    order = np.lexsort((-end, start, thread))
    parent_sorted = _native.nest_sorted(
        np.ascontiguousarray(thread[order], dtype=np.uint64),
        np.ascontiguousarray(start[order]),
        np.ascontiguousarray(end[order]),
    )
    parent = np.full(len(order), -1, dtype=np.int64)
    parent[order] = np.where(parent_sorted >= 0, order[np.maximum(parent_sorted, 0)], -1)
    return parent


def merge_same_name_children(ops: np.ndarray) -> np.ndarray:
    """Drop each op whose parent has its name and no other child, as torch.profiler does.

    A kernel that calls its own op again (``aten::sum`` -> ``aten::sum``, the
    overload with ``dim``) is one op to its user: torch's ``_remove_dup_nodes``
    keeps the parent, gives it the child's children, and repeats until no such
    pair is left.  Here the parent keeps its interval, so the child's children
    and memory instants nest under it when the intervals are nested below.
    ``ops`` rows are :attr:`KinetoRead.ops`'s."""
    while len(ops) > 1:
        start = ops[:, 0]
        parent = _interval_parents(ops[:, 2], start, np.maximum(ops[:, 1], start))
        has = parent >= 0
        children = np.bincount(parent[has], minlength=len(ops))
        safe = np.maximum(parent, 0)
        dup = has & (ops[safe, 3] == ops[:, 3]) & (children[safe] == 1)
        if not dup.any():
            break
        ops = ops[~dup]
    return ops


def _to_records(
    rows: np.ndarray,
    mem: np.ndarray,
    names: list[str],
    shapes: list[list[list[int] | None]],
    dtypes: list[list[str]],
    clock: ClockMap,
) -> Records:
    """Vectorised: ops and memory instants into one structured array."""
    ops = merge_same_name_children(rows)
    m = mem
    n_ops = len(ops)
    # Nest the memory instants under the ops by interval, one sweep.
    thread = np.concatenate([ops[:, 2], m[:, 1]]).astype(np.uint64)
    start = np.concatenate([ops[:, 0], m[:, 0]])
    end = np.concatenate([np.maximum(ops[:, 1], ops[:, 0]), m[:, 0]])
    order = np.lexsort((-end, start, thread))
    parent_sorted = _native.nest_sorted(thread[order], start[order], end[order])
    parent = np.full(len(order), -1, dtype=np.int64)
    parent[order] = np.where(parent_sorted >= 0, order[np.maximum(parent_sorted, 0)], -1)
    mem_parent = parent[n_ops:]
    inside = mem_parent >= 0
    # A device allocator's instants (CUDA's caching allocator) go to the device's
    # figures, the host's to the host's, as torch.profiler splits them.
    on_device = m[:, 3] != HOST_MEMORY
    nbytes = np.where(on_device, 0, m[:, 2])
    device_bytes = np.where(on_device, m[:, 2], 0)
    host = inside & ~on_device
    alloc = np.zeros(n_ops, dtype=np.int64)
    freed = np.zeros(n_ops, dtype=np.int64)
    count = np.zeros(n_ops, dtype=np.int64)
    np.add.at(alloc, mem_parent[host], np.maximum(nbytes[host], 0))
    np.add.at(freed, mem_parent[host], np.maximum(-nbytes[host], 0))
    np.add.at(count, mem_parent[host], (nbytes[host] > 0).astype(np.int64))
    device_memory = None
    if on_device.any():
        device_memory = np.zeros(n_ops, dtype=np.int64)
        device = inside & on_device
        np.add.at(device_memory, mem_parent[device], device_bytes[device])
    loose = np.flatnonzero(~inside)
    if device_memory is not None:
        device_memory = np.concatenate([device_memory, device_bytes[loose]])
    if len(loose) and MEMORY_EVENT_NAME not in names:
        names = [*names, MEMORY_EVENT_NAME]
    n = n_ops + len(loose)
    out = np.zeros(n, dtype=EVENT_DTYPE)
    out["start_ns"] = clock.to_core(np.concatenate([ops[:, 0], m[loose, 0]]))
    out["end_ns"] = clock.to_core(np.concatenate([ops[:, 1], m[loose, 0]]))
    out["id"] = ID_BASE + np.arange(n, dtype=np.int64)
    out["parent"] = PARENT_UNKNOWN
    out["self_alloc_bytes"] = np.concatenate([alloc, np.maximum(nbytes[loose], 0)])
    out["self_free_bytes"] = np.concatenate([freed, np.maximum(-nbytes[loose], 0)])
    # Device time with children's (cuda_source.own_device_times makes it the op's own).
    out["device_ns"] = np.concatenate([ops[:, 5], np.full(len(loose), -1, dtype=np.int64)])
    out["wait_ns"] = -1
    out["thread"] = np.concatenate([ops[:, 2], m[loose, 1]]).astype(np.uint64)
    mem_name = names.index(MEMORY_EVENT_NAME) if len(loose) else 0
    out["name"] = np.concatenate([ops[:, 3], np.full(len(loose), mem_name)]).astype(np.uint32)
    out["kind"] = np.concatenate(
        [np.full(n_ops, KIND_TORCH), np.full(len(loose), KIND_MEMORY)]
    ).astype(np.uint16)
    out["shape"] = np.concatenate([ops[:, 4], np.zeros(len(loose), dtype=np.int64)]).astype(
        np.uint32
    )
    out["self_alloc_count"] = np.concatenate([count, (nbytes[loose] > 0)]).astype(np.uint32)
    return Records(
        events=out,
        names=names,
        shapes=shapes,
        dtypes=dtypes,
        clock_source=_native.clock_source(),
        device_memory=device_memory,
    )


SOURCE = TorchSource(collector="auto")
