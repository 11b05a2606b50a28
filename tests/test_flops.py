"""FLOP formulas: exact matrix products and einsum against hand-derived counts and numpy."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import pytest_opprof as opprof
from pytest_opprof.flops.numpy_ops import einsum_flops, flops_for

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
    from pytest_opprof.flops.numpy_ops import has_formula

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
