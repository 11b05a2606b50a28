"""Overhead per aten op: pytest-opprof's torch source vs torch.profiler vs a TorchDispatchMode.

Each variant runs the same loop of ``torch.add`` on small tensors (an aten op
whose own cost is small, so the profiler's share shows) inside one profile,
median of several repeats.  "loop" is the time inside the profile; "total"
adds start, stop and collection up to a key_averages() table's rows.  The
source collects with the native observer (``torch_observer.cpp``); the
"Kineto" variants are the same source collecting with Kineto, as it did before
the observer, and "per-event reader" the Kineto reader it had before the bulk
one (``bench/_torch_per_event.py``).  "records nothing" registers the
observer's callback and memory reporter with its recording switched off: what
torch's RecordFunction with inputs costs by itself, the floor of any observer.

``--phases`` splits the torch source's stop and collection per aten op, for
the observer (its stop, the bulk read of its buffers into a KinetoRead,
records, ``key_averages``) and for Kineto: Kineto's own stop (C++), the
``_KinetoEvent`` list, reading it (per-event and bulk, on the same list),
records on the core clock, freeing Kineto's result, and ``key_averages``; and
times Kineto's stop alone under lighter configs (no memory, no shapes,
``trace_only``), the floor of any Kineto-based source.

    .venv/bin/python bench/bench_torch_source.py [--ops 2000] [--repeats 7] [--phases]
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import time
from collections.abc import Callable, Iterator

import _common  # noqa: F401  # the checkout on sys.path
import torch
from _torch_per_event import read_events_per_event
from torch.utils._python_dispatch import TorchDispatchMode

import pytest_opprof as opprof
from pytest_opprof.capture.sources import torch_observer, torch_source
from pytest_opprof.model import key_averages


class CountingMode(TorchDispatchMode):  # type: ignore[no-untyped-call]  # torch's, untyped
    """The cheapest Python-per-op capture: count calls, nothing else."""

    def __init__(self) -> None:
        super().__init__()  # type: ignore[no-untyped-call]
        self.calls = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
        self.calls += 1
        return func(*args, **(kwargs or {}))


def run(variant: str, ops: int) -> tuple[float, float]:
    """(loop ns, total ns) for one repeat."""
    a, b = torch.ones(8), torch.ones(8)

    def loop() -> float:
        t0 = time.perf_counter_ns()
        for _ in range(ops):
            torch.add(a, b)
        return time.perf_counter_ns() - t0

    t0 = time.perf_counter_ns()
    if variant == "no profiler":
        inner = loop()
    elif variant == "opprof torch source":
        with opprof.profile(capture=["torch"], profile_memory=True) as prof:
            inner = loop()
        prof.key_averages()
    elif variant == "opprof torch source, Kineto (before)":
        with kineto(), opprof.profile(capture=["torch"], profile_memory=True) as prof:
            inner = loop()
        prof.key_averages()
    elif variant == "opprof torch, Kineto, per-event reader":
        with (
            kineto(),
            per_event_reader(),
            opprof.profile(capture=["torch"], profile_memory=True) as prof,
        ):
            inner = loop()
        prof.key_averages()
    elif variant == "opprof torch, no memory":
        with opprof.profile(capture=["torch"], profile_memory=False) as prof:
            inner = loop()
        prof.key_averages()
    elif variant == "observer registered, records nothing":
        observer, why_not = torch_observer.load()
        assert observer is not None, why_not
        observer.start(record=False)
        try:
            inner = loop()
        finally:
            observer.stop()
    elif variant == "torch.profiler":
        with torch.profiler.profile(record_shapes=True, profile_memory=True) as tp:
            inner = loop()
        tp.key_averages()
    elif variant == "torch.profiler, plain":
        with torch.profiler.profile() as tp:
            inner = loop()
        tp.key_averages()
    elif variant == "TorchDispatchMode (Python per op)":
        with CountingMode():
            inner = loop()
    else:
        raise ValueError(variant)
    return inner, time.perf_counter_ns() - t0


@contextlib.contextmanager
def kineto() -> Iterator[None]:
    """The plugin's torch source collecting with Kineto (its collector before the observer)."""
    source = torch_source.SOURCE
    collector, source.collector = source.collector, "kineto"
    try:
        yield
    finally:
        source.collector = collector


@contextlib.contextmanager
def per_event_reader() -> Iterator[None]:
    """The torch source reading Kineto's list one event at a time, as before."""
    bulk = torch_source.read_events
    torch_source.read_events = read_events_per_event
    try:
        yield
    finally:
        torch_source.read_events = bulk


PHASES = [
    "in the loop",
    "Kineto stop (_disable_profiler)",
    "events() list",
    "read: per-event (before)",
    "read: bulk (now)",
    "records on the core clock",
    "free Kineto's result",
    "key_averages",
]


def phases(ops: int) -> dict[str, float]:
    """ns per op of each phase of one profile of the torch source alone (memory on)."""
    a, b = torch.ones(8), torch.ones(8)
    src = torch_source.TorchSource()
    src.acquire()
    t: dict[str, float] = {}
    try:
        src.start_options()
        t0 = time.perf_counter_ns()
        for _ in range(ops):
            torch.add(a, b)
        t1 = time.perf_counter_ns()
        result = src.stop_kineto()
        t2 = time.perf_counter_ns()
        assert result is not None, "the source was recording"
        events = result.events()
        t3 = time.perf_counter_ns()
        read_events_per_event(events)
        t4 = time.perf_counter_ns()
        read = torch_source.read_events(events)
        t5 = time.perf_counter_ns()
        records = src.records_of(read)
        t6 = time.perf_counter_ns()
        del events, result
        t7 = time.perf_counter_ns()
        key_averages(records, profile_memory=True)
        t8 = time.perf_counter_ns()
    finally:
        src.release()
    ends = [t1, t2, t3, t4, t5, t6, t7, t8]
    starts = [t0, t1, t2, t3, t4, t5, t6, t7]
    for name, start, end in zip(PHASES, starts, ends, strict=True):
        t[name] = (end - start) / ops
    return t


OBSERVER_PHASES = [
    "observer: in the loop",
    "observer: stop (markers + remove callback)",
    "observer: read buffers (C++) + decode",
    "observer: records on the core clock",
    "observer: key_averages",
]


def observer_phases(ops: int) -> dict[str, float]:
    """ns per op of each phase of one profile of the observer source alone."""
    from torch._C import _profiler

    a, b = torch.ones(8), torch.ones(8)
    src = torch_source.TorchSource(collector="auto")
    src.acquire()
    try:
        src.start_options()
        observer = src._observer
        assert observer is not None, "the observer was built and recording"
        t0 = time.perf_counter_ns()
        for _ in range(ops):
            torch.add(a, b)
        t1 = time.perf_counter_ns()
        src._marker.emit(_profiler._RecordFunctionFast)
        src._observer = None
        observer.stop()
        t2 = time.perf_counter_ns()
        read = torch_observer.read(observer, torch_source.MARKER)
        t3 = time.perf_counter_ns()
        records = src.records_of(read)
        t4 = time.perf_counter_ns()
        key_averages(records, profile_memory=True)
        t5 = time.perf_counter_ns()
    finally:
        src.release()
    ends = [t1, t2, t3, t4, t5]
    starts = [t0, t1, t2, t3, t4]
    return {n: (e - s) / ops for n, s, e in zip(OBSERVER_PHASES, starts, ends, strict=True)}


KINETO_CONFIGS = {
    # name: (report_input_shapes, profile_memory, trace_only)
    "shapes + memory (the source's)": (True, True, False),
    "shapes": (True, False, False),
    "nothing": (False, False, False),
    "nothing, trace_only": (False, False, True),
}


def kineto_stop(ops: int) -> dict[str, float]:
    """ns per op of Kineto's own stop (``_disable_profiler``) under lighter configs."""
    from torch._C import _autograd, _profiler

    a, b = torch.ones(8), torch.ones(8)
    out = {}
    for name, (shapes, memory, trace_only) in KINETO_CONFIGS.items():
        config = _profiler.ProfilerConfig(
            _profiler.ProfilerState.KINETO,
            shapes,
            memory,
            False,
            False,
            False,
            _profiler._ExperimentalConfig(trace_only=trace_only),
            "",
        )
        activities = {_profiler.ProfilerActivity.CPU}
        _autograd._prepare_profiler(config, activities)
        _autograd._enable_profiler(config, activities, set())  # type: ignore[call-arg]
        for _ in range(ops):
            torch.add(a, b)
        t0 = time.perf_counter_ns()
        result = _autograd._disable_profiler()
        out[name] = (time.perf_counter_ns() - t0) / ops
        del result
    return out


def print_phases(runs: list[dict[str, float]], ops: int) -> None:
    print(f"\ntorch source phases, {ops} x torch.add(8 floats), memory on, median of {len(runs)}")
    print(f"{'phase':40} {'ns/op':>8}")
    for name in OBSERVER_PHASES:
        print(f"{name:40} {statistics.median(r[name] for r in runs):8.0f}")
    total = sum(statistics.median(r[n] for r in runs) for n in OBSERVER_PHASES)
    print(f"{'observer: sum':40} {total:8.0f}")
    for name in PHASES:
        print(f"{name:40} {statistics.median(r[name] for r in runs):8.0f}")
    for label, reader in (("before", "read: per-event (before)"), ("now", "read: bulk (now)")):
        total = sum(
            statistics.median(r[n] for r in runs)
            for n in PHASES
            if not n.startswith("read:") or n == reader
        )
        print(f"{'Kineto: sum, ' + label + ' reader':40} {total:8.0f}")
    print("\nKineto's stop alone (_disable_profiler), CPU activity, by config")
    print(f"{'config':40} {'ns/op':>8}")
    for name in KINETO_CONFIGS:
        print(f"{name:40} {statistics.median(r[name] for r in runs):8.0f}")


VARIANTS = [
    "no profiler",
    "opprof torch source",
    "opprof torch source, Kineto (before)",
    "opprof torch, Kineto, per-event reader",
    "opprof torch, no memory",
    "observer registered, records nothing",
    "torch.profiler",
    "torch.profiler, plain",
    "TorchDispatchMode (Python per op)",
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ops", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--phases", action="store_true", help="also split stop and collection")
    args = parser.parse_args()
    measure: Callable[[str], tuple[float, float]] = lambda v: run(v, args.ops)  # noqa: E731
    for v in VARIANTS:  # warm every path once
        measure(v)
    if args.phases:
        phases(args.ops)
        observer_phases(args.ops)
        kineto_stop(args.ops)
    results: dict[str, list[tuple[float, float]]] = {v: [] for v in VARIANTS}
    phase_runs: list[dict[str, float]] = []
    for _ in range(args.repeats):
        for v in VARIANTS:  # interleaved, so drift hits every variant alike
            results[v].append(measure(v))
        if args.phases:
            phase_runs.append(phases(args.ops) | observer_phases(args.ops) | kineto_stop(args.ops))
    base_loop = statistics.median(r[0] for r in results["no profiler"]) / args.ops
    base_total = statistics.median(r[1] for r in results["no profiler"]) / args.ops
    _, why_not = torch_source.SOURCE._observer_module(), torch_source.SOURCE.collector_reason
    print(f"torch {torch.__version__}; {args.ops} x torch.add(8 floats), median of {args.repeats}")
    print(f"observer: {'loaded' if why_not is None else 'not loaded: ' + why_not}")
    print(f"{'variant':40} {'loop ns/op':>11} {'+ns/op':>8} {'total ns/op':>12} {'+ns/op':>8}")
    for v in VARIANTS:
        loop_ns = statistics.median(r[0] for r in results[v]) / args.ops
        total_ns = statistics.median(r[1] for r in results[v]) / args.ops
        print(
            f"{v:40} {loop_ns:11.0f} {loop_ns - base_loop:8.0f} "
            f"{total_ns:12.0f} {total_ns - base_total:8.0f}"
        )
    if args.phases:
        print_phases(phase_runs, args.ops)


if __name__ == "__main__":
    main()
