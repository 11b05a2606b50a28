"""What a round's boundaries cost the plugin, per round, outside pytest.

Times, as the plugin runs them, the two fixed costs every profiled test pays once per
round whatever its body does: the contention probe's readings (``ContentionProbe``:
start, the thread's own figures at the body's start and end, stop) and a profile's
start and stop around a body that records nothing, with the capture sources held for
the session as ``HeldSources.acquire`` (``plugin/sources_held.py``) holds them.  Median
us over ``--rounds`` rounds, ``--repeats`` times; run it with ``PYTHONPATH`` naming each
checkout, alternately, to compare two trees on this VM (its speed moves from minute to
minute).

    python bench/bench_round_bounds.py [--rounds 3000] [--repeats 5]
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import pytest_opprof
from pytest_opprof.capture.contention import ContentionProbe
from pytest_opprof.capture.recorder import _planned
from pytest_opprof.profiler import profile


def _median_us(fn: Callable[[], object], rounds: int) -> float:
    times = []
    for _ in range(rounds):
        t0 = time.perf_counter_ns()
        fn()
        times.append(time.perf_counter_ns() - t0)
    return statistics.median(times) / 1000


def _round_profile() -> profile:
    """The profile ``Rounds.measure`` makes for a round at the plugin's defaults."""
    return profile(
        record_shapes=True,
        profile_memory=True,
        with_flops=True,
        capture=None,
        python_memory=False,
        cuda_sample_rate=1,
        memory_events=False,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3000)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()

    chosen, _ = _planned(None, True, False)
    held = [*chosen.capture, *chosen.helpers]
    if chosen.memory is not None:
        held.append(chosen.memory)
    for source in held:
        source.acquire()
    warm = _round_profile()
    warm.start()  # the first start calibrates
    warm.stop()

    probe = ContentionProbe()

    def probe_round() -> None:
        probe.start()
        begin = probe.own()
        probe.stop(begin, probe.own())

    def empty_round() -> None:
        prof = _round_profile()
        prof.start()
        prof.stop()

    rows: dict[str, list[float]] = {"contention probe": [], "profile start + stop": []}
    for _ in range(args.repeats):
        rows["contention probe"].append(_median_us(probe_round, args.rounds))
        rows["profile start + stop"].append(_median_us(empty_round, args.rounds))
    probe.close()
    for source in reversed(held):
        source.release()

    print(f"{pytest_opprof.__file__}: median us per round, {args.repeats} x {args.rounds} rounds")
    for name, values in rows.items():
        shown = " ".join(f"{v:6.1f}" for v in values)
        print(f"  {name:24} {statistics.median(values):6.1f}   ({shown})")


if __name__ == "__main__":
    main()
