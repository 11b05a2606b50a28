"""What a round's child processes cost: their CPU time, and how long they may have waited.

A test whose work runs in child processes (a ``ProcessPoolExecutor``, ``subprocess``)
waits on them while they run: its thread's wait for a CPU (``contention.py``) is
near zero however busy the machine, and its wall time grows with the children's
waits, which no captured op shows.  Linux reports a child's CPU time once it has
been reaped (``RUSAGE_CHILDREN``), but not its wait: ``/proc/<pid>/schedstat`` goes
with the process.  What it does report is the machine's CPU pressure
(``/proc/pressure/cpu``: the time during which some runnable task waited for a
CPU), an upper bound of any process's wait.  A round in which children ran counts
that as its wait, so the verdict judges its time on rounds the machine did not
crowd, or says it was too busy; where the pressure cannot be read, the whole round
counts as waited and the time is not judged.
"""

from __future__ import annotations

import os
import sys
from typing import NamedTuple

PRESSURE_FILE = "/proc/pressure/cpu"

CHILDREN_NOTE = (
    "child processes' waits for a CPU: Linux does not report them once they exit, so a "
    "round that ran child processes counts the machine's CPU pressure over it as its wait "
    f"({PRESSURE_FILE}; where it cannot be read, the whole round): their tests' times are "
    "judged on rounds the machine did not crowd, or not judged"
)
"""The line of ``opprof: not measured`` in a session where a test ran child processes."""


class ChildrenRound(NamedTuple):
    """A round's children, as :meth:`ChildrenProbe.stop` reads them."""

    cpu_ns: int
    """CPU time of the children reaped during the round (user and system), ns."""
    stall_ns: int | None
    """ns during which some task on the machine waited for a CPU; None: not readable."""


class ChildrenProbe:
    """Brackets a round, outside its profile: :meth:`start` before, :meth:`stop` after
    (about 7 us a round; the pressure is read again at the end only where children ran)."""

    def __init__(self) -> None:
        self._cpu_ns = 0
        self._stall_ns: int | None = None

    def start(self) -> None:
        self._cpu_ns = children_cpu_ns()
        self._stall_ns = cpu_pressure_ns()

    def stop(self) -> ChildrenRound:
        cpu = children_cpu_ns() - self._cpu_ns
        if cpu <= 0:
            return ChildrenRound(cpu, None)
        after = cpu_pressure_ns()
        before = self._stall_ns
        stall = after - before if after is not None and before is not None else None
        return ChildrenRound(cpu, stall)


def children_cpu_ns() -> int:
    """User and system CPU time of this process's reaped children so far, ns."""
    if sys.platform == "win32":  # no resource module: no child figures
        return 0
    import resource

    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return round((usage.ru_utime + usage.ru_stime) * 1e9)


_pressure_fd: int | None = None
"""The pressure file, kept open (a read through it costs 5 us, an open and read 35)."""


def cpu_pressure_ns() -> int | None:
    """The machine's ``some`` CPU pressure total (ns some task waited for a CPU) so far;
    None where the kernel has no pressure accounting or it cannot be read."""
    global _pressure_fd
    if _pressure_fd is None:
        try:
            _pressure_fd = os.open(PRESSURE_FILE, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
        except OSError:  # no pressure accounting here: never tried again
            _pressure_fd = -1
    if _pressure_fd < 0:
        return None
    try:
        text = os.pread(_pressure_fd, 256, 0)
    except OSError:
        return None
    first = text.split(b"\n", 1)[0]
    for field in first.split():
        if field.startswith(b"total="):
            try:
                return int(field[6:]) * 1000  # us
            except ValueError:
                return None
    return None


def round_wait_ns(thread_wait_ns: int | None, wall_ns: int, children: ChildrenRound) -> int | None:
    """The round's wait for a CPU: the test's thread's, or where children ran, at least
    the machine's CPU pressure over the round (the whole round where it is unknown)."""
    if children.cpu_ns <= 0:
        return thread_wait_ns
    stall = wall_ns if children.stall_ns is None else min(max(children.stall_ns, 0), wall_ns)
    return max(thread_wait_ns or 0, stall)
