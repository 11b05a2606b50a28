"""The pipe between the head side and its base partner: framed, pickled messages.

Both ends are pytest-opprof of the same version (the partner's hello says which, and the
head refuses another), so a message is a pickled tuple: the round's figures travel as the
objects they are, with no codec to keep in step.  A frame is a 4-byte length and the
pickle; a round's hand-off is one short command and one reply of a few kilobytes, about
30-60 us on this kind of machine (``bench/ab_handoff.py``), against rounds of 1 ms and more.
"""

from __future__ import annotations

import os
import pickle
import struct
from typing import Any

_HEADER = struct.Struct("!I")


class ChannelClosed(EOFError):
    """The other end went away (it exited or crashed)."""


class Channel:
    """One end of the pipe pair: ``send`` pickles, ``receive`` blocks for the next message."""

    def __init__(self, read_fd: int, write_fd: int) -> None:
        self.read_fd = read_fd
        self.write_fd = write_fd

    def send(self, *message: Any) -> None:
        data = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
        _write_all(self.write_fd, _HEADER.pack(len(data)) + data)

    def receive(self) -> tuple[Any, ...]:
        (size,) = _HEADER.unpack(_read_exactly(self.read_fd, _HEADER.size))
        message = pickle.loads(_read_exactly(self.read_fd, size))
        if not isinstance(message, tuple):
            raise ChannelClosed(f"not a message: {type(message).__name__}")
        return message

    def close(self) -> None:
        for fd in (self.read_fd, self.write_fd):
            try:
                os.close(fd)
            except OSError:
                pass


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
