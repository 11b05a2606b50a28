"""A run's per-test results kept on disk until the end of the session, not in memory.

Every profiled test leaves a result that the end of the session needs (the terminal
summary, the JSON and Markdown reports): its per-op figures and verdict, a few KiB of
Python objects.  Held as objects, they made resident memory grow about 16-34 KiB per
test (issue 20, item 11: 2,000 tests took a session from 72 to 136 MB; numpy's full
suite would hold ~700 MB).  A :class:`Spool` pickles each one into an anonymous
temporary file as it arrives (about 2 KB of disk a test) and keeps 16 bytes per test
in memory; reading it back (at the end, a few passes) unpickles one result at a time.
Not compressed: zlib halved the file but cost as much time again as the pickling.
"""

from __future__ import annotations

import pickle
import tempfile
from array import array
from collections.abc import Iterator, Sequence
from typing import IO, Generic, TypeVar, overload

T = TypeVar("T")


class Spool(Sequence[T], Generic[T]):
    """An append-only sequence whose items live pickled in a temporary file."""

    def __init__(self) -> None:
        self._file: IO[bytes] | None = None
        self._offsets = array("q")
        self._sizes = array("q")
        self._end = 0

    def append(self, item: T) -> None:
        """Store ``item`` (a copy: later changes to the object are not seen)."""
        data = pickle.dumps(item, protocol=pickle.HIGHEST_PROTOCOL)
        if self._file is None:
            # Anonymous (unlinked at once on POSIX): nothing is left behind however the
            # session ends.
            self._file = tempfile.TemporaryFile(prefix="opprof-results-")
        self._file.seek(self._end)
        self._file.write(data)
        self._offsets.append(self._end)
        self._sizes.append(len(data))
        self._end += len(data)

    def _load(self, i: int) -> T:
        assert self._file is not None
        self._file.seek(self._offsets[i])
        item: T = pickle.loads(self._file.read(self._sizes[i]))
        return item

    def __len__(self) -> int:
        return len(self._offsets)

    @overload
    def __getitem__(self, index: int) -> T: ...

    @overload
    def __getitem__(self, index: slice) -> list[T]: ...

    def __getitem__(self, index: int | slice) -> T | list[T]:
        if isinstance(index, slice):
            return [self._load(i) for i in range(len(self))[index]]
        return self._load(range(len(self))[index])

    def __iter__(self) -> Iterator[T]:
        for i in range(len(self)):
            yield self._load(i)

    def close(self) -> None:
        """Drop the file and every item."""
        if self._file is not None:
            self._file.close()
            self._file = None
        self._offsets = array("q")
        self._sizes = array("q")
        self._end = 0
