"""Native numpy capture: every hook path, nesting, exceptions, threads, shapes, restore."""

from __future__ import annotations

import sys
import threading
import types
from collections import Counter
from collections.abc import Callable

import numpy as np
import pytest

import pytest_opprof as opprof
from pytest_opprof import _native
from pytest_opprof.capture.sources.numpy_source import SOURCE, build_hook_table
from pytest_opprof.native_layout.records import FLAG_EXCEPTION, Records

LOOP = 300  # well past CPython's call-site specialisation threshold


def record(fn: Callable[[], object], **kwargs: object) -> Records:
    kwargs.setdefault("profile_memory", False)
    with opprof.profile(capture=["numpy"], **kwargs) as prof:  # type: ignore[arg-type]
        fn()
    return prof.records()


def names(records: Records) -> list[str]:
    order = np.argsort(records.events["start_ns"], kind="stable")
    return [records.names[n] for n in records.events["name"][order]]


def counts(records: Records) -> Counter[str]:
    return Counter(records.names[n] for n in records.events["name"])


def rows(records: Records, name: str) -> np.ndarray:
    ids = [i for i, n in enumerate(records.names) if n == name]
    return records.events[np.isin(records.events["name"], ids)]


A = np.arange(12.0).reshape(3, 4)
B = np.ones((3, 4))


@pytest.mark.parametrize(
    ("expr", "expected"),
    [
        (lambda: A + B, "numpy.add"),
        (lambda: -A, "numpy.negative"),
        (lambda: A > B, "numpy.greater"),
        (lambda: A @ B.T, "numpy.matmul"),
        (lambda: A * 2, "numpy.multiply"),
        (lambda: np.add(A, B), "numpy.add"),
        (lambda: np.dot(A, B.T), "numpy.dot"),
        (lambda: np.einsum("ij,kj->ik", A, B), "numpy.einsum"),
        (lambda: np.linalg.solve(np.eye(3) * 2, np.ones(3)), "numpy.linalg.solve"),
        (lambda: np.concatenate([A, B]), "numpy.concatenate"),
        (lambda: A.sum(), "numpy.ndarray.sum"),
        (lambda: A.mean(), "numpy.ndarray.mean"),
        (lambda: A.transpose(), "numpy.ndarray.transpose"),
        (lambda: np.add.reduce(A), "numpy.add.reduce"),
        (lambda: np.add.accumulate(A), "numpy.add.accumulate"),
        (lambda: np.multiply.outer(A[0], B[0]), "numpy.multiply.outer"),
        (lambda: np.add.reduceat(A[0], [0, 2]), "numpy.add.reduceat"),
        (lambda: np.add.at(A.copy(), [0, 1], 1.0), "numpy.add.at"),
        (lambda: np.empty(3), "numpy.empty"),
        (lambda: np.zeros(3), "numpy.zeros"),
        (lambda: np.array([1, 2]), "numpy.array"),
        (lambda: np.arange(5), "numpy.arange"),
        (lambda: np.fft.fft(A), "numpy.fft.fft"),
    ],
)
def test_each_capture_path_names_the_public_op(expr: Callable[[], object], expected: str) -> None:
    assert expected in names(record(expr))


def test_inplace_operator_is_the_ufunc_with_out() -> None:
    a = A.copy()

    def body() -> None:
        nonlocal a
        a += B

    recs = record(body)
    assert names(recs) == ["numpy.add"]
    assert recs.shapes[int(rows(recs, "numpy.add")["shape"][0])] == [[3, 4], [3, 4], [3, 4]]


def test_allocation_inside_ones_shows_as_empty_child() -> None:
    recs = record(lambda: np.ones(5))
    (ones,) = rows(recs, "numpy.ones")  # a Python function, captured by its frame
    (empty,) = rows(recs, "numpy.empty")
    assert empty["parent"] == ones["id"]
    assert counts(recs)["numpy.empty"] == 1


def test_specialised_call_sites_stay_captured() -> None:
    def body() -> None:
        for _ in range(LOOP):
            np.empty(3)
            A.sum()
            np.add(A, B)
            _ = A + B
            np.add.reduce(A)
            np.dot(A, B.T)
            A.ravel()

    c = counts(record(body))
    assert c["numpy.empty"] == LOOP
    assert c["numpy.ndarray.sum"] == LOOP
    assert c["numpy.add"] == 2 * LOOP
    assert c["numpy.add.reduce"] == 2 * LOOP  # one direct, one inside each sum
    assert c["numpy.dot"] == LOOP
    assert c["numpy.ndarray.ravel"] == LOOP


def test_norm_shows_the_ops_it_calls_as_children() -> None:
    recs = record(lambda: np.linalg.norm(A))
    (norm,) = rows(recs, "numpy.linalg.norm")
    ev = recs.events
    children = {recs.names[n] for n in ev["name"][ev["parent"] == norm["id"]]}
    assert "numpy.sqrt" in children
    assert children & {"numpy.ndarray.dot", "numpy.dot", "numpy.ndarray.ravel"}
    assert all(ev["depth"][ev["parent"] == norm["id"]] == norm["depth"] + 1)


@pytest.mark.parametrize(
    "call",
    [
        lambda: np.add(A, np.ones(5)),  # vectorcall swap
        lambda: A.reshape(7),  # method table
        lambda: np.add.reduce(A, axis=5),  # ufunc method
        lambda: np.empty(-1),  # module function
        lambda: np.linalg.inv(np.ones((2, 3))),  # dispatcher with Python body
    ],
)
def test_exception_propagates_unchanged_and_is_flagged(call: Callable[[], object]) -> None:
    with pytest.raises(Exception) as plain:
        call()
    with opprof.profile(capture=["numpy"], profile_memory=False) as prof:
        with pytest.raises(Exception) as hooked:
            call()
    assert type(hooked.value) is type(plain.value)
    assert str(hooked.value) == str(plain.value)
    ev = prof.records().events
    raised = ev[(ev["flags"] & FLAG_EXCEPTION) != 0]
    assert len(raised) == 1  # the op that raised; ops before it (np.ones) finished cleanly
    assert raised["parent"][0] == -1
    assert raised["start_ns"][0] == ev["start_ns"][ev["parent"] == -1].max()


def test_ops_in_threads_carry_their_thread_id() -> None:
    ids: dict[str, int] = {}
    started = threading.Event()

    def worker(tag: str) -> None:
        ids[tag] = threading.get_native_id()
        started.set()
        for _ in range(10):
            np.subtract(A, B)

    early = threading.Thread(target=worker, args=("early",))
    with opprof.profile(capture=["numpy"], profile_memory=False) as prof:
        late = threading.Thread(target=worker, args=("late",))  # started while profiling
        late.start()
        late.join()
        early.start()
        early.join()
        np.add(A, B)
    recs = prof.records()
    subtract = rows(recs, "numpy.subtract")
    assert Counter(subtract["thread"].tolist()) == {ids["late"]: 10, ids["early"]: 10}
    assert rows(recs, "numpy.add")["thread"].tolist() == [threading.get_native_id()]


def test_shapes_and_dtypes_are_recorded() -> None:
    a = np.ones((3, 4), dtype=np.float32)
    b = np.ones((4, 5), dtype=np.float32)
    with opprof.profile(capture=["numpy"], profile_memory=False, record_shapes=True) as prof:
        for _ in range(3):
            a @ b
        a @ a.T
        np.add(a, 1.0)
    recs = prof.records()
    (first, *_) = rows(recs, "numpy.matmul")
    assert recs.shapes[int(first["shape"])] == [[3, 4], [4, 5]]
    assert recs.dtypes[int(first["shape"])] == ["float32", "float32"]
    add = rows(recs, "numpy.add")[0]
    assert recs.shapes[int(add["shape"])] == [[3, 4], []]
    avg = prof.key_averages(group_by_input_shape=True)
    matmul = {str(e.input_shapes): e.count for e in avg if e.key == "numpy.matmul"}
    assert matmul == {"[[3, 4], [4, 5]]": 3, "[[3, 4], [4, 3]]": 1}


def test_shapes_off_records_none_and_stack_on_records_call_site() -> None:
    recs = record(lambda: A + B, record_shapes=False)
    assert rows(recs, "numpy.add")["shape"].tolist() == [0]
    recs = record(lambda: A + B, record_shapes=False, with_stack=True)
    (add,) = rows(recs, "numpy.add")
    assert add["stack"] != 0
    assert any("test_numpy_capture.py" in frame for frame in recs.stacks[int(add["stack"])])


def test_einsum_subscripts_give_exact_flops() -> None:
    from pytest_opprof.flops import flops_for

    a, b = np.ones((6, 7)), np.ones((7, 9))
    recs = record(lambda: np.einsum("ij,jk->ik", a, b))
    (ev,) = rows(recs, "numpy.einsum")
    shapes, dtypes = recs.shapes[int(ev["shape"])], recs.dtypes[int(ev["shape"])]
    assert shapes == [[], [6, 7], [7, 9]]
    assert flops_for("numpy.einsum", shapes, dtypes) == 2 * 6 * 7 * 9


def _workload() -> list[object]:
    rng = np.random.default_rng(0)
    a = rng.standard_normal((5, 5))
    b = rng.standard_normal(5)
    c = a.copy()
    c += a
    return [
        a + b,
        a @ a,
        -a,
        a > 0,
        np.linalg.solve(a, b),
        np.linalg.norm(a),
        np.einsum("ij,j->i", a, b),
        a.sum(axis=0),
        a.mean(),
        np.add.reduce(a, axis=1),
        np.ones((2, 2)),
        np.concatenate([a, a]),
        np.fft.fft(b),
        c,
        np.sort(b),
    ]


def test_numpy_results_identical_with_hooks_recording() -> None:
    plain = _workload()
    with opprof.profile(capture=["numpy"], profile_memory=False) as prof:
        hooked = _workload()
    assert len(prof.records()) > len(plain)
    for x, y in zip(plain, hooked, strict=True):
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))


def test_unhooked_numpy_works_and_refcounts_are_unchanged() -> None:
    table = build_hook_table()
    objects = [o for o, _ in table.calls] + [m[0] for m in table.methods]
    before = [sys.getrefcount(o) for o in objects]
    record(_workload)
    assert _native.numpy_hook_counts() == (False, 0, 0, 0)
    after = [sys.getrefcount(o) for o in objects]
    assert after == before
    np.testing.assert_array_equal(np.add(A, B), A + B)


def test_installed_but_idle_hooks_record_nothing() -> None:
    SOURCE.acquire()
    try:
        assert _native.numpy_hook_counts().calls > 300
        with opprof.profile(capture=["none"], profile_memory=False) as prof:
            with opprof.record_function("scope"):
                for _ in range(LOOP):
                    A + B
                    A.sum()
                    np.empty(2)
        assert names(prof.records()) == ["scope"]
        recs = record(lambda: A + B)  # the same hooks record once asked to
        assert names(recs) == ["numpy.add"]
    finally:
        SOURCE.release()
    assert not _native.numpy_hook_counts().installed


def test_hook_table_names_each_object_once_by_its_public_path() -> None:
    table = build_hook_table()
    by_name = {name: obj for obj, name in table.calls}
    assert by_name["numpy.add"] is np.add
    assert by_name["numpy.absolute"] is np.abs  # the spelling of its __name__, not the alias
    assert by_name["numpy.linalg.solve"] is np.linalg.solve
    assert by_name["numpy.fft.fft"] is np.fft.fft
    assert all(not n.startswith("numpy._") for n in by_name)
    assert len({id(o) for o, _ in table.calls}) == len(table.calls)
    method_names = {m[1] for m in table.methods}
    assert {"numpy.empty", "numpy.ndarray.sum", "numpy.ufunc.reduce"} <= method_names


def test_python_level_creation_functions_are_ops_around_their_c_callees() -> None:
    """np.ones, np.full, np.eye, np.identity are Python functions: CPython 3.11 runs a call
    from Python code inline, never through the function's vectorcall pointer, so they are
    recorded from their frames (native/pyfunc_hooks.c) and the function objects stay
    numpy's own."""
    recs = record(lambda: (np.ones(3), np.full(2, 7.0), np.eye(2), np.identity(2)))
    seen = set(names(recs))
    assert {"numpy.empty", "numpy.copyto", "numpy.zeros"} <= seen
    assert {"numpy.ones", "numpy.full", "numpy.eye", "numpy.identity"} <= seen
    assert np.ones.__module__ == "numpy" and np.ones is np._core.numeric.ones
    assert type(np.ones) is types.FunctionType
