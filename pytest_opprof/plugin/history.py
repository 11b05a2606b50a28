"""``--opprof-history``: the end of a run appends its file to the history directory, and
with ``--opprof-html`` writes the history's page beside the report (``history/html.py``)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection
from pathlib import Path

from pytest_opprof.errors import BaselineError
from pytest_opprof.gate.machine import MachineInfo
from pytest_opprof.gate.results import stamp
from pytest_opprof.history.commit import commit_of
from pytest_opprof.history.series import find_changes
from pytest_opprof.history.store import RunWriter, run_file_name, scan, write_run
from pytest_opprof.render.html import HistoryLinks
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


def history_page_path(report_html: Path) -> Path | None:
    """Where the history page goes beside the HTML report ``report.html``:
    ``report.history.html``; None where the report is not written to a file of its own
    (``/dev/stdout``, a FIFO): there is no "beside" to link to."""
    if report_html.exists() and not report_html.is_file():
        return None
    return report_html.with_name(f"{report_html.stem}.history.html")


def write_history_page(directory: Path, page: Path) -> tuple[HistoryLinks, str]:
    """Find the change points of the history in ``directory`` and write its page to
    ``page``; the links the run's HTML report makes to it, and the terminal's line.
    Raises ``BaselineError`` naming the page or the directory when either fails."""
    from pytest_opprof.history.html import write_history_html

    history = scan(directory)
    found = find_changes(history)
    write_history_html(page, history, found, found.changes, title=str(directory))
    changes = Counter(c.test for c in found.changes)
    line = (
        f"opprof: history page: {page} ({len(found.changes)} change point(s) in "
        f"{found.runs} run(s); the HTML report links each test to it)"
    )
    return HistoryLinks(page.name, changes), line
