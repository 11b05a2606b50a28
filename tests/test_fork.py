"""A test that forks while other threads use numpy: the children must not hang.

A forked child has only the thread that forked; a native lock another thread held at
that moment stayed locked in the child, and the child's first new thread blocked on it
forever as it started (Python allocates as a thread starts, and the counting hooks take
the memory counters' thread-list lock for a new thread; numpy ops take the registry's).
Before the fix 6 of 10 children hung in this test; now none.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from run_helpers import PytestRunner

FORKING_TESTS = """
import contextlib
import multiprocessing as mp
import os
import threading
from concurrent.futures import ProcessPoolExecutor

import numpy as np
import pytest

from pytest_opprof import _native

FORK = mp.get_context("fork")


def child_work(_=None):
    # A new thread that allocates numpy data, in the child.
    out = []
    t = threading.Thread(target=lambda: out.append(float((np.ones(1000) * 2).sum())), daemon=True)
    t.start()
    t.join(10)
    return 0 if out == [2000.0] else 3


def child_main():
    os._exit(child_work())


@contextlib.contextmanager
def busy():
    # Inside the test body, where the plugin records: 300 parked threads that used
    # numpy fill the thread registry and the memory counters' list; a reader sums
    # them in a loop, as the plugin does around each test: both calls walk a list
    # holding its lock with the GIL released, so a fork often lands while one is
    # held (64 threads, or threads started in a fixture: seldom).
    stop = threading.Event()
    parked = threading.Barrier(301)

    def park():
        np.ones(100).sum()
        parked.wait()
        stop.wait()

    def read():
        while not stop.is_set():
            _native.memory_counters()
            _native.pending()

    threads = [threading.Thread(target=park) for _ in range(300)]
    for t in threads:
        t.start()
    parked.wait()
    threads.append(threading.Thread(target=read))
    threads[-1].start()
    try:
        yield
    finally:
        stop.set()
        for t in threads:
            t.join()
        for p in mp.active_children():  # a hung child must not outlive the test
            p.kill()


def test_fork_processes():
    codes = []
    with busy():
        for _ in range(12):
            p = FORK.Process(target=child_main)
            p.start()
            p.join(20)
            if p.exitcode is None:
                p.kill()
                p.join()
            codes.append(p.exitcode)
    assert codes == [0] * 12


def test_process_pool():
    results = []
    with busy():
        for _ in range(4):  # a new pool each round: its workers are new forks
            ex = ProcessPoolExecutor(3, mp_context=FORK)
            try:
                results += ex.map(child_work, range(3), timeout=60)
            except BaseException:
                for p in mp.active_children():  # hung workers: shutdown would wait for them
                    p.kill()
                raise
            finally:
                ex.shutdown(cancel_futures=True)
    assert results == [0] * 12
"""


def test_children_forked_while_threads_use_numpy_do_not_hang(run_pytest: PytestRunner) -> None:
    run_pytest.pytester.makepyfile(test_forking=FORKING_TESTS)
    result = run_pytest("-q", "--opprof", "-p", "no:randomly")
    result.assert_outcomes(passed=2)


LOCK_HELD_AT_FORK = """
import os, sys, threading
import numpy as np
import pytest_opprof as opprof
from pytest_opprof import _native
from pytest_opprof.capture import recorder, sources

# Another thread of the parent holds the Python-side locks as the fork happens.
held = threading.Event()
release = threading.Event()

def holder():
    with recorder._lock, sources._lock, _native._names_lock:
        held.set()
        release.wait(30)

threading.Thread(target=holder, daemon=True).start()
held.wait(10)
pid = os.fork()
if pid == 0:
    with opprof.profile() as prof:
        np.add(np.ones(3), 1.0)
    names = {prof.records().names[n] for n in prof.records().events["name"]}
    os._exit(0 if "numpy.add" in names else 3)
release.set()
_, status = os.waitpid(pid, 0)
sys.exit(os.waitstatus_to_exitcode(status))
"""


def test_a_child_forked_while_python_locks_are_held_can_profile() -> None:
    import subprocess
    import sys

    from run_helpers import REPO_ROOT

    done = subprocess.run(
        [sys.executable, "-c", LOCK_HELD_AT_FORK],
        env={"PYTHONPATH": str(REPO_ROOT), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr[-2000:]
