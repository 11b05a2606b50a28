"""Suite-wide: the one way tests start a pytest run with the plugin (``run_pytest``).

pytest-randomly is installed (the plugin is tested beside it), and it would
shuffle every inner run and import numpy in it.  ``pytester`` clears
``PYTEST_ADDOPTS`` when it starts, so it is set after; tests that mean to run
beside pytest-randomly remove it (tests/test_plugin_hostile_setups.py).
"""

from __future__ import annotations

import contextlib
import fcntl
import gc
import importlib.metadata
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import pytest_opprof

REPO_ROOT = Path(pytest_opprof.__file__).resolve().parents[1]


def plugin_args() -> list[str]:
    """``-p`` for the plugin unless its entry point is installed (then -p would clash)."""
    installed = any(
        ep.value == "pytest_opprof.plugin"
        for ep in importlib.metadata.entry_points(group="pytest11")
    )
    return [] if installed else ["-p", "pytest_opprof.plugin"]


PLUGIN = plugin_args()


@pytest.fixture
def pytester(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    monkeypatch.setenv("PYTEST_ADDOPTS", "-p no:randomly")
    return pytester


def _native_state() -> dict[str, object]:
    """What an in-process run must leave as it found it: hooks, recording, gc freeze."""
    from pytest_opprof import _native  # loaded by this suite's own tests anyway

    memory = _native.memory_counters()
    return {
        "gc_frozen": gc.get_freeze_count(),
        "numpy_installed": _native.lib.opprof_numpy_installed(),
        "memory_installed": memory.installed,
        "python_memory_installed": memory.python_installed,
        "recording": _native.is_recording(),
        "capacity": _native.capacity(),
    }


class PytestRunner:
    """Runs pytest with the plugin and without the cache in ``pytester``'s directory.

    Calling it starts ``python -m pytest`` in a subprocess: what loads the native core
    and installs hooks (``--opprof`` with a test that reaches its call phase) must never
    share a process with this suite.  ``inprocess`` is for runs that stop before any
    hook is installed (option and marker parsing, usage errors): it checks afterwards
    that nothing native was left changed.
    """

    def __init__(self, pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
        self.pytester = pytester
        # Under `pytest -n`, inherited worker variables make a child pytest look like an
        # xdist worker to other plugins (pytest-benchmark disables itself and warns).
        for name in ("PYTEST_XDIST_WORKER", "PYTEST_XDIST_WORKER_COUNT", "PYTEST_XDIST_TESTRUNUID"):
            monkeypatch.delenv(name, raising=False)
        # The subprocess runs in a temporary directory: make the package importable there.
        parts = [str(REPO_ROOT), os.environ.get("PYTHONPATH", "")]
        monkeypatch.setenv("PYTHONPATH", os.pathsep.join(p for p in parts if p))

    def __call__(self, *args: str, python: tuple[str, ...] = ()) -> pytest.RunResult:
        """``python [python...] -m pytest -p no:cacheprovider args`` in a subprocess.

        Times are judged at any machine speed unless ``args`` set the limit: under
        ``pytest -n`` the other workers' tests move the speed references by 25-60% between
        a baseline's recording and its judging seconds later, by design of the suite, and
        the tests of that limit (test_verdict_speed.py) set it themselves."""
        cmd = [sys.executable, *python, "-m", "pytest", *PLUGIN, "-p", "no:cacheprovider"]
        profiled = any(a.startswith("--opprof") for a in args) and "no:opprof" not in args
        if profiled and not any(a.startswith("--opprof-max-speed-change") for a in args):
            cmd.append("--opprof-max-speed-change=off")
        return self.pytester.run(*cmd, *args, timeout=600)

    def parseconfig(self, *args: str) -> pytest.Config:
        """The configuration these arguments (and pytester's ini file) give, with the plugin."""
        return self.pytester.parseconfig(*PLUGIN, *args)

    def inprocess(self, *args: str) -> pytest.RunResult:
        """The same run inside this process; fails if it left hooks or gc state behind."""
        before = _native_state()
        result = self.pytester.runpytest_inprocess(*PLUGIN, "-p", "no:cacheprovider", *args)
        after = _native_state()
        assert after == before, f"the in-process run left {after}, not {before}"
        return result


@pytest.fixture
def run_pytest(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> PytestRunner:
    """A pytest run with the plugin, in a subprocess (call) or in this process (``.inprocess``)."""
    return PytestRunner(pytester, monkeypatch)


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


@pytest.fixture(autouse=True)
def _alone_under_xdist(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[None]:
    """Under ``pytest -n``, a test marked ``alone`` runs while no other worker runs a test.

    Its times are the verdict's subject: the other worker's pytest runs share this
    machine's cores (on a 2-vCPU VM, hyperthreads of one core) and slow a Python loop by
    20-30% with no wait for a CPU to measure; that made unchanged code fail in CI.  Every
    test takes a shared lock, a marked one the exclusive lock, through a turnstile that
    keeps a waiting marked test from being starved by the other worker's next tests."""
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        yield
        return
    root = tmp_path_factory.getbasetemp().parent  # shared by this run's workers
    alone = request.node.get_closest_marker("alone") is not None
    with (
        open(root / "opprof-turnstile.lock", "a") as turnstile,
        open(root / "opprof-alone.lock", "a") as running,
    ):
        fcntl.flock(turnstile, fcntl.LOCK_EX)
        try:
            fcntl.flock(running, fcntl.LOCK_EX if alone else fcntl.LOCK_SH)
        finally:
            if not alone:
                fcntl.flock(turnstile, fcntl.LOCK_UN)
        try:
            yield
        finally:
            fcntl.flock(running, fcntl.LOCK_UN)
            if alone:
                fcntl.flock(turnstile, fcntl.LOCK_UN)
