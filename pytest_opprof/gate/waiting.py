"""Rounds that waited for a CPU: which rounds a time verdict may use.

On a busy machine (a shared CI runner, ``pytest -n auto``, a laptop) the test's
thread is often runnable but not running: another process holds the core.  That
wait adds to the round's wall time and to whichever op was running, while no more
work is done; the speed references cannot see it, since they run in the moments
the process has a core.  Measured here (2 cores, two CPU-bound processes per
core): the example suite's rounds of 1-3 ms of work took up to 11 ms, the rest waiting,
and judging every round failed half of its unchanged tests on wall time.

So a round whose thread waited more than ``WAIT_SHARE_LIMIT`` of its wall time is
*contended*, and times are judged on the other, clean rounds of both sides.  When
either side has fewer clean rounds than times need, the times are not judged and
the verdict says why in one line; FLOPs, memory and op counts are judged as always.
A side without the figure (a baseline recorded before it was measured, a system
without ``/proc``) keeps all its rounds: nothing is known about its waiting.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from pytest_opprof.gate.summary import OpSummary, TestSummary, TimeStats
from pytest_opprof.gate.tolerance import DEFAULT_MAX_WAIT

WAIT_SHARE_LIMIT = DEFAULT_MAX_WAIT
"""A round whose thread waited for a CPU longer than this share of its wall time is
contended (``--opprof-max-wait``).  On a quiet machine rounds wait 0-1% (a timer tick,
a kernel thread)."""


def is_clean(wait_ns: int, wall_ns: int, limit: float = WAIT_SHARE_LIMIT) -> bool:
    """Whether a round that waited ``wait_ns`` of ``wall_ns`` may have its times judged."""
    return wait_ns <= limit * wall_ns


def clean_rounds(summary: TestSummary, limit: float = WAIT_SHARE_LIMIT) -> tuple[int, ...] | None:
    """Indexes of the rounds that waited at most ``limit`` of their wall time; None when
    the waiting was not measured."""
    wait = summary.wait_time
    if wait is None or len(wait.samples_ns) != len(summary.wall_time.samples_ns):
        return None
    return tuple(
        i
        for i, (w, wall) in enumerate(
            zip(wait.samples_ns, summary.wall_time.samples_ns, strict=True)
        )
        if w <= limit * wall
    )


def _pick(stats: TimeStats, keep: Sequence[int]) -> TimeStats:
    return TimeStats.from_samples([stats.samples_ns[i] for i in keep])


def only_rounds(summary: TestSummary, keep: Sequence[int]) -> TestSummary:
    """``summary`` restricted to the rounds ``keep`` (at least one): every per-round series.

    Counts, FLOPs and memory are low medians over all rounds and stay as they are: they
    do not depend on waiting."""
    if len(keep) == summary.rounds:
        return summary

    def maybe(stats: TimeStats | None) -> TimeStats | None:
        return _pick(stats, keep) if stats is not None else None

    def op(o: OpSummary) -> OpSummary:
        return replace(
            o,
            self_cpu_time=_pick(o.self_cpu_time, keep),
            cpu_time=_pick(o.cpu_time, keep),
            self_device_time=maybe(o.self_device_time),
            device_time=maybe(o.device_time),
        )

    return replace(
        summary,
        rounds=len(keep),
        sessions=(),
        wall_time=_pick(summary.wall_time, keep),
        cpu_time=_pick(summary.cpu_time, keep),
        device_time=maybe(summary.device_time),
        speed_ref=maybe(summary.speed_ref),
        native_ref=maybe(summary.native_ref),
        wait_time=maybe(summary.wait_time),
        ops={key: op(o) for key, o in summary.ops.items()},
    )


def judged_rounds(
    now: TestSummary, base: TestSummary, needed: int, limit: float = WAIT_SHARE_LIMIT
) -> tuple[TestSummary, TestSummary, str | None]:
    """Both sides restricted to their clean rounds, or why their times cannot be judged.

    The reason names the side that waited and how much, e.g. ``time not judged: the
    test's thread waited for a CPU in 38% of its rounds' time (5 of 5 rounds waited
    more than 5%)``."""
    sides = []
    for label, summary in (("", now), ("the baseline: ", base)):
        keep = clean_rounds(summary, limit)
        if keep is None:
            sides.append(summary)
            continue
        if len(keep) < needed:
            share = summary.wait_share() or 0.0
            waited = summary.rounds - len(keep)
            return (
                now,
                base,
                f"time not judged: {label}the test's thread waited for a CPU in {share:.0%} of "
                f"its rounds' time ({waited} of {summary.rounds} rounds waited more than "
                f"{limit:.0%}; {needed} clean rounds are needed): the machine was busy. FLOPs, "
                "memory and op counts are judged",
            )
        sides.append(only_rounds(summary, keep))
    return sides[0], sides[1], None
