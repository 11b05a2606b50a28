"""A drain's shapes are decoded on first use (native_layout/shape_table.py), from a
copy of the core's table taken at the drain: the next profile's start clears
that table and reuses its ids for other shapes, so what a later read returns
must still be the first session's shapes, in every way they are read."""

from __future__ import annotations

import numpy as np
import pytest

import pytest_opprof as opprof
from pytest_opprof import _native
from pytest_opprof.errors import NativeError
from pytest_opprof.native_layout.records import Records


def _record(arrays: list[np.ndarray]) -> tuple[Records, opprof.profile]:
    with opprof.profile(capture=["numpy"], record_shapes=True, profile_memory=False) as prof:
        for a in arrays:
            np.add(a, a)
            np.matmul(a, a.T)
    return prof.records(), prof


def _by_event(recs: Records, name: str) -> list[tuple[list[list[int] | None], list[str]]]:
    ev = recs.events
    rows = ev[ev["name"] == recs.names.index(name)]
    rows = rows[np.argsort(rows["start_ns"], kind="stable")]
    return [(recs.shapes[int(s)], list(recs.dtypes[int(s)])) for s in rows["shape"]]


def test_shapes_read_after_a_later_profile_are_the_first_sessions() -> None:
    first = [np.ones((n, 3)) for n in range(1, 40)]
    recs, prof = _record(first)
    # Same number of distinct entries, other shapes: the core's ids 1.. now mean these.
    _record([np.ones((n, 5), dtype=np.float32) for n in range(1, 40)])
    assert _by_event(recs, "numpy.add") == [([list(a.shape)] * 2, ["float64"] * 2) for a in first]
    assert _by_event(recs, "numpy.matmul") == [
        ([list(a.shape), [3, a.shape[0]]], ["float64"] * 2) for a in first
    ]
    by_shape = {
        (g.key, repr(g.input_shapes)): g.flops for g in prof.key_averages(group_by_input_shape=True)
    }
    assert by_shape[("numpy.matmul", repr([[7, 3], [3, 7]]))] == 2 * 7 * 3 * 7
    assert sum(g.flops for g in prof.key_averages() if g.key == "numpy.matmul") == sum(
        2 * a.shape[0] * 3 * a.shape[0] for a in first
    )


def test_iterating_indexing_and_slicing_agree() -> None:
    recs, _ = _record([np.ones((n, 2)) for n in range(1, 6)])
    one_by_one = [recs.shapes[i] for i in range(len(recs.shapes))]
    assert one_by_one[0] == [] and recs.dtypes[0] == []
    assert list(recs.shapes) == one_by_one == recs.shapes
    assert recs.shapes[-1] == one_by_one[-1]
    assert recs.shapes[1:3] == one_by_one[1:3]
    assert [list(d) for d in recs.dtypes] == [recs.dtypes[i] for i in range(len(recs.dtypes))]
    with pytest.raises(IndexError, match="out of range"):
        recs.shapes[len(recs.shapes)]


def test_a_malformed_copy_is_refused_with_the_functions_name() -> None:
    words = np.array([1, (2 << 32) | 5], dtype=np.int64)  # one float64 arg of 5 dims, none given
    starts = np.array([0, 0, 2], dtype=np.int64)
    with pytest.raises(NativeError, match="opprof_shape_texts: shape id 1 is malformed"):
        _native._shape_texts(words, starts, [1])
    with pytest.raises(NativeError, match="shape id 7 is not in a table of 2 ids"):
        _native._shape_texts(words, starts, [7])
