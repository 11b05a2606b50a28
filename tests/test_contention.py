"""The contention probe reads what Linux says about a round's waiting for a CPU."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from collections.abc import Iterator

import pytest

from pytest_opprof.capture.contention import ContentionProbe

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="schedstat is Linux's")

BURN = "import time\nt = time.monotonic()\nwhile time.monotonic() - t < 20: pass\n"


def _spin(seconds: float) -> None:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


@pytest.fixture
def burners() -> Iterator[None]:
    """Two CPU-bound processes per core, bounded in time and ended by pid."""
    import os

    procs = [
        subprocess.Popen([sys.executable, "-c", BURN]) for _ in range(2 * (os.cpu_count() or 1))
    ]
    try:
        time.sleep(0.2)
        yield
    finally:
        for proc in procs:
            proc.kill()
            proc.wait()


def _round(probe: ContentionProbe, body: float) -> tuple[int, int, int]:
    probe.start()
    t0 = time.perf_counter_ns()
    _spin(body)
    wall = time.perf_counter_ns() - t0
    got = probe.stop(probe.own())
    assert got is not None
    return wall, got.run_ns, got.wait_ns


def test_run_and_wait_add_up_to_the_wall_time_of_a_busy_round(burners: None) -> None:
    probe = ContentionProbe()
    try:
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
        got = probe.stop(probe.own())
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
