"""``--opprof-history``: the end of a run appends its file to the history directory."""

from __future__ import annotations

from collections.abc import Collection
from pathlib import Path

from pytest_opprof.errors import BaselineError
from pytest_opprof.gate.machine import MachineInfo
from pytest_opprof.gate.results import stamp
from pytest_opprof.history.commit import commit_of
from pytest_opprof.history.store import RunWriter, run_file_name, write_run
from pytest_opprof.render.units import format_memory


def write_history(
    writer: RunWriter,
    directory: Path,
    machine: MachineInfo,
    rootdir: Path,
    replaced: Collection[str] = (),
) -> tuple[str, bool]:
    """Write the run's file; the line the terminal summary shows, and whether it was written.
    ``replaced``: the tests whose baseline this run replaced (``--opprof-update-baselines``
    accepted a change): the history gate judges them from this run on."""
    if not len(writer):
        return f"opprof: history: no passed profiled test, nothing added to {directory}", True
    run_at = stamp()
    commit = commit_of(rootdir)
    meta: dict[str, object] = {
        "run_at": run_at,
        "commit": commit.to_json() if commit else None,
        "machine": machine.to_json(),
        "replaced": [t for t in writer.tests if t in replaced],
    }
    data = writer.encode(meta)
    try:
        path = write_run(directory, data, run_file_name(run_at, commit))
    except BaselineError as exc:
        return f"opprof: history: {exc}", False
    at = f" at {commit.sha[:8]}{' (dirty)' if commit.dirty else ''}" if commit else ""
    return (
        f"opprof: history: {len(writer)} test(s){at} added to {path} "
        f"({format_memory(len(data))}, {len(data) / len(writer):.0f} bytes a test)",
        True,
    )
