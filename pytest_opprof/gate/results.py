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
          },
          "marked": true,                          # only for tests with a profile marker
          "flame": {...}                           # only for some tests, see below
        }
      },
      "flames_omitted": int                        # tests whose flame the cap left out
    }

``flame`` is the merged event tree of the test's median round
(:mod:`pytest_opprof.render.flame`), kept for tests that regressed, improved or
carry a marker, at most :data:`MAX_FLAMES` of them (regressions first), so a
report of a large suite stays small; the HTML report draws it.

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
from collections.abc import Collection, Mapping, Sequence
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
MAX_FLAMES = 500
"""Tests with a flame tree in one report (each is at most ~15 KB of JSON)."""


@dataclass(frozen=True)
class TestResult:
    """One profiled test of a run: its node id, summary, verdict and baseline file."""

    __test__ = False

    nodeid: str
    summary: TestSummary
    verdict: Verdict
    baseline_file: str | None = None


def stamp() -> str:
    """Now, in UTC, as the reports write it."""
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def wants_flame(status: str, marked: bool) -> bool:
    """Whether a test's flame tree goes into the report: it changed, or it is marked."""
    return marked or status in ("regressed", "improved")


def _kept_flames(
    results: Sequence[TestResult], flames: Mapping[str, object], marked: Collection[str]
) -> tuple[set[str], int]:
    """The node ids whose flame tree goes in (:func:`wants_flame`, regressions first, up to
    :data:`MAX_FLAMES`), and how many were left out."""
    order = {s: i for i, s in enumerate(STATUSES)}
    candidates = sorted(
        (
            r
            for r in results
            if r.nodeid in flames and wants_flame(r.verdict.status, r.nodeid in marked)
        ),
        key=lambda r: order[r.verdict.status],
    )
    kept = {r.nodeid for r in candidates[:MAX_FLAMES]}
    return kept, len(candidates) - len(kept)


def _test_entry(r: TestResult, flame: object = None, marked: bool = False) -> dict[str, object]:
    test: dict[str, object] = {
        "status": r.verdict.status,
        "baseline_file": r.baseline_file,
        **r.summary.to_json(),
        "verdict": r.verdict.to_json(),
    }
    if marked:
        test["marked"] = True
    if flame is not None:
        test["flame"] = flame
    return test


def _head(
    totals: Counter[str], machine: MachineInfo, tests: object, omitted: int, created_at: str | None
) -> dict[str, object]:
    report: dict[str, object] = {
        "kind": REPORT_KIND,
        "schema": REPORT_SCHEMA,
        "created_at": created_at or stamp(),
        "machine": machine.to_json(),
        "totals": {status: totals.get(status, 0) for status in STATUSES},
        "tests": tests,
    }
    if omitted:
        report["flames_omitted"] = omitted
    return report


def build_report(
    results: Sequence[TestResult],
    *,
    machine: MachineInfo,
    flames: Mapping[str, Mapping[str, object]] | None = None,
    marked: Collection[str] = (),
    created_at: str | None = None,
) -> dict[str, object]:
    """The JSON report of a run as a dict (schema in this module's docstring): what the
    HTML page is rendered from.

    ``flames``: node id -> flame tree, kept for the tests :func:`wants_flame` picks,
    regressions first, up to :data:`MAX_FLAMES`; ``marked``: node ids of marked tests."""
    flames = flames or {}
    kept, omitted = _kept_flames(results, flames, marked)
    totals: Counter[str] = Counter(r.verdict.status for r in results)
    tests = {
        r.nodeid: _test_entry(r, flames[r.nodeid] if r.nodeid in kept else None, r.nodeid in marked)
        for r in results
    }
    return _head(totals, machine, tests, omitted, created_at)


_TESTS_MARK = "\x00opprof-tests\x00"


def report_text(
    results: Sequence[TestResult],
    *,
    machine: MachineInfo,
    flames: Mapping[str, Mapping[str, object]] | None = None,
    marked: Collection[str] = (),
    created_at: str | None = None,
) -> str:
    """``dumps_stable(build_report(...))``, one test at a time: the results of a long
    session stay in their spool (``spool.py``) instead of all becoming dicts at once."""
    flames = flames or {}
    kept, omitted = _kept_flames(results, flames, marked)
    totals: Counter[str] = Counter()
    last: dict[str, int] = {}  # a node id judged twice keeps its last result, as in a dict
    for i, r in enumerate(results):
        totals[r.verdict.status] += 1
        last[r.nodeid] = i
    pad = "  " * 2
    tests = "{}"
    if last:

        def entry(nodeid: str) -> str:
            r = results[last[nodeid]]
            test = _test_entry(r, flames[nodeid] if nodeid in kept else None, nodeid in marked)
            return f"{pad}{dumps_nested(nodeid, 2)}: {dumps_nested(test, 2)}"

        tests = "{\n" + ",\n".join(entry(nodeid) for nodeid in sorted(last)) + "\n  }"
    text = dumps_stable(_head(totals, machine, _TESTS_MARK, omitted, created_at))
    return text.replace(dumps_nested(_TESTS_MARK, 0), tests)


def write_json_report(path: str | os.PathLike[str], report: Mapping[str, object] | str) -> None:
    """Write a JSON report (:func:`build_report`'s dict, or :func:`report_text`), keys
    sorted (see ``files.write_file``: atomic for a regular file, through a symlink or FIFO)."""
    write_file(Path(path), report if isinstance(report, str) else dumps_stable(report))


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
