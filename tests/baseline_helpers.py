"""Plain stand-ins for key_averages() rows and MemoryStats, and summaries built from them.

The baseline layers are duck-typed on these attribute names; building real
profiles here would test the profiler, not the comparison.
"""

from __future__ import annotations

import datetime
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from pytest_opprof.gate.machine import MachineInfo, fingerprint
from pytest_opprof.gate.pooling import pool
from pytest_opprof.gate.store import BaselineEntry
from pytest_opprof.gate.summary import RoundFigures, TestSummary, summarize_rounds


@dataclass
class Row:
    """The attributes of a FunctionEventAvg that summaries read (times in µs)."""

    key: str
    count: int = 1
    self_cpu_time_total: float = 0.0
    cpu_time_total: float = 0.0
    self_cpu_memory_usage: int = 0
    cpu_memory_usage: int = 0
    flops: int = 0
    device_time_total: float = 0.0
    self_device_time_total: float = 0.0


@dataclass
class Mem:
    """The attributes of sources.memory_source.MemoryStats (bytes)."""

    peak_bytes: int = 0
    allocated_bytes: int = 0
    allocations: int = 0
    freed_bytes: int = 0
    leaked_bytes: int = 0


def summary_of(
    rounds: Sequence[tuple[float, Sequence[Row]]], memory: Mem | None = None
) -> TestSummary:
    """A summary of rounds given as (wall time in µs, rows); CPU time = wall time."""
    return summarize_rounds(
        [
            RoundFigures.from_events(
                rows,
                wall_time_ns=round(wall_us * 1000),
                cpu_time_ns=round(wall_us * 1000),
                memory=memory,
            )
            for wall_us, rows in rounds
        ]
    )


def waited_rounds(work_ms: Sequence[float], wait_ms: Sequence[float] | None = None) -> TestSummary:
    """One op, ``kernel``, taking each round's work plus its wait for a CPU (ms): what a
    round that waited for a CPU measures."""
    waits = list(wait_ms) if wait_ms is not None else [0.0] * len(work_ms)
    out = []
    for work, wait in zip(work_ms, waits, strict=True):
        wall_us = (work + wait) * 1000
        out.append(
            RoundFigures.from_events(
                [Row("kernel", 1, self_cpu_time_total=wall_us, cpu_time_total=wall_us)],
                wall_time_ns=round(wall_us * 1000),
                cpu_time_ns=round(work * 1e6),
                wait_ns=round(wait * 1e6),
            )
        )
    return summarize_rounds(out)


def pooled(*sessions: TestSummary) -> TestSummary:
    """The baseline three update runs make when none saw a change: their rounds pooled."""
    base = sessions[0]
    for later in sessions[1:]:
        base = pool(later, base)
    return base


def machine_parts(**changed: object) -> dict[str, object]:
    """The fingerprinted parts of a fixed machine, with ``changed`` ones."""
    parts: dict[str, object] = dict(
        cpu_model="Test CPU 3000",
        cpu_count=8,
        arch="x86_64",
        system="Linux",
        python="CPython 3.11",
        numpy="2.4.0",
        blas="openblas 0.3",
        torch=None,
        cpu_id=None,
        blas_core=None,
    )
    parts.update(changed)
    return parts


def machine(cpu_model: str = "Test CPU 3000") -> MachineInfo:
    """A fixed machine description (so fingerprints are chosen by the test)."""
    parts = machine_parts(cpu_model=cpu_model)
    return MachineInfo(platform="Linux-test", fingerprint=fingerprint(**parts), **parts)  # type: ignore[arg-type]


def entry(summary: TestSummary, on: MachineInfo | None = None) -> BaselineEntry:
    """A baseline entry recorded at a fixed time."""
    when = datetime.datetime(2025, 1, 31, 12, 0, tzinfo=datetime.timezone.utc)
    return BaselineEntry.record(summary, on or machine(), now=when)


def simple_summary(
    *, rounds: int = 3, matmul_flops: int = 2_000_000, allocated: int = 8_000_000
) -> TestSummary:
    """A small test: a scope around matmul and add, with memory figures."""
    rows = [
        Row("forward", 1, self_cpu_time_total=20.0, cpu_time_total=1020.0),
        Row(
            "numpy.matmul",
            10,
            self_cpu_time_total=800.0,
            cpu_time_total=800.0,
            flops=matmul_flops,
            self_cpu_memory_usage=allocated,
            cpu_memory_usage=allocated,
        ),
        Row("numpy.add", 5, self_cpu_time_total=200.0, cpu_time_total=200.0, flops=5000),
    ]
    mem = Mem(peak_bytes=allocated, allocated_bytes=allocated, allocations=10)
    return summary_of([(1500.0, rows)] * rounds, memory=mem)


def stored_test(root: Path, name: str) -> dict[str, object]:
    """The entry of test ``name`` in the one baseline file a run under ``root`` wrote."""
    files = list(Path(root, "baselines").rglob("*.json"))
    assert len(files) == 1, files
    entry = json.loads(files[0].read_text())["tests"][name]
    assert isinstance(entry, dict)
    return entry
