"""A run's results: one :class:`TestResult` per judged test, and the JSON report of them.

JSON report schema (``--opprof-report``): by default version 2, the compact form;
with ``--opprof-report-details``, version :data:`DETAILS_SCHEMA` (1), every figure::

    {
      "kind": "opprof-report",
      "schema": 2,
      "created_at": "2025-01-31T12:00:00Z",          # UTC
      "machine": {...},                               # as in a baseline entry
      "totals": {"pass": int, "regressed": int, "improved": int, "new": int},
      "tests": {
        "<node id>": {                               # schema 2: one line per test
          "status": "pass" | "regressed" | "improved" | "new",
          "baseline_file": "baselines/tests/test_a.json",   # left out when none
          "rounds": int, "summary": {...}, "ops": {...},    # schema 2: as a baseline keeps
                                                    # them (compact.py); schema 1: every
                                                    # op, every time with its statistics
          "verdict": {
            "status": ..., "time_judged": bool, "baseline_recorded_at": str | null,
            "notes": [str],
            "metrics": [{"metric", "unit", "baseline", "now", "change", "tolerance",
                         "status", "note"}],
            "reasons": [{"op", "kind", "unit", "baseline", "now", "change",
                         "status", "impact"}],     # regressions first, then by impact
            "budgets": [{"budget", "metric", "unit", "limit", "now", "status",
                         "ops", "note"}],          # only with budgets (gate/budgets.py)
            "crept": [{"figure", "op", "unit", "before", "now", "change", "steps",
                       "ops", "this_run", "text"}] # only where a figure crept against
                                                   # the history (gate/creep.py)
          },
          "marked": true,                          # only for tests with a profile marker
          "flame": {...}                           # only for some tests, see below
        }
      },
      "flames_omitted": int,                       # tests whose flame the cap left out
      "ab_ops": [                                  # A/B runs only: ops pooled across tests
        {"op": str, "tests": int, "change": float, "low": float, "high": float,
         "p": float, "processes": [float, ...], "apart": float,
         "status": "regressed|improved|pass"}      # reported, never failed (ab/across.py)
      ]
    }

Schema 2 leaves out of a verdict (its rows and reasons too) every field that is null,
empty or ``""`` (a reader takes a missing one as that) but its ``notes``, ``metrics`` and
``reasons``, and keeps a test's figures as its
baseline entry does: times as per-round strings (``"1.91 1.37 ms"``), the ops a
verdict can name plus ``[other ops]``.  That is about 2 KB a test, where schema 1
took 7 KB for a test of four ops, and is written in a fraction of the time.

``flame`` is the merged event tree of the test's median round
(:mod:`pytest_opprof.render.flame`), kept for tests that regressed, improved or
carry a marker, at most :data:`MAX_FLAMES` of them (regressions first), so a
report of a large suite stays small; the HTML report draws it.

``change`` is relative (0.25 = +25%; null when the baseline is 0), ``unit`` one
of ``ns``, ``bytes``, ``flops``, ``ops``, ``allocations``, ``share``, ``syncs``.  A test
whose ops had an argument off the host also has ``summary.device_traffic``: bytes
host->device, device->host, device->device and syncs, and ``sites`` (the same four by
op and scope).  Statuses of
rows and reasons: ``pass``, ``regressed``, ``improved``, ``info``, ``not judged``.
A report's tests read back as baseline entries (:func:`read_report`), so two
reports, or a report and a baseline file, compare with ``python -m pytest_opprof``.
"""

from __future__ import annotations

import datetime
import json
import os
from collections import Counter
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from pytest_opprof.errors import BaselineError, FieldError
from pytest_opprof.gate import compact
from pytest_opprof.gate.files import read_text, write_file
from pytest_opprof.gate.jsonio import DocumentError, Fields, dumps_nested, dumps_stable, parse
from pytest_opprof.gate.machine import MachineInfo
from pytest_opprof.gate.store import BaselineEntry
from pytest_opprof.gate.summary import TestSummary
from pytest_opprof.gate.verdict import Verdict

REPORT_SCHEMA = 2
"""The compact form (the default)."""
DETAILS_SCHEMA = 1
"""Every op and each time's statistics (``--opprof-report-details``)."""
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
    if not flames:  # no pass over the results (each reads them back from the spool)
        return set(), 0
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


def _test_entry(
    r: TestResult, flame: object = None, marked: bool = False, details: bool = False
) -> dict[str, object]:
    verdict = r.verdict.to_json()
    test: dict[str, object] = {
        "status": r.verdict.status,
        "baseline_file": r.baseline_file,
        **(r.summary.to_json() if details else compact.summary_to_json(r.summary)),
        "verdict": verdict if details else _lean(verdict),
    }
    if not details and r.baseline_file is None:
        del test["baseline_file"]
    if marked:
        test["marked"] = True
    if flame is not None:
        test["flame"] = flame
    return test


_KEPT_LISTS = frozenset(("notes", "metrics", "reasons"))
"""A verdict's lists that stay when empty (readers iterate them)."""


def _lean(value: object, top: bool = True) -> object:
    """A verdict's JSON without the fields that are null, ``""`` or empty (schema 2), but
    for its notes, metrics and reasons, which are always there."""
    if isinstance(value, dict):
        return {
            k: _lean(v, False)
            for k, v in value.items()
            if v is not None and v != "" and (v not in ([], {}) or (top and k in _KEPT_LISTS))
        }
    if isinstance(value, list):
        return [_lean(v, False) for v in value]
    return value


def _head(
    totals: Counter[str],
    machine: MachineInfo,
    tests: object,
    omitted: int,
    created_at: str | None,
    details: bool,
    extra: Mapping[str, object] | None = None,
) -> dict[str, object]:
    report: dict[str, object] = {
        "kind": REPORT_KIND,
        "schema": DETAILS_SCHEMA if details else REPORT_SCHEMA,
        "created_at": created_at or stamp(),
        "machine": machine.to_json(),
        "totals": {status: totals.get(status, 0) for status in STATUSES},
        "tests": tests,
    }
    if omitted:
        report["flames_omitted"] = omitted
    report.update(extra or {})
    return report


def build_report(
    results: Sequence[TestResult],
    *,
    machine: MachineInfo,
    flames: Mapping[str, Mapping[str, object]] | None = None,
    marked: Collection[str] = (),
    created_at: str | None = None,
    details: bool = False,
    extra: Mapping[str, object] | None = None,
) -> dict[str, object]:
    """The JSON report of a run as a dict (schema in this module's docstring): what the
    HTML page is rendered from.

    ``flames``: node id -> flame tree, kept for the tests :func:`wants_flame` picks,
    regressions first, up to :data:`MAX_FLAMES`; ``marked``: node ids of marked tests;
    ``details``: schema 1, every figure."""
    flames = flames or {}
    kept, omitted = _kept_flames(results, flames, marked)
    totals: Counter[str] = Counter()
    tests = {}
    for r in results:
        totals[r.verdict.status] += 1
        flame = flames[r.nodeid] if r.nodeid in kept else None
        tests[r.nodeid] = _test_entry(r, flame, r.nodeid in marked, details)
    return _head(totals, machine, tests, omitted, created_at, details, extra)


_TESTS_MARK = "\x00opprof-tests\x00"


def report_text(
    results: Sequence[TestResult],
    *,
    machine: MachineInfo,
    flames: Mapping[str, Mapping[str, object]] | None = None,
    marked: Collection[str] = (),
    created_at: str | None = None,
    details: bool = False,
    extra: Mapping[str, object] | None = None,
) -> str:
    """``dumps_report(build_report(...))``, one test at a time: the results of a long
    session stay in their spool (``spool.py``) instead of all becoming dicts at once."""
    flames = flames or {}
    kept, omitted = _kept_flames(results, flames, marked)
    totals: Counter[str] = Counter()
    last: dict[str, int] = {}  # a node id judged twice keeps its last result, as in a dict
    for i, r in enumerate(results):
        totals[r.verdict.status] += 1
        last[r.nodeid] = i
    head = _head(totals, machine, _TESTS_MARK, omitted, created_at, details, extra)

    def entries() -> Iterator[tuple[str, object]]:
        for nodeid in sorted(last):
            r = results[last[nodeid]]
            flame = flames[nodeid] if nodeid in kept else None
            yield nodeid, _test_entry(r, flame, nodeid in marked, details)

    return _text(head, entries(), details)


def dumps_report(report: Mapping[str, object]) -> str:
    """The text of a JSON report's dict (:func:`build_report`), as :func:`report_text`
    writes it."""
    tests = report["tests"]
    assert isinstance(tests, Mapping)
    head = {**report, "tests": _TESTS_MARK}
    details = report.get("schema") == DETAILS_SCHEMA
    return _text(head, ((k, tests[k]) for k in sorted(tests)), details)


def _text(head: Mapping[str, object], tests: Iterable[tuple[str, object]], details: bool) -> str:
    """The report's head as :func:`dumps_stable` writes it, with ``tests`` in place: in
    schema 1 in the same layout, in schema 2 one test a line (written by json's C
    encoder: the layout's pure-Python walk was most of a large suite's report time)."""
    pad = "  " * 2
    if details:
        lines = [f"{pad}{dumps_nested(k, 2)}: {dumps_nested(v, 2)}" for k, v in tests]
    else:
        lines = [f"{pad}{_one_line(k)}: {_one_line(v)}" for k, v in tests]
    text = dumps_stable(head)
    body = "{\n" + ",\n".join(lines) + "\n  }" if lines else "{}"
    return text.replace(dumps_nested(_TESTS_MARK, 0), body)


def _one_line(value: object) -> str:
    text = json.dumps(
        value, sort_keys=True, ensure_ascii=False, allow_nan=False, separators=(",", ":")
    )
    if not text.isascii():
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            # A lone surrogate (from a test id) has no UTF-8 form: escaped, it round-trips.
            return json.dumps(value, sort_keys=True, allow_nan=False, separators=(",", ":"))
    return text


def write_json_report(path: str | os.PathLike[str], report: Mapping[str, object] | str) -> None:
    """Write a JSON report (:func:`build_report`'s dict, or :func:`report_text`), keys
    sorted (see ``files.write_file``: atomic for a regular file, through a symlink or FIFO)."""
    write_file(Path(path), report if isinstance(report, str) else dumps_report(report))


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
        read = TestSummary.from_json if schema == DETAILS_SCHEMA else compact.summary_from_json
        return {
            nodeid: BaselineEntry(read(test), machine, created)
            for nodeid, test in f.obj("tests").entries()
        }
    except FieldError as exc:
        raise BaselineError(path, exc.reason, field=exc.field or None) from None
