"""How far two processes running the same code differ: the offset A/B cannot average.

Two identical Python processes, both pinned to one CPU, take turns running one pure-Python
loop (B H B H ..., as an A/B run's partners do); a pair of processes' offset is the median
of its rounds' log ratios.  Over many pairs of processes, the spread of those offsets is
what one A/B run's two processes may differ by for unchanged code, whatever its pairs.

Modes, interleaved pair of processes by pair of processes:

* ``plain``: the loop called as is;
* ``python-depth``: each round at a random depth of Python frames (0-63);
* ``layout``: each round through the plugin's own ``Layout`` (``pytest_opprof/plugin/
  layout.py``: a shuffled heap, a random Python depth and a random depth of C-level calls);
* ``no-aslr``: ``plain`` with address-space randomisation off (``setarch -R``), where
  ``setarch`` exists: what the offset owes to where the process's stack, heap and
  libraries were placed;
* ``layout-no-aslr``: both, as an A/B run's partners run (``--opprof-ab-addresses=fixed``).

    python bench/ab_processes.py [--pairs 16] [--rounds 40]
"""

from __future__ import annotations

import argparse
import math
import os
import shutil
import statistics
import subprocess
import sys

from _common import loadavg, machine_line, now_utc

CHILD = r"""
import os, random, sys, time
from pytest_opprof.plugin.layout import Layout

def kernel(n):
    total = 0
    for i in range(n):
        total += i * i
    return total

def timed():
    started = time.perf_counter_ns()
    kernel(60000)
    return time.perf_counter_ns() - started

mode = sys.argv[1]
layout = Layout()
rng = random.Random()

def at_depth(k):
    return timed() if k == 0 else at_depth(k - 1)

for _ in sys.stdin:
    if mode == "python-depth":
        took = at_depth(rng.randrange(64))
    elif mode == "layout":
        out = []
        with layout.round():
            layout.call(lambda: out.append(timed()))
        took = out[0]
    else:
        took = timed()
    sys.stdout.write(f"{took}\n")
    sys.stdout.flush()
"""
MODES = ("plain", "python-depth", "layout", "no-aslr", "layout-no-aslr")
WARM_ROUNDS = 5


def one_pair(mode: str, rounds: int) -> float:
    """The median log ratio of the second process's rounds over the first's."""
    cmd = [sys.executable, "-c", CHILD, mode.removesuffix("-no-aslr").replace("no-aslr", "plain")]
    if mode.endswith("no-aslr"):
        cmd = ["setarch", os.uname().machine, "-R", *cmd]
    procs = [
        subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1)
        for _ in range(2)
    ]
    times: list[list[int]] = [[], []]
    try:
        for _ in range(rounds + WARM_ROUNDS):
            for side, proc in enumerate(procs):
                assert proc.stdin is not None and proc.stdout is not None
                proc.stdin.write("go\n")
                proc.stdin.flush()
                times[side].append(int(proc.stdout.readline()))
    finally:
        for proc in procs:
            if proc.stdin is not None:
                proc.stdin.close()
            proc.wait()
    ratios = [math.log(h / b) for b, h in zip(*times, strict=True)][WARM_ROUNDS:]
    return statistics.median(ratios)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--pairs", type=int, default=16, help="pairs of processes per mode")
    p.add_argument("--rounds", type=int, default=40, help="measured rounds per process")
    args = p.parse_args()
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})  # children inherit
    modes = [m for m in MODES if not m.endswith("no-aslr") or shutil.which("setarch")]
    offsets: dict[str, list[float]] = {m: [] for m in modes}
    for _ in range(args.pairs):
        for mode in modes:
            offsets[mode].append(one_pair(mode, args.rounds))
    print(f"{now_utc()}, {machine_line()}, load {loadavg():.1f}")
    print(f"{args.pairs} pairs of processes a mode, {args.rounds} rounds each, one CPU")
    print("| mode | offsets (median log ratio, %) | spread (sd) | largest |")
    print("|---|---|---|---|")
    for mode, values in offsets.items():
        shown = " ".join(f"{math.expm1(v):+.1%}" for v in values)
        largest = max(values, key=abs)
        print(
            f"| {mode} | {shown} | {statistics.pstdev(values):.1%} | {math.expm1(largest):+.1%} |"
        )


if __name__ == "__main__":
    main()
