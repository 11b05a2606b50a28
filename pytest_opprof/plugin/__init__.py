"""pytest glue: the ``opprof`` options, the ``profile`` marker and the ``opprof`` fixture.

Loaded by every pytest run through the ``pytest11`` entry point, so this module
imports neither numpy nor the native core.  Only ``--opprof`` creates the two sides
that do the work, each under a ``StashKey`` on ``config.stash`` from
``pytest_configure`` to ``pytest_unconfigure``: the
:class:`~pytest_opprof.plugin.worker.Worker` that runs and judges tests, registered
wherever tests may run, and the :class:`~pytest_opprof.plugin.controller.Controller`
that collects, writes and reports, registered everywhere but on a pytest-xdist
worker.  A single process has both, sharing one ``BaselineSession``.
"""

from __future__ import annotations

from contextlib import AbstractContextManager, ContextDecorator
from typing import TYPE_CHECKING

import pytest

from pytest_opprof.ab import partner_key, unmeasured_key
from pytest_opprof.ab.options import add_ab_options, read_against
from pytest_opprof.capture.scope_names import scope_name
from pytest_opprof.errors import MarkerUsageError
from pytest_opprof.plugin.marker import MARKER_NAME, marker_help, marker_values
from pytest_opprof.plugin.options import add_options, is_enabled, read_options

if TYPE_CHECKING:
    from pytest_opprof.ab.run import ABController
    from pytest_opprof.plugin.controller import Controller
    from pytest_opprof.plugin.worker import Worker

marker_error_key: pytest.StashKey[str] = pytest.StashKey()
"""Why a collected test's ``profile`` marker is wrong (only for such a test)."""
worker_key: pytest.StashKey[Worker] = pytest.StashKey()
controller_key: pytest.StashKey[Controller] = pytest.StashKey()
ab_key: pytest.StashKey[ABController] = pytest.StashKey()

WORKER_NAME = "opprof-worker"
TIMEOUT_WINDOW_NAME = "opprof-timeout-window"
REPEATABLE_NAME = "opprof-repeatable"
CONTROLLER_NAME = "opprof-controller"


def pytest_addoption(parser: pytest.Parser) -> None:
    add_options(parser)
    add_ab_options(parser)


def pytest_configure(config: pytest.Config) -> None:
    # Always registered, so --strict-markers accepts the marker with or without --opprof.
    config.addinivalue_line("markers", marker_help())
    if not is_enabled(config):
        return
    options = read_options(config)
    from pytest_opprof.plugin.repeatable import benchmark_loops_off

    benchmark_loops_off(config)
    partner = config.stash.get(partner_key, None)  # this process is an A/B base side
    against = read_against(config) if partner is None else None
    from pytest_opprof.capture.plan import plan
    from pytest_opprof.errors import OpprofError
    from pytest_opprof.gate.session import BaselineSession
    from pytest_opprof.plugin.controller import Controller
    from pytest_opprof.plugin.worker import Worker

    try:
        # Resolved on every side, so a bad name stops the session before any test runs.
        chosen = plan(options.capture, python_memory=options.python_memory)
    except OpprofError as exc:
        raise pytest.UsageError(f"--opprof-capture / opprof_capture: {exc}") from None
    if options.gate.html_path is not None:
        from pytest_opprof.render.html import check_available

        try:
            check_available()
        except OpprofError as exc:
            raise pytest.UsageError(f"--opprof-html / opprof_html: {exc}") from None
    worker: Worker | None
    controller: Controller | None = None
    if partner is not None:  # the base side of an A/B run: rounds on command, no verdict
        from pytest_opprof import _native
        from pytest_opprof.ab.options import AB_ADDRESSES, AB_LAYOUT
        from pytest_opprof.ab.partner import PartnerWorker
        from pytest_opprof.plugin.layout import Layout

        gate = BaselineSession(options.gate, unmeasured=chosen.unmeasured)
        config.stash[unmeasured_key] = chosen.unmeasured
        worker = PartnerWorker(config, options, gate, chosen)
        worker.channel = partner
        worker.layout = Layout() if AB_LAYOUT.read(config) == "shuffled" else None
        if AB_ADDRESSES.read(config) == "fixed":
            # Both sides' numpy blocks start at a cache line (docs/how-it-works.md,
            # "Where a block starts"), from collection on: the arrays a test module
            # makes at import too.  Held until the process ends.
            _native.memory_align(True)
            _native.memory_install()
    elif against is not None:
        from pytest_opprof.ab.run import configure

        worker, controller, ab = configure(config, options, against, chosen)
        config.stash[ab_key] = ab
        config.pluginmanager.register(ab, "opprof-ab")
    else:
        gate = BaselineSession(options.gate, unmeasured=chosen.unmeasured)
        if options.history is not None:
            from pytest_opprof.history.gate import HistoryGate

            gate.history = HistoryGate(options.history)
        if not hasattr(config, "workerinput"):  # not a pytest-xdist worker
            controller = Controller(options, gate, chosen)
        worker = Worker(
            config,
            options,
            gate,
            chosen,
            deliver=controller.take if controller is not None else None,
            not_measured=controller.not_measured if controller is not None else None,
        )
    if controller is not None:
        config.stash[controller_key] = controller
        config.pluginmanager.register(controller, CONTROLLER_NAME)
    if worker is not None:
        from pytest_opprof.plugin.repeatable import Repeatable
        from pytest_opprof.plugin.timeout_window import TimeoutWindow

        config.stash[worker_key] = worker
        config.pluginmanager.register(worker, WORKER_NAME)
        config.pluginmanager.register(TimeoutWindow(), TIMEOUT_WINDOW_NAME)
        config.pluginmanager.register(Repeatable(), REPEATABLE_NAME)


def pytest_itemcollected(item: pytest.Item) -> None:
    """Check the test's ``profile`` marker as it is collected, in every run: a typo
    (``row_limt=20``) errors the test with and without ``--opprof`` alike, not only in
    the profiled run.  Parsing the keywords loads neither numpy nor the native core."""
    mark = item.get_closest_marker(MARKER_NAME)
    if mark is None:
        return
    try:
        marker_values(mark.args, mark.kwargs)
    except MarkerUsageError as exc:
        item.stash[marker_error_key] = str(exc)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    """A test whose marker is wrong errors before its fixtures run, naming the keyword."""
    error = item.stash.get(marker_error_key, None)
    if error is not None:
        pytest.fail(error, pytrace=False)


def pytest_unconfigure(config: pytest.Config) -> None:
    # pytest calls this on every way out of a session, KeyboardInterrupt included.
    worker = config.stash.get(worker_key, None)
    controller = config.stash.get(controller_key, None)
    ab = config.stash.get(ab_key, None)
    try:
        if worker is not None:
            worker.close()
    finally:
        if ab is not None:
            ab.close()
            config.pluginmanager.unregister(ab)
            del config.stash[ab_key]
        if worker is not None:
            config.pluginmanager.unregister(worker)
            config.pluginmanager.unregister(name=TIMEOUT_WINDOW_NAME)
            config.pluginmanager.unregister(name=REPEATABLE_NAME)
            del config.stash[worker_key]
        if controller is not None:
            config.pluginmanager.unregister(controller)
            del config.stash[controller_key]


class _NoScope(ContextDecorator):
    """What ``record_function`` gives without ``--opprof``: a scope that records nothing."""

    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc_info: object) -> None:
        return None


class TestProfiler:
    """The ``opprof`` fixture's value: scopes for the running test's profile."""

    __test__ = False  # not a pytest test class

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        """Whether this run profiles (``--opprof``)."""

    def record_function(self, name: str) -> AbstractContextManager[object]:
        """A named scope (context manager or decorator) shown as its own row and trace span.

        ``name`` must be a ``str`` (``TypeError`` otherwise), with ``--opprof`` or without."""
        if not self.enabled:
            scope_name(name)
            return _NoScope()
        from pytest_opprof.profiler import record_function

        return record_function(name)


@pytest.fixture
def opprof(request: pytest.FixtureRequest) -> TestProfiler:
    """The running test's profiler: ``opprof.record_function("name")`` marks a scope.

    Without ``--opprof`` the scopes do nothing, so a test never needs to branch.
    """
    return TestProfiler(enabled=worker_key in request.config.stash)
