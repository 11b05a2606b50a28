"""The event limit: a round that records more events than it keeps says so, everywhere.

Beyond ``--opprof-max-events`` the native core drops events and counts them.  The op
figures then cover only the start of the round: the table says PARTIAL, the summary names
the test, and the verdict judges no op figure (only wall time and memory), so a truncated
baseline or run neither fails nor passes a test on figures it did not see.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pytest
from baseline_helpers import entry, machine, simple_summary

from pytest_opprof import _native
from pytest_opprof.gate.jsonio import Fields
from pytest_opprof.gate.summary import TestSummary
from pytest_opprof.gate.verdict import compare
from pytest_opprof.plugin import options
from pytest_opprof.profiler import profile

if TYPE_CHECKING:
    from run_helpers import PytestRunner

REPO = Path(__file__).resolve().parent.parent

MANY_ADDS = """
import numpy as np

def test_many():
    a = np.ones(8)
    for _ in range(3000):
        np.add(a, a)
"""


@pytest.fixture
def small_limit() -> Iterator[int]:
    before = _native.capacity()
    _native.set_capacity(1000)
    yield 1000
    _native.set_capacity(before)


def test_default_limit_is_the_native_cores() -> None:
    header = (REPO / "native" / "core_internal.h").read_text(encoding="utf-8")
    match = re.search(r"#define OPPROF_DEFAULT_CAPACITY \((\d+)LL << (\d+)\)", header)
    assert match is not None
    native_default = int(match[1]) << int(match[2])
    assert options.DEFAULT_MAX_EVENTS == _native.DEFAULT_CAPACITY == native_default


def test_a_profile_past_its_limit_counts_the_drops_and_its_table_says_partial(
    small_limit: int,
) -> None:
    a = np.ones(8)
    with profile(capture=["numpy"], profile_memory=False) as prof:
        for _ in range(3000):
            np.add(a, a)
    assert prof.dropped_events == 3000 - small_limit
    rows = prof.key_averages()
    assert sum(r.count for r in rows) == small_limit
    assert "PARTIAL: 2,000 events dropped" in rows.table()
    assert "PARTIAL: 2,000 events dropped" in prof.events().key_averages().table()


def test_a_profile_within_its_limit_has_no_partial_footer(small_limit: int) -> None:
    a = np.ones(8)
    with profile(capture=["numpy"], profile_memory=False) as prof:
        for _ in range(10):
            np.add(a, a)
    assert prof.dropped_events == 0
    assert "PARTIAL" not in prof.key_averages().table()


def test_dropped_events_survive_json() -> None:
    partial = replace(simple_summary(), dropped_events=1234)
    assert TestSummary.from_json(Fields(partial.to_json())).dropped_events == 1234
    whole = simple_summary().to_json()
    assert "dropped_events" not in json.dumps(whole)  # baselines without drops are unchanged
    assert TestSummary.from_json(Fields(whole)).dropped_events == 0


def test_a_partial_side_judges_no_op_figure_only_wall_time_and_memory() -> None:
    base = simple_summary()
    more_flops = simple_summary(matmul_flops=4_000_000)
    fingerprint = machine().fingerprint
    # Whole on both sides, the FLOPs growth fails the test ...
    assert compare(more_flops, entry(base), fingerprint=fingerprint).failed
    # ... with events dropped on either side it is shown, not judged.
    for now, then in (
        (replace(more_flops, dropped_events=10), base),
        (more_flops, replace(base, dropped_events=10)),
    ):
        verdict = compare(now, entry(then), fingerprint=fingerprint)
        assert verdict.status == "pass"
        assert {r.status for r in verdict.reasons} <= {"info"}
        flops = next(m for m in verdict.metrics if m.metric == "flops")
        assert (flops.baseline, flops.now, flops.status) == (2_005_000, 4_005_000, "not judged")
        assert any("event limit" in note for note in verdict.notes)
    # Memory is counted apart from the events: still judged.
    bigger = replace(simple_summary(allocated=16_000_000), dropped_events=10)
    assert compare(bigger, entry(base), fingerprint=fingerprint).failed


def test_the_plugin_flags_a_test_past_the_limit_and_stays_quiet_below_it(
    pytester: pytest.Pytester,
    run_pytest: PytestRunner,
) -> None:
    pytester.makepyfile(test_many=MANY_ADDS)
    result = run_pytest("--opprof", "--opprof-max-events", "1000", "--opprof-rounds", "1")
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(
        [
            "opprof: PARTIAL: 1 test(s) recorded more events in a round than "
            "--opprof-max-events (1000) keeps, e.g. test_many.py::test_many (*dropped)*"
        ]
    )
    result = run_pytest("--opprof", "--opprof-rounds", "1")
    assert result.ret == pytest.ExitCode.OK
    assert "PARTIAL" not in result.stdout.str()


@pytest.mark.slow
def test_a_truncated_baseline_is_not_judged_on_op_figures_and_is_replaced(
    pytester: pytest.Pytester,
    run_pytest: PytestRunner,
) -> None:
    pytester.makepyfile(test_many=MANY_ADDS)
    # Times judged (3 rounds) but never beyond a 1000% tolerance: the op figures decide.
    pytester.makeini("[pytest]\nopprof_rounds = 3\nopprof_time_tolerance = 1000%\n")
    first = run_pytest("--opprof-update-baselines", "--opprof-max-events", "1000")
    assert first.ret == pytest.ExitCode.OK
    stored = json.loads((pytester.path / "baselines" / "test_many.json").read_text())
    (entry_json,) = stored["tests"].values()
    assert entry_json["summary"]["dropped_events"] > 0
    truncated_count = entry_json["summary"]["op_count"]

    # All 3,000 adds now: 3x the FLOPs and ops of the truncated baseline, and it passes.
    judged = run_pytest("--opprof", "--opprof-report", "report.json")
    assert judged.ret == pytest.ExitCode.OK
    report = json.loads((pytester.path / "report.json").read_text())
    (test,) = report["tests"].values() if isinstance(report["tests"], dict) else report["tests"]
    assert test["verdict"]["status"] == "pass"
    assert any("event limit" in note for note in test["verdict"]["notes"])

    # An update run with every event replaces the truncated entry (never pools with it).
    run_pytest("--opprof-update-baselines")
    stored = json.loads((pytester.path / "baselines" / "test_many.json").read_text())
    (entry_json,) = stored["tests"].values()
    assert "dropped_events" not in entry_json["summary"]
    assert entry_json["summary"]["op_count"] > truncated_count
    assert "sessions" not in entry_json


@pytest.mark.parametrize("value", ["0", "lots"])
def test_a_bad_limit_is_a_usage_error_naming_the_option(
    pytester: pytest.Pytester,
    value: str,
    run_pytest: PytestRunner,
) -> None:
    pytester.makepyfile("def test_a(): pass")
    result = run_pytest.inprocess("--opprof", "--opprof-max-events", value)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*argument --opprof-max-events: expected *integer*"])
    pytester.makeini(f"[pytest]\nopprof_max_events = {value}\n")
    result = run_pytest.inprocess("--opprof")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*opprof_max_events = '{value}': expected *integer*"])
