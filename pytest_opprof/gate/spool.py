"""A run's per-test results kept on disk until the end of the session, not in memory.

Every profiled test leaves a result that the end of the session needs (the terminal
summary, the JSON and Markdown reports): its per-op figures and verdict, a few KiB of
Python objects.  Held as objects, they made resident memory grow about 16-34 KiB per
test (2,000 tests took a session from 72 to 136 MB; numpy's full
suite would hold ~700 MB).  A :class:`Spool` writes each one as a line of JSON to an
anonymous temporary file as it arrives (about 2-3 KB of disk a test) and keeps 16 bytes
per test in memory; reading it back (at the end, a few passes) rebuilds one result at
a time.

The encoding is generic over the frozen dataclasses and named tuples the results are
made of, and safe to read: a record names its class by its place in the spool's own
list of the classes it wrote, so only those are ever built back (nothing is looked up
by name).  Records are lists of field values, and every JSON object in the file is one
of four tagged forms (record, tuple, dict, and "the same record as the n-th one of this
line"), so reading is ``json.loads`` with an object hook: the per-value work runs in C
(the test's summary is read at the end of the session a few times, and was a Python walk
each time).  An immutable record met twice in one item (an op that called no other op
has one time object for its self and total time) is written once: it was a quarter of a
one-round test's records.  A class may also have a short form of its values
(:data:`SHORT_FORMS`): one round's time statistics are written as their one number (4,418
-> 3,276 bytes for a 27-op payload, and a JSON object less to build back per time).
"""

from __future__ import annotations

import dataclasses
import functools
import json
import operator
import tempfile
from array import array
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import IO, Any, Generic, NamedTuple, TypeVar, overload

from pytest_opprof.gate import summary_flat
from pytest_opprof.gate.summary import TestSummary, TimeStats
from pytest_opprof.gate.verdict import NEW, Verdict

T = TypeVar("T")

_CLASS, _VALUES, _TUPLE, _DICT, _SAME = "c", "v", "t", "d", "s"
_SCALARS = frozenset((str, int, float, bool))
_UNSEEN: Any = object()


def _fill(cls: type, names: tuple[str, ...], values: list[Any]) -> Any:
    obj: Any = object.__new__(cls)
    obj.__dict__.update(zip(names, values, strict=True))
    return obj


def _one(names: tuple[str, ...], obj: Any) -> tuple[Any, ...]:
    return tuple(getattr(obj, n) for n in names)


def _unpack(cls: type, values: list[Any]) -> Any:
    return cls(*values)


def _construct(cls: type, names: tuple[str, ...], values: list[Any]) -> Any:
    init = {f.name for f in dataclasses.fields(cls) if f.init}
    obj = cls(**{n: v for n, v in zip(names, values, strict=True) if n in init})
    for name, value in zip(names, values, strict=True):
        if name not in init:
            object.__setattr__(obj, name, value)
    return obj


class ShortForm(NamedTuple):
    """A shorter list of a class's values, where an object has one, and the object back."""

    values: Callable[[Any], list[Any] | None]
    """The short values of an object, or None where it has no short form."""
    build: Callable[[list[Any]], Any]
    """An object equal to the one :attr:`values` was given."""


def _single_values(stats: TimeStats) -> list[Any] | None:
    ns = stats.one_sample()
    return None if ns is None else [ns]


def _new_verdict(verdict: Verdict) -> list[Any] | None:
    return [] if verdict is NEW else None


SHORT_FORMS: Mapping[type, ShortForm] = {
    # One round's time statistics, seven fields from one number: most of a test's records.
    TimeStats: ShortForm(_single_values, lambda values: TimeStats.single(values[0])),
    TestSummary: ShortForm(summary_flat.flat_values, summary_flat.from_flat_values),
    # The verdict of a test without a baseline: that of most tests of a first run.
    Verdict: ShortForm(_new_verdict, lambda values: NEW),
}
"""The short forms a :class:`Spool` writes unless it is given others, by class."""


class _Described(NamedTuple):
    """How the spool writes one class."""

    at: int
    """The class's place in the spool's builders."""
    values_of: Callable[[Any], Any]
    """Its field values, in order."""
    immutable: bool
    short_of: Callable[[Any], list[Any] | None] | None
    """The short values of the class (:class:`ShortForm`), if it has a short form."""
    short_index: int
    """The place of its short form's builder in the builders (-1: none)."""


class Spool(Sequence[T], Generic[T]):
    """An append-only sequence whose items live as JSON lines in a temporary file."""

    def __init__(self, short_forms: Mapping[type, ShortForm] = SHORT_FORMS) -> None:
        self._short_forms = short_forms
        self._file: IO[bytes] | None = None
        self._offsets = array("q")
        self._sizes = array("q")
        self._end = 0
        self._at_end = True  # the file's position is _end: an append needs no seek
        self._builders: list[Callable[[list[Any]], Any]] = []
        """Per class written, what builds it back from its values; a record names its
        class by its index here."""
        self._records: dict[type, _Described | None] = {}
        """Per type met: how it is written (:class:`_Described`) for a dataclass or a
        NamedTuple, or None (anything else)."""
        self._seen: dict[int, int] = {}
        """While an item is written: the number of each immutable record written, by
        ``id`` (the item holds them all until it is written)."""
        self._written = 0
        """While an item is written: records written so far (children before parents:
        the order json's object hook meets them when the item is read)."""
        self._read: list[Any] = []
        """While an item is read: every record built so far, in that same order."""

    def append(self, item: T) -> None:
        """Store ``item`` (a copy: later changes to the object are not seen)."""
        # No cycle check: the encoded form is a tree built just now (the check was a third
        # of the dump).
        try:
            encoded = self._encode(item)
        finally:
            self._seen.clear()
            self._written = 0
        data = json.dumps(encoded, separators=(",", ":"), check_circular=False).encode("utf-8")
        if self._file is None:
            # Anonymous (unlinked at once on POSIX): nothing is left behind however the
            # session ends.
            self._file = tempfile.TemporaryFile(prefix="opprof-results-")
        if not self._at_end:
            # Only after a read: a seek flushes the write buffer, a syscall per append.
            self._file.seek(self._end)
            self._at_end = True
        self._file.write(data)
        self._offsets.append(self._end)
        self._sizes.append(len(data))
        self._end += len(data)

    def _encode(self, obj: Any) -> Any:
        cls = type(obj)
        if cls in _SCALARS or obj is None:
            return obj
        described = self._records.get(cls, _UNSEEN)
        if described is _UNSEEN:
            described = self._describe(cls, obj)
        if described is not None:
            # The values in field order, not a dict of them: no key names to write or
            # read back.
            index, values_of, immutable, short_of, short_index = described
            if immutable:
                at = self._seen.get(id(obj))
                if at is not None:
                    return {_SAME: at}
            short = short_of(obj) if short_of is not None else None
            if short is not None:
                record = {_CLASS: short_index, _VALUES: self._values(short)}
            else:
                record = {_CLASS: index, _VALUES: self._values(values_of(obj))}
            if immutable:
                self._seen[id(obj)] = self._written
            self._written += 1
            return record
        if isinstance(obj, (bool, int, float, str)):  # a subclass of a scalar
            return obj
        if isinstance(obj, tuple):
            return {_TUPLE: self._values(obj)}
        if isinstance(obj, list):
            return self._values(obj)
        if isinstance(obj, dict):
            return {_DICT: [[self._encode(k), self._encode(v)] for k, v in obj.items()]}
        raise TypeError(f"opprof result spool: cannot store {type(obj).__name__}")

    def _values(self, values: Iterable[Any]) -> list[Any]:
        # Most values are numbers and strings: written as they are, without a call each
        # (the encoding ran once per test and was most of its cost to the spool).
        encode = self._encode
        return [v if type(v) in _SCALARS or v is None else encode(v) for v in values]

    def _describe(self, cls: type, obj: Any) -> _Described | None:
        """Remember how ``cls`` is stored (:class:`_Described`) for a dataclass or a
        NamedTuple, or None (anything else)."""
        described: _Described | None = None
        if dataclasses.is_dataclass(cls):
            names = tuple(f.name for f in dataclasses.fields(cls))
            # Built back without __init__ (no __post_init__ in the results; a copy needs
            # none): an instance dict filled at once, where the class has one.
            build = (
                functools.partial(_fill, cls, names)
                if "__slots__" not in cls.__dict__
                else functools.partial(_construct, cls, names)
            )
            values_of: Callable[[Any], Any] = (
                operator.attrgetter(*names) if len(names) > 1 else functools.partial(_one, names)
            )
            # Only a frozen dataclass is written once where it recurs: a mutable one read
            # back as one object where it was two copies would tie them together.
            frozen = bool(cls.__dataclass_params__.frozen)  # type: ignore[attr-defined]
            index = len(self._builders)
            self._builders.append(build)
            short = self._short_forms.get(cls)
            short_index = -1
            if short is not None:
                short_index = len(self._builders)
                self._builders.append(short.build)
            short_of = short.values if short is not None else None
            described = _Described(index, values_of, frozen, short_of, short_index)
        elif isinstance(obj, tuple) and hasattr(obj, "_fields"):  # a NamedTuple
            described = _Described(len(self._builders), tuple, False, None, -1)
            self._builders.append(functools.partial(_unpack, cls))
        self._records[cls] = described
        return described

    def _hook(self, data: dict[str, Any]) -> Any:
        """json's object hook: each JSON object, innermost first, is one tagged form."""
        if _TUPLE in data:
            return tuple(data[_TUPLE])
        if _DICT in data:
            return {k: v for k, v in data[_DICT]}
        if _SAME in data:
            return self._read[data[_SAME]]
        record = self._builders[data[_CLASS]](data[_VALUES])  # only classes this spool wrote
        self._read.append(record)
        return record

    def _text(self, i: int) -> bytes:
        assert self._file is not None
        self._at_end = False
        self._file.seek(self._offsets[i])
        return self._file.read(self._sizes[i])

    def _load(self, i: int) -> T:
        try:
            item: T = json.loads(self._text(i), object_hook=self._hook)
        finally:
            self._read.clear()
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
        self._at_end = True
