"""A one-round test summary as one flat list of numbers and strings, for the result spool.

Most tests are measured over one round, and their summary is a tree of small records:
per op an ``OpSummary`` with one-sample ``TimeStats``.  The spool's generic encoding
walks that tree record by record (several Python calls per op) and its reading builds a
JSON object per record; for a test the gate does not judge (every test of a
``--pyargs`` run) that was most of what its result cost the session after the test
ran.  :func:`flat_values` writes such a summary as its values in one flat list
(``gate.spool.SHORT_VALUES``) and :func:`from_flat_values` builds an equal summary
back: the same values of the same types, so every report read from the spool is the
same.  A summary with anything the layout below has no place for (more rounds, ranges,
pooled sessions, a left-out digest, statistics of more than one sample) gets None and
takes the generic encoding.

Layout: 16 slots for the test, then 9 per op in the summary's order: key, count, self
CPU ns, CPU ns (``"="``: the very self CPU time object, which an op that called no other
op shares; None: not stored), self bytes, bytes, FLOPs, self device ns, device ns.
"""

from __future__ import annotations

from typing import Any

from pytest_opprof.gate.summary import (
    MemoryFigures,
    OpSummary,
    TestSummary,
    TimeStats,
    _op_summary,
)

_SAME = "="
_HEAD = 16
_PER_OP = 9


class _NoFlatForm(Exception):
    """What the layout has no place for."""


def _ns(stats: Any) -> int:
    """``ns`` of a ``TimeStats.single(ns)``: every field an int, one sample (raises
    :class:`_NoFlatForm` otherwise)."""
    if type(stats) is not TimeStats:
        raise _NoFlatForm
    d = stats.__dict__
    ns = d["min_ns"]
    samples = d["samples_ns"]
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
    raise _NoFlatForm


def _opt_ns(stats: Any) -> int | None:
    return None if stats is None else _ns(stats)


def flat_values(summary: TestSummary) -> list[Any] | None:
    """The summary's values in one list (see the module docstring); None where it has
    anything the layout has no place for."""
    try:
        return _flat(summary)
    except _NoFlatForm:
        return None


def _flat(s: TestSummary) -> list[Any]:
    d = s.__dict__
    ops = d["ops"]
    memory = d["memory"]
    if (
        d["rounds"] != 1
        or type(d["rounds"]) is not int
        or d["sessions"] != ()
        or type(d["sessions"]) is not tuple
        or d["ranges"] != {}
        or type(d["ranges"]) is not dict
        or d["left_out"] is not None
        or d["switched"] is not None
        or type(ops) is not dict
        or (memory is not None and type(memory) is not MemoryFigures)
    ):
        raise _NoFlatForm
    m = memory.__dict__ if memory is not None else None
    out: list[Any] = [
        _ns(d["wall_time"]),
        _ns(d["cpu_time"]),
        d["op_count"],
        d["flops"],
        d["op_time_share"],
        m["peak_bytes"] if m is not None else None,
        m["allocated_bytes"] if m is not None else None,
        m["allocations"] if m is not None else None,
        m["leaked_bytes"] if m is not None else None,
        _opt_ns(d["device_time"]),
        d["device_memory_bytes"],
        _opt_ns(d["speed_ref"]),
        _opt_ns(d["native_ref"]),
        d["dropped_events"],
        _opt_ns(d["wait_time"]),
        None,  # room for a later field; keeps the op slots aligned
    ]
    if memory is not None and None in out[5:9]:
        raise _NoFlatForm  # None marks "no memory figures"
    for key, op in ops.items():
        if type(op) is not OpSummary:
            raise _NoFlatForm
        o = op.__dict__
        ranges = o["ranges"]
        if type(key) is not str or o["key"] != key or type(ranges) is not dict or ranges:
            raise _NoFlatForm
        self_cpu, cpu = o["self_cpu_time"], o["cpu_time"]
        out += (
            key,
            o["count"],
            _ns(self_cpu),
            _SAME if cpu is self_cpu else _opt_ns(cpu),
            o["self_memory_bytes"],
            o["memory_bytes"],
            o["flops"],
            _opt_ns(o["self_device_time"]),
            _opt_ns(o["device_time"]),
        )
    return out


def _single(ns: int | None) -> TimeStats | None:
    return None if ns is None else TimeStats.single(ns)


def from_flat_values(values: list[Any]) -> TestSummary:
    """The summary :func:`flat_values` wrote."""
    ops: dict[str, OpSummary] = {}
    single = TimeStats.single
    for at in range(_HEAD, len(values), _PER_OP):
        key, count, self_ns, cpu, self_mem, mem, flops, self_dev, dev = values[at : at + _PER_OP]
        self_cpu = single(self_ns)
        ops[key] = _op_summary(
            key,
            count,
            self_cpu,
            self_cpu if cpu == _SAME else _single(cpu),
            self_mem,
            mem,
            flops,
            _single(self_dev),
            _single(dev),
            {},
        )
    memory = None
    if values[5] is not None:
        memory = object.__new__(MemoryFigures)
        memory.__dict__.update(
            peak_bytes=values[5],
            allocated_bytes=values[6],
            allocations=values[7],
            leaked_bytes=values[8],
        )
    out = object.__new__(TestSummary)
    # In field order, as the spool's generic reading fills a record.
    out.__dict__.update(
        rounds=1,
        wall_time=single(values[0]),
        cpu_time=single(values[1]),
        op_count=values[2],
        flops=values[3],
        op_time_share=values[4],
        memory=memory,
        ops=ops,
        device_time=_single(values[9]),
        device_memory_bytes=values[10],
        speed_ref=_single(values[11]),
        native_ref=_single(values[12]),
        sessions=(),
        dropped_events=values[13],
        wait_time=_single(values[14]),
        ranges={},
        left_out=None,
        switched=None,
    )
    return out
