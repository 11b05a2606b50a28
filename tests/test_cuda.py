"""CUDA event timing against a fake libcudart (host clocks behind the CUDA entry points)."""

from __future__ import annotations

import ctypes
import os
import shutil
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

import pytest_opprof as opprof
from pytest_opprof import _native
from pytest_opprof.capture.sources.cuda_source import own_device_times
from pytest_opprof.gate import store
from pytest_opprof.gate.store import BaselineEntry
from pytest_opprof.gate.summary import RoundFigures, TimeStats, summarize_rounds
from pytest_opprof.gate.verdict import Tolerances, compare
from pytest_opprof.native_layout.records import EVENT_DTYPE

FAKE_SOURCE = Path(__file__).parent / "fake_cudart" / "fake_cudart.c"


@pytest.fixture(scope="session")
def fake_cudart(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The fake runtime compiled with gcc into a temporary directory."""
    gcc = shutil.which("gcc")
    if gcc is None:
        pytest.fail("gcc is needed to build the fake CUDA runtime")
    out = tmp_path_factory.mktemp("fake_cudart") / "libfakecudart.so"
    subprocess.run([gcc, "-shared", "-fPIC", "-O2", "-o", str(out), str(FAKE_SOURCE)], check=True)
    return out


@pytest.fixture
def fake(fake_cudart: Path, monkeypatch: pytest.MonkeyPatch) -> ctypes.CDLL:
    monkeypatch.setenv("OPPROF_CUDART", str(fake_cudart))
    lib = ctypes.CDLL(str(fake_cudart))  # same file: dlopen returns the runtime the core uses
    for name in ("fake_cudart_records", "fake_cudart_syncs", "fake_cudart_elapsed_calls"):
        getattr(lib, name).restype = ctypes.c_int64
    lib.fake_cudart_set_used.argtypes = [ctypes.c_int64]
    lib.fake_cudart_set_used(0)
    return lib


def test_events_recorded_and_attributed(fake: ctypes.CDLL) -> None:
    x = np.ones((64, 64))
    records0 = fake.fake_cudart_records()
    with opprof.profile(capture=["numpy"]) as prof:
        with opprof.record_function("block"):
            for _ in range(4):
                np.matmul(x, x)
    assert _native.cuda_loaded_path() is not None
    stats = _native.cuda_stats()
    assert stats.timed == 5 and stats.resolved == 5 and stats.dropped == 0
    assert fake.fake_cudart_records() - records0 == 10  # one pair per op and per scope
    assert fake.fake_cudart_syncs() >= 1
    rec = prof.records()
    names = [rec.names[n] for n in rec.events["name"]]
    dev = rec.events["device_ns"]
    cpu = rec.events["end_ns"] - rec.events["start_ns"]
    for name, d, c in zip(names, dev, cpu, strict=True):
        assert d > 0, name
        if name == "numpy.matmul":
            # fake device time is host time between the records, which enclose the op's ticks
            assert d >= c * 0.9
    block = names.index("block")
    block_raw_floor = dev[block]  # own time: the matmuls' times were subtracted
    assert block_raw_floor < cpu[block]
    rows = {r.key: r for r in prof.key_averages()}
    assert rows["numpy.matmul"].self_device_time_total > 0
    assert rows["block"].device_time_total >= rows["numpy.matmul"].device_time_total
    assert "CUDA" in prof.key_averages().table()


def test_sampling_times_every_nth_call_and_extrapolates(fake: ctypes.CDLL) -> None:
    x = np.ones((32, 32))
    rate, calls = 3, 10
    records0 = fake.fake_cudart_records()
    with opprof.profile(capture=["numpy"], cuda_sample_rate=rate) as prof:
        for _ in range(calls):
            np.add(x, x)
    timed_expected = -(-calls // rate)  # calls 1, 4, 7, 10
    stats = _native.cuda_stats()
    assert stats.calls == calls and stats.timed == timed_expected and stats.sample_rate == rate
    assert fake.fake_cudart_records() - records0 == 2 * timed_expected
    rec = prof.records()
    ev = rec.events[rec.events["name"] == rec.names.index("numpy.add")]
    assert len(ev) == calls
    dev = ev["device_ns"]
    timed = np.flatnonzero(dev >= 0)
    order = np.argsort(ev["start_ns"])
    assert list(np.searchsorted(ev["start_ns"][order], ev["start_ns"][timed])) == [0, 3, 6, 9]
    ids, elapsed = _native.cuda_resolve()
    raw = dict(zip(ids.tolist(), elapsed.tolist(), strict=True))
    # each timed event stands for calls / timed calls
    for row in timed:
        assert dev[row] == round(raw[int(ev["id"][row])] * calls / timed_expected)
    extrapolated = int(dev[timed].sum())
    cpu_total = int((ev["end_ns"] - ev["start_ns"]).sum())
    assert 0.5 * cpu_total <= extrapolated


def test_device_memory_from_mem_get_info(fake: ctypes.CDLL) -> None:
    fake.fake_cudart_set_used(1 << 20)
    with opprof.profile(capture=["none"]) as prof:
        fake.fake_cudart_set_used((1 << 20) + 4096 * 1000)
    assert prof.device_memory is not None
    assert prof.device_memory.method == "cudaMemGetInfo"
    assert prof.device_memory.peak_bytes == 4096 * 1000


def test_cuda_off_leaves_device_time_unmeasured(fake: ctypes.CDLL) -> None:
    with opprof.profile(capture=["numpy"], cuda=False) as prof:
        np.add(np.ones(4), 1)
    assert (prof.records().events["device_ns"] == -1).all()
    assert prof.device_memory is None


def test_bad_sample_rate_is_named(fake: ctypes.CDLL) -> None:
    with pytest.raises(opprof.OpprofError, match="cuda_sample_rate"):
        with opprof.profile(cuda_sample_rate=0):
            pass


def test_no_runtime_is_a_note_not_an_error(tmp_path: Path) -> None:
    code = (
        "import numpy as np, pytest_opprof as o\n"
        "with o.profile(capture=['numpy'], cuda=True) as p:\n"
        "    np.add(np.ones(3), 1)\n"
        "print('NOTE', p.not_measured)\n"
        "print('DEV', int((p.records().events['device_ns'] >= 0).sum()))\n"
    )
    env = dict(os.environ, OPPROF_CUDART=str(tmp_path / "missing-libcudart.so"))
    root = str(Path(opprof.__file__).resolve().parents[1])
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert "device time: cannot open CUDA runtime" in out.stdout
    assert "missing-libcudart.so" in out.stdout
    assert "DEV 0" in out.stdout


def test_device_figures_roundtrip_store_and_verdict(fake: ctypes.CDLL, tmp_path: Path) -> None:
    x = np.ones((64, 64))
    rounds = []
    for _ in range(3):
        with opprof.profile(capture=["numpy"]) as prof:
            np.matmul(x, x)
        rounds.append(
            RoundFigures.from_events(
                prof.key_averages(),
                wall_time_ns=prof.wall_time_ns,
                cpu_time_ns=prof.wall_time_ns,
                memory=prof.memory,
                device_memory_bytes=prof.device_memory.peak_bytes if prof.device_memory else None,
            )
        )
    summary = summarize_rounds(rounds)
    assert summary.device_time is not None and summary.device_time.median_ns > 0
    assert summary.ops["numpy.matmul"].device_time is not None
    assert summary.device_memory_bytes == 0
    path = tmp_path / "baselines" / "test_mod.json"
    entry = BaselineEntry.record(summary)
    store.update(path, {"test_x": entry})
    loaded = store.load(path)["test_x"]
    assert loaded.summary.device_time is not None
    assert loaded.summary.device_memory_bytes == 0
    assert loaded.summary.device_time.samples_ns == summary.device_time.samples_ns or (
        loaded.summary.device_time.median_ns > 0
    )
    tol = replace(Tolerances(), min_time_ns=0)  # the fake's device times are microseconds
    same = compare(summary, loaded, fingerprint=loaded.machine.fingerprint, tolerances=tol)
    rows = {m.metric: m for m in same.metrics}
    assert rows["device time"].status == "pass"
    assert rows["device memory peak"].status == "pass"
    # 100x the device time in every round and 64 MiB more device memory: both regress
    slower = replace(
        summary,
        device_time=TimeStats.from_samples([s * 100 for s in summary.device_time.samples_ns]),
        device_memory_bytes=64 << 20,
    )
    verdict = compare(slower, loaded, fingerprint=loaded.machine.fingerprint, tolerances=tol)
    rows = {m.metric: m for m in verdict.metrics}
    assert rows["device memory peak"].status == "regressed"
    assert rows["device time"].status == "regressed"
    assert verdict.failed


def test_a_cuda_runtime_without_a_driver_is_a_clear_error_not_a_crash(fake_cudart: Path) -> None:
    # A CUDA toolkit image on a machine without a GPU: cudaGetDeviceCount fails, and its
    # error string lives in the runtime that the failed load closes again. A fresh process,
    # so that nothing else holds the runtime open.
    code = (
        "import sys\n"
        "from pytest_opprof import _native\n"
        "try:\n"
        "    _native.cuda_load(sys.argv[1])\n"
        "except Exception as exc:\n"
        "    print(type(exc).__name__, exc)\n"
        "else:\n"
        "    print('loaded')\n"
    )
    env = dict(os.environ, FAKE_CUDART_NO_DRIVER="1")
    proc = subprocess.run(
        [sys.executable, "-c", code, str(fake_cudart)], capture_output=True, text=True, env=env
    )
    assert proc.returncode == 0, proc.stderr
    assert "CUDA driver version is insufficient for CUDA runtime version" in proc.stdout
    assert str(fake_cudart) in proc.stdout
    assert not proc.stdout.startswith("loaded")


def _event(start: int, end: int, ident: int, parent: int, name: int, timed: int) -> tuple:
    row = np.zeros(1, dtype=EVENT_DTYPE)[0]
    row["start_ns"], row["end_ns"], row["id"], row["parent"] = start, end, ident, parent
    row["name"], row["thread"], row["device_ns"] = name, 7, timed
    return tuple(row.tolist())


def test_torch_ops_device_time_is_subtracted_from_the_scope_around_them() -> None:
    # A native scope (timed by the core's pair) around torch ops (no native parent: -2),
    # timed by the torch observer's pairs, children included.  On a GPU machine these
    # come from torch (bench/gpu_check.py); the arithmetic is checked here.
    rows = [
        _event(0, 100, 1, -1, 0, 1000),  # scope "block"
        _event(10, 90, 2**62, -2, 1, 700),  # aten::linear
        _event(20, 80, 2**62 + 1, -2, 2, -1),  # aten::t: no CUDA input, not timed
        _event(30, 70, 2**62 + 2, -2, 3, 500),  # aten::addmm inside it
        _event(92, 98, 2**62 + 3, -2, 4, 200),  # aten::relu, a sibling of linear
    ]
    events = np.array(rows, dtype=EVENT_DTYPE)
    own = own_device_times(events, events["device_ns"].astype(np.int64))
    assert own.tolist() == [1000 - 700 - 200, 700 - 500, -1, 500, 200]
    timed = own >= 0
    assert int(own[timed].sum()) == 1000  # the scope's whole time, counted once


def test_torch_ops_asked_for_device_time_on_a_cpu_torch_record_none(fake: ctypes.CDLL) -> None:
    # With the (fake) runtime loaded, the profile times device work and asks the torch
    # observer to time its ops too; a CPU build of torch has no CUDA stubs to time with,
    # so its ops keep "not measured" while the scope around them is timed.
    torch = pytest.importorskip("torch")
    from pytest_opprof.capture.sources.torch_source import SOURCE

    with opprof.profile(capture=["torch"]) as prof:
        assert SOURCE.time_device
        with opprof.record_function("block"):
            torch.ones(8, 8) @ torch.ones(8, 8)
    rec = prof.records()
    names = [rec.names[n] for n in rec.events["name"]]
    dev = dict(zip(names, rec.events["device_ns"].tolist(), strict=False))
    assert "aten::mm" in dev and dev["aten::mm"] == -1
    assert dev["block"] > 0
    with opprof.profile(capture=["torch"], cuda=False):
        assert not SOURCE.time_device
