"""FLOP counts of scipy's LAPACK and BLAS wrappers (``scipy.linalg.lapack.dgesv``, ...).

The scipy source records each f2py routine's arguments in the order of its
signature (``u,s,vt,info = dgesdd(a,[compute_uv,full_matrices,...])``), keyword
arguments at their index, as the numpy source does: :data:`PARAMS` says which
parameters each formula reads, and the source passes those names to the hook.
Counts are the textbook ones (LAPACK Working Note 41, Golub and Van Loan), for
the matrix sizes recorded; complex routines count like real ones, as numpy's
linalg formulas do.  A routine named here without a formula counts 0.

| routine (any of s, d, c, z) | FLOPs |
| --- | --- |
| `gemm(alpha, a, b, ..., trans_a, trans_b)` | 2mnk |
| `symm`, `hemm(alpha, a, b, beta, c, side)` | 2m^2n (side=0), 2mn^2 (side=1), b: m x n |
| `trmm`, `trsm(alpha, a, b, side)` | m^2n (side=0), mn^2 (side=1), b: m x n |
| `syrk`, `herk(alpha, a, beta, c, trans)` | n(n+1)k, a: n x k (trans=0) or k x n |
| `gemv(alpha, a, x)` | 2mn |
| `ger`, `geru`, `gerc(alpha, x, y)` | 2mn |
| `dot`, `dotu`, `dotc`, `axpy` | 2n |
| `gesv(a, b)`, `posv` | 2n^3/3 + 2n^2k (posv: n^3/3 + 2n^2k) |
| `getrf(a)` | mn^2 - n^3/3, n = min, m = max |
| `getrs(lu, piv, b)`, `potrs(c, b)` | 2n^2k |
| `trtrs(a, b)` | n^2k |
| `getri(lu, piv)` | 4n^3/3 |
| `potrf(a)`, `sytrf`, `hetrf` | n^3/3 |
| `geqrf(a)`, `geqp3` | 2mn^2 - 2n^3/3, n = min, m = max |
| `orgqr`, `ungqr(a, tau)` | 4mnk - 2(m+n)k^2 + 4k^3/3, k = len(tau) |
| `gels(a, b)` | 2mn^2 - 2n^3/3 + 4mnk |
| `gelsd`, `gelss`, `gelsy(a, b)` | 4mn^2 + 8n^3 (as numpy's lstsq) |
| `gesdd`, `gesvd(a, compute_uv, full_matrices)` | as numpy's svd |
| `syev`, `syevd`, `syevr`, `heev`, `heevd`, `heevr(a, compute_v)` | 9n^3, 4n^3/3 without vectors |
| `geev(a, compute_vl, compute_vr)` | 25n^3, 10n^3 without vectors |

scipy.linalg's batched C functions behind ``solve`` and ``inv``
(``scipy.linalg._batched_linalg._solve``, ``_inv``) count as numpy's ``linalg.solve``
(2n^3/3 + 2n^2k) and ``linalg.inv`` (2n^3), per matrix of the stack.

Shapes: ``m x n`` is the recorded shape of ``a``; ``k`` is the column count of
``b`` (1 for a vector).  A call with ``lwork=-1`` (a workspace query: scipy calls
``geqrf``, ``orgqr`` and ``gelsd`` so before the real call) counts 0.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from pytest_opprof.flops import linalg
from pytest_opprof.flops.linalg import Shapes

PUBLIC = ("scipy.linalg.lapack.", "scipy.linalg.blas.")
"""Names of the routines these formulas count (the scipy source names them so)."""
BATCHED = {
    # scipy.linalg.solve and inv run these C functions (stacks of matrices, scipy >= 1.15).
    "scipy.linalg._batched_linalg._solve": lambda shapes, dtypes: linalg.solve(shapes),
    "scipy.linalg._batched_linalg._inv": lambda shapes, dtypes: linalg.per_matrix(
        lambda n: 2 * n**3
    )(shapes),
}
"""scipy.linalg's own C functions with a formula, as numpy's ``linalg.solve`` and ``inv``."""
PREFIXES = "sdcz"

Formula = Callable[[Shapes, Sequence[str]], int]


def _mn(a: Sequence[int]) -> tuple[int, int]:
    """(rows, columns) of a matrix argument; a vector is one column."""
    if len(a) == 1:
        return a[0], 1
    return a[-2], a[-1]


def _cols(b: Sequence[int]) -> int:
    return 1 if len(b) <= 1 else b[-1]


def _flag(dtypes: Sequence[str], index: int, default: int) -> int:
    value = linalg.option(dtypes, index, default)
    if not isinstance(value, int):  # bool is an int
        raise TypeError(f"not a flag: {value!r}")
    return int(value)


def _gemm(shapes: Shapes, dtypes: Sequence[str]) -> int:
    a, b = _mn(shapes[1]), _mn(shapes[2])
    m, k = (a[1], a[0]) if _flag(dtypes, 5, 0) else a
    n = b[0] if _flag(dtypes, 6, 0) else b[1]
    return 2 * m * n * k


def _side(index: int, twice: bool) -> Formula:
    """symm/hemm (``twice``), trmm/trsm: ``a`` is square on the ``side`` of b (m x n)."""

    def count(shapes: Shapes, dtypes: Sequence[str]) -> int:
        m, n = _mn(shapes[2])
        per = m * m * n if _flag(dtypes, index, 0) == 0 else m * n * n
        return 2 * per if twice else per

    return count


def _syrk(shapes: Shapes, dtypes: Sequence[str]) -> int:
    rows, cols = _mn(shapes[1])
    n, k = (cols, rows) if _flag(dtypes, 4, 0) else (rows, cols)
    return n * (n + 1) * k


def _gemv(shapes: Shapes, dtypes: Sequence[str]) -> int:
    m, n = _mn(shapes[1])
    return 2 * m * n


def _outer(shapes: Shapes, dtypes: Sequence[str]) -> int:
    return 2 * _mn(shapes[1])[0] * _mn(shapes[2])[0]


def _vector(shapes: Shapes, dtypes: Sequence[str]) -> int:
    return 2 * _mn(shapes[0])[0]


def _tall(formula: Callable[[int, int], float], arg: int = 0) -> Formula:
    def count(shapes: Shapes, dtypes: Sequence[str]) -> int:
        r, c = _mn(shapes[arg])
        return int(formula(max(r, c), min(r, c)))

    return count


def _square(formula: Callable[[int], float], arg: int = 0) -> Formula:
    def count(shapes: Shapes, dtypes: Sequence[str]) -> int:
        return int(formula(_mn(shapes[arg])[-1]))

    return count


def _solve(factor: Callable[[int], float], a: int, b: int) -> Formula:
    """Factor ``a`` (n x n) by ``factor`` (None: already factored), then 2n^2 per column of b."""

    def count(shapes: Shapes, dtypes: Sequence[str]) -> int:
        n = _mn(shapes[a])[-1]
        return int(factor(n)) + 2 * n * n * _cols(shapes[b])

    return count


def _trtrs(shapes: Shapes, dtypes: Sequence[str]) -> int:
    n = _mn(shapes[0])[-1]
    return n * n * _cols(shapes[1])


def _orgqr(shapes: Shapes, dtypes: Sequence[str]) -> int:
    m, n = _mn(shapes[0])
    k = _mn(shapes[1])[0]
    return 4 * m * n * k - 2 * (m + n) * k * k + 4 * k**3 // 3


def _gels(shapes: Shapes, dtypes: Sequence[str]) -> int:
    r, c = _mn(shapes[0])
    m, n = max(r, c), min(r, c)
    return 2 * m * n * n - 2 * n**3 // 3 + 4 * m * n * _cols(shapes[1])


def _gesdd(shapes: Shapes, dtypes: Sequence[str]) -> int:
    # numpy's svd reads full_matrices at index 1 and compute_uv at 2: LAPACK's are swapped.
    compute_uv, full = _flag(dtypes, 1, 1), _flag(dtypes, 2, 1)
    return linalg.svd(shapes, ["", f"Scalar={int(full)}", f"Scalar={int(compute_uv)}"])


def _eigh(shapes: Shapes, dtypes: Sequence[str]) -> int:
    n = _mn(shapes[0])[-1]
    return 9 * n**3 if _flag(dtypes, 1, 1) else 4 * n**3 // 3


def _geev(shapes: Shapes, dtypes: Sequence[str]) -> int:
    n = _mn(shapes[0])[-1]
    vectors = _flag(dtypes, 1, 1) or _flag(dtypes, 2, 1)
    return (25 if vectors else 10) * n**3


_ROUTINES: dict[str, tuple[tuple[str, ...], Formula]] = {
    "gemm": (("alpha", "a", "b", "beta", "c", "trans_a", "trans_b"), _gemm),
    "symm": (("alpha", "a", "b", "beta", "c", "side"), _side(5, twice=True)),
    "hemm": (("alpha", "a", "b", "beta", "c", "side"), _side(5, twice=True)),
    "trmm": (("alpha", "a", "b", "side"), _side(3, twice=False)),
    "trsm": (("alpha", "a", "b", "side"), _side(3, twice=False)),
    "syrk": (("alpha", "a", "beta", "c", "trans"), _syrk),
    "herk": (("alpha", "a", "beta", "c", "trans"), _syrk),
    "gemv": (("alpha", "a", "x"), _gemv),
    "ger": (("alpha", "x", "y"), _outer),
    "geru": (("alpha", "x", "y"), _outer),
    "gerc": (("alpha", "x", "y"), _outer),
    "dot": (("x", "y"), _vector),
    "dotu": (("x", "y"), _vector),
    "dotc": (("x", "y"), _vector),
    "axpy": (("x", "y"), _vector),
    "gesv": (("a", "b"), _solve(lambda n: 2 * n**3 // 3, 0, 1)),
    "posv": (("a", "b"), _solve(lambda n: n**3 // 3, 0, 1)),
    "getrf": (("a",), _tall(lambda m, n: m * n * n - n**3 // 3)),
    "getrs": (("lu", "piv", "b"), _solve(lambda n: 0, 0, 2)),
    "potrs": (("c", "b"), _solve(lambda n: 0, 0, 1)),
    "trtrs": (("a", "b"), _trtrs),
    "getri": (("lu", "piv", "lwork"), _square(lambda n: 4 * n**3 // 3)),
    "potrf": (("a",), _square(lambda n: n**3 // 3)),
    "sytrf": (("a", "lower", "lwork"), _square(lambda n: n**3 // 3)),
    "hetrf": (("a", "lower", "lwork"), _square(lambda n: n**3 // 3)),
    "geqrf": (("a", "lwork"), _tall(lambda m, n: 2 * m * n * n - 2 * n**3 // 3)),
    "geqp3": (("a", "lwork"), _tall(lambda m, n: 2 * m * n * n - 2 * n**3 // 3)),
    "orgqr": (("a", "tau", "lwork"), _orgqr),
    "ungqr": (("a", "tau", "lwork"), _orgqr),
    "gels": (("a", "b", "trans", "lwork"), _gels),
    "gelsd": (("a", "b", "lwork"), _tall(lambda m, n: 4 * m * n * n + 8 * n**3)),
    "gelss": (("a", "b", "cond", "lwork"), _tall(lambda m, n: 4 * m * n * n + 8 * n**3)),
    "gelsy": (("a", "b", "jptv", "cond", "lwork"), _tall(lambda m, n: 4 * m * n * n + 8 * n**3)),
    "gesdd": (("a", "compute_uv", "full_matrices", "lwork"), _gesdd),
    "gesvd": (("a", "compute_uv", "full_matrices", "lwork"), _gesdd),
    "syev": (("a", "compute_v", "lower", "lwork"), _eigh),
    "syevd": (("a", "compute_v", "lower", "lwork"), _eigh),
    "syevr": (("a", "compute_v"), _eigh),
    "heev": (("a", "compute_v", "lower", "lwork"), _eigh),
    "heevd": (("a", "compute_v", "lower", "lwork"), _eigh),
    "heevr": (("a", "compute_v"), _eigh),
    "geev": (("a", "compute_vl", "compute_vr", "lwork"), _geev),
}


def _routine(name: str) -> str | None:
    """The routine without its type letter (``dgesv`` -> ``gesv``) of a public name, or None."""
    for prefix in PUBLIC:
        if name.startswith(prefix):
            routine = name[len(prefix) :]
            if len(routine) > 1 and routine[0] in PREFIXES and routine[1:] in _ROUTINES:
                return routine[1:]
    return None


def _is_query(dtypes: Sequence[str], index: int) -> bool:
    """Whether the recorded ``lwork`` is -1; a size passed as a numpy integer (recorded by
    its dtype, ``"int64"``) is a real call."""
    try:
        return linalg.option(dtypes, index, 0) == -1
    except ValueError:
        return False


def params(name: str) -> tuple[str, ...] | None:
    """The parameter names (in the routine's positional order) the formula of the routine
    named ``name`` reads, which its hook records; None when it has no formula."""
    routine = _routine(name)
    return _ROUTINES[routine][0] if routine is not None else None


def has_formula(name: str) -> bool:
    return name in BATCHED or _routine(name) is not None


def lapack_flops(name: str, shapes: Shapes, dtypes: Sequence[str]) -> int:
    """FLOPs of one call of the routine ``name``; raises (ValueError, IndexError, TypeError)
    when a needed argument was not recorded, which the caller counts as 0."""
    if name in BATCHED:
        return BATCHED[name](shapes, dtypes)
    routine = _routine(name)
    if routine is None:
        return 0
    names, formula = _ROUTINES[routine]
    # lwork=-1 asks for the workspace size only (scipy calls geqrf, orgqr, gelsd so first).
    if "lwork" in names and _is_query(dtypes, names.index("lwork")):
        return 0
    return formula(shapes, dtypes)
