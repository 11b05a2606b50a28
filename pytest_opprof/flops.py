"""FLOP counts from op names and input shapes, computed at aggregation time.

``flops_for(name, shapes)`` is called once per distinct (op, input shapes)
pair, never per event.  Unknown ops count 0.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

Shapes = Sequence[Sequence[int]]


def _matmul(shapes: Shapes) -> int:
    if len(shapes) < 2 or not shapes[0] or not shapes[1]:
        return 0
    a, b = list(shapes[0]), list(shapes[1])
    if len(a) == 1:
        a = [1, *a]
    if len(b) == 1:
        b = [*b, 1]
    m, k = a[-2], a[-1]
    n = b[-1]
    batch = math.prod(a[:-2]) if len(a) > 2 else 1
    batch = max(batch, math.prod(b[:-2]) if len(b) > 2 else 1)
    return 2 * batch * m * n * k


_FORMULAS = {
    "numpy.matmul": _matmul,
}


def flops_for(name: str, shapes: Shapes) -> int:
    """FLOPs of one call of ``name`` on arguments of ``shapes`` (0 if unknown)."""
    formula = _FORMULAS.get(name)
    if formula is None:
        return 0
    try:
        return int(formula(shapes))
    except (ValueError, IndexError, TypeError):
        return 0
