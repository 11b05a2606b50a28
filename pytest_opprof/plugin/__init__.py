"""pytest glue: the ``opprof`` options, the ``profile`` marker and the ``opprof`` fixture.

Loaded by every pytest run through the ``pytest11`` entry point, so this module
imports neither numpy nor the native core.  Only ``--opprof`` creates the
:class:`~pytest_opprof.plugin.manager.OpprofManager` that does the work; it lives under
a ``StashKey`` on ``config.stash`` from ``pytest_configure`` to ``pytest_unconfigure``.
"""

from __future__ import annotations

from contextlib import AbstractContextManager, ContextDecorator
from typing import TYPE_CHECKING

import pytest

from pytest_opprof.plugin.marker import marker_help
from pytest_opprof.plugin.options import add_options, is_enabled, read_options

if TYPE_CHECKING:
    from pytest_opprof.plugin.manager import OpprofManager

manager_key: pytest.StashKey[OpprofManager] = pytest.StashKey()

MANAGER_NAME = "opprof-manager"


def pytest_addoption(parser: pytest.Parser) -> None:
    add_options(parser)


def pytest_configure(config: pytest.Config) -> None:
    # Always registered, so --strict-markers accepts the marker with or without --opprof.
    config.addinivalue_line("markers", marker_help())
    if not is_enabled(config):
        return
    options = read_options(config)
    from pytest_opprof.plugin.manager import OpprofManager

    manager = OpprofManager(config, options)
    config.stash[manager_key] = manager
    config.pluginmanager.register(manager, MANAGER_NAME)


def pytest_unconfigure(config: pytest.Config) -> None:
    # pytest calls this on every way out of a session, KeyboardInterrupt included.
    manager = config.stash.get(manager_key, None)
    if manager is None:
        return
    try:
        manager.close()
    finally:
        config.pluginmanager.unregister(manager)
        del config.stash[manager_key]


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
        """A named scope (context manager or decorator) shown as its own row and trace span."""
        if not self.enabled:
            return _NoScope()
        from pytest_opprof.capture.profiler import record_function

        return record_function(name)


@pytest.fixture
def opprof(request: pytest.FixtureRequest) -> TestProfiler:
    """The running test's profiler: ``opprof.record_function("name")`` marks a scope.

    Without ``--opprof`` the scopes do nothing, so a test never needs to branch.
    """
    return TestProfiler(enabled=manager_key in request.config.stash)
