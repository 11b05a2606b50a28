"""The one way tests start a pytest run with the plugin: ``PytestRunner`` (the ``run_pytest``
fixture of tests/conftest.py), and what runs outside pytester need (``PLUGIN``, ``REPO_ROOT``)."""

from __future__ import annotations

import gc
import importlib.metadata
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest

import pytest_opprof
from pytest_opprof.capture.sources.torch_observer import build_root

REPO_ROOT = Path(pytest_opprof.__file__).resolve().parents[1]


def plugin_args() -> list[str]:
    """``-p`` for the plugin unless its entry point is installed (then -p would clash)."""
    installed = any(
        ep.value == "pytest_opprof.plugin"
        for ep in importlib.metadata.entry_points(group="pytest11")
    )
    return [] if installed else ["-p", "pytest_opprof.plugin"]


PLUGIN = plugin_args()

# Read before any test: pytester moves HOME, and with it torch's default extension cache.
TORCH_EXTENSIONS = build_root()


INNER_ADDOPTS = "-p no:randomly -p no:hypothesispytest"
"""``PYTEST_ADDOPTS`` of the suite's inner runs: installed plugins none of them uses.
pytest-randomly would shuffle every inner run and import numpy in it; hypothesis's plugin
imports all of hypothesis at every session's end, used or not (about 1 s of CPU, half of a
small profiled run, and again in each A/B partner).  Tests that mean to run beside them
remove it (tests/test_plugin_hostile_setups.py)."""


def run_in_subprocess(
    directory: Path, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """``python -m pytest ARGS`` in ``directory``, in a subprocess with this checkout's
    package and ``env`` added to the environment: for runs a module's fixture makes once
    and its tests share (pytester's directory is a test's own).  An xdist worker's
    variables are left out, so the run is a session of its own."""
    run_env = dict(os.environ, PYTEST_ADDOPTS=INNER_ADDOPTS, **(env or {}))
    for name in ("PYTEST_XDIST_WORKER", "PYTEST_XDIST_WORKER_COUNT", "PYTEST_XDIST_TESTRUNUID"):
        run_env.pop(name, None)
    run_env["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(REPO_ROOT), run_env.get("PYTHONPATH")) if p
    )
    cmd = [sys.executable, "-m", "pytest", *PLUGIN, "-p", "no:cacheprovider"]
    cmd += args
    compile_afresh(directory)
    return subprocess.run(
        cmd, cwd=directory, env=run_env, capture_output=True, text=True, timeout=600, check=False
    )


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


PYCACHE = Path(tempfile.gettempdir(), f"opprof-suite-pycache-{os.getuid()}")
"""Where the suite's processes keep their bytecode: outside the checkout, which stays as
``PYTHONDONTWRITEBYTECODE`` keeps it.  Where that is set, every worker, inner run and A/B
partner compiled and assertion-rewrote everything again: about 4 s of CPU a worker at
collection and 0.3 s a small inner run, a third of it."""


def compile_afresh(directory: Path) -> None:
    """Drop the bytecode of ``directory``'s files: a file a test rewrites at the same size
    within the second has the same stamp, so its old bytecode would run again."""
    shutil.rmtree(PYCACHE / directory.resolve().relative_to(directory.anchor), ignore_errors=True)


def keep_bytecode() -> None:
    """This process and the ones it starts keep their bytecode under ``PYCACHE``."""
    sys.dont_write_bytecode = False
    sys.pycache_prefix = str(PYCACHE)
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    os.environ["PYTHONPYCACHEPREFIX"] = str(PYCACHE)


def prepare_inner_runs(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    """The environment of every pytest run a test starts in ``pytester``'s directory."""
    monkeypatch.setenv("PYTEST_ADDOPTS", INNER_ADDOPTS)
    # Under `pytest -n`, inherited worker variables make a child pytest look like an
    # xdist worker to other plugins (pytest-benchmark disables itself and warns).
    for name in ("PYTEST_XDIST_WORKER", "PYTEST_XDIST_WORKER_COUNT", "PYTEST_XDIST_TESTRUNUID"):
        monkeypatch.delenv(name, raising=False)
    # The subprocess runs in a temporary directory: make the package importable there.
    parts = [str(REPO_ROOT), os.environ.get("PYTHONPATH", "")]
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(p for p in parts if p))
    # pytester's HOME is the test's own directory: torch's extension cache under it
    # made every run that captures torch build the op observer again (15-25 s of
    # CPU each).  The runs share this process's cache, as a user's sessions share
    # theirs; a test of the build sets its own directory.
    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", str(TORCH_EXTENSIONS))
    run = pytester.run

    def run_afresh(*args: Any, **kwargs: Any) -> pytest.RunResult:
        compile_afresh(pytester.path)
        return run(*args, **kwargs)

    monkeypatch.setattr(pytester, "run", run_afresh)


class PytestRunner:
    """Runs pytest with the plugin and without the cache in ``pytester``'s directory.

    Calling it starts ``python -m pytest`` in a subprocess: what loads the native core
    and installs hooks (``--opprof`` with a test that reaches its call phase) must never
    share a process with this suite.  ``inprocess`` is for runs that stop before any
    hook is installed (option and marker parsing, usage errors): it checks afterwards
    that nothing native was left changed.
    """

    def __init__(self, pytester: pytest.Pytester) -> None:
        self.pytester = pytester

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
