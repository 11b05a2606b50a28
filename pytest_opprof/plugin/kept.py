"""The collector's record of every profiled test: the figures of its summary line, in memory.

The terminal summary is the only reader of what the collector keeps, and it reads a
few figures of each test: its median wall time, the share of it in library ops, the
op count, the ops' self time and the top op.  Those are kept here, about 60 bytes a
test in flat arrays, rather than the test's whole summary: spooling every summary to
disk and decoding all of them back at the end cost a one-round numpy test 150-250 us
of its ~1 ms added time.  The whole figures of judged tests stay in the
gate's spool, where the JSON, Markdown and HTML reports read them.  The rare extras (a
marker's table, a trace's path) are kept beside, by position.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterator, Sequence
from typing import NamedTuple, overload

from pytest_opprof.gate.summary import TestSummary
from pytest_opprof.native_layout.records import MEMORY_EVENT_NAME
from pytest_opprof.plugin.payload import ProfiledTest


class SummaryLine(NamedTuple):
    """What the terminal summary shows of one profiled test."""

    nodeid: str
    marked: bool
    wall_ns: float
    """Median wall time over the test's rounds."""
    op_time_share: float
    """``TestSummary.op_time_share``."""
    op_count: int
    ops_self_ns: float
    """Sum of the ops' median self times (``[memory]`` left out)."""
    top_op: str | None
    """The op with the largest median self time (None: no op)."""
    top_self_ns: float
    dropped_events: int
    table: str | None = None
    trace_path: str | None = None


def summary_line(payload: ProfiledTest) -> SummaryLine:
    """``payload``'s line: its summary's figures, whole or rounded as stored alike."""
    s: TestSummary = payload.summary
    ops_self = 0.0
    top: str | None = None
    top_self = -1.0
    for key, op in s.ops.items():
        if key == MEMORY_EVENT_NAME:
            continue
        self_ns = op.self_cpu_time.median_ns
        ops_self += self_ns
        if self_ns > top_self:  # the first of equals, as max() picks
            top, top_self = key, self_ns
    return SummaryLine(
        payload.nodeid,
        payload.marked,
        s.wall_time.median_ns,
        s.op_time_share,
        s.op_count,
        ops_self,
        top,
        max(top_self, 0.0),
        s.dropped_events,
        payload.table,
        payload.trace_path,
    )


class Lines(Sequence[SummaryLine]):
    """Every profiled test's :class:`SummaryLine`, in arrival order."""

    def __init__(self) -> None:
        self._nodeids: list[str] = []
        self._numbers = array("d")
        """Per test, 6 numbers: wall, share, op count, ops' self, top's self, dropped."""
        self._tops = array("l")
        """Per test, its top op's index in ``_names`` (-1: none)."""
        self._marked = array("b")
        self._names: list[str] = []
        self._name_ids: dict[str, int] = {}
        self._extras: dict[int, tuple[str | None, str | None]] = {}
        """By position, a test's (table, trace path) where it has either."""

    def append(self, payload: ProfiledTest) -> None:
        self.add(summary_line(payload))

    def add(self, line: SummaryLine) -> None:
        if line.top_op is None:
            top = -1
        else:
            top = self._name_ids.get(line.top_op, -1)
            if top < 0:
                top = self._name_ids[line.top_op] = len(self._names)
                self._names.append(line.top_op)
        if line.table is not None or line.trace_path is not None:
            self._extras[len(self._nodeids)] = (line.table, line.trace_path)
        self._nodeids.append(line.nodeid)
        self._numbers.extend(
            (
                line.wall_ns,
                line.op_time_share,
                line.op_count,
                line.ops_self_ns,
                line.top_self_ns,
                line.dropped_events,
            )
        )
        self._tops.append(top)
        self._marked.append(line.marked)

    def _line(self, i: int) -> SummaryLine:
        wall, share, count, ops_self, top_self, dropped = self._numbers[6 * i : 6 * i + 6]
        top = self._tops[i]
        table, trace_path = self._extras.get(i, (None, None))
        return SummaryLine(
            self._nodeids[i],
            bool(self._marked[i]),
            wall,
            share,
            int(count),
            ops_self,
            self._names[top] if top >= 0 else None,
            top_self,
            int(dropped),
            table,
            trace_path,
        )

    def __len__(self) -> int:
        return len(self._nodeids)

    @overload
    def __getitem__(self, index: int) -> SummaryLine: ...

    @overload
    def __getitem__(self, index: slice) -> list[SummaryLine]: ...

    def __getitem__(self, index: int | slice) -> SummaryLine | list[SummaryLine]:
        if isinstance(index, slice):
            return [self._line(i) for i in range(*index.indices(len(self)))]
        if index < 0:
            index += len(self)
        if not 0 <= index < len(self):
            raise IndexError("summary line index out of range")
        return self._line(index)

    def __iter__(self) -> Iterator[SummaryLine]:
        for i in range(len(self._nodeids)):
            yield self._line(i)

    def partial(self) -> list[tuple[int, str]]:
        """(dropped events, node id) of each test whose rounds dropped events, in order."""
        dropped = self._numbers[5::6]
        return [(int(d), self._nodeids[i]) for i, d in enumerate(dropped) if d]

    def with_tables(self) -> list[SummaryLine]:
        """The lines with a table (marked tests, or every test at ``-vv``), in order."""
        return [self._line(i) for i in sorted(self._extras) if self._extras[i][0] is not None]

    def trace_paths(self) -> list[str]:
        """Every trace path kept, in order."""
        return [trace for i in sorted(self._extras) if (trace := self._extras[i][1]) is not None]
