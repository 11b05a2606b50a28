"""One drain's input shapes and dtypes, decoded on first use.

A drain copies the core's shape table in one call (raw entry words, and where
each id's entry starts) and hands :class:`Records` two sequences over that copy.
Most ids are never read: only ops with a FLOP formula, a table grouped by input
shape, a trace or the events list look at them, so an id becomes Python lists
when it is first indexed, and iterating decodes the rest in one pass.  A loop of
500,000 slices records 2.5M distinct shapes; decoding them all eagerly cost more
than the test itself (``numpy._core.tests.test_multiarray``'s ``test_sort_degraded``).

The copy is what makes this safe: the core clears its table at the next start,
and a later profile's ids mean other shapes.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Generic, TypeVar, overload

import numpy as np

Shape = list[list[int] | None]
Decoder = Callable[[np.ndarray, np.ndarray, list[int]], tuple[list[Shape], list[list[str]]]]
"""(words, starts, ids) -> (shapes, dtypes) of those ids, in their order."""

T = TypeVar("T")


class ShapeTable:
    """The copied entries and what has been decoded of them (index 0: none recorded)."""

    def __init__(self, words: np.ndarray, starts: np.ndarray, decode: Decoder) -> None:
        self._words = words
        self._starts = starts
        self._decode = decode
        n = len(starts) - 1
        self.shapes: list[Shape | None] = [None] * n
        self.dtypes: list[list[str] | None] = [None] * n
        self._missing = n - 1
        if n:
            self.shapes[0], self.dtypes[0] = [], []

    def __len__(self) -> int:
        return len(self.shapes)

    def fill(self, ids: list[int]) -> None:
        """Decode those of ``ids`` not decoded yet, in one native call."""
        todo = [i for i in dict.fromkeys(ids) if self.shapes[i] is None]
        if not todo:
            return
        shapes, dtypes = self._decode(self._words, self._starts, todo)
        for i, s, d in zip(todo, shapes, dtypes, strict=True):
            self.shapes[i], self.dtypes[i] = s, d
        self._missing -= len(todo)
        if self._missing == 0:  # everything is Python now: the copy can go
            self._words = self._starts = np.empty(0, dtype=np.int64)

    def raw(self, ids: list[int]) -> list[bytes] | None:
        """Each of ``ids``' entry words as bytes; None once every id is decoded (the copy
        is gone).  An entry's words are what its shapes and dtypes are decoded from
        (dims, numpy type numbers, indexes into the process-lifetime string table), so
        equal words mean equal shapes and dtypes in any drain of the process."""
        if self._missing == 0:
            return None
        starts = self._starts
        at = np.asarray(ids, dtype=np.intp)
        words = self._words.data
        return [
            words[lo:hi].tobytes()
            for lo, hi in zip(starts[at].tolist(), starts[at + 1].tolist(), strict=True)
        ]

    def fill_all(self) -> None:
        if self._missing:
            self.fill([i for i, s in enumerate(self.shapes) if s is None])


class Column(Sequence[T], Generic[T]):
    """``Records.shapes`` or ``Records.dtypes`` of a :class:`ShapeTable`: a read-only list."""

    def __init__(self, table: ShapeTable, column: list[Any]) -> None:
        self._table = table
        self._column = column

    def __len__(self) -> int:
        return len(self._column)

    @overload
    def __getitem__(self, index: int) -> T: ...

    @overload
    def __getitem__(self, index: slice) -> list[T]: ...

    def __getitem__(self, index: int | slice) -> T | list[T]:
        if isinstance(index, slice):
            ids = list(range(len(self._column)))[index]
            self._table.fill(ids)
            return [self._column[i] for i in ids]
        i = operator.index(index)
        if i < 0:
            i += len(self._column)
        if not 0 <= i < len(self._column):
            raise IndexError(f"shape id {index} out of range ({len(self._column)} ids)")
        if self._column[i] is None:
            self._table.fill([i])
        return self._column[i]  # type: ignore[no-any-return]

    def __iter__(self) -> Iterator[T]:
        self._table.fill_all()
        return iter(self._column)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Sequence) or isinstance(other, str):
            return NotImplemented
        return list(self) == list(other)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return repr(list(self))


def prefetch(column: Sequence[Any], ids: list[int]) -> None:
    """Decode ``ids`` of a drain's shapes or dtypes in one native call (a list: nothing
    to do); a loop that then indexes them one by one costs no call per id."""
    if isinstance(column, Column):
        column._table.fill(ids)


def raw_entries(column: Sequence[Any], ids: list[int]) -> list[bytes] | None:
    """:meth:`ShapeTable.raw` of a drain's shapes; None for a plain list (nothing raw)."""
    if isinstance(column, Column):
        return column._table.raw(ids)
    return None


def columns(table: ShapeTable) -> tuple[Column[Shape], Column[list[str]]]:
    """(shapes, dtypes) for :class:`Records`."""
    return Column(table, table.shapes), Column(table, table.dtypes)
