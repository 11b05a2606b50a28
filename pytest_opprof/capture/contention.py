"""How long a round's threads waited for a CPU: read from Linux at round boundaries.

A thread that is runnable but not running (another process holds the core) adds
that wait to every wall-clock figure of the round, op times included, while it
does no more work.  Linux counts it per thread: ``/proc/thread-self/schedstat``
holds (time on a CPU, time runnable and waiting on a run queue, time slices) in
ns.  Reading it costs about 1.5 us through a file descriptor kept open, so it is
read twice per round (never per op): before the body starts and after it ends.

Threads the test starts are counted too where Linux still lists them at the
round's end (``/proc/self/task``): a thread that exited during the round takes its
wait with it, which only makes the round look cleaner than it was; the test's own
thread, where the profile's wall time is measured, is always counted.

Off Linux (no ``/proc``), nothing is measured and every figure is ``None``: the
verdict then judges times as before.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass

_TASKS = "/proc/self/task"


def _read_schedstat(fd: int) -> tuple[int, int]:
    """(ns on a CPU, ns waiting on a run queue) from an open schedstat file."""
    fields = os.pread(fd, 128, 0).split()
    return int(fields[0]), int(fields[1])


class _ThreadFiles:
    """The schedstat files of the process's other threads, kept open between readings:
    opening, reading and closing each thread's file took most of a round's probe cost,
    a ``pread`` on an open one about 1.5 us.  A thread that exited is dropped when its
    file fails or it is no longer listed."""

    def __init__(self) -> None:
        self._fds: dict[int, int] = {}
        self._tids: set[int] = set()
        self._links = -1
        """``/proc/self/task``'s link count when ``_tids`` was listed (threads + 2)."""

    def _listed(self) -> set[int]:
        """The process's thread ids.  Listed again only when the thread count moved (a
        ``stat`` of the directory, half a listing's cost, twice a round), or when a
        thread's file failed (it exited): a thread that exited while another started
        between two readings keeps the old list until the next change, which leaves
        the new one's wait out, as for a thread that exits within a round."""
        links = os.stat(_TASKS).st_nlink
        if links != self._links:
            self._tids = {int(name) for name in os.listdir(_TASKS)}
            self._links = links
        return self._tids

    def read(self) -> dict[int, tuple[int, int]]:
        """Every thread of this process but the caller: tid -> (run ns, wait ns)."""
        own = threading.get_native_id()
        out: dict[int, tuple[int, int]] = {}
        try:
            tids = self._listed()
        except OSError:
            return out
        for tid in [t for t in self._fds if t not in tids]:
            os.close(self._fds.pop(tid))
        for tid in tids:
            if tid == own:
                continue
            fd = self._fds.get(tid)
            try:
                if fd is None:
                    fd = self._fds[tid] = os.open(f"{_TASKS}/{tid}/schedstat", os.O_RDONLY)
                out[tid] = _read_schedstat(fd)
            except OSError:  # exited meanwhile: list again next time
                self._links = -1
                if fd is not None:
                    os.close(self._fds.pop(tid))
        return out

    def close(self) -> None:
        for fd in self._fds.values():
            os.close(fd)
        self._fds.clear()
        self._links = -1


@dataclass(frozen=True)
class Contention:
    """One round's waiting: the test's thread and the threads still alive at its end."""

    wait_ns: int
    """ns the test's thread was runnable but waited for a CPU."""
    run_ns: int
    """ns the test's thread ran on a CPU."""
    threads_wait_ns: int
    """ns the test's other threads waited, over the round (those alive at its end)."""
    threads_run_ns: int


class ContentionProbe:
    """Brackets a round: :meth:`start` before the body's profile starts, :meth:`own` as the
    body starts and as it ends, :meth:`stop` once the profile stopped, so the probe's own
    work (listing the process's threads) stays out of the measured wall time and the
    thread's figures cover the body alone.

    The file descriptor of the running thread's schedstat stays open between
    rounds (until :meth:`close`) and is reopened when rounds move to another thread.
    """

    def __init__(self) -> None:
        self._fd: int | None = None
        self._tid = 0
        self._others: dict[int, tuple[int, int]] = {}
        self._threads = _ThreadFiles()

    def start(self) -> None:
        """Open the calling thread's figures (it runs the round); read the other threads'."""
        tid = threading.get_native_id()
        if tid != self._tid:  # the file names one thread: the one that opened it
            self.close()
            try:
                self._fd = os.open("/proc/thread-self/schedstat", os.O_RDONLY)
            except OSError:
                return
            self._tid = tid
        if self._fd is None:
            return
        self._others = self._threads.read()

    def own(self) -> tuple[int, int] | None:
        """The running thread's (run ns, wait ns) now: one ``pread``, about 1.5 us, so it
        can sit right at the end of the measured body."""
        if self._fd is None:
            return None
        return _read_schedstat(self._fd)

    def stop(
        self, own_begin: tuple[int, int] | None, own_end: tuple[int, int] | None
    ) -> Contention | None:
        """The round's figures, from :meth:`own`'s readings at the body's start and end;
        the other threads are listed here, after the measured interval (it takes longer)."""
        if own_begin is None or own_end is None:
            return None
        run_ns, wait_ns = own_end
        others = self._threads.read()
        threads_run = threads_wait = 0
        for tid, (run, wait) in others.items():
            before_run, before_wait = self._others.get(tid, (0, 0))
            threads_run += run - before_run
            threads_wait += wait - before_wait
        return Contention(
            wait_ns=wait_ns - own_begin[1],
            run_ns=run_ns - own_begin[0],
            threads_wait_ns=threads_wait,
            threads_run_ns=threads_run,
        )

    def close(self) -> None:
        self._threads.close()
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
            self._tid = 0
