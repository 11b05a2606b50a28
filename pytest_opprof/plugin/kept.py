"""The collector's record of every profiled test, sharing the gate's copy of its figures.

A judged test's figures reach two spools: the gate's result (the JSON, Markdown and HTML
reports read it) and the collector's payload (the terminal summary reads it).  Spooling
the same summary twice, each time walked in Python and ``json.dumps``'d, was the largest
part of a trivial test's fixed cost (issue 18).  A payload whose judged result holds the
very same summary is spooled without it, with the result's place in the gate's spool;
reading it back takes the summary from there.  A payload with no result there (not
judged, an unusable baseline, a test outside the rootdir) is spooled whole.
"""

from __future__ import annotations

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

    def append(self, payload: ProfiledTest, judgement: Judgement | None) -> None:
        """Keep ``payload`` (a copy), judged as ``judgement`` (None: not judged); its
        judgement itself is not kept."""
        result = judgement.result if judgement is not None else None
        if judgement is not None and judgement.place is not None and result is not None:
            if result.summary is payload.summary:
                p = payload
                self._spool.append(
                    _Linked(
                        judgement.place,
                        p.nodeid,
                        p.marked,
                        p.table,
                        p.trace_path,
                        p.tolerances,
                        p.judged,
                        p.flame,
                    )
                )
                return
        self._spool.append(replace(payload, judgement=None) if payload.judgement else payload)

    def _built(self, kept: ProfiledTest | _Linked) -> ProfiledTest:
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
        return len(self._spool)

    @overload
    def __getitem__(self, index: int) -> ProfiledTest: ...

    @overload
    def __getitem__(self, index: slice) -> list[ProfiledTest]: ...

    def __getitem__(self, index: int | slice) -> ProfiledTest | list[ProfiledTest]:
        if isinstance(index, slice):
            return [self._built(k) for k in self._spool[index]]
        return self._built(self._spool[index])

    def __iter__(self) -> Iterator[ProfiledTest]:
        for kept in self._spool:
            yield self._built(kept)
