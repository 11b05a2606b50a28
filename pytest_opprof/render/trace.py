"""Chrome trace export (JSON object format; opens in Perfetto and chrome://tracing)."""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from typing import Any

import numpy as np

from pytest_opprof.capture.records import KIND_MEMORY
from pytest_opprof.gate.files import write_bytes

MEMORY_COUNTER_NAME = "CPU Memory"
"""The counter track of live bytes; its one series is ``"Total Allocated"`` (torch's arg name)."""


def chrome_trace(
    events: Sequence[Any], pid: int | None = None, memory_samples: np.ndarray | None = None
) -> dict[str, Any]:
    """The trace as a dict: one ``"X"`` event per call, ``ts``/``dur`` in us, ``tid`` = thread.

    ``args`` carries the input shapes and dtypes, the call site and the memory
    figures when present; metadata events name the process and each thread.
    ``"[memory]"`` events (an allocation or free outside any call) are thread
    instants (``"i"``) with their signed ``"Bytes"``, as torch writes them.
    ``memory_samples`` (``time_ns``, ``net_bytes``: see
    ``sources.memory_source.memory_samples``) become the :data:`MEMORY_COUNTER_NAME`
    counter track: bytes live above the profile's start, on the events' time axis.
    """
    pid = os.getpid() if pid is None else pid
    out: list[dict[str, Any]] = [
        {
            "name": "process_name",
            "ph": "M",
            "ts": 0,
            "pid": pid,
            "tid": 0,
            "args": {"name": "pytest-opprof"},
        }
    ]
    threads: dict[int, None] = {}
    for evt in events:
        time_range = getattr(evt, "time_range", None)
        if time_range is None:
            raise ValueError(
                "export_chrome_trace needs recorded events (prof.events()), not key averages"
            )
        threads.setdefault(evt.thread, None)
        if evt.kind == KIND_MEMORY:
            out.append(_memory_instant(evt, pid))
            continue
        args: dict[str, Any] = {"id": evt.id}
        if evt.cpu_parent is not None:
            args["parent id"] = evt.cpu_parent.id
        if evt.input_shapes:
            args["Input Dims"] = evt.input_shapes
        if getattr(evt, "input_dtypes", None):
            args["Input type"] = evt.input_dtypes
        if evt.stack:
            args["Call stack"] = ";".join(evt.stack)
        if evt.self_cpu_memory_usage or evt.cpu_memory_usage:
            args["Self CPU Mem (bytes)"] = evt.self_cpu_memory_usage
            args["CPU Mem (bytes)"] = evt.cpu_memory_usage
        if evt.device_time_total:
            args["Device time (us)"] = evt.device_time_total
        if evt.flops:
            args["FLOPs"] = evt.flops
        if evt.is_exception:
            args["exception"] = True
        out.append(
            {
                "name": evt.name,
                "cat": "cpu_op",
                "ph": "X",
                "ts": round(time_range.start, 3),
                "dur": round(time_range.elapsed_us(), 3),
                "pid": pid,
                "tid": evt.thread,
                "args": args,
            }
        )
    if memory_samples is not None:
        out.extend(_memory_counter(memory_samples, pid))
    for tid in threads:
        out.append(
            {
                "name": "thread_name",
                "ph": "M",
                "ts": 0,
                "pid": pid,
                "tid": tid,
                "args": {"name": f"thread {tid}"},
            }
        )
    return {"traceEvents": out, "displayTimeUnit": "ms"}


def _memory_instant(evt: Any, pid: int) -> dict[str, Any]:
    """A ``"[memory]"`` event as torch's trace has it: an instant on its thread."""
    return {
        "name": evt.name,
        "cat": "cpu_instant_event",
        "ph": "i",
        "s": "t",
        "ts": round(evt.time_range.start, 3),
        "pid": pid,
        "tid": evt.thread,
        # Device Type 0 is torch's CPU, Device Id -1 its "no device index".
        "args": {"Bytes": evt.self_cpu_memory_usage, "Device Type": 0, "Device Id": -1},
    }


def _memory_counter(samples: np.ndarray, pid: int) -> list[dict[str, Any]]:
    """One ``"C"`` event per live-bytes sample (ts in us, as the calls' ts)."""
    ts_us = np.round(samples["time_ns"] / 1000.0, 3).tolist()
    return [
        {
            "name": MEMORY_COUNTER_NAME,
            "ph": "C",
            "ts": ts,
            "pid": pid,
            "tid": 0,
            "args": {"Total Allocated": live},
        }
        for ts, live in zip(ts_us, samples["net_bytes"].tolist(), strict=True)
    ]


def export_chrome_trace(
    events: Sequence[Any], path: str, memory_samples: np.ndarray | None = None
) -> None:
    """Write :func:`chrome_trace` of ``events`` (and ``memory_samples``) to ``path``
    (through a symlink, FIFO or device as ``open`` would; see ``gate.files.write_bytes``)."""
    trace = chrome_trace(events, memory_samples=memory_samples)
    # ensure_ascii: op names are anyone's text, a lone surrogate included.
    write_bytes(path, json.dumps(trace, separators=(",", ":")).encode("ascii"))
