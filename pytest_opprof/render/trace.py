"""Chrome trace export (JSON object format; opens in Perfetto and chrome://tracing)."""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from typing import Any


def chrome_trace(events: Sequence[Any], pid: int | None = None) -> dict[str, Any]:
    """The trace as a dict: one ``"X"`` event per call, ``ts``/``dur`` in us, ``tid`` = thread.

    ``args`` carries the input shapes and dtypes, the call site and the memory
    figures when present; metadata events name the process and each thread.
    """
    pid = os.getpid() if pid is None else pid
    out: list[dict[str, Any]] = [
        {"name": "process_name", "ph": "M", "pid": pid, "tid": 0, "args": {"name": "pytest-opprof"}}
    ]
    threads: dict[int, None] = {}
    for evt in events:
        time_range = getattr(evt, "time_range", None)
        if time_range is None:
            raise ValueError(
                "export_chrome_trace needs recorded events (prof.events()), not key averages"
            )
        threads.setdefault(evt.thread, None)
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
    for tid in threads:
        out.append(
            {
                "name": "thread_name",
                "ph": "M",
                "pid": pid,
                "tid": tid,
                "args": {"name": f"thread {tid}"},
            }
        )
    return {"traceEvents": out, "displayTimeUnit": "ms"}


def export_chrome_trace(events: Sequence[Any], path: str) -> None:
    """Write :func:`chrome_trace` of ``events`` to ``path``."""
    trace = chrome_trace(events)
    with open(path, "w", encoding="utf-8") as f:
        json.dump(trace, f, separators=(",", ":"))
