"""``profile`` and ``record_function``: torch.profiler's API over the native core.

The facade above the parts of the data path: capture's recorder records, the
event model reads the records (events, key averages), the renderers write them
out (trace, stacks).  None of those parts imports this module, so each stays
free of the others' jobs; ``import pytest_opprof as opprof`` reaches these
names lazily (``pytest_opprof/__init__.py``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pytest_opprof.capture.recorder import Recorder, record_function

if TYPE_CHECKING:
    from pytest_opprof.model import EventList
    from pytest_opprof.native_layout.records import Records

__all__ = ["profile", "record_function"]


class profile(Recorder):  # lower case: torch.profiler's spelling
    """Record ops (record_function scopes and captured library calls) while active.

    Use as a context manager or with :meth:`start`/:meth:`stop`.  ``capture``
    names the op sources (``["numpy"]``, ``["none"]``; None: every available
    one).  ``python_memory`` also counts Python object allocations (slower).
    ``cuda`` times ops and scopes with CUDA events (None: when the process
    already uses CUDA, see ``sources.cuda_source``), every ``cuda_sample_rate``-th
    call of each name; ``device_memory`` then holds the device memory peak and
    ``not_measured`` says what could not be measured and why.
    ``subtract_overhead``: subtract the profiler's own cost per event (calibrated
    at the first profile of the process and about once a minute after, see
    ``calibration``) from self times in :meth:`events` and :meth:`key_averages`;
    ``overhead`` holds it, and every row keeps ``self_cpu_time_total_raw``.
    ``memory_events``: one ``[memory]`` event per allocation or free outside any
    op (the trace's instants, torch's model); False sums each thread's into one
    ``[memory]`` event (the same bytes, much cheaper; torch capture keeps them
    per allocation, as it nests them under torch ops by time).
    After stop: :meth:`records`, :meth:`events`, :meth:`key_averages`, the
    exports, ``memory`` (bytes, when ``profile_memory``) and ``wall_time_ns``.
    """

    _events: EventList | None = None
    _events_of: Records | None = None
    """The records :attr:`_events` was built from: a restart drains new ones."""

    def __enter__(self) -> profile:
        self.start()
        return self

    def events(self) -> EventList:
        """One FunctionEvent per record, tree linked (built on first call)."""
        records = self.records()
        if self._events is None or self._events_of is not records:
            from pytest_opprof.model import build_events

            events = build_events(
                records,
                profile_memory=self.profile_memory,
                with_flops=self.with_flops,
                overhead=self.overhead,
            )
            events.memory_samples = self._memory_samples
            events.dropped_events = self.dropped_events
            self._events, self._events_of = events, records
        return self._events

    def key_averages(
        self, group_by_input_shape: bool = False, group_by_stack_n: int = 0
    ) -> EventList:
        """FunctionEventAvg per op name (and input shapes / stack frames when asked)."""
        from pytest_opprof.model import key_averages

        rows = key_averages(
            self.records(),
            group_by_input_shape=group_by_input_shape,
            group_by_stack_n=group_by_stack_n,
            profile_memory=self.profile_memory,
            with_flops=self.with_flops,
            overhead=self.overhead,
        )
        rows.dropped_events = self.dropped_events
        return rows

    def export_chrome_trace(self, path: str) -> None:
        """Write a Chrome/Perfetto trace (JSON) of the events and the memory counter track."""
        # From the records, not self.events(): a FunctionEvent per record cost more
        # than the whole streamed export (render/trace.py).
        from pytest_opprof.render.trace import export_records_trace

        export_records_trace(
            self.records(), path, with_flops=self.with_flops, memory_samples=self._memory_samples
        )

    def export_stacks(self, path: str, metric: str = "self_cpu_time_total") -> None:
        """Write collapsed stacks (flame-graph input) weighted by ``metric`` (us)."""
        self.events().export_stacks(path, metric)
