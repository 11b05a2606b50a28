"""The pipe between the head side and its base partner: framed JSON messages.

A frame is a 4-byte length and a JSON array: the command, then its values.  A round's
figures travel as JSON too (:func:`figures_to_json`, driven by the dataclasses' own
fields), never as objects: the package deserialises only data.  A round's hand-off is one
short command and one reply of a few kilobytes, about 50-60 us on this kind of machine
(``bench/ab_handoff.py``), against rounds of 1 ms and more.
"""

from __future__ import annotations

import dataclasses
import json
import os
import struct
from typing import Any

from pytest_opprof.gate.summary import MemoryFigures, OpFigures, RoundFigures

_HEADER = struct.Struct("!I")
_OP_FIELDS = tuple(f.name for f in dataclasses.fields(OpFigures))
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
    """A round's figures as JSON: each field by name, the ops and memory by their fields."""
    out = {name: getattr(figures, name) for name in _ROUND_FIELDS}
    out["ops"] = {key: [getattr(op, n) for n in _OP_FIELDS] for key, op in figures.ops.items()}
    memory = figures.memory
    out["memory"] = [getattr(memory, n) for n in _MEMORY_FIELDS] if memory is not None else None
    out["switched"] = sorted(figures.switched) if figures.switched is not None else None
    return out


def figures_from_json(data: dict[str, Any]) -> RoundFigures:
    """What :func:`figures_to_json` wrote (both ends run the same pytest-opprof version)."""
    values = dict(data)
    values["ops"] = {key: OpFigures(*op) for key, op in data["ops"].items()}
    if data["memory"] is not None:
        values["memory"] = MemoryFigures(*data["memory"])
    if data["switched"] is not None:
        values["switched"] = frozenset(data["switched"])
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
