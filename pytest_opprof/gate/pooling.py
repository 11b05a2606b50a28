"""Baselines refined by update runs: rounds pooled over the last few sessions.

One recording session measures a test in one process, in one phase of the
machine.  In the verdict study (bench/verdict_study.py) that session's own error was the
largest part of a time's noise: a per-test offset of 4-6% shared by every later
comparison with it.  So an update run adds its rounds to the stored ones, keeping
the rounds of the last ``POOLED_SESSIONS`` sessions, unless it saw a real change
(:func:`replace_reason`); then it replaces them and its figures are the new normal:

* a deterministic figure (FLOPs, op count, memory; an op's count, FLOPs, self bytes)
  whose range in this run lies wholly beyond the stored range widened by its
  tolerance (op counts, reported but not judged by the verdict, with tolerance 0),
  or another set of ops.  A figure that varies (unseeded random sizes, threads
  interleaving) and overlaps the stored range is the same figure: its range grows;
* a judged time that regressed (the verdict confirms a slowdown with more rounds
  before it says so), or that improved with confirmation: p < ``CONFIRM_ALPHA``
  in the Mann-Whitney test over at least ``Tolerances.min_rounds`` rounds on both
  sides.  The verdict's own test (alpha 0.3) is tuned for regressions, which
  confirmation rounds then settle; no round confirms an improvement, and replacing
  a baseline on a lucky fast session makes every later run look slower.  Times
  within tolerance, or not judged (the machine was busy, too few rounds) are no
  evidence of a change: they pool;
* another machine, dropped events (partial op figures), or per-round series of
  other shapes (a speed reference run on one side only), which cannot be joined.

Each round keeps its own speed references, so pooled rounds are still compared
at the baseline's machine speed round by round.  Deterministic figures are the
new run's, with the range of values seen (``TestSummary.ranges``) joined over
the pooled sessions: it is kept for as long as the entry pools, even past the
sessions whose rounds are dropped, because it says what the test's work can
be, not how fast it runs now; a replacement starts it anew.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace

from pytest_opprof.gate.round_figures import TRAFFIC_FIGURES
from pytest_opprof.gate.store import BaselineEntry
from pytest_opprof.gate.summary import OpSummary, Span, TestSummary, TimeStats, varying
from pytest_opprof.gate.trim import align
from pytest_opprof.gate.verdict import Tolerances, Verdict, compare, judge_exact

POOLED_SESSIONS = 3
CONFIRM_ALPHA = 0.05
"""The Mann-Whitney threshold a judged time improvement must pass to replace a baseline."""


def can_pool(
    new: TestSummary,
    stored: BaselineEntry,
    verdict: Verdict,
    fingerprint: str,
    tolerances: Tolerances | None = None,
) -> bool:
    """Whether ``new`` (judged ``verdict`` against ``stored``) may join its rounds."""
    return replace_reason(new, stored, verdict, fingerprint, tolerances) is None


def replace_reason(
    new: TestSummary,
    stored: BaselineEntry,
    verdict: Verdict,
    fingerprint: str,
    tolerances: Tolerances | None = None,
) -> str | None:
    """Why ``new`` must replace ``stored`` rather than pool with it (one line), or None.

    ``verdict`` is ``new``'s against ``stored`` under ``tolerances``."""
    tol = tolerances or Tolerances()
    if stored.machine.fingerprint != fingerprint:
        return "recorded on another machine"
    # A trimmed baseline (trim.py) holds the ops it left out as one: the same ones ran
    # when the keys and the left-out ops' digest agree.
    new, old = align(new, stored.summary)
    if set(new.ops) != set(old.ops) or new.left_out != old.left_out:
        return "other ops ran"
    if new.dropped_events or old.dropped_events:
        return "events were dropped (partial op figures)"
    if not _same_shape(new, old):
        return "its per-round series differ from the baseline's (a speed reference, device time)"
    return _exact_change(new, old, tol) or _time_change(new, stored, verdict, fingerprint, tol)


def _exact_change(new: TestSummary, old: TestSummary, tol: Tolerances) -> str | None:
    """The first deterministic figure whose ranges do not meet, widened by its tolerance."""
    count = tol.count or 0.0  # not judged by the verdict, but a changed count is a change
    limits = {
        "flops": (tol.flops, 0),
        "op_count": (count, 0),
        "count": (count, 0),
        "allocations": (tol.memory, 0),
        **dict.fromkeys(TRAFFIC_FIGURES, (tol.traffic, 0)),
    }
    memory = (tol.memory, tol.memory_floor_bytes)
    figures: list[tuple[str, str, Span, Span]] = []  # (where, figure, baseline, now)
    before = old.exact_values()
    figures += [("", n, old.span(n), new.span(n)) for n in new.exact_values() if n in before]
    for key, op in new.ops.items():
        stored_op = old.ops[key]
        figures += [(f"{key} ", n, stored_op.span(n), op.span(n)) for n in op.exact_values()]
    for where, name, was, now in figures:
        tolerance, floor = limits.get(name, memory)
        if (
            judge_exact(was, now[0], tolerance, floor) == "regressed"
            or judge_exact(was, now[1], tolerance, floor) == "improved"
        ):
            return f"{where}{name} changed: {_shown(was)} in the baseline, {_shown(now)} now"
    return None


def _shown(span: Span) -> str:
    return f"{span[0]:,}" if span[0] == span[1] else f"{span[0]:,}-{span[1]:,}"


def _time_change(
    new: TestSummary, stored: BaselineEntry, verdict: Verdict, fingerprint: str, tol: Tolerances
) -> str | None:
    """A judged time that regressed, or that improved with confirmation (module docstring)."""
    times = [m.status for m in verdict.metrics if m.unit == "ns"]
    times += [r.status for r in verdict.reasons if r.unit == "ns"]
    if "regressed" in times:
        return "a time regressed"
    if "improved" not in times or min(new.rounds, stored.summary.rounds) < tol.min_rounds:
        return None
    # The same comparison (judged rounds, speed scaling) with the stricter test; times were
    # judged above, on this machine, so forcing them changes nothing but the rounds rule.
    strict = compare(
        new,
        stored,
        fingerprint=fingerprint,
        tolerances=replace(tol, alpha=CONFIRM_ALPHA),
        force_time=True,
    )
    confirmed = [m.metric for m in strict.metrics if m.unit == "ns" and m.status == "improved"]
    confirmed += [r.op for r in strict.reasons if r.unit == "ns" and r.status == "improved"]
    return f"{confirmed[0]}: faster, confirmed" if confirmed else None


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
            (op.self_device_time, was.self_device_time),
        ]
    return pairs


def pool(new: TestSummary, old: TestSummary) -> TestSummary:
    """``new`` with the rounds of ``old``'s last ``POOLED_SESSIONS - 1`` sessions before its own,
    and each deterministic figure's range over both."""
    new, old = align(new, old)
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
            ranges=_joined_ranges(now.exact_values(), now.span, before.exact_values(), before.span),
            self_cpu_time=joined(now.self_cpu_time, before.self_cpu_time),
            # An op's total time is not judged: a trimmed baseline does not store it.
            cpu_time=maybe(now.cpu_time, before.cpu_time),
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
        ranges=_joined_ranges(new.exact_values(), new.span, old.exact_values(), old.span),
        switched=None,  # read on the side judged, never on a baseline
    )


def _joined_ranges(
    now: Mapping[str, int],
    now_span: Callable[[str], Span],
    before: Mapping[str, int],
    before_span: Callable[[str], Span],
) -> dict[str, Span]:
    """Each figure's range over both sides (where both measured it), kept where it varies."""
    spans = {}
    for name in now:
        lo, hi = now_span(name)
        if name in before:
            was_lo, was_hi = before_span(name)
            lo, hi = min(lo, was_lo), max(hi, was_hi)
        spans[name] = (lo, hi)
    return varying(spans)
