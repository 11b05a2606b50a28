"""What being switched out costs a span of Python code beyond its wait.

Runs ``--chunks`` chunks of a pure-Python loop (about 3 ms each) on one CPU beside one
CPU-bound process pinned to the same CPU, so that most chunks are switched out once,
and times each: wall time, the thread's run-queue wait over the chunk
(``/proc/thread-self/schedstat``, as ``native/switches.c`` reads it per op), the
thread's own CPU time, and its involuntary context switches.  Prints, per number of
switches, the median (and 90th percentile) of wall time less wait and the median of the
thread's CPU time; then the
same chunks with the CPU to themselves.  ``--runs`` repeats it (this VM's host moves
between phases from minute to minute).

A chunk that ran through measures its work.  A chunk that was switched out measures
its work plus whatever the switch cost that no wait figure shows: on this VM that was
nothing in some runs and +80% in others (``gate/waiting.py``, ``UNSWITCHED_ROUNDS``).

    python bench/bench_switch_cost.py [--chunks 300] [--runs 3]

Linux only (schedstat, ``sched_setaffinity``); the burner ends by itself after
``--burn-s`` seconds and is killed by pid when a run ends.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import time

BURN = (
    "import sys, time\nt = time.monotonic()\n"
    "while time.monotonic() - t < float(sys.argv[1]): pass\n"
)


def _wait_ns(fd: int) -> int:
    return int(os.pread(fd, 128, 0).split()[1])


def _chunk(n: int) -> int:
    acc = 0
    for i in range(n):
        acc += i
    return acc


def measure(chunks: int, loop: int) -> dict[int, list[tuple[int, int, int]]]:
    """Per number of involuntary switches: (wall ns, wait ns, thread CPU ns) of each chunk."""
    fd = os.open("/proc/thread-self/schedstat", os.O_RDONLY)
    out: dict[int, list[tuple[int, int, int]]] = {}
    try:
        for _ in range(chunks):
            s0 = resource.getrusage(resource.RUSAGE_THREAD).ru_nivcsw
            w0, c0, t0 = _wait_ns(fd), time.thread_time_ns(), time.perf_counter_ns()
            _chunk(loop)
            t1, c1, w1 = time.perf_counter_ns(), time.thread_time_ns(), _wait_ns(fd)
            s1 = resource.getrusage(resource.RUSAGE_THREAD).ru_nivcsw
            out.setdefault(s1 - s0, []).append((t1 - t0, w1 - w0, c1 - c0))
    finally:
        os.close(fd)
    return out


def report(label: str, by_switches: dict[int, list[tuple[int, int, int]]]) -> None:
    print(label)
    for n in sorted(by_switches):
        rows = by_switches[n]
        works = sorted(w - q for w, q, _ in rows)
        work = statistics.median(works) / 1e6
        p90 = works[int(0.9 * (len(works) - 1))] / 1e6
        cpu = statistics.median(c for _, _, c in rows) / 1e6
        wait = statistics.median(q for _, q, _ in rows) / 1e6
        print(
            f"  {n} switch(es): {len(rows):4d} chunks  wall less wait {work:6.2f} ms "
            f"(90th percentile {p90:6.2f})  thread CPU {cpu:6.2f} ms  wait {wait:6.2f} ms"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chunks", type=int, default=300)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--loop", type=int, default=100_000, help="iterations per chunk")
    parser.add_argument("--burn-s", type=float, default=60.0)
    args = parser.parse_args()
    cpu = min(os.sched_getaffinity(0))
    saved = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {cpu})
    try:
        for run in range(args.runs):
            burner = subprocess.Popen([sys.executable, "-c", BURN, str(args.burn_s)])
            try:
                time.sleep(0.3)
                report(
                    f"run {run + 1}: beside a CPU-bound process on CPU {cpu}",
                    measure(args.chunks, args.loop),
                )
            finally:
                burner.kill()
                burner.wait()
            report(f"run {run + 1}: CPU {cpu} to itself", measure(args.chunks, args.loop))
    finally:
        os.sched_setaffinity(0, saved)


if __name__ == "__main__":
    main()
