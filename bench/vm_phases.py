"""How far the same code's time moves from one call to the next on this machine, in one
process on one CPU: the floor under every pair A/B measures.

One process, pinned to one CPU, calls the same pure-Python loop (about 3 ms) back to back
for ``--seconds``, timing each call's wall time and its thread's CPU time, and reading
the CPU's steal time (``/proc/stat``, the hypervisor's own count of time the virtual CPU
was ready but not running) around each.  It prints:

* the calls that ran 10% or more over the median, their CPU time over the median CPU
  time (slow in CPU time too: no wait for a CPU to subtract) and how many saw steal;
* how long the slow phases last, in calls back to back;
* how far two calls back to back differ (``log(second / first)``, each pair once): the
  robust sigma (interquartile range / 1.349), the standard deviation and the 2.5th and
  97.5th percentiles.  An A/B pair is two such calls, one in each side's process.

    python bench/vm_phases.py --seconds 30
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import time

from _common import loadavg, machine_line, now_utc


def loop(n: int) -> int:
    total = 0
    for i in range(n):
        total += i * i
    return total


def steal(cpu: int) -> int | None:
    """The CPU's steal time so far (clock ticks), None where ``/proc/stat`` has none."""
    try:
        with open("/proc/stat", encoding="ascii") as stat:
            for line in stat:
                fields = line.split()
                if fields[0] == f"cpu{cpu}":
                    return int(fields[8]) if len(fields) > 8 else None
    except OSError:
        return None
    return None


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--seconds", type=float, default=30.0)
    p.add_argument("--cpu", type=int, default=0)
    p.add_argument("--n", type=int, default=60_000, help="the loop's length (about 3 ms)")
    args = p.parse_args()
    os.sched_setaffinity(0, {args.cpu})
    print(f"# {machine_line()}; {now_utc()}; load {loadavg():.1f}; CPU {args.cpu}")
    calls: list[tuple[int, int, int]] = []
    end = time.monotonic() + args.seconds
    while time.monotonic() < end:
        s0 = steal(args.cpu)
        c0, w0 = time.thread_time_ns(), time.perf_counter_ns()
        loop(args.n)
        w1, c1 = time.perf_counter_ns(), time.thread_time_ns()
        s1 = steal(args.cpu)
        calls.append((w1 - w0, c1 - c0, (s1 or 0) - (s0 or 0)))
    wall = statistics.median(c[0] for c in calls)
    cpu = statistics.median(c[1] for c in calls)
    slow = [c for c in calls if c[0] >= 1.1 * wall]
    print(f"{len(calls)} calls, median {wall / 1e6:.2f} ms wall, {cpu / 1e6:.2f} ms CPU")
    if slow:
        ratios = sorted(c[1] / cpu for c in slow)
        print(
            f"10% or more over the median: {len(slow)} ({len(slow) / len(calls):.1%}); "
            f"their CPU time {ratios[len(ratios) // 2]:.2f}x the median CPU time (median), "
            f"{sum(c[2] > 0 for c in slow)} saw steal time"
        )
    state = [c[0] >= 1.1 * wall for c in calls]
    runs, length = [], 0
    for here, before in zip(state, [False, *state[:-1]], strict=True):
        if here:
            length += 1
        elif before:
            runs.append(length)
            length = 0
    if length:
        runs.append(length)
    if runs:
        print(
            f"slow phases: {len(runs)}, {statistics.median(runs):g} calls long (median), "
            f"the longest {max(runs)} ({max(runs) * wall / 1e6:.0f} ms)"
        )
    d = sorted(math.log(calls[i + 1][0] / calls[i][0]) for i in range(0, len(calls) - 1, 2))

    def q(share: float) -> float:
        return d[min(int(share * len(d)), len(d) - 1)]

    print(
        f"two calls back to back, {len(d)} pairs: robust sigma {(q(0.75) - q(0.25)) / 1.349:.1%}, "
        f"sd {statistics.pstdev(d):.1%}, 2.5th to 97.5th percentile {q(0.025):+.1%} to "
        f"{q(0.975):+.1%}"
    )


if __name__ == "__main__":
    main()
