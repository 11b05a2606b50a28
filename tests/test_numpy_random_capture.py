"""numpy.random is captured natively and named as users write it.

Generator and RandomState methods are Cython functions (``binding=True``) with a
per-object vectorcall pointer, swapped like numpy's dispatchers; ``RandomState.rand``
and ``randn`` take ``*args`` and have none, so their ``PyMethodDef`` is hooked.  The
legacy module functions (``np.random.rand``) are RandomState methods bound to numpy's
global instance: a call on that instance records as ``numpy.random.rand``, one on a
RandomState of the test's own as ``numpy.random.RandomState.rand``.
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


def top_level(fn: Callable[[], object], **kwargs: object) -> Counter[str]:
    """Names of the outermost ops ``fn`` ran, counted, with numpy capture recording."""
    kwargs.setdefault("profile_memory", False)
    with opprof.profile(capture=["numpy"], **kwargs) as prof:  # type: ignore[arg-type]
        fn()
    return Counter(e.name for e in prof.events() if e.cpu_parent is None)


@pytest.mark.parametrize(
    ("call", "expected"),
    [
        (lambda rng, rs: rng.normal(0.0, 1.0, size=3), "numpy.random.Generator.normal"),
        (lambda rng, rs: rng.integers(0, 10, size=4), "numpy.random.Generator.integers"),
        (lambda rng, rs: rng.random(), "numpy.random.Generator.random"),
        (lambda rng, rs: rng.permutation(5), "numpy.random.Generator.permutation"),
        (lambda rng, rs: rs.rand(2), "numpy.random.RandomState.rand"),
        (lambda rng, rs: rs.randn(2, 2), "numpy.random.RandomState.randn"),
        (lambda rng, rs: rs.normal(size=2), "numpy.random.RandomState.normal"),
        (lambda rng, rs: np.random.rand(3), "numpy.random.rand"),
        (lambda rng, rs: np.random.randn(3), "numpy.random.randn"),
        (lambda rng, rs: np.random.normal(size=3), "numpy.random.normal"),
        (lambda rng, rs: np.random.randint(0, 5), "numpy.random.randint"),
        (lambda rng, rs: np.random.seed(0), "numpy.random.seed"),
        (lambda rng, rs: np.random.default_rng(1), "numpy.random.default_rng"),
        (lambda rng, rs: rng.bit_generator.random_raw(2), "numpy.random.BitGenerator.random_raw"),
    ],
)
def test_each_form_is_one_op_named_as_written(
    call: Callable[[np.random.Generator, np.random.RandomState], object], expected: str
) -> None:
    rng, rs = np.random.default_rng(0), np.random.RandomState(0)
    seen = top_level(lambda: [call(rng, rs) for _ in range(LOOP)])
    assert seen == {expected: LOOP}


def test_nested_legacy_calls_keep_their_own_names() -> None:
    # rand calls random_sample on the same (global) instance: a child op, named alike.
    with opprof.profile(capture=["numpy"], profile_memory=False) as prof:
        np.random.rand(4)
    (rand,) = [e for e in prof.events() if e.name == "numpy.random.rand"]
    assert [c.name for c in rand.cpu_children] == ["numpy.random.random_sample"]


def test_streams_are_unchanged_by_recording() -> None:
    def draw() -> list[np.ndarray]:
        rng, rs = np.random.default_rng(42), np.random.RandomState(42)
        np.random.seed(42)
        return [
            rng.normal(size=5),
            rng.integers(0, 100, size=5),
            rng.choice(np.arange(10), 3),
            rs.rand(2, 3),
            rs.randn(4),
            np.random.rand(3),
            np.random.normal(1.0, 2.0, size=3),
        ]

    plain = draw()
    with opprof.profile(capture=["numpy"], profile_memory=False) as prof:
        hooked = draw()
    assert len(prof.events()) > len(plain)
    for x, y in zip(plain, hooked, strict=True):
        np.testing.assert_array_equal(x, y)


def test_shapes_leave_out_the_generator_and_keep_the_operands() -> None:
    rng = np.random.default_rng(0)
    population = np.arange(10)
    with opprof.profile(capture=["numpy"], record_shapes=True, profile_memory=False) as prof:
        rng.choice(population, 3)
        np.random.rand(2, 3)
    by_name = {e.name: e for e in prof.events()}
    assert by_name["numpy.random.Generator.choice"].input_shapes[0] == [10]
    # rand(2, 3): two Python ints, the global RandomState not among them
    assert len(by_name["numpy.random.rand"].input_shapes) == 2


def test_errors_pass_through_and_are_flagged() -> None:
    rng = np.random.default_rng(0)
    with opprof.profile(capture=["numpy"], profile_memory=False) as prof:
        with pytest.raises(ValueError, match="high"):
            rng.integers(5, 1)
        with pytest.raises(ValueError):
            np.random.rand(-1)
    names = {e.name for e in prof.events()}
    assert {"numpy.random.Generator.integers", "numpy.random.rand"} <= names


def _vectorcall_pointer(func: object) -> int:
    """The Cython function's per-object call pointer (Cython exposes it as a member)."""
    return int(vars(type(func))["__vectorcalloffset__"].__get__(func))


def _ml_meth(func: object) -> int:
    """ml_meth of the PyMethodDef a Cython function points at (m_ml follows the header)."""
    m_ml = ctypes.c_void_p.from_address(id(func) + 2 * ctypes.sizeof(ctypes.c_void_p)).value
    assert m_ml is not None
    return int(ctypes.c_void_p.from_address(m_ml + ctypes.sizeof(ctypes.c_void_p)).value or 0)


def test_pointers_are_swapped_while_hooked_and_restored_after() -> None:
    normal, rand = np.random.Generator.normal, np.random.RandomState.rand
    before = (_vectorcall_pointer(normal), _ml_meth(rand))
    SOURCE.acquire()
    try:
        during = (_vectorcall_pointer(normal), _ml_meth(rand))
    finally:
        SOURCE.release()
    assert during[0] != before[0] and during[1] != before[1]
    assert (_vectorcall_pointer(normal), _ml_meth(rand)) == before
    assert _native.numpy_hook_counts() == (False, 0, 0, 0)


RANDOM_TESTS = """
import numpy as np
import pytest

@pytest.mark.profile(row_limit=50)
def test_draws():
    rng = np.random.default_rng(0)
    for _ in range(10):
        rng.normal(size=100)
        np.random.rand(100)

def test_fails():
    np.random.default_rng(0).random(3)
    raise RuntimeError("boom")

def test_interrupted():
    np.random.rand(3)
    raise KeyboardInterrupt
"""

POINTERS_CONFTEST = """
import json
import numpy as np
import pytest

def _pointer():
    func = np.random.Generator.normal
    return int(vars(type(func))["__vectorcalloffset__"].__get__(func))

BEFORE = _pointer()

@pytest.hookimpl(trylast=True)  # after the plugin's own unconfigure
def pytest_unconfigure(config):
    with open("pointers.json", "w") as f:
        json.dump({"before": BEFORE, "after": _pointer()}, f)
"""


def test_plugin_names_random_ops_and_restores_after_an_interrupt(
    pytester: pytest.Pytester, run_pytest: PytestRunner
) -> None:
    pytester.makeconftest(POINTERS_CONFTEST)
    pytester.makepyfile(test_random=RANDOM_TESTS)
    result = run_pytest("--opprof", "--opprof-capture", "numpy", "-p", "no:randomly")
    # The interrupt ends the session after two tests, through pytest's own exit path.
    result.stdout.fnmatch_lines(
        [
            "*numpy.random.Generator.normal*10*",
            "*numpy.random.rand*10*",
            "*KeyboardInterrupt*",
        ]
    )
    pointers = json.loads((pytester.path / "pointers.json").read_text())
    assert pointers["after"] == pointers["before"]
