"""Memory accounting: the NEP 49 handler, attribution to events, per-profile figures.

Real numpy, real profiles.  ``np.empty(n)`` allocates exactly ``8 * n`` data bytes
(float64) and nothing else from numpy's data allocator, which makes exact
assertions possible.
"""

from __future__ import annotations

import contextvars
import threading
from typing import Any

import numpy as np
import pytest

import pytest_opprof as opprof
from pytest_opprof import _native
from pytest_opprof.capture import sources
from pytest_opprof.capture.sources.memory_source import (
    SAMPLE_MIN_BYTES,
    MemorySource,
    memory_samples,
)
from pytest_opprof.errors import NativeError
from pytest_opprof.native_layout.records import KIND_MEMORY, MEMORY_EVENT_NAME, Records

MB8 = 8_000_000
_kept: list[np.ndarray] = []  # a deliberate leak across a profile


@pytest.fixture
def session_handler() -> Any:
    """The handler installed around the whole test, as a plugin run holds it."""
    source = sources.get("memory")
    assert source is not None
    source.acquire()
    yield
    source.release()


def handler_name(arr: np.ndarray | None = None) -> str:
    from numpy._core.multiarray import get_handler_name

    return str(get_handler_name() if arr is None else get_handler_name(arr))


def rows(records: Records, name: str) -> np.ndarray:
    """The records named ``name``."""
    ids = [i for i, n in enumerate(records.names) if n == name]
    return records.events[np.isin(records.events["name"], ids)]


def one(records: Records, name: str) -> np.void:
    found = rows(records, name)
    assert len(found) == 1, f"{len(found)} events named {name!r}"
    return found[0]


def event(prof: opprof.profile, name: str) -> Any:
    found = [e for e in prof.events() if e.name == name]
    assert len(found) == 1, f"{len(found)} events named {name!r}"
    return found[0]


def test_ones_is_exactly_8mb_in_its_empty_op_and_in_the_scope() -> None:
    with opprof.profile(capture=["numpy"]) as prof:
        with opprof.record_function("outer"):
            a = np.ones(10**6)
    records = prof.records()
    # np.ones is Python code: numpy.empty inside it allocates the data.
    empty = one(records, "numpy.empty")
    assert empty["self_alloc_bytes"] == MB8
    assert empty["self_free_bytes"] == 0
    assert empty["self_alloc_count"] == 1
    assert event(prof, "numpy.empty").self_cpu_memory_usage == MB8
    outer = event(prof, "outer")
    assert outer.cpu_memory_usage == MB8  # net bytes, children included
    assert outer.self_cpu_memory_usage == 0
    assert a.nbytes == MB8
    # Counted by our handler, named as numpy's own.
    assert handler_name(a) == "default_allocator"


def test_del_in_another_scope_is_minus_8mb() -> None:
    with opprof.profile(capture=["numpy"]) as prof:
        with opprof.record_function("make"):
            a = np.empty(10**6)
        with opprof.record_function("drop"):
            del a
    drop = one(prof.records(), "drop")
    assert drop["self_free_bytes"] == MB8
    assert drop["self_alloc_bytes"] == 0
    assert event(prof, "drop").self_cpu_memory_usage == -MB8
    assert event(prof, "drop").cpu_memory_usage == -MB8
    assert prof.memory is not None
    assert prof.memory.allocated_bytes == MB8
    assert prof.memory.freed_bytes == MB8
    assert prof.memory.leaked_bytes == 0


@pytest.mark.usefixtures("session_handler")
def test_free_outside_any_op_is_a_memory_event() -> None:
    a = np.empty(10**6)  # allocated (through our handler) before the profile
    with opprof.profile(capture=["numpy"]) as prof:
        del a
        b = np.empty(1000)
    records = prof.records()
    mem = rows(records, MEMORY_EVENT_NAME)
    assert set(mem["kind"].tolist()) == {KIND_MEMORY}
    assert mem["self_free_bytes"].sum() == MB8
    assert (mem["parent"] == -1).all()
    # The allocation happened inside numpy.empty, not in a "[memory]" event.
    assert mem["self_alloc_bytes"].sum() == 0
    assert one(records, "numpy.empty")["self_alloc_bytes"] == b.nbytes
    assert prof.memory is not None
    assert prof.memory.freed_bytes == MB8
    assert prof.memory.leaked_bytes == b.nbytes
    assert prof.memory.peak_bytes == 0  # never above the start: the free came first


def test_thread_started_during_the_profile_is_counted_in_its_own_scope() -> None:
    seen: dict[str, Any] = {}

    def work() -> None:
        seen["handler"] = handler_name()
        with opprof.record_function("worker"):
            seen["array"] = np.empty(10**5)
        seen["tid"] = threading.get_native_id()

    with opprof.profile(capture=["none"]) as prof:
        t = threading.Thread(target=work)
        t.start()
        t.join()
    worker = one(prof.records(), "worker")
    assert seen["handler"] == "default_allocator"  # numpy's name, our counting
    assert worker["self_alloc_bytes"] == 800_000
    assert worker["thread"] == seen["tid"] != threading.get_native_id()
    assert prof.memory is not None
    assert prof.memory.leaked_bytes == 800_000


def test_thread_running_before_the_profile_and_fresh_contexts_are_covered() -> None:
    go, done = threading.Event(), threading.Event()
    out: dict[str, Any] = {}

    def fresh() -> tuple[str, np.ndarray]:
        with opprof.record_function("fresh"):
            return handler_name(), np.empty(1000)

    def waiter() -> None:
        go.wait(10)
        out["handler"] = handler_name()
        with opprof.record_function("late"):
            out["array"] = np.empty(1000)
        done.set()

    t = threading.Thread(target=waiter)
    t.start()
    try:
        with opprof.profile(capture=["none"]) as prof:
            in_fresh_context, _ = contextvars.Context().run(fresh)
            go.set()
            assert done.wait(10)
    finally:
        go.set()
        t.join()
    # Counted in both, under the name numpy would report.
    assert in_fresh_context == out["handler"] == "default_allocator"
    assert one(prof.records(), "fresh")["self_alloc_bytes"] == 8000
    assert one(prof.records(), "late")["self_alloc_bytes"] == 8000
    assert _native.memory_counters().threads_covered == 0  # uninstalled again
    assert contextvars.Context().run(handler_name) == "default_allocator"


def test_blocks_from_before_the_install_are_not_seen() -> None:
    a = np.empty(10**6)  # numpy's default handler: freed by it, not by ours
    with opprof.profile(capture=["none"]) as prof:
        del a
    assert prof.memory is not None
    assert prof.memory.freed_bytes == 0
    assert len(rows(prof.records(), MEMORY_EVENT_NAME)) == 0


def test_handler_is_restored_and_its_blocks_stay_usable_after_uninstall() -> None:
    before = handler_name()
    with opprof.profile(capture=["none"]) as first:
        a = np.arange(10**5, dtype=np.float64)
    assert handler_name() == before
    assert _native.memory_counters().installed == 0
    assert first.memory is not None
    assert first.memory.allocated_bytes == a.nbytes  # a's block is ours
    a.resize(2 * 10**5, refcheck=False)  # realloc through our handler, uninstalled
    assert a[: 10**5].sum() == sum(range(10**5))
    del a  # free through our handler: must not crash or count
    with opprof.profile(capture=["none"]) as prof:
        pass
    assert prof.memory is not None
    assert prof.memory.allocated_bytes == prof.memory.freed_bytes == 0


def test_realloc_counts_exactly_and_returns_to_baseline() -> None:
    with opprof.profile(capture=["numpy"]) as prof:
        a = np.arange(1000, dtype=np.float64)  # 8,000 bytes
        with opprof.record_function("grow"):
            a.resize(10**6, refcheck=False)  # realloc 8,000 -> 8,000,000
        with opprof.record_function("shrink"):
            a.resize(10, refcheck=False)  # realloc 8,000,000 -> 80
        grown = np.empty(0)
        for _ in range(20):
            grown = np.concatenate([grown, np.ones(5000)])
        fromiter = np.fromiter((float(i) for i in range(100_000)), dtype=np.float64)
        del a, grown, fromiter
    resizes = rows(prof.records(), "numpy.ndarray.resize")
    assert resizes[["self_alloc_bytes", "self_free_bytes"]].tolist() == [(MB8, 8000), (80, MB8)]
    assert resizes["self_alloc_count"].tolist() == [1, 1]
    assert event(prof, "grow").cpu_memory_usage == MB8 - 8000
    assert event(prof, "shrink").cpu_memory_usage == 80 - MB8
    memory = prof.memory
    assert memory is not None
    # Everything allocated in the profile was freed in it, to the byte.
    assert memory.allocated_bytes == memory.freed_bytes > 2 * MB8
    assert memory.leaked_bytes == 0
    assert _native.memory_counters().net_bytes == 0
    assert memory.peak_bytes >= MB8


def test_peak_of_allocate_free_allocate_is_the_first_block() -> None:
    with opprof.profile(capture=["none"]) as prof:
        a = np.empty(10**6)  # 8 MB
        del a
        b = np.empty(5 * 10**5)  # 4 MB
    memory = prof.memory
    assert memory is not None
    assert memory.peak_bytes == MB8
    assert memory.allocated_bytes == MB8 + 4_000_000
    assert memory.allocations == 2
    assert memory.freed_bytes == MB8
    assert memory.leaked_bytes == 4_000_000
    del b


@pytest.mark.usefixtures("session_handler")
def test_peak_is_above_the_start_not_absolute() -> None:
    big = np.empty(4 * 10**6)  # 32 MB held before the profile
    with opprof.profile(capture=["none"]) as prof:
        del big  # -32 MB
        c = np.empty(10**6)  # +8 MB: still below the start
    assert prof.memory is not None
    assert prof.memory.peak_bytes == 0
    assert prof.memory.leaked_bytes == MB8
    del c


def test_a_deliberate_leak_is_reported_and_garbage_is_not() -> None:
    with opprof.profile(capture=["none"]) as prof:
        _kept.append(np.empty(10**6))
        cycle: list[Any] = [np.empty(10**5)]
        cycle.append(cycle)  # only the cycle collector frees this one
        del cycle
    try:
        assert prof.memory is not None
        assert prof.memory.leaked_bytes == MB8
    finally:
        _kept.clear()


def test_memory_figures_are_left_out_without_profile_memory() -> None:
    with opprof.profile(capture=["numpy"], profile_memory=False) as prof:
        a = np.empty(10**6)
    assert prof.memory is None
    assert one(prof.records(), "numpy.empty")["self_alloc_bytes"] == 0
    assert handler_name(a) == "default_allocator"


def test_samples_track_live_bytes_on_the_event_clock() -> None:
    with opprof.profile(capture=["none"]) as prof:
        with opprof.record_function("phase"):
            a = np.empty(10**6)
            b = np.empty(10**6)
            del a
            small = np.empty(10)  # below SAMPLE_MIN_BYTES: no sample
        del b, small
    samples = memory_samples()
    assert samples["net_bytes"].tolist() == [MB8, 2 * MB8, MB8, 80]
    phase = one(prof.records(), "phase")
    assert (samples["time_ns"][:3] >= phase["start_ns"]).all()
    assert (samples["time_ns"][:3] <= phase["end_ns"]).all()
    assert np.all(np.diff(samples["time_ns"]) >= 0)
    assert SAMPLE_MIN_BYTES > 80


def test_sample_capacity_bounds_the_samples_and_counts_the_rest() -> None:
    _native.memory_set_sample_capacity(3)
    try:
        with opprof.profile(capture=["none"]):
            for _ in range(5):
                np.empty(10**4)
        counters = _native.memory_counters()
        assert (counters.samples, counters.samples_dropped) == (3, 7)
        assert len(memory_samples()) == 3
        _native.memory_set_sample_capacity(0)
        with opprof.profile(capture=["none"]) as prof:
            np.empty(10**4)
        assert len(memory_samples()) == 0
        assert prof.memory is not None and prof.memory.allocated_bytes == 80_000
    finally:
        _native.memory_set_sample_capacity(65536)


def test_reset_while_recording_is_refused() -> None:
    with opprof.profile(capture=["none"]):
        with pytest.raises(NativeError, match="while a profile records"):
            _native.memory_reset()


def test_source_refcount_installs_once_and_restores_on_the_last_release() -> None:
    source = MemorySource()
    source.acquire()
    source.acquire()
    try:
        assert _native.memory_counters().installed == 2
        source.release()
        assert _native.memory_counters().installed == 1
        assert _native.memory_counters().threads_covered == 1
    finally:
        source.release()
    assert handler_name() == "default_allocator"
    source.release()  # one too many: harmless
    assert _native.memory_counters().installed == 0


def test_python_memory_counts_object_allocations_in_scopes() -> None:
    with opprof.profile(capture=["none"], python_memory=True) as prof:
        with opprof.record_function("objects"):
            objs = [object() for _ in range(1000)]
    objects = one(prof.records(), "objects")
    # 1,000 objects of 16 bytes each, plus the list's item array.
    assert objects["self_alloc_count"] >= 1000
    assert objects["self_alloc_bytes"] >= 1000 * 16 + 1000 * 8
    counters = _native.memory_counters()
    assert counters.python_installed == 0
    assert prof.memory is not None
    assert prof.memory.leaked_bytes >= 1000 * 16
    del objs


def test_python_memory_survives_objects_allocated_before_install() -> None:
    before = [bytearray(64) for _ in range(100)]
    with opprof.profile(capture=["none"], python_memory=True) as prof:
        del before  # frees of blocks the hooks never saw allocated: not counted
        after = [bytearray(64) for _ in range(100)]
    assert prof.memory is not None
    assert prof.memory.freed_bytes < 100 * 64
    del after


def test_counts_of_exited_threads_survive_their_counters_being_reused() -> None:
    def work() -> None:
        np.empty(1000)  # 8,000 bytes, freed in the thread

    with opprof.profile(capture=["none"]) as prof:
        for _ in range(50):  # one at a time: each new thread reuses the last one's counters
            t = threading.Thread(target=work)
            t.start()
            t.join()
    assert prof.memory is not None
    assert prof.memory.allocated_bytes == prof.memory.freed_bytes == 50 * 8000
    assert prof.memory.allocations == 50


@pytest.fixture
def full_collections() -> Any:
    """Full collections started while the test runs (automatic collection off)."""
    import gc

    seen: list[int] = []

    def note(phase: str, info: dict[str, int]) -> None:
        if phase == "start" and info["generation"] == 2:
            seen.append(1)

    enabled = gc.isenabled()
    gc.disable()
    gc.callbacks.append(note)
    yield seen
    gc.callbacks.remove(note)
    if enabled:
        gc.enable()


def test_leak_figure_collects_cycles_and_skips_collection_when_nothing_is_held(
    full_collections: list[int],
) -> None:
    import gc

    with opprof.profile(capture=["none"]) as prof:
        a = np.empty(10**6)
        del a
    assert prof.memory is not None
    assert (prof.memory.allocated_bytes, prof.memory.leaked_bytes) == (MB8, 0)
    assert full_collections == []  # nothing held: a collection could change no figure

    class Holder:
        pass

    with opprof.profile(capture=["none"]) as prof:
        h = Holder()
        h.self = h  # type: ignore[attr-defined]  # a cycle: only gc frees it
        h.data = np.empty(10**6)  # type: ignore[attr-defined]
        del h
    assert prof.memory is not None
    assert prof.memory.leaked_bytes == 0
    assert full_collections == []  # a young cycle: the young generations' collection frees it

    keep = []
    with opprof.profile(capture=["none"]) as prof:
        h = Holder()
        h.self = h  # type: ignore[attr-defined]
        h.data = np.empty(10**6)  # type: ignore[attr-defined]
        keep.append(h)
        gc.collect(1)  # survives it: now in the oldest generation
        keep.clear()
        del h
    assert prof.memory is not None
    assert prof.memory.leaked_bytes == 0  # an old cycle: only a full collection frees it
    assert full_collections == [1]


def test_leak_figure_takes_no_full_collection_when_the_profile_made_only_young_objects(
    full_collections: list[int],
) -> None:
    """Bytes still held after the young generations' collection, when no older
    generation was collected during the profile, are held by live objects: a full
    collection (0.3-0.5 s late in a big suite) could free none of them.  An automatic
    collection of an older generation during the profile makes the full one run."""
    import gc
    import sys

    full_when_young = [1] if sys.version_info >= (3, 14) else []
    cache: list[np.ndarray] = []
    with opprof.profile(capture=["none"]) as prof:
        cache.append(np.empty(10**6))  # held by a live list: a real leak of the profile
    assert prof.memory is not None
    assert prof.memory.leaked_bytes == MB8
    assert full_collections == full_when_young

    class Holder:
        pass

    # The one case the young collection cannot settle (memory_stats' docstring): a cycle
    # made before the profile, already old, that becomes garbage during it holding the
    # profile's array.  Counted as held until a full collection runs.
    old = Holder()
    old.self = old  # type: ignore[attr-defined]
    gc.collect()  # now in the oldest generation
    full_collections.clear()
    with opprof.profile(capture=["none"]) as prof:
        old.data = np.empty(10**6)  # type: ignore[attr-defined]
        del old
    assert prof.memory is not None
    if sys.version_info < (3, 14):
        assert prof.memory.leaked_bytes == MB8
        assert full_collections == []
    gc.collect()

    # An automatic collection of generation 1 during the profile: the profile's
    # objects may be old now, so the full collection decides (and frees the cycle).
    gc.enable()
    threshold = gc.get_threshold()
    gc.set_threshold(10, 1, 1_000_000)
    try:
        with opprof.profile(capture=["none"]) as prof:
            h = Holder()
            h.self = h  # type: ignore[attr-defined]
            h.data = np.empty(10**6)  # type: ignore[attr-defined]
            before = gc.get_stats()[1]["collections"]
            junk = [[] for _ in range(200)]  # containers: gen-0 and gen-1 collections run
            assert gc.get_stats()[1]["collections"] > before
            del h, junk
    finally:
        gc.set_threshold(*threshold)
        gc.disable()
    assert prof.memory is not None
    assert prof.memory.leaked_bytes == 0
    assert 1 in full_collections


def test_aligned_blocks_start_at_a_cache_line(session_handler: Any) -> None:
    """``memory_align``: every new numpy block at a cache line, its data intact through
    realloc either way, and counted as the bytes asked for."""
    sizes = (1, 7, 100, 1_001, 8_191, 100_000, 1_000_000)
    _native.memory_align(True)
    try:
        with opprof.profile(profile_memory=True) as prof:
            with opprof.record_function("aligned"):
                blocks = [np.full(n, 3.0) for n in sizes]
        assert [block.ctypes.data % 64 for block in blocks] == [0] * len(sizes)
        assert event(prof, "aligned").cpu_memory_usage == 8 * sum(sizes)
        grown = np.arange(10.0)
        grown.resize(200_001, refcheck=False)  # realloc to an aligned block
        assert grown.ctypes.data % 64 == 0
        assert grown[:10].tolist() == list(range(10)) and grown[-1] == 0
    finally:
        _native.memory_align(False)
    grown.resize(5, refcheck=False)  # an aligned block moved back where malloc puts it
    assert grown.tolist() == [0.0, 1.0, 2.0, 3.0, 4.0]
    kept = [np.empty(n) for n in range(1_000, 1_008)]  # alive: each its own place
    assert any(block.ctypes.data % 64 for block in kept)  # malloc's 16-byte steps again
    del blocks, grown, kept
