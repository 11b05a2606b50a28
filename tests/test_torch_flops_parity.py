"""torch FLOPs equal ``torch.utils.flop_counter.FlopCounterMode``'s, op for op, forward and
backward, and an op that calls itself is one op, as in torch.profiler."""

from __future__ import annotations

from collections.abc import Callable

import pytest

torch = pytest.importorskip("torch")  # the optional extra; .ci/run installs it

import torch.nn.functional as F  # noqa: E402
from torch.utils.flop_counter import FlopCounterMode  # noqa: E402

import pytest_opprof as opprof  # noqa: E402


def _leaf(*shape: int) -> torch.Tensor:
    return torch.randn(*shape, requires_grad=True)


# name -> a forward pass over fresh leaf tensors that require grad
FORWARD: dict[str, Callable[[], torch.Tensor]] = {
    "mm": lambda: torch.mm(_leaf(6, 5), _leaf(5, 4)),
    "addmm": lambda: torch.addmm(_leaf(6, 4), _leaf(6, 5), _leaf(5, 4)),
    "bmm": lambda: torch.bmm(_leaf(3, 5, 7), _leaf(3, 7, 4)),
    "baddbmm": lambda: torch.baddbmm(_leaf(3, 5, 4), _leaf(3, 5, 7), _leaf(3, 7, 4)),
    "linear": lambda: F.linear(_leaf(5, 7), _leaf(3, 7), _leaf(3)),
    "matmul_3d": lambda: _leaf(2, 5, 7) @ _leaf(7, 3),
    "conv2d": lambda: F.conv2d(_leaf(2, 3, 9, 9), _leaf(4, 3, 3, 3), stride=2, padding=1),
    "conv2d_no_input_grad": lambda: F.conv2d(torch.randn(2, 3, 8, 8), _leaf(4, 3, 3, 3)),
    "conv2d_dilated": lambda: F.conv2d(
        _leaf(1, 2, 11, 10), _leaf(6, 2, 3, 2), padding=(2, 1), dilation=(2, 3)
    ),
    "conv1d_groups": lambda: F.conv1d(_leaf(2, 4, 20), _leaf(6, 2, 5), groups=2),
    "conv3d": lambda: F.conv3d(_leaf(1, 2, 5, 6, 7), _leaf(3, 2, 2, 3, 2)),
    "conv_transpose2d": lambda: F.conv_transpose2d(_leaf(2, 3, 5, 5), _leaf(3, 4, 3, 3), stride=2),
    # a value head size unlike the query's: the math path, made of bmm both ways
    "sdpa_math": lambda: F.scaled_dot_product_attention(
        _leaf(2, 4, 16, 8), _leaf(2, 4, 12, 8), _leaf(2, 4, 12, 6)
    ),
}


def _torch_counts(counter: FlopCounterMode) -> dict[str, int]:
    counts = counter.get_flop_counts().get("Global", {})
    return {str(op).replace("aten.", "aten::"): int(n) for op, n in counts.items() if n}


def _our_counts(prof: opprof.profile, names: set[str]) -> dict[str, int]:
    return {r.key: int(r.flops) for r in prof.key_averages() if r.key in names or r.self_flops}


def _compare(run: Callable[[], object]) -> tuple[dict[str, int], dict[str, int], int, int]:
    with FlopCounterMode(display=False) as counter:
        run()
    theirs = _torch_counts(counter)
    with opprof.profile(capture=["torch"]) as prof:
        run()
    ours = _our_counts(prof, set(theirs))
    return theirs, ours, counter.get_total_flops(), sum(r.self_flops for r in prof.key_averages())


@pytest.mark.parametrize("case", sorted(FORWARD))
def test_forward_flops_equal_flop_counter_mode_op_for_op(case: str) -> None:
    FORWARD[case]()  # warm: first calls may take other kernels
    theirs, ours, total, our_total = _compare(FORWARD[case])
    assert theirs and ours == theirs
    assert our_total == total


@pytest.mark.parametrize("case", sorted(FORWARD))
def test_backward_flops_equal_flop_counter_mode_op_for_op(case: str) -> None:
    FORWARD[case]().sum().backward()  # warm
    outs = [FORWARD[case]() for _ in range(2)]
    results = iter(outs)
    theirs, ours, total, our_total = _compare(lambda: next(results).sum().backward())
    assert theirs and ours == theirs
    assert our_total == total


def test_small_conv_backward_is_counted() -> None:
    # FlopCounterMode counts 15,552 for this backward (we counted 0).
    x, w = _leaf(1, 3, 8, 8), _leaf(4, 3, 3, 3)
    out = F.conv2d(x, w, padding=1)
    with opprof.profile(capture=["torch"]) as prof:
        out.sum().backward()
    rows = {r.key: r for r in prof.key_averages()}
    # grad_input: 2*1*3*4*9*64 = 13,824; grad_weight of a padded conv: 2*3*1*4*64*9 ... as torch
    x2, w2 = _leaf(1, 3, 8, 8), _leaf(4, 3, 3, 3)
    out2 = F.conv2d(x2, w2, padding=1)
    with FlopCounterMode(display=False) as counter:
        out2.sum().backward()
    assert rows["aten::convolution_backward"].flops == counter.get_total_flops() > 0


def test_scaled_mm_counts_as_its_matrix_product() -> None:
    fp8 = getattr(torch, "float8_e4m3fn", None)
    if fp8 is None:
        pytest.skip("no float8 in this torch")
    a = torch.randn(16, 32).to(fp8)
    b = torch.randn(8, 32).to(fp8).t()
    scale = torch.tensor(1.0)
    try:
        torch._scaled_mm(a, b, scale, scale, out_dtype=torch.float32)
    except (RuntimeError, NotImplementedError) as exc:
        pytest.skip(f"_scaled_mm does not run here: {exc}")
    theirs, ours, total, our_total = _compare(
        lambda: torch._scaled_mm(a, b, scale, scale, out_dtype=torch.float32)
    )
    assert theirs == {"aten::_scaled_mm": 2 * 16 * 8 * 32}
    assert ours["aten::_scaled_mm"] == 2 * 16 * 8 * 32
    # On CPU its kernel calls aten::mm: the total counts the work once.
    assert our_total == total


def test_sdpa_cpu_backward_counts_attention_backward_formula() -> None:
    from torch.utils.flop_counter import sdpa_backward_flop_count

    q, k, v = _leaf(2, 4, 16, 8), _leaf(2, 4, 12, 8), _leaf(2, 4, 12, 8)
    out = F.scaled_dot_product_attention(q, k, v)
    with opprof.profile(capture=["torch"]) as prof:
        out.sum().backward()
    rows = {r.key: r for r in prof.key_averages()}
    kernel = "aten::_scaled_dot_product_flash_attention_for_cpu_backward"
    if kernel not in rows:
        pytest.fail(f"sdpa backward took another kernel on this build: {sorted(rows)}")
    shape = list(q.shape)
    expected = sdpa_backward_flop_count(shape, shape, list(k.shape), list(v.shape))
    assert rows[kernel].flops == expected > 0


def test_an_op_calling_itself_is_one_op_as_in_torch_profiler() -> None:
    x = torch.randn(4, 8)

    def run() -> None:
        for _ in range(4):
            x.sum()  # aten::sum calls aten::sum (the dim overload): one op to torch.profiler

    run()
    with torch.profiler.profile() as tprof:
        run()
    torch_count = next(e.count for e in tprof.key_averages() if e.key == "aten::sum")
    with opprof.profile(capture=["torch"]) as prof:
        run()
    ours = {r.key: r.count for r in prof.key_averages()}
    assert ours["aten::sum"] == torch_count == 4  # was 8


def test_merge_follows_remove_dup_nodes() -> None:
    import numpy as np

    from pytest_opprof.capture.sources.torch_source import merge_same_name_children

    # (start, end, thread, name, shape): a chain a > a > a > b collapses to a > b; a parent
    # with two children of its name keeps both; the same name on another thread is no child.
    rows = np.array(
        [
            [0, 100, 1, 0, 1],
            [1, 99, 1, 0, 2],
            [2, 98, 1, 0, 3],
            [3, 50, 1, 1, 4],
            [200, 300, 1, 0, 5],
            [201, 250, 1, 0, 6],
            [251, 299, 1, 0, 7],
            [1, 99, 2, 0, 8],
        ],
        dtype=np.int64,
    )
    kept = merge_same_name_children(rows)
    assert kept[:, 4].tolist() == [1, 4, 5, 6, 7, 8]
