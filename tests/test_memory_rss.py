"""Resident memory stays flat across many profiled sessions in one process.

Runs in a fresh interpreter so other tests' allocations do not blur the
measurement.  Each session installs and removes the numpy handler (every other
one the Python allocator hooks too), records scopes, numpy ops and memory
events, drains, and builds the key averages, like a plugin run per test.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

SESSIONS = 1000
LIMIT_BYTES = 5 * 1024 * 1024

SCRIPT = f"""
import gc, os
import numpy as np
import pytest_opprof as opprof

def rss():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")

def session(i):
    with opprof.profile(python_memory=bool(i % 2)) as prof:
        with opprof.record_function("step"):
            a = np.ones(10_000)
            b = np.concatenate([a, a * 2])
            del a
        objs = [object() for _ in range(100)]
        del b, objs
    prof.key_averages()
    assert prof.memory is not None
    if i % 2 == 0:  # numpy data only: nothing the session made survives it
        assert prof.memory.leaked_bytes == 0, prof.memory

for i in range(50):
    session(i)
gc.collect()
before = rss()
for i in range({SESSIONS}):
    session(i)
gc.collect()
print(rss() - before)
"""


@pytest.mark.skipif(not os.path.exists("/proc/self/statm"), reason="needs Linux /proc")
@pytest.mark.slow
def test_rss_stays_flat_over_many_sessions() -> None:
    out = subprocess.run(
        [sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=600
    )
    assert out.returncode == 0, out.stderr
    growth = int(out.stdout.strip().splitlines()[-1])
    print(f"RSS growth over {SESSIONS} profiled sessions: {growth / 1024:.0f} KiB")
    assert growth < LIMIT_BYTES
