"""Memory sources: numpy data memory (NEP 49 handler) and, optionally, Python's allocators.

``MemorySource`` installs the counting numpy handler (``native/memory.c``) while
acquired; ``PythonMemorySource`` adds the same counting for Python's object and
``PyMem`` allocators (``native/memory_pymem.c``), which costs more per allocation
and is opt-in (``profile(python_memory=True)``).  Both feed the same native
counters, which move only while a profile records with ``profile_memory``:

- every allocation or free is attributed to the calling thread's innermost open
  event (``self_alloc_bytes``/``self_free_bytes``), or becomes a ``"[memory]"``
  event when no event is open;
- the profile's totals come back from :func:`memory_stats` after stop;
- allocations and frees of at least ``SAMPLE_MIN_BYTES`` also record a live-bytes
  sample (:func:`memory_samples`), the data for a trace's memory counter track.

Neither is a capture name: the profiler adds them when ``profile_memory=True``.
"""

from __future__ import annotations

import gc
import sys
import sysconfig
import tracemalloc
import warnings
from dataclasses import dataclass

import numpy as np

from pytest_opprof import _native
from pytest_opprof.errors import NativeError
from pytest_opprof.native_layout.records import MEMORY_EVENT_NAME, Records


@dataclass(frozen=True)
class MemoryStats:
    """One profile's memory figures, in bytes (counts for ``allocations``).

    ``peak_bytes``: highest live bytes during the profile, above the live bytes
    at its start (allocated minus freed so far, at its maximum).
    ``allocated_bytes``/``allocations``: everything allocated during the profile
    (a realloc counts as one allocation of its new size).
    ``freed_bytes``: everything freed during the profile (a realloc frees its old
    size).  ``leaked_bytes``: bytes allocated during the profile and still held
    after ``gc.collect()`` when the stats are read.
    """

    peak_bytes: int
    allocated_bytes: int
    allocations: int
    freed_bytes: int
    leaked_bytes: int
    leaked_ops: tuple[tuple[str, int], ...] = ()
    """Of the numpy data in ``leaked_bytes``, the bytes each op allocated, most first
    (``[memory]``: allocated outside any op); Python objects are not told apart."""


SAMPLE_MIN_BYTES = 4096
"""Allocations and frees of at least this many bytes record a live-bytes sample."""


_YOUNG_COLLECTION_SUFFICES = sys.version_info < (3, 14)
"""Up to 3.13 the collector is generational: ``gc.collect(1)`` collects generations 0
and 1 whole.  3.14's incremental collector collects only part of the old objects with
them, so there the leak figure always takes a full collection."""


def old_collections() -> int | None:
    """How many collections of the older generations (1 and 2) have run in this process;
    read when a profile starts (:func:`memory_stats`'s ``since``).  None where that count
    cannot stand in for a full collection (3.14 on)."""
    if not _YOUNG_COLLECTION_SUFFICES:
        return None
    stats = gc.get_stats()
    return int(stats[1]["collections"]) + int(stats[2]["collections"])


def memory_stats(
    counters: _native.MemoryCounters | None = None, since: int | None = None
) -> MemoryStats:
    """The last profile's memory figures; call after stop (collects garbage first).

    The collection only runs when the profile still holds bytes: after stop only
    frees of the profile's own blocks move a counter, and held bytes never go
    below zero, so with nothing held a collection could change no figure (and a
    full collection costs milliseconds in a long session).  ``counters``: read by the
    caller after stop, when it has them.

    ``since``: :func:`old_collections` at the profile's start.  The young generations
    are collected first: what a test made and dropped is almost always there, and that
    costs microseconds where a full collection walks every object of the session (0.3 to
    0.5 s late in numpy's own suite).  When no collection of an older generation ran
    during the profile, every object the profile made is still young, so the young
    collection frees every cycle made of them: bytes still held then are held by live
    objects (a cache, a global the test set), and a full collection could free none of
    them.  Otherwise (or without ``since``) a full collection decides what is left.  The
    one case the young collection cannot settle is a cycle of objects made *before* the
    profile that became garbage during it while holding the profile's arrays: those
    bytes count as leaked until a full collection runs.
    """
    c = counters if counters is not None else _native.memory_counters()
    if c.held_bytes > 0:
        young = since is not None and old_collections() == since
        gc.collect(1)
        c = _native.memory_counters()
        if c.held_bytes > 0 and not young:
            gc.collect()
            c = _native.memory_counters()
    return MemoryStats(
        peak_bytes=c.peak_bytes,
        allocated_bytes=c.allocated_bytes,
        allocations=c.allocations,
        freed_bytes=c.freed_bytes,
        leaked_bytes=c.held_bytes,
        leaked_ops=tuple(
            (name or MEMORY_EVENT_NAME, held) for name, held in _native.memory_held_by_name()
        )
        if c.held_bytes > 0
        else (),
    )


def memory_samples(count: int | None = None) -> np.ndarray:
    """Live-bytes samples of the last profile, sorted by time; call after stop.

    A structured array of ``time_ns`` (the events' clock) and ``net_bytes``
    (bytes allocated minus freed since the profile started, i.e. live bytes above
    the start; negative when the profile freed memory allocated before it).  The
    data for a trace's memory counter track: a sample is taken at each
    allocation or free of at least ``SAMPLE_MIN_BYTES``, so smaller ones show up
    in the next sample.
    """
    samples = _native.memory_samples(count)
    if len(samples) < 2:  # most tests take none: a structured sort costs 15 us even so
        return samples
    return np.sort(samples, order="time_ns", kind="stable")


class MemorySource:
    """Counting numpy data-memory handler; acquire/release are refcounted.

    ``start_options()`` is called once per profile right before recording starts:
    it opens the profile's measurement window (zeroes the per-profile counters).
    """

    name = "memory"

    def __init__(self) -> None:
        self._refs = 0
        self._available: bool | None = None

    def available(self) -> bool:
        """True when numpy is importable (the handler is numpy's); warns once otherwise."""
        if self._available is None:
            try:
                import numpy  # noqa: F401
            except ImportError:
                warnings.warn(
                    "pytest-opprof: memory profiling off (numpy is not installed)",
                    RuntimeWarning,
                    stacklevel=2,
                )
                self._available = False
            else:
                self._available = True
        return self._available

    def acquire(self) -> None:
        """Install the handler on the first acquire (in every thread, see memory.c)."""
        _native.memory_install()
        self._refs += 1

    def release(self) -> None:
        """Restore numpy's previous handler on the last release."""
        if self._refs == 0:
            return
        self._refs -= 1
        _native.memory_uninstall()

    def start_options(self) -> int:
        """``OPPROF_OPT_PROFILE_MEMORY``; opens the profile's measurement window."""
        _native.memory_reset()
        return int(_native.lib.OPPROF_OPT_PROFILE_MEMORY)

    def collect(self) -> Records | None:
        """Native source: its data comes out of the native drain and memory_stats()."""
        return None


class PythonMemorySource(MemorySource):
    """Counting hooks on Python's ``PyMem``/object allocators (opt-in, see module doc).

    Adds roughly a hash-table insert or delete per Python allocation; see
    ``bench/bench_memory.py`` for the measured cost.
    """

    name = "python_memory"

    def __init__(self) -> None:
        super().__init__()
        self._tracing_at_install = False
        self.note: str | None = None
        """One line for the user when the last release left the hooks behind, else None."""

    def available(self) -> bool:
        """True with a GIL (the pointer table relies on it); warns once otherwise."""
        if self._available is None:
            self._available = not sysconfig.get_config_var("Py_GIL_DISABLED")
            if not self._available:
                warnings.warn(
                    "pytest-opprof: python_memory off (this free-threaded Python has no GIL "
                    "to guard the allocation table); numpy memory is still counted",
                    RuntimeWarning,
                    stacklevel=2,
                )
        return self._available

    def acquire(self) -> None:
        """Hook PYMEM_DOMAIN_MEM and PYMEM_DOMAIN_OBJ on the first acquire."""
        tracing = tracemalloc.is_tracing()
        _native.memory_python_install()
        if self._refs == 0:
            self._tracing_at_install = tracing
        self._refs += 1

    def release(self) -> None:
        """Unhook on the last release.

        No garbage collection here: the profile reads :func:`memory_stats` (which
        collects, while still hooked) before it releases its sources, so dead
        objects already count as freed; what dies after unhooking stays in a
        window whose figures were read and which the next profile replaces.
        """
        if self._refs == 0:
            return
        self._refs -= 1
        try:
            _native.memory_python_uninstall()
        except NativeError as exc:
            # Not ours on top any more: the native side left the chain as it is and
            # made its hooks pass calls through (memory_pymem.c).  Nothing is broken,
            # so a note, not an error that would fail the run.
            if exc.code != _native.lib.OPPROF_E_HOOK:
                raise
            self.note = self._left_behind()

    def _left_behind(self) -> str:
        """Why the hooks were not on top at the last release, as far as we can tell."""
        tracing = tracemalloc.is_tracing()
        if tracing and not self._tracing_at_install:
            return (
                "opprof: tracemalloc, started during the run, runs on top of opprof's Python "
                "allocator hooks: they stay in place, counting nothing, until the process exits"
            )
        if self._tracing_at_install:  # stopped, maybe started again: ours went out at the stop
            return (
                "opprof: tracemalloc, stopped during the run, took opprof's Python allocator "
                "hooks out with it: Python allocations after that were not counted"
            )
        return (
            "opprof: another hook replaced the Python allocator during the run: opprof's "
            "Python allocator hooks stay in place, counting nothing"
        )
