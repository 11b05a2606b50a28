"""Per-test figures over measured rounds: what baselines store and verdicts compare.

One :class:`RoundFigures` per measured round is taken from that round's
``key_averages()`` rows (any object with the ``FunctionEventAvg`` attribute
names; times there are in microseconds) plus the round's wall and CPU time and
memory statistics.  :func:`summarize_rounds` turns the rounds into a
:class:`TestSummary`.

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
decimals; ints that are exact (counts, FLOPs, bytes) stay exact.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from pytest_opprof.gate import summary_codec
from pytest_opprof.gate.jsonio import Fields
from pytest_opprof.gate.summary_codec import (
    RULE,
    Count,
    Hex32,
    LeftOutOf,
    Nested,
    Ns,
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

_US_TO_NS = 1000
_NS_PER_US = 1000.0
_EXACT = 2**50
"""Below this, an integer goes through the rows' float arithmetic unchanged: ``x / 1000.0
* 1000`` is off by at most ``x * 2**-52`` (under 0.25), and ``float(x)`` is exact."""
_SUM_FIELDS = (
    "count",
    "cpu_ns",
    "self_cpu_ns",
    "device_ns",
    "self_device_ns",
    "memory_bytes",
    "self_memory_bytes",
    "flops",
    "self_flops",
)
"""The ``OpFigures`` field of each of ``_native.GROUP_COLUMNS``, in that order."""

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
)
"""The test-level deterministic figures that may carry a range (names as in ``ranges``)."""
OP_RANGED = ("count", "flops", "self_memory_bytes")
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
        stats: TimeStats = filled(cls, _STATS_FIELDS, _one_sample(ns))
        return stats

    def one_sample(self) -> int | None:
        """The sample where these are the statistics :meth:`single` builds (every value an
        int, not only an equal number), else None."""
        samples = self.samples_ns
        if type(samples) is not tuple or len(samples) != 1:
            return None
        ns = samples[0]
        values = tuple(self.__dict__.values())
        if type(ns) is int and values == _one_sample(ns) and tuple(map(type, values)) == _ONE_TYPES:
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
            stdev_ns=round(statistics.stdev(values)) if len(values) > 1 else 0,
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


def _one_sample(ns: int) -> tuple[Any, ...]:
    """The values of :class:`TimeStats` (in field order) for the one sample ``ns``."""
    return (ns,), ns, ns, ns, ns, 0, 0


_STATS_FIELDS = field_names(TimeStats)
_ONE_TYPES = tuple(map(type, _one_sample(0)))


class MemoryStatsLike(Protocol):
    """What is read from ``sources.memory_source.MemoryStats`` (bytes, and a count)."""

    @property
    def peak_bytes(self) -> int: ...
    @property
    def allocated_bytes(self) -> int: ...
    @property
    def allocations(self) -> int: ...
    @property
    def leaked_bytes(self) -> int: ...


@dataclass(frozen=True)
class MemoryFigures:
    """Memory of one round, or the low median over rounds; all bytes except ``allocations``."""

    peak_bytes: int = field(metadata={RULE: Count()})
    allocated_bytes: int = field(metadata={RULE: Count()})
    allocations: int = field(metadata={RULE: Count()})
    leaked_bytes: int = field(metadata={RULE: Count(minimum=None)})

    @classmethod
    def of(cls, stats: MemoryStatsLike) -> MemoryFigures:
        """Copy the figures of any object with ``MemoryStats``' attribute names."""
        return cls(*(int(getattr(stats, name)) for name in field_names(cls)))

    def to_json(self) -> dict[str, object]:
        return summary_codec.to_json(self)

    @classmethod
    def from_json(cls, f: Fields) -> MemoryFigures:
        memory: MemoryFigures = summary_codec.from_json(cls, f)
        return memory


@dataclass(frozen=True)
class OpFigures:
    """One op key's totals within one round: times in ns, memory in net bytes."""

    count: int = 0
    self_cpu_ns: int = 0
    cpu_ns: int = 0
    self_memory_bytes: int = 0
    memory_bytes: int = 0
    flops: int = 0
    self_device_ns: int = 0
    device_ns: int = 0
    self_flops: int = 0
    """FLOPs that count toward the test's total ("innermost wins", see FunctionEventAvg)."""

    def __add__(self, other: OpFigures) -> OpFigures:
        return OpFigures(*(getattr(self, n) + getattr(other, n) for n in self.__dataclass_fields__))


def _num(row: object, name: str) -> float:
    value = getattr(row, name, 0)
    return float(value) if value is not None else 0.0


def _self_time_field(row: object) -> str:
    """The raw self time where the row has one (opprof's rows), else torch's field."""
    return (
        "self_cpu_time_total_raw"
        if hasattr(row, "self_cpu_time_total_raw")
        else ("self_cpu_time_total")
    )


def _op_key(row: object, by_input_shape: bool) -> str:
    key = getattr(row, "key", None)
    if key is None:
        raise TypeError(f"expected a key_averages() row with a 'key', got {row!r}")
    shapes = getattr(row, "input_shapes", None) if by_input_shape else None
    return f"{key} {shapes}" if shapes else str(key)


@dataclass(frozen=True)
class RoundFigures:
    """Everything measured in one round: wall and CPU time (ns), op totals, memory."""

    wall_time_ns: int
    cpu_time_ns: int
    ops: Mapping[str, OpFigures]
    memory: MemoryFigures | None = None
    device_memory_bytes: int | None = None
    """Device memory peak of the round (bytes), None when not measured."""
    speed_ref_ns: int | None = None
    """The Python speed reference's time beside this round (ns, see ``speed``), None if not run."""
    native_ref_ns: int | None = None
    """The native speed reference's time beside this round (ns), None if not run."""
    dropped_events: int = 0
    """Events the round recorded beyond the profile's limit and dropped: its op figures
    then cover only the events before the limit (wall, CPU time and memory do not)."""
    wait_ns: int | None = None
    """ns the test's thread waited for a CPU during the round (``capture/contention.py``),
    None when not measured."""
    library_self_ns: int | None = None
    """Self CPU time of the round's library ops (ns; ``model.library_self_ns``): not its
    ``record_function`` scopes.  None for rows from elsewhere: then every row counts."""
    switched: frozenset[str] | None = None
    """The op keys an event of which the thread was switched out in, waiting for a CPU
    (``model.waits``); None when no op waited or waits were not measured per op."""

    @classmethod
    def from_events(
        cls,
        rows: Iterable[object],
        *,
        wall_time_ns: int,
        cpu_time_ns: int,
        memory: MemoryStatsLike | None = None,
        by_input_shape: bool = False,
        device_memory_bytes: int | None = None,
        speed_ref_ns: int | None = None,
        native_ref_ns: int | None = None,
        dropped_events: int = 0,
        wait_ns: int | None = None,
        library_self_ns: int | None = None,
    ) -> RoundFigures:
        """Figures of one round from its ``key_averages()`` rows (µs) and a ``MemoryStats``.

        Rows sharing a key are summed; with ``by_input_shape`` the key gets the
        row's ``input_shapes`` appended so each shape is its own op.
        """
        ops: dict[str, OpFigures] = {}
        for row in rows:
            key = _op_key(row, by_input_shape)
            figures = OpFigures(
                count=int(_num(row, "count")),
                # Raw (profiler overhead not subtracted): baselines stay comparable
                # whatever each session's calibration measured (capture/overhead.py).
                self_cpu_ns=round(_num(row, _self_time_field(row)) * _US_TO_NS),
                cpu_ns=round(_num(row, "cpu_time_total") * _US_TO_NS),
                self_memory_bytes=int(_num(row, "self_cpu_memory_usage")),
                memory_bytes=int(_num(row, "cpu_memory_usage")),
                flops=int(_num(row, "flops")),
                self_device_ns=round(_num(row, "self_device_time_total") * _US_TO_NS),
                device_ns=round(_num(row, "device_time_total") * _US_TO_NS),
                # Rows without self_flops (other profilers) count their own FLOPs.
                self_flops=int(_num(row, "self_flops" if hasattr(row, "self_flops") else "flops")),
            )
            ops[key] = ops[key] + figures if key in ops else figures
        return cls(
            wall_time_ns=int(wall_time_ns),
            cpu_time_ns=int(cpu_time_ns),
            ops=ops,
            memory=MemoryFigures.of(memory) if memory is not None else None,
            device_memory_bytes=device_memory_bytes,
            speed_ref_ns=speed_ref_ns,
            native_ref_ns=native_ref_ns,
            dropped_events=dropped_events,
            wait_ns=wait_ns,
            library_self_ns=library_self_ns,
        )

    @classmethod
    def from_sums(
        cls,
        keys: Sequence[str],
        sums: Iterable[Sequence[int]],
        *,
        wall_time_ns: int,
        cpu_time_ns: int,
        memory: MemoryStatsLike | None = None,
        device_memory_bytes: int | None = None,
        speed_ref_ns: int | None = None,
        native_ref_ns: int | None = None,
        dropped_events: int = 0,
        wait_ns: int | None = None,
        library_self_ns: int | None = None,
    ) -> RoundFigures:
        """:meth:`from_events` of the rows ``key_averages()`` would build from these
        integer sums, without the rows (``model.averages.op_sums``): ``keys[i]`` is a
        group's op key, ``sums[i]`` its ``_native.GROUP_COLUMNS`` (count, total and self
        CPU ns, total and self device ns, total and self bytes, FLOPs, self FLOPs).
        """
        ops = _SummedOps(
            keys if isinstance(keys, list) else list(keys),
            sums if isinstance(sums, list) else list(sums),
        )
        return cls(
            wall_time_ns=int(wall_time_ns),
            cpu_time_ns=int(cpu_time_ns),
            ops=ops,
            memory=MemoryFigures.of(memory) if memory is not None else None,
            device_memory_bytes=device_memory_bytes,
            speed_ref_ns=speed_ref_ns,
            native_ref_ns=native_ref_ns,
            dropped_events=dropped_events,
            wait_ns=wait_ns,
            library_self_ns=library_self_ns,
        )

    def captured_ns(self) -> int:
        """Time in captured library ops: :attr:`library_self_ns`, or every row's self time."""
        if self.library_self_ns is not None:
            return self.library_self_ns
        return sum(f.self_cpu_ns for f in self.ops.values())


def _ops_from_sums(keys: Sequence[str], sums: Iterable[Sequence[int]]) -> dict[str, OpFigures]:
    """:meth:`RoundFigures.from_sums`' op figures, made when first read (``_SummedOps``)."""
    ops: dict[str, OpFigures] = {}
    new = object.__new__
    for key, group in zip(keys, sums, strict=True):
        # Filled in place, as TimeStats.single is (the frozen __init__ sets each
        # field through object.__setattr__): the same object, a third of the cost.
        figures = new(OpFigures)
        if -_EXACT < min(group) and max(group) < _EXACT:
            figures.__dict__.update(zip(_SUM_FIELDS, group, strict=True))
            ops[key] = ops[key] + figures if key in ops else figures
            continue
        count, cpu, self_cpu, device, self_device, mem, self_mem, flops, self_flops = group
        # The very arithmetic from_events does on a row (a time in us as a float, a
        # count through float): the same figures to the last bit, FLOPs past 2**53
        # included.
        figures.__dict__.update(
            count=int(float(count)),
            self_cpu_ns=round(self_cpu / _NS_PER_US * _US_TO_NS),
            cpu_ns=round(cpu / _NS_PER_US * _US_TO_NS),
            self_memory_bytes=int(float(self_mem)),
            memory_bytes=int(float(mem)),
            flops=int(float(flops)),
            self_device_ns=round(self_device / _NS_PER_US * _US_TO_NS),
            device_ns=round(device / _NS_PER_US * _US_TO_NS),
            self_flops=int(float(self_flops)),
        )
        ops[key] = ops[key] + figures if key in ops else figures
    return ops


class _SummedOps(Mapping[str, OpFigures]):
    """A round's ops as :meth:`RoundFigures.from_sums` got them, made into ``OpFigures`` on
    first read: a one-round test's summary is built from the sums themselves, in one
    native call (``_summarize_one``), and most tests never read their round's ops."""

    __slots__ = ("_made", "group_keys", "sums")

    def __init__(self, keys: Sequence[str], sums: Iterable[Sequence[int]]) -> None:
        self.group_keys = keys
        self.sums = sums
        self._made: dict[str, OpFigures] | None = None

    def made(self) -> dict[str, OpFigures]:
        if self._made is None:
            self._made = _ops_from_sums(self.group_keys, self.sums)
        return self._made

    def __getitem__(self, key: str) -> OpFigures:
        return self.made()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self.made())

    def __len__(self) -> int:
        return len(self.made())

    def __contains__(self, key: object) -> bool:
        return key in self.made()

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Mapping):
            return NotImplemented
        return self.made() == (other.made() if isinstance(other, _SummedOps) else dict(other))

    def __repr__(self) -> str:
        return repr(self.made())


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

    def exact_values(self) -> dict[str, int]:
        """The op's deterministic figures that may carry a range, by name."""
        return {
            "count": self.count,
            "flops": self.flops,
            "self_memory_bytes": self.self_memory_bytes,
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
    )


def _native_one_round(
    ops: Mapping[str, OpFigures],
) -> tuple[dict[str, OpSummary], int, int, int | None] | None:
    """(op summaries, op count, FLOPs, device ns or None) of a round's ops still in their
    sums, built natively (``_native.one_round_ops``, the objects ``_one_round_op``
    makes); None where the ops were made already or the sums need the rows' float
    arithmetic."""
    if type(ops) is not _SummedOps or ops._made is not None:
        return None
    from pytest_opprof import _native

    return _native.one_round_ops(
        ops.group_keys, ops.sums, MEMORY_EVENT_NAME, _EXACT, OpSummary, TimeStats
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
    )


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
            }
        ),
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
