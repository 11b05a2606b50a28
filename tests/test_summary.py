"""Summaries over rounds: statistics, deterministic figures, JSON, and real profiles."""

from __future__ import annotations

import dataclasses
import random
import statistics
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from baseline_helpers import Mem, Row, summary_of
from hypothesis import given
from hypothesis import strategies as st

import pytest_opprof as opprof
from pytest_opprof.gate.jsonio import Fields
from pytest_opprof.gate.machine import machine_info
from pytest_opprof.gate.store import BaselineEntry, baseline_path, load, update
from pytest_opprof.gate.summary import (
    MemoryFigures,
    OpFigures,
    RoundFigures,
    TestSummary,
    TimeStats,
    _one_round_op,
    _summarize_many,
    _summarize_one,
    _summarize_op,
    summarize_rounds,
)
from pytest_opprof.gate.verdict import compare


def test_time_stats() -> None:
    stats = TimeStats.from_samples([10, 20, 30, 40, 1000])
    assert (stats.median_ns, stats.min_ns, stats.max_ns, stats.mean_ns) == (30, 10, 1000, 220)
    assert stats.mad_ns == 10  # |x - 30| = 20, 10, 0, 10, 970 -> median 10
    assert stats.stdev_ns == 436  # sample standard deviation
    assert TimeStats.from_samples([5]).stdev_ns == 0
    with pytest.raises(ValueError):
        TimeStats.from_samples([])


def test_time_stats_stdev_is_the_statistics_modules() -> None:
    # Summed exactly in ints, rounded as statistics.stdev's correctly rounded value is.
    rng = random.Random(7)
    for _ in range(20_000):
        scale = 10 ** rng.randint(0, 11)
        samples = [rng.randint(0, scale) for _ in range(rng.randint(2, 12))]
        assert TimeStats.from_samples(samples).stdev_ns == round(statistics.stdev(samples))


def test_rounds_give_per_round_totals_and_low_medians() -> None:
    first = [Row("numpy.add", 100, self_cpu_time_total=900.0, flops=100)]  # cold round
    warm = [
        Row("numpy.add", 10, self_cpu_time_total=90.0, flops=10),
        Row("numpy.add", 2, self_cpu_time_total=10.0, flops=2),
    ]  # same key twice: summed
    summary = summary_of(
        [(1000.0, first), (200.0, warm), (200.0, warm)],
        memory=Mem(peak_bytes=64, allocated_bytes=128, allocations=2),
    )
    op = summary.ops["numpy.add"]
    assert op.count == 12 and op.flops == 12 and summary.flops == 12 and summary.op_count == 12
    assert op.self_cpu_time.samples_ns == (900_000, 100_000, 100_000)
    assert op.self_cpu_time.median_ns == 100_000
    assert summary.wall_time.median_ns == 200_000
    assert summary.op_time_share == pytest.approx(0.5)
    assert summary.memory is not None and summary.memory.allocated_bytes == 128
    assert op.device_time is None


def test_op_missing_from_a_round_counts_as_zero_there() -> None:
    summary = summary_of([(100.0, [Row("a", 1, self_cpu_time_total=50.0)]), (100.0, [])])
    assert summary.ops["a"].self_cpu_time.samples_ns == (50_000, 0)
    assert summary.ops["a"].count == 0  # low median of (1, 0)


def test_device_time_kept_when_measured() -> None:
    summary = summary_of(
        [(100.0, [Row("aten::mm", 1, device_time_total=30.0, self_device_time_total=30.0)])]
    )
    device = summary.ops["aten::mm"].self_device_time
    assert device is not None and device.median_ns == 30_000
    assert "self_device_time" in summary.to_json()["ops"]["aten::mm"]  # type: ignore[index]


def test_by_input_shape_splits_keys() -> None:
    rows = [Row("numpy.add", 1), Row("numpy.add", 1)]
    rows[0].input_shapes = [[2], [2]]  # type: ignore[attr-defined]
    rows[1].input_shapes = [[3], [3]]  # type: ignore[attr-defined]
    figures = RoundFigures.from_events(rows, wall_time_ns=1, cpu_time_ns=1, by_input_shape=True)
    assert sorted(figures.ops) == ["numpy.add [[2], [2]]", "numpy.add [[3], [3]]"]
    merged = RoundFigures.from_events(rows, wall_time_ns=1, cpu_time_ns=1)
    assert merged.ops["numpy.add"].count == 2


def test_rows_without_a_key_are_refused() -> None:
    with pytest.raises(TypeError, match="key"):
        RoundFigures.from_events([object()], wall_time_ns=1, cpu_time_ns=1)
    with pytest.raises(ValueError):
        summarize_rounds([])


_rows = st.lists(
    st.builds(
        Row,
        key=st.sampled_from(["numpy.add", "numpy.matmul", "fwd", "a/b..c", "[memory]"]),
        count=st.integers(0, 10**6),
        self_cpu_time_total=st.floats(0, 1e7),
        cpu_time_total=st.floats(0, 1e7),
        self_cpu_memory_usage=st.integers(-(10**12), 10**12),
        flops=st.integers(0, 10**15),
        device_time_total=st.floats(0, 1e4),
    ),
    max_size=5,
)


@given(st.lists(st.tuples(st.floats(0.001, 1e7), _rows), min_size=1, max_size=6))
def test_json_roundtrip_is_stable(rounds: list[tuple[float, list[Row]]]) -> None:
    summary = summary_of(rounds)
    data = summary.to_json()
    back = TestSummary.from_json(Fields(data))
    assert back.to_json() == data
    assert back.flops == summary.flops and back.op_count == summary.op_count
    for key, op in summary.ops.items():
        assert (back.ops[key].count, back.ops[key].flops) == (op.count, op.flops)
        assert back.ops[key].self_memory_bytes == op.self_memory_bytes


@given(st.lists(st.tuples(st.floats(0.001, 1e7), _rows), min_size=1, max_size=6))
def test_as_stored_is_what_the_json_reads_back_as(rounds: list[tuple[float, list[Row]]]) -> None:
    summary = summary_of(rounds)
    assert summary.as_stored() == TestSummary.from_json(Fields(summary.to_json()))
    assert summary.as_stored().as_stored() == summary.as_stored()


_figures = st.builds(
    OpFigures,
    count=st.integers(0, 10**6),
    self_cpu_ns=st.integers(0, 10**10),
    cpu_ns=st.integers(0, 10**10) | st.just(-1),
    self_memory_bytes=st.integers(-(10**12), 10**12),
    memory_bytes=st.integers(-(10**12), 10**12),
    flops=st.integers(0, 10**15),
    self_device_ns=st.integers(0, 10**6) | st.just(0),
    device_ns=st.integers(0, 10**6) | st.just(0),
)


@given(_figures)
def test_one_round_is_summarised_as_the_general_path_would(f: OpFigures) -> None:
    # -1 stands for "the op called nothing": its total time is its self time, the
    # common case, where both times are one object.
    f = replace(f, cpu_ns=f.self_cpu_ns) if f.cpu_ns < 0 else f
    fast, general = _one_round_op("numpy.add", f), _summarize_op("numpy.add", [f])
    assert fast == general and fast.to_json() == general.to_json()
    assert fast.as_stored() == general.as_stored()
    assert fast.as_stored() == type(fast).from_json("numpy.add", Fields(fast.to_json()), 1)
    assert (fast.cpu_time is fast.self_cpu_time) == (f.cpu_ns == f.self_cpu_ns)


_opt_ns = st.none() | st.integers(0, 10**10)
_rounds = st.builds(
    RoundFigures,
    wall_time_ns=st.integers(0, 10**10),
    cpu_time_ns=st.integers(0, 10**10),
    ops=st.dictionaries(
        st.sampled_from(["numpy.add", "[memory]", "fwd", "a b"]),
        _figures.map(lambda f: replace(f, cpu_ns=f.self_cpu_ns) if f.cpu_ns < 0 else f),
    ),
    memory=st.none()
    | st.builds(
        MemoryFigures,
        st.integers(0, 10**9),
        st.integers(0, 10**9),
        st.integers(0, 10**6),
        st.integers(-(10**9), 10**9),
    ),
    device_memory_bytes=st.none() | st.integers(0, 10**9),
    speed_ref_ns=_opt_ns,
    native_ref_ns=_opt_ns,
    dropped_events=st.integers(0, 10),
    wait_ns=_opt_ns,
    library_self_ns=_opt_ns,
)


@given(_rounds)
def test_one_round_summary_is_the_general_one(r: RoundFigures) -> None:
    fast, general = _summarize_one(r), _summarize_many([r])
    assert fast == general and fast.to_json() == general.to_json()
    assert summarize_rounds([r]) == fast
    stored = fast.as_stored()
    assert stored == general.as_stored() == TestSummary.from_json(Fields(fast.to_json()))
    assert list(vars(stored)) == [f.name for f in dataclasses.fields(TestSummary)]


def test_as_stored_covers_every_optional_figure() -> None:
    stats = TimeStats.from_samples([123_456, 98_765])
    summary = replace(
        summary_of(  # two rounds: a time has one sample per round
            [(123_456.7, [Row(key="numpy.add", count=3, self_cpu_time_total=12.345)])] * 2
        ),
        device_time=stats,
        speed_ref=stats,
        native_ref=stats,
        wait_time=stats,
        device_memory_bytes=77,
        dropped_events=4,
        op_time_share=0.123456,
    )
    stored = summary.as_stored()
    assert stored == TestSummary.from_json(Fields(summary.to_json()))
    assert stored.speed_ref is not None and stored.speed_ref.median_ns == 111_000
    assert stored.op_time_share == 0.123


def _measure(work: int, rounds: int = 3) -> TestSummary:
    a = np.ones((64, 64))
    figures = []
    for _ in range(rounds):
        cpu0 = time.process_time_ns()
        with opprof.profile() as prof:
            with opprof.record_function("step"):
                for _ in range(work):
                    a = (a @ a) * 0.001
        cpu = time.process_time_ns() - cpu0
        figures.append(
            RoundFigures.from_events(
                prof.key_averages(),
                wall_time_ns=prof.wall_time_ns,
                cpu_time_ns=cpu,
                memory=prof.memory,
            )
        )
    return summarize_rounds(figures)


def test_real_profiles_store_and_judge(tmp_path: Path) -> None:
    summary = _measure(work=2)
    matmul = summary.ops["numpy.matmul"]
    assert matmul.count == 2 and matmul.flops == 2 * 2 * 64**3
    assert summary.ops["step"].count == 1
    path = baseline_path(tmp_path, "tests/test_real.py")
    update(path, {"test_work": BaselineEntry.record(summary)})
    stored = load(path)["test_work"]
    here = machine_info().fingerprint
    same = compare(_measure(work=2), stored, fingerprint=here)
    flops_row = next(r for r in same.metrics if r.metric == "flops")
    assert flops_row.status == "pass" and flops_row.now == flops_row.baseline
    more = compare(_measure(work=3), stored, fingerprint=here)
    assert more.failed
    regressed = [(r.op, r.kind) for r in more.reasons if r.status == "regressed"]
    assert ("numpy.matmul", "more flops") in regressed
