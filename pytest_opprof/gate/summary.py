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
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from pytest_opprof.errors import FieldError
from pytest_opprof.gate.jsonio import Fields, field_path, round_sig
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

    keys: int
    digest: int

    def to_json(self) -> dict[str, object]:
        return {"ops": self.keys, "digest": f"{self.digest:08x}"}

    @classmethod
    def from_json(cls, f: Fields) -> LeftOut:
        digest = f.text("digest")
        try:
            value = int(digest, 16)
        except ValueError:
            value = -1
        if not 0 <= value < 2**32 or len(digest) != 8:
            raise FieldError(field_path(f.path, "digest"), f"expected 8 hex digits, got {digest!r}")
        return cls(keys=f.integer("ops", minimum=1), digest=value)


def span_of(values: Iterable[int]) -> Span:
    """The ``(low, high)`` of some values of one figure."""
    seen = list(values)
    return min(seen), max(seen)


def varying(spans: Mapping[str, Span]) -> dict[str, Span]:
    """Only the spans that are not a single value: what a file stores."""
    return {name: (lo, hi) for name, (lo, hi) in spans.items() if lo != hi}


def ranges_json(ranges: Ranges) -> dict[str, object]:
    return {name: [lo, hi] for name, (lo, hi) in sorted(ranges.items())}


def ranges_from_json(
    f: Fields, names: Sequence[str], values: Mapping[str, int | None]
) -> dict[str, Span]:
    """Read ``ranges`` (optional: files written before ranges have none), each a pair of
    integers around the figure's stored value."""
    if not f.has("ranges"):
        return {}
    r = f.obj("ranges")
    out: dict[str, Span] = {}
    for name in sorted(r.data):
        where = field_path(r.path, name)
        if name not in names:
            raise FieldError(where, f"expected one of {', '.join(names)}")
        value = values.get(name)
        if value is None:
            raise FieldError(where, "a range for a figure that was not measured")
        lo, hi = r.int_pair(name)
        if not lo <= value <= hi:
            raise FieldError(where, f"expected a range around the figure {value}, got [{lo}, {hi}]")
        out[name] = (lo, hi)
    return out


@dataclass(frozen=True)
class TimeStats:
    """Statistics of one time over the measured rounds, all in ns."""

    samples_ns: tuple[int, ...]
    median_ns: int
    min_ns: int
    max_ns: int
    mean_ns: int
    stdev_ns: int
    mad_ns: int

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

    def spool_short_values(self) -> list[int] | None:
        """``[ns]`` for the statistics of one sample (``single``), else None: how the
        result spool writes most tests' times (``gate.spool.SHORT_VALUES``)."""
        d = self.__dict__
        ns = d["min_ns"]
        samples = d["samples_ns"]
        if type(ns) is not int or type(samples) is not tuple or len(samples) != 1:
            return None
        # Every field an int (what single builds), not only an equal number.
        same = (samples[0], d["median_ns"], d["max_ns"], d["mean_ns"])
        zeros = (d["stdev_ns"], d["mad_ns"])
        if all(type(v) is int and v == ns for v in same) and all(
            type(v) is int and v == 0 for v in zeros
        ):
            return [ns]
        return None

    @classmethod
    def from_spool_short_values(cls, values: list[int]) -> TimeStats:
        """What :meth:`spool_short_values` wrote."""
        return cls.single(values[0])

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
        return {
            "samples_ns": [round_sig(s) for s in self.samples_ns],
            "median_ns": round_sig(self.median_ns),
            "min_ns": round_sig(self.min_ns),
            "max_ns": round_sig(self.max_ns),
            "mean_ns": round_sig(self.mean_ns),
            "stdev_ns": round_sig(self.stdev_ns),
            "mad_ns": round_sig(self.mad_ns),
        }

    def as_stored(self) -> TimeStats:
        """What :meth:`to_json` reads back as, without the text: every time rounded."""
        if self.min_ns == self.max_ns and not self.stdev_ns and not self.mad_ns:
            # Every sample alike (one round: most tests), so are the median and the mean:
            # one rounding for all of them.
            only = round_sig(self.min_ns)
            if self.median_ns == self.mean_ns == self.min_ns:
                if len(self.samples_ns) == 1:
                    return TimeStats.single(only)
                return TimeStats((only,) * len(self.samples_ns), only, only, only, only, 0, 0)
        return TimeStats(
            samples_ns=tuple(round_sig(s) for s in self.samples_ns),
            median_ns=round_sig(self.median_ns),
            min_ns=round_sig(self.min_ns),
            max_ns=round_sig(self.max_ns),
            mean_ns=round_sig(self.mean_ns),
            stdev_ns=round_sig(self.stdev_ns),
            mad_ns=round_sig(self.mad_ns),
        )

    @classmethod
    def from_json(cls, f: Fields, rounds: int | None = None) -> TimeStats:
        """Read back :meth:`to_json` (raises ``FieldError``): at least one sample, and
        ``rounds`` of them when given (a verdict pairs them with the rounds)."""
        samples = f.integers("samples_ns")
        if not samples or (rounds is not None and len(samples) != rounds):
            expected = (
                "at least one sample" if rounds is None else f"one sample per round ({rounds})"
            )
            raise FieldError(
                field_path(f.path, "samples_ns"), f"expected {expected}, got {len(samples)}"
            )
        return cls(
            samples_ns=tuple(samples),
            median_ns=f.integer("median_ns"),
            min_ns=f.integer("min_ns"),
            max_ns=f.integer("max_ns"),
            mean_ns=f.integer("mean_ns"),
            stdev_ns=f.integer("stdev_ns"),
            mad_ns=f.integer("mad_ns"),
        )


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

    peak_bytes: int
    allocated_bytes: int
    allocations: int
    leaked_bytes: int

    @classmethod
    def of(cls, stats: MemoryStatsLike) -> MemoryFigures:
        """Copy the figures of any object with ``MemoryStats``' attribute names."""
        return cls(
            peak_bytes=int(stats.peak_bytes),
            allocated_bytes=int(stats.allocated_bytes),
            allocations=int(stats.allocations),
            leaked_bytes=int(stats.leaked_bytes),
        )

    def to_json(self) -> dict[str, object]:
        return {
            "peak_bytes": self.peak_bytes,
            "allocated_bytes": self.allocated_bytes,
            "allocations": self.allocations,
            "leaked_bytes": self.leaked_bytes,
        }

    @classmethod
    def from_json(cls, f: Fields) -> MemoryFigures:
        return cls(
            peak_bytes=f.integer("peak_bytes"),
            allocated_bytes=f.integer("allocated_bytes"),
            allocations=f.integer("allocations"),
            leaked_bytes=f.integer("leaked_bytes", minimum=None),
        )


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

    key: str
    count: int
    self_cpu_time: TimeStats
    cpu_time: TimeStats | None
    """The op's total time (itself and the ops it called); None where a baseline did not
    store it (schema 2: no verdict reads it)."""
    self_memory_bytes: int
    memory_bytes: int | None
    """Net bytes of the op and the ops it called; None where a baseline did not store it."""
    flops: int
    self_device_time: TimeStats | None = None
    device_time: TimeStats | None = None
    ranges: Ranges = field(default_factory=dict)
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
        out: dict[str, object] = {
            "count": self.count,
            "self_cpu_time": self.self_cpu_time.to_json(),
            "self_memory_bytes": self.self_memory_bytes,
            "flops": self.flops,
        }
        if self.cpu_time is not None:
            out["cpu_time"] = self.cpu_time.to_json()
        if self.memory_bytes is not None:
            out["memory_bytes"] = self.memory_bytes
        if self.self_device_time is not None:
            out["self_device_time"] = self.self_device_time.to_json()
        if self.device_time is not None:
            out["device_time"] = self.device_time.to_json()
        if self.ranges:
            out["ranges"] = ranges_json(self.ranges)
        return out

    def as_stored(self) -> OpSummary:
        """What :meth:`to_json` reads back as, without the text (device times travel as a
        pair or not at all)."""
        self_device, device = self.self_device_time, self.device_time
        paired = self_device is not None and device is not None
        self_cpu = self.self_cpu_time.as_stored()
        total = self.cpu_time
        # An op that called no other op has one time object for both (summarize_rounds):
        # rounded once.
        cpu = self_cpu if total is self.self_cpu_time else total and total.as_stored()
        # Built directly, not through dataclasses.replace (which reads every field and
        # calls __init__ by keywords), nor through __init__: this runs per op of every test.
        return _op_summary(
            self.key,
            self.count,
            self_cpu,
            cpu,
            self.self_memory_bytes,
            self.memory_bytes,
            self.flops,
            self_device.as_stored() if paired and self_device else None,
            device.as_stored() if paired and device else None,
            self.ranges,
        )

    @classmethod
    def from_json(cls, key: str, f: Fields, rounds: int | None = None) -> OpSummary:
        """Read back :meth:`to_json`; ``rounds``: the samples each time must have."""
        device = f.opt_obj("device_time")
        self_device = f.opt_obj("self_device_time")
        total = f.opt_obj("cpu_time")
        op = cls(
            key=key,
            count=f.integer("count"),
            self_cpu_time=TimeStats.from_json(f.obj("self_cpu_time"), rounds),
            cpu_time=TimeStats.from_json(total, rounds) if total else None,
            self_memory_bytes=f.integer("self_memory_bytes", minimum=None),
            memory_bytes=f.opt_integer("memory_bytes", minimum=None),
            flops=f.integer("flops"),
            self_device_time=TimeStats.from_json(self_device, rounds) if self_device else None,
            device_time=TimeStats.from_json(device, rounds) if device else None,
        )
        ranges = ranges_from_json(f, OP_RANGED, op.exact_values())
        return replace(op, ranges=ranges) if ranges else op


@dataclass(frozen=True)
class TestSummary:
    """One test's figures over its measured rounds (times in ns, memory in bytes)."""

    __test__ = False  # not a pytest test class, whatever module imports it

    rounds: int
    wall_time: TimeStats
    cpu_time: TimeStats
    op_count: int
    flops: int
    op_time_share: float
    """Median over rounds of (self time of library ops) / wall time: the share of the test
    spent in captured ops.  ``record_function`` scopes do not count: they mark any code."""
    memory: MemoryFigures | None = None
    ops: Mapping[str, OpSummary] = field(default_factory=dict)
    device_time: TimeStats | None = None
    """Per round, the self device time of all ops (ns); None when no device time was measured."""
    device_memory_bytes: int | None = None
    """Low median over rounds of the device memory peak (bytes); None when not measured."""
    speed_ref: TimeStats | None = None
    """Per round, the Python speed reference's time (ns, see ``speed``); None when not run."""
    native_ref: TimeStats | None = None
    """Per round, the native speed reference's time (ns, see ``speed``); None when not run."""
    sessions: tuple[int, ...] = ()
    """Rounds per recording session, oldest first, when a baseline pools several
    (``pooling.py``); empty for one session's rounds."""
    dropped_events: int = 0
    """The most events a round dropped at the profile's limit: when not 0, the op figures
    (and the FLOPs and op count, their sums) cover only part of the test."""
    wait_time: TimeStats | None = None
    """Per round, how long the test's thread waited for a CPU (ns): time in the wall
    time that did no work.  None when not measured."""
    ranges: Ranges = field(default_factory=dict)
    """``(low, high)`` of each figure of ``TEST_RANGED`` that varied over the rounds (and,
    in a baseline, over the sessions pooled since it was last replaced)."""
    left_out: LeftOut | None = None
    """The op keys folded into ``ops[OTHER_OPS]`` (``trim.py``); None when none was."""
    switched: tuple[tuple[str, ...], ...] | None = None
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
        figures: dict[str, object] = {
            "wall_time": self.wall_time.to_json(),
            "cpu_time": self.cpu_time.to_json(),
            "op_count": self.op_count,
            "flops": self.flops,
            "op_time_share": round(self.op_time_share, 3),
            "memory": self.memory.to_json() if self.memory is not None else None,
        }
        if self.device_time is not None:
            figures["device_time"] = self.device_time.to_json()
        if self.device_memory_bytes is not None:
            figures["device_memory_bytes"] = self.device_memory_bytes
        if self.speed_ref is not None:
            figures["speed_ref"] = self.speed_ref.to_json()
        if self.native_ref is not None:
            figures["native_ref"] = self.native_ref.to_json()
        if self.dropped_events:
            figures["dropped_events"] = self.dropped_events
        if self.wait_time is not None:
            figures["wait_time"] = self.wait_time.to_json()
        if self.ranges:
            figures["ranges"] = ranges_json(self.ranges)
        if self.switched is not None:
            figures["switched"] = [list(keys) for keys in self.switched]
        out: dict[str, object] = {"rounds": self.rounds}
        if len(self.sessions) > 1:
            out["sessions"] = list(self.sessions)
        out["summary"] = figures
        out["ops"] = {key: op.to_json() for key, op in sorted(self.ops.items())}
        if self.left_out is not None:
            out["left_out"] = self.left_out.to_json()
        return out

    def spool_short_values(self) -> list[Any] | None:
        """A one-round summary's values in one flat list, else None: how the result spool
        writes most tests (``gate.spool.SHORT_VALUES``, ``gate.summary_flat``)."""
        from pytest_opprof.gate.summary_flat import flat_values

        return flat_values(self)

    @classmethod
    def from_spool_short_values(cls, values: list[Any]) -> TestSummary:
        """What :meth:`spool_short_values` wrote."""
        from pytest_opprof.gate.summary_flat import from_flat_values

        return from_flat_values(values)

    def as_stored(self) -> TestSummary:
        """What :meth:`to_json` reads back as, built without the text: the figures a
        pytest-xdist controller (or a baseline) sees, for a process that judges its own
        tests (the JSON round trip cost a trivial test a tenth of a millisecond)."""

        def stored(stats: TimeStats | None) -> TimeStats | None:
            return stats.as_stored() if stats is not None else None

        # A copy of the fields filled in place, not dataclasses.replace (which reads every
        # field and calls the frozen __init__, a setattr per field): once per test.
        out = object.__new__(TestSummary)
        fields = out.__dict__
        fields.update(self.__dict__)
        fields.update(
            wall_time=self.wall_time.as_stored(),
            cpu_time=self.cpu_time.as_stored() if self.cpu_time is not None else None,
            op_time_share=round(self.op_time_share, 3),
            ops=_stored_ops(self.ops),
            device_time=stored(self.device_time),
            speed_ref=stored(self.speed_ref),
            native_ref=stored(self.native_ref),
            wait_time=stored(self.wait_time),
            sessions=self.sessions if len(self.sessions) > 1 else (),
        )
        return out

    @classmethod
    def from_json(cls, f: Fields) -> TestSummary:
        """Read back :meth:`to_json` from an object holding ``rounds``, ``summary``, ``ops``."""
        figures = f.obj("summary")
        memory = figures.opt_obj("memory")
        device_time = figures.opt_obj("device_time")
        speed_ref = figures.opt_obj("speed_ref")
        native_ref = figures.opt_obj("native_ref")
        wait_time = figures.opt_obj("wait_time")
        rounds, sessions = read_rounds(f)
        ops = {key: OpSummary.from_json(key, op, rounds) for key, op in f.obj("ops").entries()}
        summary = cls(
            rounds=rounds,
            sessions=sessions if len(sessions) > 1 else (),
            wall_time=TimeStats.from_json(figures.obj("wall_time"), rounds),
            cpu_time=TimeStats.from_json(figures.obj("cpu_time"), rounds),
            op_count=figures.integer("op_count"),
            flops=figures.integer("flops"),
            op_time_share=figures.number("op_time_share"),
            memory=MemoryFigures.from_json(memory) if memory else None,
            ops=ops,
            device_time=TimeStats.from_json(device_time, rounds) if device_time else None,
            device_memory_bytes=figures.opt_integer("device_memory_bytes"),
            speed_ref=TimeStats.from_json(speed_ref) if speed_ref else None,
            native_ref=TimeStats.from_json(native_ref) if native_ref else None,
            dropped_events=figures.opt_integer("dropped_events") or 0,
            wait_time=TimeStats.from_json(wait_time, rounds) if wait_time else None,
            left_out=read_left_out(f, ops),
            switched=read_switched(figures, rounds),
        )
        ranges = ranges_from_json(figures, TEST_RANGED, summary.exact_values())
        return replace(summary, ranges=ranges) if ranges else summary


MAX_STORED_ROUNDS = 10_000
"""The most rounds an entry may hold: a run measures at most 1,000 rounds of a test (plus a
few to confirm or replace), and a baseline pools 3 runs.  More is no file the plugin
wrote, and reading one costs memory per round (a stored time may stand for every round)."""


def read_rounds(f: Fields) -> tuple[int, tuple[int, ...]]:
    """An entry's ``rounds`` and ``sessions`` (the rounds of each pooled run, adding up to
    ``rounds``; empty when absent), checked (raises ``FieldError``)."""
    rounds = f.integer("rounds", minimum=1, maximum=MAX_STORED_ROUNDS)
    sessions = tuple(f.integers("sessions")) if f.has("sessions") else ()
    if sessions and (min(sessions) < 1 or sum(sessions) != rounds):
        raise FieldError(
            field_path(f.path, "sessions"),
            f"expected rounds per session (each >= 1) adding up to rounds {rounds}, "
            f"got {list(sessions)}",
        )
    return rounds, sessions


def read_switched(figures: Fields, rounds: int) -> tuple[tuple[str, ...], ...] | None:
    """A summary's ``switched`` (per round, a list of op keys), checked (raises
    ``FieldError``); None when absent."""
    if not figures.has("switched"):
        return None
    raw = figures.data["switched"]
    if (
        not isinstance(raw, list)
        or len(raw) != rounds
        or not all(isinstance(keys, list) and all(isinstance(k, str) for k in keys) for keys in raw)
    ):
        raise FieldError(
            field_path(figures.path, "switched"),
            f"expected {rounds} lists of op keys, one per round",
        )
    return tuple(tuple(sorted(keys)) for keys in raw)


def read_left_out(f: Fields, ops: Mapping[str, object]) -> LeftOut | None:
    """An entry's ``left_out``, there exactly when its ops hold ``OTHER_OPS``."""
    if f.has("left_out") != (OTHER_OPS in ops):
        raise FieldError(
            field_path(f.path, "left_out"),
            f"expected exactly when the ops hold {OTHER_OPS!r} (the ops a baseline left out)",
        )
    return LeftOut.from_json(f.obj("left_out")) if f.has("left_out") else None


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


def _stored_ops(ops: Mapping[str, OpSummary]) -> dict[str, OpSummary]:
    """Each op's ``as_stored()``, in key order: natively where every time has one sample
    (``_native.stored_ops``; most tests), else op by op."""
    from pytest_opprof import _native

    if type(ops) is dict:
        stored = _native.stored_ops(ops, OpSummary, TimeStats)
        if stored is not None:
            return stored
    return {key: op.as_stored() for key, op in sorted(ops.items())}


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


def _op_summary(
    key: str,
    count: int,
    self_cpu_time: TimeStats,
    cpu_time: TimeStats | None,
    self_memory_bytes: int,
    memory_bytes: int | None,
    flops: int,
    self_device_time: TimeStats | None,
    device_time: TimeStats | None,
    ranges: Ranges,
) -> OpSummary:
    """``OpSummary(...)`` filled in place (the frozen ``__init__`` sets each field through
    ``object.__setattr__``, twice the cost): built twice per op of every test."""
    op = object.__new__(OpSummary)
    op.__dict__.update(
        key=key,
        count=count,
        self_cpu_time=self_cpu_time,
        cpu_time=cpu_time,
        self_memory_bytes=self_memory_bytes,
        memory_bytes=memory_bytes,
        flops=flops,
        self_device_time=self_device_time,
        device_time=device_time,
        ranges=ranges,
    )
    return op


def _low_median_memory(memories: list[MemoryFigures]) -> MemoryFigures:
    return MemoryFigures(
        peak_bytes=_median_low([m.peak_bytes for m in memories]),
        allocated_bytes=_median_low([m.allocated_bytes for m in memories]),
        allocations=_median_low([m.allocations for m in memories]),
        leaked_bytes=_median_low([m.leaked_bytes for m in memories]),
    )
