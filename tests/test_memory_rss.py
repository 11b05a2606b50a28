"""Resident memory stays flat across many profiled sessions in one process, and a
profiled pytest session keeps little per test.

Runs in a fresh interpreter so other tests' allocations do not blur the
measurement.  Each session installs and removes the numpy handler (every other
one the Python allocator hooks too), records scopes, numpy ops and memory
events, drains, and builds the key averages, like a plugin run per test.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from run_helpers import PytestRunner

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


RSS_CONFTEST = """
import gc
import os

import pytest

@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config):
    gc.collect()
    # What the session still holds, not the heap glibc keeps after the end-of-session
    # reports freed what they decoded (1.5-4 KiB a test more, by run).
    import ctypes
    ctypes.CDLL(None).malloc_trim(0)
    with open("/proc/self/statm") as f:
        rss = int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    with open(os.environ["RSS_OUT"], "w") as f:
        f.write(str(rss))
"""

MANY_TESTS = """
import os

import numpy as np
import pytest

@pytest.mark.parametrize("i", range(int(os.environ["N_TESTS"])))
def test_op(i):
    a = np.ones((8, 8))
    assert (a @ a + a).sum() > 0
"""


@pytest.mark.skipif(not os.path.exists("/proc/self/statm"), reason="needs Linux /proc")
@pytest.mark.slow
def test_profiled_session_rss_per_test_stays_small(
    pytester: pytest.Pytester, run_pytest: PytestRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The results kept for the end of the session made RSS grow
    # 16-34 KiB per profiled test.  The slope between a 200- and a 2,200-test session,
    # less the same slope without --opprof (pytest's own reports), stays under 4 KiB.
    pytester.makeconftest(RSS_CONFTEST)
    pytester.makepyfile(test_many=MANY_TESTS)
    rss: dict[tuple[bool, int], int] = {}
    for profiled in (False, True):
        for n in (200, 2200):
            out = pytester.path / f"rss-{profiled}-{n}.txt"
            monkeypatch.setenv("N_TESTS", str(n))
            monkeypatch.setenv("RSS_OUT", str(out))
            args = ["--opprof", "--opprof-report", "report.json"] if profiled else []
            run_pytest("-p", "no:randomly", "-q", *args).assert_outcomes(passed=n)
            rss[profiled, n] = int(out.read_text())
    per_test = {p: (rss[p, 2200] - rss[p, 200]) / 2000 for p in (False, True)}
    added = per_test[True] - per_test[False]
    kib = {p: round(v / 1024, 1) for p, v in per_test.items()}
    print(f"RSS per test: {kib[True]} KiB profiled, {kib[False]} KiB plain")
    assert added < 4096, per_test
    report = json.loads((pytester.path / "report.json").read_text(encoding="utf-8"))
    assert len(report["tests"]) == 2200  # every result came back from the spool
