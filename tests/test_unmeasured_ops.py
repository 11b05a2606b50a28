"""A figure that was not measured is never recorded or judged as zero.

Where numpy capture is off (numpy 1.x, a free-threaded Python) no test's FLOPs, op counts or
op figures are measured: they read 0.  A run then judges none of them (a numpy-2 baseline
judged there is not "improved"), and ``--opprof-update-baselines`` records none of them: it
keeps every stored entry as it was, writes none for a new test, fails the session and says why
in one line.

The whole path runs for real with numpy 1.26 on ``PYTHONPATH`` ahead of this environment's
numpy: ``OPPROF_NUMPY1_PATH`` names a directory holding it (``pip install --target DIR
'numpy==1.26.*'``, what ``.ci/run`` does).  Without one those tests skip, unless
``OPPROF_REQUIRE_NUMPY1=1`` (set by ``.ci/run`` where numpy 1.26 installs) makes that a failure.
The gate's side of the rule runs in every environment, given the reason a run without numpy
capture gives it.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from baseline_helpers import Mem, Row, entry, machine, machine_parts, simple_summary, summary_of
from run_helpers import PytestRunner

from pytest_opprof.gate.machine import MachineInfo, fingerprint
from pytest_opprof.gate.session import BaselineSession, GateOptions
from pytest_opprof.gate.store import update
from pytest_opprof.gate.summary import TestSummary

WHY = "numpy capture off (numpy 1.26.4 is older than 2.0)"
NODEID = "test_k.py::test_matmul"


def _scopes_only() -> TestSummary:
    """What a profile records of ``simple_summary``'s test where numpy capture is off: its
    scope and its memory, no numpy op (so 0 FLOPs and one op, the scope)."""
    rows = [Row("forward", 1, self_cpu_time_total=20.0, cpu_time_total=20.0)]
    return summary_of([(1500.0, rows)] * 3, memory=Mem(8_000_000, 8_000_000, 10))


def _recorded(baselines: Path) -> Path:
    """A baseline of ``NODEID`` measured with capture on, written as an update run does."""
    gate = BaselineSession(GateOptions(baselines, update=True), machine=machine())
    gate.judge(NODEID, simple_summary(), {})
    gate.call_passed(NODEID, simple_summary())
    gate.teardown_done(NODEID, passed=True)
    assert gate.finish()
    path = baselines / "test_k.json"
    assert path.is_file()
    return path


def _rows(gate: BaselineSession) -> dict[str, str]:
    result = gate.judge(NODEID, _scopes_only(), {}).result
    assert result is not None
    return {row.metric: row.status for row in result.verdict.metrics} | {
        "status": result.verdict.status,
        "notes": " | ".join(result.verdict.notes),
    }


def test_unmeasured_figures_are_not_judged(tmp_path: Path) -> None:
    _recorded(tmp_path / "baselines")
    # Measured, the zeros would read as 100% fewer FLOPs: what a run without capture said.
    measured = _rows(BaselineSession(GateOptions(tmp_path / "baselines"), machine=machine()))
    assert measured["flops"] == "improved" and measured["status"] == "improved", measured
    gate = BaselineSession(GateOptions(tmp_path / "baselines"), machine=machine(), unmeasured=WHY)
    rows = _rows(gate)
    assert rows["flops"] == "not judged" and rows["op count"] == "not judged", rows
    assert rows["status"] == "pass", rows
    assert WHY in rows["notes"] and "not measured" in rows["notes"], rows
    # Memory was measured: it is judged.
    assert rows["allocated memory"] == "pass", rows


def test_unmeasured_figures_are_not_recorded(tmp_path: Path) -> None:
    path = _recorded(tmp_path / "baselines")
    before = path.read_bytes()
    gate = BaselineSession(
        GateOptions(tmp_path / "baselines", update=True), machine=machine(), unmeasured=WHY
    )
    new = "test_k.py::test_new"
    for nodeid in (NODEID, new):
        gate.judge(nodeid, _scopes_only(), {})
        gate.call_passed(nodeid, _scopes_only())
        gate.teardown_done(nodeid, passed=True)
    assert gate.finish() is False  # the update asked for did not happen: the session fails
    assert path.read_bytes() == before
    assert gate.written == [] and gate.refused == [NODEID, new]
    assert gate.write_error is not None and len(gate.write_error.splitlines()) == 1
    assert WHY in gate.write_error and NODEID in gate.write_error, gate.write_error
    assert "stored entries are kept" in gate.write_error


def test_a_baseline_recorded_without_numpy_capture_is_not_judged_on_its_zeros(
    tmp_path: Path,
) -> None:
    """A baseline written with numpy 1.x before such updates were refused holds 0 FLOPs:
    measured figures now are no regression against it."""
    parts = machine_parts(numpy="1.26.4")
    numpy1 = MachineInfo(
        platform="Linux-test",
        fingerprint=fingerprint(**parts),  # type: ignore[arg-type]
        **parts,  # type: ignore[arg-type]
    )
    for on, flops in ((machine(), "regressed"), (numpy1, "not judged")):
        baselines = tmp_path / str(on.numpy)
        update(baselines / "test_k.json", {"test_matmul": entry(_scopes_only(), on)})
        gate = BaselineSession(GateOptions(baselines), machine=machine())
        result = gate.judge(NODEID, simple_summary(), {}).result
        assert result is not None
        rows = {row.metric: row.status for row in result.verdict.metrics}
        assert rows["flops"] == flops, rows
        if flops == "not judged":
            assert result.verdict.status != "regressed", result.verdict
            assert any("recorded with numpy 1.26.4" in n for n in result.verdict.notes)


# -- the same with a real numpy 1.26 ------------------------------------------------------------

KERNEL = """
import numpy as np


def test_matmul():
    a = np.ones((64, 64))
    for _ in range(5):
        a = a @ a / 64.0
    assert a.shape == (64, 64)
"""
NEW_TEST = """

def test_new():
    assert float(np.add(np.ones(8), 1.0).sum()) == 16.0
"""


def _numpy1(monkeypatch: pytest.MonkeyPatch) -> None:
    """numpy 1.26 ahead of this environment's numpy for the runs that follow."""
    where = os.environ.get("OPPROF_NUMPY1_PATH")
    why = None
    if not where:
        why = "OPPROF_NUMPY1_PATH names no directory holding numpy 1.26"
    elif not (Path(where) / "numpy" / "__init__.py").is_file():
        why = f"OPPROF_NUMPY1_PATH={where} holds no numpy"
    if why is not None:
        if os.environ.get("OPPROF_REQUIRE_NUMPY1") == "1":
            pytest.fail(f"OPPROF_REQUIRE_NUMPY1=1 but {why}", pytrace=False)
        pytest.skip(why)
    paths = [str(where), os.environ.get("PYTHONPATH", "")]
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(p for p in paths if p))


def _statuses(report: Path, nodeid: str) -> dict[str, str]:
    verdict = json.loads(report.read_text())["tests"][nodeid]["verdict"]
    return {m["metric"]: m["status"] for m in verdict["metrics"]} | {"": verdict["status"]}


def test_numpy1_neither_judges_nor_records_what_it_cannot_measure(
    run_pytest: PytestRunner, pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytester.makepyfile(test_k=KERNEL)
    run_pytest("--opprof", "--opprof-update-baselines").assert_outcomes(passed=1)
    path = pytester.path / "baselines" / "test_k.json"
    recorded = path.read_bytes()
    assert json.loads(recorded)["tests"]["test_matmul"]["summary"]["flops"] > 0

    _numpy1(monkeypatch)
    pytester.makepyfile(test_k=KERNEL + NEW_TEST)
    update = run_pytest("--opprof", "--opprof-update-baselines")
    update.assert_outcomes(passed=2)
    assert update.ret == pytest.ExitCode.TESTS_FAILED
    update.stdout.fnmatch_lines(
        [
            "opprof: baselines not written: 2 test(s) not recorded (e.g. test_k.py::test_matmul):"
            " numpy capture off (numpy 1.* is older than 2.0), so their FLOPs and op counts "
            "were not measured; their stored entries are kept as they were"
        ]
    )
    assert path.read_bytes() == recorded

    gate = run_pytest("--opprof", "--opprof-report=report.json")
    gate.stdout.fnmatch_lines(["opprof: NOT MEASURED: numpy capture off (numpy 1.*"])
    gate.stdout.no_fnmatch_line("*improved beyond tolerance*")
    rows = _statuses(pytester.path / "report.json", "test_k.py::test_matmul")
    assert rows["flops"] == rows["op count"] == "not judged", rows
    assert rows[""] != "improved", rows
