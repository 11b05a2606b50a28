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
import functools
import json
import tempfile
from array import array
from collections.abc import Callable, Iterator, Sequence
from typing import IO, Any, Generic, TypeVar, overload

T = TypeVar("T")

_CLASS, _VALUES, _TUPLE, _DICT = "c", "v", "t", "d"
_SCALARS = frozenset((str, int, float, bool))
_UNSEEN: Any = object()


def _fill(cls: type, names: tuple[str, ...], values: list[Any]) -> Any:
    obj: Any = object.__new__(cls)
    obj.__dict__.update(zip(names, values, strict=True))
    return obj


def _unpack(cls: type, values: list[Any]) -> Any:
    return cls(*values)


def _construct(cls: type, names: tuple[str, ...], values: list[Any]) -> Any:
    init = {f.name for f in dataclasses.fields(cls) if f.init}
    obj = cls(**{n: v for n, v in zip(names, values, strict=True) if n in init})
    for name, value in zip(names, values, strict=True):
        if name not in init:
            object.__setattr__(obj, name, value)
    return obj


class Spool(Sequence[T], Generic[T]):
    """An append-only sequence whose items live as JSON lines in a temporary file."""

    def __init__(self) -> None:
        self._file: IO[bytes] | None = None
        self._offsets = array("q")
        self._sizes = array("q")
        self._end = 0
        self._classes: dict[str, type] = {}
        self._names: dict[type, str] = {}
        self._fields: dict[type, tuple[str, ...] | None] = {}
        """Per type met: its field names (a dataclass, a NamedTuple), or None (anything else)."""
        self._builders: dict[type, Callable[[list[Any]], Any]] = {}

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
        if obj is None or type(obj) in _SCALARS:
            return obj
        cls = type(obj)
        names = self._fields.get(cls, _UNSEEN)
        if names is _UNSEEN:
            names = self._describe(cls, obj)
        if names is not None:
            # A record of the values in field order, not a dict of them: no key names to
            # write or read back, and every JSON object in the file is one of the tagged
            # forms, so the decoder's object hook never meets a plain dict.
            encode = self._encode
            return {_CLASS: self._names[cls], _VALUES: [encode(getattr(obj, n)) for n in names]}
        if isinstance(obj, (bool, int, float, str)):  # a subclass of a scalar
            return obj
        if isinstance(obj, tuple):
            return {_TUPLE: [self._encode(v) for v in obj]}
        if isinstance(obj, list):
            return [self._encode(v) for v in obj]
        if isinstance(obj, dict):
            return {_DICT: [[self._encode(k), self._encode(v)] for k, v in obj.items()]}
        raise TypeError(f"opprof result spool: cannot store {type(obj).__name__}")

    def _describe(self, cls: type, obj: Any) -> tuple[str, ...] | None:
        """Remember how ``cls`` is stored: its field names (a dataclass, a NamedTuple) or
        None (anything else)."""
        names: tuple[str, ...] | None = None
        if dataclasses.is_dataclass(cls):
            names = tuple(f.name for f in dataclasses.fields(cls))
            # Built back without __init__ (no __post_init__ in the results; a copy needs
            # none): an instance dict filled at once, where the class has one.
            self._builders[cls] = (
                functools.partial(_fill, cls, names)
                if "__slots__" not in cls.__dict__
                else functools.partial(_construct, cls, names)
            )
        elif isinstance(obj, tuple) and hasattr(obj, "_fields"):  # a NamedTuple
            names = tuple(obj._fields)
            self._builders[cls] = functools.partial(_unpack, cls)
        if names is not None:
            name = f"{cls.__module__}.{cls.__qualname__}"
            self._classes[name] = cls
            self._names[cls] = name
        self._fields[cls] = names
        return names

    def _hook(self, data: dict[str, Any]) -> Any:
        """json's object hook: each JSON object, innermost first, is one tagged form."""
        if _TUPLE in data:
            return tuple(data[_TUPLE])
        if _DICT in data:
            return {k: v for k, v in data[_DICT]}
        cls = self._classes[data[_CLASS]]  # only classes this spool wrote
        return self._builders[cls](data[_VALUES])

    def _load(self, i: int) -> T:
        assert self._file is not None
        self._file.seek(self._offsets[i])
        item: T = json.loads(self._file.read(self._sizes[i]), object_hook=self._hook)
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
