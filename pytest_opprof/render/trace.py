"""Chrome trace export (JSON object format; opens in Perfetto and chrome://tracing).

The trace is written as text, a chunk of events at a time, from columns: no
dict per event and no ``json.dump`` of the whole.  Building one dict per event
and dumping them, behind a ``FunctionEvent`` per record, took 29 s for 400k
events; a profile's export (:func:`export_records_trace`) now reads the
records and their tree (numpy columns) and formats each event with one
``%``-template.  :func:`export_chrome_trace` writes an :class:`EventList`'s
``FunctionEvent`` objects through the same writer.

Format (the Trace Event Format, JSON object form): ``{"traceEvents": [...],
"displayTimeUnit": "ms"}``; ``"X"`` complete events with ``ts``/``dur`` in us,
``"i"`` thread instants for ``"[memory]"`` events (torch writes them so),
``"C"`` counter samples of live bytes, ``"M"`` metadata naming the process
and each thread.
"""

from __future__ import annotations

import io
import itertools
import json
import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import IO, Any

import numpy as np

from pytest_opprof.gate.files import write_bytes
from pytest_opprof.native_layout.records import FLAG_EXCEPTION, KIND_MEMORY, Records

MEMORY_COUNTER_NAME = "CPU Memory"
"""The counter track of live bytes; its one series is ``"Total Allocated"`` (torch's arg name)."""

# Events formatted and written per write() call: bounds the text held at once.
_CHUNK = 32_768

_X = '{"name":%s,"cat":"cpu_op","ph":"X","ts":%.3f,"dur":%.3f,"pid":%d,"tid":%d,"args":{"id":%d%s}}'
# Device Type 0 is torch's CPU, Device Id -1 its "no device index".
_INSTANT = (
    '{"name":%s,"cat":"cpu_instant_event","ph":"i","s":"t","ts":%.3f,"pid":%d,"tid":%d,'
    '"args":{"Bytes":%d,"Device Type":0,"Device Id":-1}}'
)
_COUNTER = (
    '{"name":' + json.dumps(MEMORY_COUNTER_NAME) + ',"ph":"C","ts":%.3f,"pid":%d,"tid":0,'
    '"args":{"Total Allocated":%d}}'
)
_META = '{"name":"%s","ph":"M","ts":0,"pid":%d,"tid":%d,"args":{"name":%s}}'


@dataclass
class TraceColumns:
    """One entry per event, in trace order.

    ``name``: the JSON text of each name (quoted, escaped); ``args``: the JSON
    text of the ``args`` members after ``"id"``, each led by a comma;
    ``bytes``: the signed bytes of ``"[memory]"`` events (``memory`` true).
    """

    id: list[int]
    name: list[str]
    thread: list[int]
    ts_us: list[float]
    dur_us: list[float]
    memory: list[bool]
    bytes: list[int]
    args: list[str]


def _json(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"))


def _args(
    parent_id: np.ndarray,
    base: list[str],
    self_mem: np.ndarray,
    mem: np.ndarray,
    device_us: np.ndarray,
    flops: np.ndarray,
    exception: np.ndarray,
    device_mem: tuple[np.ndarray, np.ndarray] | None = None,
) -> list[str]:
    """The ``args`` text after ``"id"`` of each event: its parent, ``base`` (shapes and
    stack), then the memory, device memory (``device_mem``: self and total bytes), device
    time, FLOPs and exception members where set."""
    out = [
        f',"parent id":{p}{b}' if p >= 0 else b
        for p, b in zip(parent_id.tolist(), base, strict=True)
    ]
    # Rare members: a pass over the events that have them, not a branch for every event.
    for i in np.flatnonzero((self_mem != 0) | (mem != 0)).tolist():
        out[i] += f',"Self CPU Mem (bytes)":{int(self_mem[i])},"CPU Mem (bytes)":{int(mem[i])}'
    if device_mem is not None:
        own, total = device_mem
        for i in np.flatnonzero((own != 0) | (total != 0)).tolist():
            out[i] += (
                f',"Self Device Mem (bytes)":{int(own[i])},"Device Mem (bytes)":{int(total[i])}'
            )
    for i in np.flatnonzero(device_us != 0).tolist():
        out[i] += f',"Device time (us)":{_json(float(device_us[i]))}'
    for i in np.flatnonzero(flops != 0).tolist():
        out[i] += f',"FLOPs":{int(flops[i])}'
    for i in np.flatnonzero(exception).tolist():
        out[i] += ',"exception":true'
    return out


def _shape_text(shapes: list[list[int]] | None, dtypes: Sequence[str] | None) -> str:
    text = f',"Input Dims":{_json(shapes)}' if shapes else ""
    return text + (f',"Input type":{_json(list(dtypes))}' if dtypes else "")


def _stack_text(stack: list[str] | None) -> str:
    return f',"Call stack":{_json(";".join(stack))}' if stack else ""


def columns_from_events(events: Sequence[Any]) -> TraceColumns:
    """Columns of recorded ``FunctionEvent`` objects (one attribute pass each)."""
    for evt in events:
        if getattr(evt, "time_range", None) is None:
            raise ValueError(
                "export_chrome_trace needs recorded events (prof.events()), not key averages"
            )
    # Events of one profile share their shape, dtype and stack lists: text once per list.
    texts: dict[tuple[int, int], str] = {}
    shapes = []
    for evt in events:
        s, d = evt.input_shapes, getattr(evt, "input_dtypes", None)
        key = (id(s), id(d))
        text = texts.get(key)
        if text is None:
            text = texts[key] = _shape_text(s, d)
        shapes.append(text)
    stack_texts: dict[int, str] = {}
    stacks = []
    for evt in events:
        text = stack_texts.get(id(evt.stack))
        if text is None:
            text = stack_texts[id(evt.stack)] = _stack_text(evt.stack)
        stacks.append(text)
    names: dict[str, str] = {}
    self_mem = [evt.self_cpu_memory_usage for evt in events]
    return TraceColumns(
        id=[evt.id for evt in events],
        name=[names.get(evt.name) or names.setdefault(evt.name, _json(evt.name)) for evt in events],
        thread=[evt.thread for evt in events],
        ts_us=[evt.time_range.start for evt in events],
        dur_us=[evt.time_range.elapsed_us() for evt in events],
        memory=[evt.kind == KIND_MEMORY for evt in events],
        bytes=self_mem,
        args=_args(
            np.array(
                [-1 if evt.cpu_parent is None else evt.cpu_parent.id for evt in events],
                dtype=np.int64,
            ),
            [sh + st for sh, st in zip(shapes, stacks, strict=True)],
            np.array(self_mem, dtype=np.int64),
            np.array([evt.cpu_memory_usage for evt in events], dtype=np.int64),
            np.array([evt.device_time_total for evt in events], dtype=float),
            np.array([evt.flops for evt in events], dtype=np.int64),
            np.array([evt.is_exception for evt in events], dtype=bool),
            (
                np.array([evt.self_device_memory_usage for evt in events], dtype=np.int64),
                np.array([evt.device_memory_usage for evt in events], dtype=np.int64),
            ),
        ),
    )


def columns_from_records(records: Records, *, with_flops: bool = True) -> TraceColumns:
    """Columns straight from a session's records and their tree: no event objects."""
    from pytest_opprof.model.event_flops import event_flops, shape_dtypes
    from pytest_opprof.model.tree import build_tree

    tree = build_tree(records)
    ev = tree.events
    ids = ev["id"].astype(np.int64)
    parent_id = np.where(tree.parent >= 0, ids[np.maximum(tree.parent, 0)], -1)
    name_texts = [_json(n) for n in tree.names]
    # Shape and stack texts per distinct (shape, stack) pair: a profile has few.
    span = len(records.stacks) or 1
    pair = ev["shape"].astype(np.int64) * span + ev["stack"].astype(np.int64)
    pairs, inverse = np.unique(pair, return_inverse=True)
    pair_texts = [
        _shape_text(records.shapes[sid], shape_dtypes(records, sid))
        + _stack_text(records.stacks[stack])
        for sid, stack in zip((pairs // span).tolist(), (pairs % span).tolist(), strict=True)
    ]
    flops = event_flops(records, tree)[0] if with_flops and len(tree) else np.zeros(len(tree))
    return TraceColumns(
        id=ids.tolist(),
        name=list(map(name_texts.__getitem__, tree.name.tolist())),
        thread=ev["thread"].tolist(),
        ts_us=(ev["start_ns"] / 1000.0).tolist(),
        dur_us=(tree.cpu_total_ns / 1000.0).tolist(),
        memory=(ev["kind"] == KIND_MEMORY).tolist(),
        bytes=tree.mem_self_bytes.tolist(),
        args=_args(
            parent_id,
            list(map(pair_texts.__getitem__, inverse.reshape(-1).tolist())),
            tree.mem_self_bytes,
            tree.mem_total_bytes,
            tree.device_total_ns / 1000.0,
            flops.astype(np.int64),
            (ev["flags"] & FLAG_EXCEPTION) != 0,
            (tree.device_mem_self_bytes, tree.device_mem_total_bytes)
            if records.device_memory is not None
            else None,
        ),
    )


def _event_lines(cols: TraceColumns, pid: int, lo: int, hi: int) -> Iterable[str]:
    x, instant = _X, _INSTANT
    for name, ts, dur, tid, eid, args, mem, nbytes in zip(
        cols.name[lo:hi],
        cols.ts_us[lo:hi],
        cols.dur_us[lo:hi],
        cols.thread[lo:hi],
        cols.id[lo:hi],
        cols.args[lo:hi],
        cols.memory[lo:hi],
        cols.bytes[lo:hi],
        strict=True,
    ):
        if mem:
            yield instant % (name, ts, pid, tid, nbytes)
        else:
            yield x % (name, ts, dur, pid, tid, eid, args)


def write_trace(
    out: IO[str],
    cols: TraceColumns,
    pid: int | None = None,
    memory_samples: np.ndarray | None = None,
) -> None:
    """Stream the trace of ``cols`` to ``out``, ``_CHUNK`` events per write.

    ``memory_samples`` (``time_ns``, ``net_bytes``: see
    ``sources.memory_source.memory_samples``) become the :data:`MEMORY_COUNTER_NAME`
    counter track: bytes live above the profile's start, on the events' time axis.
    """
    pid = os.getpid() if pid is None else pid
    out.write('{"traceEvents":[\n' + _META % ("process_name", pid, 0, '"pytest-opprof"'))
    n = len(cols.id)
    for lo in range(0, n, _CHUNK):
        hi = min(n, lo + _CHUNK)
        if any(cols.memory[lo:hi]):
            lines = _event_lines(cols, pid, lo, hi)
        else:
            # Calls only (the common chunk): the template applied by map, no Python loop.
            rows = zip(
                cols.name[lo:hi],
                cols.ts_us[lo:hi],
                cols.dur_us[lo:hi],
                itertools.repeat(pid),
                cols.thread[lo:hi],
                cols.id[lo:hi],
                cols.args[lo:hi],
            )
            lines = map(_X.__mod__, rows)
        out.write(",\n" + ",\n".join(lines))
    if memory_samples is not None and len(memory_samples):
        ts_us = (memory_samples["time_ns"] / 1000.0).tolist()
        live = memory_samples["net_bytes"].tolist()
        for lo in range(0, len(ts_us), _CHUNK):
            hi = lo + _CHUNK
            out.write(
                ",\n"
                + ",\n".join(
                    _COUNTER % (ts, pid, b) for ts, b in zip(ts_us[lo:hi], live[lo:hi], strict=True)
                )
            )
    for tid in dict.fromkeys(cols.thread):
        out.write(",\n" + _META % ("thread_name", pid, tid, _json(f"thread {tid}")))
    out.write('\n],"displayTimeUnit":"ms"}\n')


def chrome_trace(
    events: Sequence[Any], pid: int | None = None, memory_samples: np.ndarray | None = None
) -> dict[str, Any]:
    """The trace of ``events`` as a dict (what :func:`export_chrome_trace` writes, parsed)."""
    text = io.StringIO()
    write_trace(text, columns_from_events(events), pid, memory_samples)
    trace: dict[str, Any] = json.loads(text.getvalue())
    return trace


def export_chrome_trace(
    events: Sequence[Any], path: str, memory_samples: np.ndarray | None = None
) -> None:
    """Write the trace of recorded ``FunctionEvent`` objects and ``memory_samples`` to ``path``."""
    cols = columns_from_events(events)
    _write(path, lambda f: write_trace(f, cols, memory_samples=memory_samples))


def export_records_trace(
    records: Records,
    path: str,
    *,
    with_flops: bool = True,
    memory_samples: np.ndarray | None = None,
) -> None:
    """Write the trace of a session's records to ``path`` without building event objects."""
    cols = columns_from_records(records, with_flops=with_flops)
    _write(path, lambda f: write_trace(f, cols, memory_samples=memory_samples))


def _write(path: str, fill: Callable[[IO[str]], None]) -> None:
    """The text ``fill`` streams, written to ``path`` through a symlink, FIFO or device as
    ``open`` would, atomically where it is a regular file (``gate.files.write_bytes``).
    backslashreplace: an op name is anyone's text, a lone surrogate included, and inside a
    JSON string its escape reads back as the same character."""
    buffer = io.StringIO()
    fill(buffer)
    write_bytes(path, buffer.getvalue().encode("utf-8", "backslashreplace"))
