"""CUDA device times on a real GPU, against CUDA events timed by torch itself.

The CPU suite checks ``native/cuda.c`` against a fake runtime (``tests/fake_cudart``);
this script is the check only a GPU machine can make: the real ``libcudart`` found the
way the plugin finds it (torch's own, already mapped), torch's CUDA ops and a
``record_function`` scope timed by the plugin's event pairs, and the same work timed
with ``torch.cuda.Event`` around it.  It then runs ``pytest --opprof`` on a two-test
GPU module and reads the device time from the JSON report.  Exits non-zero when a
figure is missing or the two timings disagree by more than ``--tolerance``.

Host<->device traffic (``check_traffic``, ``check_traffic_gate``; NOT YET RUN ON A
DEVICE: written on a machine without a GPU, where fake tensors stand in for CUDA): the
bytes copied each way and the syncs the plugin counts from the ops' arguments, against
the bytes of the memcpy activities and the synchronising runtime calls torch.profiler's
CUDA trace records for the same work; and a gate run on a two-test module that adds
``.cpu()`` in a loop fails on the traffic rows, naming ``aten::to`` and its scope.

    python bench/gpu_check.py [--size 4096] [--repeats 20] [--tolerance 0.15] [--out DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path
from typing import Any

GPU_TESTS = """
import torch

A = torch.randn(2048, 2048, device="cuda")

def test_matmul():
    for _ in range(10):
        A @ A
    torch.cuda.synchronize()

def test_softmax():
    for _ in range(10):
        torch.softmax(A, dim=1)
    torch.cuda.synchronize()
"""


def torch_event_ms(fn: Any, repeats: int) -> float:
    """Median of ``repeats`` CUDA-event timings of ``fn`` (ms), torch's own events."""
    import torch

    times = []
    for _ in range(repeats):
        start = torch.cuda.Event(enable_timing=True)  # type: ignore[no-untyped-call]
        end = torch.cuda.Event(enable_timing=True)  # type: ignore[no-untyped-call]
        start.record()
        fn()
        end.record()
        torch.cuda.synchronize()
        times.append(float(start.elapsed_time(end)))
    times.sort()
    return float(times[len(times) // 2])


def check_profile(size: int, repeats: int, tolerance: float) -> list[str]:
    """Problems found in one profile of ``repeats`` matmuls inside a scope."""
    import torch

    import pytest_opprof as opprof
    from pytest_opprof import _native

    a = torch.randn(size, size, device="cuda")
    for _ in range(3):  # cuBLAS picks its kernel and loads it before anything is timed
        a @ a
    torch.cuda.synchronize()
    reference_ms = torch_event_ms(lambda: a @ a, repeats)
    with opprof.profile(capture=["torch"], with_flops=True) as prof:
        with opprof.record_function("block"):
            for _ in range(repeats):
                a @ a
        torch.cuda.synchronize()
    with opprof.profile(capture=["torch"], cuda_sample_rate=4) as sampled:
        for _ in range(repeats):
            a @ a
        torch.cuda.synchronize()
    rows = {row.key: row for row in prof.key_averages()}
    print(f"libcudart: {_native.cuda_loaded_path()}")
    print(prof.key_averages().table(sort_by="device_time_total", row_limit=8))
    problems = []
    matmul = rows.get("aten::mm") or rows.get("aten::matmul")
    if matmul is None:
        return [f"no aten::mm or aten::matmul row: {sorted(rows)}"]
    block = rows.get("block")
    if block is None or block.device_time_total <= 0:
        problems.append("the record_function scope has no device time")
    elif block.self_device_time_total > tolerance * block.device_time_total:
        problems.append(
            f"the scope's own device time is {block.self_device_time_total:.0f} us of "
            f"{block.device_time_total:.0f} us: its matmuls' time is not subtracted"
        )
    if matmul.count != repeats:
        problems.append(f"{matmul.key} counted {matmul.count} calls, not {repeats}")
    print(f"torch.cuda.Event: {reference_ms:.3f} ms a matmul of {size}x{size}")
    timed = [(matmul.key, matmul.device_time_total / 1000 / matmul.count)]
    sampled_mm = {row.key: row for row in sampled.key_averages()}.get(matmul.key)
    if sampled_mm is not None:  # 1 call in 4 timed, extrapolated to all
        timed.append(
            (f"{matmul.key}, 1 call in 4 timed", sampled_mm.device_time_total / 1000 / repeats)
        )
    if block is not None:
        timed.append(("block (the scope)", block.device_time_total / 1000 / repeats))
    for what, per_op_ms in timed:
        if per_op_ms <= 0:
            problems.append(f"{what}: no device time")
            continue
        change = per_op_ms / reference_ms - 1
        tflops = 2 * size**3 / (per_op_ms / 1000) / 1e12
        print(f"{what}: {per_op_ms:.3f} ms a matmul ({tflops:.1f} TFLOP/s), {change:+.1%}")
        if abs(change) > tolerance:
            problems.append(
                f"{what}: device time {change:+.1%} off torch's events (tolerance {tolerance:.0%})"
            )
    return problems


def per_op_cost(n: int = 5000, repeats: int = 5) -> None:
    """What timing each torch op on the device adds on the host: ``n`` small CUDA adds
    (launch-bound) plain, profiled without device time and with it; best of ``repeats``."""
    import time

    import torch

    import pytest_opprof as opprof

    x = torch.ones(16, device="cuda")

    def loop() -> None:
        for _ in range(n):
            x.add(1)
        torch.cuda.synchronize()

    def best(cuda: bool | None, rate: int = 1) -> float:
        times = []
        for _ in range(repeats):
            began = time.perf_counter()
            if cuda is None:
                loop()
            else:
                with opprof.profile(capture=["torch"], cuda=cuda, cuda_sample_rate=rate):
                    loop()
            times.append(time.perf_counter() - began)
        return min(times) / n * 1e6

    loop()
    plain, host, device, sampled = best(None), best(False), best(True), best(True, 10)
    print(
        f"per op (x.add(1), {n} calls, best of {repeats}): plain {plain:.2f} us, "
        f"profiled +{host - plain:.2f} us, with device time +{device - plain:.2f} us, "
        f"1 call in 10 timed +{sampled - plain:.2f} us"
    )


def check_plugin(out: Path) -> list[str]:
    """``pytest --opprof`` on a GPU module: every test has device time in the report."""
    suite = out / "gpu_suite"
    suite.mkdir(parents=True, exist_ok=True)
    (suite / "test_gpu.py").write_text(textwrap.dedent(GPU_TESTS))
    report = out / "gpu_report.json"
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--opprof"]
    cmd += [
        "--opprof-rounds",
        "1",
        f"--opprof-report={report}",
        "--opprof-report-details",
        str(suite),
    ]
    done = subprocess.run(cmd, capture_output=True, text=True, cwd=out)
    print(done.stdout[-4000:], done.stderr[-2000:])
    if done.returncode != 0:
        return [f"pytest --opprof exited {done.returncode}"]
    tests = json.loads(report.read_text())["tests"]
    problems = []
    for nodeid, test in sorted(tests.items()):
        device = (test["summary"].get("device_time") or {}).get("median_ns")
        ops = {
            key: op.get("self_device_time", {}).get("median_ns")
            for key, op in test.get("ops", {}).items()
        }
        print(f"{nodeid}: device time {device} ns; ops' self device time (ns): {ops}")
        if not device:
            problems.append(f"{nodeid}: no device time in the report")
        if not any(ops.get(key) for key in ("aten::mm", "aten::softmax", "aten::_softmax")):
            problems.append(f"{nodeid}: no torch op has a self device time in the report")
    return problems


TRAFFIC_TESTS = """
import os

import torch

X = torch.randn(1000, 1000, device="cuda")


def test_step(opprof):
    with opprof.record_function("train_step"):
        for _ in range(int(os.environ.get("OPPROF_COPIES", "0"))):
            X.cpu()
        (X * 2).sum().item()


def test_matmul():
    X @ X
    torch.cuda.synchronize()
"""

_SYNC_CALLS = ("cudaStreamSynchronize", "cudaDeviceSynchronize", "cudaMemcpy")
"""Runtime calls that wait for the device (a plain ``cudaMemcpy`` waits too; the async
one does not)."""


def _traffic_workload() -> None:
    import numpy as np
    import torch

    x = torch.randn(1000, 1000, device="cuda")
    x.cpu()  # 4,000,000 bytes device->host, one sync
    torch.ones(500, 1000).cuda()  # 2,000,000 bytes host->device, one sync
    torch.tensor(np.ones((250, 1000)), device="cuda")  # float64: 2,000,000 bytes
    torch.ones(1000, pin_memory=True).to("cuda", non_blocking=True)  # 4,000 bytes, no sync
    x.sum().item()  # one sync
    bool(x[0, 0] > 0)  # one sync
    x[:10].tolist()  # 40,000 bytes device->host, one sync


def _kineto_traffic(path: Path) -> tuple[dict[str, int], int]:
    """Bytes of the memcpy activities by direction, and synchronising runtime calls, in a
    torch.profiler Chrome trace."""
    events = json.loads(path.read_text())["traceEvents"]
    moved = {"HtoD": 0, "DtoH": 0, "DtoD": 0}
    syncs = 0
    for event in events:
        name = str(event.get("name", ""))
        if event.get("cat") == "gpu_memcpy":
            for way in moved:
                if way in name:
                    moved[way] += int(event.get("args", {}).get("bytes", 0))
        if event.get("cat") == "cuda_runtime" and name in _SYNC_CALLS:
            syncs += 1
    return moved, syncs


def check_traffic(out: Path) -> list[str]:
    """The plugin's traffic of one workload against torch.profiler's CUDA trace of it."""
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as torch_profile

    import pytest_opprof as opprof

    _traffic_workload()  # warm: CUDA context, pinned-memory pool
    with opprof.profile(capture=["torch"]) as prof:
        _traffic_workload()
    total = prof.key_averages().total_average()
    ours = {
        "HtoD": total.host_to_device_bytes,
        "DtoH": total.device_to_host_bytes,
        "DtoD": total.device_to_device_bytes,
    }
    with torch_profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as kineto:
        _traffic_workload()
    trace = out / "traffic_trace.json"
    kineto.export_chrome_trace(str(trace))
    theirs, their_syncs = _kineto_traffic(trace)
    print(f"traffic: ours {ours}, {total.device_syncs} syncs; torch.profiler {theirs}, ")
    print(f"  {their_syncs} synchronising runtime calls ({', '.join(_SYNC_CALLS)})")
    rows = {row.key: row for row in prof.key_averages()}
    for key in ("aten::to", "aten::_to_copy", "aten::copy_", "aten::item", "aten::is_nonzero"):
        row = rows.get(key)
        if row is not None:
            print(
                f"  {key}: h2d {row.host_to_device_bytes} d2h {row.device_to_host_bytes} "
                f"syncs {row.device_syncs}"
            )
    problems = [
        f"{way}: the plugin counts {ours[way]:,} bytes, torch.profiler's memcpys {theirs[way]:,}"
        for way in ours
        if ours[way] != theirs[way]
    ]
    if total.device_syncs != their_syncs:
        problems.append(
            f"syncs: the plugin counts {total.device_syncs}, torch.profiler {their_syncs} calls"
        )
    return problems


def check_traffic_gate(out: Path) -> list[str]:
    """A baseline of ``TRAFFIC_TESTS``, then a run with ``.cpu()`` three times in the loop:
    ``test_step`` fails on device->host and syncs, naming ``aten::to`` in ``train_step``."""
    suite = out / "traffic_suite"
    suite.mkdir(parents=True, exist_ok=True)
    (suite / "test_traffic.py").write_text(textwrap.dedent(TRAFFIC_TESTS))
    report = out / "traffic_report.json"
    base = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(suite)]
    first = subprocess.run([*base, "--opprof-update-baselines"], capture_output=True, text=True)
    if first.returncode != 0:
        return [
            f"recording the traffic baselines exited {first.returncode}: {first.stdout[-2000:]}"
        ]
    env = {**os.environ, "OPPROF_COPIES": "3"}
    done = subprocess.run(
        [*base, "--opprof", f"--opprof-report={report}"], capture_output=True, text=True, env=env
    )
    print(done.stdout[-4000:])
    tests = json.loads(report.read_text())["tests"]
    step = tests.get("test_traffic.py::test_step", {})
    rows = {m["metric"]: m for m in step.get("verdict", {}).get("metrics", [])}
    problems = []
    if rows.get("device->host", {}).get("now") != 3 * 4_000_000:
        problems.append(f"test_step: device->host row {rows.get('device->host')}")
    if rows.get("device->host", {}).get("status") != "regressed":
        problems.append("test_step: device->host did not regress")
    if not any(
        "`aten::to` in scope `train_step`" in n for n in step.get("verdict", {}).get("notes", [])
    ):
        problems.append("test_step: no note names aten::to in scope train_step")
    if tests.get("test_traffic.py::test_matmul", {}).get("status") == "regressed":
        problems.append("test_matmul regressed, with no traffic")
    return problems


def main() -> None:
    p = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    p.add_argument("--size", type=int, default=4096)
    p.add_argument("--repeats", type=int, default=20)
    p.add_argument("--tolerance", type=float, default=0.15)
    p.add_argument("--out", type=Path)
    args = p.parse_args()
    import torch

    if not torch.cuda.is_available():
        sys.exit("no CUDA device: this check needs a GPU")
    print(f"torch {torch.__version__}, {torch.cuda.get_device_name()}")
    out = args.out or Path(tempfile.mkdtemp(prefix="opprof-gpu-"))
    problems = check_profile(args.size, args.repeats, args.tolerance)
    per_op_cost()
    problems += check_plugin(out)
    problems += check_traffic(out)
    problems += check_traffic_gate(out)
    for line in problems:
        print(f"PROBLEM: {line}")
    print("OK" if not problems else f"{len(problems)} problem(s)")
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
