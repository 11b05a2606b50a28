"""FLOPs of scipy's LAPACK and BLAS wrappers: textbook counts from the recorded arguments,
keyword arguments included, through scipy.linalg's public functions and direct calls."""

from __future__ import annotations

import numpy as np
import pytest
from run_helpers import PytestRunner
from scipy_versions import BATCHED

import pytest_opprof as opprof

scipy_linalg = pytest.importorskip("scipy.linalg")
lapack = scipy_linalg.lapack
blas = scipy_linalg.blas

RNG = np.random.default_rng(0)
A = RNG.standard_normal((50, 50))
B = RNG.standard_normal((50, 3))
T = RNG.standard_normal((60, 40))  # m = 60, n = 40
SPD = A @ A.T + 50 * np.eye(50)


def flops_of(run: object) -> dict[str, int]:
    """FLOPs per scipy op of ``run()``, one profile."""
    with opprof.profile(record_shapes=True, with_flops=True) as prof:
        run()  # type: ignore[operator]
    return {r.key: r.flops for r in prof.key_averages() if r.key.startswith("scipy.")}


M, N = 60, 40
SVD_FULL = 4 * M * M * N + 8 * M * N * N + 9 * N**3
SVD_THIN = 14 * M * N * N + 8 * N**3
SVD_VALUES = 4 * M * N * N - 4 * N**3 // 3


@pytest.mark.parametrize(
    ("run", "op", "expected"),
    [
        (lambda: scipy_linalg.lu_factor(A), "lapack.dgetrf", 50 * 50 * 50 - 50**3 // 3),
        (lambda: scipy_linalg.cholesky(SPD), "lapack.dpotrf", 50**3 // 3),
        (lambda: lapack.dgesv(A, B), "lapack.dgesv", 2 * 50**3 // 3 + 2 * 50 * 50 * 3),
        *(
            [
                (
                    lambda: scipy_linalg.solve(A, B),
                    "_batched_linalg._solve",
                    2 * 50**3 // 3 + 15000,
                ),
                (lambda: scipy_linalg.inv(A), "_batched_linalg._inv", 2 * 50**3),
                (lambda: scipy_linalg.inv(np.stack([A, A])), "_batched_linalg._inv", 2 * 2 * 50**3),
            ]
            if BATCHED
            else [  # getrf counted in its own case
                (lambda: scipy_linalg.solve(A, B), "lapack.dgetrs", 2 * 50 * 50 * 3),
                (lambda: scipy_linalg.inv(A), "lapack.dgetri", 4 * 50**3 // 3),
            ]
        ),
        (lambda: lapack.dgetrs(*lapack.dgetrf(A)[:2], B), "lapack.dgetrs", 2 * 50 * 50 * 3),
        (lambda: lapack.dgetri(*lapack.dgetrf(A)[:2]), "lapack.dgetri", 4 * 50**3 // 3),
        (lambda: scipy_linalg.svd(T), "lapack.dgesdd", SVD_FULL),
        (lambda: scipy_linalg.svd(T, full_matrices=False), "lapack.dgesdd", SVD_THIN),
        (lambda: scipy_linalg.svd(T, compute_uv=False), "lapack.dgesdd", SVD_VALUES),
        (lambda: lapack.dgesdd(T, 0), "lapack.dgesdd", SVD_VALUES),  # positional compute_uv
        (lambda: scipy_linalg.eigh(SPD), "lapack.dsyevr", 9 * 50**3),
        (lambda: scipy_linalg.eigh(SPD, eigvals_only=True), "lapack.dsyevr", 4 * 50**3 // 3),
        (lambda: scipy_linalg.eig(A), "lapack.dgeev", 25 * 50**3),
        (lambda: scipy_linalg.eigvals(A), "lapack.dgeev", 10 * 50**3),
        (lambda: scipy_linalg.qr(T, mode="r"), "lapack.dgeqrf", 2 * M * N * N - 2 * N**3 // 3),
        (lambda: scipy_linalg.lstsq(T, T[:, :2]), "lapack.dgelsd", 4 * M * N * N + 8 * N**3),
        (lambda: blas.dgemm(1.0, A, B), "blas.dgemm", 2 * 50 * 3 * 50),
        (lambda: blas.dgemm(1.0, B, A, trans_a=True), "blas.dgemm", 2 * 3 * 50 * 50),
        (lambda: blas.dgemm(1.0, A, B.T, trans_b=1), "blas.dgemm", 2 * 50 * 3 * 50),
        (lambda: blas.dgemv(1.0, T, T[0]), "blas.dgemv", 2 * M * N),
        (lambda: blas.ddot(B[:, 0], B[:, 1]), "blas.ddot", 2 * 50),
        (lambda: blas.dsyrk(1.0, T), "blas.dsyrk", M * (M + 1) * N),
        (lambda: blas.dsyrk(1.0, T, trans=1), "blas.dsyrk", N * (N + 1) * M),
        (lambda: blas.dtrsm(1.0, np.triu(A), B), "blas.dtrsm", 50 * 50 * 3),
        (lambda: blas.dtrsm(1.0, np.triu(A[:3, :3]), B, side=1), "blas.dtrsm", 50 * 3 * 3),
    ],
)
def test_textbook_counts(run: object, op: str, expected: int) -> None:
    assert flops_of(run)[f"scipy.linalg.{op}"] == expected


def test_keyword_and_positional_forms_count_alike() -> None:
    by_keyword = flops_of(lambda: lapack.dgesdd(T, compute_uv=0, full_matrices=0))
    by_position = flops_of(lambda: lapack.dgesdd(T, 0, 0))
    assert by_keyword == by_position == {"scipy.linalg.lapack.dgesdd": SVD_VALUES}


def test_lists_are_counted_at_the_shape_scipy_sees() -> None:
    assert flops_of(lambda: blas.dgemm(1.0, A.tolist(), B.tolist())) == {
        "scipy.linalg.blas.dgemm": 2 * 50 * 3 * 50
    }


def test_routines_without_a_formula_count_zero() -> None:
    flops = flops_of(lambda: lapack.dgecon(A, 1.0))
    assert flops == {"scipy.linalg.lapack.dgecon": 0}


SUITE = """
import numpy as np
import scipy.linalg as sl

N = {n}

def test_factor():
    a = np.random.default_rng(0).standard_normal((N, N)) + N * np.eye(N)
    sl.lu_factor(a)
"""


def test_a_bigger_factorisation_fails_on_flops_naming_the_routine(
    pytester: pytest.Pytester, run_pytest: PytestRunner
) -> None:
    pytester.makepyfile(test_lapack=SUITE.format(n=40))
    run_pytest("--opprof-update-baselines").assert_outcomes(passed=1)
    pytester.makepyfile(test_lapack=SUITE.format(n=44))
    result = run_pytest("--opprof", "--opprof-time-tolerance", "1000%")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*flops*REGRESSED*", "*scipy.linalg.lapack.dgetrf*"])


def test_recorded_parameters_match_each_routine_signature() -> None:
    """The indices the formulas read are the routines' own positional order (their f2py
    signature, ``u,s,vt,info = dgesdd(a,[compute_uv,full_matrices,lwork,overwrite_a])``)."""
    import re

    from pytest_opprof.flops import lapack as formulas

    checked = 0
    for module, prefix in ((lapack, "scipy.linalg.lapack."), (blas, "scipy.linalg.blas.")):
        for attr in dir(module):
            names = formulas.params(prefix + attr)
            if names is None:
                continue
            signature = getattr(module, attr).__doc__.splitlines()[0]
            inside = re.search(r"\((.*)\)", signature.split("=", 1)[-1])
            assert inside, signature
            order = [p.strip() for p in re.sub(r"[\[\]]", "", inside.group(1)).split(",")]
            assert tuple(order[: len(names)]) == names, (attr, order)
            checked += 1
    assert checked >= 100  # every type letter of about 40 routines
