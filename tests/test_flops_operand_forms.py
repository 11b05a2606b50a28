"""FLOPs are right whatever form the operands take.

Each example was wrong before: operands that were not ndarrays counted as one
number, keyword arguments and options were not recorded.  The property test
at the end checks every form against the formulas evaluated on
``np.asarray`` of the operands.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import pytest_opprof as opprof
from pytest_opprof.flops import flops_for
from pytest_opprof.native_layout.records import Records

A = np.ones((40, 30))
LIST30 = [1.0] * 30
LIST40 = [float(i) for i in range(40)]
X = np.ones(8000)
X1024 = np.ones(1024)
X1024x2 = np.ones((1024, 2))
T = np.ones((20, 10))
E1, E2 = np.ones((20, 30)), np.ones((30, 100))


def record(fn: Callable[[], object]) -> opprof.profile:
    with opprof.profile(capture=["numpy"], profile_memory=False) as prof:
        fn()
    return prof


def op_flops(prof: opprof.profile, name: str) -> int:
    (row,) = [e for e in prof.key_averages() if e.key == name]
    return int(row.flops)


# (call, op that carries the count, FLOPs; the figure before in the comment)
EXAMPLES: list[tuple[str, Callable[[], object], str, int]] = [
    ("add(list40, list40)", lambda: np.add(LIST40, LIST40), "numpy.add", 40),  # was 1
    ("A @ list", lambda: A @ LIST30, "numpy.matmul", 2400),  # was 0
    ("dot(A, list)", lambda: np.dot(A, LIST30), "numpy.dot", 2400),  # was 1200
    ("sum([x, x], axis=0)", lambda: np.sum([X, X], axis=0), "numpy.add.reduce", 16000),  # 1
    ("add.reduce(array=x)", lambda: np.add.reduce(array=X), "numpy.add.reduce", 8000),  # 0
    ("fft(x1024, n=2048)", lambda: np.fft.fft(X1024, n=2048), "numpy.fft.fft", 112_640),  # 51,200
    ("fft(x, axis=0)", lambda: np.fft.fft(X1024x2, axis=0), "numpy.fft.fft", 102_400),  # 10,240
    # was the full SVD's 41,000: 4*20*10^2 - 4*10^3/3
    (
        "svd(T, compute_uv=False)",
        lambda: np.linalg.svd(T, compute_uv=False),
        "numpy.linalg.svd",
        6667,
    ),
    # 14*20*10^2 + 8*10^3 (thin U)
    (
        "svd(T, full_matrices=False)",
        lambda: np.linalg.svd(T, full_matrices=False),
        "numpy.linalg.svd",
        36_000,
    ),
    (
        "einsum sublists",
        lambda: np.einsum(E1, [0, 1], E2, [1, 2], [0, 2]),
        "numpy.einsum",
        120_000,
    ),  # 0
    ("add.at", lambda: np.add.at(np.zeros(10), [0, 1, 2, 2], 1.0), "numpy.add.at", 4),  # was 0
    ("convolve full", lambda: np.convolve(np.ones(100), np.ones(10)), "numpy.convolve", 2000),  # 0
    (
        "convolve valid",
        lambda: np.convolve(np.ones(100), np.ones(10), "valid"),
        "numpy.convolve",
        1820,
    ),
    (
        "convolve same",
        lambda: np.convolve(np.ones(100), np.ones(10), mode="same"),
        "numpy.convolve",
        1950,
    ),
]


@pytest.mark.parametrize("mode", ["full", "valid", "same"])
@pytest.mark.parametrize(("n", "m"), [(100, 10), (100, 11), (7, 3), (3, 7), (10, 10)])
def test_convolve_counts_two_per_product_numpy_computes(n: int, m: int, mode: str) -> None:
    # Convolving ones with ones: each output element is its number of products.
    products = int(np.convolve(np.ones(n), np.ones(m), mode).sum())
    prof = record(lambda: np.convolve(np.ones(n), np.ones(m), mode))
    assert op_flops(prof, "numpy.convolve") == 2 * products
    prof = record(lambda: np.correlate(np.ones(n), np.ones(m), mode=mode))
    assert op_flops(prof, "numpy.correlate") == 2 * products


@pytest.mark.parametrize(
    ("call", "op", "expected"), [e[1:] for e in EXAMPLES], ids=[e[0] for e in EXAMPLES]
)
def test_issue_examples_count_their_work(
    call: Callable[[], object], op: str, expected: int
) -> None:
    assert op_flops(record(call), op) == expected


def test_numpy_scalars_and_python_numbers_are_0d_with_their_dtype() -> None:
    prof = record(lambda: (np.add(X, np.float32(2)), np.add(X, 2.5), np.multiply(X, 3)))
    recs = prof.records()
    seen = sorted((recs.shapes[int(e["shape"])], recs.dtypes[int(e["shape"])]) for e in recs.events)
    assert seen == [
        ([[8000], []], ["float64", "Scalar=3"]),
        ([[8000], []], ["float64", "float32"]),
        ([[8000], []], ["float64", "float64"]),
    ]


class _ArrayLike:
    def __array__(self, dtype: object = None, copy: object = None) -> np.ndarray:
        return np.ones(500)


_SELF_LIST: list[object] = []
_SELF_LIST.append(_SELF_LIST)


@pytest.mark.parametrize(
    "operand",
    [_ArrayLike(), [np.ones(3), np.ones(4)], [[1.0, 2.0], [3.0]], _SELF_LIST],
    ids=["__array__", "ragged arrays", "ragged lists", "a list holding itself"],
)
def test_an_operand_of_unknown_shape_is_null_and_counts_nothing(operand: object) -> None:
    def call() -> None:
        try:
            np.negative(operand)
        except ValueError:
            pass  # numpy refuses ragged input: the event is still recorded

    recs = record(call).records()
    (ev,) = [e for e in recs.events if recs.names[int(e["name"])] == "numpy.negative"]
    assert recs.shapes[int(ev["shape"])] == [None]
    assert recs.dtypes[int(ev["shape"])] == ["unknown"]
    assert flops_for("numpy.negative", [None], ["unknown"]) == 0


def test_mixed_lists_get_the_shape_and_dtype_numpy_gives_them() -> None:
    operands = [
        [[1, 2], [3, 4]],
        (5, 6),
        [np.float32(1), 2],
        [np.ones((2, 3), dtype=np.float32), np.zeros((2, 3), dtype=np.float32)],
        [],
    ]

    def call() -> None:
        for o in operands:
            np.negative(o)

    recs = record(call).records()
    got = [
        (recs.shapes[int(e["shape"])][0], recs.dtypes[int(e["shape"])][0])
        for e in recs.events
        if recs.names[int(e["name"])] == "numpy.negative"
    ]
    assert [g[0] for g in got] == [list(np.asarray(o).shape) for o in operands]
    # Short flat int lists are kept by value (torch's spelling); others by dtype.
    assert [g[1] for g in got] == ["int64", "ScalarList=[5, 6]", "float64", "float32", "float64"]
    assert [str(np.asarray(o).dtype) for o in operands] == [
        "int64",
        "int64",
        "float64",
        "float32",
        "float64",
    ]


def test_none_is_no_shape_not_a_0d_array() -> None:
    prof = record(lambda: np.fft.fft(X1024x2, None, 0))
    recs = prof.records()
    (ev,) = [e for e in recs.events if recs.names[int(e["name"])] == "numpy.fft.fft"]
    assert recs.shapes[int(ev["shape"])] == [[1024, 2], None, []]
    assert recs.dtypes[int(ev["shape"])] == ["float64", "", "Scalar=0"]
    assert op_flops(prof, "numpy.fft.fft") == 102_400


def test_the_table_shows_no_shape_as_none_not_brackets() -> None:
    prof = opprof.profile(capture=["numpy"], profile_memory=False, record_shapes=True)
    with prof:
        np.negative(_ArrayLike())
    table = prof.key_averages(group_by_input_shape=True).table(row_limit=5)
    assert "[None]" in table


# ---- the gate: a list that grows is a FLOPs regression ----------------------------------

_SUM_TEST = """
import numpy as np

N_ARRAYS = {n}


def test_sum_of_arrays():
    arrays = [np.full(8000, float(i)) for i in range(N_ARRAYS)]
    assert np.sum(arrays, axis=0)[0] == sum(range(N_ARRAYS))
"""


def test_summing_20_arrays_where_the_baseline_summed_2_fails_on_flops(run_pytest) -> None:  # type: ignore[no-untyped-def]
    pytester = run_pytest.pytester
    pytester.makepyfile(test_sum=_SUM_TEST.format(n=2))
    run_pytest("--opprof-update-baselines", "--opprof-rounds=1").assert_outcomes(passed=1)
    stored = Path(pytester.path, "baselines", "test_sum.json").read_text()
    assert '"flops": 16000' in stored
    pytester.makepyfile(test_sum=_SUM_TEST.format(n=20))
    # Memory grows 10x too: tolerated here, so FLOPs alone must fail the test.
    result = run_pytest("--opprof", "--opprof-rounds=1", "--opprof-memory-tolerance=100")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*- flops             16.00 KFLOP",
            "*+ flops             160.00 KFLOP    +900.0%  (tolerance 0%)  REGRESSED",
            "*+ numpy.add.reduce  more flops: 160.00 KFLOP    +900.0%  REGRESSED",
        ]
    )
    regressed = [line for line in result.outlines if line.endswith("REGRESSED")]
    assert regressed and all("flops" in line for line in regressed), regressed


# ---- property: every operand form counts what np.asarray of it counts -------------------

_FORMS = ("ndarray", "list", "tuple", "scalar", "keyword", "broadcast", "out", "stacked")


@st.composite
def _case(draw: st.DrawFn) -> tuple[str, str, Callable[[], object], list[np.ndarray], int]:
    op = draw(st.sampled_from(["add", "multiply", "matmul", "dot", "add.reduce", "fft"]))
    form = draw(st.sampled_from(_FORMS))
    m, k, n = draw(st.integers(1, 6)), draw(st.integers(1, 6)), draw(st.integers(1, 6))
    a = np.arange(m * k, dtype=float).reshape(m, k) + 1
    b = np.arange(k * n, dtype=float).reshape(k, n) + 1
    c = np.arange(m * k, dtype=float).reshape(m, k) + 2

    def conv(x: np.ndarray) -> object:
        if form == "list":
            return x.tolist()
        if form == "tuple":
            return tuple(tuple(r) for r in x.tolist()) if x.ndim == 2 else tuple(x.tolist())
        if form == "stacked":
            return list(x)  # a list of ndarray rows
        return x

    if op in ("add", "multiply"):
        ufunc = getattr(np, op)
        if form == "scalar":
            operands = [a, np.asarray(2.5)]
            return op, form, lambda: ufunc(a, 2.5), operands, 0
        if form == "broadcast":
            row = c[0]
            return op, form, lambda: ufunc(a, conv(row)), [a, row], 0
        if form == "out":
            out = np.empty_like(a)
            return op, form, lambda: ufunc(a, c, out=out), [a, c], 0
        return op, form, lambda: ufunc(conv(a), conv(c)), [a, c], 0
    if op in ("matmul", "dot"):
        fn = getattr(np, op)
        if form == "keyword" or form == "out":
            out = np.empty((m, n))
            return op, form, lambda: fn(a, b, out=out), [a, b], 0
        if form == "scalar":
            return (
                op,
                form,
                lambda: fn(a, 3.0) if op == "dot" else fn(a, b),
                [a, np.asarray(3.0) if op == "dot" else b],
                0,
            )
        return op, form, lambda: fn(conv(a), conv(b)), [a, b], 0
    if op == "add.reduce":
        if form == "keyword":
            return op, form, lambda: np.add.reduce(array=a, axis=0), [a], 0
        return op, form, lambda: np.add.reduce(conv(a), axis=0), [a], 0
    length = draw(st.integers(2, 64))
    x = np.arange(2 * k * m, dtype=float).reshape(k, 2 * m)  # a transform of at least 2
    if form == "keyword":
        return op, form, lambda: np.fft.fft(x, n=length, axis=0), [x], length
    return op, form, lambda: np.fft.fft(conv(x)), [x], 0


def _expected(op: str, operands: list[np.ndarray], length: int) -> int:
    name = f"numpy.{op}" if op != "fft" else "numpy.fft.fft"
    shapes = [list(np.asarray(o).shape) for o in operands]
    if op == "fft" and length:
        return flops_for(name, [shapes[0], [], []], ["float64", f"Scalar={length}", "Scalar=0"])
    return flops_for(name, shapes, ["float64"] * len(shapes))


@settings(max_examples=80, deadline=None)
@given(_case())
def test_every_operand_form_counts_the_formula_of_its_array(
    case: tuple[str, str, Callable[[], object], list[np.ndarray], int],
) -> None:
    op, form, call, operands, length = case
    name = f"numpy.{op}" if op != "fft" else "numpy.fft.fft"
    expected = _expected(op, operands, length)
    assert expected > 0
    prof = record(call)
    recs: Records = prof.records()
    assert op_flops(prof, name) == expected, (form, recs.shapes, recs.dtypes)
