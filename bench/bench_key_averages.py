"""key_averages over synthetic sessions: pytest-opprof's vectorised path vs torch's EventList.

The default rows run the one-pass C kernel (records in drain order); the
"numpy path" row is the path taken for records the pass refuses (torch's
unknown parents, merged records).  Events come in blocks of 13 (a scope
holding 4 ops, each holding 2 ops: depth 3) named from a pool of 50, on 2
threads, with ~100 distinct input shapes.  Ours is
timed from the raw records (tree building included); torch's from FunctionEvents
already linked (its tree is built at profile exit, outside key_averages).

    .venv/bin/python bench/bench_key_averages.py [--events 1000000] [--torch-events 1000000]
        [--repeats 5] [--quick] [--json PATH]

Medians over repeats with the interquartile range; the torch / opprof ratio is
taken per event on the same synthetic session size when both ran on it.
"""

from __future__ import annotations

import argparse
import functools
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from _common import fmt_spread, spread

from pytest_opprof.model import build_events, key_averages
from pytest_opprof.model.averages import average_records
from pytest_opprof.native_layout.records import EVENT_DTYPE, KIND_NUMPY, KIND_SCOPE, Records

BLOCK = 13  # scope, then 4 x (op, sub-op, sub-op)
N_NAMES = 50
N_SHAPES = 100


def synthetic_records(n_events: int, seed: int = 0) -> Records:
    """About ``n_events`` well-nested events with native ids and parents."""
    rng = np.random.default_rng(seed)
    blocks = max(1, n_events // BLOCK)
    base = np.arange(blocks, dtype=np.int64)[:, None] * 100_000
    pos = np.arange(BLOCK)
    op = np.maximum(pos - 1, 0) // 3  # which of the 4 ops a row belongs to
    sub = np.maximum(pos - 1, 0) % 3  # 0 = the op itself, 1-2 = its sub-ops
    start = np.where(
        pos == 0, 0, 1_000 + op * 20_000 + np.where(sub == 0, 0, 1_000 + (sub - 1) * 8_000)
    )
    length = np.where(pos == 0, 90_000, np.where(sub == 0, 18_000, 7_000))
    parent_pos = np.where(pos == 0, -1, np.where(sub == 0, 0, pos - sub))
    depth = np.where(pos == 0, 0, np.where(sub == 0, 1, 2))
    jitter = rng.integers(0, 500, size=(blocks, BLOCK))
    ev = np.zeros(blocks * BLOCK, dtype=EVENT_DTYPE)
    ev["start_ns"] = (base + start).ravel()
    ev["end_ns"] = (base + start + length - jitter).ravel()
    ids = np.arange(blocks * BLOCK, dtype=np.int64) + 1
    ev["id"] = ids
    block_first = (np.arange(blocks)[:, None] * BLOCK + 1).repeat(BLOCK, axis=1)
    ev["parent"] = np.where(parent_pos >= 0, block_first + parent_pos, -1).ravel()
    ev["thread"] = (np.arange(blocks) % 2 + 1).repeat(BLOCK)
    ev["name"] = rng.integers(0, N_NAMES, size=blocks * BLOCK)
    ev["kind"] = np.where(pos == 0, KIND_SCOPE, KIND_NUMPY)[None, :].repeat(blocks, 0).ravel()
    ev["shape"] = rng.integers(1, N_SHAPES, size=blocks * BLOCK)
    ev["depth"] = np.tile(depth, blocks)
    ev["self_alloc_bytes"] = rng.integers(0, 4096, size=blocks * BLOCK)
    # The native drain hands events over per thread, each committed at its end.
    ev = ev[np.lexsort((ev["end_ns"], ev["thread"]))]
    shapes: list[list[list[int] | None]] = [[]] + [
        [[int(i), 8], [8, int(i) % 7 + 1]] for i in range(1, N_SHAPES)
    ]
    names = [f"numpy.op{i}" for i in range(N_NAMES - 1)] + ["numpy.matmul"]
    return Records(
        events=ev,
        names=names,
        shapes=shapes,
        dtypes=[["float64"] * len(s) for s in shapes],
    )


def torch_events(records: Records) -> Any:
    """The same session as torch FunctionEvents, linked, in a tree-built EventList."""
    from torch.autograd.profiler_util import EventList, FunctionEvent

    events = build_events(records)
    objs = {}
    out = []
    for e in events:
        t = FunctionEvent(  # type: ignore[no-untyped-call]  # torch's own, untyped
            id=e.id,
            name=e.name,
            thread=e.thread,
            start_us=e.time_range.start,
            end_us=e.time_range.end,
            input_shapes=e.input_shapes,
            stack=[],
            cpu_memory_usage=e.cpu_memory_usage,
        )
        objs[e.id] = t
        if e.cpu_parent is not None:
            parent = objs[e.cpu_parent.id]
            parent.append_cpu_child(t)  # type: ignore[no-untyped-call]
            t.set_cpu_parent(parent)  # type: ignore[no-untyped-call]
        out.append(t)
    result = EventList(out, profile_memory=True, with_flops=False)  # type: ignore[no-untyped-call]
    result._tree_built = True
    return result


def times_s(fn: Callable[[], object], repeats: int) -> list[float]:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--torch-events", type=int, default=1_000_000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--torch-repeats", type=int, default=3)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    if args.quick:
        args.events, args.torch_events, args.repeats, args.torch_repeats = 100_000, 10_000, 3, 1

    rows: list[dict[str, Any]] = []

    def row(what: str, n: int, times: list[float]) -> None:
        s = spread([t / n * 1e9 for t in times])
        rows.append({"what": what, "events": n, "seconds": spread(times), "ns_per_event": s})

    sizes = sorted({args.events, args.torch_events}, reverse=True)
    for n in sizes:
        rec = synthetic_records(n)
        n = len(rec)
        row(
            "opprof key_averages (C pass)",
            n,
            times_s(functools.partial(key_averages, rec, profile_memory=True), args.repeats),
        )
        row(
            "opprof key_averages + flops (profile())",
            n,
            times_s(functools.partial(key_averages, rec, with_flops=True), args.repeats),
        )
        row(
            "opprof key_averages + flops, numpy path",
            n,
            times_s(
                functools.partial(average_records, rec, with_flops=True, native=False),
                args.repeats,
            ),
        )
        row(
            "opprof key_averages by shape + flops",
            n,
            times_s(
                functools.partial(key_averages, rec, group_by_input_shape=True, with_flops=True),
                args.repeats,
            ),
        )
        if n == len(synthetic_records(args.torch_events)) or len(sizes) == 1:
            obj = build_events(rec)
            row(
                "opprof EventList.key_averages (objects)",
                n,
                times_s(obj.key_averages, min(args.repeats, 3)),
            )
            del obj
            tev = torch_events(rec)
            row("torch EventList.key_averages", n, times_s(tev.key_averages, args.torch_repeats))
            del tev

    print(f"{'what':42} {'events':>10} {'median s':>10} {'ns/event [IQR]':>22}")
    for r in rows:
        sec, per = r["seconds"], r["ns_per_event"]
        print(f"{r['what']:42} {r['events']:>10,} {sec['median']:>10.3f} {fmt_spread(per, 1):>22}")
    torch_rows = [r for r in rows if r["what"] == "torch EventList.key_averages"]
    ratio = None
    if torch_rows:
        n = torch_rows[0]["events"]
        ours = next(r for r in rows if r["events"] == n and r["what"].startswith("opprof key_av"))
        ratio = torch_rows[0]["ns_per_event"]["median"] / ours["ns_per_event"]["median"]
        print(f"\ntorch / opprof per event at {n:,} events: {ratio:.0f}x")
    if args.json:
        args.json.write_text(json.dumps({"rows": rows, "torch_over_opprof": ratio}, indent=1))


if __name__ == "__main__":
    main()
