"""Baselines refined by passing update runs: rounds pooled over the last few sessions.

One recording session measures a test in one process, in one phase of the
machine.  In the verdict study (bench/NOTES.md) that session's own error was the
largest part of a time's noise: a per-test offset of 4-6% shared by every later
comparison with it.  So an update run whose verdict passed (nothing beyond
tolerance, times judged on the same machine or not judged only because the machine
was busy, the same ops, no event dropped) adds
its rounds to the stored ones instead of replacing them, keeping the rounds of the last
``POOLED_SESSIONS`` sessions; the deterministic figures are the new run's.  A run
that changed anything replaces them: its figures are the new normal.  Each round
keeps its own speed references, so pooled rounds are still compared at the
baseline's machine speed round by round.
"""

from __future__ import annotations

from dataclasses import replace

from pytest_opprof.gate.store import BaselineEntry
from pytest_opprof.gate.summary import OpSummary, TestSummary, TimeStats
from pytest_opprof.gate.verdict import Verdict

POOLED_SESSIONS = 3


def can_pool(new: TestSummary, stored: BaselineEntry, verdict: Verdict, fingerprint: str) -> bool:
    """Whether ``new`` (judged ``verdict`` against ``stored``) may join its rounds."""
    old = stored.summary
    return (
        verdict.status == "pass"
        # Times judged, or not judged only because rounds waited for a CPU: those rounds
        # carry their wait, and every later verdict leaves them out.
        and (verdict.time_judged or verdict.time_not_judged is not None)
        and stored.machine.fingerprint == fingerprint
        and set(new.ops) == set(old.ops)
        and not (new.dropped_events or old.dropped_events)  # partial op figures: start anew
        and _same_shape(new, old)
    )


def _same_shape(new: TestSummary, old: TestSummary) -> bool:
    """Both have the same optional per-round series, each with one value per round."""
    return all(
        (a is None) == (b is None)
        and (a is None or len(a.samples_ns) == new.rounds)
        and (b is None or len(b.samples_ns) == old.rounds)
        for a, b in _series(new, old)
    )


def _series(new: TestSummary, old: TestSummary) -> list[tuple[TimeStats | None, TimeStats | None]]:
    pairs: list[tuple[TimeStats | None, TimeStats | None]] = [
        (new.wall_time, old.wall_time),
        (new.cpu_time, old.cpu_time),
        (new.device_time, old.device_time),
        (new.speed_ref, old.speed_ref),
        (new.native_ref, old.native_ref),
        (new.wait_time, old.wait_time),
    ]
    for key, op in new.ops.items():
        was = old.ops[key]
        pairs += [
            (op.self_cpu_time, was.self_cpu_time),
            (op.cpu_time, was.cpu_time),
            (op.self_device_time, was.self_device_time),
            (op.device_time, was.device_time),
        ]
    return pairs


def pool(new: TestSummary, old: TestSummary) -> TestSummary:
    """``new`` with the rounds of ``old``'s last ``POOLED_SESSIONS - 1`` sessions before its own."""
    kept_sessions = (old.sessions or (old.rounds,))[-(POOLED_SESSIONS - 1) :]
    kept = sum(kept_sessions)

    def joined(now: TimeStats, before: TimeStats) -> TimeStats:
        return TimeStats.from_samples([*before.samples_ns[-kept:], *now.samples_ns])

    def maybe(now: TimeStats | None, before: TimeStats | None) -> TimeStats | None:
        return joined(now, before) if now is not None and before is not None else None

    def op(key: str, now: OpSummary) -> OpSummary:
        before = old.ops[key]
        return replace(
            now,
            self_cpu_time=joined(now.self_cpu_time, before.self_cpu_time),
            cpu_time=joined(now.cpu_time, before.cpu_time),
            self_device_time=maybe(now.self_device_time, before.self_device_time),
            device_time=maybe(now.device_time, before.device_time),
        )

    return replace(
        new,
        rounds=kept + new.rounds,
        sessions=(*kept_sessions, new.rounds),
        wall_time=joined(new.wall_time, old.wall_time),
        cpu_time=joined(new.cpu_time, old.cpu_time),
        device_time=maybe(new.device_time, old.device_time),
        speed_ref=maybe(new.speed_ref, old.speed_ref),
        native_ref=maybe(new.native_ref, old.native_ref),
        wait_time=maybe(new.wait_time, old.wait_time),
        ops={key: op(key, now) for key, now in new.ops.items()},
    )
