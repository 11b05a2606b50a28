"""export_chrome_trace: seconds per 100,000 trace events, side by side in one run.

Three ways to write the same profile's trace, and torch.profiler's export:

- "streamed (profile)": ``prof.export_chrome_trace`` -- text from the records
  and their tree, a chunk at a time (render/trace.py);
- "streamed (events)": ``prof.events().export_chrome_trace`` from a fresh
  profile object's ``FunctionEvent`` list, the build of the list included;
- "old path": what the export did before: the ``FunctionEvent`` list, one
  dict per event, ``json.dump`` of the whole (reproduced here to time it);
- "torch.profiler": ``export_chrome_trace`` of a torch.profiler profile of
  ``torch.add`` calls (when torch is installed), per 100k events of its file.

The workload: ``--n`` iterations of a ``record_function`` scope around
``np.add`` of 8 floats (two events each, and a memory instant where the add
allocates outside a scope).

    python bench/bench_chrome_trace.py [--n 100000] [--repeats 5] [--json OUT.json]
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
from _common import fmt_spread, loadavg, spread

import pytest_opprof as opprof
from pytest_opprof.native_layout.records import KIND_MEMORY


def workload(n: int) -> opprof.profile:
    x = np.ones(8)
    with opprof.profile(capture=["numpy"]) as prof:
        for _ in range(n):
            with opprof.record_function("step"):
                np.add(x, x)
    return prof


def old_path(prof: opprof.profile, path: str) -> None:
    """The export before streaming: FunctionEvents, a dict per event, one json.dump."""
    events = opprof.profile.events(prof)
    pid = os.getpid()
    out: list[dict[str, Any]] = [
        {"name": "process_name", "ph": "M", "ts": 0, "pid": pid, "tid": 0, "args": {"name": "x"}}
    ]
    threads: dict[int, None] = {}
    for evt in events:
        threads.setdefault(evt.thread, None)
        if evt.kind == KIND_MEMORY:
            out.append(
                {
                    "name": evt.name,
                    "cat": "cpu_instant_event",
                    "ph": "i",
                    "s": "t",
                    "ts": round(evt.time_range.start, 3),
                    "pid": pid,
                    "tid": evt.thread,
                    "args": {"Bytes": evt.self_cpu_memory_usage},
                }
            )
            continue
        args: dict[str, Any] = {"id": evt.id}
        if evt.cpu_parent is not None:
            args["parent id"] = evt.cpu_parent.id
        if evt.input_shapes:
            args["Input Dims"] = evt.input_shapes
        if evt.input_dtypes:
            args["Input type"] = evt.input_dtypes
        if evt.self_cpu_memory_usage or evt.cpu_memory_usage:
            args["Self CPU Mem (bytes)"] = evt.self_cpu_memory_usage
            args["CPU Mem (bytes)"] = evt.cpu_memory_usage
        if evt.flops:
            args["FLOPs"] = evt.flops
        out.append(
            {
                "name": evt.name,
                "cat": "cpu_op",
                "ph": "X",
                "ts": round(evt.time_range.start, 3),
                "dur": round(evt.time_range.elapsed_us(), 3),
                "pid": pid,
                "tid": evt.thread,
                "args": args,
            }
        )
    for tid in threads:
        out.append({"name": "thread_name", "ph": "M", "ts": 0, "pid": pid, "tid": tid})
    with open(path, "w", encoding="utf-8") as f:
        json.dump({"traceEvents": out, "displayTimeUnit": "ms"}, f, separators=(",", ":"))


def fresh(prof: opprof.profile) -> opprof.profile:
    """A profile object with the same records and no cached events."""
    copy = opprof.profile.__new__(opprof.profile)
    copy.__dict__.update(prof.__dict__)
    copy._events = None
    return copy


def timed(fn: Any, prof: opprof.profile, path: str) -> tuple[float, float, int]:
    """(wall seconds, CPU seconds, trace events in the file written)."""
    t0, c0 = time.perf_counter(), time.process_time()
    fn(fresh(prof), path)
    seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
    with open(path, encoding="utf-8") as f:
        return seconds, cpu, len(json.load(f)["traceEvents"])


def torch_case(n: int, path: str) -> tuple[float, float, int] | None:
    try:
        import torch
        from torch.profiler import ProfilerActivity, profile
    except ImportError:
        return None
    x = torch.ones(8)
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(n):
            torch.add(x, x)
    prof.events()  # collected before the clock starts: the export alone is timed
    t0, c0 = time.perf_counter(), time.process_time()
    prof.export_chrome_trace(path)
    seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
    with open(path, encoding="utf-8") as f:
        return seconds, cpu, len(json.load(f)["traceEvents"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=100_000, help="loop iterations")
    parser.add_argument("--torch-n", type=int, default=50_000, help="torch.add calls")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    if args.quick:
        args.n, args.torch_n, args.repeats = 10_000, 5_000, 2
    prof = workload(args.n)
    cases = {
        "streamed (profile)": opprof.profile.export_chrome_trace,
        "streamed (events)": lambda p, path: p.events().export_chrome_trace(path),
        "old path": old_path,
    }
    labels = [*cases, "torch.profiler"]
    wall: dict[str, list[float]] = {label: [] for label in labels}
    cpu: dict[str, list[float]] = {label: [] for label in labels}
    sizes: dict[str, int] = {}
    with tempfile.TemporaryDirectory() as tmp:
        path = str(Path(tmp) / "trace.json")
        for _ in range(args.repeats):  # interleaved: drift hits every case alike
            runs = {label: timed(fn, prof, path) for label, fn in cases.items()}
            torch_run = torch_case(args.torch_n, path)
            if torch_run is not None:
                runs["torch.profiler"] = torch_run
            for label, (seconds, cpu_seconds, events) in runs.items():
                wall[label].append(seconds / events * 1e5)
                cpu[label].append(cpu_seconds / events * 1e5)
                sizes[label] = events
    rows = {
        label: {"wall": spread(wall[label]), "cpu": spread(cpu[label])}
        for label in labels
        if wall[label]
    }
    ratio = spread(
        [o / s for o, s in zip(wall["old path"], wall["streamed (profile)"], strict=True)]
    )
    print(
        f"export_chrome_trace, seconds per 100k trace events (median [IQR] of {args.repeats}); "
        f"load average {loadavg():.1f}"
    )
    print(f"{'':<20} {'wall':>24} {'CPU (process)':>24}")
    for label, parts in rows.items():
        print(
            f"{label:<20} {fmt_spread(parts['wall'], 3):>24} {fmt_spread(parts['cpu'], 3):>24}"
            f"   ({sizes[label]:,} events)"
        )
    print(f"old path / streamed (profile), wall: {fmt_spread(ratio, 1)}x")
    if args.json:
        result = {"n": args.n, "repeats": args.repeats, "rows": rows, "ratio": ratio}
        args.json.write_text(json.dumps({**result, "events": sizes}, indent=1))


if __name__ == "__main__":
    main()
