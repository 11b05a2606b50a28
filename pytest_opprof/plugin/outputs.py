"""A profiled test's outputs beside its figures: its Chrome trace file, its flame tree
and its JUnit XML properties.

The worker decides when each is made (a trace of every test or only of a regressed
one, a flame only where the report shows it); this module makes them.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from pytest_opprof.gate.results import TestResult
from pytest_opprof.gate.summary import TestSummary
from pytest_opprof.model.tree import build_tree
from pytest_opprof.plugin.traces import trace_file
from pytest_opprof.profiler import profile
from pytest_opprof.render.budget_lines import junit_budget_properties
from pytest_opprof.render.creep_lines import junit_creep_properties
from pytest_opprof.render.flame import flame_tree
from pytest_opprof.render.report import judged_wall_ns, time_basis


def trace_writer(
    trace_dir: Path, nodeid: str, prof: profile, not_measured: set[str]
) -> Callable[[], str | None]:
    """Writes ``prof`` as ``nodeid``'s Chrome trace in ``trace_dir`` and returns its path;
    None when it could not be written (the reason goes to ``not_measured``)."""

    def write_trace() -> str | None:
        path = trace_file(trace_dir, nodeid)
        try:
            # Through a symlink or FIFO already there, as --junitxml writes.
            prof.export_chrome_trace(str(path))
        except OSError as exc:  # the directory was checked at start: a full disk
            not_measured.add(f"traces: cannot be written into {trace_dir} ({exc.strerror or exc})")
            return None
        return str(path)

    return write_trace


def flame(prof: profile) -> dict[str, object]:
    """The flame tree of a measured round's profile (its records are drained already)."""
    return flame_tree(build_tree(prof.records()), wall_time_ns=prof.wall_time_ns)


def junit_properties(
    summary: TestSummary,
    verdict: str,
    time_not_judged: str | None = None,
    work: bool = False,
    result: TestResult | None = None,
) -> list[tuple[str, object]]:
    """The main figures as ``record_property`` pairs (JUnit XML ``<property>``): us, bytes,
    the share of the rounds' wall time the test's thread waited for a CPU, why the
    time was not judged when the machine was too busy, and ``opprof_time_judged_on``
    ``work time`` when it was judged as wall time less that wait.

    The wall time is the figure the verdict judged (``result``'s, as the terminal diff and
    the Markdown show it) with ``opprof_wall_time_basis``; ``opprof_wall_time_raw_us`` is
    the median as measured."""
    raw_ns = summary.wall_time.median_ns
    wall_ns = judged_wall_ns(result) if result is not None else raw_ns
    props: list[tuple[str, object]] = [
        ("opprof_wall_time_us", round(wall_ns / 1000, 3)),
        ("opprof_wall_time_raw_us", round(raw_ns / 1000, 3)),
        ("opprof_cpu_time_us", round(summary.cpu_time.median_ns / 1000, 3)),
        ("opprof_op_count", summary.op_count),
        ("opprof_flops", summary.flops),
    ]
    if summary.memory is not None:
        props.append(("opprof_peak_bytes", summary.memory.peak_bytes))
    share = summary.wait_share()
    if share is not None:
        props.append(("opprof_wait_share", round(share, 4)))
    if result is not None and result.verdict.metrics:
        props.append(("opprof_wall_time_basis", time_basis(result.verdict)))
    props.append(("opprof_verdict", verdict))
    if time_not_judged is not None:
        props.append(("opprof_time_not_judged", time_not_judged))
    if work:
        props.append(("opprof_time_judged_on", "work time"))
    if result is not None:
        props += junit_budget_properties(result.verdict)
        props += junit_creep_properties(result.verdict)
    return props
