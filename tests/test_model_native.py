"""The C key_averages path (native/model_kernels.c) against the numpy path, and FLOP totals."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from synthetic_records import Ev, records_from, without_last
from test_model_averages import FIELDS, forests

import pytest_opprof as opprof
from pytest_opprof import _native
from pytest_opprof.gate.summary import RoundFigures, summarize_rounds
from pytest_opprof.model import build_events, key_averages
from pytest_opprof.model.averages import _average_native, average_records
from pytest_opprof.model.events import FunctionEventAvg
from pytest_opprof.native_layout.records import KIND_MEMORY, Records


def drain_order(records: Records) -> Records:
    """The same events in the order the native drain gives: per thread, by end (children first)."""
    ev = records.events
    order = np.lexsort((-ev["depth"].astype(np.int64), ev["end_ns"], ev["thread"]))
    return Records(
        events=ev[order],
        names=records.names,
        shapes=records.shapes,
        dtypes=records.dtypes,
        stacks=records.stacks,
    )


def _same(got: list[FunctionEventAvg], want: list[FunctionEventAvg]) -> None:
    assert [g.key for g in got] == [w.key for w in want]
    for g, w in zip(got, want, strict=True):
        for name in (*FIELDS, "self_flops", "use_device"):
            expected = getattr(w, name)
            assert getattr(g, name) == (
                pytest.approx(expected) if isinstance(expected, float) else expected
            ), name


def _native_vs_numpy(records: Records, by_shape: bool, stack_n: int) -> None:
    kwargs = {"group_by_input_shape": by_shape, "group_by_stack_n": stack_n, "with_flops": True}
    native, device = average_records(records, **kwargs)  # type: ignore[arg-type]
    numpy_rows, numpy_device = average_records(records, native=False, **kwargs)  # type: ignore[arg-type]
    assert device == numpy_device
    _same(native, numpy_rows)


@pytest.mark.slow
@settings(max_examples=100, deadline=None)
@given(forests(), st.booleans(), st.integers(0, 2))
def test_one_pass_matches_numpy(roots: list[Ev], by_shape: bool, stack_n: int) -> None:
    records = drain_order(records_from(roots))
    # The one-pass kernel takes these records (it refuses what it cannot do).
    assert (
        _native.model_key_sums(
            records.events,
            group=None,
            memory_group=len(records.names),
            m=len(records.names) + 1,
        )
        is not None
    )
    _native_vs_numpy(records, by_shape, stack_n)


@settings(max_examples=50, deadline=None)
@given(forests(), st.booleans())
def test_other_orders_and_dropped_parents_match_numpy(roots: list[Ev], drop: bool) -> None:
    records = records_from(roots)  # parents before children: not a drain order
    assert (
        _native.model_key_sums(
            records.events,
            group=None,
            memory_group=len(records.names),
            m=len(records.names) + 1,
        )
        is None
        or not (records.events["parent"] >= 0).any()
    )
    _native_vs_numpy(records, False, 0)
    drained = drain_order(records)
    if drop and len(drained) > 1:
        # Capacity drops the last commits: their children keep a parent id that names nothing.
        drained = without_last(drained)
    _native_vs_numpy(drained, False, 1)


def test_a_drain_cut_at_the_event_limit_stays_on_the_one_pass() -> None:
    # The limit drops the last commits: "a" is gone, "b" names it as parent.
    records = drain_order(records_from([Ev("a", 0, 10, [Ev("b", 2, 4)]), Ev("c", 20, 30)]))
    cut = records.events[records.events["end_ns"] != 10]
    records = Records(events=cut, names=records.names, shapes=records.shapes)
    assert records.events["parent"].max() >= 0  # "b" still names its dropped parent
    native = _average_native(_native, records, False, 0, True, None)
    assert native is not None
    rows, _ = native
    assert [(r.key, r.count, r.is_top_level) for r in rows] == [("b", 1, True), ("c", 1, True)]
    _native_vs_numpy(records, False, 0)


def test_unknown_parents_are_nested_by_interval_on_both_paths() -> None:
    roots = [Ev("forward", 0, 100, [Ev("numpy.add", 10, 20), Ev("numpy.add", 30, 50)])]
    records = records_from(roots, known_parents=False)
    native, _ = average_records(records)
    by_key = {a.key: a for a in native}
    assert by_key["forward"].self_cpu_time_total == pytest.approx((100 - 30) / 1000)
    _native_vs_numpy(records, False, 0)


def test_sparse_ids_fall_back_to_sorting() -> None:
    records = drain_order(records_from([Ev("a", 0, 10, [Ev("b", 2, 4)])]))
    records.events["id"] *= 10**9  # too sparse for the dense per-thread table
    records.events["parent"] = np.where(
        records.events["parent"] >= 0, records.events["parent"] * 10**9, -1
    )
    assert _native.model_parent_rows(records.events) is None
    _native_vs_numpy(records, False, 0)


def _outer_session() -> Records:
    # numpy.outer runs numpy.multiply inside: both carry 3 * 4 FLOPs.
    roots = [
        Ev(
            "forward",
            0,
            100,
            [
                Ev(
                    "numpy.outer",
                    10,
                    60,
                    [Ev("numpy.multiply", 20, 50, shape=[[3, 1], [1, 4]])],
                    shape=[[3], [4]],
                )
            ],
        )
    ]
    return records_from(roots)


@pytest.mark.parametrize("drained", [False, True])
def test_innermost_flops_win_in_totals(drained: bool) -> None:
    records = drain_order(_outer_session()) if drained else _outer_session()
    rows = {a.key: a for a in key_averages(records, with_flops=True)}
    assert (rows["numpy.outer"].flops, rows["numpy.outer"].self_flops) == (12, 0)
    assert (rows["numpy.multiply"].flops, rows["numpy.multiply"].self_flops) == (12, 12)
    assert (rows["forward"].flops, rows["forward"].self_flops) == (0, 0)
    assert key_averages(records, with_flops=True).total_average().flops == 12
    assert build_events(records, with_flops=True).total_average().flops == 12


def test_outer_counts_once_in_a_real_profile_and_test_summary() -> None:
    a, b = np.arange(3.0), np.arange(5.0)
    with opprof.profile(capture=["numpy"], profile_memory=False) as prof:
        np.outer(a, b)
    rows = prof.key_averages()
    by_key = {r.key: r for r in rows}
    assert by_key["numpy.outer"].flops == len(a) * len(b)
    assert rows.total_average().flops == len(a) * len(b)
    summary = summarize_rounds(
        [RoundFigures.from_events(rows, wall_time_ns=10**6, cpu_time_ns=10**6)]
    )
    assert summary.flops == len(a) * len(b)


def test_einsum_flops_show_in_key_averages_and_table() -> None:
    a, b = np.ones((5, 6)), np.ones((6, 7))
    with opprof.profile(capture=["numpy"], profile_memory=False) as prof:
        np.einsum("ij,jk->ik", a, b)
    rows = prof.key_averages()
    (einsum,) = [r for r in rows if r.key == "numpy.einsum"]
    assert einsum.flops == 2 * 5 * 6 * 7
    line = next(ln for ln in rows.table().splitlines() if "numpy.einsum" in ln)
    assert "--" not in line.split()[-1]  # the FLOPs column is filled


def test_pairs_are_dense_in_first_seen_order() -> None:
    roots = [
        Ev("a", 0, 1, shape=[[1]]),
        Ev("b", 2, 3, shape=[[1]]),
        Ev("a", 4, 5, shape=[[1]]),
        Ev("a", 6, 7, shape=[[2]]),
        Ev("[memory]", 8, 8, kind=KIND_MEMORY),
    ]
    pair, pair_row = _native.model_pairs(records_from(roots).events)
    assert pair.tolist() == [0, 1, 0, 2, -1]
    assert pair_row.tolist() == [0, 1, 3]


def test_pairs_grow_past_the_first_table() -> None:
    roots = [Ev(f"op{i % 7}", i, i, shape=[[i % 300]]) for i in range(3000)]
    ev = records_from(roots).events
    pair, pair_row = _native.model_pairs(ev)
    keys = list(zip(ev["name"].tolist(), ev["shape"].tolist(), strict=True))
    first_seen = list(dict.fromkeys(keys))
    assert len(pair_row) == len(first_seen) == len(set(keys))
    assert [first_seen[k] for k in pair.tolist()] == keys
    assert [keys[r] for r in pair_row.tolist()] == first_seen


def test_many_shapes_stay_on_the_native_path() -> None:
    # ~500 interned numpy names x 400 shapes: a dense (name, shape) table would be
    # 200,000 cells for 400 events; the pair ids are per pair that occurs.
    arrays = [np.ones(n) for n in range(1, 401)]
    with opprof.profile(capture=["numpy"], profile_memory=False) as prof:
        for a in arrays:
            np.add(a, a)
    records = prof.records()
    assert len(records.names) * len(records.shapes) > 4 * len(records) + (1 << 16)
    native = _average_native(_native, records, False, 0, True, None)
    assert native is not None
    rows = {r.key: r for r in native[0]}
    assert rows["numpy.add"].flops == sum(range(1, 401))
    _native_vs_numpy(records, False, 0)
    _native_vs_numpy(records, True, 0)


@settings(max_examples=50, deadline=None)
@given(forests(), st.booleans(), st.booleans())
def test_overhead_corrections_match_numpy(roots: list[Ev], by_shape: bool, drained: bool) -> None:
    from pytest_opprof.capture.overhead import Overhead
    from pytest_opprof.native_layout.records import KIND_NUMPY, KIND_SCOPE

    records = drain_order(records_from(roots)) if drained else records_from(roots)
    overhead = Overhead(
        inside_ns={KIND_SCOPE: 3.0, KIND_NUMPY: 2.0, KIND_MEMORY: 50.0},
        outside_ns={KIND_SCOPE: 5.0, KIND_NUMPY: 7.0, KIND_MEMORY: 50.0},
    )
    kwargs = {"group_by_input_shape": by_shape, "with_flops": True, "overhead": overhead}
    native, _ = average_records(records, **kwargs)  # type: ignore[arg-type]
    numpy_rows, _ = average_records(records, native=False, **kwargs)  # type: ignore[arg-type]
    _same(native, numpy_rows)
    assert any(r.self_cpu_time_total < r.self_cpu_time_total_raw for r in native) or all(
        r.self_cpu_time_total_raw == 0 for r in native
    )
