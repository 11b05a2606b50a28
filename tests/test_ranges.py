"""'Exact' figures that vary: the [low, high] a deterministic figure spans over
rounds and pooled update runs is stored, judged beyond, and reported."""

from __future__ import annotations

import copy
import dataclasses
import json
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from baseline_helpers import Mem, Row, entry, machine, stored_test, summary_of

from pytest_opprof.errors import BaselineError, FieldError
from pytest_opprof.gate import store
from pytest_opprof.gate.jsonio import Fields
from pytest_opprof.gate.pooling import can_pool, pool, replace_reason
from pytest_opprof.gate.results import TestResult
from pytest_opprof.gate.summary import TestSummary
from pytest_opprof.gate.verdict import Tolerances, compare, judge_exact
from pytest_opprof.render.report import render_text

if TYPE_CHECKING:
    from run_helpers import PytestRunner

HERE = machine()
REPO = Path(__file__).resolve().parents[1]


def rounds_with_flops(flops: list[int], count: int = 1) -> TestSummary:
    """One matmul per round doing ``flops``, 2 ms of wall time each."""
    return summary_of(
        [(2000.0, [Row("numpy.matmul", count, self_cpu_time_total=500, flops=f)]) for f in flops]
    )


# -- the range arithmetic -------------------------------------------------------------


def test_a_figure_that_varies_over_rounds_keeps_its_range_and_one_that_does_not_none() -> None:
    varied = rounds_with_flops([1200, 1310, 1250, 1290, 1220])
    assert varied.flops == 1250  # the low median, as before
    assert varied.ranges == {"flops": (1200, 1310)}
    assert varied.ops["numpy.matmul"].ranges == {"flops": (1200, 1310)}
    assert varied.span("flops") == (1200, 1310) and varied.span("op_count") == (1, 1)
    steady = rounds_with_flops([1200] * 5)
    assert steady.ranges == {} and steady.ops["numpy.matmul"].ranges == {}
    # Files stay small: no "ranges" where nothing varied.
    assert "ranges" not in steady.to_json()["summary"]  # type: ignore[operator]
    assert "ranges" not in json.dumps(steady.to_json())


def test_memory_and_op_counts_get_ranges_too() -> None:
    summary = summary_of(
        [
            (2000.0, [Row("numpy.add", n, self_cpu_time_total=100, self_cpu_memory_usage=8 * n)])
            for n in (3, 4, 3)
        ],
        memory=Mem(peak_bytes=4096, allocated_bytes=8192, allocations=2),
    )
    assert summary.ranges == {"op_count": (3, 4)}
    assert summary.ops["numpy.add"].ranges == {"count": (3, 4), "self_memory_bytes": (24, 32)}


def test_ranges_survive_json_and_bad_ones_name_their_field() -> None:
    varied = rounds_with_flops([1200, 1310, 1250])
    data = json.loads(json.dumps(varied.to_json()))
    assert data["summary"]["ranges"] == {"flops": [1200, 1310]}
    assert data["ops"]["numpy.matmul"]["ranges"] == {"flops": [1200, 1310]}
    assert TestSummary.from_json(Fields(data)) == varied
    for bad, message in (
        ({"flops": [1300, 1310]}, r"summary\.ranges\.flops: expected a range around the figure"),
        ({"flops": [1310, 1200]}, r"summary\.ranges\.flops: expected \[low, high\]"),
        ({"flops": [1200]}, r"summary\.ranges\.flops: expected \[low, high\]"),
        ({"speed": [1, 2]}, r"summary\.ranges\.speed: expected one of flops, op_count"),
        ({"peak_bytes": [1, 2]}, r"summary\.ranges\.peak_bytes: a range for a figure that"),
    ):
        broken = copy.deepcopy(data)
        broken["summary"]["ranges"] = bad
        with pytest.raises(FieldError, match=message):
            TestSummary.from_json(Fields(broken))


def test_judging_beyond_a_range_widened_by_its_width_and_the_tolerance() -> None:
    # (1200, 1310) is judged as (1090, 1420): a range of n values holds the next one with
    # probability (n - 1) / (n + 1) only.
    assert judge_exact((1200, 1310), 1200, 0.0) == "pass"
    assert judge_exact((1200, 1310), 1310, 0.0) == "pass"
    assert judge_exact((1200, 1310), 1420, 0.0) == "pass"
    assert judge_exact((1200, 1310), 1421, 0.0) == "regressed"
    assert judge_exact((1200, 1310), 1090, 0.0) == "pass"
    assert judge_exact((1200, 1310), 1089, 0.0) == "improved"
    assert judge_exact((1200, 1310), 1562, 0.1) == "pass"  # 1420 * 1.1 = 1562
    assert judge_exact((1200, 1310), 1563, 0.1) == "regressed"
    assert judge_exact((1200, 1310), 1420 + 4096, 0.0, floor=4096) == "pass"
    assert judge_exact((1200, 1310), 1420 + 4097, 0.0, floor=4096) == "regressed"
    # One value: what the verdict always did.
    assert judge_exact((1000, 1000), 1000, 0.0) == "pass"
    assert judge_exact((1000, 1000), 1001, 0.0) == "regressed"
    assert judge_exact((1000, 1000), 5, None) == "info"


def test_the_verdict_judges_beyond_the_range_and_says_the_figure_varies() -> None:
    base = entry(rounds_with_flops([1_200_000_000, 1_310_000_000, 1_250_000_000]), HERE)
    inside = compare(rounds_with_flops([1_300_000_000] * 3), base, fingerprint=HERE.fingerprint)
    assert inside.status == "pass"
    assert [(f.metric, f.low, f.high) for f in inside.varying] == [
        ("flops", 1_200_000_000, 1_310_000_000)
    ]
    text = render_text(TestResult("t.py::test", rounds_with_flops([1_300_000_000] * 3), inside))
    assert (
        "note: flops vary between runs (1.20 GFLOP-1.31 GFLOP in the baseline's runs): "
        "judged beyond that range widened by its width, so a change smaller than the spread "
        "cannot be seen"
    ) in text
    # Judged beyond 1.09-1.42 GFLOP: the range widened by its width.
    near = compare(rounds_with_flops([1_400_000_000] * 3), base, fingerprint=HERE.fingerprint)
    assert near.status == "pass"
    beyond = compare(rounds_with_flops([1_430_000_000] * 3), base, fingerprint=HERE.fingerprint)
    assert beyond.status == "regressed"
    assert {r.kind: r.status for r in beyond.reasons}["more flops"] == "regressed"
    steady = entry(rounds_with_flops([1_250_000_000] * 3), HERE)
    assert compare(rounds_with_flops([1_250_000_001] * 3), steady, fingerprint="x").failed
    assert compare(rounds_with_flops([1_250_000_000] * 3), steady, fingerprint="x").varying == ()


def test_a_spread_of_bytes_within_the_memory_floor_is_not_reported() -> None:
    def peaks(spread: int) -> TestSummary:
        summary = summary_of(
            [(2000.0, [Row("numpy.add", 1, 100)])] * 3,
            memory=Mem(peak_bytes=100_000, allocated_bytes=100_000, allocations=1),
        )
        return dataclasses.replace(summary, ranges={"peak_bytes": (100_000, 100_000 + spread)})

    now = peaks(0)
    wide = compare(now, entry(peaks(10_000), HERE), fingerprint="x")
    assert [(f.metric, f.low, f.high) for f in wide.varying] == [("peak memory", 100_000, 110_000)]
    assert compare(now, entry(peaks(16), HERE), fingerprint="x").varying == ()


def test_pooling_joins_ranges_and_overlapping_ranges_pool() -> None:
    first = rounds_with_flops([1000, 1040, 1020, 1010, 1030])
    second = rounds_with_flops([1030, 1060, 1050, 1045, 1055])
    stored = entry(first, HERE)
    verdict = compare(second, stored, fingerprint=HERE.fingerprint)
    # 1050 > 1040, within the range widened by its width (960-1080): the runs overlap,
    # the same varying figure, not a change.
    assert verdict.status == "pass"
    assert can_pool(second, stored, verdict, HERE.fingerprint)
    pooled = pool(second, first)
    assert pooled.flops == second.flops and pooled.ranges == {"flops": (1000, 1060)}
    assert pooled.ops["numpy.matmul"].ranges == {"flops": (1000, 1060)}
    # Apart: a real change.
    moved = rounds_with_flops([1100, 1120, 1110, 1105, 1115])
    moved_verdict = compare(moved, stored, fingerprint=HERE.fingerprint)
    assert replace_reason(moved, stored, moved_verdict, HERE.fingerprint) == (
        "flops changed: 1,000-1,040 in the baseline, 1,100-1,120 now"
    )
    # A steady figure pooled with an equal one has no range.
    steady = rounds_with_flops([1000] * 5)
    assert pool(steady, steady).ranges == {}
    # The flops tolerance widens the stored range for pooling as for the verdict.
    loose = dataclasses.replace(Tolerances(), flops=0.1)
    assert replace_reason(moved, stored, moved_verdict, HERE.fingerprint, loose) is None


def test_old_baselines_without_ranges_load_and_judge_as_before() -> None:
    # Example baselines as committed before ranges existed (schema 1, two of their tests).
    files = [REPO / "tests" / "data" / "schema1_test_linear_models.json"]
    for path in files:
        assert '"ranges"' not in path.read_text()
        entries = store.load(path)
        assert entries
        for name, stored in entries.items():
            summary = stored.summary
            assert summary.ranges == {} and all(op.ranges == {} for op in summary.ops.values())
            same = compare(summary, stored, fingerprint=stored.machine.fingerprint)
            assert same.status == "pass" and same.varying == (), name
            if summary.flops:
                more = dataclasses.replace(summary, flops=summary.flops + 1)
                assert compare(more, stored, fingerprint="other").failed, name
            # Written back (in the compact form), still no range and the same verdicts.
            again = store.loads(store.dumps(entries), path)[name]
            assert again.summary.ranges == {}
            assert compare(summary, again, fingerprint=stored.machine.fingerprint).status == "pass"
            if summary.flops:
                assert compare(more, again, fingerprint="other").failed, name


def test_a_ranges_field_in_a_file_names_the_file(tmp_path: Path) -> None:
    data = json.loads(store.dumps({"test_a": entry(rounds_with_flops([5, 7, 6]), HERE)}))
    data["tests"]["test_a"]["summary"]["ranges"]["flops"] = [6, 5]
    path = tmp_path / "test_a.json"
    path.write_text(json.dumps(data))
    with pytest.raises(BaselineError, match=r"test_a\.json.*ranges\.flops"):
        store.load(path)


# -- through the plugin -----------------------------------------------------------------


RANDOM_SIZES = """
import os
import time

import numpy as np


def test_random_sizes():
    # Unseeded: each round, and each run, draws its own size unless one is given (the
    # draw happens anyway, so that every run calls the same ops).
    n = int(np.random.randint(1000, 1100))
    n = int(os.environ.get("OPPROF_SIZE", n))
    a = np.ones((n, 64))
    b = np.ones((64, 64))
    (a @ b).sum()
    end = time.perf_counter() + 0.002
    while time.perf_counter() < end:
        pass
"""


@pytest.mark.slow
def test_a_test_with_random_sizes_records_a_range_and_is_judged_beyond_it(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, run_pytest: PytestRunner
) -> None:
    pytester.makepyfile(RANDOM_SIZES)
    # 9 rounds: two runs' sizes lie wholly apart with p = 2/C(18, 9) (5 rounds: 0.8%).
    # Times: a generous tolerance and every round judged, so that a busy machine decides
    # nothing here; this test is about FLOPs.
    args = ["--opprof-capture", "numpy", "--opprof-rounds", "9", "--opprof-max-wait=100%"]
    args += ["--opprof-time-tolerance", "300%"]
    for _ in range(3):
        run_pytest("--opprof-update-baselines", *args).assert_outcomes(passed=1)
    recorded = stored_test(pytester.path, "test_random_sizes")
    assert recorded["sessions"] == [9, 9, 9]
    figures = recorded["summary"]
    assert isinstance(figures, dict)
    low, high = figures["ranges"]["flops"]
    per_row = 2 * 64 * 64 + 64  # per row of a: the matmul's multiply-adds, the sum's adds
    assert 1000 * per_row <= low < high < 1100 * per_row
    assert low % per_row == 0 and high % per_row == 0
    assert low <= figures["flops"] <= high
    ops = recorded["ops"]
    matmul = [low // per_row * 2 * 64 * 64, high // per_row * 2 * 64 * 64]
    assert isinstance(ops, dict) and ops["numpy.matmul"]["ranges"]["flops"] == matmul

    # A run inside the range passes, and the summary says the test's gate is weaker.
    inside = (low + high) // 2 // per_row
    monkeypatch.setenv("OPPROF_SIZE", str(inside))
    result = run_pytest("--opprof", *args)
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["opprof baselines (baselines): 1 pass"])
    result.stdout.fnmatch_lines(
        [
            "figures that vary between runs: 1 test(s), judged beyond that range widened by its "
            "width, so a change smaller than the spread cannot be seen:",
            "  test_a_test_with_random_sizes*::test_random_sizes: flops *MFLOP-*MFLOP*",
        ]
    )
    # Far outside it fails, and its diff says why the range was there.
    monkeypatch.setenv("OPPROF_SIZE", "5000")
    result = run_pytest("--opprof", *args)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*flops *REGRESSED*",
            "note: flops, peak memory and allocated memory vary between runs "
            "(* MFLOP-* MFLOP; * MB-* MB; * MB-* MB in the baseline's runs): "
            "judged beyond that range widened by its width, so a change smaller than the spread "
            "cannot be seen",
        ]
    )


def test_negative_figures_are_judged_by_their_size_in_the_direction_they_move() -> None:
    # An op's self memory is negative when it frees more than it allocates (rows of
    # -7.54 MB). At 10%, moves of 7-8% either way are within tolerance.
    mb = 1_000_000
    base = -7_540_000
    assert judge_exact((base, base), -8_150_000, 0.10, 4096) == "pass"
    assert judge_exact((base, base), -7_000_000, 0.10, 4096) == "pass"
    # Beyond it, more memory (less freed) regresses and less memory improves.
    assert judge_exact((base, base), -6 * mb, 0.10, 4096) == "regressed"
    assert judge_exact((base, base), -9 * mb, 0.10, 4096) == "improved"
    # Positive figures are judged exactly as before: beyond high * (1 + tol) and the floor.
    assert judge_exact((1000, 1000), 1101, 0.10) == "regressed"
    assert judge_exact((1000, 1000), 1100, 0.10) == "pass"
    assert judge_exact((1000, 1000), 909, 0.10) == "improved"
    assert judge_exact((1000, 1000), 910, 0.10) == "pass"
