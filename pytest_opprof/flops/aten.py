"""FLOP counts of torch ops (aten names), the formulas of ``torch.utils.flop_counter``.

:func:`pytest_opprof.flops.flops_for` sends ``aten::`` names here.  Counts equal
``FlopCounterMode``'s for the same calls: a multiply-add counts 2, bias and
softmax are not counted.

| op | FLOPs |
| --- | --- |
| `aten::mm` (M x K, K x N), `aten::addmm` (its two matrices) | 2*M*N*K |
| `aten::bmm` (B x M x K, B x K x N), `aten::baddbmm` | 2*B*M*N*K |
| `aten::_scaled_mm` (fp8: A, B, scales) | as `aten::mm` of A and B |
| `aten::convolution` (x: N x C x S..., w: Co x Cw x K...) | 2*N*Co*Cw*prod(K)*prod(output S) (1) |
| `aten::convolution_backward` (grad_out, x, w, ...) | grad_input and grad_weight as convs (3) |
| `aten::_scaled_dot_product_{efficient,flash,cudnn}_attention` | QK^T and PV as two bmm |
| `aten::_{efficient,flash}_attention_forward` | the same |
| `aten::_scaled_dot_product_flash_attention_for_cpu` | the same (2) |
| the `_backward` of each attention op above | five bmm: scores again, dP, dV, dQ, dK |

Only the op ``FlopCounterMode`` intercepts carries a count, so nested events
never count twice: ``aten::conv2d`` -> ``aten::convolution`` (counted) ->
``aten::_convolution`` -> backend kernels; ``aten::matmul`` / ``aten::linear``
count nothing themselves, their ``aten::mm`` / ``aten::addmm`` child does.
A convolution's spatial output size comes from its concrete arguments (stride,
padding, dilation, transposed), recorded as dtype texts ``"ScalarList=[2, 2]"``
and ``"Scalar=False"`` by the torch source (:data:`CONCRETE_ARGUMENT_OPS`).

(1) transposed: prod(input S) instead of the output's.
(2) ``FlopCounterMode`` has no formula for the CPU flash kernel (it counts 0
there); we count the attention formula torch uses for the other kernels, and
its backward formula for the CPU kernel's backward.
(3) grad_input (if ``output_mask[0]``) is the transposed conv of grad_out and w,
grad_weight (if ``output_mask[1]``) the conv of x and grad_out; ``transposed`` and
``output_mask`` are recorded concrete arguments; the gradients' shapes are the
input's and the weight's.  Nested (variable-length)
attention inputs count 0: their lengths are tensor values, not shapes.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence

Shapes = Sequence[Sequence[int]]

# Ops whose concrete (non-tensor) arguments the torch source records.
CONCRETE_ARGUMENT_OPS = frozenset({"aten::convolution", "aten::convolution_backward"})
CONCRETE_PREFIXES = ("ScalarList=", "Scalar=")


def _mm(a: Sequence[int], b: Sequence[int]) -> int:
    m, k = a
    k2, n = b
    if k != k2:
        raise ValueError(f"mm: inner dimensions differ ({k}, {k2})")
    return 2 * m * n * k


def _bmm(a: Sequence[int], b: Sequence[int]) -> int:
    batch, m, k = a
    batch2, k2, n = b
    if batch != batch2 or k != k2:
        raise ValueError(f"bmm: shapes {list(a)} and {list(b)} do not match")
    return 2 * batch * m * n * k


def concrete(dtype: str) -> object:
    """The value a concrete-argument dtype text stands for (``"ScalarList=[2, 2]"`` -> [2, 2])."""
    for prefix in CONCRETE_PREFIXES:
        if dtype.startswith(prefix):
            text = dtype[len(prefix) :]
            if text in ("True", "False"):
                return text == "True"
            # torch writes a bool list the Python way ("[True, False, True]").
            return json.loads(text.replace("True", "true").replace("False", "false"))
    raise ValueError(f"not a recorded concrete argument: {dtype!r}")


def _conv(shapes: Shapes, dtypes: Sequence[str]) -> int:
    x, w = list(shapes[0]), list(shapes[1])
    stride, padding, dilation = (concrete(dtypes[i]) for i in (3, 4, 5))
    transposed = bool(concrete(dtypes[6]))
    if not (isinstance(stride, list) and isinstance(padding, list) and isinstance(dilation, list)):
        raise TypeError("convolution: stride, padding and dilation must be recorded lists")
    if transposed:
        spatial = x[2:]
    else:
        spatial = [
            (size + 2 * p - d * (kernel - 1) - 1) // s + 1
            for size, kernel, s, p, d in zip(x[2:], w[2:], stride, padding, dilation, strict=True)
        ]
    c_out, c_in, *kernel = w
    return math.prod(spatial) * math.prod(kernel) * x[0] * c_out * c_in * 2


def _conv_count(x: Sequence[int], w: Sequence[int], out: Sequence[int], transposed: bool) -> int:
    """torch's ``conv_flop_count``: 2 * N * Co * Cw * prod(K) * prod(spatial)."""
    spatial = (x if transposed else out)[2:]
    c_out, c_in, *kernel = w
    return math.prod(spatial) * math.prod(kernel) * x[0] * c_out * c_in * 2


def _conv_backward(shapes: Shapes, dtypes: Sequence[str]) -> int:
    grad_out, x, w = list(shapes[0]), list(shapes[1]), list(shapes[2])
    transposed = bool(concrete(dtypes[7]))
    mask = concrete(dtypes[10])
    if not isinstance(mask, list) or len(mask) < 2:
        raise TypeError("convolution_backward: output_mask must be a recorded list")

    def t(shape: list[int]) -> list[int]:
        return [shape[1], shape[0], *shape[2:]]

    flops = 0
    if mask[0]:  # grad_input has the input's shape
        flops += _conv_count(grad_out, w, x, not transposed)
    if mask[1]:  # grad_weight has the weight's shape
        if transposed:
            flops += _conv_count(t(grad_out), t(x), t(w), False)
        else:
            flops += _conv_count(t(x), t(grad_out), t(w), False)
    return flops


def _attention_shapes(
    q: Sequence[int], k: Sequence[int], v: Sequence[int]
) -> tuple[int, int, int, int, int, int]:
    b, h_q, s_q, d_q = q
    b2, h_kv, s_k, d_k = k
    b3, h_v, s_v, d_v = v
    if not (b == b2 == b3 and h_kv == h_v and d_q == d_k and s_k == s_v) or h_q % h_kv:
        raise ValueError("sdpa: query/key/value shapes do not match")
    return b, h_q, s_q, d_q, s_k, d_v


def _sdpa(shapes: Shapes, dtypes: Sequence[str]) -> int:
    b, h_q, s_q, d_q, s_k, d_v = _attention_shapes(shapes[0], shapes[1], shapes[2])
    return _bmm((b * h_q, s_q, d_q), (b * h_q, d_q, s_k)) + _bmm(
        (b * h_q, s_q, s_k), (b * h_q, s_k, d_v)
    )


def _sdpa_backward(shapes: Shapes, dtypes: Sequence[str]) -> int:
    grad_out = list(shapes[0])
    b, h_q, s_q, d_q, s_k, d_v = _attention_shapes(shapes[1], shapes[2], shapes[3])
    if grad_out != [b, h_q, s_q, d_v]:
        raise ValueError("sdpa backward: grad_out does not match query and value")
    bh = b * h_q
    return (
        _bmm((bh, s_q, d_q), (bh, d_q, s_k))  # scores recomputed
        + _bmm((bh, s_q, d_v), (bh, d_v, s_k))  # grad of the scores
        + _bmm((bh, s_k, s_q), (bh, s_q, d_v))  # grad_value
        + _bmm((bh, s_q, s_k), (bh, s_k, d_q))  # grad_query
        + _bmm((bh, d_q, s_q), (bh, s_q, s_k))  # grad_key
    )


def _dense(
    index: int, formula: Callable[[Shapes, Sequence[str]], int]
) -> Callable[[Shapes, Sequence[str]], int]:
    """``formula``, for a kernel whose argument ``index`` (sequence offsets) must be absent."""

    def count(shapes: Shapes, dtypes: Sequence[str]) -> int:
        if len(shapes) > index and len(shapes[index]) > 0:
            raise ValueError("nested attention: sequence lengths are not recorded")
        return formula(shapes, dtypes)

    return count


_FORMULAS: dict[str, Callable[[Shapes, Sequence[str]], int]] = {
    "aten::mm": lambda s, d: _mm(s[0], s[1]),
    "aten::addmm": lambda s, d: _mm(s[1], s[2]),
    "aten::bmm": lambda s, d: _bmm(s[0], s[1]),
    "aten::baddbmm": lambda s, d: _bmm(s[1], s[2]),
    "aten::_scaled_mm": lambda s, d: _mm(s[0], s[1]),
    "aten::convolution": _conv,
    "aten::convolution_backward": _conv_backward,
    "aten::_scaled_dot_product_efficient_attention": _sdpa,
    "aten::_scaled_dot_product_flash_attention": _sdpa,
    "aten::_scaled_dot_product_cudnn_attention": _sdpa,
    "aten::_scaled_dot_product_flash_attention_for_cpu": _sdpa,
    "aten::_flash_attention_forward": _dense(3, _sdpa),
    "aten::_efficient_attention_forward": _dense(4, _sdpa),
    "aten::_scaled_dot_product_efficient_attention_backward": _sdpa_backward,
    "aten::_scaled_dot_product_flash_attention_backward": _sdpa_backward,
    "aten::_scaled_dot_product_cudnn_attention_backward": _sdpa_backward,
    "aten::_scaled_dot_product_flash_attention_for_cpu_backward": _sdpa_backward,
    "aten::_flash_attention_backward": _dense(6, _sdpa_backward),
    "aten::_efficient_attention_backward": _dense(6, _sdpa_backward),
}


def aten_flops(name: str, shapes: Shapes, dtypes: Sequence[str]) -> int:
    """FLOPs of one call of aten op ``name`` (0 for ops without a formula).

    Raises ValueError / IndexError / TypeError on shapes that do not fit;
    ``flops_for`` turns those into 0.
    """
    formula = _FORMULAS.get(name)
    return 0 if formula is None else int(formula(shapes, dtypes))
