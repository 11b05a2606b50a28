"""The contention probe reads what Linux says about a round's waiting for a CPU."""

from __future__ import annotations

import sys
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING
from xml.etree import ElementTree

import pytest
from load_helpers import busy_machine

from pytest_opprof.capture.contention import ContentionProbe
from pytest_opprof.gate import store

if TYPE_CHECKING:
    from run_helpers import PytestRunner

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="schedstat is Linux's")


def _spin(seconds: float) -> None:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def _round(probe: ContentionProbe, body: float) -> tuple[int, int, int]:
    probe.start()
    begin = probe.own()
    t0 = time.perf_counter_ns()
    _spin(body)
    wall = time.perf_counter_ns() - t0
    got = probe.stop(begin, probe.own())
    assert got is not None
    return wall, got.run_ns, got.wait_ns


def test_run_and_wait_add_up_to_the_wall_time_of_a_busy_round() -> None:
    probe = ContentionProbe()
    try:
        with busy_machine():
            rounds = [_round(probe, 0.15) for _ in range(3)]
    finally:
        probe.close()
    for wall, run, wait in rounds:
        assert run + wait == pytest.approx(wall, rel=0.1)
    # Four busy processes per core's worth of competition: the round waited for a CPU.
    assert sum(w for _, _, w in rounds) > 0.2 * sum(wall for wall, _, _ in rounds)


def test_threads_started_in_the_round_are_counted() -> None:
    probe = ContentionProbe()
    try:
        probe.start()
        begin = probe.own()
        worker = threading.Thread(target=_spin, args=(0.05,))
        worker.start()
        worker.join(timeout=10)
        # The thread exited: its figures went with it, which only under-counts.
        alive = threading.Event()
        done = threading.Event()

        def spin_then_wait() -> None:
            _spin(0.05)
            alive.set()
            done.wait(10)

        keeper = threading.Thread(target=spin_then_wait)
        keeper.start()
        assert alive.wait(10)
        got = probe.stop(begin, probe.own())
        done.set()
        keeper.join(timeout=10)
    finally:
        probe.close()
    assert got is not None
    # The live thread spun 50 ms of wall time: on a CPU or waiting for one.
    assert got.threads_run_ns + got.threads_wait_ns >= 40_000_000
    assert got.threads_run_ns > 0


def test_a_probe_follows_the_thread_that_runs_the_round() -> None:
    probe = ContentionProbe()
    try:
        _round(probe, 0.01)
        results: list[tuple[int, int, int]] = []
        other = threading.Thread(target=lambda: results.append(_round(probe, 0.05)))
        other.start()
        other.join(timeout=10)
        ((wall, run, wait),) = results
        assert run + wait == pytest.approx(wall, rel=0.2)
        assert run >= 0.5 * wall or wait > 0
    finally:
        probe.close()


def test_a_probe_used_inside_another_probes_round_leaves_its_figures_alone() -> None:
    # A thread that ran long before the rounds: each probe counts its share of its own
    # round only, not the thread's life so far, however the two probes interleave.
    stop = threading.Event()
    spinner = threading.Thread(target=lambda: stop.wait(30))
    spinner.start()
    outer, inner = ContentionProbe(), ContentionProbe()
    busy = threading.Thread(target=_spin, args=(0.3,))
    try:
        busy.start()
        _spin(0.1)  # the busy thread's life before the rounds: 100 ms or more
        t0 = time.perf_counter_ns()
        outer.start()
        outer_begin = outer.own()
        inner.start()
        inner_begin = inner.own()
        time.sleep(0.02)
        got_inner = inner.stop(inner_begin, inner.own())
        time.sleep(0.02)
        got_outer = outer.stop(outer_begin, outer.own())
        wall = time.perf_counter_ns() - t0
    finally:
        stop.set()
        busy.join(timeout=10)
        spinner.join(timeout=10)
        outer.close()
        inner.close()
    assert got_inner is not None and got_outer is not None
    inner_threads = got_inner.threads_run_ns + got_inner.threads_wait_ns
    outer_threads = got_outer.threads_run_ns + got_outer.threads_wait_ns
    # The busy thread spun through both rounds (the sleeps let it hold the GIL).
    assert outer_threads > inner_threads > 0
    assert outer_threads <= 1.1 * wall + 2_000_000


BUSY_TEST = """
import time

def test_spin():
    end = time.perf_counter() + 0.03
    while time.perf_counter() < end:
        pass
"""


@pytest.mark.slow
def test_the_plugin_keeps_each_rounds_wait_in_the_baseline_and_junit(
    pytester: pytest.Pytester, run_pytest: PytestRunner
) -> None:
    pytester.makepyfile(test_busy=BUSY_TEST)
    with busy_machine():
        result = run_pytest(
            "--opprof-update-baselines",
            "--opprof-rounds=3",
            "--opprof-capture=none",
            "--junitxml=junit.xml",
        )
    result.assert_outcomes(passed=1)
    (path,) = Path(pytester.path, "baselines").rglob("*.json")
    (test,) = store.load(path).values()
    assert test.summary.wait_time is not None
    waits = test.summary.wait_time.samples_ns
    walls = test.summary.wall_time.samples_ns
    assert len(waits) == len(walls) == 3
    # Stored to 3 significant digits, like every time.
    assert all(0 <= w <= wall * 1.01 for w, wall in zip(waits, walls, strict=True))
    # Beside two CPU-bound processes per core, the test's thread waited for a CPU.
    assert sum(waits) > 0.1 * sum(walls)
    props = {
        p.get("name"): p.get("value")
        for p in ElementTree.parse(pytester.path / "junit.xml").iter("property")
    }
    assert float(props["opprof_wait_share"]) == pytest.approx(sum(waits) / sum(walls), abs=0.01)
