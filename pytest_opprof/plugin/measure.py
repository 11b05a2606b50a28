"""One test's measured rounds: each a profile bracketed by the machine-speed references.

The worker decides how many rounds run (``rounds.py``) and what becomes of their
figures; this module says what one round measures, so that every round, the first
(pytest's own call) and the repeats alike, is measured the same way.  A round is
reduced to its figures before the next one records (:meth:`Rounds.summarised`), and
only the round that is shown keeps its events: a test's peak memory is about one
round's events, however many rounds it runs.
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
from pytest_opprof.gate.round_figures import DeviceTraffic, RoundFigures
from pytest_opprof.gate.summary import TestSummary, summarize_rounds
from pytest_opprof.gate.waiting import is_clean
from pytest_opprof.model import EventList, library_self_ns
from pytest_opprof.model.averages import op_sums
from pytest_opprof.model.event_traffic import round_traffic
from pytest_opprof.model.waits import op_waits_ns
from pytest_opprof.plugin.marker import TestSettings
from pytest_opprof.plugin.options import OpprofOptions
from pytest_opprof.profiler import profile


@dataclass
class Rounds:
    """The measured rounds of the test being run; dropped once it is summarised."""

    walls_ns: list[int] = field(default_factory=list)
    """Per measured round, its wall time."""
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
    keep_events: bool = True
    """Keep the events of the round that is shown (its table, trace and flame read them);
    False: no round keeps any once it is summarised."""
    _unreduced: list[profile] = field(default_factory=list)
    """Rounds measured and not yet summarised (at most one while rounds run)."""
    _shown: int | None = None
    """The round whose events are kept, once one is summarised (with ``keep_events``)."""
    _shown_profile: profile | None = None
    _shown_rows: EventList | None = None
    """The shown round's ``key_averages()``, once built (:meth:`shown_rows`)."""
    _summary: TestSummary | None = None
    """:meth:`summary`, of the rounds summarised when it was built."""

    @property
    def measured(self) -> int:
        """How many rounds were measured."""
        return len(self.walls_ns)

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
        # Drained when the round is summarised, after the window: the drain is the
        # plugin's work, not the test's.
        prof.drain_later = True
        prof.start()
        # CPU time of the body only, like the wall time: the first start installs
        # hooks and calibrates, and every stop collects garbage.
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
            # Closing them records their ends: the round's events are drained before.
            if _native.scope_depth() > depth and not prof.preempted:
                prof.records()
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
                self.walls_ns.append(prof.wall_time_ns)
                self._unreduced.append(prof)

    def summarised(self, settings: TestSettings) -> list[RoundFigures]:
        """Each measured round's figures, made once per round: from the C pass's integer
        sums (``op_sums``), the rows of ``key_averages()`` only where that pass does not
        apply.  A round's events go once it is summarised, unless it becomes the round
        shown (:meth:`shown_profile`)."""
        by_shape = settings.group_by_input_shape
        while self._unreduced:
            prof = self._unreduced.pop(0)
            i = len(self.figures)
            records = prof.records()
            rows: EventList | None = None
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
                rows = prof.key_averages(group_by_input_shape=by_shape)
                figures = RoundFigures.from_events(
                    rows,
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
            traffic = round_traffic(records)  # None without a device: most tests
            if traffic is not None:
                figures = replace(figures, traffic=DeviceTraffic.of(*traffic))
            # Most rounds: no event waited, as the round's pass counted.
            no_wait = sums is not None and sums.waited == 0
            waits = {} if no_wait else op_waits_ns(records, by_input_shape=by_shape)
            if waits:
                figures = _less_waits(figures, waits)
            self.figures.append(figures)
            if self.keep_events and self._nearer_median(i):
                self._shown, self._shown_profile, self._shown_rows = i, prof, rows
        return self.figures

    def summary(self, settings: TestSettings) -> TestSummary:
        """The rounds' :func:`summarize_rounds`, built once per number of rounds: the
        rounds policy asks it between rounds, and a test's report reads the same."""
        figures = self.summarised(settings)
        if self._summary is None or self._summary.rounds != len(figures):
            self._summary = summarize_rounds(figures)
        return self._summary

    def _nearer_median(self, i: int) -> bool:
        """Whether round ``i`` is to be shown in place of the one kept so far: its wall
        time is nearer the low median of the rounds measured up to it.  Keeping the
        events of one round, not every round's until the last, holds a test's memory to
        the round kept and the one recording, however many rounds run; the price is
        that the round shown is the median of all rounds only where the later rounds do
        not move the median onto a round already let go (always for one or two rounds),
        else a round beside it."""
        if self._shown is None:
            return True
        walls = self.walls_ns[: i + 1]
        median = statistics.median_low(walls)
        return abs(walls[i] - median) < abs(walls[self._shown] - median)

    def shown(self) -> int:
        """Which round is shown, from 0 (after :meth:`summarised`, with ``keep_events``)."""
        assert self._shown is not None, "no round keeps its events"
        return self._shown

    def shown_profile(self) -> profile:
        """The profile of the round shown (after :meth:`summarised`, with ``keep_events``)."""
        assert self._shown_profile is not None, "no round keeps its events"
        return self._shown_profile

    def shown_rows(self, settings: TestSettings) -> EventList:
        """The shown round's ``key_averages()`` (built on first use, for the table)."""
        if self._shown_rows is None:
            self._shown_rows = self.shown_profile().key_averages(
                group_by_input_shape=settings.group_by_input_shape
            )
        return self._shown_rows

    def clean(self, limit: float) -> int | None:
        """How many rounds waited for a CPU at most ``limit`` of their wall time; None when
        the waiting was not measured."""
        if any(w is None for w in self.waits_ns):
            return None
        return sum(
            is_clean(wait, wall, limit)
            for wait, wall in zip(self.waits_ns, self.walls_ns, strict=True)
            if wait is not None
        )

    def first_work_ns(self) -> int:
        """The first round's wall time less its wait for a CPU (0 without a round)."""
        if not self.walls_ns:
            return 0
        wait = self.waits_ns[0] if self.waits_ns else None
        return self.walls_ns[0] - (wait or 0)


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
