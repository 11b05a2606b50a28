"""Per-op cost of record_shapes for ndarray-only calls: this checkout against another build.

Run: ``python bench/bench_argument_recording.py --baseline DIR [--ops N] [--repeats R]``

``DIR`` is a checkout with its extension built (``git archive REF | tar -x -C DIR``,
then ``python setup.py build_ext --inplace`` there): the figure the argument
recording (lists measured in C, keywords placed, ints by value) must
stay within 10% of.  Each repeat starts one child per build, in alternating
order, so both sides see the same machine drift; a child times each op in a
plain loop and in the same loop under ``profile(capture=["numpy"],
record_shapes=True)`` (in-loop cost) and with exit and ``key_averages()``
(total cost), five times alternated, and reports the ns the fastest profiled
run adds per op to the fastest plain one (on a shared machine the fastest run
is the least disturbed).  The medians over repeats and their ratio (this
checkout / baseline) are printed.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from _common import REPO, machine_line, subprocess_env

CHILD = r"""
import json, sys, time
import numpy as np
import pytest_opprof as opprof

n = int(sys.argv[1])
a, b, c = np.ones(8), np.ones(8), np.empty(8)
m = np.ones((4, 4))
ops = {
    "np.add(a, b, out=c)": lambda: np.add(a, b, out=c),
    "a + b": lambda: a + b,
    "np.dot(m, m)": lambda: np.dot(m, m),
    "np.add.reduce(a)": lambda: np.add.reduce(a),
    "a.sum()": lambda: a.sum(),
}


def loop(fn):
    t0 = time.thread_time_ns()
    for _ in range(n):
        fn()
    return time.thread_time_ns() - t0


def profiled(fn):
    t0 = time.thread_time_ns()
    with opprof.profile(capture=["numpy"], record_shapes=True, profile_memory=False) as prof:
        inside = loop(fn)
    prof.key_averages()
    return inside, time.thread_time_ns() - t0


out = {}
with opprof.profile(capture=["numpy"], record_shapes=True, profile_memory=False):
    pass  # hooks installed once, as in a session
for name, fn in ops.items():
    loop(fn)
    plain, inside, total = [], [], []
    for _ in range(5):  # alternated; the fastest of each is the least disturbed
        plain.append(loop(fn))
        i, t = profiled(fn)
        inside.append(i)
        total.append(t)
    out[name] = {"loop": (min(inside) - min(plain)) / n, "total": (min(total) - min(plain)) / n}
print(json.dumps(out))
"""


def _child(tree: Path, ops: int) -> dict[str, dict[str, float]]:
    env = subprocess_env(PYTHONPATH=str(tree))
    # subprocess_env puts this checkout first: the tree under test must come first.
    env["PYTHONPATH"] = str(tree)
    out = subprocess.run(
        [sys.executable, "-c", CHILD, str(ops)],
        env=env,
        cwd=tree,
        capture_output=True,
        text=True,
        check=True,
    )
    result: dict[str, dict[str, float]] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def measure(baseline: Path, ops: int, repeats: int) -> dict[str, Any]:
    trees = {"baseline": baseline, "this": REPO}
    samples: dict[str, list[dict[str, dict[str, float]]]] = {k: [] for k in trees}
    for r in range(repeats):
        order = list(trees) if r % 2 == 0 else list(reversed(trees))
        for side in order:
            samples[side].append(_child(trees[side], ops))
    result: dict[str, Any] = {}
    for op in samples["this"][0]:
        row: dict[str, float] = {}
        for part in ("loop", "total"):
            for side in trees:
                row[f"{side}_{part}_ns"] = statistics.median(s[op][part] for s in samples[side])
            row[f"{part}_ratio"] = row[f"this_{part}_ns"] / row[f"baseline_{part}_ns"]
        result[op] = row
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--baseline", type=Path, required=True, help="built checkout to compare")
    parser.add_argument("--ops", type=int, default=50_000, help="calls per op and run")
    parser.add_argument("--repeats", type=int, default=11)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    started = time.time()
    result = measure(args.baseline.resolve(), args.ops, args.repeats)
    print(machine_line())
    print(f"{args.repeats} repeats x {args.ops} calls, {time.time() - started:.0f} s")
    head = f"{'loop ns: base -> this':>24} {'ratio':>6} {'total ns: base -> this':>25}"
    print(f"{'op':22} {head} {'ratio':>6}")
    for op, row in result.items():
        print(
            f"{op:22} {row['baseline_loop_ns']:10.1f} -> {row['this_loop_ns']:8.1f} "
            f"{row['loop_ratio']:6.3f} {row['baseline_total_ns']:11.1f} -> "
            f"{row['this_total_ns']:8.1f} {row['total_ratio']:6.3f}"
        )
    if args.json:
        args.json.write_text(json.dumps(result, indent=2, sort_keys=True) + "\n")


if __name__ == "__main__":
    main()
