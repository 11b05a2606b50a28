"""Suite-wide fixtures and hooks; the helpers tests import live in tests/run_helpers.py and
tests/load_helpers.py.

pytest-randomly and hypothesis are installed (the plugin is tested beside them), and
inner runs keep them off (``run_helpers.INNER_ADDOPTS``).  ``pytester`` clears
``PYTEST_ADDOPTS`` when it starts, so the environment of its runs is set after
(``run_helpers.prepare_inner_runs``).
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator
from typing import Any

import pytest
from html_helpers import bench_module
from run_helpers import PytestRunner, keep_bytecode, prepare_inner_runs

keep_bytecode()  # before the test modules are collected, and xdist's workers start


@pytest.fixture
def pytester(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    prepare_inner_runs(pytester, monkeypatch)
    return pytester


@pytest.fixture
def run_pytest(pytester: pytest.Pytester) -> PytestRunner:
    """A pytest run with the plugin, in a subprocess (call) or in this process (``.inprocess``)."""
    return PytestRunner(pytester)


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


def _no_browser(why: str) -> None:
    if os.environ.get("OPPROF_REQUIRE_BROWSER") == "1":
        pytest.fail(f"OPPROF_REQUIRE_BROWSER=1 but {why}", pytrace=False)
    pytest.skip(why)


@pytest.fixture
def browser() -> Iterator[Any]:
    """Headless Chromium at 1280 x 800 (bench/_browser.py), for the pages' browser tests;
    skips without it unless ``OPPROF_REQUIRE_BROWSER=1``."""
    browser_mod: Any = bench_module("_browser")
    executable = browser_mod.find_browser()
    if executable is None:
        _no_browser("no Chromium found (apt-get install chromium, or set OPPROF_BROWSER)")
    try:
        import websocket  # noqa: F401
    except ImportError:
        _no_browser("websocket-client is not installed (the test extra)")
    with browser_mod.Browser(executable, width=1280, height=800) as b:
        yield b
