"""Indexing an ndarray is captured natively: ``numpy.ndarray.__getitem__`` / ``__setitem__``.

``a[key]`` and ``a[key] = value`` reach ndarray's mapping slots (``mp_subscript``,
``mp_ass_subscript``), which the numpy source swaps for trampolines: every index form
(integer, slice, integer array, boolean mask, Ellipsis, tuple) is one op with the array
and the key as its input shapes.
"""

from __future__ import annotations

import ctypes
import json
from collections import Counter
from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np
import pytest

import pytest_opprof as opprof
from pytest_opprof import _native
from pytest_opprof.capture.sources.numpy_source import SOURCE

if TYPE_CHECKING:
    from run_helpers import PytestRunner

LOOP = 300  # well past CPython's call-site specialisation threshold
GET, SET = "numpy.ndarray.__getitem__", "numpy.ndarray.__setitem__"


def events(fn: Callable[[], object], **kwargs: object) -> list[opprof.FunctionEvent]:
    kwargs.setdefault("profile_memory", False)
    with opprof.profile(capture=["numpy"], **kwargs) as prof:  # type: ignore[arg-type]
        fn()
    return list(prof.events())


def top_level(fn: Callable[[], object]) -> Counter[str]:
    return Counter(e.name for e in events(fn) if e.cpu_parent is None)


A = np.arange(10.0)
M = np.arange(12.0).reshape(3, 4)
IDX = np.array([1, 3, 5])
MASK = A > 4
ROW, THREE = np.ones(4), np.zeros(3)


def _set(a: np.ndarray, key: object, value: object) -> None:
    a[key] = value  # type: ignore[index]


@pytest.mark.parametrize(
    ("expr", "expected"),
    [
        (lambda: A[3], GET),
        (lambda: A[1:7:2], GET),
        (lambda: A[IDX], GET),
        (lambda: A[MASK], GET),
        (lambda: A[...], GET),
        (lambda: M[1, 2], GET),
        (lambda: M[:, 1], GET),
        (lambda: M[np.newaxis], GET),
        (lambda: _set(A.copy(), 3, 1.0), SET),
        (lambda: _set(A.copy(), IDX, 0.0), SET),
        (lambda: _set(A.copy(), MASK, -1.0), SET),
        (lambda: _set(M.copy(), ..., ROW), SET),
    ],
)
def test_each_index_form_is_one_op(expr: Callable[[], object], expected: str) -> None:
    seen = top_level(lambda: [expr() for _ in range(LOOP)])
    assert seen[expected] == LOOP
    assert set(seen) <= {expected, "numpy.ndarray.copy"}


def test_augmented_assignment_is_get_ufunc_set() -> None:
    a = A.copy()

    def body() -> None:
        a[MASK] += 1.0

    assert [e.name for e in events(body)] == [GET, "numpy.add", SET]


def test_shapes_are_the_array_and_the_key() -> None:
    a = A.copy()

    def body() -> None:
        A[MASK]
        A[IDX]
        a[IDX] = THREE

    evs = events(body, record_shapes=True)
    assert [e.input_shapes for e in evs] == [[[10], [10]], [[10], [3]], [[10], [3], [3]]]


def test_results_and_errors_are_numpy_own() -> None:
    def body() -> list[object]:
        a = A.copy()
        a[IDX] = -1.0
        a[...] = a[::-1]
        out: list[object] = [a.copy(), A[MASK], M[1:, ::2], A[3]]
        with pytest.raises(IndexError):
            A[100]
        with pytest.raises(ValueError, match="delete"):
            del a[0]
        return out

    plain = body()
    with opprof.profile(capture=["numpy"], profile_memory=False) as prof:
        hooked = body()
    for x, y in zip(plain, hooked, strict=True):
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))
    names = [e.name for e in prof.events() if e.cpu_parent is None]
    # the failed a[100] is an op (flagged), `del a[0]` is not one
    assert names.count(GET) == 5 and names.count(SET) == 2


@pytest.mark.filterwarnings("ignore:the matrix subclass:PendingDeprecationWarning")
def test_subclasses_keep_numpy_original_slot() -> None:
    class Sub(np.ndarray):
        pass

    s = A.view(Sub)
    matrix = np.asmatrix(M)
    assert top_level(lambda: (s[3], matrix[0], A[3])) == {GET: 1}


def _mapping_slots() -> tuple[int, int]:
    """ndarray's mp_subscript and mp_ass_subscript pointers, read from the type object."""
    word = ctypes.sizeof(ctypes.c_void_p)
    # PyTypeObject: 3 header words, tp_name, tp_basicsize, tp_itemsize, tp_dealloc,
    # tp_vectorcall_offset, tp_getattr, tp_setattr, tp_as_async, tp_repr, tp_as_number,
    # tp_as_sequence, then tp_as_mapping (the layout of every CPython 3).
    mapping = ctypes.c_void_p.from_address(id(np.ndarray) + 14 * word).value
    assert mapping is not None
    get = ctypes.c_void_p.from_address(mapping + word).value or 0
    put = ctypes.c_void_p.from_address(mapping + 2 * word).value or 0
    return get, put


def test_slots_are_swapped_while_hooked_and_restored_after() -> None:
    before = _mapping_slots()
    SOURCE.acquire()
    try:
        during = _mapping_slots()
        with opprof.profile(capture=["none"], profile_memory=False) as prof:
            A[3]
        assert list(prof.events()) == []  # installed but idle: nothing recorded
    finally:
        SOURCE.release()
    assert during[0] != before[0] and during[1] != before[1]
    assert _mapping_slots() == before
    assert _native.numpy_hook_counts() == (False, 0, 0, 0)


INDEX_TESTS = """
import numpy as np
import pytest

@pytest.mark.profile(row_limit=50)
def test_index():
    a = np.arange(100.0)
    for i in range(25):
        a[i] = a[i + 1] * 2

def test_fails():
    np.arange(3.0)[1]
    assert False
"""

SLOTS_CONFTEST = """
import ctypes
import json
import numpy as np
import pytest

def _slots():
    word = ctypes.sizeof(ctypes.c_void_p)
    mapping = ctypes.c_void_p.from_address(id(np.ndarray) + 14 * word).value
    return [ctypes.c_void_p.from_address(mapping + k * word).value for k in (1, 2)]

BEFORE = _slots()

@pytest.hookimpl(trylast=True)  # after the plugin's own unconfigure
def pytest_unconfigure(config):
    with open("slots.json", "w") as f:
        json.dump({"before": BEFORE, "after": _slots()}, f)
"""


def test_plugin_counts_indexing_and_restores_the_slots(
    pytester: pytest.Pytester, run_pytest: PytestRunner
) -> None:
    pytester.makeconftest(SLOTS_CONFTEST)
    pytester.makepyfile(test_index=INDEX_TESTS)
    result = run_pytest("--opprof", "--opprof-capture", "numpy")
    result.assert_outcomes(passed=1, failed=1)
    # Each on its own: the table's rows are sorted by self time, and these two take a
    # few microseconds each, in either order (CI saw __setitem__ first).
    for row in ("*numpy.ndarray.__getitem__*25*", "*numpy.ndarray.__setitem__*25*"):
        result.stdout.fnmatch_lines([row])
    slots = json.loads((pytester.path / "slots.json").read_text())
    assert slots["after"] == slots["before"]
