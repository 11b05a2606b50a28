"""pytest-timeout's timer held while the plugin summarises a test's rounds.

pytest-timeout times a test from ``pytest_runtest_protocol`` (setup, call, teardown and
their reports; with ``func_only`` the call only), through two hooks of its own that
other plugins may implement: ``pytest_timeout_set_timer`` and
``pytest_timeout_cancel_timer``.  The plugin summarises a test's last round while the
call's report is made, inside the protocol: a round of a million ops takes a tenth of
a second there, which a timeout set for the test body alone must not count.  So
:class:`TimeoutWindow` notes when each timer was set, and :func:`held_timer` cancels a
running timer around the plugin's work and sets it again for the time it had left.
Without pytest-timeout its hooks never run and nothing is held.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Generator, Iterator
from typing import Any

import pytest

_armed_key = pytest.StashKey[tuple[Any, float]]()
"""The running timer's settings (pytest-timeout's ``Settings``) and when it was set
(``time.monotonic()``)."""
_SHORTEST_S = 0.001
"""A timer set again never gets less (one that had run out fires at once)."""


class TimeoutWindow:
    """Notes pytest-timeout's timers as they are set and cancelled (registered as a
    plugin beside the worker; the hooks are optional: pytest-timeout declares them)."""

    @pytest.hookimpl(wrapper=True, optionalhook=True)
    def pytest_timeout_set_timer(
        self, item: pytest.Item, settings: Any
    ) -> Generator[None, object, object]:
        item.stash[_armed_key] = (settings, time.monotonic())
        return (yield)

    @pytest.hookimpl(wrapper=True, optionalhook=True)
    def pytest_timeout_cancel_timer(self, item: pytest.Item) -> Generator[None, object, object]:
        if _armed_key in item.stash:
            del item.stash[_armed_key]
        return (yield)


@contextlib.contextmanager
def held_timer(item: pytest.Item) -> Iterator[None]:
    """Hold ``item``'s running pytest-timeout timer while the body runs: the time it
    takes is not counted against the test's timeout."""
    armed = item.stash.get(_armed_key, None)
    # Another plugin's timer settings without pytest-timeout's fields: left running.
    if armed is None or not hasattr(armed[0], "_replace") or not hasattr(armed[0], "timeout"):
        yield
        return
    settings, set_at = armed
    hook = item.ihook
    hook.pytest_timeout_cancel_timer(item=item)
    left_s = settings.timeout - (time.monotonic() - set_at)
    try:
        yield
    finally:
        hook.pytest_timeout_set_timer(
            item=item, settings=settings._replace(timeout=max(left_s, _SHORTEST_S))
        )
