"""Libraries' public Python functions (np.ones, numpy.testing, scipy.linalg.solve,
scikit-learn's estimators) recorded as ops by the names users call them, through a native
frame evaluator armed only while a profile records."""

from __future__ import annotations

import json
import sys
import textwrap
import threading
import types
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from run_helpers import PytestRunner

import pytest_opprof as opprof
from pytest_opprof import _native
from pytest_opprof.capture.sources import pyfunctions

if _native.pyfunc_unsupported() is not None:  # pragma: no cover - other Pythons
    pytest.skip(f"python capture: {_native.pyfunc_unsupported()}", allow_module_level=True)

LOOP = 300  # past CPython's call-site specialisation, which inlines Python calls


def op_counts(prof: opprof.profile) -> Counter[str]:
    records = prof.records()
    return Counter(records.names[n] for n in records.events["name"])


DEMO = {
    "__init__.py": """
        from demo_lib._impl import plain, boom, decorated_a, decorated_b, Model, numbers
        from demo_lib import sub
    """,
    "_impl.py": """
        import functools
        import numpy as np

        def plain(x):
            return np.add(x, 1)

        def boom():
            raise ValueError("boom")

        def _checked(fn):
            @functools.wraps(fn)
            def wrapper(*args, **kwargs):
                return fn(*args, **kwargs)
            return wrapper

        @_checked
        def decorated_a(x):
            return x + 1

        @_checked
        def decorated_b(x):
            return x + 2

        def numbers(n):
            yield from range(n)

        def _private(x):
            return x

        class Model:
            def fit(self, x):
                return _private(plain(x))

            @staticmethod
            def make():
                return Model()

            def _helper(self):
                return 1
    """,
    "sub.py": """
        def nested(x):
            return x * 2
    """,
}


@pytest.fixture
def demo_lib(tmp_path: Path) -> Iterator[object]:
    """A real package on disk, imported, its functions in the native table as owner "test",
    recorded with the numpy source's bit."""
    root = tmp_path / "demo_lib"
    root.mkdir()
    for name, text in DEMO.items():
        (root / name).write_text(textwrap.dedent(text))
    sys.path.insert(0, str(tmp_path))
    try:
        import demo_lib  # type: ignore[import-not-found]

        found = pyfunctions.public_functions("demo_lib")
        option = int(_native.lib.OPPROF_OPT_CAPTURE_NUMPY)
        _native.pyfunc_set(
            "test", [(id(code), _native.intern(name), option) for name, code in found.values()]
        )
        try:
            yield demo_lib
        finally:
            _native.pyfunc_set("test", [])
    finally:
        sys.path.remove(str(tmp_path))
        for name in [m for m in sys.modules if m == "demo_lib" or m.startswith("demo_lib.")]:
            del sys.modules[name]


def test_public_functions_by_their_shortest_public_names(demo_lib: object) -> None:
    names = {name for name, _code in pyfunctions.public_functions("demo_lib").values()}
    assert names == {
        "demo_lib.plain",
        "demo_lib.boom",
        "demo_lib.decorated_a",
        "demo_lib.decorated_b",
        "demo_lib.sub.nested",
        "demo_lib.Model.fit",
        "demo_lib.Model.make",
    }  # not: the generator, _private, Model._helper, anything as demo_lib._impl.*


REEXPORTS = {
    # scikit-learn's layout: a class defined in a private module, imported for its own use
    # by a public one with a shorter name (sklearn.utils.extmath imports
    # sklearn.utils._param_validation.Interval), and gathered by a facade that defines
    # nothing itself (sklearn.utils.metadata_routing), or listed in an __all__.
    "__init__.py": "",
    "utils/__init__.py": """
        from reexport_lib.utils._checks import check_x
        __all__ = ["check_x"]
    """,
    "utils/_validation.py": """
        class Interval:
            def is_satisfied_by(self, x):
                return True

        class Router:
            def route(self, x):
                return x
    """,
    "utils/_checks.py": """
        def check_x(x):
            return x

        def unlisted(x):
            return x
    """,
    "utils/ext.py": """
        from reexport_lib.utils._validation import Interval
        from reexport_lib.utils._checks import unlisted

        def norm(x):
            return Interval().is_satisfied_by(unlisted(x))
    """,
    "utils/routing.py": """
        from reexport_lib.utils._validation import Router
    """,
    "base.py": """
        from reexport_lib.utils import check_x

        class Estimator:
            def fit(self, x):
                return check_x(x)
    """,
}


def test_functions_are_named_by_a_public_path_never_by_a_module_that_imported_them(
    tmp_path: Path,
) -> None:
    for name, text in REEXPORTS.items():
        path = tmp_path / "reexport_lib" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    sys.path.insert(0, str(tmp_path))
    try:
        import reexport_lib.base  # type: ignore[import-not-found]
        import reexport_lib.utils.ext  # type: ignore[import-not-found]
        import reexport_lib.utils.routing  # type: ignore[import-not-found]  # noqa: F401

        names = {name for name, _code in pyfunctions.public_functions("reexport_lib").values()}
    finally:
        sys.path.remove(str(tmp_path))
        for name in [m for m in sys.modules if m.split(".")[0] == "reexport_lib"]:
            del sys.modules[name]
    assert names == {
        "reexport_lib.base.Estimator.fit",
        "reexport_lib.utils.check_x",  # in its package's __all__ (not reexport_lib.base's)
        "reexport_lib.utils.ext.norm",
        # Only imported by ext: named where it is defined, not reexport_lib.utils.ext.*.
        "reexport_lib.utils._validation.Interval.is_satisfied_by",
        "reexport_lib.utils._checks.unlisted",
        "reexport_lib.utils.routing.Router.route",  # a facade's names are its public paths
    }


def test_each_call_is_one_op_with_its_library_calls_inside(demo_lib: object) -> None:
    lib = demo_lib
    x = np.ones(4)

    def work() -> None:
        for _ in range(LOOP):
            lib.plain(x)  # type: ignore[attr-defined]
            lib.decorated_a(1)  # type: ignore[attr-defined]
            lib.decorated_b(1)  # type: ignore[attr-defined]
        lib.Model.make().fit(x)  # type: ignore[attr-defined]
        assert list(lib.numbers(3)) == [0, 1, 2]  # type: ignore[attr-defined]

    work()  # the call sites are specialised before the profile starts
    with opprof.profile(capture=["numpy"]) as prof:
        work()
    counts = op_counts(prof)
    assert counts["demo_lib.plain"] == LOOP + 1  # and once inside Model.fit
    assert counts["demo_lib.decorated_a"] == LOOP
    assert counts["demo_lib.decorated_b"] == LOOP
    assert counts["demo_lib.Model.make"] == 1
    assert counts["demo_lib.Model.fit"] == 1
    assert counts["numpy.add"] == LOOP + 1
    assert not any("numbers" in name for name in counts)
    by_name = {e.name: e for e in prof.events()}
    fit = by_name["demo_lib.Model.fit"]
    assert [c.name for c in fit.cpu_children] == ["demo_lib.plain"]
    assert [c.name for c in fit.cpu_children[0].cpu_children] == ["numpy.add"]


def test_a_raising_function_is_recorded_with_the_exception(demo_lib: object) -> None:
    with opprof.profile(capture=["numpy"]) as prof:
        with pytest.raises(ValueError, match="boom"):
            demo_lib.boom()  # type: ignore[attr-defined]
    records = prof.records()
    assert [records.names[n] for n in records.events["name"]] == ["demo_lib.boom"]
    assert records.events["flags"][0] & 1  # OPPROF_FLAG_EXCEPTION


def test_calls_in_other_threads_are_theirs(demo_lib: object) -> None:
    x = np.ones(3)
    with opprof.profile(capture=["numpy"]) as prof:
        worker = threading.Thread(target=lambda: demo_lib.plain(x))  # type: ignore[attr-defined]
        worker.start()
        worker.join()
        demo_lib.plain(x)  # type: ignore[attr-defined]
    threads = {e.thread for e in prof.events() if e.name == "demo_lib.plain"}
    assert len(threads) == 2


def test_armed_only_while_a_profile_records_and_never_after(demo_lib: object) -> None:
    assert not _native.lib.opprof_pyfunc_armed()
    with opprof.profile(capture=["numpy"]):
        assert _native.lib.opprof_pyfunc_armed()
    assert not _native.lib.opprof_pyfunc_armed()
    with pytest.raises(RuntimeError):
        with opprof.profile(capture=["numpy"]):
            raise RuntimeError("the test failed")
    assert not _native.lib.opprof_pyfunc_armed()
    with opprof.profile(capture=["none"]) as no_source:  # not asked for: not armed
        assert not _native.lib.opprof_pyfunc_armed()
        demo_lib.plain(np.ones(2))  # type: ignore[attr-defined]
    assert "demo_lib.plain" not in op_counts(no_source)


def test_scipy_and_numpy_testing_by_their_public_names() -> None:
    linalg = pytest.importorskip("scipy.linalg")
    a = np.random.default_rng(0).standard_normal((20, 20)) + 20 * np.eye(20)
    b = np.ones(20)
    for _ in range(LOOP):
        linalg.solve(a, b)
    with opprof.profile() as prof:
        for _ in range(LOOP):
            x = linalg.solve(a, b)
        np.testing.assert_allclose(a @ x, b)
    counts = op_counts(prof)
    assert counts["scipy.linalg.solve"] == LOOP
    assert counts["numpy.testing.assert_allclose"] == 1
    solve = next(e for e in prof.events() if e.name == "scipy.linalg.solve")
    inside = {e.name for e in solve.cpu_children}
    # the compiled call (_batched_linalg._solve; LAPACK's routines before scipy 1.16), nested
    assert any(name.startswith(("scipy.linalg._batched", "scipy.linalg.lapack")) for name in inside)


def test_numpy_functions_that_are_not_dispatchers() -> None:
    """np.ones, np.full, np.eye and np.identity are Python functions: ops by their names,
    with the allocation and the fill they run inside."""
    for _ in range(LOOP):
        np.ones(3), np.eye(3)
    with opprof.profile(capture=["numpy"]) as prof:
        for _ in range(LOOP):
            np.ones(3)
            np.eye(3)
        np.full(4, 2.0)
        np.identity(2)
    counts = op_counts(prof)
    # np.identity is np.eye inside: its own call, nested
    assert [counts[f"numpy.{f}"] for f in ("ones", "eye", "full", "identity")] == [
        LOOP,
        LOOP + 1,
        1,
        1,
    ]
    identity = next(e for e in prof.events() if e.name == "numpy.identity")
    assert [c.name for c in identity.cpu_children] == ["numpy.eye"]
    ones = next(e for e in prof.events() if e.name == "numpy.ones")
    assert {c.name for c in ones.cpu_children} == {"numpy.empty", "numpy.copyto"}


SUITE = """
import numpy as np
from scipy.linalg import solve
from sklearn.linear_model import Ridge

def test_solve():
    a = np.eye(30) * 2.0
    assert solve(a, np.ones(30))[0] == 0.5
    Ridge(alpha=1.0).fit(a, np.ones(30))
"""


@pytest.mark.slow
@pytest.mark.parametrize("capture", [None, "numpy"])
def test_the_plugin_captures_the_python_api_of_imported_libraries(
    run_pytest: PytestRunner, tmp_path: Path, capture: str | None
) -> None:
    pytest.importorskip("scipy.linalg")
    pytest.importorskip("sklearn.linear_model")
    run_pytest.pytester.makepyfile(test_sp=SUITE)
    report = tmp_path / "r.json"
    args = ["--opprof", "--opprof-report", str(report), "--opprof-report-details"]
    if capture:
        args += ["--opprof-capture", capture]
    run_pytest(*args).assert_outcomes(passed=1)
    (test,) = json.loads(report.read_text())["tests"].values()
    assert "numpy.ones" in test["ops"]
    for op in ("scipy.linalg.solve", "sklearn.linear_model.Ridge.fit"):
        assert (op in test["ops"]) is (capture is None), op


def test_profiles_search_the_modules_again_only_after_an_import(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A profile per block of API code: scipy's and numpy's modules are searched again only
    when sys.modules changed size (the search took 15 ms a profile)."""
    pytest.importorskip("scipy.linalg")
    from pytest_opprof.capture.sources import scipy_source

    searched: list[str] = []
    real_routines, real_public = scipy_source.routines, pyfunctions.public_functions

    def routines(*args: object) -> object:
        searched.append("routines")
        return real_routines(*args)  # type: ignore[arg-type]

    def public(*args: object) -> object:
        searched.append("public")
        return real_public(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(scipy_source, "routines", routines)
    monkeypatch.setattr(pyfunctions, "public_functions", public)
    for _ in range(2):  # the first profile of a process imports what calibration needs
        with opprof.profile():
            pass
    searched.clear()
    for _ in range(3):
        with opprof.profile() as prof:
            np.ones(2)
    assert searched == []
    assert op_counts(prof)["numpy.ones"] == 1
    monkeypatch.setitem(sys.modules, "opprof_probe_module", types.ModuleType("opprof_probe_module"))
    with opprof.profile():
        pass
    # scipy's two kinds of routines; numpy's and scipy's Python API (and any other imported)
    assert searched.count("routines") == 2 and searched.count("public") >= 2


FOREIGN_EVALUATOR = r"""
#include <Python.h>
#if PY_VERSION_HEX >= 0x030B0000
typedef struct _PyInterpreterFrame frame_t;
#else
#include <frameobject.h>
typedef PyFrameObject frame_t;
#endif
static PyObject *passthrough(PyThreadState *ts, frame_t *f, int exc)
{
    return _PyEval_EvalFrameDefault(ts, f, exc);
}
static void set_evaluator(int on)
{
    PyGILState_STATE g = PyGILState_Ensure();
    _PyInterpreterState_SetEvalFrameFunc(PyInterpreterState_Get(),
                                         on ? passthrough : _PyEval_EvalFrameDefault);
    PyGILState_Release(g);
}
"""


@pytest.fixture(scope="module")
def foreign_evaluator(tmp_path_factory: pytest.TempPathFactory) -> object:
    """What a debugger or torch.compile installs: another frame evaluator (a real one,
    compiled here)."""
    import importlib

    cffi = pytest.importorskip("cffi")
    build = tmp_path_factory.mktemp("evaluator")
    ffi = cffi.FFI()
    ffi.cdef("void set_evaluator(int on);")
    # the limited API (cffi's default) hides the frame-evaluation functions
    ffi.set_source(
        "opprof_foreign_evaluator",
        FOREIGN_EVALUATOR,
        define_macros=[("_CFFI_NO_LIMITED_API", None)],
    )
    ffi.compile(tmpdir=str(build))
    sys.path.insert(0, str(build))
    try:
        return importlib.import_module("opprof_foreign_evaluator").lib
    finally:
        sys.path.remove(str(build))


def test_another_frame_evaluator_is_left_in_place_and_said(foreign_evaluator: object) -> None:
    lib = foreign_evaluator
    with opprof.profile(capture=["numpy"]) as prof:
        np.ones(2)
        lib.set_evaluator(1)  # type: ignore[attr-defined]
        np.ones(2)
    assert _native.lib.opprof_pyfunc_armed() == 0
    lib.set_evaluator(0)  # type: ignore[attr-defined]  # ours left theirs in place
    assert any("another frame evaluator" in line for line in prof.not_measured)
    assert op_counts(prof)["numpy.ones"] == 1  # the one before theirs took over
    lib.set_evaluator(1)  # type: ignore[attr-defined]
    try:
        assert "another frame evaluator" in (_native.pyfunc_unsupported() or "")
        with pytest.warns(RuntimeWarning, match="Python functions are not captured"):
            with opprof.profile(capture=["numpy"]) as beside:
                np.ones(2)
        assert not _native.lib.opprof_pyfunc_armed()
        counts = op_counts(beside)
        assert counts["numpy.ones"] == 0 and counts["numpy.empty"] == 1  # C ops still
    finally:
        lib.set_evaluator(0)  # type: ignore[attr-defined]
    with opprof.profile(capture=["numpy"]) as after:
        np.ones(2)
    assert op_counts(after)["numpy.ones"] == 1


HELD_SUITE = """
import json
import os

import numpy as np
import pytest
from scipy.linalg import solve

from pytest_opprof.capture.sources import scipy_source

SEEN = []


@pytest.fixture(autouse=True)
def installed_between_rounds():
    # Setup and teardown run outside the test's rounds: no profile holds the source.
    SEEN.append(scipy_source.SOURCE.installed)
    yield
    SEEN.append(scipy_source.SOURCE.installed)
    with open(os.environ["SEEN_FILE"], "w") as f:
        json.dump(SEEN, f)


def test_1():
    assert solve(np.eye(3) * 2.0, np.ones(3))[0] == 0.5


def test_2():
    from scipy import signal  # imported here, after the session's first test

    signal.lfilter([1.0], [1.0, -0.5], np.ones(8))


def test_3():
    from scipy import signal

    assert signal.lfilter([1.0], [1.0, -0.5], np.ones(8))[0] == 1.0
"""


@pytest.mark.slow
def test_the_plugin_holds_scipy_for_the_session_and_finds_what_tests_import_later(
    run_pytest: PytestRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """scipy, imported by the test modules after the plugin made its plan, is held from the
    first test on, as numpy is: each round's profile only counts a reference, instead of
    installing scipy's hooks and removing them again (3 ms a round).  A scipy module a test
    imports later is found for the tests after it, as a profile of its own finds it."""
    pytest.importorskip("scipy.signal")
    run_pytest.pytester.makepyfile(test_held=HELD_SUITE)
    seen, report = tmp_path / "seen.json", tmp_path / "r.json"
    monkeypatch.setenv("SEEN_FILE", str(seen))
    run_pytest(
        "--opprof", "--opprof-rounds", "1", f"--opprof-report={report}", "--opprof-report-details"
    ).assert_outcomes(passed=3)
    # test_1's setup runs before the plugin's first call hook: nothing is installed yet.
    assert json.loads(seen.read_text()) == [False, True, True, True, True, True]
    tests = {
        nid.rsplit("::", 1)[1]: t for nid, t in json.loads(report.read_text())["tests"].items()
    }
    assert "scipy.linalg.solve" in tests["test_1"]["ops"]
    assert "scipy.signal.lfilter" not in tests["test_2"]["ops"]  # imported inside its round
    assert "scipy.signal.lfilter" in tests["test_3"]["ops"]
