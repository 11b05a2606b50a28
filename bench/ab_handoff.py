"""What one round's hand-off between the head and its base partner costs.

The head sends ``("round",)`` and waits for ``("round", RoundFigures)``: one pipe write,
a context switch each way, and the round's figures as JSON (a real round's, from a
profiled numpy workload of ``--ops`` distinct ops), made into the ``OpFigures`` the
head's judge reads.  Timed here without the round itself: the partner answers at once
with figures it measured before (encoded anew each time, as a partner does each round).
The goal: a round of a 1 ms test must not cost another millisecond of hand-off.

    python bench/ab_handoff.py [--ops 40] [--trips 2000]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

from _common import REPO, machine_line, now_utc, subprocess_env

from pytest_opprof.ab.channel import Channel, figures_from_json

PARTNER = r"""
import os, sys
import numpy as np
from pytest_opprof.ab.channel import Channel, figures_to_json
from pytest_opprof.profiler import profile
from pytest_opprof.gate.summary import RoundFigures
from pytest_opprof.model.averages import op_sums

ops = int(sys.argv[1])
read_fd, write_fd = (int(x) for x in os.environ["FDS"].split(","))
channel = Channel(read_fd, write_fd)
with profile(record_shapes=True, profile_memory=True, with_flops=True) as prof:
    for i in range(ops):  # each shape its own op key
        a = np.ones(8 + i)
        np.add(a, a)
sums = op_sums(prof.records(), by_input_shape=True, with_flops=True)
while True:
    message = channel.receive()
    if message[0] != "round":
        break
    figures = RoundFigures.from_sums(  # a round's own, as each round's are
        sums.keys, sums.sums, wall_time_ns=prof.wall_time_ns, cpu_time_ns=1, memory=prof.memory
    )
    channel.send("round", figures_to_json(figures))
"""


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--ops", type=int, default=40)
    p.add_argument("--trips", type=int, default=2000)
    args = p.parse_args()
    head_read, partner_write = os.pipe()
    partner_read, head_write = os.pipe()
    env = subprocess_env(FDS=f"{partner_read},{partner_write}")
    proc = subprocess.Popen(
        [sys.executable, "-c", PARTNER, str(args.ops)],
        cwd=REPO,
        env=env,
        pass_fds=(partner_read, partner_write),
    )
    os.close(partner_read)
    os.close(partner_write)
    channel = Channel(head_read, head_write)
    channel.send("round")
    _, data = channel.receive()
    figures = figures_from_json(data)
    size = len(json.dumps(["round", data], separators=(",", ":")))
    trips = []
    for _ in range(args.trips):
        t0 = time.perf_counter_ns()
        channel.send("round")
        dict(figures_from_json(channel.receive()[1]).ops)  # as the judge reads them
        trips.append(time.perf_counter_ns() - t0)
    channel.send("quit")
    proc.wait()
    trips.sort()
    print(f"# {machine_line()}, {now_utc()}")
    print(
        f"round hand-off, {len(figures.ops)} op keys, {size:,} bytes a reply: "
        f"median {statistics.median(trips) / 1e3:.0f} us, "
        f"p10 {trips[len(trips) // 10] / 1e3:.0f} us, "
        f"p90 {trips[9 * len(trips) // 10] / 1e3:.0f} us "
        f"({args.trips} trips)"
    )


if __name__ == "__main__":
    main()
