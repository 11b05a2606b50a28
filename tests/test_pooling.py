"""Baselines refined by passing update runs (pytest_opprof/pooling.py): a run whose verdict
passed joins its rounds to the stored ones, keeping the last POOLED_SESSIONS sessions'."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from baseline_helpers import Row, entry, machine, stored_test, summary_of

from pytest_opprof.errors import FieldError
from pytest_opprof.gate import pooling

if TYPE_CHECKING:
    from run_helpers import PytestRunner
from pytest_opprof.gate.jsonio import Fields
from pytest_opprof.gate.pooling import POOLED_SESSIONS, can_pool, pool
from pytest_opprof.gate.summary import TestSummary, TimeStats
from pytest_opprof.gate.verdict import Tolerances, compare
from pytest_opprof.plugin.options import AUTO_ROUNDS, CONFIRM_ROUNDS

HERE = machine()


def measured(kernel_ms: list[float], ref_us: float = 40.0, flops: int = 0) -> TestSummary:
    """A 'kernel' scope and a matmul per round, with both speed references."""
    summary = summary_of(
        [
            (
                ms * 1000 + 600,
                [
                    Row("kernel", 1, self_cpu_time_total=ms * 1000),
                    Row("numpy.matmul", 1, self_cpu_time_total=500, flops=flops),
                ],
            )
            for ms in kernel_ms
        ]
    )
    refs = TimeStats.from_samples([ref_us * 1000] * len(kernel_ms))
    return dataclasses.replace(summary, speed_ref=refs, native_ref=refs)


def verdict_of(now: TestSummary, base: TestSummary) -> object:
    return compare(now, entry(base, HERE), fingerprint=HERE.fingerprint, tolerances=Tolerances())


def test_a_passing_run_joins_its_rounds_after_the_stored_ones() -> None:
    old = measured([2.0, 2.1, 2.0, 2.2, 2.1])
    new = measured([2.05, 2.0, 2.1, 2.0, 2.15])
    verdict = compare(new, entry(old, HERE), fingerprint=HERE.fingerprint)
    assert verdict.status == "pass"
    assert can_pool(new, entry(old, HERE), verdict, HERE.fingerprint)
    pooled = pool(new, old)
    assert pooled.rounds == 10 and pooled.sessions == (5, 5)
    kernel = pooled.ops["kernel"].self_cpu_time.samples_ns
    assert kernel == (
        *old.ops["kernel"].self_cpu_time.samples_ns,
        *new.ops["kernel"].self_cpu_time.samples_ns,
    )
    for series in (pooled.wall_time, pooled.cpu_time, pooled.speed_ref, pooled.native_ref):
        assert series is not None and len(series.samples_ns) == 10
    # Deterministic figures are the new run's.
    assert pooled.flops == new.flops and pooled.op_count == new.op_count


def test_only_the_last_sessions_are_kept() -> None:
    sessions = [measured([2.0 + i / 100] * 5) for i in range(POOLED_SESSIONS + 2)]
    pooled = sessions[0]
    for later in sessions[1:]:
        pooled = pool(later, pooled)
    assert pooled.sessions == (5,) * POOLED_SESSIONS
    kept = pooled.ops["kernel"].self_cpu_time.samples_ns
    oldest_kept = sessions[-POOLED_SESSIONS].ops["kernel"].self_cpu_time.samples_ns
    assert kept[:5] == oldest_kept
    assert kept[-5:] == sessions[-1].ops["kernel"].self_cpu_time.samples_ns


def test_a_run_whose_rounds_waited_for_a_cpu_still_pools() -> None:
    # Every round of the new run waited half its time: its time is judged on work time
    # (wall less the wait), nothing changed, and its rounds (with their wait) join the
    # baseline's.
    old = measured([2.0, 2.1, 2.0, 2.2, 2.1])
    waits = TimeStats.from_samples([0] * 5)
    old = dataclasses.replace(old, wait_time=waits)
    new = measured([4.0, 4.2, 4.1, 4.0, 4.3])
    busy = TimeStats.from_samples([s // 2 for s in new.wall_time.samples_ns])
    new = dataclasses.replace(new, wait_time=busy)
    verdict = compare(new, entry(old, HERE), fingerprint=HERE.fingerprint)
    assert verdict.status == "pass" and verdict.work_time
    assert can_pool(new, entry(old, HERE), verdict, HERE.fingerprint)
    pooled = pool(new, old)
    assert pooled.wait_time is not None
    assert pooled.wait_time.samples_ns == (*waits.samples_ns, *busy.samples_ns)


@pytest.mark.parametrize(
    "change",
    [
        "slower",
        "faster, confirmed",
        "more flops",
        "another op count",
        "new op",
        "other machine",
        "no reference",
    ],
)
def test_a_run_that_changed_for_real_replaces_the_baseline(change: str) -> None:
    old = measured([2.0, 2.1, 2.0, 2.2, 2.1], flops=1000)
    stored = entry(old, HERE)
    fingerprint = HERE.fingerprint
    new = measured([2.05, 2.0, 2.1, 2.0, 2.15], flops=1000)
    if change == "slower":
        new = measured([3.0, 3.1, 3.0, 3.2, 3.1], flops=1000)
    elif change == "faster, confirmed":  # every round faster: Mann-Whitney p = 1/252
        new = measured([1.0, 1.05, 1.1, 1.0, 1.02], flops=1000)
    elif change == "more flops":
        new = measured([2.05, 2.0, 2.1, 2.0, 2.15], flops=2000)
    elif change == "another op count":  # not judged by the verdict, still a change
        ops = dict(new.ops)
        ops["numpy.matmul"] = dataclasses.replace(ops["numpy.matmul"], count=2)
        new = dataclasses.replace(new, ops=ops, op_count=new.op_count + 1)
    elif change == "new op":
        extra = summary_of([(2600.0, [Row("kernel", 1, 2000.0), Row("numpy.add", 1, 10.0)])] * 5)
        new = dataclasses.replace(extra, speed_ref=new.speed_ref, native_ref=new.native_ref)
    elif change == "other machine":
        stored = entry(old, machine("Other CPU"))
    elif change == "no reference":
        new = dataclasses.replace(new, speed_ref=None, native_ref=None)
    verdict = compare(new, stored, fingerprint=fingerprint)
    assert not can_pool(new, stored, verdict, fingerprint)
    assert pooling.replace_reason(new, stored, verdict, fingerprint)


@pytest.mark.parametrize(
    ("change", "new_ms"),
    [
        # The median is 27% faster and the verdict's test (alpha 0.3) agrees, but two
        # rounds are as slow as the baseline's: p = 0.06, no confirmed improvement.
        ("faster, not confirmed", [1.5, 1.52, 1.54, 1.9, 1.95]),
        # One round: times are not judged, so nothing says they changed.
        ("one round", [2.05]),
    ],
)
def test_a_run_without_evidence_of_a_change_pools(change: str, new_ms: list[float]) -> None:
    old = measured([2.0, 2.1, 2.0, 2.2, 2.1], flops=1000)
    new = measured(new_ms, flops=1000)
    verdict = compare(new, entry(old, HERE), fingerprint=HERE.fingerprint)
    if change == "faster, not confirmed":
        assert verdict.status == "improved"
        assert [(r.op, r.kind, r.status) for r in verdict.reasons] == [
            ("kernel", "faster", "improved")
        ]
    else:
        assert not verdict.time_judged
    assert pooling.replace_reason(new, entry(old, HERE), verdict, HERE.fingerprint) is None
    assert pool(new, old).sessions == (5, len(new_ms))


def test_the_confirmation_threshold_is_what_tells_them_apart() -> None:
    # The same unconfirmed improvement replaces when the threshold is the verdict's.
    old = measured([2.0, 2.1, 2.0, 2.2, 2.1], flops=1000)
    new = measured([1.5, 1.52, 1.54, 1.9, 1.95], flops=1000)
    verdict = compare(new, entry(old, HERE), fingerprint=HERE.fingerprint)
    assert can_pool(new, entry(old, HERE), verdict, HERE.fingerprint)
    assert pooling.CONFIRM_ALPHA < Tolerances().alpha
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(pooling, "CONFIRM_ALPHA", Tolerances().alpha)
        why = pooling.replace_reason(new, entry(old, HERE), verdict, HERE.fingerprint)
    assert why == "kernel: faster, confirmed"


def test_sessions_survive_json_and_a_bad_list_names_the_field() -> None:
    pooled = pool(measured([2.0] * 5), measured([2.1] * 3))
    data = json.loads(json.dumps(pooled.to_json()))
    assert data["sessions"] == [3, 5] and data["rounds"] == 8
    assert TestSummary.from_json(Fields(data)).sessions == (3, 5)
    single = measured([2.0] * 5).to_json()
    assert "sessions" not in single
    data["sessions"] = [3, 4]
    with pytest.raises(FieldError, match=r"sessions.*adding up to rounds 8"):
        TestSummary.from_json(Fields(data))


# -- through the plugin -------------------------------------------------------------


# Work counted in iterations, not seconds: a loop that waits out a wall time does less
# work the busier the machine, and a round of under 1 ms of work gets one round of auto's
# five (CI once stored a session of 1 round for test_steady).
TESTS = """
import os


def work(n):
    total = 0
    for i in range(n):
        total += i * i
    return total


def test_steady():
    assert work(100_000) > 0


def test_changes():
    assert work(100_000 * int(os.environ.get("OPPROF_TEST_FACTOR", "1"))) > 0
"""


@pytest.mark.slow
def test_update_runs_pool_until_something_changes(
    pytester: pytest.Pytester,
    monkeypatch: pytest.MonkeyPatch,
    run_pytest: PytestRunner,
) -> None:
    monkeypatch.setenv("PYTHONPATH", str(Path(pooling.__file__).parents[2]))
    pytester.makepyfile(TESTS)
    # Rounds counted exactly: rounds that waited for a CPU are kept, not replaced.
    args = ["--opprof-update-baselines", "--opprof-capture", "none", "--opprof-max-wait=100%"]
    # A generous tolerance, times as measured: the steady test must pass on a busy machine
    # too (and not be confirmed with auto's 4 more rounds, which would change its rounds),
    # and the slowed one regress whatever the speed references say (load 4-5 on 2 cores
    # failed this 3 times in 5 at 300% with the scaling's speed-change limit).
    args += ["--opprof-time-tolerance", "1000%", "--opprof-raw-times"]
    result = run_pytest(*args)
    result.assert_outcomes(passed=2)
    assert stored_test(pytester.path, "test_steady")["rounds"] == 5
    assert "sessions" not in stored_test(pytester.path, "test_steady")
    run_pytest(*args).stdout.fnmatch_lines(["2 test(s) showed no real change*"])
    assert stored_test(pytester.path, "test_steady")["sessions"] == [5, 5]
    for _ in range(POOLED_SESSIONS):
        run_pytest(*args)
    steady = stored_test(pytester.path, "test_steady")
    assert steady["sessions"] == [5] * POOLED_SESSIONS and steady["rounds"] == 5 * POOLED_SESSIONS
    # Forty times slower: the update replaces the pooled rounds with its own, all 9 of them
    # (a time beyond its tolerance is confirmed with more rounds before it is judged).
    monkeypatch.setenv("OPPROF_TEST_FACTOR", "40")
    result = run_pytest(*args)
    result.stdout.fnmatch_lines(["*REGRESSED*test_changes*", "1 test(s) showed no real change*"])
    changed = stored_test(pytester.path, "test_changes")
    assert changed["rounds"] == AUTO_ROUNDS + CONFIRM_ROUNDS and "sessions" not in changed
    assert stored_test(pytester.path, "test_steady")["sessions"] == [5] * POOLED_SESSIONS


WOBBLING = """
import os
import time

import numpy as np


def busy(seconds):
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def test_steady():
    busy(0.003 * float(os.environ.get("OPPROF_WOBBLE", "1")))


def test_varying_flops():
    # Unseeded: every round does a different amount of work (like threads interleaving).
    n = int(np.random.randint(200, 260))
    np.ones((n, 32)) @ np.ones((32, 32))
    busy(0.002)


def test_fixed_flops():
    n = int(os.environ.get("OPPROF_N", "200"))
    np.ones((n, 32)) @ np.ones((32, 32))
    busy(0.002)
"""


@pytest.mark.slow
def test_update_runs_of_an_unchanged_suite_pool_and_a_flops_change_replaces(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, run_pytest: PytestRunner
) -> None:
    pytester.makepyfile(WOBBLING)
    # 9 rounds, fixed: no confirmation rounds change a session's size, and two runs of the
    # varying test lie wholly apart with p = 2/C(18, 9).  Rounds that waited for a CPU
    # (other processes on this machine) are left out of the time verdict, or leave the
    # times not judged: neither is a change.
    args = ["--opprof-update-baselines", "--opprof-capture", "numpy", "--opprof-rounds", "9"]
    args += ["--opprof-time-tolerance", "1000%"]
    for wobble in ("1.0", "1.15", "0.9"):  # times differ from run to run, within tolerance
        monkeypatch.setenv("OPPROF_WOBBLE", wobble)
        result = run_pytest(*args)
        result.assert_outcomes(passed=3)
    result.stdout.fnmatch_lines(["3 test(s) showed no real change*"])
    assert "changed for real" not in result.stdout.str()
    for name in ("test_steady", "test_varying_flops", "test_fixed_flops"):
        entry = stored_test(pytester.path, name)
        assert entry["sessions"] == [9, 9, 9] and entry["rounds"] == 27, name
    varying = stored_test(pytester.path, "test_varying_flops")["summary"]
    assert isinstance(varying, dict)
    low, high = varying["ranges"]["flops"]
    assert 200 * 2 * 32 * 32 <= low < high < 260 * 2 * 32 * 32
    for name in ("test_steady", "test_fixed_flops"):
        assert "ranges" not in json.dumps(stored_test(pytester.path, name)), name

    # Twice the rows: a real FLOPs change replaces the pooled entry with this run alone.
    monkeypatch.setenv("OPPROF_N", "400")
    result = run_pytest(*args)
    result.stdout.fnmatch_lines(
        [
            "2 test(s) showed no real change*",
            "1 test(s) changed for real and replaced their baseline, e.g. "
            f"*::test_fixed_flops: flops changed: {200 * 2 * 32 * 32:,} in the baseline, "
            f"{400 * 2 * 32 * 32:,} now",
        ]
    )
    fixed = stored_test(pytester.path, "test_fixed_flops")
    assert fixed["rounds"] == 9 and "sessions" not in fixed
    assert isinstance(fixed["summary"], dict) and fixed["summary"]["flops"] == 400 * 2 * 32 * 32
    assert stored_test(pytester.path, "test_steady")["sessions"] == [9, 9, 9]
