"""The summary classes' dataclass fields are the one schema: the native builder fills the
fields it is given, and every codec follows the fields' rules."""

from __future__ import annotations

import dataclasses

import pytest

from pytest_opprof import _native
from pytest_opprof.gate import summary_codec
from pytest_opprof.gate.summary import (
    LeftOut,
    MemoryFigures,
    OpSummary,
    RoundFigures,
    TestSummary,
    TimeStats,
    _one_round_op,
)
from pytest_opprof.gate.summary_codec import RULE, Count

KEYS = ["numpy.sum", "[memory]", "numpy.add"]
SUMS = [
    [2, 900, 400, 0, 0, 64, 32, 10, 10],
    [3, 0, 0, 0, 0, 96, 96, 0, 0],
    [1, 300, 300, 50, 40, 8, 8, 6, 6],
]


def _names(cls: type) -> list[str]:
    return [f.name for f in dataclasses.fields(cls)]


def _python_ops() -> dict[str, OpSummary]:
    figures = RoundFigures.from_sums(KEYS, SUMS, wall_time_ns=1, cpu_time_ns=1).ops
    return {key: _one_round_op(key, figures[key]) for key in sorted(KEYS)}


def _assert_filled_as_the_schema_says(ops: dict[str, OpSummary]) -> None:
    for op in ops.values():
        assert list(vars(op)) == _names(OpSummary)
        for name in ("self_cpu_time", "cpu_time", "self_device_time", "device_time"):
            stats = getattr(op, name)
            assert stats is None or list(vars(stats)) == _names(TimeStats)


def test_the_native_builder_fills_the_fields_of_the_schema_with_pythons_values() -> None:
    # A real native call: every field of OpSummary and TimeStats filled, in field order,
    # with what the Python builder puts there.  A field added, removed or moved in the
    # dataclasses without the builder's order (native/one_round.h) following fails here.
    built = _native.one_round_ops(KEYS, SUMS, "[memory]", 2**50, OpSummary, TimeStats)
    assert built is not None
    ops = built[0]
    _assert_filled_as_the_schema_says(ops)
    expected = _python_ops()
    assert ops == expected and list(ops) == list(expected)
    for key, op in ops.items():
        assert vars(op) == vars(expected[key])
    stored = _native.stored_ops(ops, OpSummary, TimeStats)
    assert stored is not None
    _assert_filled_as_the_schema_says(stored)
    assert stored == {key: summary_codec.stored(op) for key, op in expected.items()}


def test_the_native_builder_takes_the_names_it_is_given() -> None:
    # The builder knows what it fills in which place, not the fields' names: a class whose
    # fields are called otherwise is filled under those names.
    Op = dataclasses.make_dataclass("Op", [f"op_{i}" for i in range(len(_names(OpSummary)))])
    Stats = dataclasses.make_dataclass("Stats", [f"s_{i}" for i in range(len(_names(TimeStats)))])
    built = _native.one_round_ops(["numpy.add"], SUMS[2:], "[memory]", 2**50, Op, Stats)
    assert built is not None
    op = built[0]["numpy.add"]
    assert list(vars(op)) == _names(Op)
    assert (op.op_0, op.op_1, op.op_9) == ("numpy.add", 1, {})
    assert vars(op.op_2) == {
        "s_0": (300,),
        **dict.fromkeys(_names(Stats)[1:5], 300),
        "s_5": 0,
        "s_6": 0,
    }
    assert op.op_3 is op.op_2  # the total time is the self time's object when equal


def test_the_native_builder_refuses_a_schema_it_does_not_fill() -> None:
    @dataclasses.dataclass(frozen=True)
    class WiderOp(OpSummary):
        extra: int = 0

    with pytest.raises(TypeError, match=r"11 field names it fills \(the key, count"):
        _native.one_round_ops(KEYS, SUMS, "[memory]", 2**50, WiderOp, TimeStats)
    ops = _python_ops()
    with pytest.raises(TypeError, match=r"7 field names it fills \(the samples, median"):
        _native.stored_ops(ops, OpSummary, LeftOut)


@pytest.mark.parametrize("cls", [TestSummary, OpSummary, TimeStats, MemoryFigures, LeftOut])
def test_every_field_of_the_summary_says_how_it_is_written(cls: type) -> None:
    assert [name for name, _ in summary_codec.rules(cls)] == _names(cls)


def test_a_field_without_a_rule_is_refused_by_every_codec() -> None:
    @dataclasses.dataclass(frozen=True)
    class Figures:
        counted: int = dataclasses.field(metadata={RULE: Count()})
        forgotten: int = 0

    with pytest.raises(TypeError, match=r"Figures\.forgotten has no rule"):
        summary_codec.to_json(Figures(1, 2))
