"""Threads a test left running, left out of the figures of the tests after it.

A thread pool or timer a test starts and never stops would otherwise add its ops to
every later test's rounds.  The native core drops the events of the muted OS threads.
"""

from __future__ import annotations

import threading

from pytest_opprof import _native


class MutedThreads:
    """The threads left out of the figures: OS thread id -> name."""

    def __init__(self) -> None:
        self._muted: dict[int, str] = {}

    def at_call_start(self) -> frozenset[threading.Thread]:
        """The threads running as a test's call phase begins (for :meth:`left_running`);
        those muted that ended are muted no more."""
        running = threading.enumerate()
        before = frozenset(running)
        self._mute(running)
        return before

    def left_running(self, before: frozenset[threading.Thread]) -> dict[int, str]:
        """The threads started since ``before`` that still run, muted from now on:
        OS thread id -> name."""
        running = threading.enumerate()
        new = {t.native_id: t.name for t in running if t not in before and t.native_id}
        self._mute(running, new)
        return new

    def _mute(self, running: list[threading.Thread], new: dict[int, str] | None = None) -> None:
        """Leave ``new`` threads out of the figures from the next round on, and stop
        leaving out those that ended (their OS ids get reused)."""
        alive = {t.native_id for t in running}
        muted = {tid: name for tid, name in self._muted.items() if tid in alive}
        muted.update(new or {})
        if muted != self._muted:
            _native.mute_threads(sorted(muted))
            self._muted = muted
