"""How a summary's fields are written and read back, driven by the fields themselves.

The dataclass fields of the summary classes (``gate/summary.py``) are the one schema of a
test's figures.  Each field names, in its ``metadata``, a :class:`Rule`: what kind of
figure it holds (a time series, a count, a share, a nested record, the ops, ...).  The
codecs walk ``dataclasses.fields()`` and ask each field's rule what to do, so no codec
lists the fields:

* :func:`to_json` / :func:`from_json`: the JSON of a baseline entry, a report's test
  and a pytest-xdist payload, in a :class:`Form` (this module's :data:`FULL`, or the
  compact form of ``compact.py``);
* :func:`stored`: what the JSON reads back as, built without the text;
* ``summary_flat.py``: the result spool's flat form of a one-round summary.

This module knows no summary class (the summary classes name its rules, and it reaches
them through the objects it is given and the classes the rules name), so it imports
nothing of ``summary.py``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

from pytest_opprof.errors import FieldError
from pytest_opprof.gate.jsonio import INT64_MAX, Fields, field_path, round_sig

RULE = "opprof_rule"
"""The ``metadata`` key of a summary field's :class:`Rule`."""
GROUP = "summary"
"""The JSON object that holds a record's figures where some of its fields are ``top``
(a test: ``rounds``, ``sessions``, ``ops`` and ``left_out`` beside ``summary``)."""
MAX_STORED_ROUNDS = 10_000
"""The most rounds an entry may hold: a run measures at most 1,000 rounds of a test (plus a
few to confirm or replace), and a baseline pools 3 runs.  More is no file the plugin
wrote, and reading one costs memory per round (a stored time may stand for every round)."""

_OMIT: Any = object()


class Form(NamedTuple):
    """A JSON form of the figures: how times are written, and which fields it leaves out."""

    compact: bool
    """Leave out the fields whose rule says ``compact=False`` (and 0 where it says
    ``compact="nonzero"``)."""
    write_times: Callable[[Any], object]
    """A ``TimeStats`` as JSON."""
    read_times: Callable[[type, Fields, str, int | None, bool], Any]
    """``(TimeStats class, object, key, rounds, per_round)`` -> the ``TimeStats`` written
    there (raises ``FieldError``); ``per_round``: one sample per round, where the form
    says how many samples a time has."""


class _Reading:
    """What a record's fields read so far tell the fields after them."""

    __slots__ = ("form", "key", "rounds", "values")

    def __init__(self, form: Form, rounds: int | None, key: str | None) -> None:
        self.form = form
        self.rounds = rounds
        self.key = key
        self.values: dict[str, Any] = {}


@dataclasses.dataclass(frozen=True, kw_only=True)
class Rule:
    """What a field holds, so each codec knows how to write it (``metadata[RULE]``)."""

    top: bool = False
    """Beside :data:`GROUP` rather than in it."""
    compact: bool | str = True
    """In the compact form: True (written), False (left out: read back as None) or
    ``"nonzero"`` (left out when 0)."""
    name: str | None = None
    """Its JSON key, where that is not the field's name."""

    def write(self, value: Any, form: Form, obj: Any) -> object:
        return value

    def read(self, f: Fields, key: str, reading: _Reading) -> Any:
        raise NotImplementedError

    def stored(self, value: Any, obj: Any, done: dict[str, Any]) -> Any:
        """``value`` as the JSON reads back (``obj``: its record; ``done``: the stored
        values of the fields before it)."""
        return value

    def absent(self) -> Any:
        """The value of a field the compact form leaves out."""
        return None


@dataclasses.dataclass(frozen=True, kw_only=True)
class Count(Rule):
    """An exact integer (a count, FLOPs, bytes); None where ``optional`` (left out)."""

    minimum: int | None = 0
    optional: bool = False
    zero_left_out: bool = False
    """Left out when 0 (read back as 0)."""

    def write(self, value: Any, form: Form, obj: Any) -> object:
        if (value is None and self.optional) or (
            not value
            and value is not None
            and (self.zero_left_out or (form.compact and self.compact == "nonzero"))
        ):
            return _OMIT
        return value

    def read(self, f: Fields, key: str, reading: _Reading) -> Any:
        if self.optional:
            return f.opt_integer(key, minimum=self.minimum)
        if self.zero_left_out or (reading.form.compact and self.compact == "nonzero"):
            return f.opt_integer(key, minimum=self.minimum) or 0
        return f.integer(key, minimum=self.minimum)

    def absent(self) -> Any:
        return None if self.optional else 0


@dataclasses.dataclass(frozen=True, kw_only=True)
class Share(Rule):
    """A fraction, kept to three decimals."""

    def write(self, value: Any, form: Form, obj: Any) -> object:
        return round(value, 3)

    def read(self, f: Fields, key: str, reading: _Reading) -> Any:
        return f.number(key)

    def stored(self, value: Any, obj: Any, done: dict[str, Any]) -> Any:
        return round(value, 3)


@dataclasses.dataclass(frozen=True, kw_only=True)
class Times(Rule):
    """A ``TimeStats`` (``of``) over the rounds (ns); None where ``optional`` (left out)."""

    of: type = object
    optional: bool = False
    per_round: bool = True
    """One sample per round when read (a verdict pairs them with the rounds)."""
    shares: str | None = None
    """The field whose very object this one may be (an op that called no other op has
    one time object for its self and total time): then stored as that field's."""
    pair: str | None = None
    """The field this one travels with in the stored form: both or neither."""

    def write(self, value: Any, form: Form, obj: Any) -> object:
        return _OMIT if value is None else form.write_times(value)

    def read(self, f: Fields, key: str, reading: _Reading) -> Any:
        if self.optional and not f.has(key):
            return None
        return reading.form.read_times(self.of, f, key, reading.rounds, self.per_round)

    def stored(self, value: Any, obj: Any, done: dict[str, Any]) -> Any:
        if self.pair is not None and getattr(obj, self.pair) is None:
            return None
        if self.shares is not None and value is getattr(obj, self.shares):
            return done[self.shares]
        return None if value is None else stored_times(value)


@dataclasses.dataclass(frozen=True, kw_only=True)
class Ns(Rule):
    """One statistic of a ``TimeStats`` (ns, three significant digits when written), or,
    with ``samples``, its per-round samples."""

    samples: bool = False

    def write(self, value: Any, form: Form, obj: Any) -> object:
        return [round_sig(s) for s in value] if self.samples else round_sig(value)

    def read(self, f: Fields, key: str, reading: _Reading) -> Any:
        if not self.samples:
            return f.integer(key)
        samples = f.integers(key)
        rounds = reading.rounds
        if not samples or (rounds is not None and len(samples) != rounds):
            expected = (
                "at least one sample" if rounds is None else f"one sample per round ({rounds})"
            )
            raise FieldError(field_path(f.path, key), f"expected {expected}, got {len(samples)}")
        return tuple(samples)

    def stored(self, value: Any, obj: Any, done: dict[str, Any]) -> Any:
        return tuple(round_sig(s) for s in value) if self.samples else round_sig(value)


@dataclasses.dataclass(frozen=True, kw_only=True)
class Nested(Rule):
    """A record of ``of``'s fields, or None (written as null; left out where ``optional``,
    so files of tests without the record are as they were before it existed)."""

    of: type = object
    optional: bool = False

    def write(self, value: Any, form: Form, obj: Any) -> object:
        if value is None:
            return _OMIT if self.optional else None
        return to_json(value, form)

    def read(self, f: Fields, key: str, reading: _Reading) -> Any:
        nested = f.opt_obj(key)
        return None if nested is None else from_json(self.of, nested, form=reading.form)


@dataclasses.dataclass(frozen=True, kw_only=True)
class Ops(Rule):
    """The ops, by key, each a record of ``of`` (written in key order, without its key)."""

    of: type = object
    stats: type = object
    """The class of the ops' times (for the native stored form)."""

    def write(self, value: Any, form: Form, obj: Any) -> object:
        return {key: to_json(op, form) for key, op in sorted(value.items())}

    def read(self, f: Fields, key: str, reading: _Reading) -> Any:
        of, rounds, form = self.of, reading.rounds, reading.form
        return {
            k: from_json(of, op, rounds=rounds, key=k, form=form) for k, op in f.obj(key).entries()
        }

    def stored(self, value: Any, obj: Any, done: dict[str, Any]) -> Any:
        """Each op's stored form, in key order: natively where every time has one sample
        (``_native.stored_ops``; most tests), else op by op."""
        from pytest_opprof import _native

        if type(value) is dict:
            made = _native.stored_ops(value, self.of, self.stats)
            if made is not None:
                return made
        return {key: stored(op) for key, op in sorted(value.items())}


@dataclasses.dataclass(frozen=True, kw_only=True)
class OpKey(Rule):
    """An op's key: the key of the ops' object, not written in the op."""

    def write(self, value: Any, form: Form, obj: Any) -> object:
        return _OMIT

    def read(self, f: Fields, key: str, reading: _Reading) -> Any:
        return reading.key


@dataclasses.dataclass(frozen=True, kw_only=True)
class Spans(Rule):
    """``(low, high)`` of the figures in ``names`` that varied; written when any did, and
    read back around the record's figures (its ``exact_values()``)."""

    names: tuple[str, ...] = ()

    def write(self, value: Any, form: Form, obj: Any) -> object:
        return {name: [lo, hi] for name, (lo, hi) in sorted(value.items())} if value else _OMIT

    def read(self, f: Fields, key: str, reading: _Reading) -> Any:
        return {}  # read once the record is built: see _checked_ranges

    def absent(self) -> Any:
        return {}


@dataclasses.dataclass(frozen=True, kw_only=True)
class RoundCount(Rule):
    """The rounds measured."""

    def read(self, f: Fields, key: str, reading: _Reading) -> Any:
        reading.rounds = f.integer(key, minimum=1, maximum=MAX_STORED_ROUNDS)
        return reading.rounds


@dataclasses.dataclass(frozen=True, kw_only=True)
class Sessions(Rule):
    """Rounds per pooled session, adding up to the rounds; written when more than one."""

    def write(self, value: Any, form: Form, obj: Any) -> object:
        return list(value) if len(value) > 1 else _OMIT

    def read(self, f: Fields, key: str, reading: _Reading) -> Any:
        rounds = reading.rounds
        sessions = tuple(f.integers(key)) if f.has(key) else ()
        if sessions and (min(sessions) < 1 or sum(sessions) != rounds):
            raise FieldError(
                field_path(f.path, key),
                f"expected rounds per session (each >= 1) adding up to rounds {rounds}, "
                f"got {list(sessions)}",
            )
        return sessions if len(sessions) > 1 else ()

    def stored(self, value: Any, obj: Any, done: dict[str, Any]) -> Any:
        return value if len(value) > 1 else ()


@dataclasses.dataclass(frozen=True, kw_only=True)
class LeftOutOf(Rule):
    """A record of ``of`` there exactly when the ops hold ``marker`` (None otherwise)."""

    of: type = object
    marker: str = ""
    ops: str = "ops"

    def write(self, value: Any, form: Form, obj: Any) -> object:
        return _OMIT if value is None else to_json(value, form)

    def read(self, f: Fields, key: str, reading: _Reading) -> Any:
        if f.has(key) != (self.marker in reading.values[self.ops]):
            raise FieldError(
                field_path(f.path, key),
                f"expected exactly when the ops hold {self.marker!r} (the ops a baseline left out)",
            )
        return from_json(self.of, f.obj(key), form=reading.form) if f.has(key) else None


@dataclasses.dataclass(frozen=True, kw_only=True)
class Hex32(Rule):
    """A 32-bit digest, written as 8 hex digits."""

    def write(self, value: Any, form: Form, obj: Any) -> object:
        return f"{value:08x}"

    def read(self, f: Fields, key: str, reading: _Reading) -> Any:
        digest = f.text(key)
        try:
            value = int(digest, 16)
        except ValueError:
            value = -1
        if not 0 <= value < 2**32 or len(digest) != 8:
            raise FieldError(field_path(f.path, key), f"expected 8 hex digits, got {digest!r}")
        return value


@dataclasses.dataclass(frozen=True, kw_only=True)
class PerRoundKeys(Rule):
    """Per round, some op keys (sorted); None when none: written as lists of keys."""

    def write(self, value: Any, form: Form, obj: Any) -> object:
        return _OMIT if value is None else [list(keys) for keys in value]

    def read(self, f: Fields, key: str, reading: _Reading) -> Any:
        if not f.has(key):
            return None
        raw, rounds = f.data[key], reading.rounds
        if (
            not isinstance(raw, list)
            or len(raw) != rounds
            or not all(isinstance(k, list) and all(isinstance(s, str) for s in k) for k in raw)
        ):
            raise FieldError(
                field_path(f.path, key), f"expected {rounds} lists of op keys, one per round"
            )
        return tuple(tuple(sorted(keys)) for keys in raw)


@dataclasses.dataclass(frozen=True, kw_only=True)
class OpBytes(Rule):
    """Bytes by op key, each above 0; written when there are any (read back as ``{}``
    when left out)."""

    def write(self, value: Any, form: Form, obj: Any) -> object:
        return {key: value[key] for key in sorted(value)} if value else _OMIT

    def read(self, f: Fields, key: str, reading: _Reading) -> Any:
        if not f.has(key):
            return {}
        raw = f.data[key]
        if not isinstance(raw, dict) or not all(
            isinstance(op, str) and type(n) is int and n > 0 for op, n in raw.items()
        ):
            raise FieldError(field_path(f.path, key), "expected op keys, each with bytes > 0")
        return dict(raw)

    def absent(self) -> Any:
        return {}


@dataclasses.dataclass(frozen=True, kw_only=True)
class SiteCounts(Rule):
    """Counts by site (an op, and the scope it ran in): each a tuple of ``width`` integers
    >= 0, not all 0; written when there are any (read back as ``{}`` when left out)."""

    width: int = 1

    def write(self, value: Any, form: Form, obj: Any) -> object:
        return {key: list(value[key]) for key in sorted(value)} if value else _OMIT

    def read(self, f: Fields, key: str, reading: _Reading) -> Any:
        if not f.has(key):
            return {}
        raw = f.data[key]
        if not isinstance(raw, dict) or not all(
            isinstance(site, str) and _counts(counts, self.width) for site, counts in raw.items()
        ):
            raise FieldError(
                field_path(f.path, key), f"expected sites, each with {self.width} counts >= 0"
            )
        return {site: tuple(counts) for site, counts in raw.items()}

    def absent(self) -> Any:
        return {}


def _counts(value: object, width: int) -> bool:
    """Whether ``value`` is a list of ``width`` integers >= 0, not all 0."""
    return (
        isinstance(value, list)
        and len(value) == width
        and all(type(n) is int and 0 <= n <= INT64_MAX for n in value)
        and any(value)
    )


_RULES: dict[type, tuple[tuple[str, Rule], ...]] = {}
_GROUPED: dict[type, bool] = {}
_CHANGES: dict[type, tuple[tuple[str, Callable[[Any, Any, dict[str, Any]], Any]], ...]] = {}


def rules(cls: type) -> tuple[tuple[str, Rule], ...]:
    """``(field name, rule)`` of each field of ``cls``, in field order; raises TypeError
    for a field without a rule (a figure no codec would know how to write)."""
    known = _RULES.get(cls)
    if known is not None:
        return known
    out = []
    for f in dataclasses.fields(cls):
        kind = f.metadata.get(RULE)
        if not isinstance(kind, Rule):
            raise TypeError(
                f"{cls.__name__}.{f.name} has no rule: give it one in its metadata[RULE]"
            )
        out.append((f.name, kind))
    _RULES[cls] = made = tuple(out)
    _GROUPED[cls] = any(kind.top for _, kind in made)
    # The fields whose stored value is not the value itself.
    _CHANGES[cls] = tuple(
        (name, kind.stored) for name, kind in made if type(kind).stored is not Rule.stored
    )
    return made


def _grouped(cls: type) -> bool:
    rules(cls)
    return _GROUPED[cls]


def to_json(obj: Any, form: Form | None = None) -> dict[str, object]:
    """``obj`` (a summary record) as JSON in ``form`` (:data:`FULL` by default)."""
    form = FULL if form is None else form
    out: dict[str, object] = {}
    group: dict[str, object] = {}
    grouped = _grouped(type(obj))
    for name, kind in rules(type(obj)):
        if form.compact and kind.compact is False:
            continue
        value = kind.write(getattr(obj, name), form, obj)
        if value is not _OMIT:
            (group if grouped and not kind.top else out)[kind.name or name] = value
    if grouped:
        out[GROUP] = group
    return out


def from_json(
    cls: type,
    f: Fields,
    *,
    rounds: int | None = None,
    key: str | None = None,
    form: Form | None = None,
) -> Any:
    """Read back :func:`to_json` of a ``cls`` (raises ``FieldError``); ``rounds``: the
    samples each time must have (a record with a round count reads its own); ``key``:
    an op's key."""
    reading = _Reading(FULL if form is None else form, rounds, key)
    group = f.obj(GROUP) if _grouped(cls) else f
    values = reading.values
    for name, kind in rules(cls):
        if reading.form.compact and kind.compact is False:
            values[name] = kind.absent()
        else:
            values[name] = kind.read(f if kind.top else group, kind.name or name, reading)
    obj = cls(**values)
    return _checked_ranges(obj, group)


def _checked_ranges(obj: Any, f: Fields) -> Any:
    """``obj`` with the ranges ``f`` holds (optional: files written before ranges have
    none), each a pair of integers around the figure's value."""
    for name, kind in rules(type(obj)):
        if not isinstance(kind, Spans) or not f.has(kind.name or name):
            continue
        r = f.obj(kind.name or name)
        values: Mapping[str, int | None] = obj.exact_values()
        out: dict[str, tuple[int, int]] = {}
        for figure in sorted(r.data):
            where = field_path(r.path, figure)
            if figure not in kind.names:
                raise FieldError(where, f"expected one of {', '.join(kind.names)}")
            value = values.get(figure)
            if value is None:
                raise FieldError(where, "a range for a figure that was not measured")
            lo, hi = r.int_pair(figure)
            if not lo <= value <= hi:
                raise FieldError(
                    where, f"expected a range around the figure {value}, got [{lo}, {hi}]"
                )
            out[figure] = (lo, hi)
        if out:
            obj = dataclasses.replace(obj, **{name: out})
    return obj


def stored(obj: Any) -> Any:
    """What :func:`to_json` of ``obj`` reads back as, built without the text (times rounded
    to three significant digits, shares to three decimals)."""
    # A copy filled in place rather than through the frozen __init__ (a setattr per
    # field): once per test and per op a native call did not store.
    cls = type(obj)
    rules(cls)
    out = object.__new__(cls)
    done = out.__dict__
    source = obj.__dict__
    done.update(source)
    for name, change in _CHANGES[cls]:
        done[name] = change(source[name], obj, done)
    return out


def stored_times(stats: Any) -> Any:
    """:func:`stored` of a ``TimeStats``: one rounding for all of one sample's statistics
    (one round: most tests)."""
    ns = stats.one_sample()
    return type(stats).single(round_sig(ns)) if ns is not None else stored(stats)


def _write_times(stats: Any) -> object:
    return to_json(stats, FULL)


def _read_times(of: type, f: Fields, key: str, rounds: int | None, per_round: bool) -> Any:
    return from_json(of, f.obj(key), rounds=rounds if per_round else None)


FULL = Form(False, _write_times, _read_times)
"""Every figure, a time as its samples and statistics (reports, payloads, schema 1)."""


def field_names(cls: type) -> tuple[str, ...]:
    """The names of ``cls``' fields, in order."""
    return tuple(f.name for f in dataclasses.fields(cls))


def filled(cls: type, names: tuple[str, ...], values: Any) -> Any:
    """A ``cls`` holding ``values`` in the fields ``names``: what ``cls(*values)`` makes,
    without the frozen ``__init__``'s setattr per field (the op records of every test are
    built this way); its instance dict made at once."""
    obj: Any = object.__new__(cls)
    object.__setattr__(obj, "__dict__", dict(zip(names, values, strict=True)))
    return obj
