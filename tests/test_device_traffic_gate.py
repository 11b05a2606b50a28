"""Host<->device traffic flows like FLOPs: summary, baseline files, verdict (exact rows and
the op and scope that grew), reports; and a test without device tensors stays as it was.
The pytest runs use torch's fake tensors standing in for a CUDA device (no GPU needed)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from baseline_helpers import entry, machine

from pytest_opprof.gate.jsonio import Fields
from pytest_opprof.gate.round_figures import DeviceTraffic, OpFigures, RoundFigures
from pytest_opprof.gate.store import BaselineEntry, baseline_path, load, update
from pytest_opprof.gate.summary import TestSummary, summarize_rounds
from pytest_opprof.gate.verdict import Verdict, compare

if TYPE_CHECKING:
    from run_helpers import PytestRunner

MB4 = 4_000_000
SITE = "aten::item in scope train_step"


def _round(traffic: DeviceTraffic | None, wall_ns: int = 1_000_000) -> RoundFigures:
    return RoundFigures(
        wall_time_ns=wall_ns,
        cpu_time_ns=wall_ns,
        ops={"aten::item": OpFigures(count=12, self_cpu_ns=1000, cpu_ns=1000)},
        traffic=traffic,
    )


def _summary(traffic: DeviceTraffic | None, rounds: int = 1) -> TestSummary:
    return summarize_rounds([_round(traffic) for _ in range(rounds)])


def _entry(summary: TestSummary, tmp_path: Path) -> BaselineEntry:
    """``summary`` as a baseline file stores it and reads it back."""
    path = baseline_path(tmp_path, "tests/test_gpu.py")
    update(path, {"test_step": entry(summary)})
    return load(path)["test_step"]


def _compare(now: TestSummary, base: TestSummary, tmp_path: Path) -> Verdict:
    return compare(now, _entry(base, tmp_path), fingerprint=machine().fingerprint)


BEFORE = DeviceTraffic.of((0, 0, 0, 12), {SITE: (0, 0, 0, 12)})
AFTER = DeviceTraffic.of(
    (0, MB4, 0, 13),
    {SITE: (0, 0, 0, 12), "aten::to in scope train_step": (0, MB4, 0, 1)},
)


def test_a_summary_keeps_the_traffic_and_its_sites_through_json() -> None:
    for rounds in (1, 3):
        summary = _summary(AFTER, rounds)
        assert summary.device_traffic == AFTER
        back = TestSummary.from_json(Fields(json.loads(json.dumps(summary.to_json())), "t"))
        assert back.device_traffic == AFTER
        assert summary.as_stored().device_traffic == AFTER


def test_a_summary_without_device_tensors_writes_no_traffic() -> None:
    summary = _summary(None)
    assert summary.device_traffic is None
    assert "device_traffic" not in json.dumps(summary.to_json())
    # A file written before traffic was counted reads back as one without it.
    assert TestSummary.from_json(Fields(summary.to_json(), "t")).device_traffic is None


def test_a_file_with_broken_sites_names_the_field() -> None:
    data = _summary(AFTER).to_json()
    data["summary"]["device_traffic"]["sites"] = {SITE: [0, 0, -1, 1]}  # type: ignore[index]
    with pytest.raises(Exception, match=r"device_traffic.*sites"):
        TestSummary.from_json(Fields(data, "t"))


def test_a_device_to_host_copy_added_in_a_loop_regresses_naming_op_and_scope(
    tmp_path: Path,
) -> None:
    verdict = _compare(_summary(AFTER), _summary(BEFORE), tmp_path)
    assert verdict.status == "regressed"
    rows = {m.metric: m for m in verdict.metrics}
    assert (rows["device->host"].baseline, rows["device->host"].now) == (0, MB4)
    assert rows["device->host"].status == "regressed"
    assert (rows["syncs"].baseline, rows["syncs"].now, rows["syncs"].status) == (
        12,
        13,
        "regressed",
    )
    assert rows["host->device"].status == "pass"
    # Copied bytes are no memory the test holds: no memory row moves with them.
    assert all(m.status == "pass" for m in verdict.metrics if m.metric == "peak memory")
    note = next(n for n in verdict.notes if "traffic" in n)
    assert note == (
        "host<->device traffic grew at `aten::to` in scope `train_step` "
        "(device->host 0 bytes -> 4,000,000 bytes, syncs 0 -> 1)"
    )


def test_the_same_traffic_passes_and_less_is_an_improvement(tmp_path: Path) -> None:
    assert _compare(_summary(AFTER), _summary(AFTER), tmp_path).status == "pass"
    assert _entry(_summary(AFTER), tmp_path).summary.device_traffic == AFTER
    better = _compare(_summary(BEFORE), _summary(AFTER), tmp_path)
    assert better.status == "improved"


def test_a_baseline_without_traffic_is_not_judged_on_it(tmp_path: Path) -> None:
    verdict = _compare(_summary(AFTER), _summary(None), tmp_path)
    assert verdict.status == "pass"
    assert not any(m.metric == "device->host" for m in verdict.metrics)
    assert any("the baseline has none stored" in n for n in verdict.notes)


def test_no_traffic_on_either_side_adds_no_row(tmp_path: Path) -> None:
    verdict = _compare(_summary(None), _summary(None), tmp_path)
    assert not any(m.metric in ("syncs", "device->host") for m in verdict.metrics)
    assert not any("traffic" in n for n in verdict.notes)


TESTS = """
import os

import torch
from torch._subclasses.fake_tensor import FakeTensorMode


def test_step(opprof):
    with FakeTensorMode():
        x = torch.empty(1000, 1000, device="cuda")
        with opprof.record_function("train_step"):
            for _ in range(int(os.environ.get("OPPROF_COPIES", "0"))):
                x.cpu()
            (x * 2).sum(dim=0)


def test_host_only():
    torch.ones(8).to(torch.float16).sum()
"""


@pytest.mark.slow
def test_a_pytest_run_fails_on_a_device_to_host_copy_in_a_loop(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, run_pytest: PytestRunner
) -> None:
    pytest.importorskip("torch")  # the optional extra; .ci/run installs it
    pytester.makepyfile(test_gpu=TESTS)
    run_pytest("--opprof-update-baselines").assert_outcomes(passed=2)
    stored = json.loads((pytester.path / "baselines" / "test_gpu.json").read_text())
    assert stored["tests"]["test_step"]["summary"]["device_traffic"] == {
        "device_syncs": 0,
        "device_to_device_bytes": 0,
        "device_to_host_bytes": 0,
        "host_to_device_bytes": 0,
    }
    assert "device_traffic" not in stored["tests"]["test_host_only"]["summary"]
    monkeypatch.setenv("OPPROF_COPIES", "3")
    result = run_pytest("--opprof", "--opprof-report", "rep.json")
    result.assert_outcomes(failed=1, passed=1)
    result.stdout.fnmatch_lines(
        [
            "*device->host*0 B*",
            "*device->host*11.44 MB*REGRESSED*",  # 12,000,000 bytes
            "*syncs*3*REGRESSED*",
            "*host<->device traffic grew at `aten::to` in scope `train_step`*",
        ]
    )
    report = json.loads((pytester.path / "rep.json").read_text())["tests"]
    verdict = report["test_gpu.py::test_step"]["verdict"]
    rows = {m["metric"]: m for m in verdict["metrics"]}
    assert rows["device->host"]["now"] == 3 * MB4 and rows["syncs"]["now"] == 3
    traffic = report["test_gpu.py::test_step"]["summary"]["device_traffic"]
    assert traffic["device_to_host_bytes"] == 3 * MB4
    assert traffic["sites"] == {"aten::to in scope train_step": [0, 3 * MB4, 0, 3]}
    host_only = report["test_gpu.py::test_host_only"]["verdict"]["metrics"]
    assert not any(m["metric"] == "syncs" for m in host_only)


def test_rounds_that_disagree_keep_the_low_median_round_and_the_range() -> None:
    summary = summarize_rounds([_round(AFTER), _round(BEFORE), _round(AFTER)])
    assert summary.device_traffic == AFTER  # its sites add up to its totals
    assert summary.ranges["device_to_host_bytes"] == (0, MB4)
    assert summary.ranges["device_syncs"] == (12, 13)
    back = TestSummary.from_json(Fields(json.loads(json.dumps(summary.to_json())), "t"))
    assert back.ranges == summary.ranges
