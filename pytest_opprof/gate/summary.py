"""Per-test figures over measured rounds: what baselines store and verdicts compare.

One :class:`RoundFigures` per measured round (``round_figures.py``) goes in;
:func:`summarize_rounds` turns the rounds into a :class:`TestSummary`.

Two kinds of figures, two rules:

* Times are noisy: every time is kept as the per-round samples (an op's time in
  a round is its total over the round) plus median, min, max, mean, stdev and
  MAD (median absolute deviation), all in ns, so a verdict can judge noise.
* Counts, FLOPs and bytes are deterministic once warm: the summary keeps the
  low median over rounds (``statistics.median_low``, an actual round's value), so
  a one-off first round (lazy imports, caches) does not set the figure once
  there are three or more rounds.  Some are not deterministic after all (unseeded
  random sizes, threads interleaving): where the rounds disagree, the summary also
  keeps the ``[low, high]`` range they spanned (``ranges``, only for a figure that
  varied, so files stay small), and a verdict judges the figure beyond that range.

``to_json`` rounds times to three significant digits and shares to three
decimals; ints that are exact (counts, FLOPs, bytes) stay exact.  The fields of these
classes are the one schema of the figures: each names, in its metadata, the rule that
every codec (``summary_codec.py``, ``compact.py``, ``summary_flat.py``) and the native
builder (``native/one_round.c``, given the field names) follow.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pytest_opprof.gate import summary_codec
from pytest_opprof.gate.jsonio import Fields
from pytest_opprof.gate.round_figures import EXACT, TRAFFIC_FIGURES, SummedOps
from pytest_opprof.gate.round_figures import DeviceTraffic as DeviceTraffic
from pytest_opprof.gate.round_figures import MemoryFigures as MemoryFigures
from pytest_opprof.gate.round_figures import MemoryStatsLike as MemoryStatsLike
from pytest_opprof.gate.round_figures import OpFigures as OpFigures
from pytest_opprof.gate.round_figures import RoundFigures as RoundFigures
from pytest_opprof.gate.summary_codec import (
    RULE,
    Count,
    Hex32,
    LeftOutOf,
    Nested,
    Ns,
    OpBytes,
    OpKey,
    Ops,
    PerRoundKeys,
    RoundCount,
    Sessions,
    Share,
    Spans,
    Times,
    field_names,
    filled,
)
from pytest_opprof.native_layout.records import MEMORY_EVENT_NAME

Span = tuple[int, int]
"""The ``(low, high)`` a deterministic figure spanned over rounds (and pooled sessions)."""
Ranges = Mapping[str, Span]

TEST_RANGED = (
    "flops",
    "op_count",
    "peak_bytes",
    "allocated_bytes",
    "allocations",
    "leaked_bytes",
    "device_memory_bytes",
    *TRAFFIC_FIGURES,
)
"""The test-level deterministic figures that may carry a range (names as in ``ranges``)."""
OP_RANGED = ("count", "flops", "self_memory_bytes", "self_device_memory_bytes")
"""An op's deterministic figures that may carry a range."""
OTHER_OPS = "[other ops]"
"""The op key of the ops a baseline left out, folded into one (``trim.py``)."""


@dataclass(frozen=True)
class LeftOut:
    """How many op keys a baseline folded into ``OTHER_OPS``, and an order-free digest of
    them (``trim.keys_digest``): whether two sides folded the same ops."""

    keys: int = field(metadata={RULE: Count(minimum=1, name="ops")})
    digest: int = field(metadata={RULE: Hex32()})

    def to_json(self) -> dict[str, object]:
        return summary_codec.to_json(self)

    @classmethod
    def from_json(cls, f: Fields) -> LeftOut:
        left_out: LeftOut = summary_codec.from_json(cls, f)
        return left_out


def span_of(values: Iterable[int]) -> Span:
    """The ``(low, high)`` of some values of one figure."""
    seen = list(values)
    return min(seen), max(seen)


def varying(spans: Mapping[str, Span]) -> dict[str, Span]:
    """Only the spans that are not a single value: what a file stores."""
    return {name: (lo, hi) for name, (lo, hi) in spans.items() if lo != hi}


@dataclass(frozen=True)
class TimeStats:
    """Statistics of one time over the measured rounds, all in ns."""

    samples_ns: tuple[int, ...] = field(metadata={RULE: Ns(samples=True)})
    median_ns: int = field(metadata={RULE: Ns()})
    min_ns: int = field(metadata={RULE: Ns()})
    max_ns: int = field(metadata={RULE: Ns()})
    mean_ns: int = field(metadata={RULE: Ns()})
    stdev_ns: int = field(metadata={RULE: Ns()})
    mad_ns: int = field(metadata={RULE: Ns()})

    @classmethod
    def single(cls, ns: int) -> TimeStats:
        """The statistics of one sample (one round: most tests), an int in ns."""
        # Filled in place rather than through the frozen __init__ (a set call per field):
        # two to four of these are built per op of every one-round test, and again for
        # its stored form; the result is the same object __init__ makes.
        stats = object.__new__(cls)
        d = stats.__dict__
        d["samples_ns"] = (ns,)
        d["median_ns"] = d["min_ns"] = d["max_ns"] = d["mean_ns"] = ns
        d["stdev_ns"] = d["mad_ns"] = 0
        return stats

    def one_sample(self) -> int | None:
        """The sample where these are the statistics :meth:`single` builds (every value an
        int, not only an equal number), else None."""
        # Each field read and checked in a line: this runs per time of every test that the
        # spool writes (a check through tuples of the values cost half as much again).
        d = self.__dict__
        ns, samples = d["min_ns"], d["samples_ns"]
        median, high, mean, stdev, mad = (
            d["median_ns"],
            d["max_ns"],
            d["mean_ns"],
            d["stdev_ns"],
            d["mad_ns"],
        )
        if (
            type(ns) is int
            and type(samples) is tuple
            and len(samples) == 1
            and type(samples[0]) is int
            and type(median) is int
            and type(high) is int
            and type(mean) is int
            and type(stdev) is int
            and type(mad) is int
            and samples[0] == median == high == mean == ns
            and stdev == mad == 0
        ):
            return ns
        return None

    @classmethod
    def from_samples(cls, samples_ns: Sequence[float]) -> TimeStats:
        """Statistics of per-round times in ns (at least one)."""
        if not samples_ns:
            raise ValueError("TimeStats needs at least one sample")
        values = [round(s) for s in samples_ns]
        if len(values) == 1:  # one round (most tests): no statistics module calls
            return cls.single(values[0])
        median = statistics.median(values)
        return cls(
            samples_ns=tuple(values),
            median_ns=round(median),
            min_ns=min(values),
            max_ns=max(values),
            mean_ns=round(statistics.fmean(values)),
            stdev_ns=_stdev(values),
            mad_ns=round(statistics.median(abs(v - median) for v in values)),
        )

    def to_json(self) -> dict[str, object]:
        """JSON object; times rounded to three significant digits."""
        return summary_codec.to_json(self)

    def as_stored(self) -> TimeStats:
        """What :meth:`to_json` reads back as, without the text: every time rounded."""
        stats: TimeStats = summary_codec.stored_times(self)
        return stats

    @classmethod
    def from_json(cls, f: Fields, rounds: int | None = None) -> TimeStats:
        """Read back :meth:`to_json` (raises ``FieldError``): at least one sample, and
        ``rounds`` of them when given (a verdict pairs them with the rounds)."""
        stats: TimeStats = summary_codec.from_json(cls, f, rounds=rounds)
        return stats


@dataclass(frozen=True)
class OpSummary:
    """One op key over the rounds: per-round totals of its times (ns), low medians of the rest."""

    key: str = field(metadata={RULE: OpKey()})
    count: int = field(metadata={RULE: Count()})
    self_cpu_time: TimeStats = field(metadata={RULE: Times(of=TimeStats)})
    cpu_time: TimeStats | None = field(
        metadata={RULE: Times(of=TimeStats, optional=True, shares="self_cpu_time", compact=False)}
    )
    """The op's total time (itself and the ops it called); None where a baseline did not
    store it (schema 2: no verdict reads it).  The very ``self_cpu_time`` object for an op
    that called no other op (``summarize_rounds``)."""
    self_memory_bytes: int = field(metadata={RULE: Count(minimum=None, compact="nonzero")})
    memory_bytes: int | None = field(
        metadata={RULE: Count(minimum=None, optional=True, compact=False)}
    )
    """Net bytes of the op and the ops it called; None where a baseline did not store it."""
    flops: int = field(metadata={RULE: Count(compact="nonzero")})
    self_device_time: TimeStats | None = field(
        metadata={RULE: Times(of=TimeStats, optional=True, pair="device_time")}, default=None
    )
    device_time: TimeStats | None = field(
        metadata={RULE: Times(of=TimeStats, optional=True, pair="self_device_time", compact=False)},
        default=None,
    )
    """Device times travel as a pair or not at all (the stored form)."""
    ranges: Ranges = field(metadata={RULE: Spans(names=OP_RANGED)}, default_factory=dict)
    """``(low, high)`` of each figure of ``OP_RANGED`` that varied over the rounds."""
    self_device_memory_bytes: int = field(
        metadata={RULE: Count(minimum=None, zero_left_out=True)}, default=0
    )
    """Net bytes the device allocators (CUDA's caching allocator) reported inside the op
    itself, as torch.profiler's ``self_device_memory_usage``; left out of files when 0."""

    def exact_values(self) -> dict[str, int]:
        """The op's deterministic figures that may carry a range, by name."""
        return {
            "count": self.count,
            "flops": self.flops,
            "self_memory_bytes": self.self_memory_bytes,
            "self_device_memory_bytes": self.self_device_memory_bytes,
        }

    def span(self, name: str) -> Span:
        """The range the figure ``name`` spanned; its value alone where it did not vary."""
        value = self.exact_values()[name]
        return self.ranges.get(name, (value, value))

    def to_json(self) -> dict[str, object]:
        return summary_codec.to_json(self)

    def as_stored(self) -> OpSummary:
        """What :meth:`to_json` reads back as, without the text."""
        op: OpSummary = summary_codec.stored(self)
        return op

    @classmethod
    def from_json(cls, key: str, f: Fields, rounds: int | None = None) -> OpSummary:
        """Read back :meth:`to_json`; ``rounds``: the samples each time must have."""
        op: OpSummary = summary_codec.from_json(cls, f, rounds=rounds, key=key)
        return op


@dataclass(frozen=True)
class TestSummary:
    """One test's figures over its measured rounds (times in ns, memory in bytes)."""

    __test__ = False  # not a pytest test class, whatever module imports it

    rounds: int = field(metadata={RULE: RoundCount(top=True)})
    wall_time: TimeStats = field(metadata={RULE: Times(of=TimeStats)})
    cpu_time: TimeStats = field(metadata={RULE: Times(of=TimeStats)})
    op_count: int = field(metadata={RULE: Count()})
    flops: int = field(metadata={RULE: Count()})
    op_time_share: float = field(metadata={RULE: Share()})
    """Median over rounds of (self time of library ops) / wall time: the share of the test
    spent in captured ops.  ``record_function`` scopes do not count: they mark any code."""
    memory: MemoryFigures | None = field(metadata={RULE: Nested(of=MemoryFigures)}, default=None)
    ops: Mapping[str, OpSummary] = field(
        metadata={RULE: Ops(top=True, of=OpSummary, stats=TimeStats)}, default_factory=dict
    )
    device_time: TimeStats | None = field(
        metadata={RULE: Times(of=TimeStats, optional=True)}, default=None
    )
    """Per round, the self device time of all ops (ns); None when no device time was measured."""
    device_memory_bytes: int | None = field(metadata={RULE: Count(optional=True)}, default=None)
    """Low median over rounds of the device memory peak (bytes); None when not measured."""
    speed_ref: TimeStats | None = field(
        metadata={RULE: Times(of=TimeStats, optional=True, per_round=False)}, default=None
    )
    """Per round, the Python speed reference's time (ns, see ``speed``); None when not run."""
    native_ref: TimeStats | None = field(
        metadata={RULE: Times(of=TimeStats, optional=True, per_round=False)}, default=None
    )
    """Per round, the native speed reference's time (ns, see ``speed``); None when not run."""
    sessions: tuple[int, ...] = field(metadata={RULE: Sessions(top=True)}, default=())
    """Rounds per recording session, oldest first, when a baseline pools several
    (``pooling.py``); empty for one session's rounds."""
    dropped_events: int = field(metadata={RULE: Count(zero_left_out=True)}, default=0)
    """The most events a round dropped at the profile's limit: when not 0, the op figures
    (and the FLOPs and op count, their sums) cover only part of the test."""
    wait_time: TimeStats | None = field(
        metadata={RULE: Times(of=TimeStats, optional=True)}, default=None
    )
    """Per round, how long the test's thread waited for a CPU (ns): time in the wall
    time that did no work.  None when not measured."""
    ranges: Ranges = field(metadata={RULE: Spans(names=TEST_RANGED)}, default_factory=dict)
    """``(low, high)`` of each figure of ``TEST_RANGED`` that varied over the rounds (and,
    in a baseline, over the sessions pooled since it was last replaced)."""
    left_out: LeftOut | None = field(
        metadata={RULE: LeftOutOf(top=True, of=LeftOut, marker=OTHER_OPS)}, default=None
    )
    """The op keys folded into ``ops[OTHER_OPS]`` (``trim.py``); None when none was."""
    switched: tuple[tuple[str, ...], ...] | None = field(
        metadata={RULE: PerRoundKeys(compact=False)}, default=None
    )
    """Per round, the op keys (sorted) the thread was switched out in, waiting for a CPU (an
    event of theirs waited); None when not measured or when no op waited.  Not stored in
    baselines: a verdict reads it on the side being judged (``waiting.switched_out``)."""
    leaked_ops: Mapping[str, int] = field(
        metadata={RULE: OpBytes(compact=False)}, default_factory=dict
    )
    """Of ``memory.leaked_bytes``, the numpy data each op allocated (the low median over
    rounds; ``[memory]``: outside any op): the ops a leak is named by.  Not stored in
    baselines."""
    device_traffic: DeviceTraffic | None = field(
        metadata={RULE: Nested(of=DeviceTraffic, optional=True)}, default=None
    )
    """Bytes copied between host and device and synchronisations (the round whose total
    is the low median); None, and not written, where no op's argument was off the host."""

    def exact_values(self) -> dict[str, int]:
        """The deterministic figures that may carry a range, by name (those measured)."""
        out = {"flops": self.flops, "op_count": self.op_count}
        if self.memory is not None:
            out.update(
                peak_bytes=self.memory.peak_bytes,
                allocated_bytes=self.memory.allocated_bytes,
                allocations=self.memory.allocations,
                leaked_bytes=self.memory.leaked_bytes,
            )
        if self.device_memory_bytes is not None:
            out["device_memory_bytes"] = self.device_memory_bytes
        if self.device_traffic is not None:
            out.update(self.device_traffic.figures())
        return out

    def span(self, name: str) -> Span:
        """The range the figure ``name`` spanned; its value alone where it did not vary."""
        value = self.exact_values()[name]
        return self.ranges.get(name, (value, value))

    def wait_share(self) -> float | None:
        """The share of the rounds' wall time the test's thread waited for a CPU."""
        if self.wait_time is None:
            return None
        wall = sum(self.wall_time.samples_ns)
        return sum(self.wait_time.samples_ns) / wall if wall > 0 else 0.0

    def to_json(self) -> dict[str, object]:
        """``{"rounds", "summary", "ops"}``: the part of a baseline entry this summary fills."""
        return summary_codec.to_json(self)

    def as_stored(self) -> TestSummary:
        """What :meth:`to_json` reads back as, built without the text: the figures a
        pytest-xdist controller (or a baseline) sees, for a process that judges its own
        tests (the JSON round trip cost a trivial test a tenth of a millisecond)."""
        summary: TestSummary = summary_codec.stored(self)
        return summary

    @classmethod
    def from_json(cls, f: Fields) -> TestSummary:
        """Read back :meth:`to_json` from an object holding ``rounds``, ``summary``, ``ops``."""
        summary: TestSummary = summary_codec.from_json(cls, f)
        return summary


def _median_low(values: Sequence[int]) -> int:
    """``statistics.median_low``, without its work for one value (one round: most tests)."""
    return values[0] if len(values) == 1 else statistics.median_low(values)


def _median(values: Sequence[float]) -> float:
    return values[0] if len(values) == 1 else statistics.median(values)


def summarize_rounds(rounds: Sequence[RoundFigures]) -> TestSummary:
    """Combine the measured rounds of one test (at least one) into its summary."""
    if not rounds:
        raise ValueError("summarize_rounds needs at least one round")
    if len(rounds) == 1:  # most tests
        return _summarize_one(rounds[0])
    return _summarize_many(rounds)


def _summarize_one(r: RoundFigures) -> TestSummary:
    """``_summarize_many([r])`` without its lists of one, statistics calls and ranges (one
    round spans no range): every test with one round, each paid it."""
    built = _native_one_round(r.ops)
    if built is not None:
        ops, op_count, flops, device_ns = built
    else:
        ops = {key: _one_round_op(key, f) for key, f in sorted(r.ops.items())}
        op_count = sum(f.count for k, f in r.ops.items() if k != MEMORY_EVENT_NAME)
        flops = sum(f.self_flops for f in r.ops.values())
        device_ns = (
            round(sum(f.self_device_ns for f in r.ops.values()))
            if any(op.device_time is not None for op in ops.values())
            else None
        )
    wall = r.wall_time_ns
    return TestSummary(
        rounds=1,
        wall_time=TimeStats.single(round(wall)),
        cpu_time=TimeStats.single(round(r.cpu_time_ns)),
        op_count=op_count,
        flops=flops,
        op_time_share=r.captured_ns() / wall if wall > 0 else 0.0,
        memory=_low_median_memory([r.memory]) if r.memory is not None else None,
        ops=ops,
        device_time=TimeStats.single(device_ns) if device_ns is not None else None,
        device_memory_bytes=r.device_memory_bytes,
        speed_ref=TimeStats.single(round(r.speed_ref_ns)) if r.speed_ref_ns is not None else None,
        native_ref=(
            TimeStats.single(round(r.native_ref_ns)) if r.native_ref_ns is not None else None
        ),
        dropped_events=r.dropped_events,
        wait_time=TimeStats.single(round(r.wait_ns)) if r.wait_ns is not None else None,
        ranges={},
        leaked_ops=dict(r.leaked_ops),
        device_traffic=r.traffic,
    )


def _native_one_round(
    ops: Mapping[str, OpFigures],
) -> tuple[dict[str, OpSummary], int, int, int | None] | None:
    """(op summaries, op count, FLOPs, device ns or None) of a round's ops still in their
    sums, built natively (``_native.one_round_ops``, the objects ``_one_round_op``
    makes); None where the ops were made already or the sums need the rows' float
    arithmetic."""
    if type(ops) is not SummedOps or ops.is_made:
        return None
    from pytest_opprof import _native

    return _native.one_round_ops(
        ops.group_keys, ops.sums, MEMORY_EVENT_NAME, EXACT, OpSummary, TimeStats
    )


def _summarize_many(rounds: Sequence[RoundFigures]) -> TestSummary:
    """:func:`summarize_rounds` of any number of rounds (at least one)."""
    if len(rounds) == 1:
        ops = {key: _one_round_op(key, f) for key, f in sorted(rounds[0].ops.items())}
    else:
        keys = sorted({key for r in rounds for key in r.ops})
        ops = {
            key: _summarize_op(key, [r.ops.get(key, OpFigures()) for r in rounds]) for key in keys
        }
    memories = [r.memory for r in rounds if r.memory is not None]
    device_memory = [r.device_memory_bytes for r in rounds if r.device_memory_bytes is not None]
    speed_refs = [r.speed_ref_ns for r in rounds if r.speed_ref_ns is not None]
    native_refs = [r.native_ref_ns for r in rounds if r.native_ref_ns is not None]
    waits = [r.wait_ns for r in rounds if r.wait_ns is not None]
    op_counts = [sum(f.count for k, f in r.ops.items() if k != MEMORY_EVENT_NAME) for r in rounds]
    flops = [sum(f.self_flops for f in r.ops.values()) for r in rounds]
    spans = {"flops": span_of(flops), "op_count": span_of(op_counts)}
    if memories:
        for name in ("peak_bytes", "allocated_bytes", "allocations", "leaked_bytes"):
            spans[name] = span_of(getattr(m, name) for m in memories)
    if device_memory:
        spans["device_memory_bytes"] = span_of(device_memory)
    traffic = _median_traffic(rounds)
    if traffic is not None:
        per_round = [r.traffic.figures() if r.traffic is not None else {} for r in rounds]
        for name in TRAFFIC_FIGURES:
            spans[name] = span_of(figures.get(name, 0) for figures in per_round)
    return TestSummary(
        rounds=len(rounds),
        wall_time=TimeStats.from_samples([r.wall_time_ns for r in rounds]),
        cpu_time=TimeStats.from_samples([r.cpu_time_ns for r in rounds]),
        op_count=_median_low(op_counts),
        flops=_median_low(flops),
        op_time_share=_median(
            [r.captured_ns() / r.wall_time_ns if r.wall_time_ns > 0 else 0.0 for r in rounds]
        ),
        memory=_low_median_memory(memories) if memories else None,
        ops=ops,
        device_time=(
            TimeStats.from_samples([sum(f.self_device_ns for f in r.ops.values()) for r in rounds])
            if any(op.device_time is not None for op in ops.values())
            else None
        ),
        device_memory_bytes=_median_low(device_memory) if device_memory else None,
        # Only with one reference per round: a verdict pairs them with the rounds' times.
        speed_ref=TimeStats.from_samples(speed_refs) if len(speed_refs) == len(rounds) else None,
        native_ref=TimeStats.from_samples(native_refs) if len(native_refs) == len(rounds) else None,
        dropped_events=max(r.dropped_events for r in rounds),
        wait_time=TimeStats.from_samples(waits) if len(waits) == len(rounds) else None,
        ranges=varying(spans),
        switched=_switched(rounds),
        leaked_ops=_leaked_ops(rounds),
        device_traffic=traffic,
    )


def _median_traffic(rounds: Sequence[RoundFigures]) -> DeviceTraffic | None:
    """The traffic of the round whose figures are the low median (in ``TRAFFIC_FIGURES``
    order), so that its sites add up to them; a round without traffic had none (0).
    None where no round had any device argument."""
    if all(r.traffic is None for r in rounds):
        return None
    none = DeviceTraffic.of((0,) * len(TRAFFIC_FIGURES))
    measured = [r.traffic if r.traffic is not None else none for r in rounds]
    ordered = sorted(measured, key=lambda t: tuple(t.figures().values()))
    return ordered[(len(ordered) - 1) // 2]


def _leaked_ops(rounds: Sequence[RoundFigures]) -> dict[str, int]:
    """Per op, the low median over rounds of the leaked bytes it allocated (0 in a round
    that names it not), those above 0."""
    keys = {key for r in rounds for key, _ in r.leaked_ops}
    per_round = [dict(r.leaked_ops) for r in rounds]
    medians = {key: _median_low(sorted(held.get(key, 0) for held in per_round)) for key in keys}
    return {key: n for key, n in sorted(medians.items()) if n > 0}


def _switched(rounds: Sequence[RoundFigures]) -> tuple[tuple[str, ...], ...] | None:
    """Per round, the op keys switched out (``TestSummary.switched``); None when no
    round has any.  A round's None is an empty one here: whether each op's wait is
    measured holds for the whole process."""
    per_round = [r.switched for r in rounds]
    if not any(per_round):
        return None
    return tuple(tuple(sorted(keys or ())) for keys in per_round)


def _summarize_op(key: str, per_round: list[OpFigures]) -> OpSummary:
    has_device = any(f.device_ns or f.self_device_ns for f in per_round)
    return OpSummary(
        key=key,
        count=_median_low([f.count for f in per_round]),
        self_cpu_time=TimeStats.from_samples([f.self_cpu_ns for f in per_round]),
        cpu_time=TimeStats.from_samples([f.cpu_ns for f in per_round]),
        self_memory_bytes=_median_low([f.self_memory_bytes for f in per_round]),
        memory_bytes=_median_low([f.memory_bytes for f in per_round]),
        flops=_median_low([f.flops for f in per_round]),
        self_device_time=(
            TimeStats.from_samples([f.self_device_ns for f in per_round]) if has_device else None
        ),
        device_time=TimeStats.from_samples([f.device_ns for f in per_round])
        if has_device
        else None,
        ranges=varying(
            {
                "count": span_of(f.count for f in per_round),
                "flops": span_of(f.flops for f in per_round),
                "self_memory_bytes": span_of(f.self_memory_bytes for f in per_round),
                "self_device_memory_bytes": span_of(f.self_device_memory_bytes for f in per_round),
            }
        ),
        self_device_memory_bytes=_median_low([f.self_device_memory_bytes for f in per_round]),
    )


def _one_round_op(key: str, f: OpFigures) -> OpSummary:
    """``_summarize_op(key, [f])``, built without its per-figure lists: one round of a
    test is every op of most tests."""
    self_cpu = TimeStats.single(round(f.self_cpu_ns))
    total = round(f.cpu_ns)
    has_device = bool(f.device_ns or f.self_device_ns)
    return _op_summary(
        key,
        f.count,
        self_cpu,
        # An op that called no other op: one object, so its stored form rounds it once.
        self_cpu if total == self_cpu.min_ns else TimeStats.single(total),
        f.self_memory_bytes,
        f.memory_bytes,
        f.flops,
        TimeStats.single(round(f.self_device_ns)) if has_device else None,
        TimeStats.single(round(f.device_ns)) if has_device else None,
        {},
        f.self_device_memory_bytes,
    )


def _op_summary(*values: Any) -> OpSummary:
    """``OpSummary(*values)`` filled in place (the frozen ``__init__`` sets each field through
    ``object.__setattr__``, twice the cost): built twice per op of every test."""
    op: OpSummary = filled(OpSummary, _OP_FIELDS, values)
    return op


_OP_FIELDS = field_names(OpSummary)


def _low_median_memory(memories: list[MemoryFigures]) -> MemoryFigures:
    return MemoryFigures(
        peak_bytes=_median_low([m.peak_bytes for m in memories]),
        allocated_bytes=_median_low([m.allocated_bytes for m in memories]),
        allocations=_median_low([m.allocations for m in memories]),
        leaked_bytes=_median_low([m.leaked_bytes for m in memories]),
    )


def _stdev(values: Sequence[int]) -> int:
    """The sample standard deviation of two or more ints, rounded: ``statistics.stdev``'s
    value from exact integer sums (it sums Fractions: a third of a gate run's summaries)."""
    n = len(values)
    total = sum(values)
    spread = n * sum(v * v for v in values) - total * total  # n (n - 1) s^2, exact
    return round(math.sqrt(spread / (n * (n - 1))))
