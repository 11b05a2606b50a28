"""Nothing grows with the number of tests: process RSS over 1,000 profiled tests, and
the core's per-thread buffers after threads exit (``_native.buffer_stats``)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from typing import TYPE_CHECKING

import pytest
from run_helpers import REPO_ROOT

if TYPE_CHECKING:
    from run_helpers import PytestRunner


RSS_CONFTEST = """
import json
import os

import pytest

PAGE = os.sysconf("SC_PAGE_SIZE")
SEEN = {}


def rss_bytes():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * PAGE


def pytest_runtest_teardown(item):
    n = len(SEEN)
    SEEN[item.nodeid] = True
    if n == 100:  # after warm-up: caches, interned names, first buffers
        SEEN["_start"] = rss_bytes()


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config):
    with open("rss.json", "w") as f:
        json.dump({"start": SEEN["_start"], "end": rss_bytes(), "tests": len(SEEN) - 1}, f)
"""

RSS_TESTS = """
import numpy as np
import pytest

@pytest.mark.parametrize("n", range(1000))
def test_ops(n, opprof):
    a = np.arange(256.0).reshape(16, 16) + n
    with opprof.record_function("block"):
        for _ in range(20):
            a = (a @ a.T) / a.sum()
    assert a.shape == (16, 16)
"""


def _rss_growth(pytester: pytest.Pytester, run_pytest: PytestRunner, *args: str) -> float:
    """Bytes of RSS growth per test over tests 100..1000 of a run."""
    run_pytest("-q", *args).assert_outcomes(passed=1000)
    data = json.loads((pytester.path / "rss.json").read_text())
    assert data["tests"] == 1000
    growth = data["end"] - data["start"]
    label = " ".join(args) or "plain"
    print(
        f"{label}: RSS {data['start'] / 2**20:.1f} -> {data['end'] / 2**20:.1f} MiB "
        f"({growth / 2**20:+.1f} MiB, {growth / 900 / 1024:.1f} KiB per test)"
    )
    return growth / 900


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/statm")
@pytest.mark.slow
def test_rss_growth_over_1000_profiled_tests_is_bounded(
    pytester: pytest.Pytester, run_pytest: PytestRunner
) -> None:
    pytester.makeconftest(RSS_CONFTEST)
    pytester.makepyfile(test_rss=RSS_TESTS)
    plain = _rss_growth(pytester, run_pytest)
    profiled = _rss_growth(pytester, run_pytest, "--opprof", "--opprof-capture", "numpy")
    # pytest keeps every report (~14 KiB a test here); opprof keeps each test's
    # summary (per-op figures), never its events: measured ~16 KiB more.
    assert profiled - plain < 32 * 1024


BUFFERS_SCRIPT = textwrap.dedent(
    """
    import json, sys, threading
    sys.path.insert(0, sys.argv[1])
    import numpy as np
    import pytest_opprof as opprof
    from pytest_opprof import _native

    def work():
        a = np.ones(8)
        for _ in range(20_000):  # past the first chunk: large chunks get allocated
            a = a + 1.0

    seen = []
    for session in range(12):
        with opprof.profile(capture=["numpy"]) as prof:
            threads = [threading.Thread(target=work) for _ in range(4)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            work()
        assert len(prof.records()) >= 5 * 20_000
        seen.append(_native.buffer_stats()._asdict())
    with opprof.profile(capture=["numpy"]):  # retires the last session's dead threads
        pass
    seen.append(_native.buffer_stats()._asdict())
    print(json.dumps(seen))
    """
)


@pytest.mark.slow
def test_thread_buffers_are_freed_after_threads_exit() -> None:
    done = subprocess.run(
        [sys.executable, "-c", BUFFERS_SCRIPT, str(REPO_ROOT)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout)
    for stats in seen[:-1]:
        assert stats["live"] >= 1 and stats["dead"] == 4  # this session's threads, not older
        assert stats["parked"] <= 4  # states of exited threads are reused
    last = seen[-1]
    assert last["dead"] == 0 and last["parked"] == 4
    held_with_threads = seen[-2]["bytes"]
    print(
        f"core buffers: {held_with_threads / 2**20:.1f} MiB with 4 dead threads, "
        f"{last['bytes'] / 2**20:.1f} MiB after they were freed"
    )
    # Only the main thread keeps its (at most two) chunks; the parked states are small.
    assert last["bytes"] < held_with_threads / 3
    assert max(s["bytes"] for s in seen[1:-1]) <= 1.1 * seen[1]["bytes"]  # no growth
