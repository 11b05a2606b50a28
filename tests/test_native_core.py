"""The native core through its one door: clock, scopes, threads, buffers, names, stacks, nesting."""

from __future__ import annotations

import itertools
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator

import numpy as np
import pytest
from thread_helpers import run_threads

from pytest_opprof import _native
from pytest_opprof.errors import NativeError
from pytest_opprof.native_layout.records import FLAG_EXCEPTION, KIND_SCOPE, Records

lib = _native.lib
MAX_DEPTH = 256  # OPPROF_MAX_DEPTH in native/opprof_internal.h


@pytest.fixture(autouse=True)
def idle_core() -> Iterator[None]:
    """Every test starts and ends with no session recording and the default capacity."""
    assert not _native.is_recording()
    yield
    if _native.is_recording():
        _native.stop()
    _native.drain()
    _native.set_capacity(4 << 20)


def busy_wait_ns(ns: int) -> None:
    end = time.perf_counter_ns() + ns
    while time.perf_counter_ns() < end:
        pass


def record(fn: object, options: int = 0) -> Records:
    _native.start(options)
    try:
        fn()  # type: ignore[operator]
    finally:
        _native.stop()
    return _native.drain()


def by_name(records: Records, name: str) -> np.ndarray:
    return records.events[records.events["name"] == records.names.index(name)]


# ---- clock ------------------------------------------------------------------


def test_clock_source_is_named_and_rate_is_sane() -> None:
    assert _native.clock_source() in ("tsc", "clock_gettime")
    if _native.clock_source() == "clock_gettime":
        assert _native.ns_per_tick() == 1.0
    else:
        # Any CPU from the last two decades ticks between 0.2 and 5 GHz.
        assert 0.2 < _native.ns_per_tick() < 5.0


def test_clock_is_monotonic() -> None:
    reads = [_native.now_ns() for _ in range(20000)]
    assert all(b >= a for a, b in itertools.pairwise(reads))
    assert reads[-1] > reads[0]


def test_clock_agrees_with_perf_counter_over_a_busy_wait() -> None:
    ratios = []
    for _ in range(5):
        p0, c0 = time.perf_counter_ns(), _native.now_ns()
        busy_wait_ns(30_000_000)
        p1, c1 = time.perf_counter_ns(), _native.now_ns()
        ratios.append((c1 - c0) / (p1 - p0))
    assert abs(sorted(ratios)[2] - 1.0) < 0.02, ratios


def test_clock_shares_the_perf_counter_time_base() -> None:
    # Both are CLOCK_MONOTONIC ns on Linux: events line up with Python's timestamps.
    assert abs(_native.now_ns() - time.perf_counter_ns()) < 5_000_000


def test_event_times_lie_between_clock_reads_around_them() -> None:
    name = _native.intern("timed")

    def body() -> None:
        _native.scope_push(name)
        _native.scope_pop()

    before = _native.now_ns()
    records = record(body)
    after = _native.now_ns()
    (ev,) = records.events
    assert before <= ev["start_ns"] <= ev["end_ns"] <= after


def test_clock_gettime_fallback_records_in_a_subprocess() -> None:
    code = (
        "from pytest_opprof import _native as n\n"
        "i = n.intern('s'); n.start(0); n.scope_push(i); n.scope_pop(); n.stop()\n"
        "r = n.drain(); e = r.events[0]\n"
        "print(n.clock_source(), len(r), e['end_ns'] >= e['start_ns'] > 0)\n"
    )
    env = dict(os.environ, OPPROF_CLOCK="clock_gettime")
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )
    assert out.stdout.split() == ["clock_gettime", "1", "True"]


# ---- scopes -----------------------------------------------------------------


def test_scopes_nest_with_parent_depth_and_thread() -> None:
    outer, inner = _native.intern("outer"), _native.intern("inner")

    def body() -> None:
        _native.scope_push(outer)
        for _ in range(2):
            _native.scope_push(inner)
            _native.scope_pop()
        _native.scope_pop()

    records = record(body)
    (o,) = by_name(records, "outer")
    inners = by_name(records, "inner")
    assert len(records) == 3
    assert (o["parent"], o["depth"]) == (-1, 0)
    assert list(inners["parent"]) == [o["id"], o["id"]]
    assert list(inners["depth"]) == [1, 1]
    assert set(records.events["kind"]) == {KIND_SCOPE}
    assert set(records.events["thread"]) == {threading.get_native_id()}
    assert len(set(records.events["id"])) == 3
    assert o["start_ns"] <= inners["start_ns"].min() and inners["end_ns"].max() <= o["end_ns"]


def test_self_time_of_nested_busy_waits() -> None:
    outer, inner = _native.intern("busy outer"), _native.intern("busy inner")
    measured = {}

    def body() -> None:
        t0 = time.perf_counter_ns()
        _native.scope_push(outer)
        busy_wait_ns(20_000_000)
        t1 = time.perf_counter_ns()
        _native.scope_push(inner)
        busy_wait_ns(10_000_000)
        _native.scope_pop()
        t2 = time.perf_counter_ns()
        _native.scope_pop()
        t3 = time.perf_counter_ns()
        measured.update(outer=t3 - t0, inner=t2 - t1, self=(t1 - t0) + (t3 - t2))

    records = record(body)
    (o,) = by_name(records, "busy outer")
    (i,) = by_name(records, "busy inner")
    total_o = int(o["end_ns"] - o["start_ns"])
    total_i = int(i["end_ns"] - i["start_ns"])
    # Each event lies inside the perf_counter reads around it.
    assert total_o <= measured["outer"] * 1.02
    assert total_i <= measured["inner"] * 1.02
    assert total_i >= 10_000_000 * 0.98
    self_o = total_o - total_i
    assert 20_000_000 * 0.98 <= self_o <= measured["self"] * 1.02 + 200_000


def test_exception_flag_reaches_the_event() -> None:
    name = _native.intern("raises")

    def body() -> None:
        _native.scope_push(name)
        _native.scope_pop(FLAG_EXCEPTION)

    (ev,) = record(body).events
    assert ev["flags"] & FLAG_EXCEPTION


def test_three_threads_keep_their_scopes_apart() -> None:
    barrier = threading.Barrier(3)
    native_ids: dict[str, int] = {}

    def worker(tag: str) -> None:
        outer, inner = _native.intern(f"outer {tag}"), _native.intern(f"inner {tag}")
        native_ids[tag] = threading.get_native_id()
        barrier.wait()
        for _ in range(50):
            _native.scope_push(outer)
            _native.scope_push(inner)
            _native.scope_pop()
            _native.scope_pop()

    def body() -> None:
        run_threads(worker, [(t,) for t in "abc"])

    records = record(body)
    ev = records.events
    assert len(ev) == 300
    assert len(set(ev["id"])) == 300
    by_id = {int(e["id"]): e for e in ev}
    for tag in "abc":
        outers = by_name(records, f"outer {tag}")
        inners = by_name(records, f"inner {tag}")
        assert len(outers) == len(inners) == 50
        assert set(outers["thread"]) == set(inners["thread"]) == {native_ids[tag]}
        assert set(outers["parent"]) == {-1}
        for e in inners:
            parent = by_id[int(e["parent"])]
            assert records.names[parent["name"]] == f"outer {tag}"
            assert parent["start_ns"] <= e["start_ns"] <= e["end_ns"] <= parent["end_ns"]
    assert len({native_ids[t] for t in "abc"}) == 3


def test_exited_threads_are_reused_across_many_sessions() -> None:
    name = _native.intern("short thread")

    def worker() -> None:
        _native.scope_push(name)
        _native.scope_pop()

    slots = set()
    for _ in range(200):

        def body() -> None:
            t = threading.Thread(target=worker)
            t.start()
            t.join()

        records = record(body)
        assert len(records) == 1
        slots.add(int(records.events["id"][0]) >> 40)
    # The state (and its id slot) of an exited thread goes back to a free list.
    assert len(slots) <= 3, slots


def test_scope_open_before_start_is_not_recorded_and_stays_balanced() -> None:
    early, late = _native.intern("early"), _native.intern("late")
    _native.scope_push(early)
    _native.start(0)
    try:
        _native.scope_push(late)
        _native.scope_pop()
        _native.scope_pop()
    finally:
        _native.stop()
    records = _native.drain()
    assert [records.names[n] for n in records.events["name"]] == ["late"]
    assert records.events["parent"][0] == -1 and records.events["depth"][0] == 0


def test_pop_without_push_names_the_problem() -> None:
    with pytest.raises(NativeError, match="no open scope"):
        _native.scope_pop()


def test_depth_beyond_the_bound_is_counted_as_dropped() -> None:
    name = _native.intern("deep")
    extra = 10

    def body() -> None:
        for _ in range(MAX_DEPTH + extra):
            _native.scope_push(name)
        for _ in range(MAX_DEPTH + extra):
            _native.scope_pop()

    records = record(body)
    assert len(records) == MAX_DEPTH
    assert records.dropped == extra
    assert sorted(records.events["depth"]) == list(range(MAX_DEPTH))


def test_unwind_closes_scopes_left_open_so_later_sessions_record_again() -> None:
    # 300 scopes left open pushed every later event past the bound.
    name, later = _native.intern("left open"), _native.intern("later")
    depth = _native.scope_depth()
    _native.start(0)
    try:
        for _ in range(300):
            _native.scope_push(name)
    finally:
        _native.stop()
    _native.drain()
    assert _native.scope_depth() == depth + 300
    assert _native.scope_unwind(depth) == 300
    assert _native.scope_depth() == depth

    def body() -> None:
        _native.scope_push(later)
        _native.scope_pop()

    records = record(body)
    assert [records.names[n] for n in records.events["name"]] == ["later"]
    assert records.dropped == 0


def test_muted_threads_record_no_scope_op_or_allocation() -> None:
    # A thread a test left running is kept out of later figures.
    from pytest_opprof.capture.sources.memory_source import MemorySource, memory_stats

    name = _native.intern("in thread")
    go, done, stop = threading.Event(), threading.Event(), threading.Event()

    def worker() -> None:
        while not stop.is_set():
            go.wait()
            _native.scope_push(name)
            kept = np.ones(100_000)  # 800 kB
            _native.scope_pop()
            del kept
            go.clear()
            done.set()

    thread = threading.Thread(target=worker, daemon=True)
    thread.start()
    memory = MemorySource()
    memory.acquire()
    try:
        for muted in (False, True):
            assert thread.native_id is not None
            _native.mute_threads([thread.native_id] if muted else [])
            _native.start(memory.start_options())
            try:
                done.clear()
                go.set()
                assert done.wait(10)
            finally:
                _native.stop()
            records = _native.drain()
            stats = memory_stats()
            in_thread = [records.names[n] == "in thread" for n in records.events["name"]]
            assert any(in_thread) is not muted
            assert (stats.allocated_bytes >= 800_000) is not muted, stats
    finally:
        stop.set()
        go.set()
        thread.join()
        _native.mute_threads([])
        memory.release()


# ---- session buffers ----------------------------------------------------------


def test_capacity_bounds_events_and_counts_drops() -> None:
    name = _native.intern("capped")
    _native.set_capacity(100)

    def body() -> None:
        for _ in range(150):
            _native.scope_push(name)
            _native.scope_pop()

    records = record(body)
    assert (len(records), records.dropped) == (100, 50)


def test_capacity_is_shared_by_all_threads() -> None:
    name = _native.intern("capped threads")
    _native.set_capacity(150)

    def worker() -> None:
        for _ in range(100):
            _native.scope_push(name)
            _native.scope_pop()

    def body() -> None:
        run_threads(worker, [()] * 2)

    records = record(body)
    # Threads claim the budget in blocks of capacity/64: at most one block
    # (here 2 events) can stay claimed but unused by the thread that ends first.
    assert len(records) + records.dropped == 200
    assert 148 <= len(records) <= 150


def test_bad_capacity_is_refused() -> None:
    with pytest.raises(NativeError, match="max_events must be > 0"):
        _native.set_capacity(0)


def test_many_events_span_several_buffer_chunks() -> None:
    name = _native.intern("many")
    n = 150_000  # more than two 64K-record chunks

    def body() -> None:
        push, pop = lib.opprof_scope_push, lib.opprof_scope_pop
        for _ in range(n):
            push(name)
            pop(0)

    records = record(body)
    assert len(records) == n and records.dropped == 0
    seq = records.events["id"] & ((1 << 40) - 1)
    assert sorted(seq) == list(range(1, n + 1))


def test_a_huge_drain_frees_the_chunks_a_next_session_would_not_keep_as_it_copies() -> None:
    """Freed as copied, so the copy's pages reuse theirs (a huge round otherwise faults
    in its records' memory twice); the thread keeps at most 16 MiB and the chunk it was
    writing, and the next session records as before."""
    name = _native.intern("huge")
    n = 400_000  # about 38 MB of records: several 64K-record chunks past the 16 MiB kept
    chunk_bytes = 65536 * _native.EVENT_DTYPE.itemsize

    def body() -> None:
        push, pop = lib.opprof_scope_push, lib.opprof_scope_pop
        for _ in range(n):
            push(name)
            pop(0)

    _native.start(0)
    body()
    _native.stop()
    held_recorded = _native.buffer_stats().bytes
    records = _native.drain()
    held_drained = _native.buffer_stats().bytes
    assert len(records) == n and records.dropped == 0
    seq = records.events["id"] & ((1 << 40) - 1)
    assert sorted(seq) == list(range(1, n + 1))
    assert held_recorded >= n * _native.EVENT_DTYPE.itemsize
    assert held_drained <= (16 << 20) + chunk_bytes + (2 << 20)  # + the arenas, thread state
    again = record(lambda: (lib.opprof_scope_push(name), lib.opprof_scope_pop(0)))
    assert len(again) == 1


def test_drain_empties_the_buffers() -> None:
    name = _native.intern("once")
    _native.start(0)
    _native.scope_push(name)
    _native.scope_pop()
    _native.stop()
    assert _native.pending() == 1
    assert len(_native.drain()) == 1
    assert _native.pending() == 0
    assert len(_native.drain()) == 0


def test_start_clears_an_undrained_session() -> None:
    name = _native.intern("undrained")
    for _ in range(2):
        _native.start(0)
        _native.scope_push(name)
        _native.scope_pop()
        _native.stop()
    assert len(_native.drain()) == 1


def test_start_while_running_and_stop_while_idle_name_the_state() -> None:
    _native.start(0)
    with pytest.raises(NativeError, match="already recording; stop it first") as info:
        _native.start(0)
    assert info.value.code == lib.OPPROF_E_STATE
    with pytest.raises(NativeError, match="still recording"):
        _native.drain()
    _native.stop()
    with pytest.raises(NativeError, match="no session is recording"):
        _native.stop()


def test_unknown_option_bits_are_refused() -> None:
    with pytest.raises(NativeError, match="unknown option bits 0x100"):
        _native.start(0x100)


# ---- names and stacks -------------------------------------------------------------


def test_names_intern_to_dense_stable_ids() -> None:
    before = len(_native.names())
    fresh = [f"name {i} ü" for i in range(5)]
    ids = [_native.intern(n) for n in fresh]
    assert ids == list(range(before, before + 5))
    assert [_native.intern(n) for n in fresh] == ids
    table = _native.names()
    assert [table[i] for i in ids] == fresh
    assert table[0] == "[memory]"
    assert lib.opprof_name_get(len(table) + 10) == _native.ffi.NULL


def test_names_intern_from_many_threads_agree() -> None:
    out: list[list[int]] = []
    words = [f"threaded name {i}" for i in range(200)]

    def worker() -> None:
        ids = []
        for w in words:
            p = _native.ffi.new("uint32_t *")
            _native.check(lib.opprof_name_intern(w.encode(), p))
            ids.append(int(p[0]))
        out.append(ids)

    run_threads(worker, [()] * 4)
    assert all(ids == out[0] for ids in out)
    assert len(set(out[0])) == len(words)


def test_with_stack_records_the_callers_file_and_line() -> None:
    name = _native.intern("stacked")

    def body() -> None:
        _native.scope_push(name)  # the recorded line
        _native.scope_pop()

    line = body.__code__.co_firstlineno + 1
    records = record(body, options=int(lib.OPPROF_OPT_WITH_STACK))
    (ev,) = records.events
    frames = records.stacks[ev["stack"]]
    assert frames[0] == f"{__file__}({line}): body"
    assert frames[1].startswith(f"{__file__}(") and frames[1].endswith(": record")
    assert len(frames) <= 8


def test_without_with_stack_no_stack_is_recorded() -> None:
    name = _native.intern("unstacked")

    def body() -> None:
        _native.scope_push(name)
        _native.scope_pop()

    (ev,) = record(body).events
    assert ev["stack"] == 0


# ---- nest_sorted --------------------------------------------------------------------


def nest_reference(thread: list[int], start: list[int], end: list[int]) -> list[int]:
    """Innermost container: the latest earlier row on the thread that contains the row.

    Contains: starts no later, ends no earlier, and the row does not start at its end.
    """
    out = []
    for i in range(len(start)):
        parent = -1
        for j in range(i - 1, -1, -1):
            if thread[j] != thread[i]:
                break
            if start[j] <= start[i] < end[j] and end[i] <= end[j]:
                parent = j
                break
        out.append(parent)
    return out


@pytest.mark.parametrize("seed", range(30))
def test_nest_sorted_matches_the_reference_on_random_intervals(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(0, 300))
    thread = rng.integers(1, 4, n).astype(np.uint64)
    start = rng.integers(0, 100, n).astype(np.int64)
    end = start + rng.integers(0, 40, n)
    order = np.lexsort((-end, start, thread))
    thread, start, end = thread[order], start[order], end[order]
    got = _native.nest_sorted(thread, start, end)
    assert got.tolist() == nest_reference(thread.tolist(), start.tolist(), end.tolist())


def test_nest_sorted_refuses_unsorted_rows() -> None:
    with pytest.raises(NativeError, match="row 1 is out of order"):
        _native.nest_sorted(np.array([1, 1]), np.array([5, 3]), np.array([6, 4]))
