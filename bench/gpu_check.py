"""CUDA device times on a real GPU, against CUDA events timed by torch itself.

The CPU suite checks ``native/cuda.c`` against a fake runtime (``tests/fake_cudart``);
this script is the check only a GPU machine can make: the real ``libcudart`` found the
way the plugin finds it (torch's own, already mapped), torch's CUDA ops and a
``record_function`` scope timed by the plugin's event pairs, and the same work timed
with ``torch.cuda.Event`` around it.  It then runs ``pytest --opprof`` on a two-test
GPU module and reads the device time from the JSON report.  Exits non-zero when a
figure is missing or the two timings disagree by more than ``--tolerance``.

Host<->device traffic (``check_traffic``, ``check_traffic_gate``): the bytes copied each
way and the syncs the plugin counts from the ops' arguments, against the bytes of the
memcpy activities and the synchronising runtime calls torch.profiler's CUDA trace records
for the same work; and a gate run on a two-test module that adds ``.cpu()`` in a loop
fails on the traffic rows, naming ``aten::to`` and its scope.

Per-op device memory (``check_device_memory``): each op's ``self_device_memory_usage``
against torch.profiler's (``profile_memory=True``) for ``aten::mm``, ``aten::empty`` and
``aten::add`` on the same work, ``x.cpu()`` of a 1000 x 1000 float32 at 4,000,000 bytes
device->host and one sync; and the gate run again with a 64 MB block kept in the scope,
which fails on the device memory peak, naming ``aten::empty``.

On a lent machine (the `device` tool), from the repository root, with cffi's wheels in
``.whl/`` (``bench/gpu_setup.sh`` says how):

    bash bench/gpu_setup.sh python3 bench/gpu_check.py --out "$OUT"

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
        kept = torch.empty(int(os.environ.get("OPPROF_KEEP_MB", "0")) * 250_000, device="cuda")
        (X * 2).sum().item()
        del kept


def test_matmul():
    X @ X
    torch.cuda.synchronize()
"""

_SYNC_CALLS = ("cudaStreamSynchronize", "cudaMemcpy")
"""Runtime calls that wait for the device (a plain ``cudaMemcpy`` waits too; the async
one does not).  Not ``cudaDeviceSynchronize``: the workload calls none, and the trace's
one is torch.profiler's own as it stops (on an H200, after the workload's last op); the
plugin does not count ``torch.cuda.synchronize()`` (docs/device-traffic.md)."""


def _traffic_workload() -> None:
    import numpy as np
    import torch

    x = torch.randn(1000, 1000, device="cuda")
    x.cpu()  # 4,000,000 bytes device->host, one sync
    torch.ones(500, 1000).cuda()  # 2,000,000 bytes host->device, one sync
    torch.tensor(np.ones((250, 1000)), device="cuda")  # float64: 2,000,000 bytes
    torch.ones(1000, pin_memory=True).to("cuda", non_blocking=True)  # 4,000 bytes, no sync
    x.sum().item()  # 4 bytes device->host, one sync
    bool(x[0, 0] > 0)  # 1 byte device->host, one sync
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
    d2h = rows.get("device->host", {})
    if d2h.get("now", 0) - d2h.get("baseline", 0) != 3 * 4_000_000:
        problems.append(f"test_step: device->host row {d2h}")
    if rows.get("device->host", {}).get("status") != "regressed":
        problems.append("test_step: device->host did not regress")
    if not any(
        "`aten::to` in scope `train_step`" in n for n in step.get("verdict", {}).get("notes", [])
    ):
        problems.append("test_step: no note names aten::to in scope train_step")
    if tests.get("test_traffic.py::test_matmul", {}).get("status") == "regressed":
        problems.append("test_matmul regressed, with no traffic")
    mm = tests.get("test_traffic.py::test_matmul", {}).get("ops", {}).get("aten::mm", {})
    if not mm.get("self_device_memory_bytes"):
        problems.append(f"test_matmul: aten::mm has no device memory in the report: {mm}")
    # A 64 MB block kept in the scope: the device memory peak fails, aten::empty named.
    env = {**os.environ, "OPPROF_KEEP_MB": "64"}
    done = subprocess.run(
        [*base, "--opprof", f"--opprof-report={report}"], capture_output=True, text=True, env=env
    )
    print(done.stdout[-4000:])
    step = json.loads(report.read_text())["tests"].get("test_traffic.py::test_step", {})
    verdict = step.get("verdict", {})
    rows = {m["metric"]: m for m in verdict.get("metrics", [])}
    if rows.get("device memory peak", {}).get("status") != "regressed":
        problems.append(f"test_step: device memory peak row {rows.get('device memory peak')}")
    grew = [r for r in verdict.get("reasons", []) if r.get("kind") == "more device memory"]
    if not any(r["op"] == "aten::empty" and r["now"] - r["baseline"] >= 64_000_000 for r in grew):
        problems.append(f"test_step: no aten::empty with 64 MB more device memory: {grew}")
    return problems


def check_ab(out: Path) -> list[str]:
    """An A/A run of ``TRAFFIC_TESTS`` against their own commit (``--opprof-against=HEAD``):
    both partners start on the device, no test fails, and every test's verdict says A/B."""
    repo = out / "ab_repo"
    repo.mkdir(parents=True, exist_ok=True)
    (repo / "test_traffic.py").write_text(textwrap.dedent(TRAFFIC_TESTS))
    who = ["-c", "user.email=gpu@example.com", "-c", "user.name=gpu"]
    for args in (["init", "-q"], ["add", "-A"], [*who, "commit", "-qm", "base"]):
        subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True)
    report = out / "ab_report.json"
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--opprof"]
    cmd += ["--opprof-against=HEAD", f"--opprof-report={report}"]
    done = subprocess.run(cmd, cwd=repo, capture_output=True, text=True)
    print(done.stdout[-3000:], done.stderr[-1500:])
    if done.returncode != 0 or not report.exists():
        return [f"A/A on the GPU module exited {done.returncode}"]
    tests = json.loads(report.read_text())["tests"]
    problems = []
    for nodeid, test in sorted(tests.items()):
        verdict = test.get("verdict", {})
        basis = str(verdict.get("time_basis", ""))
        print(f"{nodeid}: {test.get('status')}, basis {basis!r}")
        if not basis.startswith("A/B"):
            problems.append(f"{nodeid}: judged on {basis!r}, not A/B")
    if len(tests) != 2:
        problems.append(f"A/A judged {len(tests)} tests, not 2")
    return problems


def _memory_workload() -> Any:
    """aten::mm, aten::empty and aten::add of 1000 x 1000 float32 on the device, and the
    copy of one to the host; the results are dropped before the profile stops."""
    import torch

    a = torch.randn(1000, 1000, device="cuda")
    b = torch.randn(1000, 1000, device="cuda")

    def work() -> None:
        c = torch.mm(a, b)
        e = torch.empty(1000, 1000, device="cuda")
        d = torch.add(a, b)
        h = a.cpu()
        del c, e, d, h

    return work


MEMORY_OPS = ("aten::mm", "aten::empty", "aten::add")


def check_device_memory(rounds: int = 3) -> list[str]:
    """Each op's own device bytes against torch.profiler's on the same work, in turn
    (both see the caching allocator's reports: a block reused from its cache is reported
    as a new one); and ``a.cpu()``'s traffic."""
    import torch
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as torch_profile

    import pytest_opprof as opprof

    work = _memory_workload()
    work()  # warm: cuBLAS's handle and workspace, the allocator's cache
    torch.cuda.synchronize()
    problems = []
    for i in range(rounds):
        with opprof.profile(capture=["torch"], profile_memory=True) as prof:
            work()
        with torch_profile(activities=[ProfilerActivity.CPU], profile_memory=True) as kineto:
            work()
        ours = {row.key: row for row in prof.key_averages()}
        theirs = {row.key: row for row in kineto.key_averages()}
        for key in MEMORY_OPS:
            mine, torch_s = ours.get(key), theirs.get(key)
            if mine is None or torch_s is None:
                problems.append(f"{key}: a row is missing (ours {mine}, torch's {torch_s})")
                continue
            pair = (mine.self_device_memory_usage, torch_s.self_device_memory_usage)
            host = (mine.self_cpu_memory_usage, torch_s.self_cpu_memory_usage)
            print(
                f"round {i}: {key}: self device memory ours {pair[0]:,} torch {pair[1]:,}; "
                f"self host memory ours {host[0]:,} torch {host[1]:,}"
            )
            if pair[0] != pair[1] or pair[0] <= 0:
                problems.append(
                    f"{key}: self device memory {pair[0]:,} against torch's {pair[1]:,}"
                )
            if host[0] != host[1]:
                problems.append(f"{key}: self host memory {host[0]:,} against torch's {host[1]:,}")
        to = ours.get("aten::to")
        if to is None or (to.device_to_host_bytes, to.device_syncs) != (4_000_000, 1):
            problems.append(
                "a.cpu(): aten::to counts "
                f"{(to.device_to_host_bytes, to.device_syncs) if to else None}, not (4000000, 1)"
            )
        if i == 0:
            print(prof.key_averages().table(sort_by="self_device_memory_usage", row_limit=8))
            trace = Path(tempfile.mkdtemp(prefix="opprof-gpu-")) / "memory_trace.json"
            prof.export_chrome_trace(str(trace))
            spans = json.loads(trace.read_text())["traceEvents"]
            mm = [e for e in spans if e.get("name") == "aten::mm" and e.get("ph") == "X"]
            got = [e["args"].get("Self Device Mem (bytes)") for e in mm]
            want = theirs["aten::mm"].self_device_memory_usage if "aten::mm" in theirs else None
            print(f"trace: aten::mm's Self Device Mem (bytes) {got}, torch's {want}")
            if got != [want]:
                problems.append(f"the trace's aten::mm device bytes {got}, torch's {want}")
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
    problems += check_device_memory()
    problems += check_ab(out)
    for line in problems:
        print(f"PROBLEM: {line}")
    print("OK" if not problems else f"{len(problems)} problem(s)")
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
