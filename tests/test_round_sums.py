"""A round's figures straight from the C pass's sums, against the figures of its rows.

``Rounds.summarised`` builds each round's ``RoundFigures`` from ``op_sums`` (no row object
per op) wherever the C pass applies; baselines and every report come from those figures,
so they must be the ones ``RoundFigures.from_events`` gives on ``key_averages()``'s rows
of the same records, to the last bit.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from synthetic_records import Ev, records_from, without_last
from test_model_averages import forests
from test_model_native import drain_order

import pytest_opprof as opprof
from pytest_opprof import _native
from pytest_opprof.gate.summary import (
    OpSummary,
    RoundFigures,
    TestSummary,
    TimeStats,
    _op_summary,
    summarize_rounds,
)
from pytest_opprof.model import (
    FunctionEventAvg,
    averages,
    event_flops,
    key_averages,
    library_self_ns,
)
from pytest_opprof.model.averages import (
    _average_native,
    _grouped_sums,
    _orphans_as_roots,
    _round_sums,
    op_sums,
)
from pytest_opprof.native_layout.records import Records


def _both(records: Records, by_shape: bool) -> tuple[RoundFigures, RoundFigures] | None:
    """(from the sums, from the rows) of ``records``; None where the C pass refuses them."""
    sums = op_sums(records, by_input_shape=by_shape, with_flops=True)
    if sums is None:
        return None
    rows = key_averages(records, group_by_input_shape=by_shape, with_flops=True)
    common = {"wall_time_ns": 10**6, "cpu_time_ns": 9 * 10**5}
    fast = RoundFigures.from_sums(
        sums.keys, sums.sums, library_self_ns=sums.library_self_ns, **common
    )
    general = RoundFigures.from_events(
        rows, by_input_shape=by_shape, library_self_ns=library_self_ns(records), **common
    )
    return fast, general


def _same(records: Records, by_shape: bool) -> None:
    both = _both(records, by_shape)
    if both is None:  # refused exactly where the rows' C pass is (threads crossed)
        assert _average_native(_native, records, by_shape, 0, True, None) is None
        return
    fast, general = both
    assert fast == general
    assert sorted(fast.ops) == sorted(general.ops)
    assert summarize_rounds([fast]) == summarize_rounds([general])


@settings(max_examples=100, deadline=None)
@given(forests(), st.booleans(), st.booleans())
def test_sums_give_the_rows_figures(roots: list[Ev], by_shape: bool, cut: bool) -> None:
    records = drain_order(records_from(roots))
    if cut and len(records) > 1:
        # A drain cut at the event limit: the last commits are gone, their children keep
        # a parent id that names nothing (the pass makes them roots, as the tree does).
        records = without_last(records)
    _same(records, by_shape)


def _by_op(sums: averages.OpSums | None) -> dict[str, list[int]]:
    assert sums is not None
    return dict(zip(sums.keys, sums.sums, strict=True))


@pytest.mark.slow
@settings(max_examples=100, deadline=None)
@given(forests(), st.booleans(), st.booleans())
def test_the_one_call_pass_gives_the_general_pass_sums(
    roots: list[Ev], with_flops: bool, cut: bool
) -> None:
    # The round's one-call pass (by name; sums, library self time and shaped pairs in one
    # kernel call) against the rows' own C pass: the same groups, sums and self time.
    records = drain_order(records_from(roots))
    if cut and len(records) > 1:
        records = without_last(records)
    fast = _round_sums(_native, records, with_flops)
    general = _grouped_sums(_native, records, False, with_flops)
    if fast is None:  # crossed threads: op_sums takes the general pass
        assert op_sums(records, with_flops=with_flops) == general
        return
    assert general is not None
    assert _by_op(fast) == _by_op(general)
    assert len(fast.keys) == len(general.keys)
    assert fast.library_self_ns == general.library_self_ns == library_self_ns(records)


def test_a_real_round_takes_the_one_call_pass() -> None:
    a = np.ones((3, 4))
    with opprof.profile(capture=["numpy"]) as prof:
        for _ in range(2):
            np.add(a, a)
            with opprof.record_function("scope"):
                (a @ a.T).sum()
    records = prof.records()
    fast = _round_sums(_native, records, True)
    assert fast is not None
    assert _by_op(fast) == _by_op(_grouped_sums(_native, records, False, True))
    assert _by_op(fast)["numpy.matmul"][7] == 2 * 2 * 3 * 4 * 3
    assert "[memory]" in fast.keys  # memory events: their own group, named as the rows name it
    assert fast.library_self_ns > 0


def test_a_cut_drain_takes_the_one_call_pass_with_its_orphans_as_roots() -> None:
    # The event limit drops the last commits ("c", "f" and "a"): "b" and "d" name their
    # dropped parents "a" and "c".  The pass makes them roots where they wait,
    # without the copy of every event that rewriting their parent ids costs.
    roots = [
        Ev("e", 0, 5),
        Ev("a", 6, 40, [Ev("b", 7, 9), Ev("c", 10, 30, [Ev("d", 11, 12)]), Ev("f", 31, 33)]),
    ]
    records = drain_order(records_from(roots))
    cut = dataclasses.replace(records, events=records.events[:-3])
    assert [records.names[i] for i in cut.events["name"].tolist()] == ["e", "b", "d"]
    fast = _round_sums(_native, cut, True)
    assert fast is not None
    repaired = _orphans_as_roots(_native, cut.events)
    assert repaired is not None
    assert (repaired["parent"] == -1).all()
    again = _round_sums(_native, dataclasses.replace(cut, events=repaired), True)
    assert again is not None
    assert _by_op(fast) == _by_op(again)
    assert fast.library_self_ns == again.library_self_ns == library_self_ns(cut)


def test_a_parent_before_its_child_is_refused_not_taken_for_an_orphan() -> None:
    # A waiting child whose parent is in some row was passed over: no sums from the pass
    # (the numpy path takes such records).
    records = drain_order(records_from([Ev("a", 0, 10, [Ev("b", 2, 4)])]))
    swapped = dataclasses.replace(records, events=records.events[::-1].copy())
    assert _round_sums(_native, swapped, True) is None
    assert _grouped_sums(_native, swapped, False, True) is None


def test_records_the_pass_refuses_have_no_sums() -> None:
    roots = [Ev("forward", 0, 100, [Ev("numpy.add", 10, 20)])]
    records = records_from(roots, known_parents=False)  # torch's: parents by interval
    assert op_sums(records) is None


def test_no_records_no_ops() -> None:
    with opprof.profile(capture=["numpy"], profile_memory=False) as prof:
        pass
    sums = op_sums(prof.records(), with_flops=True)
    assert sums is not None
    assert (sums.keys, sums.sums, sums.library_self_ns) == ([], [], 0)


@pytest.mark.parametrize("by_shape", [False, True])
def test_a_real_round_gives_the_rows_figures(by_shape: bool) -> None:
    a, b = np.arange(3.0), np.arange(5.0)
    with opprof.profile(capture=["numpy"]) as prof:
        for _ in range(3):
            np.outer(a, b)
            np.einsum("i,j->ij", a, b)
            with opprof.record_function("scope"):
                np.ones((4, 4)) @ np.ones((4, 2))
                np.ones(7).sum()
    records = prof.records()
    assert len(records.shapes) > 1
    _same(records, by_shape)
    both = _both(records, by_shape)
    assert both is not None
    assert sum(f.self_flops for f in both[0].ops.values()) > 0


def _row(key: str, sums: list[int]) -> FunctionEventAvg:
    """The row ``key_averages()`` builds from a group's sums (``averages._avg``)."""
    row = FunctionEventAvg()
    row.key = key
    row.count = sums[0]
    row.cpu_time_total = sums[1] / 1000.0
    row.self_cpu_time_total_raw = row.self_cpu_time_total = sums[2] / 1000.0
    row.device_time_total = sums[3] / 1000.0
    row.self_device_time_total = sums[4] / 1000.0
    row.cpu_memory_usage = sums[5]
    row.self_cpu_memory_usage = sums[6]
    row.flops = sums[7]
    row.self_flops = sums[8]
    return row


def _agree(groups: list[list[int]]) -> None:
    keys = [f"numpy.op{i % 3}" for i in range(len(groups))]  # some keys twice: summed
    common = {"wall_time_ns": 1, "cpu_time_ns": 1}
    fast = RoundFigures.from_sums(keys, groups, **common)
    general = RoundFigures.from_events(
        [_row(k, g) for k, g in zip(keys, groups, strict=True)], **common
    )
    assert fast == general
    for key in fast.ops:  # the same fields, not only equal ones
        assert vars(fast.ops[key]).keys() == vars(general.ops[key]).keys()


def test_figures_past_float_precision_are_rounded_alike() -> None:
    # FLOPs near FLOPS_MAX and times past 2**53 ns go through a float in the rows' path:
    # the sums' path must land on the same integers.
    _agree([[3, 2**53 + 1, 2**53 + 3, 7, 5, 2**60 + 1, -(2**55) - 1, 2**63 - 1, 2**62 + 1]])
    _agree([[1, 2**50 - 1, 2**50, 2**50 + 1, -(2**50), 1 - 2**50, 0, 2**53 - 1, 2**53]])
    assert len(_native.GROUP_COLUMNS) == 9


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.lists(
            st.one_of(st.integers(-(2**52), 2**52), st.integers(-(2**63), 2**63 - 1)),
            min_size=9,
            max_size=9,
        ),
        min_size=1,
        max_size=4,
    )
)
def test_any_sums_give_the_rows_figures(groups: list[list[int]]) -> None:
    _agree(groups)


def test_op_summaries_filled_in_place_are_the_ones_init_makes() -> None:
    t = TimeStats.single(1500)
    values = ("numpy.add", 2, t, TimeStats.single(2500), 8, None, 6, t, t, {"count": (1, 2)}, 512)
    fast, made = _op_summary(*values), OpSummary(*values)
    assert fast == made
    assert vars(fast) == vars(made)
    assert list(vars(fast)) == [f.name for f in dataclasses.fields(OpSummary)]
    assert repr(fast) == repr(made)


def _flops(body: Callable[[], object]) -> dict[str, int]:
    with opprof.profile(capture=["numpy"], profile_memory=False) as prof:
        body()
    sums = op_sums(prof.records(), with_flops=True)
    assert sums is not None
    return {k: s[7] for k, s in zip(sums.keys, sums.sums, strict=True)}


def test_flops_known_by_their_shape_words_follow_the_shapes_not_the_ids() -> None:
    # Each drain numbers its shape entries from 1: the same id means other shapes in the
    # next drain, and the FLOPs must follow the shapes (and einsum's subscripts).
    a, b = np.ones((3, 4)), np.ones(5)
    for _ in range(2):  # the second time every pair is known already
        assert _flops(lambda: np.add(a, a)) == {"numpy.add": 12}
        assert _flops(lambda: np.add(b, b)) == {"numpy.add": 5}
        assert _flops(lambda: np.einsum("i,i->", b, b))["numpy.einsum"] == 10
        assert _flops(lambda: np.einsum("i,j->ij", b, b))["numpy.einsum"] == 25


def test_a_round_pairs_only_the_rows_of_ops_with_a_flop_formula() -> None:
    # Indexing rows (a scalar index is recorded by value: a shape entry each) and other
    # ops without a formula make no pair; the FLOPs are the general pass's, which pairs
    # every row.
    a = np.ones((3, 4))
    with opprof.profile(capture=["numpy"]) as prof:
        np.add(a, a)
        a.copy()
        for i in range(3):
            a[i]
        (a @ a.T).sum()
        np.einsum("ij,jk->ik", a, a.T)
    records = prof.records()
    names, ev = records.names, records.events
    memory = averages._memory_id(names)
    out = _native.model_round_sums(ev, memory_group=memory, m=max(len(names), memory + 1))
    assert out is not None
    formula = [
        g < len(names) and g != memory and event_flops.op_has_formula(names[g])
        for g in out.groups.tolist()
    ]
    pair, pair_row = _native.model_formula_pairs(ev, out.row_group, formula)
    paired = {names[n] for n in ev["name"][pair_row].tolist()}
    assert {"numpy.add", "numpy.matmul", "numpy.einsum"} <= paired
    assert not paired & {"numpy.ndarray.copy", "numpy.ndarray.__getitem__"}
    getitem = ev["name"] == names.index("numpy.ndarray.__getitem__")
    assert getitem.sum() == 3 and (pair[getitem] == -1).all()
    fast = _round_sums(_native, records, True)
    assert fast is not None
    assert _by_op(fast) == _by_op(_grouped_sums(_native, records, False, True))
    assert _by_op(fast)["numpy.matmul"][7] == 2 * 3 * 3 * 4


def test_formula_pairs_refuse_a_group_out_of_range() -> None:
    a = np.ones(3)
    with opprof.profile(capture=["numpy"]) as prof:
        np.add(a, a)
    ev = prof.records().events
    with pytest.raises(_native.NativeError, match="group"):
        _native.model_formula_pairs(ev, np.full(len(ev), 5, dtype=np.int64), [True])


def _summaries_of(keys: list[str], groups: list[list[int]]) -> tuple[TestSummary, TestSummary]:
    """(built natively from the sums, built in Python from the same round's op figures)."""
    common = {"wall_time_ns": 10**6, "cpu_time_ns": 9 * 10**5, "library_self_ns": 5 * 10**5}
    native = summarize_rounds([RoundFigures.from_sums(keys, groups, **common)])
    made = RoundFigures.from_sums(keys, groups, **common)
    python = summarize_rounds([dataclasses.replace(made, ops=dict(made.ops))])
    return native, python


def _alike(native: TestSummary, python: TestSummary) -> None:
    assert native == python
    assert list(native.ops) == list(python.ops)  # the same key order
    for key, op in native.ops.items():
        other = python.ops[key]
        assert type(op) is OpSummary
        assert list(vars(op)) == list(vars(other))
        assert vars(op) == vars(other)
        for name in ("self_cpu_time", "cpu_time", "self_device_time", "device_time"):
            stats, expected = getattr(op, name), getattr(other, name)
            assert type(stats) is type(expected)
            if stats is not None:
                assert vars(stats) == vars(expected)
                assert [type(v) for v in vars(stats).values()] == [
                    type(v) for v in vars(expected).values()
                ]
        # An op that called no other op shares one object, as its stored form relies on.
        assert (op.cpu_time is op.self_cpu_time) == (other.cpu_time is other.self_cpu_time)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["numpy.add", "numpy.sum", "[memory]", "scope", "aten::mm"]),
            st.lists(
                st.one_of(st.integers(0, 5), st.integers(-(2**51), 2**51), st.just(2**50)),
                min_size=9,
                max_size=9,
            ),
        ),
        max_size=5,
    )
)
def test_a_one_round_summary_built_natively_is_the_python_one(
    rows: list[tuple[str, list[int]]],
) -> None:
    # Keys that repeat, figures at or past 2**50 (the rows' float arithmetic) and device
    # times: the native builder declines what it cannot build exactly, and Python builds it.
    keys = [key for key, _ in rows]
    groups = [list(g) for _, g in rows]
    _alike(*_summaries_of(keys, groups))


def test_the_native_builder_builds_a_plain_round_and_declines_what_python_must_sum() -> None:
    keys = ["numpy.sum", "[memory]", "numpy.add"]
    groups = [[2, 900, 400, 0, 0, 64, 32, 10, 10], [3, 0, 0, 0, 0, 96, 96, 0, 0]]
    groups.append([1, 300, 300, 50, 40, 8, 8, 6, 6])
    built = _native.one_round_ops(keys, groups, "[memory]", 2**50, OpSummary, TimeStats)
    assert built is not None
    ops, op_count, flops, device_ns = built
    assert list(ops) == ["[memory]", "numpy.add", "numpy.sum"]
    assert (op_count, flops, device_ns) == (3, 16, 40)
    assert ops["numpy.add"].cpu_time is ops["numpy.add"].self_cpu_time
    assert ops["numpy.sum"].cpu_time.median_ns == 900
    assert ops["numpy.add"].device_time.samples_ns == (50,)
    _alike(*_summaries_of(keys, groups))
    # A repeated key (its rows are summed) and a figure past exact: Python's to build.
    assert (
        _native.one_round_ops(keys[:1] * 2, groups[:2], "[memory]", 2**50, OpSummary, TimeStats)
        is None
    )
    past = [[1, 2**50, 0, 0, 0, 0, 0, 0, 0]]
    assert _native.one_round_ops(["x"], past, "[memory]", 2**50, OpSummary, TimeStats) is None
    with pytest.raises(ValueError, match="one row per key"):
        _native.one_round_ops(keys, groups[:2], "[memory]", 2**50, OpSummary, TimeStats)


_single_ns = st.one_of(
    st.integers(0, 999), st.integers(0, 10**12), st.sampled_from([1235, 1245, 99950, 10**15 - 1])
)


@settings(max_examples=300, deadline=None)
@given(
    st.dictionaries(
        st.sampled_from(["numpy.add", "numpy.sum", "[memory]", "a b", "aten::mm"]),
        st.tuples(
            _single_ns,
            _single_ns | st.none() | st.just(-1),
            _single_ns | st.none(),
            _single_ns | st.none(),
        ),
        min_size=1,
    ),
    st.booleans(),
)
def test_stored_ops_round_as_each_op_does(
    specs: dict[str, tuple[int, int | None, int | None, int | None]], two_samples: bool
) -> None:
    # One-sample times (the native path), or one op with two samples (Python's): either
    # way the stored ops are what OpSummary.as_stored makes, op by op, in key order.
    ops = {}
    for key, (self_ns, total_ns, self_device_ns, device_ns) in reversed(specs.items()):
        self_cpu = TimeStats.single(self_ns)
        total = (
            self_cpu if total_ns == -1 else None if total_ns is None else TimeStats.single(total_ns)
        )
        ops[key] = _op_summary(
            key,
            3,
            self_cpu,
            total,
            8,
            16,
            5,
            None if self_device_ns is None else TimeStats.single(self_device_ns),
            None if device_ns is None else TimeStats.single(device_ns),
            {"count": (2, 3)},
            4096,
        )
    if two_samples:
        key = next(iter(ops))
        ops[key] = dataclasses.replace(ops[key], self_cpu_time=TimeStats.from_samples([5, 7]))
    native = _native.stored_ops(ops, OpSummary, TimeStats)
    expected = {key: op.as_stored() for key, op in sorted(ops.items())}
    if two_samples:
        assert native is None
        return
    assert native == expected and list(native) == list(expected)
    for key, op in native.items():
        assert list(vars(op)) == list(vars(expected[key]))
        assert op.ranges is ops[key].ranges
        assert (op.cpu_time is op.self_cpu_time) == (ops[key].cpu_time is ops[key].self_cpu_time)
