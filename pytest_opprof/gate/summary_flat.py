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
alike (the rounds, sessions, ranges, left-out digest, switched ops, no leaked ops) are
not written;
the ops come after the test's fields.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any

from pytest_opprof.gate.summary import OpSummary, TestSummary, TimeStats
from pytest_opprof.gate.summary_codec import (
    LeftOutOf,
    Nested,
    OpBytes,
    Ops,
    PerRoundKeys,
    RoundCount,
    Rule,
    Sessions,
    Spans,
    Times,
    field_names,
    filled,
    rules,
)

_SAME = "="
_FIXED: dict[type[Rule], Callable[[], Any]] = {
    RoundCount: lambda: 1,
    Sessions: tuple,
    Spans: dict,
    LeftOutOf: lambda: None,
    PerRoundKeys: lambda: None,
    OpBytes: dict,
}
"""What one round without pooled sessions holds in a field of each of these rules (a new
object each time: a dict is mutable)."""


class _NoFlatForm(Exception):
    """What the layout has no place for."""


def _ns(stats: Any) -> int:
    """``ns`` of a ``TimeStats.single(ns)`` (raises :class:`_NoFlatForm` otherwise)."""
    ns = stats.one_sample() if type(stats) is TimeStats else None
    if ns is None:
        raise _NoFlatForm
    return ns


def _check_fixed(record: dict[str, Any], fixed: list[tuple[str, Callable[[], Any]]]) -> None:
    for name, make in fixed:
        value, want = record[name], make()
        if type(value) is not type(want) or value != want:
            raise _NoFlatForm


class _Plan:
    """Where each field of a record class goes in the flat list."""

    def __init__(self, cls: type) -> None:
        self.names = field_names(cls)
        self.fixed: list[tuple[str, Callable[[], Any]]] = []
        self.fixed_at: list[tuple[int, Callable[[], Any]]] = []
        written: list[str] = []
        self.times: list[tuple[int, int, bool]] = []
        """(slot, slot of the field it may share or -1, None allowed), by slot."""
        self.nested: list[tuple[int, type]] = []
        self.ops = ""
        for at, (name, kind) in enumerate(rules(cls)):
            if type(kind) in _FIXED:
                self.fixed.append((name, _FIXED[type(kind)]))
                self.fixed_at.append((at, _FIXED[type(kind)]))
            elif isinstance(kind, Ops):
                self.ops = name
                self.fixed_at.append((at, dict))  # filled once the ops are read
            else:
                if isinstance(kind, Times):
                    shared = written.index(kind.shares) if kind.shares else -1
                    self.times.append((len(written), shared, kind.optional))
                elif isinstance(kind, Nested):
                    self.nested.append((len(written), kind.of))
                written.append(name)
        self.written = tuple(written)
        self.get = operator.itemgetter(*written)
        self.nested_names = {of: field_names(of) for _, of in self.nested}
        self.nested_at = dict(self.nested)


_TEST = _Plan(TestSummary)
_OP = _Plan(OpSummary)
_OP_WIDTH = len(_OP.written)


def _flat_times(values: list[Any], plan: _Plan) -> None:
    """Each time of ``values`` (a record's written fields) as its flat slot, in place;
    the last first, so a shared object is still the object when its sharer is looked at."""
    for at, shared, optional in reversed(plan.times):
        value = values[at]
        if shared >= 0 and value is values[shared]:
            values[at] = _SAME
        elif value is None and optional:
            continue
        else:
            values[at] = _ns(value)


def flat_values(summary: TestSummary) -> list[Any] | None:
    """The summary's values in one list (see the module docstring); None where it has
    anything the layout has no place for."""
    try:
        return _flat(summary)
    except _NoFlatForm:
        return None


def _flat(s: TestSummary) -> list[Any]:
    d = s.__dict__
    _check_fixed(d, _TEST.fixed)
    ops = d[_TEST.ops]
    if type(ops) is not dict:
        raise _NoFlatForm
    head = list(_TEST.get(d))
    _flat_times(head, _TEST)
    for at, of in reversed(_TEST.nested):
        record = head[at]
        names = _TEST.nested_names[of]
        if record is None:
            head[at : at + 1] = [None] * len(names)
            continue
        if type(record) is not of:
            raise _NoFlatForm
        inner = [record.__dict__[n] for n in names]
        if None in inner:
            raise _NoFlatForm  # None marks "no record"
        if any(isinstance(v, dict) for v in inner):
            raise _NoFlatForm  # a record with more than figures (traffic by site)
        head[at : at + 1] = inner
    head.append(None)
    out = head
    for key, op in ops.items():
        if type(op) is not OpSummary:
            raise _NoFlatForm
        o = op.__dict__
        _check_fixed(o, _OP.fixed)
        values = list(_OP.get(o))
        if type(key) is not str or o["key"] != key:
            raise _NoFlatForm
        _flat_times(values, _OP)
        out += values
    return out


def _built_times(values: list[Any], plan: _Plan) -> None:
    single = TimeStats.single
    for at, shared, _ in plan.times:
        value = values[at]
        if value is not None:
            values[at] = values[shared] if type(value) is str else single(value)


def _filled(cls: type, plan: _Plan, values: list[Any]) -> Any:
    for at, make in plan.fixed_at:
        values.insert(at, make())
    return filled(cls, plan.names, values)


def from_flat_values(values: list[Any]) -> TestSummary:
    """The summary :func:`flat_values` wrote."""
    head: list[Any] = []
    at = 0
    for slot in range(len(_TEST.written)):
        of = _TEST.nested_at.get(slot)
        if of is None:
            head.append(values[at])
            at += 1
            continue
        width = len(_TEST.nested_names[of])
        inner = values[at : at + width]
        at += width
        head.append(None if inner[0] is None else filled(of, _TEST.nested_names[of], inner))
    _built_times(head, _TEST)
    ops: dict[str, OpSummary] = {}
    for start in range(at + 1, len(values), _OP_WIDTH):
        op_values = values[start : start + _OP_WIDTH]
        _built_times(op_values, _OP)
        op: OpSummary = _filled(OpSummary, _OP, op_values)
        ops[op.key] = op
    summary: TestSummary = _filled(TestSummary, _TEST, head)
    summary.__dict__[_TEST.ops] = ops
    return summary
