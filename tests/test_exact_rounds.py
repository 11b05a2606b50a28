"""'Exact' figures the test's own data decides: a FLOPs, op count or memory figure beyond
tolerance after one round is measured once more, and where the two rounds of the same code
disagree it is not judged, so a test that draws unseeded data does not fail its gate."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from baseline_helpers import Row, entry, machine, summary_of

from pytest_opprof.gate.results import TestResult
from pytest_opprof.gate.summary import TestSummary
from pytest_opprof.gate.verdict import compare
from pytest_opprof.plugin.rounds import confirms_exact
from pytest_opprof.render.report import render_text

if TYPE_CHECKING:
    from run_helpers import PytestRunner

HERE = machine()

TESTS = """
import os

import numpy as np


def test_drawn():
    # Unseeded, as scikit-learn's make_regression() is in its tests: each call sums
    # another number of positive values, so add.reduce's FLOPs differ from call to call.
    x = np.random.standard_normal(int(np.random.randint(1_000, 20_000)))
    np.add.reduce(x[x > 0])


def test_fixed():
    n = int(os.environ.get("OPPROF_N", "48"))
    a = np.ones((n, n))
    a @ a
"""


def rounds_with_flops(flops: list[int]) -> TestSummary:
    """One matmul per round doing ``flops``, 0.2 ms of wall time each."""
    return summary_of(
        [(200.0, [Row("numpy.matmul", 1, self_cpu_time_total=50, flops=f)]) for f in flops]
    )


def test_a_figure_the_rounds_disagree_on_is_not_judged_where_it_moved() -> None:
    base = entry(rounds_with_flops([1000]), HERE)
    drawn = rounds_with_flops([1100, 1040])
    verdict = compare(drawn, base, fingerprint=HERE.fingerprint)
    assert verdict.status == "pass" and not verdict.exact_moved
    rows = {m.metric: m for m in verdict.metrics}
    assert rows["flops"].status == "not judged"
    assert [(f.metric, f.low, f.high) for f in verdict.unsteady] == [("flops", 1040, 1100)]
    # The op's figure moved with the test's: it explains, and fails nothing either.
    assert {r.kind: r.status for r in verdict.reasons}["more flops"] == "info"
    note = (
        "flops varies between rounds of the same code (1,040 and 1,100 flops in this run): "
        "not judged exactly; record baselines with --opprof-rounds 2 or more to keep its range"
    )
    assert note in verdict.notes
    assert f"note: {note}" in render_text(TestResult("t.py::test", drawn, verdict))
    assert verdict.to_json()["unsteady"] == [
        {"metric": "flops", "unit": "flops", "low": 1040, "high": 1100}
    ]
    # Rounds that agree on a change judge it, as one round does; so does a varying figure
    # within tolerance of its baseline's range, which needs no note.
    for steady in ([1100], [1100, 1100]):
        moved = compare(rounds_with_flops(steady), base, fingerprint=HERE.fingerprint)
        assert moved.failed and moved.exact_moved and moved.unsteady == ()
    within = compare(
        rounds_with_flops([990, 1000, 1010]),
        entry(rounds_with_flops([990, 1010]), HERE),
        fingerprint=HERE.fingerprint,
    )
    assert within.status == "pass" and within.unsteady == ()
    assert not any("varies between rounds" in note for note in within.notes)


def test_auto_runs_one_round_more_only_after_a_single_round_whose_exact_figure_moved() -> None:
    asked: list[int] = []

    def moved() -> bool:
        asked.append(1)
        return True

    assert confirms_exact(None, 1, moved)
    assert not confirms_exact(None, 1, lambda: False)
    assert not confirms_exact(None, 1, moved, preempted=True)
    assert not confirms_exact(None, 2, moved)  # two rounds that agree confirm a change
    assert not confirms_exact(1, 1, moved)  # a fixed setting runs its rounds, no more
    assert len(asked) == 1


@pytest.mark.slow
def test_a_gate_on_data_drawn_anew_passes_with_a_note_and_a_real_change_still_fails(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, run_pytest: PytestRunner
) -> None:
    pytester.makepyfile(test_exact=TESTS)
    # Both tests under the time floor, however busy the machine: one round each, as for
    # most tests.
    pytester.makeini("[pytest]\nopprof_min_time = 10s\n")
    run_pytest("--opprof-update-baselines").assert_outcomes(passed=2)
    assert _stored(pytester, "test_drawn")["rounds"] == 1

    gate = run_pytest("--opprof", "--opprof-report", "rep.json")
    gate.assert_outcomes(passed=2)
    drawn, fixed = _reported(pytester, "test_drawn"), _reported(pytester, "test_fixed")
    # An unchanged figure costs no round; one that moved got one more, which disagreed.
    assert fixed["rounds"] == 1 and "unsteady" not in fixed["verdict"]
    assert drawn["rounds"] == 2
    [figure] = [f for f in drawn["verdict"]["unsteady"] if f["metric"] == "flops"]
    assert figure["low"] < figure["high"]
    assert drawn["ops"]["numpy.add.reduce"]["ranges"]["flops"] == [figure["low"], figure["high"]]
    assert any(
        note.startswith(
            f"flops varies between rounds of the same code ({figure['low']:,} and "
            f"{figure['high']:,} flops in this run): not judged exactly"
        )
        for note in drawn["verdict"]["notes"]
    )
    gate.stdout.fnmatch_lines(
        [
            "figures that vary between rounds of the same code: 1 test(s), not judged exactly "
            "where they moved*",
            "  test_exact.py::test_drawn: flops *FLOP-*FLOP*",
        ]
    )

    # An update run keeps both rounds' values, as the new entry or pooled with the stored
    # round (where they overlap it): later gates judge the range.
    run_pytest("--opprof-update-baselines").assert_outcomes(passed=2)
    stored = _stored(pytester, "test_drawn")
    assert stored["rounds"] == 2 or stored["sessions"] == [1, 2]
    low, high = stored["summary"]["ranges"]["flops"]
    assert low < high

    # A change the rounds agree on (a larger matmul) fails, as before, after its second
    # round confirmed it.
    monkeypatch.setenv("OPPROF_N", "64")
    changed = run_pytest("--opprof", "--opprof-report", "rep.json")
    changed.assert_outcomes(passed=1, failed=1)
    changed.stdout.fnmatch_lines(["*flops *+137.0%*REGRESSED*"])
    fixed = _reported(pytester, "test_fixed")
    assert fixed["rounds"] == 2 and "unsteady" not in fixed["verdict"]
    assert {m["metric"]: m["status"] for m in fixed["verdict"]["metrics"]}["flops"] == "regressed"


def _stored(pytester: pytest.Pytester, name: str) -> Any:
    data = json.loads((Path(pytester.path) / "baselines" / "test_exact.json").read_text())
    return data["tests"][name]


def _reported(pytester: pytest.Pytester, name: str) -> Any:
    data = json.loads((Path(pytester.path) / "rep.json").read_text())
    return data["tests"][f"test_exact.py::{name}"]
