"""Which sources a profile uses: the op sources asked for and the memory helpers.

Picked in one place because two callers must agree: every ``profile`` acquires
these sources at start, and the pytest plugin holds the same ones for the whole
session so that each round's profile only counts a reference instead of
installing hooks.  Were the choice written twice, the two could drift and a
round would install (and time) hooks the session meant to hold.

CUDA is not part of the plan: a profile decides it at start, from whether the
process uses CUDA by then (see ``profiler.profile``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from pytest_opprof.capture import sources
from pytest_opprof.capture.sources import Source

__all__ = ["Plan", "plan"]


@dataclass(frozen=True)
class Plan:
    """The chosen sources, each available here, in acquire order."""

    capture: tuple[Source, ...]
    """Op sources (``numpy``, ``torch``): the user-facing ``capture`` names resolved."""
    helpers: tuple[Source, ...]
    """Memory helpers (``memory``, then ``python_memory``)."""
    unmeasured: str | None = None
    """Why the tests' FLOPs, op counts and op figures are not measured although their
    capture was asked for (numpy's, which every default capture includes, cannot run
    here), in a few words; None when they are measured."""

    @property
    def memory(self) -> Source | None:
        """The ``memory`` helper, whose figures a profile reads after stop."""
        return next((s for s in self.helpers if s.name == "memory"), None)

    @property
    def sources(self) -> list[Source]:
        """Every source of the plan: op sources, then helpers."""
        return [*self.capture, *self.helpers]


def plan(
    capture: Sequence[str] | None, *, memory: bool = True, python_memory: bool = False
) -> Plan:
    """The sources for ``capture`` (None: every available one, ``["none"]``: none) and,
    with ``memory``, the memory helper (and with ``python_memory`` the Python one).

    Raises ``OpprofError`` for an unknown capture name (see ``sources.resolve``); a
    helper that is not present or cannot run here is left out.
    """
    ops = sources.resolve(capture)
    names = (["memory", "python_memory"] if python_memory else ["memory"]) if memory else []
    found = (sources.get(name) for name in names)
    helpers = tuple(h for h in found if h is not None and h.available())
    return Plan(capture=tuple(ops), helpers=helpers, unmeasured=_unmeasured(capture))


def _unmeasured(capture: Sequence[str] | None) -> str | None:
    """:attr:`Plan.unmeasured` of a ``capture`` list.  Only numpy's: the plugin depends on
    numpy, so a test may use it wherever it runs; a library no test imported (torch) has
    no ops to miss."""
    if capture is not None and "numpy" not in capture:
        return None
    numpy = sources.get("numpy")
    unmeasured = getattr(numpy, "unmeasured", None)
    return unmeasured() if unmeasured is not None else None
