"""Dense linear algebra counts numpy's ``linalg`` and scipy's LAPACK wrappers share.

Per matrix, times the stack size for stacked input; ``option`` reads a recorded
non-array argument (``"Scalar=1"``) as numpy's and scipy's formulas both need.
Formulas are rounded down to integers; a multiply-add counts 2.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from pytest_opprof.flops.aten import concrete

Shapes = Sequence[Sequence[int]]


def size(shape: Sequence[int]) -> int:
    return math.prod(shape)


def square(shape: Sequence[int]) -> tuple[int, int]:
    return size(shape[:-2]), shape[-1]


def per_matrix(formula: Callable[[int], float]) -> Callable[[Shapes], int]:
    def count(shapes: Shapes) -> int:
        batch, n = square(shapes[0])
        return batch * int(formula(n))

    return count


def tall(formula: Callable[[int, int], float]) -> Callable[[Shapes], int]:
    """Formula in (m, n) with m >= n, for a stack of m x n or n x m matrices."""

    def count(shapes: Shapes) -> int:
        a = shapes[0]
        m, n = max(a[-2], a[-1]), min(a[-2], a[-1])
        return size(a[:-2]) * int(formula(m, n))

    return count


def solve(shapes: Shapes) -> int:
    batch, n = square(shapes[0])
    b = shapes[1] if len(shapes) > 1 else []
    k = 1 if len(b) <= 1 else b[-1]
    return batch * (2 * n**3 // 3 + 2 * n * n * k)


def option(dtypes: Sequence[str], index: int, default: object) -> object:
    """The recorded value of argument ``index`` (``default`` when absent or None)."""
    if index >= len(dtypes) or dtypes[index] == "":
        return default
    return concrete(dtypes[index])  # ValueError for one that is not a recorded int


def svd(shapes: Shapes, dtypes: Sequence[str]) -> int:
    """``svd(a, full_matrices=True, compute_uv=True)``: Golub-Van Loan's counts."""
    a = shapes[0]
    m, n = max(a[-2], a[-1]), min(a[-2], a[-1])
    if not option(dtypes, 2, True):
        per = 4 * m * n * n - 4 * n**3 // 3
    elif not option(dtypes, 1, True):
        per = 14 * m * n * n + 8 * n**3
    else:
        per = 4 * m * m * n + 8 * m * n * n + 9 * n**3
    return size(a[:-2]) * per
