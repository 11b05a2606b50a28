"""scipy capture: f2py LAPACK/BLAS routines and scipy.special ufuncs recorded as library
ops under the names users call them by, restored afterwards, never importing scipy itself."""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from run_helpers import PytestRunner
from scipy_versions import BATCHED

import pytest_opprof as opprof
from pytest_opprof import _native

scipy_linalg = pytest.importorskip("scipy.linalg")
scipy_special = pytest.importorskip("scipy.special")
lapack = scipy_linalg.lapack
blas = scipy_linalg.blas

LOOP = 300  # past CPython's call-site specialisation


def op_counts(prof: opprof.profile) -> Counter[str]:
    records = prof.records()
    return Counter(records.names[n] for n in records.events["name"])


def test_lapack_and_blas_routines_are_ops_by_their_public_names() -> None:
    a = np.random.default_rng(0).standard_normal((40, 40))
    with opprof.profile(record_shapes=True) as prof:
        for _ in range(LOOP):
            lapack.dgetrf(a)
        blas.dgemm(1.0, a, a)
        scipy_linalg.svd(a)
    counts = op_counts(prof)
    assert counts["scipy.linalg.lapack.dgetrf"] == LOOP
    assert counts["scipy.linalg.blas.dgemm"] == 1
    assert counts["scipy.linalg.lapack.dgesdd"] == 1
    avg = {e.key: e for e in prof.key_averages(group_by_input_shape=True)}
    assert avg["scipy.linalg.lapack.dgetrf"].input_shapes == [[40, 40]]
    # the routine's time is its own, not its numpy callers'
    assert avg["scipy.linalg.lapack.dgesdd"].self_cpu_time_total > 0


def test_a_routine_that_raises_is_recorded_with_the_exception() -> None:
    with opprof.profile() as prof:
        with pytest.raises(Exception):  # noqa: B017 - f2py raises its own error type
            lapack.dgetrf("not an array")
    records = prof.records()
    assert [records.names[n] for n in records.events["name"]] == ["scipy.linalg.lapack.dgetrf"]
    assert records.events["flags"][0] & 1  # OPPROF_FLAG_EXCEPTION


def test_scipy_special_ufuncs_are_captured_under_scipy_names() -> None:
    x = np.linspace(0.5, 3.0, 1000)
    with opprof.profile(capture=["numpy"]) as prof:
        scipy_special.gamma(x)
        np.add(x, x)
    counts = op_counts(prof)
    assert counts["scipy.special.gamma"] == 1
    assert counts["numpy.add"] == 1


def test_restored_after_the_profile_and_idle_without_one() -> None:
    a = np.eye(8) * 2.0
    with opprof.profile(capture=["scipy"]) as prof:
        assert _native.lib.opprof_f2py_installed() == 1
        lapack.dgetrf(a)
    assert _native.lib.opprof_f2py_installed() == 0
    lu, _piv, info = lapack.dgetrf(a)  # still callable, unhooked
    assert info == 0 and lu[0, 0] == 2.0
    assert op_counts(prof)["scipy.linalg.lapack.dgetrf"] == 1


def test_capture_numpy_alone_leaves_f2py_routines_out() -> None:
    a = np.eye(8)
    with opprof.profile(capture=["numpy"]) as prof:
        lapack.dgetrf(a)
    assert "scipy.linalg.lapack.dgetrf" not in op_counts(prof)


SUITE = """
import sys
import numpy as np

def test_numpy_only():
    np.add(np.ones(10), 1.0)
    assert "scipy" not in sys.modules

"""

SCIPY_SUITE = """
import numpy as np
from scipy.linalg import lapack, solve

def test_solve():
    a = np.eye(50) * 3.0
    for _ in range(5):
        lapack.dgetrf(a)
    assert solve(a, np.ones(50))[0] == 1.0 / 3.0
"""


def test_plugin_never_imports_scipy(run_pytest: PytestRunner) -> None:
    run_pytest.pytester.makepyfile(test_np=SUITE)
    result = run_pytest("--opprof", "-p", "no:randomly")
    result.assert_outcomes(passed=1)


def test_plugin_captures_scipy_by_default(run_pytest: PytestRunner, tmp_path: Path) -> None:
    run_pytest.pytester.makepyfile(test_sp=SCIPY_SUITE)
    report = tmp_path / "r.json"
    result = run_pytest("--opprof", "--opprof-report", str(report), "--opprof-report-details")
    result.assert_outcomes(passed=1)
    (test,) = json.loads(report.read_text())["tests"].values()
    assert test["ops"]["scipy.linalg.lapack.dgetrf"]["count"] >= 5


def test_cython_functions_are_ops() -> None:
    """scipy.linalg.lu runs its LU in a Cython function (lu_dispatcher): captured and
    restored like the f2py routines."""
    a = np.random.default_rng(0).standard_normal((30, 30))
    with opprof.profile(capture=["scipy"]) as prof:
        for _ in range(LOOP):
            scipy_linalg.lu(a)
    lu = [name for name in op_counts(prof) if name.endswith(".lu_dispatcher")]
    assert lu, op_counts(prof)
    assert op_counts(prof)[lu[0]] == LOOP
    with opprof.profile(capture=["scipy"]) as idle_check:
        pass
    assert not op_counts(idle_check)
    p, low, up = scipy_linalg.lu(a)  # unhooked again, and right
    assert np.allclose(p @ low @ up, a)


def test_plain_c_functions_taking_args_are_ops() -> None:
    """scipy.linalg.solve and inv, sparse products and distances run plain C functions
    (METH_VARARGS, called through tp_call): captured with their results, errors and keyword
    handling unchanged, and unhooked after the profile."""
    sparse = pytest.importorskip("scipy.sparse")
    distance = pytest.importorskip("scipy.spatial.distance")
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((30, 30)), rng.standard_normal((30, 2))
    m = sparse.random(200, 200, density=0.05, format="csr", random_state=0)
    v = np.ones(200)
    expected = (scipy_linalg.solve(a, b), scipy_linalg.inv(a), m @ v)
    wrap = sys.modules["scipy.spatial._distance_wrap"]
    xa, xb, dm = rng.standard_normal((5, 3)), rng.standard_normal((4, 3)), np.empty((5, 4))
    with opprof.profile(capture=["scipy"], record_shapes=True) as prof:
        for _ in range(LOOP):
            got = (scipy_linalg.solve(a, b), scipy_linalg.inv(a), m @ v)
        if BATCHED:  # a singular matrix raises from the plain C function itself
            with pytest.raises(scipy_linalg.LinAlgError):
                scipy_linalg.solve(np.zeros((3, 3)), np.ones(3))
        wrap.cdist_cosine_double_wrap(XA=xa, XB=xb, dm=dm)  # keywords reach it
        with pytest.raises(TypeError, match="XA"):
            wrap.cdist_cosine_double_wrap()
    for want, have in zip(expected, got, strict=True):
        assert np.allclose(want, have)
    assert np.allclose(dm, distance.cdist(xa, xb, "cosine"))
    counts = op_counts(prof)
    if BATCHED:
        assert counts["scipy.linalg._batched_linalg._solve"] == LOOP + 1
        assert counts["scipy.linalg._batched_linalg._inv"] == LOOP
    assert counts["scipy.sparse._sparsetools.csr_matvec"] == LOOP
    assert counts["scipy.spatial._distance_wrap.cdist_cosine_double_wrap"] == 2
    with opprof.profile(capture=["scipy"]) as idle_check:
        pass
    assert not op_counts(idle_check)
    with opprof.profile(capture=["numpy"]) as numpy_only:
        scipy_linalg.solve(a, b)
    assert not [name for name in op_counts(numpy_only) if name.startswith("scipy.")]


def test_scipy_alone_records_shapes() -> None:
    """capture=["scipy"] without the numpy source: the hooks read array arguments with
    numpy's C API all the same (it crashed the process before)."""
    a = np.random.default_rng(0).standard_normal((12, 12))
    with opprof.profile(capture=["scipy"], record_shapes=True) as prof:
        lapack.dgetrf(a)
        scipy_linalg.solve(a, a[:, :2])
    shapes = {row.key: row.input_shapes for row in prof.key_averages(group_by_input_shape=True)}
    assert shapes["scipy.linalg.lapack.dgetrf"] == [[12, 12]]
    if BATCHED:
        assert shapes["scipy.linalg._batched_linalg._solve"][:2] == [[12, 12], [12, 2]]
    else:
        assert shapes["scipy.linalg.lapack.dgetrs"] == [[12, 12], [12], [12, 2]]
