"""A machine made busy on purpose, for the tests of what the plugin does under load."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
from collections.abc import Iterator

_BURN = (
    "import sys, time\nt = time.monotonic()\n"
    "while time.monotonic() - t < float(sys.argv[1]): pass\n"
)


@contextlib.contextmanager
def busy_machine(
    seconds: float = 30.0, per_core: int = 2, one_cpu: bool = False, last_cpu: bool = False
) -> Iterator[None]:
    """``per_core`` CPU-bound processes per core while the block runs: bounded in time (they
    end by themselves after ``seconds``) and ended by pid when the block ends.

    ``one_cpu``: this process, the burners and every process started in the block (the
    pytest runs) share one CPU, so a test's thread waits about ``per_core / (per_core +
    1)`` of its time whatever else the machine runs: a load a test can rely on.  That CPU
    is the first one allowed, or with ``last_cpu`` the last: two such tests in two
    pytest-xdist workers then load different CPUs, not one with both."""
    saved = os.sched_getaffinity(0) if one_cpu else None
    if saved is not None:
        os.sched_setaffinity(0, {max(saved) if last_cpu else min(saved)})
    procs = [
        subprocess.Popen([sys.executable, "-c", _BURN, str(seconds)])
        for _ in range(per_core * (1 if one_cpu else os.cpu_count() or 1))
    ]
    try:
        time.sleep(0.2)
        yield
    finally:
        for proc in procs:
            proc.kill()
            proc.wait()
        if saved is not None:
            os.sched_setaffinity(0, saved)


_WAKE = (
    "import sys, time\nend = time.monotonic() + float(sys.argv[1])\n"
    "while time.monotonic() < end: time.sleep(float(sys.argv[2]))\n"
)


@contextlib.contextmanager
def preempting_cpu(seconds: float = 10.0, every_s: float = 2e-5) -> Iterator[None]:
    """This process and one that wakes every ``every_s`` share this process's last CPU
    while the block runs: each wakeup may preempt this thread, thousands of short
    switches a second that land anywhere in its code, where ``busy_machine``'s burners
    switch it at the scheduler's slices.  Ended by pid, or by itself after ``seconds``."""
    saved = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {max(saved)})
    proc = subprocess.Popen([sys.executable, "-c", _WAKE, str(seconds), str(every_s)])
    try:
        time.sleep(0.2)
        yield
    finally:
        proc.kill()
        proc.wait()
        os.sched_setaffinity(0, saved)
