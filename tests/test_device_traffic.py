"""Host<->device traffic and synchronisations per op: the rule on recorded arguments, the
model's "outermost wins" over nested copy ops, and the torch capture's devices (torch's
fake tensors stand in for a CUDA device: no GPU needed)."""

from __future__ import annotations

import contextlib

import pytest
from synthetic_records import Ev, records_from

from pytest_opprof.flops.device_traffic import (
    ITEMSIZE,
    NONE,
    SCALAR_TYPES,
    Traffic,
    op_traffic,
)
from pytest_opprof.model.event_traffic import round_traffic
from pytest_opprof.native_layout.records import KIND_SCOPE, KIND_TORCH

MB4 = 1000 * 1000 * 4
# aten::to.dtype_layout as .cpu(), .cuda() and .to(device) record it: self, dtype,
# layout, device, pin_memory, non_blocking, copy, memory_format.
TO_SHAPES = [[1000, 1000], [], [], [], [], [], [], []]


def _to(src: str, dst: str, *, dtype: int = 6, non_blocking: bool = False) -> Traffic:
    dtypes = ["float", f"Scalar={dtype}", "Scalar=0", "", "", f"Scalar={non_blocking}"]
    return op_traffic(
        "aten::to", TO_SHAPES, [*dtypes, "Scalar=False", ""], [src, "", "", dst, "", "", "", ""]
    )


def test_cpu_of_a_device_tensor_is_device_to_host_and_one_sync() -> None:
    assert _to("cuda:0", "cpu") == Traffic(device_to_host_bytes=MB4, device_syncs=1)


def test_cuda_of_a_host_tensor_is_host_to_device_and_one_sync() -> None:
    assert _to("cpu", "cuda:0") == Traffic(host_to_device_bytes=MB4, device_syncs=1)


def test_non_blocking_copies_do_not_sync() -> None:
    assert _to("cpu", "cuda:0", non_blocking=True) == Traffic(host_to_device_bytes=MB4)


def test_the_destination_dtype_sets_the_bytes() -> None:
    # .to("cpu", torch.float16) of float32: converted on the device, 2 bytes an element.
    assert _to("cuda:0", "cpu", dtype=5).device_to_host_bytes == MB4 // 2


def test_a_copy_between_two_devices_is_device_to_device_and_no_sync() -> None:
    assert _to("cuda:0", "cuda:1") == Traffic(device_to_device_bytes=MB4)


def test_no_device_change_moves_nothing() -> None:
    assert _to("cuda:0", "cuda:0") is NONE
    assert _to("cpu", "cpu") is NONE


def test_copy_into_a_device_tensor_counts_the_destination() -> None:
    # copy_(self, src, non_blocking): self is the destination; a broadcast source is
    # expanded on its side first, so the destination's elements move.
    got = op_traffic(
        "aten::copy_",
        [[64, 32], [32], []],
        ["float", "float", "Scalar=False"],
        ["cuda:0", "cpu", ""],
    )
    assert got == Traffic(host_to_device_bytes=64 * 32 * 4, device_syncs=1)
    back = op_traffic(
        "aten::copy_", [[10], [10], []], ["double", "double", "Scalar=True"], ["cpu", "cuda:0", ""]
    )
    assert back == Traffic(device_to_host_bytes=80)


def test_to_copy_and_the_other_to_overloads() -> None:
    # _to_copy(self, dtype, layout, device, pin_memory, non_blocking, memory_format)
    to_copy = op_traffic(
        "aten::_to_copy",
        [[3, 5], [], [], [], [], [], []],
        ["long int", "", "", "", "", "Scalar=False", ""],
        ["cpu", "", "", "cuda:0", "", "", ""],
    )
    assert to_copy == Traffic(host_to_device_bytes=3 * 5 * 8, device_syncs=1)
    # to.device(self, device, dtype, non_blocking, copy, memory_format)
    to_device = op_traffic(
        "aten::to",
        [[7], [], [], [], [], []],
        ["c10::BFloat16", "", "Scalar=15", "Scalar=True", "Scalar=False", ""],
        ["cuda:0", "cpu", "", "", "", ""],
    )
    assert to_device == Traffic(device_to_host_bytes=14)
    # to.other(self, other, non_blocking, copy, memory_format): like the other tensor.
    to_other = op_traffic(
        "aten::to",
        [[4, 4], [1], [], [], []],
        ["float", "double", "Scalar=False", "Scalar=False", ""],
        ["cuda:0", "cpu", "", "", ""],
    )
    assert to_other == Traffic(device_to_host_bytes=4 * 4 * 8, device_syncs=1)
    # to.dtype(self, dtype, non_blocking, copy, memory_format): no device change.
    to_dtype = op_traffic(
        "aten::to",
        [[4], [], [], [], []],
        ["float", "Scalar=5", "Scalar=False", "Scalar=False", ""],
        ["cuda:0", "", "", "", ""],
    )
    assert to_dtype is NONE


@pytest.mark.parametrize(
    "name", ["aten::item", "aten::_local_scalar_dense", "aten::is_nonzero", "aten::nonzero"]
)
def test_reading_a_device_tensor_on_the_host_syncs(name: str) -> None:
    """One sync; and one element of the tensor's dtype to the host (a float's 4 bytes, a
    bool's 1, as the memcpys of CUDA's trace have them on an H200), but for nonzero,
    whose copy of its count is the kernel's own."""
    copied = 0 if name == "aten::nonzero" else 4
    assert op_traffic(name, [[]], ["float"], ["cuda:0"]) == Traffic(
        device_to_host_bytes=copied, device_syncs=1
    )
    assert op_traffic(name, [[]], ["bool"], ["cuda:0"]).device_to_host_bytes == copied // 4
    assert op_traffic(name, [[]], ["float"], ["cpu"]) is NONE


def test_ops_without_a_rule_or_a_known_device_count_nothing() -> None:
    assert op_traffic("aten::mm", [[2, 2], [2, 2]], ["float"] * 2, ["cuda:0"] * 2) is NONE
    assert _to("", "cpu") is NONE  # Kineto records no devices


TO_DTYPES = ["float", "Scalar=6", "Scalar=0", "", "", "Scalar=False", "Scalar=False", ""]
TO_DEVICES = ["cuda:0", "", "", "cpu", "", "", "", ""]


def _cpu_call(start: int) -> Ev:
    """One ``.cpu()`` of a 1000x1000 float32 device tensor, nesting as on a GPU:
    aten::to > aten::_to_copy > aten::copy_ (each carrying the same copy)."""
    copy = Ev(
        "aten::copy_",
        start + 30,
        start + 70,
        kind=KIND_TORCH,
        shape=[[1000, 1000], [1000, 1000], []],
        dtypes=["float", "float", "Scalar=False"],
        devices=["cpu", "cuda:0", ""],
    )
    to_copy = Ev(
        "aten::_to_copy",
        start + 20,
        start + 80,
        kind=KIND_TORCH,
        shape=TO_SHAPES[:7],
        dtypes=[*TO_DTYPES[:5], "Scalar=False", ""],
        devices=TO_DEVICES[:7],
        children=[copy],
    )
    return Ev(
        "aten::to",
        start + 10,
        start + 90,
        kind=KIND_TORCH,
        shape=TO_SHAPES,
        dtypes=TO_DTYPES,
        devices=TO_DEVICES,
        children=[to_copy],
    )


def _copy_in_loop(n: int, scope: str = "train_step") -> list[Ev]:
    """``n`` ``.cpu()`` calls in a scope."""
    calls = [_cpu_call(100 * i) for i in range(n)]
    return [Ev(scope, 0, 100 * n + 100, kind=KIND_SCOPE, children=calls)]


def test_nested_copy_ops_count_once_at_the_outermost() -> None:
    traffic = round_traffic(records_from(_copy_in_loop(3)))
    assert traffic is not None
    total, sites = traffic
    assert total == Traffic(device_to_host_bytes=3 * MB4, device_syncs=3)
    assert sites == {"aten::to in scope train_step": total}


def test_an_op_outside_any_scope_is_named_alone() -> None:
    item = Ev(
        "aten::item", 0, 10, kind=KIND_TORCH, shape=[[]], dtypes=["float"], devices=["cuda:0"]
    )
    traffic = round_traffic(records_from([item]))
    read = Traffic(device_to_host_bytes=4, device_syncs=1)
    assert traffic == (read, {"aten::item": read})


def test_records_without_devices_have_no_traffic() -> None:
    cpu_only = Ev("aten::to", 0, 10, kind=KIND_TORCH, shape=TO_SHAPES)
    assert round_traffic(records_from([cpu_only])) is None


def test_records_concat_keeps_each_sides_devices() -> None:
    host = records_from([Ev("numpy.add", 0, 5, shape=[[3], [3]])])
    device = records_from(
        [Ev("aten::item", 10, 20, kind=KIND_TORCH, shape=[[3], [3]], devices=["cuda:0", "cuda:0"])]
    )
    merged = host.concat(device)
    assert merged.devices is not None
    by_name = {merged.names[e["name"]]: int(e["shape"]) for e in merged.events}
    # Equal shapes and dtypes, other devices: two entries, each with its own devices.
    assert by_name["numpy.add"] != by_name["aten::item"]
    assert merged.devices[by_name["aten::item"]] == ["cuda:0", "cuda:0"]
    assert merged.devices[by_name["numpy.add"]] == []


# The torch capture: devices recorded by the observer, on fake tensors standing in for CUDA.

try:  # imported with the module, as torch's own tests do: never under the plugin's hooks
    import torch
except ImportError:  # the optional extra; .ci/run installs it
    torch = None

torch_needed = pytest.mark.skipif(torch is None, reason="torch is not installed")


@torch_needed
def test_every_dtype_has_its_itemsize_and_scalar_type_number() -> None:
    from pytest_opprof.capture.sources import torch_observer

    module, reason = torch_observer.load()
    assert module is not None, reason
    assert list(SCALAR_TYPES) == module.dtypes[: len(SCALAR_TYPES)]
    dtypes = {d for d in vars(torch).values() if isinstance(d, torch.dtype)}
    for dtype in dtypes:
        text = module.dtypes[int(_scalar_type_number(dtype))]
        assert ITEMSIZE[text] == torch.empty(0, dtype=dtype).element_size(), dtype


def _scalar_type_number(dtype: object) -> int:
    """torch's ScalarType number of ``dtype``, as the profiler records a dtype argument."""
    import pytest_opprof as opprof

    t = torch.empty(1)
    with opprof.profile(record_shapes=True) as prof:
        # Some dtypes have no copy kernel (uint1, qint8): the op is recorded before it raises.
        with contextlib.suppress(NotImplementedError, RuntimeError):
            t.to(dtype)
    (to,) = [e for e in prof.events() if e.name == "aten::to"]
    return int(to.input_dtypes[1].removeprefix("Scalar="))


@pytest.mark.slow
@torch_needed
def test_x_cpu_of_a_fake_cuda_tensor_counts_4_mb_device_to_host_and_one_sync() -> None:
    from torch._subclasses.fake_tensor import FakeTensorMode

    import pytest_opprof as opprof

    with FakeTensorMode():
        x = torch.empty(1000, 1000, device="cuda")
        with opprof.profile(record_shapes=True) as prof:
            with opprof.record_function("train_step"):
                x.cpu()
            with pytest.raises(Exception, match="_local_scalar_dense"):
                x.sum().item()  # a fake tensor has no value to read: the op still ran
    traffic = round_traffic(prof.records())
    assert traffic is not None
    total, sites = traffic
    assert total == Traffic(device_to_host_bytes=4_000_004, device_syncs=2)
    assert sites == {
        "aten::to in scope train_step": Traffic(device_to_host_bytes=4_000_000, device_syncs=1),
        "aten::item": Traffic(device_to_host_bytes=4, device_syncs=1),
    }
    # The events and key averages carry it as FLOPs are carried: once, at the outermost.
    rows = {row.key: row for row in prof.key_averages()}
    assert (rows["aten::to"].device_to_host_bytes, rows["aten::to"].device_syncs) == (4_000_000, 1)
    assert rows["aten::_to_copy"].device_to_host_bytes == 0
    assert rows["aten::item"].device_syncs == 1
    assert rows["aten::_local_scalar_dense"].device_syncs == 0
    total = prof.key_averages().total_average()
    assert (total.device_to_host_bytes, total.device_syncs, total.host_to_device_bytes) == (
        4_000_004,
        2,
        0,
    )
    (to,) = [e for e in prof.events() if e.name == "aten::to"]
    assert to.device_to_host_bytes == 4_000_000 and to.cpu_children[0].device_to_host_bytes == 0
    by_shape = {
        row.key: row for row in prof.key_averages(group_by_input_shape=True) if row.device_syncs
    }
    assert set(by_shape) == {"aten::to", "aten::item"}


@torch_needed
def test_a_host_only_torch_profile_records_no_devices() -> None:
    import pytest_opprof as opprof

    x = torch.ones(10)
    with opprof.profile(record_shapes=True) as prof:
        x.to(torch.float16).sum().item()
    assert prof.records().devices is None
    assert round_traffic(prof.records()) is None


@torch_needed
def test_the_table_shows_traffic_columns_only_when_some_op_moved_data() -> None:
    from torch._subclasses.fake_tensor import FakeTensorMode

    import pytest_opprof as opprof

    with FakeTensorMode():
        x = torch.empty(1000, 1000, device="cuda")
        with opprof.profile(record_shapes=True) as prof:
            x.cpu()
    text = prof.key_averages().table()
    header = next(line for line in text.splitlines() if "Name" in line)
    assert "Dev->Host" in header and "Syncs" in header
    assert "Host->Dev" not in header and "Dev->Dev" not in header
    row = next(line for line in text.splitlines() if line.strip().startswith("aten::to "))
    assert "3.81 MB" in row  # 4,000,000 bytes, torch's units

    with opprof.profile(record_shapes=True) as host:
        torch.ones(8).sum()
    assert "Syncs" not in host.key_averages().table()
