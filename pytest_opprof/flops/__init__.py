"""FLOP formulas from op names and input shapes: numpy ops, aten (torch) ops, scipy's LAPACK.

:func:`flops_for` sends each name to its table (``numpy_ops.py``, ``aten.py``,
``lapack.py``; the dense linear algebra they share is ``linalg.py``).  It is
called once per distinct (op, input shapes) pair, never per event.  Unknown ops
count 0.  ``shapes`` are the recorded arguments in positional order, keyword
arguments at their parameter's index; ``None`` where there is none (an absent
option, ``None``, or an operand whose shape was not worked out: dtype
``"unknown"``), and a formula that needs such a shape counts 0, never a guess.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import NoReturn, overload

from pytest_opprof.flops.numpy_ops import has_numpy_formula, numpy_flops

RecordedShapes = Sequence[Sequence[int] | None]

_SCIPY_LINALG = ("scipy.linalg.lapack.", "scipy.linalg.blas.", "scipy.linalg._batched_linalg.")


class _UnknownShape(Sequence[int]):
    """What a formula gets for a recorded ``None``: any use raises ValueError,
    so ``flops_for`` counts 0 rather than reading it as a scalar."""

    def _unknown(self) -> NoReturn:
        raise ValueError("this argument's shape is unknown")

    @overload
    def __getitem__(self, i: int) -> int: ...
    @overload
    def __getitem__(self, i: slice) -> Sequence[int]: ...
    def __getitem__(self, i: int | slice) -> int | Sequence[int]:
        self._unknown()

    def __len__(self) -> int:
        self._unknown()

    def __iter__(self) -> Iterator[int]:
        self._unknown()

    def __bool__(self) -> bool:
        self._unknown()


_UNKNOWN = _UnknownShape()


def has_formula(name: str) -> bool:
    """False when ``flops_for(name, ...)`` is 0 whatever the shapes (no formula for the op)."""
    if name.startswith(_SCIPY_LINALG):
        from pytest_opprof.flops.lapack import has_formula as lapack_has_formula

        return lapack_has_formula(name)
    return name.startswith("aten::") or has_numpy_formula(name)


def flops_for(name: str, recorded: RecordedShapes, dtypes: Sequence[str] = ()) -> int:
    """FLOPs of one call of ``name`` on arguments of ``recorded`` shapes (0 if unknown).

    ``dtypes`` are the recorded dtype texts, one per shape; einsum and the ops
    with options read them (subscripts, ``n=``, ``axis=``, ``compute_uv=``)."""
    shapes = [_UNKNOWN if s is None else s for s in recorded]
    try:
        if name.startswith("aten::"):
            # torch ops: a separate table, torch.utils.flop_counter's formulas.
            from pytest_opprof.flops.aten import aten_flops

            return max(0, aten_flops(name, shapes, dtypes))
        if name.startswith(_SCIPY_LINALG):
            # scipy's LAPACK and BLAS wrappers (the scipy source): flops/lapack.py.
            from pytest_opprof.flops.lapack import lapack_flops

            return max(0, lapack_flops(name, shapes, dtypes))
        return max(0, numpy_flops(name, shapes, dtypes))
    except (ValueError, IndexError, TypeError, ZeroDivisionError):
        return 0
