"""The pipe between the head side and its base partner: framed JSON messages.

A frame is a 4-byte length and a JSON array: the command, then its values.  A round's
figures travel as JSON too (:func:`figures_to_json`, driven by the dataclasses' own
fields), never as objects: the package deserialises only data.  Its ops go as the
integer sums the round was summarised from (``RoundFigures.from_sums``), which the head
makes into the same ``OpFigures`` by the same code (``SummedOps``) when its judge reads
them; only a round whose ops were made already (an op's wait for a CPU taken out) sends
its ``OpFigures``, each as a list of its fields.  A round's hand-off is one short command
and one reply of a few kilobytes (``bench/ab_handoff.py``), against rounds of 1 ms and more.
"""

from __future__ import annotations

import dataclasses
import json
import operator
import os
import struct
from typing import Any

from pytest_opprof.gate.jsonio import Fields
from pytest_opprof.gate.round_figures import DeviceTraffic, SummedOps
from pytest_opprof.gate.summary import MemoryFigures, OpFigures, RoundFigures

_HEADER = struct.Struct("!I")
_OP_FIELDS = tuple(f.name for f in dataclasses.fields(OpFigures))
_op_values = operator.attrgetter(*_OP_FIELDS)
_MEMORY_FIELDS = tuple(f.name for f in dataclasses.fields(MemoryFigures))
_ROUND_FIELDS = tuple(f.name for f in dataclasses.fields(RoundFigures))


class ChannelClosed(EOFError):
    """The other end went away (it exited or crashed)."""


class Channel:
    """One end of the pipe pair: ``send`` writes a message, ``receive`` blocks for one."""

    def __init__(self, read_fd: int, write_fd: int) -> None:
        self.read_fd = read_fd
        self.write_fd = write_fd

    def send(self, *message: Any) -> None:
        data = json.dumps(message, separators=(",", ":")).encode()
        _write_all(self.write_fd, _HEADER.pack(len(data)) + data)

    def receive(self) -> tuple[Any, ...]:
        (size,) = _HEADER.unpack(_read_exactly(self.read_fd, _HEADER.size))
        message = json.loads(_read_exactly(self.read_fd, size))
        if not isinstance(message, list) or not message:
            raise ChannelClosed(f"not a message: {type(message).__name__}")
        return tuple(message)

    def close(self) -> None:
        for fd in (self.read_fd, self.write_fd):
            try:
                os.close(fd)
            except OSError:
                pass


def figures_to_json(figures: RoundFigures) -> dict[str, Any]:
    """A round's figures as JSON: each field by name; the ops as their sums (``"sums"``:
    the keys, then each key's sums) or, once made, each key with its fields in order
    (``"ops"``); the memory by its fields; the host<->device traffic as its summary
    form."""
    out = {name: getattr(figures, name) for name in _ROUND_FIELDS}
    ops = figures.ops
    if type(ops) is SummedOps and not ops.is_made:
        out["ops"] = None
        out["sums"] = [ops.group_keys, ops.sums]  # lists of Python ints (``op_sums``)
    else:
        out["ops"] = [[key, *_op_values(op)] for key, op in ops.items()]
    memory = figures.memory
    out["memory"] = [getattr(memory, n) for n in _MEMORY_FIELDS] if memory is not None else None
    out["switched"] = sorted(figures.switched) if figures.switched is not None else None
    traffic = figures.traffic
    out["traffic"] = traffic.to_json() if traffic is not None else None
    return out


def figures_from_json(data: dict[str, Any]) -> RoundFigures:
    """What :func:`figures_to_json` wrote (both ends run the same pytest-opprof version)."""
    values = dict(data)
    sums = values.pop("sums", None)
    if sums is not None:
        keys, groups = sums
        values["ops"] = SummedOps(keys, groups)
    else:
        values["ops"] = {op[0]: OpFigures(*op[1:]) for op in data["ops"]}
    if data["memory"] is not None:
        values["memory"] = MemoryFigures(*data["memory"])
    if data["switched"] is not None:
        values["switched"] = frozenset(data["switched"])
    values["leaked_ops"] = tuple((key, size) for key, size in data["leaked_ops"])
    if data["traffic"] is not None:
        values["traffic"] = DeviceTraffic.from_json(Fields(data["traffic"], "traffic"))
    return RoundFigures(**values)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        try:
            written = os.write(fd, view)
        except BrokenPipeError:
            raise ChannelClosed("the other side closed the pipe") from None
        view = view[written:]


def _read_exactly(fd: int, size: int) -> bytes:
    chunks = []
    while size:
        chunk = os.read(fd, size)
        if not chunk:
            raise ChannelClosed("the other side closed the pipe")
        chunks.append(chunk)
        size -= len(chunk)
    return b"".join(chunks)
