"""FLOPs come from recorded input shapes: a session without record_shapes
counts none, on the C path, the numpy path and the event objects alike (a
formula handed no shapes used to count an elementwise op as one FLOP)."""

from __future__ import annotations

import numpy as np
import pytest

import pytest_opprof as opprof
from pytest_opprof.model.averages import average_records
from pytest_opprof.native_layout.records import Records


def _records(record_shapes: bool) -> Records:
    x = np.ones(8)
    with opprof.profile(capture=["numpy"], record_shapes=record_shapes, profile_memory=False) as p:
        for _ in range(3):
            np.add(x, x)
        np.outer(x, x)  # a composite op: its multiply child carries the FLOPs
    return p.records()


@pytest.mark.parametrize("native", [True, False])
def test_no_shapes_no_flops(native: bool) -> None:
    rows, _ = average_records(_records(False), with_flops=True, native=native)
    assert {r.key for r in rows} >= {"numpy.add", "numpy.outer", "numpy.multiply"}
    assert [(r.key, r.flops, r.self_flops) for r in rows if r.flops or r.self_flops] == []


@pytest.mark.parametrize("native", [True, False])
def test_with_shapes_flops_are_counted(native: bool) -> None:
    rows, _ = average_records(_records(True), with_flops=True, native=native)
    by_key = {r.key: r for r in rows}
    assert by_key["numpy.add"].flops == 3 * 8
    assert by_key["numpy.multiply"].self_flops == 8 * 8


def test_event_objects_agree() -> None:
    x = np.ones(8)
    with opprof.profile(capture=["numpy"], record_shapes=False, profile_memory=False) as p:
        np.add(x, x)
    assert [e.flops for e in p.events() if e.key == "numpy.add"] == [0]
