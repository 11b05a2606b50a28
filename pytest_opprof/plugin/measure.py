"""One test's measured rounds: each a profile bracketed by the machine-speed references.

The worker decides how many rounds run (``rounds.py``) and what becomes of their
figures; this module says what one round measures, so that every round, the first
(pytest's own call) and the repeats alike, is measured the same way.  The rounds
are kept only until the test is summarised: never the events of a whole session.
"""

from __future__ import annotations

import contextlib
import statistics
import time
from collections.abc import Iterator
from dataclasses import dataclass, field, replace

from pytest_opprof import _native
from pytest_opprof.capture import speed_probe
from pytest_opprof.capture.children import CHILDREN_NOTE, ChildrenProbe, round_wait_ns
from pytest_opprof.capture.contention import ContentionProbe
from pytest_opprof.gate.round_figures import RoundFigures
from pytest_opprof.gate.waiting import is_clean
from pytest_opprof.model import EventList, library_self_ns
from pytest_opprof.model.averages import op_sums
from pytest_opprof.model.waits import op_waits_ns
from pytest_opprof.plugin.marker import TestSettings
from pytest_opprof.plugin.options import OpprofOptions
from pytest_opprof.profiler import profile


@dataclass
class Rounds:
    """The measured rounds of the test being run; dropped once it is summarised."""

    profiles: list[profile] = field(default_factory=list)
    cpu_times_ns: list[int] = field(default_factory=list)
    speed_refs_ns: list[int | None] = field(default_factory=list)
    native_refs_ns: list[int | None] = field(default_factory=list)
    references: bool = True
    """Run the machine-speed references around each round (``rounds.needs_references``)."""
    waits_ns: list[int | None] = field(default_factory=list)
    """Per round, ns the test's thread waited for a CPU (None: not measured)."""
    preempted: bool = False
    """The test started its own profile inside a round: the plugin stepped aside."""
    scopes_left_open: int = 0
    """Most events a round left open on the test's thread (closed after the round)."""
    figures: list[RoundFigures] = field(default_factory=list)
    """Per summarised round, its figures."""
    _rows: dict[int, EventList] = field(default_factory=dict)
    """Rounds' ``key_averages()``, by round, once built (:meth:`rows`)."""

    @contextlib.contextmanager
    def measure(
        self, options: OpprofOptions, not_measured: set[str], probe: ContentionProbe
    ) -> Iterator[None]:
        """Measure the body run inside as one round (adds to ``not_measured``'s lines);
        ``probe`` reads how long the thread waited for a CPU (see :func:`_waited_ns`)."""
        prof = profile(
            record_shapes=True,
            profile_memory=True,
            with_flops=True,
            capture=list(options.capture) if options.capture is not None else None,
            python_memory=options.python_memory,
            cuda_sample_rate=options.cuda_sample_rate,
            # A [memory] event per allocation only where a trace shows them as instants.
            memory_events=options.trace_dir is not None,
        )
        # The machine-speed references bracket the round, outside the profile.
        if self.references:
            py_before_ns, native_before_ns = speed_probe.references_ns()
        # The run-queue figures are read outside the profile's wall time, around it: a
        # wait the scheduler makes the thread take at a system call (reading them is one)
        # lands in the reading after it, so a reading inside would miss it.
        children = ChildrenProbe()
        children.start()
        probe.start()
        own_begin = probe.own()
        depth = _native.scope_depth()
        prof.yields = True  # a profile the test starts itself stops this one
        prof.start()
        # CPU time of the body only, like the wall time: the first start installs
        # hooks and calibrates, and every stop drains and collects garbage.
        cpu_start_ns = time.process_time_ns()
        thread_start_ns = time.thread_time_ns()
        try:
            yield
        finally:
            thread_ns = time.thread_time_ns() - thread_start_ns
            cpu_ns = time.process_time_ns() - cpu_start_ns
            prof.stop()
            # Scopes the body entered and never left would stay open on this thread and
            # push every later test's ops past the depth bound, where none is recorded.
            self.scopes_left_open = max(self.scopes_left_open, _native.scope_unwind(depth))
            contention = probe.stop(own_begin, probe.own())
            spawned = children.stop()
            if prof.preempted:
                self.preempted = True
            else:
                not_measured.update(prof.not_measured)
                self.cpu_times_ns.append(cpu_ns)
                if self.references:
                    py_after_ns, native_after_ns = speed_probe.references_ns()
                    self.speed_refs_ns.append((py_before_ns + py_after_ns) // 2)
                    self.native_refs_ns.append((native_before_ns + native_after_ns) // 2)
                else:
                    self.speed_refs_ns.append(None)
                    self.native_refs_ns.append(None)
                wait = (
                    _waited_ns(contention.wait_ns, prof.wall_time_ns, thread_ns)
                    if contention is not None
                    else None
                )
                if spawned.cpu_ns > 0:  # their waits are not the thread's (children.py)
                    not_measured.add(CHILDREN_NOTE)
                self.waits_ns.append(round_wait_ns(wait, prof.wall_time_ns, spawned))
                self.profiles.append(prof)

    def summarised(self, settings: TestSettings) -> list[RoundFigures]:
        """Each measured round's figures, made once per round: from the C pass's integer
        sums (``op_sums``), the rows of ``key_averages()`` only where that pass does not
        apply; :meth:`rows` builds a round's rows for a table."""
        by_shape = settings.group_by_input_shape
        for i in range(len(self.figures), len(self.profiles)):
            prof = self.profiles[i]
            records = prof.records()
            device = prof.device_memory
            sums = op_sums(records, by_input_shape=by_shape, with_flops=prof.with_flops)
            if sums is not None:
                figures = RoundFigures.from_sums(
                    sums.keys,
                    sums.sums,
                    wall_time_ns=prof.wall_time_ns,
                    cpu_time_ns=self.cpu_times_ns[i],
                    memory=prof.memory,
                    device_memory_bytes=device.peak_bytes if device is not None else None,
                    speed_ref_ns=self.speed_refs_ns[i],
                    native_ref_ns=self.native_refs_ns[i],
                    dropped_events=prof.dropped_events,
                    wait_ns=self.waits_ns[i],
                    library_self_ns=sums.library_self_ns,
                )
            else:
                figures = RoundFigures.from_events(
                    self.rows(i, settings),
                    by_input_shape=by_shape,
                    wall_time_ns=prof.wall_time_ns,
                    cpu_time_ns=self.cpu_times_ns[i],
                    memory=prof.memory,
                    device_memory_bytes=device.peak_bytes if device is not None else None,
                    speed_ref_ns=self.speed_refs_ns[i],
                    native_ref_ns=self.native_refs_ns[i],
                    dropped_events=prof.dropped_events,
                    wait_ns=self.waits_ns[i],
                    library_self_ns=library_self_ns(records),
                )
            # Most rounds: no event waited, as the round's pass counted.
            no_wait = sums is not None and sums.waited == 0
            waits = {} if no_wait else op_waits_ns(records, by_input_shape=by_shape)
            if waits:
                figures = _less_waits(figures, waits)
            self.figures.append(figures)
        return self.figures

    def rows(self, i: int, settings: TestSettings) -> EventList:
        """Round ``i``'s ``key_averages()`` (built on first use, for the table)."""
        rows = self._rows.get(i)
        if rows is None:
            rows = self._rows[i] = self.profiles[i].key_averages(
                group_by_input_shape=settings.group_by_input_shape
            )
        return rows

    def clean(self, limit: float) -> int | None:
        """How many rounds waited for a CPU at most ``limit`` of their wall time; None when
        the waiting was not measured."""
        if any(w is None for w in self.waits_ns):
            return None
        return sum(
            is_clean(wait, prof.wall_time_ns, limit)
            for wait, prof in zip(self.waits_ns, self.profiles, strict=True)
            if wait is not None
        )

    def first_work_ns(self) -> int:
        """The first round's wall time less its wait for a CPU (0 without a round)."""
        if not self.profiles:
            return 0
        wait = self.waits_ns[0] if self.waits_ns else None
        return self.profiles[0].wall_time_ns - (wait or 0)

    def shown(self) -> int:
        """The round the printed table and the trace show: an actual round, the median
        by wall time (after :meth:`summarised`)."""
        walls = [f.wall_time_ns for f in self.figures]
        return walls.index(statistics.median_low(walls))


def _waited_ns(queue_wait_ns: int, wall_ns: int, thread_cpu_ns: int) -> int:
    """How long the round's thread waited for a CPU within the profile's wall time.

    Two upper bounds, each exact where the other is loose: the run-queue wait read
    around the profile (it may include a wait just outside the wall time), and the wall
    time less the thread's CPU time (it includes sleeping: I/O, locks, ``time.sleep``).
    A CPU-bound round that waited has both equal to its wait; a round that slept with
    a core free has no run-queue wait.
    """
    return max(0, min(queue_wait_ns, wall_ns - thread_cpu_ns))


def _less_waits(figures: RoundFigures, waits: dict[str, tuple[int, int]]) -> RoundFigures:
    """``figures`` with each op's time waiting for a CPU taken out of its self and total
    time: what the op did, as on a machine with a free core.  The wall time keeps its
    waits (``wait_ns`` says how long; work time is judged as wall less that wait)."""
    ops = dict(figures.ops)
    for key, (self_wait, total_wait) in waits.items():
        op = ops.get(key)
        if op is not None:
            ops[key] = replace(
                op,
                self_cpu_ns=max(op.self_cpu_ns - self_wait, 0),
                cpu_ns=max(op.cpu_ns - total_wait, 0),
            )
    return replace(figures, ops=ops, switched=frozenset(waits))
