"""FLOP formulas: exact matrix products and einsum against hand-derived counts and numpy."""

from __future__ import annotations

import json
import math
import re
from typing import TYPE_CHECKING

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import pytest_opprof as opprof
from pytest_opprof import _native
from pytest_opprof.flops import flops_for
from pytest_opprof.flops.numpy_ops import einsum_flops
from pytest_opprof.model.averages import _int_sums, average_records
from pytest_opprof.model.event_flops import FLOPS_MAX

if TYPE_CHECKING:
    from run_helpers import PytestRunner

dims = st.integers(min_value=1, max_value=9)


@given(m=dims, k=dims, n=dims)
def test_matmul_and_dot_are_two_mnk(m: int, k: int, n: int) -> None:
    for name in ("numpy.matmul", "numpy.dot", "numpy.ndarray.dot", "numpy.linalg.matmul"):
        assert flops_for(name, [[m, k], [k, n]]) == 2 * m * n * k


@given(b=dims, m=dims, k=dims, n=dims)
def test_batched_matmul_broadcasts_the_batch(b: int, m: int, k: int, n: int) -> None:
    assert flops_for("numpy.matmul", [[b, m, k], [k, n]]) == 2 * b * m * n * k
    assert flops_for("numpy.matmul", [[b, 1, m, k], [3, k, n]]) == 2 * b * 3 * m * n * k


@given(k=dims, n=dims)
def test_vector_products(k: int, n: int) -> None:
    assert flops_for("numpy.matmul", [[k], [k, n]]) == 2 * n * k
    assert flops_for("numpy.vdot", [[k], [k]]) == 2 * k
    assert flops_for("numpy.inner", [[n, k], [3, k]]) == 2 * n * 3 * k
    assert flops_for("numpy.outer", [[k], [n]]) == k * n
    assert flops_for("numpy.multiply.outer", [[k], [n]]) == k * n
    assert flops_for("numpy.dot", [[], [k, n]]) == k * n


def test_tensordot_default_axes_contracts_two_axes() -> None:
    # a: (2, 3, 4), b: (3, 4, 5): out (2, 5), each a sum of 12 products
    assert flops_for("numpy.tensordot", [[2, 3, 4], [3, 4, 5]]) == 2 * 2 * 5 * 12


def _numpy_einsum_cost(subscripts: str, *shapes: tuple[int, ...]) -> int:
    operands = [np.broadcast_to(np.zeros(()), s) for s in shapes]
    text = np.einsum_path(subscripts, *operands, optimize=False)[1]
    printed = re.search(r"Optimized FLOP count:\s*(\S+)", text)
    assert printed is not None
    return round(float(printed.group(1))) - 1  # einsum_path adds 1 to the contraction's cost


@pytest.mark.parametrize(
    ("subscripts", "shapes", "hand"),
    [
        ("ij,jk->ik", [(3, 4), (4, 5)], 2 * 3 * 4 * 5),
        ("bij,bjk->bik", [(2, 3, 4), (2, 4, 5)], 2 * 2 * 3 * 4 * 5),
        ("i,i->", [(7,), (7,)], 2 * 7),
        ("ij,ij->ij", [(3, 4), (3, 4)], 3 * 4),
        ("ij->", [(3, 4)], 2 * 3 * 4),
        ("ii->i", [(4, 4)], 4),
        ("ij->ji", [(3, 4)], 3 * 4),
        ("ij,jk", [(3, 4), (4, 5)], 2 * 3 * 4 * 5),
        ("...ij,...jk->...ik", [(6, 3, 4), (4, 5)], 2 * 6 * 3 * 4 * 5),
        ("ijk,jl,lk->i", [(2, 3, 4), (3, 5), (5, 4)], 3 * 2 * 3 * 4 * 5),
    ],
)
def test_einsum_matches_hand_count_and_numpy(
    subscripts: str, shapes: list[tuple[int, ...]], hand: int
) -> None:
    assert einsum_flops(subscripts, shapes) == hand
    assert einsum_flops(subscripts, shapes) == _numpy_einsum_cost(subscripts, *shapes)


def test_einsum_flops_from_a_real_profile() -> None:
    a, b = np.ones((5, 6)), np.ones((6, 7))
    with opprof.profile(capture=["numpy"], profile_memory=False) as prof:
        np.einsum("ij,jk->ik", a, b)
        np.einsum("ij,jk->ik", b.T, a.T)
    recs = prof.records()
    found = []
    for ev in recs.events:
        if recs.names[ev["name"]] == "numpy.einsum":
            s = int(ev["shape"])
            found.append(flops_for("numpy.einsum", recs.shapes[s], recs.dtypes[s]))
    assert found == [2 * 5 * 6 * 7, 2 * 7 * 6 * 5]
    # Without the recorded subscripts an einsum cannot be counted.
    assert flops_for("numpy.einsum", [[], [5, 6], [6, 7]]) == 0


def test_elementwise_counts_output_elements_and_ignores_out() -> None:
    assert flops_for("numpy.add", [[3, 1], [1, 4]]) == 12
    assert flops_for("numpy.add", [[3, 4], [3, 4], [3, 4]]) == 12  # a += b
    assert flops_for("numpy.multiply", [[5], []]) == 5
    assert flops_for("numpy.exp", [[2, 3]]) == 6
    assert flops_for("numpy.greater", [[2, 3], [2, 3]]) == 0  # comparisons are not arithmetic


def test_reductions_count_input_elements() -> None:
    assert flops_for("numpy.add.reduce", [[3, 4], [], []]) == 12
    assert flops_for("numpy.maximum.accumulate", [[10]]) == 10
    assert flops_for("numpy.ndarray.sum", [[3, 4]]) == 0  # its add.reduce child counts


@given(n=st.integers(min_value=1, max_value=40), k=dims, batch=dims)
def test_linalg_formulas(n: int, k: int, batch: int) -> None:
    assert flops_for("numpy.linalg.solve", [[n, n], [n, k]]) == 2 * n**3 // 3 + 2 * n * n * k
    assert flops_for("numpy.linalg.solve", [[n, n], [n]]) == 2 * n**3 // 3 + 2 * n * n
    assert flops_for("numpy.linalg.solve", [[batch, n, n], [batch, n, k]]) == batch * (
        2 * n**3 // 3 + 2 * n * n * k
    )
    assert flops_for("numpy.linalg.inv", [[batch, n, n]]) == batch * 2 * n**3
    assert flops_for("numpy.linalg.cholesky", [[n, n]]) == n**3 // 3
    assert flops_for("numpy.linalg.det", [[n, n]]) == 2 * n**3 // 3
    assert flops_for("numpy.linalg.eig", [[n, n]]) == 25 * n**3
    m = n + k
    assert flops_for("numpy.linalg.qr", [[m, n]]) == 2 * m * n * n - 2 * n**3 // 3
    assert flops_for("numpy.linalg.qr", [[n, m]]) == 2 * m * n * n - 2 * n**3 // 3
    assert flops_for("numpy.linalg.svd", [[m, n]]) == 4 * m * m * n + 8 * m * n * n + 9 * n**3
    assert flops_for("numpy.linalg.lstsq", [[m, n], [m]]) == 4 * m * n * n + 8 * n**3


def test_fft_is_five_n_log_n_per_transform() -> None:
    assert flops_for("numpy.fft.fft", [[8]]) == 5 * 8 * 3
    assert flops_for("numpy.fft.fft", [[4, 16]]) == 4 * 5 * 16 * 4
    assert flops_for("numpy.fft.fft2", [[2, 4, 8]]) == 2 * 5 * 32 * 5
    assert flops_for("numpy.fft.rfft", [[1024]]) == int(0.5 * 5 * 1024 * math.log2(1024))


def test_unknown_and_malformed_count_zero() -> None:
    assert flops_for("numpy.sort", [[10]]) == 0
    assert flops_for("numpy.matmul", [[3, 4]]) == 0
    assert flops_for("numpy.linalg.inv", [[]]) == 0


def test_ops_without_a_formula_count_zero_whatever_the_shapes() -> None:
    # has_formula lets aggregation skip an op's shapes: it must never hide a count.
    from pytest_opprof import _native
    from pytest_opprof.flops import has_formula

    with opprof.profile(capture=["numpy"], profile_memory=False):
        pass  # interns every hooked numpy name
    names = _native.names()
    assert len(names) > 100
    shape_sets = [[[4, 5], [5, 6]], [[3], [3]], [[2, 3, 3]], [[3, 3], [3]], [[8]], [[]]]
    without = [n for n in names if not has_formula(n)]
    assert "numpy.add" not in without and "numpy.matmul" not in without
    assert "numpy.ndarray.reshape" in without
    for name in without:
        for shapes in shape_sets:
            assert flops_for(name, shapes, ["float64"] * len(shapes)) == 0, (name, shapes)
    for name in names:
        if any(flops_for(name, s, ["float64"] * len(s)) for s in shape_sets):
            assert has_formula(name), name


RAISING_TESTS = """
import numpy as np
import pytest


def test_outer_of_huge_views_raises():
    a = np.broadcast_to(np.float64(1.0), (2**32,))
    with pytest.raises((MemoryError, ValueError)):
        np.outer(a, a)  # its shapes say 2^64 FLOPs


def test_failed_solve_counts_nothing():
    with pytest.raises(np.linalg.LinAlgError):
        np.linalg.solve(np.zeros((300, 300)), np.ones(300))
    np.linalg.solve(np.eye(300), np.ones(300))
"""


def test_calls_that_raised_count_no_flops_and_huge_shapes_do_not_overflow(
    pytester: pytest.Pytester, run_pytest: PytestRunner
) -> None:
    """Before: the outer product failed its test with OverflowError in the model, and the
    singular solve added 18,180,000 FLOPs it never did."""
    pytester.makepyfile(test_raising=RAISING_TESTS)
    result = run_pytest(
        "-q", "--opprof", "--opprof-report", "report.json", "--opprof-report-details"
    )
    result.assert_outcomes(passed=2)
    tests = json.loads((pytester.path / "report.json").read_text())["tests"]
    outer = tests["test_raising.py::test_outer_of_huge_views_raises"]
    assert outer["ops"]["numpy.outer"]["flops"] == 0
    assert outer["summary"]["flops"] == 0
    solve = tests["test_raising.py::test_failed_solve_counts_nothing"]["ops"]["numpy.linalg.solve"]
    assert solve["count"] == 2
    assert solve["flops"] == flops_for("numpy.linalg.solve", [[300, 300], [300]]) > 0


def test_both_model_paths_count_a_raised_call_as_zero() -> None:
    with opprof.profile(capture=["numpy"], profile_memory=False) as prof:
        with pytest.raises(np.linalg.LinAlgError):
            np.linalg.solve(np.zeros((4, 4)), np.ones(4))
        np.linalg.solve(np.eye(4), np.ones(4))
    ok = flops_for("numpy.linalg.solve", [[4, 4], [4]])
    for native in (True, False):
        rows = average_records(prof.records(), with_flops=True, native=native)[0]
        (solve,) = [r for r in rows if r.key == "numpy.linalg.solve"]
        assert (solve.count, solve.flops) == (2, ok), f"native={native}"


def test_flop_sums_stop_at_the_int64_maximum_instead_of_wrapping() -> None:
    with opprof.profile(capture=["numpy"], profile_memory=False) as prof:
        for _ in range(3):
            np.add(np.ones(3), 1.0)
    ev = prof.records().events
    pair, _ = _native.model_pairs(ev)
    key = _native.model_key_sums(ev, group=None, memory_group=-1, m=int(ev["name"].max()) + 1)
    assert key is not None
    sums = key.sums
    kinds = np.full(int(pair.max()) + 1, FLOPS_MAX, dtype=np.int64)
    _native.model_flops(
        ev,
        sums,
        pair=pair,
        parent_row=key.parent_row,
        group=None,
        memory_group=-1,
        pair_flops=kinds,
    )
    flops = sums[:, _native.GROUP_COLUMNS.index("flops")]
    assert flops.max() == FLOPS_MAX and flops.min() >= 0
    assert _int_sums(np.zeros(3, dtype=np.int64), np.full(3, FLOPS_MAX), 1).tolist() == [FLOPS_MAX]
