"""Per-op device memory, as torch.profiler attributes it: each allocation or free that a
device allocator (CUDA's caching allocator) reports goes to the innermost op open on its
thread, into ``self_device_memory_usage``; the host's into ``self_cpu_memory_usage``.

Without a GPU the allocator's reports are the records the tests build: the torch source's
reader (``_to_records``) onward is the plugin's own code, from the memory instants to the
table and the verdict.  ``bench/gpu_check.py`` holds the same figures against
torch.profiler's on a real device."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from baseline_helpers import entry, machine

from pytest_opprof.capture.sources.kineto_read import HOST_MEMORY
from pytest_opprof.capture.sources.torch_source import ClockMap, _to_records
from pytest_opprof.gate.round_figures import OpFigures, RoundFigures
from pytest_opprof.gate.store import baseline_path, load, update
from pytest_opprof.gate.summary import TestSummary, summarize_rounds
from pytest_opprof.gate.verdict import Verdict, compare
from pytest_opprof.model import build_events, key_averages
from pytest_opprof.native_layout.records import MEMORY_EVENT_NAME, Records
from pytest_opprof.render.trace import export_records_trace

CUDA0 = (1 << 8) | 0  # c10's DeviceType::CUDA is 1; device index 0
BLOCK = 4_000_256  # a 1000 x 1000 float32 tensor, as the caching allocator rounds it
NAMES = ["train_step", "aten::mm", "aten::empty"]
IDENTITY = ClockMap(torch_ns=(0, 1), offset_ns=(0.0, 0.0), error_ns=0.0)


def _records(mem: list[tuple[int, int, int, int]]) -> Records:
    """``train_step`` [0, 1000) around ``aten::mm`` [100, 400) and ``aten::empty``
    [500, 600), all on thread 7, with the memory instants ``mem`` (time, thread, bytes,
    device)."""
    ops = np.array(
        [[0, 1000, 7, 0, 0, -1], [100, 400, 7, 1, 0, -1], [500, 600, 7, 2, 0, -1]],
        dtype=np.int64,
    )
    return _to_records(
        ops, np.array(mem, dtype=np.int64).reshape(-1, 4), list(NAMES), [[]], [[]], IDENTITY
    )


STEP = [
    (150, 7, 4096, HOST_MEMORY),  # the host's, inside aten::mm
    (200, 7, BLOCK, CUDA0),  # aten::mm's output
    (550, 7, BLOCK, CUDA0),  # aten::empty's
    (800, 7, -BLOCK, CUDA0),  # freed by the scope itself
    (2000, 7, 1024, CUDA0),  # outside every op: a [memory] event
]


def test_each_op_gets_the_device_bytes_reported_inside_it_and_its_subtree_total() -> None:
    records = _records(STEP)
    by_name = {e.name: e for e in build_events(records, profile_memory=True)}
    mm, empty, step = by_name["aten::mm"], by_name["aten::empty"], by_name["train_step"]
    assert (mm.self_device_memory_usage, mm.device_memory_usage) == (BLOCK, BLOCK)
    assert (empty.self_device_memory_usage, empty.device_memory_usage) == (BLOCK, BLOCK)
    assert step.self_device_memory_usage == -BLOCK
    assert step.device_memory_usage == BLOCK  # its own free, its children's two blocks
    # The host's bytes stay the host's, and no device byte is counted as host memory.
    assert (mm.self_cpu_memory_usage, step.cpu_memory_usage) == (4096, 4096)
    assert empty.self_cpu_memory_usage == 0
    loose = by_name[MEMORY_EVENT_NAME]
    assert (loose.self_device_memory_usage, loose.self_cpu_memory_usage) == (1024, 0)


def test_key_averages_and_the_table_show_device_memory_beside_the_host_s() -> None:
    rows = key_averages(_records([*STEP, (300, 7, BLOCK, CUDA0)]), profile_memory=True)
    by_key = {r.key: r for r in rows}
    assert by_key["aten::mm"].self_device_memory_usage == 2 * BLOCK
    assert by_key["train_step"].device_memory_usage == 2 * BLOCK
    assert by_key["aten::mm"].self_cpu_memory_usage == 4096
    header = rows.table().splitlines()[1]
    assert "  CUDA Mem  " in header and "  Self CUDA Mem  " in header


def test_a_host_only_profile_has_no_device_memory_and_no_device_columns() -> None:
    records = _records([(150, 7, 4096, HOST_MEMORY), (550, 7, -4096, HOST_MEMORY)])
    assert records.device_memory is None
    rows = key_averages(records, profile_memory=True)
    assert all(r.device_memory_usage == 0 for r in rows)
    assert "CUDA Mem" not in rows.table()


def test_records_merged_keep_each_event_s_device_bytes() -> None:
    host_only = _records([(150, 7, 4096, HOST_MEMORY)])
    merged = host_only.concat(_records(STEP))
    assert merged.device_memory is not None
    assert merged.device_memory.tolist() == [0] * len(host_only) + list(
        _records(STEP).device_memory  # type: ignore[arg-type]
    )


def test_records_refuse_device_bytes_that_do_not_match_their_events() -> None:
    records = _records(STEP)
    with pytest.raises(ValueError, match="device_memory has 2 figures for 4 events"):
        Records(records.events[:4], records.names, device_memory=np.zeros(2, dtype=np.int64))


# -- the gate --------------------------------------------------------------------------


def _summary(empty_bytes: int, peak: int | None) -> TestSummary:
    ops = {
        "aten::mm": OpFigures(
            count=1, self_cpu_ns=9000, cpu_ns=9000, self_device_memory_bytes=BLOCK
        ),
        "aten::empty": OpFigures(
            count=1, self_cpu_ns=1000, cpu_ns=1000, self_device_memory_bytes=empty_bytes
        ),
    }
    rnd = RoundFigures(
        wall_time_ns=1_000_000, cpu_time_ns=1_000_000, ops=ops, device_memory_bytes=peak
    )
    return summarize_rounds([rnd])


def _compare(now: TestSummary, base: TestSummary, tmp_path: Path) -> Verdict:
    path = baseline_path(tmp_path, "tests/test_gpu.py")
    update(path, {"test_step": entry(base)})
    return compare(now, load(path)["test_step"], fingerprint=machine().fingerprint)


def test_a_baseline_keeps_each_op_s_device_bytes(tmp_path: Path) -> None:
    base = _summary(BLOCK, 2 * BLOCK)
    path = baseline_path(tmp_path, "tests/test_gpu.py")
    update(path, {"test_step": entry(base)})
    stored = load(path)["test_step"].summary
    assert stored.ops["aten::empty"].self_device_memory_bytes == BLOCK
    assert '"self_device_memory_bytes": 4000256' in path.read_text()


def test_a_test_whose_device_peak_grew_names_the_op_that_allocated_it(tmp_path: Path) -> None:
    verdict = _compare(_summary(3 * BLOCK, 4 * BLOCK), _summary(BLOCK, 2 * BLOCK), tmp_path)
    assert verdict.status == "regressed"
    rows = {m.metric: m for m in verdict.metrics}
    assert rows["device memory peak"].status == "regressed"
    (reason,) = [r for r in verdict.reasons if r.kind == "more device memory"]
    assert (reason.op, reason.baseline, reason.now) == ("aten::empty", BLOCK, 3 * BLOCK)
    assert reason.status == "regressed"
    # Host memory did not move: no host memory reason, and aten::mm is not blamed.
    assert not [r for r in verdict.reasons if r.op == "aten::mm"]


@pytest.mark.parametrize("peak", [2 * BLOCK, None])
def test_an_op_s_device_bytes_alone_fail_nothing(tmp_path: Path, peak: int | None) -> None:
    """An op's figure explains the test's: with the peak unchanged, or a baseline written
    before ops had device bytes (read as 0), the op's line is information only."""
    verdict = _compare(_summary(3 * BLOCK, peak), _summary(0, peak), tmp_path)
    assert verdict.status == "pass"
    assert all(r.status == "info" for r in verdict.reasons if r.kind.endswith("device memory"))


def test_the_trace_gives_each_event_its_device_bytes(tmp_path: Path) -> None:
    path = tmp_path / "trace.json"
    export_records_trace(_records(STEP), str(path))
    events = {e["name"]: e for e in json.loads(path.read_text())["traceEvents"] if e["ph"] == "X"}
    assert events["aten::mm"]["args"]["Self Device Mem (bytes)"] == BLOCK
    assert events["train_step"]["args"]["Device Mem (bytes)"] == BLOCK
    assert events["train_step"]["args"]["Self Device Mem (bytes)"] == -BLOCK
    # From the events too (a profile's own events, or torch's), alike.
    events_path = tmp_path / "events.json"
    build_events(_records(STEP), profile_memory=True).export_chrome_trace(str(events_path))
    named = json.loads(events_path.read_text())["traceEvents"]
    (mm,) = [e for e in named if e.get("name") == "aten::mm"]
    assert mm["args"]["Self Device Mem (bytes)"] == BLOCK
