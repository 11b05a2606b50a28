"""The machine-speed references: measured beside every round by the plugin, stored in
baselines, and used by the verdict to compare times at the baseline's machine speed
(scopes by the Python reference, library ops by the native one, each partly: a round's
factor is the reference ratio to the power ``speed.PYTHON_EXPONENT`` or
``speed.NATIVE_EXPONENT``; wall time as the sum of its scaled parts)."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from baseline_helpers import Row, entry, machine, summary_of

from pytest_opprof.capture import speed_probe
from pytest_opprof.gate import speed, store
from pytest_opprof.gate.jsonio import Fields
from pytest_opprof.gate.session import BaselineSession
from pytest_opprof.gate.summary import TestSummary, TimeStats
from pytest_opprof.gate.verdict import Tolerances, Verdict, compare
from pytest_opprof.plugin.options import read_gate_options

if TYPE_CHECKING:
    from run_helpers import PytestRunner

HERE = machine().fingerprint


def measured(
    kernel_ms: Sequence[float],
    ref_us: Sequence[float],
    native_us: Sequence[float] | None = None,
    op: str = "kernel",
) -> TestSummary:
    """One op (ms per round) with the Python and native references' times per round (µs;
    the native one defaults to the Python one's)."""
    summary = summary_of(
        [(ms * 1000 + 100, [Row(op, 1, self_cpu_time_total=ms * 1000)]) for ms in kernel_ms]
    )
    return dataclasses.replace(
        summary,
        speed_ref=TimeStats.from_samples([us * 1000 for us in ref_us]),
        native_ref=TimeStats.from_samples([us * 1000 for us in (native_us or ref_us)]),
    )


def judge(now: TestSummary, base: TestSummary, **tol: object) -> Verdict:
    return compare(now, entry(base), fingerprint=HERE, tolerances=Tolerances(**tol))  # type: ignore[arg-type]


def kernel_status(verdict: Verdict) -> str:
    found = [r.status for r in verdict.reasons if r.op == "kernel" and r.unit == "ns"]
    return found[0] if found else "pass"


BASE = measured([10, 10.2, 10.1, 10.3, 10.0], [100, 101, 99, 100, 102])


def test_a_slower_machine_is_not_a_regression() -> None:
    # Every round 20% slower, and the reference beside it 20% slower too.
    now = measured([12, 12.3, 12.1, 12.4, 12.0], [120, 121, 119, 120, 123])
    verdict = judge(now, BASE)
    assert kernel_status(verdict) == "pass"
    assert verdict.status == "pass"
    assert verdict.speed_change == pytest.approx(0.2, abs=0.01)
    assert any("speed references 20% slower" in note for note in verdict.notes)
    # The same figures judged as measured are a regression: the scaling made the difference.
    assert kernel_status(judge(now, BASE, speed_scaled=False)) == "regressed"


def test_a_slower_op_on_a_steady_machine_regresses() -> None:
    now = measured([14, 14.3, 14.1, 14.4, 14.0], [100, 101, 99, 100, 102])
    verdict = judge(now, BASE)
    assert kernel_status(verdict) == "regressed"
    assert verdict.speed_change == pytest.approx(0.0, abs=0.01)
    assert not any("speed references" in note for note in verdict.notes)


def test_a_slowdown_hidden_by_a_faster_machine_is_found() -> None:
    # The op took as long as before, but the machine ran 20% faster: the code got slower.
    now = measured([10, 10.2, 10.1, 10.3, 10.0], [80, 81, 79, 80, 81])
    verdict = judge(now, BASE)
    assert kernel_status(verdict) == "regressed"
    assert any("20% faster" in note for note in verdict.notes)
    assert kernel_status(judge(now, BASE, speed_scaled=False)) == "pass"


def test_a_machine_speed_beyond_the_limit_leaves_times_not_judged() -> None:
    # A 1.6x slow phase (both references 60% slower): scaled partly, the op would read
    # +4.8% and pass, or +60% raw; neither is a measurement to the 15% tolerance.
    now = measured([16, 16.3, 16.1, 16.4, 16.0], [160, 161, 159, 160, 163])
    verdict = judge(now, BASE)
    assert verdict.status == "pass" and not verdict.time_judged
    assert verdict.time_not_judged is not None
    assert "speed references 60% slower" in verdict.time_not_judged
    assert "beyond the 25%" in verdict.time_not_judged
    assert kernel_status(verdict) == "pass"
    # FLOPs and counts are still judged: twice the FLOPs in that phase fail the test.
    doubled = dataclasses.replace(now, flops=BASE.flops * 2 + 1_000_000)
    assert judge(doubled, BASE).status == "regressed"
    # --opprof-max-speed-change off (or a wider limit) judges it at the baseline's speed.
    for limit in (None, 0.7):
        judged = judge(now, BASE, max_speed_change=limit)
        assert judged.time_judged and judged.time_not_judged is None


def test_each_round_is_scaled_by_its_own_reference() -> None:
    # Two rounds ran in a slow phase (op and reference both x1.5), the rest at full speed.
    now = measured([15, 15.3, 10.1, 10.3, 10.0], [150, 151, 99, 100, 102])
    scaled = speed.at_speed(now, BASE)  # BASE's median reference: 100 us
    exponent = speed.PYTHON_EXPONENT
    assert scaled.ops["kernel"].self_cpu_time.samples_ns == pytest.approx(
        [
            15e6 * (100 / 150) ** exponent,
            15.3e6 * (100 / 151) ** exponent,
            10.1e6 * (100 / 99) ** exponent,
            10.3e6,
            10.0e6 * (100 / 102) ** exponent,
        ],
        rel=1e-3,
    )
    assert kernel_status(judge(now, BASE, statistic="median")) == "pass"


def test_without_a_reference_on_either_side_times_are_judged_as_measured() -> None:
    old = dataclasses.replace(BASE, speed_ref=None)  # a baseline from before the reference
    now = measured([14, 14.3, 14.1, 14.4, 14.0], [140, 141, 139, 140, 143])
    verdict = judge(now, old)
    assert verdict.speed_change is None
    assert kernel_status(verdict) == "regressed"


def test_library_ops_follow_the_native_reference_and_scopes_the_python_one() -> None:
    # A phase that slowed the native reference by 40% and the Python one not at all.
    base_np = measured([10, 10.2, 10.1, 10.3, 10.0], [100] * 5, [100] * 5, op="numpy.matmul")
    now_np = measured([12, 12.2, 12.1, 12.3, 12.0], [100] * 5, [140] * 5, op="numpy.matmul")
    scaled = speed.at_speed(now_np, base_np)
    factor = (1 / 1.4) ** speed.NATIVE_EXPONENT
    assert scaled.ops["numpy.matmul"].self_cpu_time.median_ns == pytest.approx(
        12.1e6 * factor, rel=1e-3
    )
    assert kernel_status_of(judge(now_np, base_np), "numpy.matmul") == "pass"
    assert kernel_status_of(judge(now_np, base_np, speed_scaled=False), "numpy.matmul") == (
        "regressed"
    )
    # The same figures on a scope: the native reference does not excuse Python code.
    base_scope = measured([10, 10.2, 10.1, 10.3, 10.0], [100] * 5, [100] * 5)
    now_scope = measured([12, 12.2, 12.1, 12.3, 12.0], [100] * 5, [140] * 5)
    assert speed.at_speed(now_scope, base_scope).ops["kernel"] == now_scope.ops["kernel"]
    assert kernel_status(judge(now_scope, base_scope)) == "regressed"


def test_wall_time_is_scaled_as_the_sum_of_its_parts() -> None:
    # Per round: a 6 ms library op, a 3 ms scope and 1 ms of test code outside both.
    rounds = [
        (10_000, [Row("numpy.add", 1, self_cpu_time_total=6000), Row("kernel", 1, 3000)])
        for _ in range(3)
    ]
    summary = summary_of(rounds)
    now = dataclasses.replace(
        summary,
        speed_ref=TimeStats.from_samples([120_000] * 3),
        native_ref=TimeStats.from_samples([150_000] * 3),
    )
    base = dataclasses.replace(
        summary,
        speed_ref=TimeStats.from_samples([100_000] * 3),
        native_ref=TimeStats.from_samples([100_000] * 3),
    )
    python = (1 / 1.2) ** speed.PYTHON_EXPONENT
    native = (1 / 1.5) ** speed.NATIVE_EXPONENT
    expected = 6e6 * native + 3e6 * python + 1e6 * python
    scaled = speed.at_speed(now, base)
    assert scaled.wall_time.median_ns == pytest.approx(expected, rel=1e-3)
    assert scaled.cpu_time.median_ns == pytest.approx(
        summary.cpu_time.median_ns * expected / 10e6, rel=1e-3
    )


def test_short_library_calls_follow_the_python_reference() -> None:
    # 2 ms in 1,000 calls of 2 us (dispatch, not compute) against 2 ms in one call, in a
    # phase that slowed the Python reference by 20% and the native one by 50%.
    def rounds(calls: int, python_us: float, native_us: float) -> TestSummary:
        summary = summary_of(
            [(2_100, [Row("numpy.add", calls, self_cpu_time_total=2000)]) for _ in range(3)]
        )
        return dataclasses.replace(
            summary,
            speed_ref=TimeStats.from_samples([python_us * 1000] * 3),
            native_ref=TimeStats.from_samples([native_us * 1000] * 3),
        )

    python = (1 / 1.2) ** speed.PYTHON_EXPONENT
    native = (1 / 1.5) ** speed.NATIVE_EXPONENT
    for calls, factor in ((1000, python), (1, native)):
        scaled = speed.at_speed(rounds(calls, 120, 150), rounds(calls, 100, 100))
        assert scaled.ops["numpy.add"].self_cpu_time.median_ns == pytest.approx(
            2e6 * factor, rel=1e-3
        ), calls
    assert 2e6 / 1000 < speed.SHORT_CALL_NS <= 2e6


def kernel_status_of(verdict: Verdict, op: str) -> str:
    found = [r.status for r in verdict.reasons if r.op == op and r.unit == "ns"]
    return found[0] if found else "pass"


def test_is_native_tells_library_ops_from_scopes() -> None:
    assert speed.is_native("numpy.add") and speed.is_native("aten::mm")
    assert not speed.is_native("kernel") and not speed.is_native("forward pass")


def test_a_reference_that_does_not_match_the_rounds_is_not_used() -> None:
    short = dataclasses.replace(BASE, speed_ref=TimeStats.from_samples([100_000] * 3))
    assert not speed.usable(short)
    assert judge(BASE, short).speed_change is None


def test_device_times_are_not_scaled() -> None:
    summary = summary_of(
        [
            (1000, [Row("k", 1, self_cpu_time_total=900, self_device_time_total=500)])
            for _ in range(3)
        ]
    )
    ref = TimeStats.from_samples([200_000] * 3)
    summary = dataclasses.replace(summary, speed_ref=ref, native_ref=ref)
    half = TimeStats.from_samples([100_000] * 3)
    scaled = speed.at_speed(summary, dataclasses.replace(summary, speed_ref=half, native_ref=half))
    assert scaled.ops["k"].self_cpu_time.median_ns == round(900_000 * 0.5**speed.PYTHON_EXPONENT)
    assert scaled.ops["k"].self_device_time == summary.ops["k"].self_device_time


def test_the_reference_survives_json() -> None:
    data = json.loads(json.dumps(BASE.to_json()))
    assert data["summary"]["speed_ref"]["samples_ns"] == [100000, 101000, 99000, 100000, 102000]
    assert BASE.speed_ref is not None
    back = TestSummary.from_json(Fields(data)).speed_ref
    assert back is not None and back.samples_ns == BASE.speed_ref.samples_ns


def test_references_run_the_same_work_each_time() -> None:
    speed_probe.warm_up()
    for reference in (speed_probe.python_reference_ns, speed_probe.native_reference_ns):
        times = sorted(reference() for _ in range(9))
        assert 0 < times[0] <= times[4] < 1_000_000_000


def test_plugin_stores_one_reference_per_round(
    pytester: pytest.Pytester,
    monkeypatch: pytest.MonkeyPatch,
    run_pytest: PytestRunner,
) -> None:
    pytester.makepyfile(test_work="def test_sum():\n    assert sum(range(10000)) > 0\n")
    result = run_pytest("--opprof-update-baselines", "--opprof-rounds=3")
    result.assert_outcomes(passed=1)
    (path,) = Path(pytester.path, "baselines").rglob("*.json")
    (test,) = store.load(path).values()
    for ref in (test.summary.speed_ref, test.summary.native_ref):
        assert ref is not None
        assert len(ref.samples_ns) == test.summary.rounds == 3
        assert all(s > 0 for s in ref.samples_ns)


def test_raw_times_option_and_ini_reach_the_gate(
    pytester: pytest.Pytester, run_pytest: PytestRunner
) -> None:
    default = read_gate_options(run_pytest.parseconfig())
    assert BaselineSession(default).tolerances.speed_scaled
    from_cli = read_gate_options(run_pytest.parseconfig("--opprof-raw-times"))
    assert not BaselineSession(from_cli).tolerances.speed_scaled
    pytester.makeini("[pytest]\nopprof_raw_times = true\n")
    from_ini = read_gate_options(run_pytest.parseconfig())
    assert not BaselineSession(from_ini).tolerances.speed_scaled


@pytest.mark.slow
def test_references_run_only_where_a_time_verdict_or_a_baseline_can_use_them(
    pytester: pytest.Pytester, run_pytest: PytestRunner
) -> None:
    pytester.makepyfile("import numpy as np\n\ndef test_a():\n    np.add(np.ones(3), 1)\n")

    def refs(*args: str) -> list[str]:
        run_pytest("--opprof", "--opprof-report", "r.json", *args).assert_outcomes(passed=1)
        (test,) = json.loads((pytester.path / "r.json").read_text())["tests"].values()
        return [k for k in ("speed_ref", "native_ref") if k in test["summary"]]

    both = ["speed_ref", "native_ref"]
    # No baseline and none being recorded: no time verdict for the references to serve,
    # however many rounds run.
    assert refs() == []  # auto
    assert refs("--opprof-rounds", "3") == []
    # An update run keeps them (a later run pools its rounds with them) ...
    assert refs("--opprof-rounds", "3", "--opprof-update-baselines") == both
    # ... and a run with enough rounds to judge against that baseline runs them.
    assert refs() == both
    assert refs("--opprof-rounds", "3") == both
    # One round is never judged on time (3 are needed), unless told to judge times anyway.
    assert refs("--opprof-rounds", "1") == []
    assert refs("--opprof-rounds", "1", "--opprof-force-time") == both
