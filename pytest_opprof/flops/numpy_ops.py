"""FLOP counts from op names and input shapes, computed at aggregation time.

``flops_for(name, shapes, dtypes)`` is called once per distinct (op, input
shapes) pair, never per event.  Unknown ops count 0.  ``shapes`` are the
recorded positional arguments (``[]`` for a non-array, which counts as a
scalar); formulas are rounded down to integers; a multiply-add counts 2.
Names below drop the leading ``numpy.``.

| op | FLOPs |
| --- | --- |
| `matmul`, `linalg.matmul`, `dot`, `ndarray.dot` | 2*batch*M*N*K for (..., M, K) @ (..., K, N) |
| `dot` / `inner` with a 0-d operand | size of the other operand |
| `dot` with an N-d operand (N > 2) | 2*size(a)*size(b)/K, K = a's last axis |
| `vdot` | 2*size(a) |
| `inner` | 2*size(a)*size(b)/K, K = the shared last axis |
| `vecdot`, `linalg.vecdot` | 2*size(broadcast(a, b)) |
| `outer`, `linalg.outer`, `<ufunc>.outer` | size(a)*size(b) |
| `tensordot`, `linalg.tensordot` | 2*size(a)*size(b)/C, C = product of a's last 2 axes (1) |
| `einsum` | product of all index sizes * (max(1, operands - 1) + 1 if an index is summed) (2) |
| `linalg.solve` (A: n x n, B: n x k) | 2n^3/3 + 2n^2k |
| `linalg.inv` | 2n^3 |
| `linalg.det`, `linalg.slogdet` | 2n^3/3 (LU) |
| `linalg.cholesky` | n^3/3 |
| `linalg.qr` (m x n) | 2mn^2 - 2n^3/3, n = min, m = max (Householder) |
| `linalg.svd` (m x n) | 4m^2n + 8mn^2 + 9n^3, n = min, m = max (Golub-Van Loan, U and V) |
| `linalg.svdvals` | 4mn^2 - 4n^3/3 |
| `linalg.eig` / `linalg.eigvals` | 25n^3 / 10n^3 |
| `linalg.eigh` / `linalg.eigvalsh` | 9n^3 / 4n^3/3 |
| `linalg.lstsq` (A: m x n) | 4mn^2 + 8n^3, n = min, m = max (SVD least squares) |
| `fft.fft`, `fft.ifft` | 5*N*log2(N) per transform, N = last axis |
| `fft.fft2`, `fft.ifft2`, `fft.fftn`, `fft.ifftn` | the same, N = last 2 / all axes |
| `fft.rfft`, `irfft`, `hfft`, `ihfft`, `rfft2`, `irfft2`, `rfftn`, `irfftn` | half of the above |
| arithmetic ufuncs (`add`, `multiply`, `exp`, `maximum`, ...) | one per output element (3) |
| `<arithmetic ufunc>.reduce`, `.accumulate`, `.reduceat` | one per input element |

linalg formulas are per matrix and multiply by the stack size for stacked input.
(1) numpy's default ``axes=2``; an ``axes`` argument is not recorded.
(2) what ``einsum`` runs without ``optimize``: numpy's own cost of that single
contraction (``einsum_path(..., optimize=False)`` prints it plus 1 as its
"Optimized FLOP count").  The subscripts are recorded natively as a string
argument, so this needs ``dtypes``.
(3) inputs broadcast; an ``out`` operand (in-place ``a += b``) is not an input.
Composite ops whose work runs through other captured numpy ops (``outer`` ->
``multiply``, ``tensordot`` -> ``dot``) carry their formula too, on their own
rows; totals count each unit of work once ("innermost wins": an event's FLOPs
count toward a total only when none of its descendants carries FLOPs, see
``FunctionEventAvg.self_flops``).  ``ndarray.sum`` and friends carry none
(their ``add.reduce`` child does).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

Shapes = Sequence[Sequence[int]]

# dtype text of a string argument recorded natively (see numpy_hooks.h OPPROF_NP_STR_TYPE);
# resolved through _native lazily so this module stays importable without the build.
_STRING_DTYPE_PREFIX = "type"

ARITHMETIC_UFUNCS = frozenset(
    """add subtract multiply divide floor_divide remainder fmod divmod power float_power
    negative positive reciprocal square sqrt cbrt absolute fabs exp exp2 expm1 log log2
    log10 log1p logaddexp logaddexp2 sin cos tan arcsin arccos arctan arctan2 sinh cosh
    tanh arcsinh arccosh arctanh hypot deg2rad rad2deg maximum minimum fmax fmin""".split()
)


def _size(shape: Sequence[int]) -> int:
    return math.prod(shape)


def _broadcast(shapes: Shapes) -> list[int]:
    ndim = max((len(s) for s in shapes), default=0)
    out = [1] * ndim
    for s in shapes:
        for i, d in enumerate(s, start=ndim - len(s)):
            if d != 1:
                out[i] = d
    return out


def _matmul(shapes: Shapes) -> int:
    a, b = list(shapes[0]), list(shapes[1])
    if not a or not b:
        return 0
    if len(a) == 1:
        a = [1, *a]
    if len(b) == 1:
        b = [*b, 1]
    m, k, n = a[-2], a[-1], b[-1]
    return 2 * _size(_broadcast([a[:-2], b[:-2]])) * m * n * k


def _dot(shapes: Shapes) -> int:
    a, b = shapes[0], shapes[1]
    if not a or not b:
        return _size(a) * _size(b)
    if len(a) <= 2 and len(b) <= 2:
        return _matmul(shapes)
    return 2 * _size(a) * _size(b) // a[-1]


def _inner(shapes: Shapes) -> int:
    a, b = shapes[0], shapes[1]
    if not a or not b:
        return _size(a) * _size(b)
    return 2 * _size(a) * _size(b) // a[-1]


def _tensordot(shapes: Shapes) -> int:
    a, b = shapes[0], shapes[1]
    contracted = _size(a[-2:])
    return 2 * _size(a) * _size(b) // contracted if contracted else 0


def _outer(shapes: Shapes) -> int:
    return _size(shapes[0]) * _size(shapes[1])


def _vecdot(shapes: Shapes) -> int:
    return 2 * _size(_broadcast(shapes[:2]))


def _einsum_naive(subscripts: str, shapes: Shapes) -> int:
    """numpy's cost of ``einsum`` as one contraction over every index."""
    text = subscripts.replace(" ", "")
    inputs, arrow, output = text.partition("->")
    terms = inputs.split(",")
    if len(terms) != len(shapes):
        raise ValueError(f"einsum {subscripts!r} has {len(terms)} operands, {len(shapes)} shapes")
    sizes: dict[str, int] = {}
    for term, shape in zip(terms, shapes, strict=True):
        letters = term.replace("...", "")
        extra = len(shape) - len(letters)
        if "..." in term:
            head = term.index("...")
            named = list(shape[:head]) + list(shape[head + extra :])
            for i, d in enumerate(shape[head : head + extra]):
                key = f"...{extra - i}"
                sizes[key] = max(sizes.get(key, 1), d)
        elif extra != 0:
            raise ValueError(f"einsum term {term!r} does not fit shape {list(shape)}")
        else:
            named = list(shape)
        for letter, d in zip(letters, named, strict=True):
            sizes[letter] = max(sizes.get(letter, 1), d)
    letters_in = [c for c in inputs if c.isalpha()]
    if arrow:
        out_letters = {c for c in output if c.isalpha()}
    else:
        out_letters = {c for c in letters_in if letters_in.count(c) == 1}
    summed = any(c not in out_letters for c in set(letters_in))
    factor = max(1, len(terms) - 1) + (1 if summed else 0)
    return _size(list(sizes.values())) * factor


def _square(shape: Sequence[int]) -> tuple[int, int]:
    return _size(shape[:-2]), shape[-1]


def _per_matrix(formula: Callable[[int], float]) -> Callable[[Shapes], int]:
    def count(shapes: Shapes) -> int:
        batch, n = _square(shapes[0])
        return batch * int(formula(n))

    return count


def _tall(formula: Callable[[int, int], float]) -> Callable[[Shapes], int]:
    """Formula in (m, n) with m >= n, for a stack of m x n or n x m matrices."""

    def count(shapes: Shapes) -> int:
        a = shapes[0]
        m, n = max(a[-2], a[-1]), min(a[-2], a[-1])
        return _size(a[:-2]) * int(formula(m, n))

    return count


def _solve(shapes: Shapes) -> int:
    batch, n = _square(shapes[0])
    b = shapes[1] if len(shapes) > 1 else []
    k = 1 if len(b) <= 1 else b[-1]
    return batch * (2 * n**3 // 3 + 2 * n * n * k)


def _fft(axes: int | None, scale: float) -> Callable[[Shapes], int]:
    """5·N·log2 N per transform over the last ``axes`` axes (None: all), times ``scale``."""

    def count(shapes: Shapes) -> int:
        shape = shapes[0]
        k = len(shape) if axes is None else min(axes, len(shape))
        n = _size(shape[len(shape) - k :])
        if n <= 1:
            return 0
        return int(scale * 5 * n * math.log2(n) * _size(shape[: len(shape) - k]))

    return count


def _elementwise(shapes: Shapes, nin: int) -> int:
    return _size(_broadcast(shapes[:nin]))


_FORMULAS: dict[str, Callable[[Shapes], int]] = {
    "numpy.matmul": _matmul,
    "numpy.linalg.matmul": _matmul,
    "numpy.dot": _dot,
    "numpy.ndarray.dot": _dot,
    "numpy.vdot": lambda s: 2 * _size(s[0]),
    "numpy.inner": _inner,
    "numpy.vecdot": _vecdot,
    "numpy.linalg.vecdot": _vecdot,
    "numpy.outer": _outer,
    "numpy.linalg.outer": _outer,
    "numpy.tensordot": _tensordot,
    "numpy.linalg.tensordot": _tensordot,
    "numpy.linalg.solve": _solve,
    "numpy.linalg.inv": _per_matrix(lambda n: 2 * n**3),
    "numpy.linalg.det": _per_matrix(lambda n: 2 * n**3 // 3),
    "numpy.linalg.slogdet": _per_matrix(lambda n: 2 * n**3 // 3),
    "numpy.linalg.cholesky": _per_matrix(lambda n: n**3 // 3),
    "numpy.linalg.eig": _per_matrix(lambda n: 25 * n**3),
    "numpy.linalg.eigvals": _per_matrix(lambda n: 10 * n**3),
    "numpy.linalg.eigh": _per_matrix(lambda n: 9 * n**3),
    "numpy.linalg.eigvalsh": _per_matrix(lambda n: 4 * n**3 // 3),
    "numpy.linalg.qr": _tall(lambda m, n: 2 * m * n * n - 2 * n**3 // 3),
    "numpy.linalg.svd": _tall(lambda m, n: 4 * m * m * n + 8 * m * n * n + 9 * n**3),
    "numpy.linalg.svdvals": _tall(lambda m, n: 4 * m * n * n - 4 * n**3 // 3),
    "numpy.linalg.lstsq": _tall(lambda m, n: 4 * m * n * n + 8 * n**3),
    "numpy.fft.fft": _fft(1, 1.0),
    "numpy.fft.ifft": _fft(1, 1.0),
    "numpy.fft.fft2": _fft(2, 1.0),
    "numpy.fft.ifft2": _fft(2, 1.0),
    "numpy.fft.fftn": _fft(None, 1.0),
    "numpy.fft.ifftn": _fft(None, 1.0),
    "numpy.fft.rfft": _fft(1, 0.5),
    "numpy.fft.irfft": _fft(1, 0.5),
    "numpy.fft.hfft": _fft(1, 0.5),
    "numpy.fft.ihfft": _fft(1, 0.5),
    "numpy.fft.rfft2": _fft(2, 0.5),
    "numpy.fft.irfft2": _fft(2, 0.5),
    "numpy.fft.rfftn": _fft(None, 0.5),
    "numpy.fft.irfftn": _fft(None, 0.5),
}

_UNARY = frozenset(
    """negative positive reciprocal square sqrt cbrt absolute fabs exp exp2 expm1 log log2
    log10 log1p sin cos tan arcsin arccos arctan sinh cosh tanh arcsinh arccosh arctanh
    deg2rad rad2deg""".split()
)


def _ufunc_formula(name: str) -> Callable[[Shapes], int] | None:
    """Formula for ``numpy.<ufunc>`` and its methods, None if not arithmetic."""
    parts = name.split(".")
    if len(parts) not in (2, 3) or parts[0] != "numpy" or parts[1] not in ARITHMETIC_UFUNCS:
        return None
    if len(parts) == 2:
        nin = 1 if parts[1] in _UNARY else 2
        return lambda shapes: _elementwise(shapes, nin)
    if parts[2] in ("reduce", "accumulate", "reduceat"):
        return lambda shapes: _size(shapes[0])
    if parts[2] == "outer":
        return _outer
    return None


def _recorded_string(dtype: str) -> str | None:
    if not dtype.startswith(_STRING_DTYPE_PREFIX):
        return None
    from pytest_opprof import _native

    return _native.numpy_string(dtype)


def _einsum(shapes: Shapes, dtypes: Sequence[str]) -> int:
    strings = [_recorded_string(d) for d in dtypes]
    if not strings or strings[0] is None:
        return 0
    return _einsum_naive(strings[0], shapes[1:])


def has_formula(name: str) -> bool:
    """False when ``flops_for(name, ...)`` is 0 whatever the shapes (no formula for the op)."""
    return (
        name.startswith("aten::")
        or name == "numpy.einsum"
        or name in _FORMULAS
        or _ufunc_formula(name) is not None
    )


def flops_for(name: str, shapes: Shapes, dtypes: Sequence[str] = ()) -> int:
    """FLOPs of one call of ``name`` on arguments of ``shapes`` (0 if unknown).

    ``dtypes`` are the recorded dtype texts, one per shape; einsum needs them
    (its subscripts are recorded as a string argument)."""
    try:
        if name.startswith("aten::"):
            # torch ops: a separate table, torch.utils.flop_counter's formulas.
            from pytest_opprof.flops.aten import aten_flops

            return max(0, aten_flops(name, shapes, dtypes))
        if name == "numpy.einsum":
            return int(_einsum(shapes, dtypes))
        formula = _FORMULAS.get(name) or _ufunc_formula(name)
        if formula is None:
            return 0
        return max(0, int(formula(shapes)))
    except (ValueError, IndexError, TypeError, ZeroDivisionError):
        return 0


def einsum_flops(subscripts: str, shapes: Shapes) -> int:
    """FLOPs of ``einsum(subscripts, *arrays of shapes)`` without ``optimize``."""
    return _einsum_naive(subscripts, shapes)
