"""CUDA device time of ops and scopes, from CUDA event pairs (``native/cuda.c``).

A helper source (not a ``--opprof-capture`` name): :class:`~pytest_opprof.capture.recorder.Recorder`
adds it when CUDA is in use.  While recording, the native core records a CUDA
event on the legacy default stream at the begin and end of every
``sample_rate``-th call of each op or scope name; nothing synchronises until
the profile stops.  :meth:`CudaSource.attach` then reads the elapsed times and
writes them into the drained records' ``device_ns``:

* ``device_ns`` is the event's own device time: its pair's elapsed time minus
  the elapsed times of the timed events nearest below it (an unsampled event
  between them is passed over: it has no figure of its own), scaled by (calls
  of its name) / (timed calls of its name) in the profile, so that the sum over
  a name's events estimates the total over every call (the scale is
  ``sample_rate`` when the call count is a multiple of it, 1 when every call
  was timed);
* an event whose call was not sampled keeps ``device_ns == -1`` (not measured);
* torch's ops with a CUDA input are timed the same way by the torch observer
  (their pairs on the current stream of the op's device, sampled by the same
  rate), and nest with the rest.

The elapsed time of a pair is the device time between the two records on the
stream, gaps included: device work the op enqueued, plus idle time when the
host was slower than the device.

The runtime is found, in order: ``$OPPROF_CUDART``; a ``libcudart`` this
process already loaded (torch's, CuPy's); torch's ``torch/lib``; the
``nvidia-cuda-runtime`` wheel (``nvidia/cuda_runtime/lib``); CuPy's package
directory; the system's ``libcudart.so``.

Device memory per profile (:class:`DeviceMemoryStats`): with torch's CUDA
initialised, the peak of ``torch.cuda.max_memory_allocated()`` above the
allocated bytes at start (the peak is reset at start); otherwise the growth of
``cudaMemGetInfo``'s used bytes between start and stop (a lower bound of the
peak: only the two ends are sampled).
"""

from __future__ import annotations

import dataclasses
import glob
import importlib.util
import os
import sys
from dataclasses import dataclass

import numpy as np

from pytest_opprof import _native
from pytest_opprof.errors import NativeError, OpprofError
from pytest_opprof.native_layout.records import Records

ENV_PATH = "OPPROF_CUDART"
DEFAULT_MAX_PAIRS = 1 << 20
SYSTEM_NAMES = ("libcudart.so", "libcudart.so.13", "libcudart.so.12", "libcudart.so.11.0")


@dataclass(frozen=True)
class DeviceMemoryStats:
    """Device memory of one profile, bytes; ``method`` says how it was measured."""

    peak_bytes: int
    method: str  # "torch.cuda" or "cudaMemGetInfo"


def _package_dirs(name: str) -> list[str]:
    spec = importlib.util.find_spec(name) if name not in sys.modules else sys.modules[name].__spec__
    if spec is None or not spec.submodule_search_locations:
        return []
    return list(spec.submodule_search_locations)


def _loaded_cudart() -> list[str]:
    """``libcudart`` files already mapped into this process (torch's, CuPy's)."""
    try:
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as f:
            paths = {line.split()[-1] for line in f if "libcudart" in line}
    except OSError:
        return []
    return sorted(p for p in paths if p.startswith("/"))


def candidate_paths() -> list[str]:
    """Where to look for the CUDA runtime, in order (see the module docstring)."""
    env = os.environ.get(ENV_PATH)
    if env:
        return [env]
    found = _loaded_cudart()
    try:
        for base in _package_dirs("torch"):
            found += sorted(glob.glob(os.path.join(base, "lib", "libcudart*.so*")))
        for base in _package_dirs("nvidia"):
            found += sorted(glob.glob(os.path.join(base, "cuda_runtime", "lib", "libcudart.so*")))
        for base in _package_dirs("cupy"):
            found += sorted(glob.glob(os.path.join(base, "**", "libcudart.so*"), recursive=True))
    except (ImportError, ValueError):
        pass
    return [*dict.fromkeys(found), *SYSTEM_NAMES]


def load_runtime() -> str | None:
    """Load the CUDA runtime; returns why it cannot be used, or None when loaded."""
    if _native.cuda_loaded_path() is not None:
        return None
    reasons = []
    for path in candidate_paths():
        try:
            _native.cuda_load(path)
        except NativeError as exc:
            reasons.append(str(exc))
            continue
        return None
    if os.environ.get(ENV_PATH):
        return reasons[-1]
    return "no usable CUDA runtime (libcudart) found" + (
        f"; last: {reasons[-1]}" if reasons else ""
    )


def _torch_cuda_in_use() -> bool:
    torch = sys.modules.get("torch")
    return bool(torch is not None and torch.cuda.is_initialized())


def cuda_in_use() -> bool:
    """True when this process already uses CUDA (torch's CUDA initialised) or $OPPROF_CUDART is set.

    ``profile(cuda=None)`` times device work only then, so a CPU-only test
    suite on a GPU machine never creates a CUDA context because of the profiler.
    """
    return bool(os.environ.get(ENV_PATH)) or _torch_cuda_in_use()


class CudaSource:
    """The "cuda" helper source: CUDA event timing and device memory (module docstring)."""

    name = "cuda"

    def __init__(self) -> None:
        self.sample_rate = 1
        self.max_pairs = DEFAULT_MAX_PAIRS
        self.reason: str | None = None
        self.device_memory: DeviceMemoryStats | None = None
        self._refs = 0
        self._start_used = 0
        self._start_torch = -1

    def available(self) -> bool:
        """True when a CUDA runtime with a device loads; ``reason`` says why not."""
        self.reason = load_runtime()
        return self.reason is None

    def configure(self, sample_rate: int) -> None:
        """Time every ``sample_rate``-th call of each op name (1 = every call)."""
        if isinstance(sample_rate, bool) or not isinstance(sample_rate, int) or sample_rate < 1:
            raise OpprofError(f"cuda_sample_rate must be an integer >= 1, got {sample_rate!r}")
        self.sample_rate = sample_rate

    def acquire(self) -> None:
        self._refs += 1

    def release(self) -> None:
        if self._refs > 0:
            self._refs -= 1

    def start_options(self) -> int:
        """Per profile, before the native start: reset the counters, open the memory window."""
        _native.cuda_configure(self.sample_rate, self.max_pairs)
        self.device_memory = None
        if _torch_cuda_in_use():
            import torch

            torch.cuda.reset_peak_memory_stats()
            self._start_torch = int(torch.cuda.memory_allocated())
        else:
            self._start_torch = -1
            free, total = _native.cuda_mem_info()
            self._start_used = total - free
        return int(_native.lib.OPPROF_OPT_CUDA)

    def collect(self) -> None:
        """Device times go into the native records (:meth:`attach`), not new records."""
        return None

    def attach(self, records: Records) -> Records:
        """After stop: resolve the event pairs and write ``device_ns`` (module docstring).

        The torch observer's ops come with their pairs' elapsed times already in
        ``device_ns`` (children included); they are made own times here with the
        core's pairs, so a scope around torch ops does not count their time twice."""
        ids, elapsed = _native.cuda_resolve()
        self.device_memory = self._device_memory()
        events = records.events
        if len(events) == 0:
            return records
        timed = events["device_ns"].astype(np.int64)
        if len(ids):
            order = np.argsort(events["id"], kind="stable")
            sorted_ids = events["id"][order]
            pos = np.minimum(np.searchsorted(sorted_ids, ids), len(sorted_ids) - 1)
            found = sorted_ids[pos] == ids
            timed[order[pos[found]]] = elapsed[found]
        if not (timed >= 0).any():
            return records
        events = events.copy()
        events["device_ns"] = own_device_times(events, timed)
        return dataclasses.replace(records, events=events)

    def _device_memory(self) -> DeviceMemoryStats:
        if self._start_torch >= 0 and _torch_cuda_in_use():
            import torch

            peak = int(torch.cuda.max_memory_allocated()) - self._start_torch
            return DeviceMemoryStats(peak_bytes=max(peak, 0), method="torch.cuda")
        free, total = _native.cuda_mem_info()
        return DeviceMemoryStats(
            peak_bytes=max(total - free - self._start_used, 0), method="cudaMemGetInfo"
        )


def own_device_times(events: np.ndarray, timed: np.ndarray) -> np.ndarray:
    """Each timed event's own device time from the elapsed times of its pair (``timed``,
    children included; -1 where not timed): minus the elapsed times of the timed
    events nearest below it, scaled by (calls of its name) / (timed calls of its
    name).  -1 stays -1.  Parents are the records' (native ids, or intervals on a
    thread with torch ops), so a torch op inside a scope is subtracted from the scope.
    """
    from pytest_opprof.native_layout.parents import parent_rows

    parent = parent_rows(events)
    # The nearest timed ancestor: an untimed (unsampled) one is passed over.
    above = parent.copy()
    while True:
        up = (above >= 0) & (timed[np.maximum(above, 0)] < 0)
        if not up.any():
            break
        above[up] = parent[above[up]]
    inner = (timed >= 0) & (above >= 0)
    children = np.zeros(len(events), dtype=np.int64)
    np.add.at(children, above[inner], timed[inner])
    names = events["name"].astype(np.int64)
    calls = np.bincount(names)
    timed_calls = np.bincount(names[timed >= 0], minlength=len(calls))
    scale = calls[names] / np.maximum(timed_calls[names], 1)
    own_raw = np.maximum(timed - children, 0)
    own: np.ndarray = np.where(timed >= 0, np.rint(own_raw * scale).astype(np.int64), -1)
    return own
