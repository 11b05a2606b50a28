"""A run's results: one :class:`TestResult` per judged test, and the JSON report of them.

JSON report schema (``--opprof-report``, version :data:`REPORT_SCHEMA`)::

    {
      "kind": "opprof-report",
      "schema": 1,
      "created_at": "2025-01-31T12:00:00Z",          # UTC
      "machine": {...},                               # as in a baseline entry
      "totals": {"pass": int, "regressed": int, "improved": int, "new": int},
      "tests": {
        "<node id>": {
          "status": "pass" | "regressed" | "improved" | "new",
          "baseline_file": "baselines/tests/test_a.json" | null,
          "rounds": int, "summary": {...}, "ops": {...},   # as in a baseline entry
          "verdict": {
            "status": ..., "time_judged": bool, "baseline_recorded_at": str | null,
            "notes": [str],
            "metrics": [{"metric", "unit", "baseline", "now", "change", "tolerance",
                         "status", "note"}],
            "reasons": [{"op", "kind", "unit", "baseline", "now", "change",
                         "status", "impact"}]      # regressions first, then by impact
          }
        }
      }
    }

``change`` is relative (0.25 = +25%; null when the baseline is 0), ``unit`` one
of ``ns``, ``bytes``, ``flops``, ``ops``, ``allocations``, ``share``.  Statuses of
rows and reasons: ``pass``, ``regressed``, ``improved``, ``info``, ``not judged``.
A report's tests read back as baseline entries (:func:`read_report`), so two
reports, or a report and a baseline file, compare with ``python -m pytest_opprof``.
"""

from __future__ import annotations

import datetime
import os
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from pytest_opprof.errors import BaselineError, FieldError
from pytest_opprof.gate.files import read_text, write_file
from pytest_opprof.gate.jsonio import DocumentError, Fields, dumps_nested, dumps_stable, parse
from pytest_opprof.gate.machine import MachineInfo
from pytest_opprof.gate.store import BaselineEntry
from pytest_opprof.gate.summary import TestSummary
from pytest_opprof.gate.verdict import Verdict

REPORT_SCHEMA = 1
REPORT_KIND = "opprof-report"
STATUSES = ("regressed", "improved", "new", "pass")


@dataclass(frozen=True)
class TestResult:
    """One profiled test of a run: its node id, summary, verdict and baseline file."""

    __test__ = False

    nodeid: str
    summary: TestSummary
    verdict: Verdict
    baseline_file: str | None = None


def _stamp() -> str:
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _test_entry(r: TestResult) -> dict[str, object]:
    return {
        "status": r.verdict.status,
        "baseline_file": r.baseline_file,
        **r.summary.to_json(),
        "verdict": r.verdict.to_json(),
    }


def _head(totals: Counter[str], machine: MachineInfo, tests: object) -> dict[str, object]:
    return {
        "kind": REPORT_KIND,
        "schema": REPORT_SCHEMA,
        "created_at": _stamp(),
        "machine": machine.to_json(),
        "totals": {status: totals.get(status, 0) for status in STATUSES},
        "tests": tests,
    }


def build_report(results: Sequence[TestResult], *, machine: MachineInfo) -> dict[str, object]:
    """The JSON report of a run as a dict (schema in this module's docstring)."""
    totals: Counter[str] = Counter(r.verdict.status for r in results)
    return _head(totals, machine, {r.nodeid: _test_entry(r) for r in results})


_TESTS_MARK = "\x00opprof-tests\x00"


def report_text(results: Sequence[TestResult], *, machine: MachineInfo) -> str:
    """``dumps_stable(build_report(...))``, one test at a time: the results of a long
    session stay in their spool (``spool.py``) instead of all becoming dicts at once."""
    totals: Counter[str] = Counter()
    last: dict[str, int] = {}  # a node id judged twice keeps its last result, as in a dict
    for i, r in enumerate(results):
        totals[r.verdict.status] += 1
        last[r.nodeid] = i
    pad = "  " * 2
    tests = "{}"
    if last:
        entries = (
            f"{pad}{dumps_nested(nodeid, 2)}: {dumps_nested(_test_entry(results[last[nodeid]]), 2)}"
            for nodeid in sorted(last)
        )
        tests = "{\n" + ",\n".join(entries) + "\n  }"
    text = dumps_stable(_head(totals, machine, _TESTS_MARK))
    return text.replace(dumps_nested(_TESTS_MARK, 0), tests)


def write_json_report(
    path: str | os.PathLike[str], results: Sequence[TestResult], *, machine: MachineInfo
) -> None:
    """Write the JSON report of a run (sorted keys; see ``files.write_file``)."""
    write_file(Path(path), report_text(results, machine=machine))


def read_report(path: str | os.PathLike[str]) -> dict[str, BaselineEntry]:
    """A JSON report's tests as baseline entries keyed by node id (raises BaselineError)."""
    try:
        data = parse(read_text(path))
    except FileNotFoundError:
        raise BaselineError(path, "no such file") from None
    except DocumentError as exc:
        raise BaselineError(path, str(exc)) from None
    try:
        f = Fields(data)
        if f.text("kind") != REPORT_KIND:
            raise FieldError("kind", f"expected {REPORT_KIND!r}")
        schema = f.integer("schema", minimum=1)
        if schema > REPORT_SCHEMA:
            raise FieldError("schema", f"report schema {schema} is newer than {REPORT_SCHEMA}")
        machine = MachineInfo.from_json(f.obj("machine"))
        created = f.text("created_at")
        return {
            nodeid: BaselineEntry(TestSummary.from_json(test), machine, created)
            for nodeid, test in f.obj("tests").entries()
        }
    except FieldError as exc:
        raise BaselineError(path, exc.reason, field=exc.field or None) from None
