"""Several partner processes of one side, taking a test's pairs in turn.

The same code runs at different speeds in different processes, and no number of pairs
between two processes shows it: every pair shares the offset (docs/ab.md, "Two
processes a side").  With two processes a side, pair ``k`` runs in process ``k % 2`` of
each side, so a test's pairs come from two pairs of processes, and a time fails only
where the pairs of each agree (``judge.py``).

A process joins a test only when the test reaches its first pair there: a test decided in
one pair runs in one process a side, as with one.  The partner tears down what the test
it joins does not share with the last one it ran (``partner.py``), so a process that
skipped tests holds no fixture the head's process has let go.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from pytest_opprof.ab.base_side import BaseSide, BaseTest
from pytest_opprof.gate.summary import RoundFigures


@dataclass
class ReplicatedTest(BaseTest):
    """One test on one side: its rounds in pair order, from each process in turn."""

    next_nodeid: str | None = None
    parts: list[BaseTest | None] = field(default_factory=list)
    """Each process's copy of the test, None until the test's pairs reach it."""


class Replicas:
    """The partner processes of one side, driven as one (:class:`BaseSide`'s calls)."""

    def __init__(self, sides: Sequence[BaseSide]) -> None:
        if not sides:
            raise ValueError("a side needs at least one partner process")
        self.sides = list(sides)

    @property
    def first(self) -> BaseSide:
        return self.sides[0]

    @property
    def nodeids(self) -> frozenset[str]:
        return self.first.nodeids

    @property
    def info(self) -> dict[str, str]:
        return self.first.info

    def begin(self, nodeid: str, next_nodeid: str | None) -> ReplicatedTest:
        """Start ``nodeid`` in the first process; the others join at their first pair."""
        part = self.first.begin(nodeid, next_nodeid)
        return ReplicatedTest(
            nodeid,
            present=part.present,
            why=part.why,
            failed=part.failed,
            finished=part.finished,
            next_nodeid=next_nodeid,
            parts=[part] + [None] * (len(self.sides) - 1),
        )

    def round(self, test: ReplicatedTest) -> RoundFigures | None:
        """One measured round in the process whose turn it is (None once the test failed
        on this side, in any of them)."""
        if not test.present or test.failed:
            return None
        turn = len(test.rounds) % len(self.sides)
        side, part = self.sides[turn], test.parts[turn]
        if part is None:
            part = test.parts[turn] = side.begin(test.nodeid, test.next_nodeid)
            if not part.present or part.failed:
                test.failed = True
                test.why = part.why or "not in every partner process"
                return None
        figures = side.round(part)
        if figures is None:
            test.failed, test.why = True, part.why
            return None
        test.rounds.append(figures)
        return figures

    def end(self, test: ReplicatedTest) -> None:
        """End the test in every process it reached."""
        for side, part in zip(self.sides, test.parts, strict=True):
            if part is None:
                continue
            side.end(part)
            if part.failed and not test.failed:
                test.failed, test.why = True, part.why

    def quit(self) -> None:
        for side in self.sides:
            side.quit()

    def close(self) -> None:
        for side in self.sides:
            side.close()
