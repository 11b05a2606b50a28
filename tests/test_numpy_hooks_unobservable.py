"""Hooking numpy changes nothing a program can observe, and leaves nothing behind.

- ``hash()`` of every hooked builtin stays what it was (CPython hashes a builtin
  function by its ``ml_meth``, which the method hooks swap): sets and dicts built
  before hooking, like numpy's own ``ARRAY_FUNCTIONS``, still find them.  Found by
  numpy's ``test_overrides`` failing under ``--opprof``.
- ``sys.getrefcount`` of every hooked object is the same before and after a
  whole profiled pytest session.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pytest
from numpy.testing.overrides import get_overridable_numpy_array_functions

from pytest_opprof.capture.sources.numpy_source import SOURCE, build_hook_table

if TYPE_CHECKING:
    from run_helpers import PytestRunner


def _hooked_objects() -> list[object]:
    table = build_hook_table()
    objects: list[object] = [obj for obj, _ in table.calls]
    objects += [obj for obj, *_ in table.methods]
    # Bound builtins hash by ml_meth too: a module function and bound methods.
    objects += [np.add.reduce, np.multiply.outer, np.ones(2).sum, np.array, np.empty]
    return objects


@pytest.fixture
def hooked() -> Iterator[None]:
    SOURCE.acquire()
    try:
        yield
    finally:
        SOURCE.release()


def test_hooked_builtins_keep_their_hash_and_set_membership() -> None:
    objects = _hooked_objects()
    hashes = [hash(o) for o in objects]
    known = set(objects)
    SOURCE.acquire()
    try:
        assert [hash(o) for o in objects] == hashes
        assert all(o in known for o in objects)
        # numpy's own check (test_overrides::test_nep35_functions_as_array_functions)
        assert {np.array, np.asarray, np.empty, np.zeros, np.arange}.issubset(
            get_overridable_numpy_array_functions()
        )
        # a builtin first hashed while hooked is found again after unhooking
        late = {np.frombuffer: 1, np.ones(3).mean: 2}
    finally:
        SOURCE.release()
    assert [hash(o) for o in objects] == hashes
    assert late[np.frombuffer] == 1
    assert np.frombuffer in late


def test_hooked_methods_still_run_while_hashing(hooked: None) -> None:
    # the hash wrapper swaps ml_meth back for a moment: calls around it still work
    a = np.arange(6.0)
    assert {np.add.reduce: a.sum()}[np.add.reduce] == 15.0
    assert np.add.reduce(a) == 15.0


REFCOUNT_CONFTEST = """
import json
from pathlib import Path
import sys

import pytest

from pytest_opprof.capture.sources.numpy_source import SOURCE, build_hook_table

OBJECTS = []
BEFORE = []


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config):
    # The source walks numpy once per process and keeps that table: give it
    # ours, so the counts below hold exactly the same references.
    table = build_hook_table()
    SOURCE._walked = table
    # np.sort's first call (the native speed reference) imports a helper that keeps
    # one reference to numpy's normalize_axis_index for good: numpy's, not ours.
    from pytest_opprof.capture import speed_probe
    speed_probe.warm_up()
    # The numpy source imports numpy.testing (its assertions are ops), whose modules keep
    # references to numpy's functions (array_repr, ...): numpy's, not ours.
    import numpy.testing
    OBJECTS.extend(obj for obj, _ in table.calls)
    OBJECTS.extend(obj for obj, *_ in table.methods)
    BEFORE.extend(sys.getrefcount(o) for o in OBJECTS)


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config):
    from pytest_opprof import _native

    after = [sys.getrefcount(o) for o in OBJECTS]
    changed = [
        [repr(o)[:80], b, a] for o, b, a in zip(OBJECTS, BEFORE, after) if a != b
    ]
    with open("refcounts.json", "w") as f:
        json.dump({"objects": len(OBJECTS), "changed": changed,
                   "installed": _native.numpy_hook_counts().installed}, f)
"""

OPS_TESTS = """
import numpy as np
import pytest

@pytest.mark.parametrize("n", range(20))
def test_ops(n):
    a = np.arange(12.0).reshape(3, 4) + n
    b = (a @ a.T).sum() + np.add.reduce(a, axis=0).mean() + np.einsum("ij->", a)
    np.linalg.solve(np.eye(3) * 2, np.ones(3))
    np.multiply.outer(a[0], a[1]).max()
    np.array([1, 2]).tolist()
    with pytest.raises(ValueError):
        np.add(np.ones(2), np.ones(3))
    assert b > 0

def test_fails():
    np.ones(3).sum()
    assert False
"""


def test_refcount_of_every_hooked_object_is_unchanged_by_a_session(
    pytester: pytest.Pytester,
    run_pytest: PytestRunner,
) -> None:
    pytester.makeconftest(REFCOUNT_CONFTEST)
    pytester.makepyfile(test_ops=OPS_TESTS)
    result = run_pytest("--opprof", "--opprof-capture", "numpy", "--opprof-rounds", "2")
    result.assert_outcomes(passed=20, failed=1)
    data = json.loads((pytester.path / "refcounts.json").read_text())
    assert data["objects"] > 300  # every ufunc, dispatcher and method, not a sample
    assert data["installed"] is False
    assert data["changed"] == []


MEM_POLICY_TESTS = Path(np.__file__).parent / "_core" / "tests" / "test_mem_policy.py"


@pytest.mark.slow
@pytest.mark.skipif(not MEM_POLICY_TESTS.exists(), reason="numpy's tests are not installed")
def test_numpy_thread_locality_passes_with_the_counting_handler(
    run_pytest: PytestRunner,
) -> None:
    """A thread started in a test reads the name numpy would give its handler: it read
    ``opprof_counting(default_allocator)``, which failed numpy's own test under
    ``--opprof``."""
    result = run_pytest(
        "--opprof",
        "-p",
        "no:randomly",
        "-W",
        "error::pytest.PytestUnhandledThreadExceptionWarning",
        f"{MEM_POLICY_TESTS}::test_thread_locality",
    )
    result.assert_outcomes(passed=1)
