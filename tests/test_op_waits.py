"""Per-op waits for a CPU: the switch bit and the run-queue wait each event carries.

Real processes take the CPU (``busy_machine`` pins this process and two CPU-bound
processes to one CPU), so the waits measured are the kernel's, not simulated.
"""

from __future__ import annotations

import json
import os
import time
from typing import TYPE_CHECKING

import numpy as np
import pytest
from load_helpers import busy_machine, preempting_cpu

import pytest_opprof as opprof
from pytest_opprof import _native
from pytest_opprof.native_layout.records import FLAG_SWITCHED

if TYPE_CHECKING:
    from run_helpers import PytestRunner


def supported() -> bool:
    """Whether this thread's switch counter opened (known once the thread has recorded)."""
    _record(1)
    return bool(_native.lib.opprof_switches_supported() == 1)


REFUSED = "this kernel refuses the thread's switch counter (the first test checks what is recorded)"


def spin_cpu(seconds: float) -> float:
    """Busy-wait ``seconds`` of this thread's CPU time; return the CPU time it took."""
    t0 = time.thread_time()
    while time.thread_time() - t0 < seconds:
        pass
    return time.thread_time() - t0


def scopes(prof: opprof.profile, name: str) -> np.ndarray:
    events = prof.records().events
    out: np.ndarray = events[events["name"] == _native.intern(name)]
    return out


def _record(work: int = 10) -> tuple[opprof.profile, list[float]]:
    cpu = []
    with opprof.profile(capture=["numpy"], profile_memory=False) as prof:
        for _ in range(work):
            with opprof.record_function("spin"):
                cpu.append(spin_cpu(0.004))
            with opprof.record_function("sleep"):
                time.sleep(0.001)
            np.add(np.ones(8), 1.0)
    return prof, cpu


def test_every_event_says_how_long_it_waited_or_that_it_was_not_measured() -> None:
    prof, _ = _record()
    events = prof.records().events
    if not supported():
        # Refused here (seccomp, perf_event_paranoid): nothing is flagged or claimed.
        assert (events["wait_ns"] == -1).all()
        assert not (events["flags"] & FLAG_SWITCHED).any()
        return
    timed = events[events["kind"] != 3]
    duration = timed["end_ns"] - timed["start_ns"]
    switched = (timed["flags"] & FLAG_SWITCHED) != 0
    assert (timed["wait_ns"] >= 0).all()
    assert (timed["wait_ns"] <= duration).all()
    assert (timed["wait_ns"][~switched] == 0).all()
    # A sleep leaves the CPU by itself: always switched, and the sleep is not a wait for
    # a CPU (only the time a busy machine keeps the woken thread queued is).  Counted as
    # one, a 1 ms sleep's wait would be its whole 1.1 ms; in one CI run, under the whole
    # suite's load, one sleep of 10 took 1.10 ms with 0.45 ms counted queued (not
    # explained: queued after waking, it would have taken 1.45 ms), so each sleep keeps
    # at least half its millisecond out of its wait, and their median all of it.
    sleeps = scopes(prof, "sleep")
    assert ((sleeps["flags"] & FLAG_SWITCHED) != 0).all()
    asleep = sleeps["end_ns"] - sleeps["start_ns"] - sleeps["wait_ns"]
    assert (asleep >= 500_000).all(), (sleeps["end_ns"] - sleeps["start_ns"], sleeps["wait_ns"])
    assert np.median(asleep) >= 1_000_000, asleep


def test_no_op_waits_longer_than_it_lasted_however_its_thread_is_preempted() -> None:
    """A preemption between an op's reading of its thread's wait and its own tick
    (either end) waited outside the op: a 0.4 us ``numpy.add`` once took a whole
    8 ms preemption for its own and waited 20,000 times longer than it lasted.  Short
    ops among frequent switches put some of them there in half a second."""
    if not supported():
        pytest.skip(REFUSED)
    x = np.ones(4)
    with preempting_cpu(), opprof.profile(capture=["numpy"], profile_memory=False) as prof:
        t0 = time.monotonic()
        while time.monotonic() - t0 < 0.5:
            for _ in range(1000):
                np.add(x, 1.0)
    adds = scopes(prof, "numpy.add")
    switched = (adds["flags"] & FLAG_SWITCHED) != 0
    assert switched.any()  # the load under test: ops were switched out
    over = adds["wait_ns"] > adds["end_ns"] - adds["start_ns"]
    assert not over.any(), ((adds["end_ns"] - adds["start_ns"])[over], adds["wait_ns"][over])


def test_an_op_on_a_shared_cpu_waits_and_its_wall_less_wait_is_its_work() -> None:
    if not supported():
        pytest.skip(REFUSED)
    with busy_machine(seconds=20, per_core=1, one_cpu=True, last_cpu=True):
        prof, cpu = _record()
    spins = scopes(prof, "spin")
    wall = spins["end_ns"] - spins["start_ns"]
    wait = spins["wait_ns"]
    # A CPU-bound process on our CPU: a 4 ms op is switched out and waits.
    assert ((spins["flags"] & FLAG_SWITCHED) != 0).mean() >= 0.8, (wall, wait)
    assert np.median(wait) > 0.5 * np.median(wall - wait), (wall, wait)
    # What is left is the op's CPU time, within a scheduler tick's rounding.
    work_ratio = (wall - wait) / (np.array(cpu) * 1e9)
    assert 0.95 < np.median(work_ratio) < 1.10, work_ratio


def test_a_forked_child_measures_its_own_waits() -> None:
    if not supported():
        pytest.skip(REFUSED)
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child reports through the pipe
        code = 1
        try:
            prof, _ = _record(3)
            sleeps = scopes(prof, "sleep")
            ok = ((sleeps["flags"] & FLAG_SWITCHED) != 0).all() and (sleeps["wait_ns"] >= 0).all()
            code = 0 if ok else 2
        finally:
            os.write(write, bytes([code]))
            os._exit(0)
    os.close(write)
    status = os.read(read, 1)
    os.close(read)
    os.waitpid(pid, 0)
    # The parent's own counter still works after the fork.
    prof, _ = _record(2)
    assert ((scopes(prof, "sleep")["flags"] & FLAG_SWITCHED) != 0).all()
    assert status == bytes([0])


SPIN_TEST = """
import time

import pytest_opprof as opprof


def test_spins():
    with opprof.record_function("kernel"):
        t0 = time.thread_time()
        while time.thread_time() - t0 < 0.006:  # 6 ms of this thread's CPU time
            pass
"""


def test_an_ops_time_in_the_report_leaves_out_its_wait_for_a_cpu(
    pytester: pytest.Pytester, run_pytest: PytestRunner
) -> None:
    if not supported():
        pytest.skip(REFUSED)
    pytester.makepyfile(test_spin=SPIN_TEST)
    with busy_machine(seconds=30, per_core=1, one_cpu=True, last_cpu=True):
        result = run_pytest(
            "--opprof",
            "--opprof-rounds=3",
            "--opprof-report=report.json",
            "--opprof-report-details",
        )
    result.assert_outcomes(passed=1)
    (test,) = json.loads((pytester.path / "report.json").read_text())["tests"].values()
    summary = test["summary"]
    wall = summary["wall_time"]["samples_ns"]
    wait = summary["wait_time"]["samples_ns"]
    kernel = test["ops"]["kernel"]["self_cpu_time"]["samples_ns"]
    # The rounds waited a good part of their time on the shared CPU ...
    assert all(w > 0.25 * t for w, t in zip(wait, wall, strict=True)), (wall, wait)
    # ... and the scope's time is its 6 ms of work, not the 10-16 ms it took.
    assert all(5.5e6 < k < 7.5e6 for k in kernel), (kernel, wall, wait)


def test_an_ops_self_wait_is_its_wait_less_its_childrens() -> None:
    from pytest_opprof.model.waits import op_waits_ns
    from pytest_opprof.native_layout.records import EVENT_DTYPE, Records

    ev = np.zeros(4, dtype=EVENT_DTYPE)
    ev["id"] = [1, 2, 3, 4]
    ev["parent"] = [-1, 1, 1, 2]  # outer > (inner > leaf), outer > quiet
    ev["name"] = [0, 1, 2, 1]
    ev["start_ns"], ev["end_ns"] = [0, 10, 50, 20], [100, 40, 60, 30]
    ev["wait_ns"] = [50, 30, 0, 12]  # the leaf (an inner) waited 12 of its parent's 30
    waits = op_waits_ns(Records(events=ev, names=["outer", "inner", "quiet"]))
    assert waits == {"outer": (20, 50), "inner": (18 + 12, 30 + 12)}
    ev["wait_ns"] = -1  # not measured: nothing to take out
    assert op_waits_ns(Records(events=ev, names=["outer", "inner", "quiet"])) == {}
