"""Cost and accuracy of pytest-opprof's memory accounting.

0. The handler alone: ns per malloc+free of 64 bytes called from a C loop
   (compiled here with cffi) through numpy's default handler, through ours
   installed but idle, and through ours while recording inside a scope.
1. Added ns per numpy allocation (``np.empty(8)``: one allocation and one free
   per iteration) with the counting handler off / installed / installed and
   recording inside an open scope.
2. Added ns per Python allocation with the PyMem/object hooks off / on / on and
   recording (workload: ``object()``, which has no free list; the divisor is the number of
   allocations the hooks counted).
3. Peak and net bytes of one numpy workload as seen by opprof (numpy handler;
   numpy handler + Python hooks) and by ``tracemalloc`` (which also sees numpy
   data through numpy's tracemalloc domain, and every Python object).

Variants run interleaved, ``--repeats`` short runs each; medians are reported,
and the difference of minimums beside them (steadier on a shared machine).
Run: ``python bench/bench_memory.py [--n 20000] [--repeats 101]``.
"""

from __future__ import annotations

import argparse
import ctypes
import gc
import importlib
import statistics
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Callable
from typing import Any

import numpy as np
from cffi import FFI

from pytest_opprof import _native
from pytest_opprof.capture.sources.memory_source import (
    MemorySource,
    PythonMemorySource,
    memory_stats,
)

OPT_MEMORY = int(_native.lib.OPPROF_OPT_PROFILE_MEMORY)
OPT_MEMORY_EVENTS = int(_native.lib.OPPROF_OPT_MEMORY_EVENTS)


def numpy_loop(n: int) -> None:
    empty = np.empty
    for _ in range(n):
        empty(8)


def python_loop(n: int) -> None:
    new = object
    for _ in range(n):
        new()


def timed(loop: Callable[[int], None], n: int) -> float:
    """ns per iteration of one run."""
    gc.disable()
    t0 = time.perf_counter_ns()
    loop(n)
    dt = time.perf_counter_ns() - t0
    gc.enable()
    return dt / n


def run_variant(
    source: MemorySource | None, recording: bool, loop: Callable[[int], None], n: int
) -> tuple[float, int]:
    """(ns per iteration, allocations counted) for one variant."""
    if source is not None:
        source.acquire()
    try:
        if recording:
            _native.memory_reset()
            _native.start(OPT_MEMORY)
            _native.scope_push(_native.intern("bench"))
        ns = timed(loop, n)
        if recording:
            _native.scope_pop()
            _native.stop()
        return ns, _native.memory_counters().allocations
    finally:
        if source is not None:
            source.release()


def overhead(
    title: str, loop: Callable[[int], None], source: MemorySource, n: int, repeats: int
) -> None:
    variants = {"off": (None, False), "installed": (source, False), "recording": (source, True)}
    times: dict[str, list[float]] = {k: [] for k in variants}
    allocs = 0
    loop(n // 10)  # warm caches and the specialising interpreter
    for _ in range(repeats):
        for name, (src, rec) in variants.items():
            ns, counted = run_variant(src, rec, loop, n)
            times[name].append(ns)
            if rec:
                allocs = counted
    base = statistics.median(times["off"])
    per_iter = allocs / n if allocs else 1.0
    print(f"\n{title}  (n={n}, repeats={repeats}, allocations per iteration={per_iter:.2f})")
    low = min(times["off"])
    print(
        f"  {'variant':<10} {'ns/iter':>9} {'+ns/iter':>9} {'+ns/alloc':>10} {'+ns/alloc(min)':>15}"
    )
    for name, vals in times.items():
        med = statistics.median(vals)
        added_min = (min(vals) - low) / per_iter
        print(
            f"  {name:<10} {med:9.1f} {med - base:+9.1f} {(med - base) / per_iter:+10.1f}"
            f" {added_min:+15.1f}"
        )


LOOP_C = """
typedef struct {
    void *ctx;
    void *(*malloc)(void *, size_t);
    void *(*calloc)(void *, size_t, size_t);
    void *(*realloc)(void *, void *, size_t);
    void (*free)(void *, void *, size_t);
} alloc_t;
typedef struct { char name[127]; uint8_t version; alloc_t a; } handler_t;
static int64_t now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1000000000LL + t.tv_nsec;
}
double loop(uintptr_t handler, int64_t n, size_t size) {
    handler_t *h = (handler_t *)handler;
    int64_t t0 = now_ns();
    for (int64_t i = 0; i < n; i++) h->a.free(h->a.ctx, h->a.malloc(h->a.ctx, size), size);
    return (double)(now_ns() - t0) / (double)n;
}
"""


def compile_loop() -> Any:
    """The C malloc+free loop as a cffi module built in a temporary directory."""
    ffi = FFI()
    ffi.cdef("double loop(uintptr_t handler, int64_t n, size_t size);")
    ffi.set_source("_opprof_bench_loop", "#include <stdint.h>\n#include <time.h>\n" + LOOP_C)
    tmp = tempfile.mkdtemp(prefix="opprof-bench-")
    ffi.compile(tmpdir=tmp)
    sys.path.insert(0, tmp)
    return importlib.import_module("_opprof_bench_loop").lib


class _ArrayFields(ctypes.Structure):
    """numpy's public PyArrayObject_fields (ndarraytypes.h, numpy >= 1.22) up to mem_handler."""

    _fields_ = [
        ("ob_refcnt", ctypes.c_ssize_t),
        ("ob_type", ctypes.c_void_p),
        ("data", ctypes.c_void_p),
        ("nd", ctypes.c_int),
        ("dimensions", ctypes.c_void_p),
        ("strides", ctypes.c_void_p),
        ("base", ctypes.c_void_p),
        ("descr", ctypes.c_void_p),
        ("flags", ctypes.c_int),
        ("weakreflist", ctypes.c_void_p),
        ("_buffer_info", ctypes.c_void_p),
        ("mem_handler", ctypes.py_object),
    ]


def handler_address(arr: np.ndarray) -> int:
    """Address of the PyDataMem_Handler an array was allocated with."""
    get = ctypes.pythonapi.PyCapsule_GetPointer
    get.restype = ctypes.c_void_p
    get.argtypes = [ctypes.py_object, ctypes.c_char_p]
    return int(get(_ArrayFields.from_address(id(arr)).mem_handler, b"mem_handler"))


def handler_alone(repeats: int) -> None:
    lib = compile_loop()
    default = handler_address(np.empty(1))
    source = MemorySource()
    source.acquire()
    try:
        ours = handler_address(np.empty(1))
        n = 200_000
        times: dict[str, list[float]] = {
            "default": [],
            "ours idle": [],
            "ours recording": [],
            "ours, no op open": [],
            "ours, no op, events": [],
        }
        # Outside any open op: summed into one [memory] record per thread (the plugin's
        # setting), or one [memory] event per allocation and free (a trace's); the events'
        # run is shorter (its buffers would grow by a chunk of huge pages every 65,536).
        loose = {
            "ours, no op open": (OPT_MEMORY, n),
            "ours, no op, events": (OPT_MEMORY | OPT_MEMORY_EVENTS, n // 10),
        }
        for _ in range(repeats):
            times["default"].append(lib.loop(default, n, 64))
            times["ours idle"].append(lib.loop(ours, n, 64))
            _native.memory_reset()
            _native.start(OPT_MEMORY)
            _native.scope_push(_native.intern("bench"))
            times["ours recording"].append(lib.loop(ours, n, 64))
            _native.scope_pop()
            _native.stop()
            for name, (options, count) in loose.items():
                _native.memory_reset()
                _native.start(options)
                times[name].append(lib.loop(ours, count, 64))
                _native.stop()
                _native.drain()
    finally:
        source.release()
    base, low = statistics.median(times["default"]), min(times["default"])
    print(f"\nhandler alone, C loop of malloc+free (64 bytes), n={n}, repeats={repeats}")
    print(f"  {'variant':<20} {'ns/pair':>8} {'+ns/pair':>9} {'+ns/pair(min)':>14}")
    for name, vals in times.items():
        med = statistics.median(vals)
        print(f"  {name:<20} {med:8.1f} {med - base:+9.1f} {min(vals) - low:+14.1f}")


def workload() -> list[np.ndarray]:
    a = np.ones(10**6)  # 8 MB
    b = a * 2.0  # 8 MB
    c = np.concatenate([a, b])  # 16 MB
    del a, b
    d = np.resize(c, 3 * 10**6)  # 24 MB
    del c
    parts = [np.arange(1000) for _ in range(100)]  # 100 x 8 kB
    return [d, *parts]


def opprof_figures(python: bool) -> tuple[int, int, int]:
    """(peak, net, total allocated) bytes of the workload under opprof."""
    sources: list[MemorySource] = [MemorySource()] + ([PythonMemorySource()] if python else [])
    for s in sources:
        s.acquire()
    try:
        _native.memory_reset()
        _native.start(OPT_MEMORY)
        _native.scope_push(_native.intern("workload"))
        kept = workload()
        _native.scope_pop()
        _native.stop()
        _native.drain()
    finally:
        for s in reversed(sources):
            s.release()
    stats = memory_stats()
    del kept
    return stats.peak_bytes, stats.leaked_bytes, stats.allocated_bytes


def tracemalloc_figures() -> tuple[int, int]:
    """(peak, net) bytes of the workload under tracemalloc (all domains)."""
    gc.collect()
    tracemalloc.start()
    start, _ = tracemalloc.get_traced_memory()
    tracemalloc.reset_peak()
    kept = workload()
    gc.collect()
    end, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    del kept
    return peak - start, end - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=20_000, help="iterations per run")
    parser.add_argument("--repeats", type=int, default=101, help="runs per variant")
    args = parser.parse_args()
    print(f"clock: {_native.clock_source()}, numpy {np.__version__}")
    handler_alone(max(7, args.repeats // 3))
    overhead("numpy np.empty(8), NEP 49 handler", numpy_loop, MemorySource(), args.n, args.repeats)
    overhead(
        "Python object(), PyMem/object hooks",
        python_loop,
        PythonMemorySource(),
        args.n,
        args.repeats,
    )
    print("\nworkload figures (bytes)")
    print(f"  {'who':<28} {'peak':>12} {'net':>12} {'allocated':>12}")
    for python in (False, True):
        peak, net, total = opprof_figures(python)
        who = "opprof numpy" + (" + python" if python else "")
        print(f"  {who:<28} {peak:12d} {net:12d} {total:12d}")
    peak, net = tracemalloc_figures()
    print(f"  {'tracemalloc (all domains)':<28} {peak:12d} {net:12d} {'n/a':>12}")


if __name__ == "__main__":
    main()
