"""One round's figures: what a round measured, before the rounds are summarized.

One :class:`RoundFigures` per measured round is taken from that round's
``key_averages()`` rows (any object with the ``FunctionEventAvg`` attribute names;
times there are in microseconds), or from the integer sums they would be built of
(:meth:`RoundFigures.from_sums`), plus the round's wall and CPU time and memory
statistics.  ``summary.summarize_rounds`` turns the rounds into a test's summary.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from pytest_opprof.gate import summary_codec
from pytest_opprof.gate.jsonio import Fields
from pytest_opprof.gate.summary_codec import RULE, Count, SiteCounts, field_names

_US_TO_NS = 1000
_NS_PER_US = 1000.0
EXACT = 2**50
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


TRAFFIC_FIGURES = (
    "host_to_device_bytes",
    "device_to_host_bytes",
    "device_to_device_bytes",
    "device_syncs",
)
"""The traffic figures (``flops/device_traffic.py``'s ``Traffic`` fields), in its order."""


@dataclass(frozen=True)
class DeviceTraffic:
    """Bytes copied between host and device, and synchronisations with the device, of one
    round or the low median over rounds; ``sites``: the same four, by op and the scope it
    ran in (``model.event_traffic.site_key``), where not all 0.  Exact: counted from the
    ops' arguments (``flops/device_traffic.py``)."""

    host_to_device_bytes: int = field(metadata={RULE: Count()})
    device_to_host_bytes: int = field(metadata={RULE: Count()})
    device_to_device_bytes: int = field(metadata={RULE: Count()})
    device_syncs: int = field(metadata={RULE: Count()})
    sites: Mapping[str, tuple[int, int, int, int]] = field(
        metadata={RULE: SiteCounts(width=len(TRAFFIC_FIGURES))}, default_factory=dict
    )

    @classmethod
    def of(
        cls, total: Sequence[int], sites: Mapping[str, Sequence[int]] | None = None
    ) -> DeviceTraffic:
        """From the four figures in ``TRAFFIC_FIGURES`` order, and by site."""
        h2d, d2h, d2d, syncs = (int(v) for v in total)
        return cls(
            host_to_device_bytes=h2d,
            device_to_host_bytes=d2h,
            device_to_device_bytes=d2d,
            device_syncs=syncs,
            sites={
                key: (int(a), int(b), int(c), int(d))
                for key, (a, b, c, d) in sorted((sites or {}).items())
                if a or b or c or d
            },
        )

    def figures(self) -> dict[str, int]:
        """The four totals by name."""
        return {name: getattr(self, name) for name in TRAFFIC_FIGURES}

    def to_json(self) -> dict[str, object]:
        return summary_codec.to_json(self)

    @classmethod
    def from_json(cls, f: Fields) -> DeviceTraffic:
        traffic: DeviceTraffic = summary_codec.from_json(cls, f)
        return traffic


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
    self_device_memory_bytes: int = 0
    """Net bytes of the device allocators (CUDA's caching allocator) inside the op itself."""

    def __add__(self, other: OpFigures) -> OpFigures:
        return OpFigures(*(getattr(self, n) + getattr(other, n) for n in self.__dataclass_fields__))


def _num(row: object, name: str) -> float:
    value = getattr(row, name, 0)
    return float(value) if value is not None else 0.0


def _raw_field(row: object, name: str) -> str:
    """``name``'s raw figure where the row has one (opprof's rows), else torch's field."""
    return f"{name}_raw" if hasattr(row, f"{name}_raw") else name


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
    leaked_ops: tuple[tuple[str, int], ...] = ()
    """Of the round's leaked bytes, the numpy data each op allocated, most first
    (``MemoryStats.leaked_ops``)."""
    traffic: DeviceTraffic | None = None
    """Host<->device traffic of the round; None where no op's argument was off the host."""

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
                self_cpu_ns=round(_num(row, _raw_field(row, "self_cpu_time_total")) * _US_TO_NS),
                cpu_ns=round(_num(row, _raw_field(row, "cpu_time_total")) * _US_TO_NS),
                self_memory_bytes=int(_num(row, "self_cpu_memory_usage")),
                memory_bytes=int(_num(row, "cpu_memory_usage")),
                flops=int(_num(row, "flops")),
                self_device_ns=round(_num(row, "self_device_time_total") * _US_TO_NS),
                device_ns=round(_num(row, "device_time_total") * _US_TO_NS),
                # Rows without self_flops (other profilers) count their own FLOPs.
                self_flops=int(_num(row, "self_flops" if hasattr(row, "self_flops") else "flops")),
                self_device_memory_bytes=int(_num(row, "self_device_memory_usage")),
            )
            ops[key] = ops[key] + figures if key in ops else figures
        return cls(
            wall_time_ns=int(wall_time_ns),
            cpu_time_ns=int(cpu_time_ns),
            ops=ops,
            memory=MemoryFigures.of(memory) if memory is not None else None,
            leaked_ops=tuple(getattr(memory, "leaked_ops", ())),
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
        ops = SummedOps(
            keys if isinstance(keys, list) else list(keys),
            sums if isinstance(sums, list) else list(sums),
        )
        return cls(
            wall_time_ns=int(wall_time_ns),
            cpu_time_ns=int(cpu_time_ns),
            ops=ops,
            memory=MemoryFigures.of(memory) if memory is not None else None,
            leaked_ops=tuple(getattr(memory, "leaked_ops", ())),
            device_memory_bytes=device_memory_bytes,
            speed_ref_ns=speed_ref_ns,
            native_ref_ns=native_ref_ns,
            dropped_events=dropped_events,
            wait_ns=wait_ns,
            library_self_ns=library_self_ns,
        )

    @functools.cached_property
    def work(self) -> tuple[int, int]:
        """The round's work as its exact figures count it: all ops' FLOPs and calls.  Read
        at every pair of an A/B run for every round so far (``ab/judge.work_varies``):
        kept once made."""
        return (
            sum(o.flops for o in self.ops.values()),
            sum(o.count for o in self.ops.values()),
        )

    def captured_ns(self) -> int:
        """Time in captured library ops: :attr:`library_self_ns`, or every row's self time."""
        if self.library_self_ns is not None:
            return self.library_self_ns
        return sum(f.self_cpu_ns for f in self.ops.values())


def _ops_from_sums(keys: Sequence[str], sums: Iterable[Sequence[int]]) -> dict[str, OpFigures]:
    """:meth:`RoundFigures.from_sums`' op figures, made when first read (``SummedOps``)."""
    ops: dict[str, OpFigures] = {}
    new = object.__new__
    for key, group in zip(keys, sums, strict=True):
        # Filled in place, as TimeStats.single is (the frozen __init__ sets each
        # field through object.__setattr__): the same object, a third of the cost.
        figures = new(OpFigures)
        # The sums carry no device memory: records that have it take the rows' path.
        figures.__dict__["self_device_memory_bytes"] = 0
        if -EXACT < min(group) and max(group) < EXACT:
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


class SummedOps(Mapping[str, OpFigures]):
    """A round's ops as :meth:`RoundFigures.from_sums` got them, made into ``OpFigures`` on
    first read: a one-round test's summary is built from the sums themselves, in one
    native call (``_summarize_one``), and most tests never read their round's ops."""

    __slots__ = ("_made", "group_keys", "sums")

    def __init__(self, keys: Sequence[str], sums: Iterable[Sequence[int]]) -> None:
        self.group_keys = keys
        self.sums = sums
        self._made: dict[str, OpFigures] | None = None

    @property
    def is_made(self) -> bool:
        """Whether the ``OpFigures`` were made already (read)."""
        return self._made is not None

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
        return self.made() == (other.made() if isinstance(other, SummedOps) else dict(other))

    def __repr__(self) -> str:
        return repr(self.made())
