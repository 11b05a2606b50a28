"""torch capture: aten events from Kineto merged with scopes and numpy ops on one clock."""

from __future__ import annotations

import threading
import warnings
from typing import TYPE_CHECKING, Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")  # the optional extra; .ci/run installs it

import torch.nn.functional as F  # noqa: E402
from html_helpers import bench_module  # noqa: E402
from torch.utils.flop_counter import FlopCounterMode, sdpa_flop_count  # noqa: E402

import pytest_opprof as opprof  # noqa: E402
from pytest_opprof import _native  # noqa: E402
from pytest_opprof.capture.sources.torch_source import (  # noqa: E402
    MARKER,
    SOURCE,
    TorchSource,
    read_events,
)

if TYPE_CHECKING:
    from run_helpers import PytestRunner


def _rows(prof: opprof.profile) -> dict[str, object]:
    return {row.key: row for row in prof.key_averages()}


def test_mm_three_times_count_and_flops() -> None:
    a, b = torch.randn(64, 32), torch.randn(32, 16)
    with opprof.profile(capture=["torch"]) as prof:
        for _ in range(3):
            torch.mm(a, b)
    mm = _rows(prof)["aten::mm"]
    assert mm.count == 3
    assert mm.flops == 3 * 2 * 64 * 32 * 16
    assert mm.input_shapes == [[64, 32], [32, 16]] or mm.count == 3
    # the output is 64x16 float32, allocated inside aten::mm by torch's CPU allocator
    assert mm.self_cpu_memory_usage >= 3 * 64 * 16 * 4


CASES = {
    "bmm": lambda: torch.bmm(torch.randn(3, 5, 7), torch.randn(3, 7, 4)),
    "addmm": lambda: torch.addmm(torch.randn(5, 4), torch.randn(5, 7), torch.randn(7, 4)),
    "baddbmm": lambda: torch.baddbmm(
        torch.randn(3, 5, 4), torch.randn(3, 5, 7), torch.randn(3, 7, 4)
    ),
    "linear": lambda: F.linear(torch.randn(5, 7), torch.randn(3, 7), torch.randn(3)),
    "matmul_3d": lambda: torch.randn(2, 5, 7) @ torch.randn(7, 3),
    "conv2d": lambda: F.conv2d(
        torch.randn(2, 3, 9, 9), torch.randn(4, 3, 3, 3), stride=2, padding=1
    ),
    "conv2d_dilated": lambda: F.conv2d(
        torch.randn(1, 2, 11, 10), torch.randn(6, 2, 3, 2), padding=(2, 1), dilation=(2, 3)
    ),
    "conv1d_groups": lambda: F.conv1d(torch.randn(2, 4, 20), torch.randn(6, 2, 5), groups=2),
    "conv_transpose2d": lambda: F.conv_transpose2d(
        torch.randn(2, 3, 5, 5), torch.randn(3, 4, 3, 3), stride=2
    ),
    # different value head size: the math path, made of bmm
    "sdpa_math": lambda: F.scaled_dot_product_attention(
        torch.randn(2, 4, 16, 8), torch.randn(2, 4, 12, 8), torch.randn(2, 4, 12, 6)
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_flops_equal_flop_counter_mode(case: str) -> None:
    fn = CASES[case]
    fn()  # warm: first calls may take other kernels
    with FlopCounterMode(display=False) as counter:
        fn()
    expected = counter.get_total_flops()
    assert expected > 0
    with opprof.profile(capture=["torch"]) as prof:
        fn()
    assert sum(row.flops for row in prof.key_averages()) == expected


def test_sdpa_cpu_flash_kernel_counts_torch_attention_formula() -> None:
    q, k, v = torch.randn(2, 4, 16, 8), torch.randn(2, 4, 12, 8), torch.randn(2, 4, 12, 8)
    with opprof.profile(capture=["torch"]) as prof:
        F.scaled_dot_product_attention(q, k, v, is_causal=True)
    rows = _rows(prof)
    kernel = "aten::_scaled_dot_product_flash_attention_for_cpu"
    if kernel not in rows:
        pytest.fail(f"sdpa took another kernel on this build: {sorted(rows)}")
    assert rows[kernel].flops == sdpa_flop_count(list(q.shape), list(k.shape), list(v.shape))
    assert sum(r.flops for r in rows.values()) == rows[kernel].flops


def test_bulk_reader_reads_what_the_per_event_reader_reads() -> None:
    """The bulk reader gives exactly what calling every accessor on every event gave
    (that reader is kept in bench/ as the benchmark's before)."""
    reference: Any = bench_module("_torch_per_event")
    source = TorchSource()
    source.acquire()
    try:
        source.start_options()
        x = torch.ones(4, 4, requires_grad=True)
        with torch.autograd.profiler.record_function("block"):
            (x @ x).sum().backward()
            torch.ones(3).repeat(2, 2)  # concrete arguments: ScalarList=[2, 2]
            torch.ones(2, 3).sum(0)  # aten::sum calling aten::sum: merged later
            F.conv2d(torch.randn(2, 3, 9, 9), torch.randn(4, 3, 3, 3), stride=2, padding=1)
        result = source.stop_kineto()
    finally:
        source.release()
    events = result.events()
    bulk, each = read_events(events), reference.read_events_per_event(events)
    assert bulk.names == each.names
    assert bulk.shapes == each.shapes
    assert bulk.dtypes == each.dtypes
    assert bulk.marker_starts == each.marker_starts
    np.testing.assert_array_equal(bulk.ops, each.ops)
    np.testing.assert_array_equal(bulk.mem, each.mem)
    # the workload reached what the readers treat apart
    assert "block" in bulk.names and "aten::conv2d" in bulk.names
    assert any(d.startswith("ScalarList=") for row in bulk.dtypes for d in row)
    assert len(bulk.mem) > 0 and len(bulk.marker_starts) == 10
    assert len(bulk.ops) + len(bulk.mem) + len(bulk.marker_starts) == len(events)


def test_torch_numpy_and_scope_in_one_timeline() -> None:
    a, b = torch.randn(64, 32), torch.randn(32, 16)
    x = np.ones((16, 16))
    with opprof.profile(capture=["numpy", "torch"]) as prof:
        with opprof.record_function("block"):
            torch.mm(a, b)
            np.matmul(x, x)
            torch.mm(a, b)
    events = prof.events()
    block = next(e for e in events if e.name == "block")
    mms = [e for e in events if e.name == "aten::mm"]
    npmm = [e for e in events if e.name == "numpy.matmul"]
    assert len(mms) == 2 and len(npmm) == 1
    for e in [*mms, *npmm]:
        assert e.cpu_parent is block
        assert e.thread == block.thread == threading.get_native_id()
    # interval order survives the clock mapping: mm, numpy.matmul, mm
    assert mms[0].time_range.end <= npmm[0].time_range.start <= mms[1].time_range.start
    names = {e.name for e in events}
    assert MARKER not in names
    assert sum(1 for e in events if e.name == "block") == 1  # scopes are not duplicated


def test_clock_mapping_error_is_bounded() -> None:
    """A probe RecordFunction at a known core time lands within the claimed error."""
    from torch._C._profiler import _RecordFunctionFast

    brackets = []
    with opprof.profile(capture=["torch"]) as prof:
        for _ in range(20):
            before = _native.now_ns()
            with _RecordFunctionFast("probe"):
                after = _native.now_ns()
            brackets.append((before, after))
    clock = SOURCE.last_clock
    assert clock is not None
    assert clock.error_ns < 50_000
    probes = sorted(e.time_range.start * 1000 for e in prof.events() if e.name == "probe")
    assert len(probes) == 20
    slack = clock.error_ns + 2_000  # events are in us with ns fractions; allow rounding
    for (before, after), start_ns in zip(brackets, probes, strict=True):
        assert before - slack <= start_ns <= after + slack


def test_capture_numpy_only_has_no_torch_events() -> None:
    a = torch.randn(8, 8)
    with opprof.profile(capture=["numpy"]) as prof:
        torch.mm(a, a)
    assert not [e for e in prof.events() if e.name.startswith("aten::")]


def test_other_torch_profiler_running_warns_and_records_nothing() -> None:
    a = torch.randn(8, 8)
    with torch.profiler.profile():
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            with opprof.profile(capture=["torch"]) as prof:
                torch.mm(a, a)
    assert any("another torch profiler" in str(w.message) for w in caught)
    assert not [e for e in prof.events() if e.name.startswith("aten::")]
    with opprof.profile(capture=["torch"]) as again:
        torch.mm(a, a)
    assert _rows(again)["aten::mm"].count == 1


def test_plugin_capture_torch(pytester: pytest.Pytester, run_pytest: PytestRunner) -> None:
    pytester.makepyfile(
        """
        import pytest
        import torch

        @pytest.mark.profile(row_limit=5)
        def test_mm():
            a = torch.randn(64, 32)
            for _ in range(3):
                torch.mm(a, a.t())
        """
    )
    result = run_pytest("--opprof", "--opprof-capture", "torch")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*aten::mm*3*"])
    assert "numpy." not in result.stdout.str()
    # no GPU runtime was asked for: nothing about device time is claimed missing
    assert "not measured: device" not in result.stdout.str()
