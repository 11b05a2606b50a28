"""A run's per-test results kept on disk until the end of the session, not in memory.

Every profiled test leaves a result that the end of the session needs (the terminal
summary, the JSON and Markdown reports): its per-op figures and verdict, a few KiB of
Python objects.  Held as objects, they made resident memory grow about 16-34 KiB per
test (issue 20, item 11: 2,000 tests took a session from 72 to 136 MB; numpy's full
suite would hold ~700 MB).  A :class:`Spool` writes each one as a line of JSON to an
anonymous temporary file as it arrives (about 2-3 KB of disk a test) and keeps 16 bytes
per test in memory; reading it back (at the end, a few passes) rebuilds one result at
a time.

The encoding is generic over the frozen dataclasses and named tuples the results are
made of, and safe to read: a record names its classes, and only classes this spool
itself wrote are ever built back (nothing is looked up by name elsewhere).
"""

from __future__ import annotations

import dataclasses
import json
import tempfile
from array import array
from collections.abc import Iterator, Sequence
from typing import IO, Any, Generic, TypeVar, overload

T = TypeVar("T")

_CLASS, _TUPLE, _DICT = "c", "t", "d"


class Spool(Sequence[T], Generic[T]):
    """An append-only sequence whose items live as JSON lines in a temporary file."""

    def __init__(self) -> None:
        self._file: IO[bytes] | None = None
        self._offsets = array("q")
        self._sizes = array("q")
        self._end = 0
        self._classes: dict[str, type] = {}
        self._fields: dict[type, tuple[str, tuple[str, ...]] | None] = {}
        """Per type met: (its name, its dataclass field names), or None when not a dataclass."""

    def append(self, item: T) -> None:
        """Store ``item`` (a copy: later changes to the object are not seen)."""
        data = json.dumps(self._encode(item), separators=(",", ":")).encode("utf-8")
        if self._file is None:
            # Anonymous (unlinked at once on POSIX): nothing is left behind however the
            # session ends.
            self._file = tempfile.TemporaryFile(prefix="opprof-results-")
        self._file.seek(self._end)
        self._file.write(data)
        self._offsets.append(self._end)
        self._sizes.append(len(data))
        self._end += len(data)

    def _encode(self, obj: Any) -> Any:
        if obj is None or isinstance(obj, (bool, int, float, str)):
            return obj
        cls = type(obj)
        if cls not in self._fields:
            is_data = dataclasses.is_dataclass(cls)
            self._fields[cls] = (
                (self._register(cls), tuple(f.name for f in dataclasses.fields(cls)))
                if is_data
                else None
            )
        described = self._fields[cls]
        if described is not None:
            name, names = described
            return {_CLASS: name, "f": {n: self._encode(getattr(obj, n)) for n in names}}
        if isinstance(obj, tuple) and hasattr(obj, "_fields"):  # a NamedTuple
            return {_CLASS: self._register(type(obj)), "v": [self._encode(v) for v in obj]}
        if isinstance(obj, tuple):
            return {_TUPLE: [self._encode(v) for v in obj]}
        if isinstance(obj, list):
            return [self._encode(v) for v in obj]
        if isinstance(obj, dict):
            return {_DICT: [[self._encode(k), self._encode(v)] for k, v in obj.items()]}
        raise TypeError(f"opprof result spool: cannot store {type(obj).__name__}")

    def _register(self, cls: type) -> str:
        name = f"{cls.__module__}.{cls.__qualname__}"
        self._classes[name] = cls
        return name

    def _decode(self, data: Any) -> Any:
        if isinstance(data, list):
            return [self._decode(v) for v in data]
        if not isinstance(data, dict):
            return data
        if _TUPLE in data:
            return tuple(self._decode(v) for v in data[_TUPLE])
        if _DICT in data:
            return {self._decode(k): self._decode(v) for k, v in data[_DICT]}
        cls = self._classes[data[_CLASS]]  # only classes this spool wrote
        if "v" in data:
            return cls(*(self._decode(v) for v in data["v"]))
        values = {name: self._decode(v) for name, v in data["f"].items()}
        init = {f.name for f in dataclasses.fields(cls) if f.init}
        obj = cls(**{k: v for k, v in values.items() if k in init})
        for name, value in values.items():
            if name not in init:
                object.__setattr__(obj, name, value)
        return obj

    def _load(self, i: int) -> T:
        assert self._file is not None
        self._file.seek(self._offsets[i])
        item: T = self._decode(json.loads(self._file.read(self._sizes[i])))
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
