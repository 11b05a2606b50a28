"""The recorder behind ``profile``, and ``record_function``'s scopes.

A :class:`Recorder` picks its sources (``plan.py``), installs their hooks, and
starts the native session with their option bits; stop drains the native
buffers, merges what Python-side sources collected, and removes every hook (on
every exit path).  One recorder records at a time.  ``record_function`` checks a
module flag before touching the native core, so it is nearly free when nothing
records.  What a recording means (events, averages, exports) is the event
model's and the renderers': ``pytest_opprof.profiler`` puts them together.
"""

from __future__ import annotations

import functools
import os
import sys
import threading
import time
from collections.abc import Callable, Sequence
from types import TracebackType
from typing import TYPE_CHECKING, Any, TypeVar

from pytest_opprof import _native
from pytest_opprof.capture import sources
from pytest_opprof.capture.plan import Plan, plan
from pytest_opprof.capture.scope_names import scope_name
from pytest_opprof.errors import OpprofError
from pytest_opprof.native_layout.records import FLAG_EXCEPTION, Records

if TYPE_CHECKING:
    import numpy as np

    from pytest_opprof.capture.overhead import Overhead
    from pytest_opprof.capture.sources.cuda_source import CudaSource, DeviceMemoryStats
    from pytest_opprof.capture.sources.memory_source import MemoryStats

__all__ = ["Recorder", "record_function", "stop_abandoned"]

F = TypeVar("F", bound=Callable[..., Any])

_lib = _native.lib
_scope_push = _native.scope_push_fast
_scope_pop = _native.scope_pop_fast
# Re-entrant: the garbage collector can finalize an abandoned generator that holds an
# open profile at any allocation, including one inside another profile's start() or
# stop() under this lock; its stop() then takes the lock again in the same thread (a
# plain Lock hung there).  The re-entered stop finds the state it must: not recording, or
# preempted.
_lock = threading.RLock()


def _new_lock_in_child() -> None:
    """A forked child starts with this lock free: the parent may have held it (a native
    call under it releases the GIL) while another of its threads forked."""
    global _lock
    _lock = threading.RLock()


os.register_at_fork(after_in_child=_new_lock_in_child)
_active: Recorder | None = None
_undrained: Recorder | None = None
"""The stopped recorder whose events are still in the core (``drain_later``): the next
start drains them first."""
# Read by record_function before any native call; written under _lock.
_recording = False
# Profiler cost per event for each (options, numpy hooked): the median of the last
# CALIBRATIONS_KEPT calibrations, one at the first profile and one at the first profile
# after each RECALIBRATE_S.  A single calibration made while other work held the CPU
# (a pytest-xdist worker starting beside the others) read a scope's cost 3x high, and
# every corrected self time of the process kept that error; ~15 ms a minute bounds it.
_overheads: dict[tuple[int, bool], Overhead] = {}
_calibrations: dict[tuple[int, bool], tuple[float, list[Overhead]]] = {}
"""Per key, (``time.monotonic()`` of the last calibration, the last few calibrations)."""
RECALIBRATE_S = 60.0
CALIBRATIONS_KEPT = 5


def _set_recording(on: bool) -> None:
    global _recording
    _recording = on


class Recorder:
    """Records ops (record_function scopes and captured library calls) while active;
    ``pytest_opprof.profiler.profile`` documents the settings and adds what reads the
    records.  After stop: :meth:`records`, ``memory``, ``device_memory``, ``overhead``,
    ``not_measured`` and ``wall_time_ns``.
    """

    def __init__(
        self,
        record_shapes: bool = True,
        profile_memory: bool = True,
        with_flops: bool = True,
        with_stack: bool = False,
        capture: Sequence[str] | None = None,
        python_memory: bool = False,
        cuda: bool | None = None,
        cuda_sample_rate: int = 1,
        subtract_overhead: bool = True,
        memory_events: bool = True,
    ) -> None:
        if isinstance(capture, str):
            raise OpprofError(f"capture must be a list of source names, not the string {capture!r}")
        self.record_shapes = record_shapes
        self.profile_memory = profile_memory
        self.with_flops = with_flops
        self.with_stack = with_stack
        self.capture = None if capture is None else list(capture)
        self.python_memory = python_memory
        self.cuda = cuda
        self.cuda_sample_rate = cuda_sample_rate
        self.subtract_overhead = subtract_overhead
        self.memory_events = memory_events
        self.overhead: Overhead | None = None
        self.device_memory: DeviceMemoryStats | None = None
        self.not_measured: list[str] = []
        self._pyfunc_foreign = 0
        self._cuda_source: CudaSource | None = None
        self.memory: MemoryStats | None = None
        self._memory_samples: np.ndarray | None = None
        self.wall_time_ns = 0
        self._sources: list[sources.Source] = []
        self._memory_source: sources.Source | None = None
        self._old_collections: int | None = None
        """``memory_source.old_collections()`` at the start: the leak figure's collection."""
        self.yields = False
        """Set by a driver (the pytest plugin's rounds): a profile started while this one
        records stops this one instead of failing, and sets ``preempted``."""
        self.preempted = False
        self.drain_later = False
        """Set by a driver (the pytest plugin's rounds): :meth:`stop` leaves the events in
        the core, and the first :meth:`records` (or the next profile's start) drains them,
        so that a round's window ends at stop.  Only where every source is native (no
        torch, no CUDA): a Python-side source's records are collected at stop."""
        self._records: Records | None = None
        self._start_ns = 0

    def __enter__(self) -> Recorder:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def _wanted_sources(self) -> list[sources.Source]:
        chosen, unavailable = _planned(
            None if self.capture is None else tuple(self.capture),
            self.profile_memory,
            self.python_memory,
        )
        self.not_measured = list(unavailable)
        wanted = list(chosen.capture)
        self._cuda_source = self._wanted_cuda()
        if self._cuda_source is not None:
            wanted.append(self._cuda_source)
        self._memory_source = chosen.memory
        return [*wanted, *chosen.helpers]

    def _wanted_cuda(self) -> CudaSource | None:
        from pytest_opprof.capture.sources import cuda_source

        if self.cuda is False or (self.cuda is None and not cuda_source.cuda_in_use()):
            return None
        source = sources.get("cuda")
        assert isinstance(source, cuda_source.CudaSource)
        source.configure(self.cuda_sample_rate)
        if not source.available():
            self.not_measured.append(f"device time: {source.reason}")
            return None
        return source

    def start(self) -> None:
        """Install the sources' hooks and start recording in every thread."""
        global _active, _recording
        with _lock:
            if _active is not None:
                if not _active.yields:
                    raise OpprofError(
                        "an opprof profile is already recording; one profile records at a "
                        "time (stop the other one first)"
                    )
                outer = _active
                outer._stop_locked()
                outer.preempted = True
            if _undrained is not None:  # the native start below clears the core
                _undrained._drain()
            wanted = self._wanted_sources()
            options = 0
            if self.record_shapes:
                options |= int(_lib.OPPROF_OPT_RECORD_SHAPES)
            if self.with_stack:
                options |= int(_lib.OPPROF_OPT_WITH_STACK)
            acquired: list[sources.Source] = []
            try:
                for source in wanted:
                    source.acquire()
                    acquired.append(source)
                if self.subtract_overhead:
                    self.overhead = _overhead(options, acquired)
                # The last session is drained: its scope names can go (bounded memory
                # however many distinct names a suite uses).
                _native.forget_scope_names()
                for source in acquired:
                    if source.name == "torch":
                        from pytest_opprof.capture.sources.torch_source import TorchSource

                        assert isinstance(source, TorchSource)
                        # The cuda source checked the rate; without it nothing is timed.
                        timed = self._cuda_source is not None
                        source.time_device = timed
                        source.device_sample_rate = self.cuda_sample_rate if timed else 1
                    options |= source.start_options()
                if self.memory_events or any(s.name == "torch" for s in acquired):
                    options |= int(_lib.OPPROF_OPT_MEMORY_EVENTS)
                self._records = None
                self.memory = None
                self._memory_samples = None
                self.device_memory = None
                foreign = _native.pyfunc_foreign
                if self._memory_source in acquired:
                    from pytest_opprof.capture.sources import memory_source

                    self._old_collections = memory_source.old_collections()
                _native.start(options)
                self._pyfunc_foreign = foreign
                # After the native start, not before: the start is a cffi call that gives
                # up the GIL, and on a busy machine the thread often loses its CPU there
                # for a scheduler tick (4 ms here): the profile's wall time is the body's.
                self._start_ns = time.perf_counter_ns()
            except BaseException:
                _release(acquired)
                raise
            self._sources = acquired
            self.preempted = False
            _active = self
            _recording = True

    def stop(self) -> None:
        """Stop recording, drain and merge the records, and remove every hook."""
        with _lock:
            if self.preempted:
                return  # already stopped by the profile that started inside it
            if _active is not self:
                raise OpprofError("profile.stop(): this profile is not recording")
            self._stop_locked()

    def _stop_locked(self) -> None:
        """Stop, drain and release (the caller holds ``_lock``)."""
        global _active, _recording, _undrained
        self.wall_time_ns = time.perf_counter_ns() - self._start_ns
        _recording = False
        _active = None
        acquired, self._sources = self._sources, []
        try:
            _native.stop()
            if _native.pyfunc_foreign != self._pyfunc_foreign:
                self.not_measured.append(
                    "libraries' Python functions: another frame evaluator (a debugger, "
                    "torch.compile) was installed, so they went unrecorded"
                )
            if self.drain_later and all(_native_only(source) for source in acquired):
                _undrained = self
            else:
                records = _native.drain()
                for source in acquired:
                    extra = source.collect()
                    if extra is not None:
                        records = records.concat(extra)
                if self._cuda_source in acquired:
                    records = self._cuda_source.attach(records)
                    self.device_memory = self._cuda_source.device_memory
                self._records = records
            if self._memory_source in acquired:
                from pytest_opprof.capture.sources import memory_source

                # Kept here: the next profile's start clears the native samples.  The
                # counters are read once for both (after stop they move only by frees).
                counters = _native.memory_counters()
                self._memory_samples = memory_source.memory_samples(counters.samples)
                self.memory = memory_source.memory_stats(counters, since=self._old_collections)
        finally:
            _release(acquired)

    def records(self) -> Records:
        """The drained and merged records of this profile (after stop)."""
        if _undrained is self:
            with _lock:
                self._drain()
        if self._records is None:
            raise OpprofError("profile has no records yet: stop it first")
        return self._records

    def _drain(self) -> None:
        """Drain the events :meth:`stop` left in the core (``drain_later``; the caller
        holds ``_lock``)."""
        global _undrained
        if _undrained is self:
            _undrained = None
            self._records = _native.drain()

    @property
    def dropped_events(self) -> int:
        """Events recorded beyond the event limit and dropped (after stop): when not 0,
        :meth:`events` and :meth:`key_averages` cover only the events before the limit."""
        return self.records().dropped


def _native_only(source: sources.Source) -> bool:
    """Whether all of ``source``'s records come out of the native drain."""
    return source.name not in ("torch", "cuda")


def stop_abandoned() -> bool:
    """Stop the profile still recording, if any (one a test started and never stopped,
    which would make every later profile's start fail); True when there was one."""
    with _lock:
        if _active is None:
            return False
        _active._stop_locked()
        return True


def _overhead(options: int, acquired: list[sources.Source]) -> Overhead:
    """The calibrated cost per event for these options (measured at first need, and again
    at the first profile after each ``RECALIBRATE_S``)."""
    numpy_hooked = any(source.name == "numpy" for source in acquired)
    key = (options, numpy_hooked)
    current = _overheads.get(key)
    now = time.monotonic()
    taken_at, kept = _calibrations.get(key, (now, []))
    if current is not None and now - taken_at < RECALIBRATE_S:
        return current
    from pytest_opprof.capture.calibration import calibrate
    from pytest_opprof.capture.overhead import Overhead

    if current is None:  # the first, or the cache was cleared: start the history over
        kept = []
    kept = [
        *kept[-(CALIBRATIONS_KEPT - 1) :],
        calibrate(_set_recording, record_function, numpy_hooked, options),
    ]
    _calibrations[key] = (now, kept)
    _overheads[key] = current = Overhead.median(kept)
    return current


_plans: dict[tuple[object, ...], tuple[Plan, tuple[str, ...]]] = {}


def _planned(
    capture: tuple[str, ...] | None, memory: bool, python_memory: bool
) -> tuple[Plan, tuple[str, ...]]:
    """The plan for these settings and the "what: why" lines of the capture sources that
    cannot run, kept while ``sys.modules`` keeps its size: a source becomes available by
    an import (torch, scipy), and planning each start cost a trivial test 10-20 us (the
    same test ``capture.threadpools`` uses to find the BLAS pools again)."""
    key = (capture, memory, python_memory, len(sys.modules))
    known = _plans.get(key)
    if known is None:
        chosen = plan(capture, memory=memory, python_memory=python_memory)
        unavailable = []
        for name in capture if capture is not None else sources.CAPTURE_SOURCES:
            source = sources.get(name) if name != sources.NONE else None
            reason = getattr(source, "reason", None)
            if source is not None and reason is not None and not source.available():
                unavailable.append(f"{name} ops: {reason}")
        if len(_plans) > 64:  # one key per import that grew sys.modules: keep a few
            _plans.clear()
        known = _plans[key] = (chosen, tuple(unavailable))
    return known


def _release(acquired: list[sources.Source]) -> None:
    """Release in reverse order; every source is released even if one raises."""
    error: BaseException | None = None
    for source in reversed(acquired):
        try:
            source.release()
        except BaseException as exc:  # re-raised once the rest are released
            error = error or exc
    if error is not None:
        raise error


class record_function:  # lower case: torch.profiler's spelling
    """A named scope: context manager or decorator; records only while a profile is active.

    An exception inside the scope propagates and flags the event.
    """

    __slots__ = ("_generation", "_handle", "_id", "name")

    def __init__(self, name: str) -> None:
        # Checked here, recording or not: a bad name fails alike in every run.
        self.name = name if type(name) is str else scope_name(name)
        self._id = -1
        self._generation = -1
        # The native scope's handle while open, 0 otherwise: the exit closes this
        # scope, not the thread's innermost one (they differ across await/yield).
        self._handle = 0

    def __enter__(self) -> record_function:
        if _recording:
            if self._generation != _native._names_generation:  # a decorator's, from a past session
                self._id = _native.intern_scope(self.name)
                self._generation = _native._names_generation
            handle = _scope_push(self._id)
            if handle < 0:
                _native.check(-handle)
            self._handle = handle
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._handle:
            status = _scope_pop(self._handle, FLAG_EXCEPTION if exc_type is not None else 0)
            if status:
                # The handle stays: a scope exited on the wrong thread can still close on its own.
                _native.check(status)
            self._handle = 0

    def __call__(self, fn: F) -> F:
        name = self.name

        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            if not _recording:
                return fn(*args, **kwargs)
            with record_function(name):
                return fn(*args, **kwargs)

        return wrapper  # type: ignore[return-value]
