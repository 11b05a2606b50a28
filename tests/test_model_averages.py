"""key_averages: the vectorised group-by against the object path, FLOPs, grouping keys."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from synthetic_records import Ev, records_from

from pytest_opprof.model import FunctionEventAvg, build_events, key_averages
from pytest_opprof.native_layout.records import KIND_MEMORY, KIND_SCOPE, Records

FIELDS = (
    "key",
    "count",
    "cpu_time_total",
    "self_cpu_time_total",
    "device_time_total",
    "self_device_time_total",
    "cpu_memory_usage",
    "self_cpu_memory_usage",
    "flops",
    "input_shapes",
    "stack",
    "is_top_level",
)
SHAPES = [[[2, 3], [3, 4]], [[8, 8], [8, 8]], [[5], [5]]]
STACKS = [["a.py(1): f", "t.py(9): test"], ["a.py(2): g", "t.py(9): test"], ["t.py(12): test"]]


def _same(vectorised: list[FunctionEventAvg], objects: list[FunctionEventAvg]) -> None:
    assert len(vectorised) == len(objects)
    for v, o in zip(vectorised, objects, strict=True):
        for name in FIELDS:
            want = getattr(o, name)
            got = getattr(v, name)
            assert got == (pytest.approx(want) if isinstance(want, float) else want), name


@st.composite
def forests(draw: st.DrawFn) -> list[Ev]:
    cursor = [0]

    def node(depth: int) -> Ev:
        start = cursor[0] = cursor[0] + draw(st.integers(1, 5))
        children = [node(depth + 1) for _ in range(draw(st.integers(0, 3 if depth < 3 else 0)))]
        end = cursor[0] = cursor[0] + draw(st.integers(0, 1000))
        return Ev(
            draw(st.sampled_from(["numpy.add", "numpy.matmul", "forward", "numpy.sum"])),
            start,
            end,
            children,
            thread=draw(st.sampled_from([1, 2])),
            alloc=draw(st.integers(0, 10**6)),
            free=draw(st.integers(0, 10**6)),
            device_ns=draw(st.sampled_from([-1, 0, 250, 10**6])),
            shape=draw(st.sampled_from([None, *SHAPES])),
            stack=draw(st.sampled_from([None, *STACKS])),
        )

    return [node(0) for _ in range(draw(st.integers(1, 5)))]


@settings(max_examples=100, deadline=None)
@given(forests(), st.booleans(), st.integers(0, 3))
def test_vectorised_matches_objects(roots: list[Ev], by_shape: bool, stack_n: int) -> None:
    records = records_from(roots)
    vectorised = key_averages(
        records, group_by_input_shape=by_shape, group_by_stack_n=stack_n, with_flops=True
    )
    objects = build_events(records, with_flops=True).key_averages(
        group_by_input_shape=by_shape, group_by_stack_n=stack_n
    )
    _same(vectorised, objects)
    assert vectorised.use_device == objects.use_device


@settings(max_examples=50, deadline=None)
@given(forests())
def test_total_average_is_sum_of_groups(roots: list[Ev]) -> None:
    events = build_events(records_from(roots))
    total = events.total_average()
    groups = key_averages(records_from(roots))
    assert total.key == "Total"
    assert total.count == len(events) == sum(g.count for g in groups)
    assert total.self_cpu_time_total == pytest.approx(sum(g.self_cpu_time_total for g in groups))
    assert total.self_cpu_time_total == pytest.approx(events.self_cpu_time_total)
    roots_total = sum(e.cpu_time_total for e in events if e.cpu_parent is None)
    assert groups.self_cpu_time_total == pytest.approx(roots_total)


def test_group_by_input_shape_splits_by_shape() -> None:
    a, b = [[2, 3], [3, 4]], [[4, 5], [5, 6]]
    roots = [
        Ev("numpy.matmul", 0, 10, shape=a),
        Ev("numpy.matmul", 20, 40, shape=b),
        Ev("numpy.matmul", 50, 80, shape=a),
    ]
    records = records_from(roots)
    (merged,) = key_averages(records, with_flops=True)
    assert merged.count == 3 and merged.input_shapes == []
    by_shape = key_averages(records, group_by_input_shape=True, with_flops=True)
    assert [(g.input_shapes, g.count) for g in by_shape] == [(a, 2), (b, 1)]
    assert by_shape[0].cpu_time_total == pytest.approx((10 + 30) / 1000)
    # matmul (m, k) @ (k, n) costs 2*m*k*n per call.
    assert by_shape[0].flops == 2 * (2 * 2 * 3 * 4)
    assert by_shape[1].flops == 2 * 4 * 5 * 6
    assert merged.flops == by_shape[0].flops + by_shape[1].flops


def test_shapes_equal_but_dtypes_differ_group_together() -> None:
    records = records_from(
        [Ev("numpy.add", 0, 10, shape=[[3]]), Ev("numpy.add", 20, 30, shape=[[3]])]
    )
    records.shapes.append([[3]])
    records.dtypes.append(["float32"])
    records.events["shape"][1] = len(records.shapes) - 1
    (group,) = key_averages(records, group_by_input_shape=True)
    assert group.count == 2


def test_group_by_stack_n_uses_first_frames() -> None:
    roots = [Ev("numpy.add", i * 10, i * 10 + 5, stack=STACKS[i]) for i in range(3)]
    records = records_from(roots)
    one = key_averages(records, group_by_stack_n=1)
    assert [g.stack for g in one] == [[s[0]] for s in STACKS]
    assert len(key_averages(records)) == 1
    assert key_averages(records)[0].stack == []


def test_memory_events_and_flags() -> None:
    roots = [
        Ev("forward", 0, 100, kind=KIND_SCOPE, children=[Ev("numpy.add", 10, 20, alloc=4096)]),
        Ev("x", 150, 150, kind=KIND_MEMORY, alloc=100, free=30),
    ]
    groups = key_averages(records_from(roots), profile_memory=True)
    assert groups.profile_memory and not groups.with_flops
    by_key = {g.key: g for g in groups}
    assert by_key["[memory]"].cpu_memory_usage == 70
    assert by_key["forward"].cpu_memory_usage == 4096
    assert by_key["forward"].self_cpu_memory_usage == 0
    assert by_key["forward"].is_top_level and not by_key["numpy.add"].is_top_level


def test_averages_per_call() -> None:
    records = records_from([Ev("numpy.add", 0, 3000), Ev("numpy.add", 5000, 6000, device_ns=800)])
    (g,) = key_averages(records)
    assert g.cpu_time == pytest.approx(g.cpu_time_total / 2) == pytest.approx(2.0)
    assert g.device_time == pytest.approx(0.4)


def test_add_rejects_other_key() -> None:
    a, b = build_events(records_from([Ev("numpy.add", 0, 1), Ev("numpy.sum", 2, 3)]))
    avg = FunctionEventAvg().add(a)
    with pytest.raises(ValueError, match=r"numpy\.sum"):
        avg.add(b)
    avg += a
    assert avg.count == 2


def test_without_flops_counts_zero() -> None:
    records = records_from([Ev("numpy.matmul", 0, 10, shape=SHAPES[0])])
    assert key_averages(records)[0].flops == 0
    assert key_averages(records, with_flops=True)[0].flops > 0


def test_empty() -> None:
    assert list(key_averages(Records.empty())) == []
