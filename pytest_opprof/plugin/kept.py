"""The collector's record of every profiled test, sharing the gate's copy of its figures.

A judged test's figures reach two spools: the gate's result (the JSON, Markdown and HTML
reports read it) and the collector's payload (the terminal summary reads it).  Spooling
the same summary twice, each time walked in Python and ``json.dumps``'d, was the largest
part of a trivial test's fixed cost (issue 18).  A payload whose judged result holds the
very same summary is spooled without it, with the result's place in the gate's spool;
reading it back takes the summary from there.  Most payloads carry nothing else (no
marker, table, trace or flame): those are not spooled at all, only the result's place
is kept (8 bytes), and the payload is rebuilt from the result.  A payload with no
result there (not judged, an unusable baseline, a test outside the rootdir) is spooled
whole.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterator, Sequence
from dataclasses import replace
from typing import NamedTuple, overload

from pytest_opprof.gate.results import TestResult
from pytest_opprof.gate.session import Judgement
from pytest_opprof.gate.spool import Spool
from pytest_opprof.plugin.payload import ProfiledTest


class _Linked(NamedTuple):
    """A payload less its summary, which is the gate's result's at ``place``."""

    place: int
    nodeid: str
    marked: bool
    table: str | None
    trace_path: str | None
    tolerances: dict[str, float]
    judged: bool
    flame: dict[str, object] | None


class Payloads(Sequence[ProfiledTest]):
    """The session's payloads in arrival order, on disk (see the module docstring)."""

    def __init__(self, figures: Spool[TestResult]) -> None:
        self._figures = figures
        self._spool: Spool[ProfiledTest | _Linked] = Spool()
        self._order = array("q")
        """Per payload: its result's place in ``figures`` (>= 0) for a bare payload, else
        ``-1 - i`` for the ``i``-th record of ``_spool``."""

    def append(self, payload: ProfiledTest, judgement: Judgement | None) -> None:
        """Keep ``payload`` (a copy), judged as ``judgement`` (None: not judged); its
        judgement itself is not kept."""
        result = judgement.result if judgement is not None else None
        place = judgement.place if judgement is not None else None
        p = payload
        if place is not None and result is not None and result.summary is p.summary:
            if (
                p.judged
                and result.nodeid == p.nodeid
                and not p.marked
                and p.table is None
                and p.trace_path is None
                and not p.tolerances
                and p.flame is None
            ):
                self._order.append(place)
                return
            kept: ProfiledTest | _Linked = _Linked(
                place, p.nodeid, p.marked, p.table, p.trace_path, p.tolerances, p.judged, p.flame
            )
        else:
            kept = replace(p, judgement=None) if p.judgement else p
        self._order.append(-1 - len(self._spool))
        self._spool.append(kept)

    def _built(self, at: int) -> ProfiledTest:
        if at >= 0:  # bare: everything but the figures is a default
            result = self._figures[at]
            return ProfiledTest(
                nodeid=result.nodeid, marked=False, summary=result.summary, judged=True
            )
        kept = self._spool[-1 - at]
        if isinstance(kept, ProfiledTest):
            return kept
        return ProfiledTest(
            nodeid=kept.nodeid,
            marked=kept.marked,
            summary=self._figures[kept.place].summary,
            table=kept.table,
            trace_path=kept.trace_path,
            tolerances=kept.tolerances,
            judged=kept.judged,
            flame=kept.flame,
        )

    def __len__(self) -> int:
        return len(self._order)

    @overload
    def __getitem__(self, index: int) -> ProfiledTest: ...

    @overload
    def __getitem__(self, index: slice) -> list[ProfiledTest]: ...

    def __getitem__(self, index: int | slice) -> ProfiledTest | list[ProfiledTest]:
        if isinstance(index, slice):
            return [self._built(at) for at in self._order[index]]
        return self._built(self._order[index])

    def __iter__(self) -> Iterator[ProfiledTest]:
        for at in self._order:
            yield self._built(at)
