"""key_averages over synthetic sessions: pytest-opprof's vectorised path vs torch's EventList.

The default rows run the one-pass C kernel (records in drain order); the
"numpy path" row is the fallback used without the extension or for merged
records.  Events come in blocks of 13 (a scope holding 4 ops, each holding 2 ops: depth 3)
named from a pool of 50, on 2 threads, with ~100 distinct input shapes.  Ours is
timed from the raw records (tree building included); torch's from FunctionEvents
already linked (its tree is built at profile exit, outside key_averages).

    .venv/bin/python bench/bench_key_averages.py [--events 1000000] [--torch-events 100000]
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import numpy as np

from pytest_opprof.model import build_events, key_averages
from pytest_opprof.model.averages import average_records
from pytest_opprof.records import EVENT_DTYPE, KIND_NUMPY, KIND_SCOPE, Records

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
    shapes = [[]] + [[[int(i), 8], [8, int(i) % 7 + 1]] for i in range(1, N_SHAPES)]
    names = [f"numpy.op{i}" for i in range(N_NAMES - 1)] + ["numpy.matmul"]
    return Records(
        events=ev,
        names=names,
        shapes=shapes,
        dtypes=[["float64"] * len(s) for s in shapes],
    )


def torch_events(records: Records) -> object:
    """The same session as torch FunctionEvents, linked, in a tree-built EventList."""
    from torch.autograd.profiler_util import EventList, FunctionEvent

    events = build_events(records)
    objs = {}
    out = []
    for e in events:
        t = FunctionEvent(
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
            parent.append_cpu_child(t)
            t.set_cpu_parent(parent)
        out.append(t)
    result = EventList(out, profile_memory=True, with_flops=False)
    result._tree_built = True
    return result


def median_s(fn: Callable[[], object], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--torch-events", type=int, default=100_000)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()

    rows = []
    big = synthetic_records(args.events)
    small = synthetic_records(args.torch_events)
    for label, rec in ((f"{len(big):,}", big), (f"{len(small):,}", small)):
        s = median_s(lambda r=rec: key_averages(r, profile_memory=True), args.repeats)
        rows.append(("opprof key_averages (vectorised)", label, s, s / len(rec) * 1e9))
        s = median_s(lambda r=rec: key_averages(r, with_flops=True), args.repeats)
        rows.append(("opprof key_averages + flops (profile())", label, s, s / len(rec) * 1e9))
        s = median_s(lambda r=rec: average_records(r, with_flops=True, native=False), args.repeats)
        rows.append(("opprof key_averages + flops, numpy path", label, s, s / len(rec) * 1e9))
        s_flops = median_s(
            lambda r=rec: key_averages(r, group_by_input_shape=True, with_flops=True), args.repeats
        )
        rows.append(
            ("opprof key_averages by shape + flops", label, s_flops, s_flops / len(rec) * 1e9)
        )

    obj = build_events(small)
    s = median_s(obj.key_averages, args.repeats)
    rows.append(
        ("opprof EventList.key_averages (objects)", f"{len(small):,}", s, s / len(small) * 1e9)
    )

    tev = torch_events(small)
    s = median_s(tev.key_averages, max(1, min(args.repeats, 3)))  # type: ignore[attr-defined]
    rows.append(("torch EventList.key_averages", f"{len(small):,}", s, s / len(small) * 1e9))

    print(f"{'what':42} {'events':>10} {'median':>10} {'ns/event':>10}")
    for what, n, sec, per in rows:
        print(f"{what:42} {n:>10} {sec * 1e3:>8.1f}ms {per:>10.1f}")
    ours = rows[0][3]
    theirs = rows[-1][3]
    print(f"\nper-event: torch / opprof (vectorised, {rows[0][1]} events) = {theirs / ours:.0f}x")


if __name__ == "__main__":
    main()
