"""The session's capture sources, held from the first profiled test to the session's end.

Held, their hooks stay installed between rounds, so each round's profile only counts a
reference where it would install and remove them itself.  The native event limit is
this session's (``--opprof-max-events``) while they are held, and the one before it after.
"""

from __future__ import annotations

import sys
from collections.abc import Callable

from pytest_opprof import _native
from pytest_opprof.capture import sources, speed_probe
from pytest_opprof.capture.plan import Plan
from pytest_opprof.capture.sources import Source, torch_source
from pytest_opprof.capture.sources.memory_source import PythonMemorySource
from pytest_opprof.plugin.options import OpprofOptions


class HeldSources:
    """The capture sources one worker installed: the planned ones and those an import made
    available later; :meth:`release` removes every hook."""

    def __init__(self, options: OpprofOptions, chosen: Plan) -> None:
        self.options = options
        self.plan = chosen
        self._acquired: list[Source] = []
        self._modules_seen = -1
        """``len(sys.modules)`` when the sources were last resolved (:meth:`_hold_late_sources`)."""
        self._late: dict[Source, int] = {}
        """Sources held since an import made them available: their package's module count."""
        self._capacity: int | None = None  # the event limit before this session set its own

    def acquire(self) -> None:
        """Install the sources' hooks once, at the first profiled test, and hold them
        for the session, so each round's profile only counts a reference.

        Lazily rather than at session start, so a pytest-xdist controller, which
        runs no tests, never installs anything.
        """
        # torch is imported by the test modules, after the plan was made: its observer
        # is built here (once, cached) rather than inside the first test's first round.
        if self.options.capture is None or "torch" in self.options.capture:
            torch_source.SOURCE.prepare()
        if not self._acquired:
            if self._capacity is None:
                self._capacity = _native.capacity()
                _native.set_capacity(self.options.max_events)
            for source in self.plan.sources:
                source.acquire()
                self._acquired.append(source)
            speed_probe.warm_up()
        self._hold_late_sources()

    def _hold_late_sources(self) -> None:
        """Hold, as the planned ones are held, the capture sources that an import made
        available after the plan: scipy and scikit-learn, imported by the test modules.
        Each round's profile then only counts a reference, where it installed and removed
        their hooks itself (3 ms a round for scipy's, on scipy.linalg's own tests).

        Such a source finds its library's functions when it installs, so it installs
        again when a test imported more of its package: what a profile of its own
        would have found."""
        if len(sys.modules) == self._modules_seen:
            return
        self._modules_seen = len(sys.modules)
        for source in sources.resolve(self.options.capture):
            if source in self.plan.sources:
                continue  # held from the first test, as numpy is
            modules = _package_modules(source.name)  # a capture source is named for its package
            held = self._late.get(source)
            if held == modules:
                continue
            if held is not None:
                source.release()  # the last reference: the acquire below installs anew
            source.acquire()
            if held is None:
                self._acquired.append(source)
            self._late[source] = modules

    def release(self, note: Callable[[str], None]) -> None:
        """Remove every hook held and restore the event limit; ``note`` gets the Python
        memory source's line.  Every source is released before the first error is raised."""
        first_error: BaseException | None = None
        while self._acquired:
            source = self._acquired.pop()
            try:
                source.release()
            except BaseException as exc:  # release the others before reporting it
                first_error = first_error or exc
            if isinstance(source, PythonMemorySource) and source.note:
                note(source.note)
        if self._capacity is not None:
            _native.set_capacity(self._capacity)
            self._capacity = None
        if first_error is not None:
            raise first_error


def _package_modules(package: str) -> int:
    """How many modules of ``package`` are imported."""
    prefix = package + "."
    return sum(1 for name in list(sys.modules) if name == package or name.startswith(prefix))
