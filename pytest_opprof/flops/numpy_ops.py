"""FLOP counts of numpy ops from their names and input shapes.

The numpy table of ``flops_for`` (``flops/__init__.py``).  ``shapes`` are
each the shape numpy works on (``[]`` for a scalar, the shape ``np.asarray``
gives a list).  Python ints are recorded by value in the dtype text, torch's way
(``"Scalar=2048"``, ``"ScalarList=[0, 1]"``): the options below read them.
Formulas are rounded down to integers; a multiply-add counts 2.
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
| `linalg.svd` (m x n) | 4m^2n + 8mn^2 + 9n^3, n = min, m = max (Golub-Van Loan, U and V) (5) |
| `linalg.svdvals` | 4mn^2 - 4n^3/3 |
| `linalg.eig` / `linalg.eigvals` | 25n^3 / 10n^3 |
| `linalg.eigh` / `linalg.eigvalsh` | 9n^3 / 4n^3/3 |
| `linalg.lstsq` (A: m x n) | 4mn^2 + 8n^3, n = min, m = max (SVD least squares) |
| `fft.fft`, `fft.ifft` | 5*N*log2(N) per transform, N = `n` or the `axis` length (last) |
| `fft.fft2`, `fft.ifft2`, `fft.fftn`, `fft.ifftn` | the same, N = prod(`s` or `axes` lengths) |
| `fft.rfft`, `irfft`, `hfft`, `ihfft`, `rfft2`, `irfft2`, `rfftn`, `irfftn` | half that (7) |
| arithmetic ufuncs (`add`, `multiply`, `exp`, `maximum`, ...) | one per output element (3) |
| `<arithmetic ufunc>.reduce`, `.accumulate`, `.reduceat` | one per input element |
| `<arithmetic ufunc>.at(a, indices, b)` | size(indices) * prod(a.shape[1:]) (4) |
| `convolve`, `correlate` (n >= m) | 2 * products: n*m (full), m(n-m+1) (valid) (6) |

linalg formulas are per matrix and multiply by the stack size for stacked input.
(1) numpy's default ``axes=2``; an ``axes`` argument is not recorded.
(2) what ``einsum`` runs without ``optimize``: numpy's own cost of that single
contraction (``einsum_path(..., optimize=False)`` prints it plus 1 as its
"Optimized FLOP count").  The subscripts are recorded natively as a string
argument, or as int sublists (``einsum(a, [0, 1], b, [1, 2], [0, 2])``), so
this needs ``dtypes``.
(3) inputs broadcast; an ``out`` operand (in-place ``a += b``) is not an input.
Composite ops whose work runs through other captured numpy ops (``outer`` ->
``multiply``, ``tensordot`` -> ``dot``) carry their formula too, on their own
rows; totals count each unit of work once ("innermost wins": an event's FLOPs
count toward a total only when none of its descendants carries FLOPs, see
``FunctionEventAvg.self_flops``).  ``ndarray.sum`` and friends carry none
(their ``add.reduce`` child does).
(4) a tuple of index arrays is recorded like a 2-d index list, so it counts
as a fancy index on the first axis.
(5) ``full_matrices=False``: 14mn^2 + 8n^3; ``compute_uv=False``: as ``svdvals``.
(6) ``same``: the full count less the products of the trimmed ends.  The
default ``axes`` of ``fft2`` are the last 2, of ``fftn`` all (or as many as ``s``).
(7) ``irfft`` and ``hfft`` transform numpy's output length, ``n`` or 2(m-1).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from pytest_opprof.flops.aten import concrete
from pytest_opprof.flops.linalg import Shapes, option, per_matrix, size, solve, svd, tall

# dtype text of a string argument recorded natively (see numpy_hooks.h OPPROF_NP_STR_TYPE);
# resolved through _native lazily so this module stays importable without the build.
_STRING_DTYPE_PREFIX = "type"

ARITHMETIC_UFUNCS = frozenset(
    """add subtract multiply divide floor_divide remainder fmod divmod power float_power
    negative positive reciprocal square sqrt cbrt absolute fabs exp exp2 expm1 log log2
    log10 log1p logaddexp logaddexp2 sin cos tan arcsin arccos arctan arctan2 sinh cosh
    tanh arcsinh arccosh arctanh hypot deg2rad rad2deg maximum minimum fmax fmin""".split()
)


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
    return 2 * size(_broadcast([a[:-2], b[:-2]])) * m * n * k


def _dot(shapes: Shapes) -> int:
    a, b = shapes[0], shapes[1]
    if not a or not b:
        return size(a) * size(b)
    if len(a) <= 2 and len(b) <= 2:
        return _matmul(shapes)
    return 2 * size(a) * size(b) // a[-1]


def _inner(shapes: Shapes) -> int:
    a, b = shapes[0], shapes[1]
    if not a or not b:
        return size(a) * size(b)
    return 2 * size(a) * size(b) // a[-1]


def _tensordot(shapes: Shapes) -> int:
    a, b = shapes[0], shapes[1]
    contracted = size(a[-2:])
    return 2 * size(a) * size(b) // contracted if contracted else 0


def _outer(shapes: Shapes) -> int:
    return size(shapes[0]) * size(shapes[1])


def _vecdot(shapes: Shapes) -> int:
    return 2 * size(_broadcast(shapes[:2]))


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
    return size(list(sizes.values())) * factor


def _ints(value: object) -> list[int]:
    items: list[object] = value if isinstance(value, list) else [value]
    ints = [v for v in items if isinstance(v, int)]
    if len(ints) != len(items):
        raise TypeError(f"not ints: {value!r}")
    return ints


def _fft1(scale: float, hermitian_out: bool = False) -> Callable[[Shapes, Sequence[str]], int]:
    """``fft(a, n=None, axis=-1, ...)``: 5·N·log2 N per transform, times ``scale``;
    ``hermitian_out`` (irfft, hfft): N defaults to numpy's output length 2(m-1)."""

    def count(shapes: Shapes, dtypes: Sequence[str]) -> int:
        shape = list(shapes[0])
        (axis,) = _ints(option(dtypes, 2, -1))
        length = shape[axis]
        (n,) = _ints(option(dtypes, 1, 2 * (length - 1) if hermitian_out else length))
        batch = size(shape) // length if length else 0
        return int(scale * 5 * n * math.log2(n) * batch) if n > 1 else 0

    return count


def _fftn(default_axes: int | None, scale: float) -> Callable[[Shapes, Sequence[str]], int]:
    """``fftn(a, s=None, axes=None, ...)``: as ``_fft1`` over ``axes`` (default: the last
    ``default_axes``, None: all, or as many as ``s`` has)."""

    def count(shapes: Shapes, dtypes: Sequence[str]) -> int:
        shape = list(shapes[0])
        s = option(dtypes, 1, None)
        axes = option(dtypes, 2, None)
        if axes is not None:
            ax = _ints(axes)
        else:
            k = len(_ints(s)) if s is not None else default_axes
            k = len(shape) if k is None else min(k, len(shape))
            ax = list(range(len(shape) - k, len(shape)))
        lengths = _ints(s) if s is not None else [shape[a] for a in ax]
        n = size(lengths)
        over = size([shape[a] for a in ax])
        if n <= 1 or over == 0:
            return 0
        return int(scale * 5 * n * math.log2(n) * (size(shape) // over))

    return count


def _correlate(default_mode: str) -> Callable[[Shapes, Sequence[str]], int]:
    """``convolve(a, v, mode)`` / ``correlate``: 2 per product of the mode's output."""

    def count(shapes: Shapes, dtypes: Sequence[str]) -> int:
        mode = _recorded_string(dtypes[2]) if len(dtypes) > 2 and dtypes[2] else default_mode
        if mode is None:
            raise ValueError(f"convolve: mode not recorded ({dtypes[2]!r})")
        n, m = size(shapes[0]), size(shapes[1])
        n, m = max(n, m), min(n, m)
        if m == 0:
            return 0
        if mode == "full":
            products = n * m
        elif mode == "valid":
            products = m * (n - m + 1)
        elif mode == "same":
            left = (m - 1) // 2
            right = m - 1 - left
            products = n * m - left * (left + 1) // 2 - right * (right + 1) // 2
        else:
            raise ValueError(f"convolve: mode {mode!r}")
        return 2 * products

    return count


_OPTION_FORMULAS: dict[str, Callable[[Shapes, Sequence[str]], int]] = {
    "numpy.linalg.svd": svd,
    "numpy.convolve": _correlate("full"),
    "numpy.correlate": _correlate("valid"),
    **{f"numpy.fft.{op}": _fft1(1.0) for op in ("fft", "ifft")},
    **{f"numpy.fft.{op}": _fft1(0.5) for op in ("rfft", "ihfft")},
    **{f"numpy.fft.{op}": _fft1(0.5, hermitian_out=True) for op in ("irfft", "hfft")},
    **{f"numpy.fft.{op}": _fftn(2, 1.0) for op in ("fft2", "ifft2")},
    **{f"numpy.fft.{op}": _fftn(None, 1.0) for op in ("fftn", "ifftn")},
    **{f"numpy.fft.{op}": _fftn(2, 0.5) for op in ("rfft2", "irfft2")},
    **{f"numpy.fft.{op}": _fftn(None, 0.5) for op in ("rfftn", "irfftn")},
}


def _elementwise(shapes: Shapes, nin: int) -> int:
    return size(_broadcast(shapes[:nin]))


_FORMULAS: dict[str, Callable[[Shapes], int]] = {
    "numpy.matmul": _matmul,
    "numpy.linalg.matmul": _matmul,
    "numpy.dot": _dot,
    "numpy.ndarray.dot": _dot,
    "numpy.vdot": lambda s: 2 * size(s[0]),
    "numpy.inner": _inner,
    "numpy.vecdot": _vecdot,
    "numpy.linalg.vecdot": _vecdot,
    "numpy.outer": _outer,
    "numpy.linalg.outer": _outer,
    "numpy.tensordot": _tensordot,
    "numpy.linalg.tensordot": _tensordot,
    "numpy.linalg.solve": solve,
    "numpy.linalg.inv": per_matrix(lambda n: 2 * n**3),
    "numpy.linalg.det": per_matrix(lambda n: 2 * n**3 // 3),
    "numpy.linalg.slogdet": per_matrix(lambda n: 2 * n**3 // 3),
    "numpy.linalg.cholesky": per_matrix(lambda n: n**3 // 3),
    "numpy.linalg.eig": per_matrix(lambda n: 25 * n**3),
    "numpy.linalg.eigvals": per_matrix(lambda n: 10 * n**3),
    "numpy.linalg.eigh": per_matrix(lambda n: 9 * n**3),
    "numpy.linalg.eigvalsh": per_matrix(lambda n: 4 * n**3 // 3),
    "numpy.linalg.qr": tall(lambda m, n: 2 * m * n * n - 2 * n**3 // 3),
    "numpy.linalg.svdvals": tall(lambda m, n: 4 * m * n * n - 4 * n**3 // 3),
    "numpy.linalg.lstsq": tall(lambda m, n: 4 * m * n * n + 8 * n**3),
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
        return lambda shapes: size(shapes[0])
    if parts[2] == "outer":
        return _outer
    if parts[2] == "at":
        return lambda shapes: size(shapes[1]) * size(shapes[0][1:])
    return None


def _recorded_string(dtype: str) -> str | None:
    if not dtype.startswith(_STRING_DTYPE_PREFIX):
        return None
    from pytest_opprof import _native

    return _native.numpy_string(dtype)


_SUBLIST_LETTERS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"


def _einsum(shapes: Shapes, dtypes: Sequence[str]) -> int:
    if not dtypes:
        return 0
    subscripts = _recorded_string(dtypes[0])
    if subscripts is not None:
        return _einsum_naive(subscripts, shapes[1:])
    # einsum(op0, sublist0, op1, sublist1, ..., [sublist_out])
    terms = ["".join(_SUBLIST_LETTERS[i] for i in _ints(concrete(d))) for d in dtypes[1::2]]
    operands = shapes[0::2][: len(terms)]
    text = ",".join(terms[: len(operands)])
    if len(shapes) % 2:
        text += "->" + "".join(_SUBLIST_LETTERS[i] for i in _ints(concrete(dtypes[-1])))
    return _einsum_naive(text, operands)


def has_numpy_formula(name: str) -> bool:
    """False when ``numpy_flops(name, ...)`` is 0 whatever the shapes."""
    return (
        name == "numpy.einsum"
        or name in _FORMULAS
        or name in _OPTION_FORMULAS
        or _ufunc_formula(name) is not None
    )


def numpy_flops(name: str, shapes: Shapes, dtypes: Sequence[str]) -> int:
    """FLOPs of one call of the numpy op ``name`` (0 without a formula); raises
    (ValueError, IndexError, TypeError, ZeroDivisionError) when a needed argument was
    not recorded, which ``flops_for`` counts as 0."""
    option_formula = _OPTION_FORMULAS.get(name)
    if option_formula is not None:
        return int(option_formula(shapes, dtypes))
    if name == "numpy.einsum":
        return int(_einsum(shapes, dtypes))
    formula = _FORMULAS.get(name) or _ufunc_formula(name)
    if formula is None:
        return 0
    return int(formula(shapes))


def einsum_flops(subscripts: str, shapes: Shapes) -> int:
    """FLOPs of ``einsum(subscripts, *arrays of shapes)`` without ``optimize``."""
    return _einsum_naive(subscripts, shapes)
