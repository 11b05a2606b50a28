"""Cost per captured op: pytest-opprof vs a Python wrapper vs sys.setprofile vs torch.profiler.

Run: ``python bench/bench_numpy_capture.py [--ops N] [--repeats R] [--json PATH]``.

Every figure is ns per op added over the same loop without any profiler, for
an op whose own cost is small (``np.add`` on 8 floats, ``torch.add`` on 8
floats for torch), so the capture cost shows.  "total" is everything a user
pays to get per-op figures out: start, the loop, exit (stop + drain) and a
key_averages-equivalent (per-name count and total time), amortised over N ops.
Variants run interleaved in each repeat, between two runs of the plain loop
(``plain`` first, ``plain_after`` last); a variant's added cost is taken against
the mean of the two, and the median over repeats is reported with its
interquartile range.

This VM runs the same loop 270-480 ns per ``np.add`` from one second to the
next, with thread CPU time equal to wall time: the core itself slows, nothing
preempts us.  Differences of runs tens of ms apart then carry that drift, so the
"at full speed" rows take the ratio of each run to its surrounding plain runs
(drift scales both) times the fastest plain run: the added cost at the
machine's own unloaded speed.

- opprof: native numpy capture (``profile(capture=["numpy"])``), without and
  with ``record_shapes``; "installed, idle" is the hook installed with no
  profile recording (what every op pays between tests in an ``--opprof``
  session).
- Python wrapper: ``np.add`` replaced by a Python function that reads the
  clock around the call and appends (name, start, end) to a list; collection
  groups the list by name.
- sys.setprofile: a callback that appends (event, name, time) for every call
  and return.  It never sees ufunc calls (they are not Python functions nor
  builtin functions), so the loop calls a one-line Python function around
  ``np.add`` and that function's call is what gets recorded; its baseline is the
  same loop unprofiled.
- torch.profiler (CPU activity) around ``torch.add``, with ``key_averages()``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from _common import fmt_spread, spread

import pytest_opprof as opprof
from pytest_opprof.capture.sources.numpy_source import SOURCE


def _ns(fn: Callable[[], object]) -> int:
    t0 = time.perf_counter_ns()
    fn()
    return time.perf_counter_ns() - t0


def _group(events: list[tuple[str, int, int]]) -> dict[str, tuple[int, int]]:
    """key_averages for a list of (name, start, end): {name: (count, total ns)}."""
    out: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for name, start, end in events:
        row = out[name]
        row[0] += 1
        row[1] += end - start
    return {k: (v[0], v[1]) for k, v in out.items()}


def numpy_variants(n: int) -> dict[str, Callable[[], Any]]:
    """name -> one run of n ops (returns a per-run detail dict or None)."""
    x, y, z = np.ones(8), np.ones(8), np.empty(8)
    add = np.add

    def plain() -> None:
        for _ in range(n):
            add(x, y, out=z)

    def idle() -> None:
        SOURCE.acquire()  # installed once per session by the plugin; per run here
        try:
            t0 = time.perf_counter_ns()
            plain()
            return {"loop": time.perf_counter_ns() - t0}  # type: ignore[return-value]
        finally:
            SOURCE.release()

    def recording(shapes: bool) -> Callable[[], dict[str, int]]:
        def run() -> dict[str, int]:
            t0 = time.perf_counter_ns()
            with opprof.profile(
                capture=["numpy"], record_shapes=shapes, profile_memory=False
            ) as prof:
                t1 = time.perf_counter_ns()
                plain()
                t2 = time.perf_counter_ns()
            t3 = time.perf_counter_ns()
            rows = prof.key_averages()
            t4 = time.perf_counter_ns()
            assert any(r.key == "numpy.add" and r.count == n for r in rows)
            return {"start": t1 - t0, "loop": t2 - t1, "exit": t3 - t2, "key_averages": t4 - t3}

        return run

    def wrapper() -> dict[str, int]:
        events: list[tuple[str, int, int]] = []
        append, clock = events.append, time.perf_counter_ns

        def wrapped(*args: Any, **kwargs: Any) -> Any:
            t0 = clock()
            try:
                return add(*args, **kwargs)
            finally:
                append(("numpy.add", t0, clock()))

        t0 = time.perf_counter_ns()
        for _ in range(n):
            wrapped(x, y, out=z)
        t1 = time.perf_counter_ns()
        assert _group(events)["numpy.add"][0] == n
        return {"loop": t1 - t0, "key_averages": time.perf_counter_ns() - t1}

    def via_python(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> None:
        add(a, b, out=c)

    def python_plain() -> None:
        for _ in range(n):
            via_python(x, y, z)

    def setprofile() -> dict[str, int]:
        log: list[tuple[str, str, int]] = []
        append, clock = log.append, time.perf_counter_ns

        def callback(frame: Any, event: str, arg: Any) -> None:
            append((event, frame.f_code.co_name, clock()))

        t0 = time.perf_counter_ns()
        sys.setprofile(callback)
        try:
            python_plain()
        finally:
            sys.setprofile(None)
        t1 = time.perf_counter_ns()
        pairs, open_at = [], {}
        for event, name, at in log:
            if event == "call":
                open_at[name] = at
            elif event == "return" and name in open_at:
                pairs.append((name, open_at.pop(name), at))
        assert _group(pairs)["via_python"][0] == n
        return {"loop": t1 - t0, "key_averages": time.perf_counter_ns() - t1}

    return {
        "plain": plain,
        "idle": idle,
        "opprof": recording(False),
        "opprof_shapes": recording(True),
        "wrapper": wrapper,
        "python_plain": python_plain,
        "setprofile": setprofile,
    }


def torch_variants(n: int) -> dict[str, Callable[[], Any]]:
    import torch
    from torch.profiler import ProfilerActivity, profile

    x, y, z = torch.ones(8), torch.ones(8), torch.empty(8)

    def plain() -> None:
        for _ in range(n):
            torch.add(x, y, out=z)

    def profiled() -> dict[str, int]:
        t0 = time.perf_counter_ns()
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            t1 = time.perf_counter_ns()
            plain()
            t2 = time.perf_counter_ns()
        t3 = time.perf_counter_ns()
        prof.key_averages()
        t4 = time.perf_counter_ns()
        return {"start": t1 - t0, "loop": t2 - t1, "exit": t3 - t2, "key_averages": t4 - t3}

    return {"torch_plain": plain, "torch": profiled}


def measure(ops: int, torch_ops: int, repeats: int) -> dict[str, Any]:
    """Run every variant ``repeats`` times, interleaved; rows of added ns per op."""
    variants = numpy_variants(ops)
    try:
        tvariants = torch_variants(torch_ops)
    except ImportError:
        tvariants = {}
    for run in (*variants.values(), *tvariants.values()):
        run()  # warm: imports, first-use setup, the specialising interpreter
    totals: dict[str, list[float]] = defaultdict(list)
    parts: dict[str, list[dict[str, int]]] = defaultdict(list)
    order = [*variants.items(), *tvariants.items(), ("plain_after", variants["plain"])]
    for _ in range(repeats):
        for name, run in order:
            detail: dict[str, int] | None = None

            def once(run: Callable[[], Any] = run) -> None:
                nonlocal detail
                detail = run()

            totals[name].append(_ns(once))
            if detail:
                parts[name].append(detail)

    # The plain loop around every variant: the mean of the repeat's first and last runs.
    totals["plain_around"] = [
        (a + b) / 2 for a, b in zip(totals["plain"], totals["plain_after"], strict=True)
    ]
    fastest_plain = min(min(totals["plain"]), min(totals["plain_after"]))

    def at_full_speed(name: str) -> dict[str, float]:
        """Added ns per op at the machine's fastest speed: ratio to the runs around it."""
        ratios = [t / b - 1 for t, b in zip(totals[name], totals["plain_around"], strict=True)]
        return spread([r * fastest_plain / ops for r in ratios])

    def added(name: str, base: str, per: int, part: str | None = None) -> dict[str, float]:
        if base == "plain":
            base = "plain_around"
        if part is None:
            vals = [(t - b) / per for t, b in zip(totals[name], totals[base], strict=True)]
        elif part in ("loop",):
            vals = [(p[part] - b) / per for p, b in zip(parts[name], totals[base], strict=True)]
        else:
            vals = [p[part] / per for p in parts[name]]
        return spread(vals)

    rows: dict[str, dict[str, float]] = {
        "numpy.add(8 floats) unprofiled, ns/op": spread([t / ops for t in totals["plain_around"]]),
        "opprof hook installed, idle": added("idle", "plain", ops, "loop"),
        "opprof recording: start (hooks installed)": added("opprof", "plain", ops, "start"),
        "opprof recording: in the loop": added("opprof", "plain", ops, "loop"),
        "opprof recording: exit (stop + drain)": added("opprof", "plain", ops, "exit"),
        "opprof recording: key_averages": added("opprof", "plain", ops, "key_averages"),
        "opprof recording: total": added("opprof", "plain", ops),
        "opprof with record_shapes: total": added("opprof_shapes", "plain", ops),
        "Python wrapper: in the loop": added("wrapper", "plain", ops, "loop"),
        "Python wrapper: total": added("wrapper", "plain", ops),
        "sys.setprofile: in the loop": added("setprofile", "python_plain", ops, "loop"),
        "sys.setprofile: total": added("setprofile", "python_plain", ops),
        "opprof recording: total, at full speed": at_full_speed("opprof"),
        "opprof with record_shapes: total, at full speed": at_full_speed("opprof_shapes"),
        "Python wrapper: total, at full speed": at_full_speed("wrapper"),
    }
    ratios: dict[str, dict[str, float]] = {}

    def ratio(label: str, a: str, a_base: str, a_n: int, b: str, b_base: str, b_n: int) -> None:
        vals = [
            ((ta - tab) / a_n) / ((tb - tbb) / b_n)
            for ta, tab, tb, tbb in zip(
                totals[a], totals[a_base], totals[b], totals[b_base], strict=True
            )
        ]
        ratios[label] = spread(vals)

    ratio(
        "Python wrapper / opprof (total)",
        "wrapper",
        "plain_around",
        ops,
        "opprof",
        "plain_around",
        ops,
    )
    ratio(
        "sys.setprofile / opprof (total)",
        "setprofile",
        "python_plain",
        ops,
        "opprof",
        "plain_around",
        ops,
    )
    if tvariants:
        rows["torch.add(8 floats) unprofiled, ns/op"] = spread(
            [t / torch_ops for t in totals["torch_plain"]]
        )
        rows["torch.profiler: in the loop"] = added("torch", "torch_plain", torch_ops, "loop")
        rows["torch.profiler: exit"] = added("torch", "torch_plain", torch_ops, "exit")
        rows["torch.profiler: key_averages"] = added(
            "torch", "torch_plain", torch_ops, "key_averages"
        )
        rows["torch.profiler: total"] = added("torch", "torch_plain", torch_ops)
        ratio(
            "torch.profiler / opprof (total)",
            "torch",
            "torch_plain",
            torch_ops,
            "opprof",
            "plain_around",
            ops,
        )
    return {
        "ops": ops,
        "torch_ops": torch_ops,
        "repeats": repeats,
        "unit": "ns per op",
        "rows": rows,
        "ratios": ratios,
    }


def print_result(result: dict[str, Any]) -> None:
    print(
        f"added ns per op, median [IQR] of {result['repeats']} repeats "
        f"({result['ops']} numpy ops, {result['torch_ops']} torch ops per run)"
    )
    width = max(map(len, result["rows"]))
    for name, s in result["rows"].items():
        print(f"  {name:<{width}}  {fmt_spread(s, 1)}")
    for name, s in result["ratios"].items():
        print(f"  {name:<{width}}  {fmt_spread(s, 1)}x")


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--ops", type=int, default=100_000, help="numpy ops per run")
    parser.add_argument("--torch-ops", type=int, default=10_000, help="torch ops per run")
    parser.add_argument("--repeats", type=int, default=21)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    if args.quick:
        args.ops, args.torch_ops, args.repeats = 5_000, 1_000, 3
    result = measure(args.ops, args.torch_ops, args.repeats)
    print_result(result)
    if args.json:
        args.json.write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
