"""Event tree: parents from ids or from interval nesting, self/total metrics."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from synthetic_records import Ev, records_from

from pytest_opprof import _native
from pytest_opprof.model import build_events, build_tree
from pytest_opprof.native_layout.parents import PARENT_NONE
from pytest_opprof.native_layout.records import (
    EVENT_DTYPE,
    FLAG_EXCEPTION,
    KIND_MEMORY,
    KIND_SCOPE,
    Records,
)


def _sample() -> list[Ev]:
    add = Ev("numpy.add", 1_000, 3_000, alloc=800, free=200, device_ns=500)
    matmul = Ev("numpy.matmul", 4_000, 9_000, alloc=64, device_ns=2_000)
    scope = Ev("forward", 0, 10_000, kind=KIND_SCOPE, alloc=100, children=[add, matmul])
    return [scope, Ev("numpy.sum", 12_000, 12_500)]


@pytest.mark.parametrize("known_parents", [True, False])
def test_self_and_total_metrics(known_parents: bool) -> None:
    events = build_events(records_from(_sample(), known_parents=known_parents))
    forward, add, matmul, total = events
    assert [e.name for e in events] == ["forward", "numpy.add", "numpy.matmul", "numpy.sum"]
    assert forward.cpu_children == [add, matmul]
    assert add.cpu_parent is forward and total.cpu_parent is None
    assert forward.cpu_time_total == pytest.approx(10.0)
    assert forward.self_cpu_time_total == pytest.approx(10.0 - 2.0 - 5.0)
    assert add.self_cpu_time_total == add.cpu_time_total == pytest.approx(2.0)
    assert forward.self_cpu_memory_usage == 100
    assert add.self_cpu_memory_usage == add.cpu_memory_usage == 800 - 200
    assert forward.cpu_memory_usage == 100 + (800 - 200) + 64
    assert forward.self_device_time_total == 0.0
    assert forward.device_time_total == pytest.approx(0.5 + 2.0)
    assert matmul.self_device_time_total == pytest.approx(2.0)
    assert events.use_device == "cuda"
    assert forward.time_range.start == pytest.approx(0.0)
    assert matmul.time_range.elapsed_us() == pytest.approx(5.0)


def test_no_device_time_means_no_device() -> None:
    events = build_events(records_from([Ev("numpy.add", 0, 10)]))
    assert events.use_device is None
    assert events[0].device_time_total == 0.0


def test_unknown_parent_nests_inside_known_scope_on_same_thread() -> None:
    records = records_from(_sample())
    # A torch-like op without a native parent, inside the scope's interval.
    extra = np.zeros(1, dtype=EVENT_DTYPE)
    extra[0] = (9_200, 9_800, 999, -2, 0, 0, -1, 1, 0, 2, 0, 0, 0, 0, 0, -1)
    records.events = np.concatenate([records.events, extra])
    events = build_events(records)
    by_id = {e.id: e for e in events}
    assert by_id[999].cpu_parent is not None
    assert by_id[999].cpu_parent.name == "forward"
    assert by_id[999].cpu_parent.self_cpu_time_total == pytest.approx(10.0 - 2.0 - 5.0 - 0.6)


def test_missing_parent_id_makes_a_root() -> None:
    records = records_from([Ev("forward", 0, 100, children=[Ev("numpy.add", 10, 20)])])
    records.events = records.events[1:]  # the scope was dropped at capacity
    (add,) = build_events(records)
    assert add.cpu_parent is None


def test_parent_cycle_is_an_error() -> None:
    arr = np.zeros(2, dtype=EVENT_DTYPE)
    arr["id"] = [1, 2]
    arr["parent"] = [2, 1]
    with pytest.raises(ValueError, match="cycle"):
        build_tree(Records(events=arr, names=["a"]))


def test_memory_events_are_named_memory() -> None:
    records = records_from([Ev("alloc", 5, 5, kind=KIND_MEMORY, alloc=4096)])
    (mem,) = build_events(records)
    assert mem.name == "[memory]"
    assert mem.cpu_memory_usage == 4096
    assert mem.cpu_time_total == 0.0


def test_exception_flag_and_threads() -> None:
    a = Ev("numpy.linalg.solve", 0, 10, flags=FLAG_EXCEPTION)
    b = Ev("numpy.add", 2, 5, thread=7)
    events = build_events(records_from([a, b]))
    assert [e.is_exception for e in events] == [True, False]
    # Overlapping in time but on another thread: never a child.
    assert events[1].cpu_parent is None and events[1].thread == 7


def test_empty_records() -> None:
    assert len(build_tree(Records.empty())) == 0
    assert list(build_events(Records.empty())) == []


@st.composite
def forests(draw: st.DrawFn, max_depth: int = 3) -> list[Ev]:
    """Well-nested random trees on 1-2 threads: zero lengths, touching and equal bounds."""
    cursor = [0]
    count = [0]
    zero_before = [False]

    def node(depth: int, thread: int) -> Ev:
        count[0] += 1
        # Right after a zero-length event, an event starting at the same time would
        # contain it: intervals alone cannot tell the two apart.
        start = cursor[0] = cursor[0] + draw(st.integers(1 if zero_before[0] else 0, 3))
        zero_before[0] = False
        children = []
        if depth < max_depth and count[0] < 40:
            for _ in range(draw(st.integers(0, 3))):
                children.append(node(depth + 1, thread))
        tail = draw(st.integers(0, 3))
        if children and children[-1].start == children[-1].end:
            tail = max(tail, 1)  # a zero-length event at the parent's end is not inside it
        end = cursor[0] = max(cursor[0], start) + tail
        zero_before[0] = start == end
        return Ev(
            draw(st.sampled_from(["numpy.add", "numpy.matmul", "fwd", "numpy.sum"])),
            start,
            end,
            children,
            thread=thread,
            alloc=draw(st.integers(0, 1000)),
            free=draw(st.integers(0, 1000)),
        )

    roots = []
    for _ in range(draw(st.integers(1, 4))):
        thread = draw(st.sampled_from([1, 2]))
        roots.append(node(0, thread))
    return roots


@settings(max_examples=80, deadline=None)
@given(forests())
def test_interval_nesting_matches_native_parents(roots: list[Ev]) -> None:
    known = build_tree(records_from(roots, known_parents=True))
    nested = build_tree(records_from(roots, known_parents=False))
    assert np.array_equal(known.events["id"], nested.events["id"])
    assert np.array_equal(known.parent, nested.parent)
    assert np.array_equal(known.mem_total_bytes, nested.mem_total_bytes)


@settings(max_examples=80, deadline=None)
@given(forests())
def test_self_times_sum_to_root_totals(roots: list[Ev]) -> None:
    tree = build_tree(records_from(roots))
    roots_mask = tree.parent < 0
    assert tree.cpu_self_ns.sum() == tree.cpu_total_ns[roots_mask].sum()
    assert tree.mem_self_bytes.sum() == tree.mem_total_bytes[roots_mask].sum()
    assert (tree.cpu_self_ns >= 0).all()
    assert (tree.parent < np.arange(len(tree))).all()
    assert np.array_equal(tree.depth, tree.events["depth"].astype(np.int64))


def _brute_force_parent(start: list[int], end: list[int], thread: list[int]) -> list[int]:
    """Nearest earlier event on the thread that contains [start, end) (the sweep's rule)."""
    out = []
    for i in range(len(start)):
        parent = -1
        for j in range(i - 1, -1, -1):
            if thread[j] == thread[i] and start[i] < end[j] and end[i] <= end[j]:
                parent = j
                break
        out.append(parent)
    return out


def _nest_sorted_py(thread: np.ndarray, start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Reference for ``_native.nest_sorted``: torch's ``_populate_cpu_children`` stack sweep."""
    out = [PARENT_NONE] * len(start)
    stack: list[int] = []
    ends = end.tolist()
    prev_thread = None
    for i, (t, s, e) in enumerate(zip(thread.tolist(), start.tolist(), ends, strict=True)):
        if t != prev_thread:
            stack.clear()
            prev_thread = t
        while stack:
            top_end = ends[stack[-1]]
            if s >= top_end or e > top_end:
                stack.pop()
            else:
                out[i] = stack[-1]
                break
        stack.append(i)
    return np.asarray(out, dtype=np.int64)


@settings(max_examples=150, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(0, 2), st.integers(0, 30), st.integers(0, 10)),
        min_size=0,
        max_size=40,
    )
)
def test_nest_sweep_on_odd_intervals(items: list[tuple[int, int, int]]) -> None:
    items.sort(key=lambda x: (x[0], x[1], -(x[1] + x[2])))
    thread = [t for t, _, _ in items]
    start = [s for _, s, _ in items]
    end = [s + d for _, s, d in items]
    got = _native.nest_sorted(
        np.array(thread, dtype=np.uint64),
        np.array(start, dtype=np.int64),
        np.array(end, dtype=np.int64),
    )
    assert got.tolist() == _brute_force_parent(start, end, thread)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(0, 20), st.integers(-3, 10), st.sampled_from([1, 2])),
        max_size=30,
    )
)
def test_partial_overlaps_never_crash(items: list[tuple[int, int, int]]) -> None:
    arr = np.zeros(len(items), dtype=EVENT_DTYPE)
    for i, (s, d, t) in enumerate(items):
        arr[i] = (s, s + d, i + 1, -2, 0, 0, -1, t, 0, 2, 0, 0, 0, 0, 0, -1)
    events = build_events(Records(events=arr, names=["op"]))
    assert len(events) == len(items)
    for e in events:
        assert e.cpu_time_total >= 0
        if e.cpu_parent is not None:
            p = e.cpu_parent.time_range
            assert p.start <= e.time_range.start and e.time_range.end <= p.end
    assert sum(e.self_cpu_time_total for e in events) == pytest.approx(
        sum(e.cpu_time_total for e in events if e.cpu_parent is None)
    )


@settings(max_examples=100, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(0, 2), st.integers(0, 30), st.integers(0, 10)),
        max_size=40,
    )
)
def test_native_sweep_agrees_with_python(items: list[tuple[int, int, int]]) -> None:
    items.sort(key=lambda x: (x[0], x[1], -(x[1] + x[2])))
    thread = np.array([t for t, _, _ in items], dtype=np.uint64)
    start = np.array([s for _, s, _ in items], dtype=np.int64)
    end = start + np.array([d for _, _, d in items], dtype=np.int64)
    assert (
        _native.nest_sorted(thread, start, end).tolist()
        == _nest_sorted_py(thread, start, end).tolist()
    )
