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

from dataclasses import dataclass

from pytest_opprof._native import ffi, lib


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

    The reading is native (``native/sched_probe.c``): the schedstat files stay open
    between rounds (until :meth:`close`), the running thread's is reopened when rounds
    move to another thread, and the threads are listed again only when their number
    moved.  A round's probe costs about 20 us, most of it the kernel's (a ``stat`` of
    the task directory and a ``pread`` per file); reading them from Python cost 30.
    """

    def __init__(self) -> None:
        self._out = ffi.new("int64_t[2]")
        probe = lib.opprof_sched_probe_new()
        if probe == ffi.NULL:
            raise MemoryError("opprof: no memory for a contention probe")
        self._probe = ffi.gc(probe, lib.opprof_sched_probe_free)
        self._works = True

    def start(self) -> None:
        """Read the other threads' figures (the calling thread runs the round)."""
        if self._works and lib.opprof_sched_others(self._probe, 1, self._out) != 0:
            self._works = False  # no /proc: nothing is measured, every figure is None

    def own(self) -> tuple[int, int] | None:
        """The running thread's (run ns, wait ns) now: one ``pread``, about 1.5 us, so it
        can sit right at the end of the measured body."""
        if not self._works or lib.opprof_sched_own(self._out) != 0:
            self._works = False
            return None
        return self._out[0], self._out[1]

    def stop(
        self, own_begin: tuple[int, int] | None, own_end: tuple[int, int] | None
    ) -> Contention | None:
        """The round's figures, from :meth:`own`'s readings at the body's start and end;
        the other threads are read here, after the measured interval (it takes longer)."""
        if own_begin is None or own_end is None:
            return None
        if lib.opprof_sched_others(self._probe, 0, self._out) != 0:
            self._works = False
            return None
        return Contention(
            wait_ns=own_end[1] - own_begin[1],
            run_ns=own_end[0] - own_begin[0],
            threads_wait_ns=self._out[1],
            threads_run_ns=self._out[0],
        )

    def close(self) -> None:
        lib.opprof_sched_close()
