"""A one-round test summary as one flat list of numbers and strings, for the result spool.

Most tests are measured over one round, and their summary is a tree of small records:
per op an ``OpSummary`` with one-sample ``TimeStats``.  The spool's generic encoding
walks that tree record by record (several Python calls per op) and its reading builds a
JSON object per record; for a test the gate does not judge (every test of a
``--pyargs`` run) that was most of what its result cost the session after the test
ran.  :func:`flat_values` writes such a summary as its values in one flat list
(``spool.SHORT_FORMS``) and :func:`from_flat_values` builds an equal summary back: the
same values of the same types, so every report read from the spool is the same.  A
summary with anything the layout has no place for (more rounds, ranges, pooled sessions,
a left-out digest, statistics of more than one sample) gets None and takes the generic
encoding.

Layout, from the fields of ``TestSummary`` and ``OpSummary`` in order and their rules
(``summary_codec``): first the test's fields, then one empty slot, then per op its
fields.  A time is its one sample's ns (None: not measured; ``"="``: the very object
of the field it may share, ``Times.shares``), a nested record its fields (all None:
none), a figure itself.  Fields that one round without pooled sessions always holds
alike (the rounds, sessions, ranges, left-out digest, switched ops) are not written;
the ops come after the test's fields.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pytest_opprof.gate.summary import OpSummary, TestSummary, TimeStats
from pytest_opprof.gate.summary_codec import (
    LeftOutOf,
    Nested,
    OpKey,
    Ops,
    PerRoundKeys,
    RoundCount,
    Rule,
    Sessions,
    Spans,
    Times,
    field_names,
    filler,
    rules,
)

_SAME = "="
_FIXED: dict[type[Rule], Callable[[], Any]] = {
    RoundCount: lambda: 1,
    Sessions: tuple,
    Spans: dict,
    LeftOutOf: lambda: None,
    PerRoundKeys: lambda: None,
}
"""What one round without pooled sessions holds in a field of each of these rules (a new
object each time: a dict is mutable)."""


class _NoFlatForm(Exception):
    """What the layout has no place for."""


def _compiled(cls: type) -> tuple[Callable[..., list[Any]], Callable[[list[Any]], Any], int]:
    """(encode, decode, width) of the flat form of ``cls``, compiled from its fields' rules
    as ``dataclasses`` compiles an ``__init__``: it runs per op of every test, where a loop
    over the rules cost twice the straight code.

    ``encode(record.__dict__, key)`` gives the record's ``width`` slots (raises
    :class:`_NoFlatForm` where the layout has no place for what it holds);
    ``decode(slots)`` builds the record back, an ``Ops`` field as an empty dict to fill."""
    names = field_names(cls)
    env: dict[str, Any] = {
        "NoFlat": _NoFlatForm,
        "one": TimeStats.one_sample,
        "Stats": TimeStats,
        "single": TimeStats.single,
        "SAME": _SAME,
        "fill": filler(cls),
    }
    checks: list[str] = []
    reads: list[str] = []
    slots: list[str] = []
    unpacked: list[str] = []
    builds: list[str] = []
    fields: list[str] = []
    for at, (name, kind) in enumerate(rules(cls)):
        x, y = f"x{at}", f"y{at}"
        if type(kind) in _FIXED:
            env[f"make{at}"] = make = _FIXED[type(kind)]
            env[f"type{at}"] = type(make())
            checks.append(f"type(d[{name!r}]) is not type{at} or d[{name!r}] != make{at}()")
            fields.append(f"make{at}()")
        elif isinstance(kind, Ops):
            fields.append("{}")
        elif isinstance(kind, Nested):
            inner = field_names(kind.of)
            env[f"fill{at}"], env[f"inner{at}"] = filler(kind.of), inner
            env[f"of{at}"] = kind.of
            reads += [
                f"{x} = d[{name!r}]",
                f"if {x} is None:",
                f"    {x} = {(None,) * len(inner)!r}",
                f"elif type({x}) is not of{at}:",
                "    raise NoFlat",
                "else:",
                f"    {x} = tuple(map({x}.__dict__.__getitem__, inner{at}))",
                f"    if None in {x}:",  # None marks "no record"
                "        raise NoFlat",
            ]
            slots.append(f"*{x}")
            parts = [f"{x}_{i}" for i in range(len(inner))]
            unpacked += parts
            record = f"fill{at}({', '.join(parts)})"
            builds.append(f"{y} = None if {parts[0]} is None else {record}")
            fields.append(y)
        else:
            reads.append(f"{x} = d[{name!r}]")
            unpacked.append(x)
            if isinstance(kind, OpKey):
                checks.append(f"type(key) is not str or d[{name!r}] != key")
            if not isinstance(kind, Times):
                slots.append(x)
                fields.append(x)
                continue
            # A time: its one sample (t), checked before the slots are made.
            t = f"t{at}"
            one = f"one({x}) if type({x}) is Stats else None"
            reads.append(f"{t} = {one}\n    if {t} is None:\n        raise NoFlat")
            if kind.optional:
                reads[-1] = f"if {x} is None:\n        {t} = None\n    else:\n        " + (
                    reads[-1].replace("\n    ", "\n        ")
                )
            back = f"None if {x} is None else single({x})" if kind.optional else f"single({x})"
            if kind.shares is not None:
                shared = names.index(kind.shares)
                reads[-1] = (
                    f"if {x} is x{shared}:\n        {t} = SAME\n    else:\n        "
                    + reads[-1].replace("\n    ", "\n        ")
                )
                back = f"y{shared} if {x} == SAME else {back}"
            slots.append(t)
            builds.append(f"{y} = {back}")
            fields.append(y)
    source = "\n".join(
        [
            "def encode(d, key=None):",
            *(f"    if {check}:\n        raise NoFlat" for check in checks),
            *(f"    {line}" for line in reads),
            f"    return [{', '.join(slots)}]",
            "def decode(v):",
            f"    {', '.join(unpacked)}, = v",
            *(f"    {line}" for line in builds),
            f"    return fill({', '.join(fields)})",
        ]
    )
    exec(compile(source, f"<flat form of {cls.__name__}>", "exec"), env)
    return env["encode"], env["decode"], len(unpacked)


_ENCODE_TEST, _DECODE_TEST, _TEST_WIDTH = _compiled(TestSummary)
_ENCODE_OP, _DECODE_OP, _OP_WIDTH = _compiled(OpSummary)
_OPS = next(name for name, kind in rules(TestSummary) if isinstance(kind, Ops))
_KEY = next(name for name, kind in rules(OpSummary) if isinstance(kind, OpKey))


def flat_values(summary: TestSummary) -> list[Any] | None:
    """The summary's values in one list (see the module docstring); None where it has
    anything the layout has no place for."""
    try:
        return _flat(summary)
    except _NoFlatForm:
        return None


def _flat(summary: TestSummary) -> list[Any]:
    d = summary.__dict__
    out = _ENCODE_TEST(d)
    ops = d[_OPS]
    if type(ops) is not dict:
        raise _NoFlatForm
    out.append(None)
    encode = _ENCODE_OP
    for key, op in ops.items():
        if type(op) is not OpSummary:
            raise _NoFlatForm
        out += encode(op.__dict__, key)
    return out


def from_flat_values(values: list[Any]) -> TestSummary:
    """The summary :func:`flat_values` wrote."""
    summary: TestSummary = _DECODE_TEST(values[:_TEST_WIDTH])
    ops = summary.__dict__[_OPS]
    decode, width = _DECODE_OP, _OP_WIDTH
    for at in range(_TEST_WIDTH + 1, len(values), width):
        op = decode(values[at : at + width])
        ops[op.__dict__[_KEY]] = op
    return summary
