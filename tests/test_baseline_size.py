"""Baselines that fit in a repository: the compact form (schema 2) and the ops it keeps."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from baseline_helpers import Mem, Row, entry, machine, stored_test, summary_of

from pytest_opprof.errors import BaselineError
from pytest_opprof.gate import store
from pytest_opprof.gate.compact import encode_times
from pytest_opprof.gate.pooling import pool, replace_reason
from pytest_opprof.gate.summary import OTHER_OPS, TestSummary, TimeStats
from pytest_opprof.gate.trim import MAX_KEPT_OPS, align, kept_keys, trim
from pytest_opprof.gate.verdict import compare

if TYPE_CHECKING:
    from run_helpers import PytestRunner

REPO = Path(__file__).resolve().parents[1]
SCHEMA1 = REPO / "tests" / "data" / "schema1_test_linear_models.json"
HERE = machine()


def many_ops(
    slow: str = "", factor: float = 1.0, rounds: int = 5, scale: float = 1.0
) -> TestSummary:
    """A 2 ms test: one 1.2 ms solve with FLOPs, one big allocation, 30 helpers of 10 µs;
    ``slow`` names an op made ``factor`` times slower; ``scale`` multiplies every time."""
    rows = [
        Row("numpy.linalg.solve", 1, self_cpu_time_total=1200.0 * scale, flops=9_000_000),
        Row("numpy.empty", 2, self_cpu_time_total=5.0 * scale, self_cpu_memory_usage=800_000),
    ]
    rows += [Row(f"numpy.helper{i:02d}", 3, self_cpu_time_total=10.0 * scale) for i in range(30)]
    rows = [
        dataclasses.replace(r, self_cpu_time_total=r.self_cpu_time_total * factor)
        if r.key == slow
        else r
        for r in rows
    ]
    extra = sum(r.self_cpu_time_total for r in rows) - 1505.0 * scale
    mem = Mem(peak_bytes=800_000, allocated_bytes=800_000, allocations=2)
    return summary_of([(2000.0 * scale + extra + i, rows) for i in range(rounds)], memory=mem)


def test_times_are_one_string_of_rounds_in_one_unit() -> None:
    assert encode_times([1_913_456, 1_370_000, 999_600]) == "1.91 1.37 1 ms"
    assert encode_times([12_345, 950, 20_000]) == "12.3 0.95 20 us"
    assert encode_times([0, 0, 0]) == "0 ns"  # every round alike: one value
    # The unit fits the median round: an outlier is a whole number of it, still exact.
    assert encode_times([28_400, 12_100_000, 29_800]) == "28.4 12100 29.8 us"
    assert encode_times([5, 2_000_000_000_000, 7]) == "5 2000000000000 7 ns"


def test_times_read_back_as_written(tmp_path: Path) -> None:
    waits = [0, 9_900, 8_010_000, 8_460, 123_456_789_012]
    summary = dataclasses.replace(many_ops(), wait_time=TimeStats.from_samples(waits))
    path = tmp_path / "test_a.json"
    store.update(path, {"test_x": entry(summary)})
    assert '"wait_time": "0 9.9 8010 8.46 123000000 us"' in path.read_text()
    back = store.load(path)["test_x"].summary.wait_time
    assert back is not None and back.samples_ns == (0, 9_900, 8_010_000, 8_460, 123_000_000_000)


def test_a_pooled_baseline_of_many_ops_fits_in_2_kb_and_round_trips(tmp_path: Path) -> None:
    summary = many_ops(rounds=15)
    path = tmp_path / "test_a.json"
    store.update(path, {f"test_{i}": entry(summary) for i in range(10)})
    assert path.stat().st_size / 10 <= 2048
    back = store.load(path)["test_3"].summary
    assert set(back.ops) == {"numpy.linalg.solve", "numpy.empty", OTHER_OPS}
    assert back.left_out is not None and back.left_out.keys == 30
    # Statistics are recomputed from the stored samples, rounded to 3 significant digits.
    assert back.wall_time.median_ns == round(summary.wall_time.median_ns, -4)
    other = back.ops[OTHER_OPS]
    assert other.count == 90 and other.self_cpu_time.median_ns == 300_000
    # Loading and writing again changes nothing (the file is stable under updates).
    assert not store.update(path, store.load(path))


def test_ops_are_kept_by_impact_and_capped() -> None:
    summary = many_ops()
    assert kept_keys(summary) == ["numpy.empty", "numpy.linalg.solve"]
    # A flat test (every op 3% of its time) keeps its top ops, at most the cap.
    flat = summary_of(
        [(1000.0, [Row(f"op{i:02d}", 1, self_cpu_time_total=30.0) for i in range(30)])]
    )
    assert len(kept_keys(flat)) == MAX_KEPT_OPS
    # A test of tiny ops keeps its top op, so a baseline always names one.
    tiny = summary_of([(1000.0, [Row("a", 1, self_cpu_time_total=1.0), Row("b", 1)])])
    assert kept_keys(tiny) == ["a"]


def test_a_left_out_op_shows_as_other_ops_a_kept_one_by_name() -> None:
    stored = entry(trim(many_ops()), HERE)
    same = compare(many_ops(), stored, fingerprint=HERE.fingerprint)
    assert same.status == "pass" and not [r for r in same.reasons if r.kind == "new"]
    # A helper 40x slower (0.4 ms more in a 2 ms test): the test regressed, and the
    # reason is the left-out ops, since the baseline cannot name it.
    helper = compare(many_ops("numpy.helper07", 40), stored, fingerprint=HERE.fingerprint)
    assert helper.failed
    assert [r.op for r in helper.reasons if r.status == "regressed"] == [OTHER_OPS]
    solve = compare(many_ops("numpy.linalg.solve", 1.5), stored, fingerprint=HERE.fingerprint)
    assert solve.failed and solve.reasons[0].op == "numpy.linalg.solve"
    # An untrimmed baseline names the helper itself.
    full = entry(many_ops(), HERE)
    named = compare(many_ops("numpy.helper07", 40), full, fingerprint=HERE.fingerprint)
    assert [r.op for r in named.reasons if r.status == "regressed"] == ["numpy.helper07"]


def test_other_ops_of_other_members_explain_but_fail_no_test_alone() -> None:
    stored = entry(trim(many_ops(scale=10)), HERE)  # a 20 ms test, [other ops] 3 ms
    # A helper 10x slower (+0.9 ms, 4.5% of the test, wall within tolerance): the same
    # ops folded, so [other ops] is judged like an op and fails the test alone.
    slowed = many_ops("numpy.helper07", 10, scale=10)
    helper = compare(slowed, stored, fingerprint=HERE.fingerprint)
    assert helper.failed
    assert [r.op for r in helper.reasons if r.status == "regressed"] == [OTHER_OPS]
    # The same test with indexing newly captured (a plugin upgrade): 2 ms of the test's
    # own code now inside 100 captured ops, the test's wall time unchanged.  [other ops]
    # grew by 10% of the test, but it holds other ops than the baseline's: not a reason
    # to fail, and the note says why.
    rows = [
        Row("numpy.linalg.solve", 1, self_cpu_time_total=12000.0, flops=9_000_000),
        Row("numpy.empty", 2, self_cpu_time_total=50.0, self_cpu_memory_usage=800_000),
    ]
    rows += [Row(f"numpy.helper{i:02d}", 3, self_cpu_time_total=100.0) for i in range(30)]
    rows.append(Row("numpy.ndarray.__getitem__", 100, self_cpu_time_total=2000.0))
    mem = Mem(peak_bytes=800_000, allocated_bytes=800_000, allocations=2)
    upgraded = summary_of([(20000.0 + i, rows) for i in range(5)], memory=mem)
    verdict = compare(upgraded, stored, fingerprint=HERE.fingerprint)
    assert verdict.status == "pass", verdict.reasons
    grew = [r for r in verdict.reasons if r.op == OTHER_OPS and r.kind == "slower"]
    assert grew and grew[0].status == "info" and grew[0].change > 0.1  # type: ignore[operator]
    assert any("holds other ops than the baseline's" in n for n in verdict.notes)


def test_a_trimmed_baseline_pools_until_other_ops_run() -> None:
    stored = entry(trim(many_ops()), HERE)
    now = many_ops()
    verdict = compare(now, stored, fingerprint=HERE.fingerprint)
    assert replace_reason(now, stored, verdict, HERE.fingerprint) is None
    pooled = pool(now, stored.summary)
    assert pooled.rounds == 10 and pooled.left_out == stored.summary.left_out
    # One helper renamed: the same count of ops, the same kept ones, another set folded.
    renamed = dataclasses.replace(
        now,
        ops={
            ("numpy.renamed" if k == "numpy.helper07" else k): dataclasses.replace(op, key=k)
            for k, op in now.ops.items()
        },
    )
    verdict = compare(renamed, stored, fingerprint=HERE.fingerprint)
    assert replace_reason(renamed, stored, verdict, HERE.fingerprint) == "other ops ran"
    folded, _ = align(renamed, stored.summary)
    assert folded.left_out is not None and folded.left_out != stored.summary.left_out


def test_schema1_baselines_load_judge_and_shrink(tmp_path: Path) -> None:
    old = store.load(SCHEMA1)
    assert {e.schema for e in old.values()} == {1}
    new = store.loads(store.dumps(old), "rewritten")
    assert SCHEMA1.stat().st_size / len(old) > 20_000
    assert len(store.dumps(old)) / len(old) <= 2048
    for name, stored in old.items():
        s = stored.summary
        cases = {
            "same": s,
            "more flops": dataclasses.replace(s, flops=s.flops + 1),
            "slower": dataclasses.replace(
                s, wall_time=dataclasses.replace(s.wall_time, median_ns=s.wall_time.median_ns * 2)
            ),
        }
        for case, now in cases.items():
            before = compare(now, stored, fingerprint=stored.machine.fingerprint, force_time=True)
            after = compare(now, new[name], fingerprint=stored.machine.fingerprint, force_time=True)
            assert before.status == after.status, (name, case)


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("wall_time", "1.2 1.3 fortnights", "per-round times such as"),
        ("wall_time", "1.2 ms", None),  # one value for every round is fine
        ("wall_time", "1.2 1.3 ms", "one time per round"),
        ("wall_time", "-1 2 3 ms", "per-round times such as"),
        ("cpu_time", 12, "expected a string"),
    ],
)
def test_a_bad_times_string_names_file_and_field(
    tmp_path: Path, field: str, value: object, message: str | None
) -> None:
    path = tmp_path / "test_a.json"
    store.update(path, {"test_x": entry(many_ops(rounds=3))})
    data = json.loads(path.read_text())
    data["tests"]["test_x"]["summary"][field] = value
    path.write_text(json.dumps(data))
    if message is None:
        assert store.load(path)["test_x"].summary.wall_time.samples_ns == (1_200_000,) * 3
        return
    with pytest.raises(BaselineError, match=rf"test_a\.json.*summary\.{field}.*{message}"):
        store.load(path)


def test_left_out_must_match_the_ops(tmp_path: Path) -> None:
    path = tmp_path / "test_a.json"
    store.update(path, {"test_x": entry(many_ops())})
    data = json.loads(path.read_text())
    del data["tests"]["test_x"]["left_out"]
    path.write_text(json.dumps(data))
    with pytest.raises(BaselineError, match=r"left_out: expected exactly when the ops hold"):
        store.load(path)
    data["tests"]["test_x"]["left_out"] = {"ops": 30, "digest": "xyz"}
    path.write_text(json.dumps(data))
    with pytest.raises(BaselineError, match=r"left_out\.digest: expected 8 hex digits"):
        store.load(path)


def test_an_unknown_machine_id_is_named(tmp_path: Path) -> None:
    path = tmp_path / "test_a.json"
    store.update(path, {"test_x": entry(many_ops())})
    data = json.loads(path.read_text())
    data["tests"]["test_x"]["machine"] = "deadbeef"
    path.write_text(json.dumps(data))
    with pytest.raises(BaselineError, match=r"test_x\.machine: no machine 'deadbeef'"):
        store.load(path)


POOLED_SUITE = """
import numpy as np

def test_many_ops():
    a = np.random.default_rng(0).standard_normal((60, 60)) + 60 * np.eye(60)
    x = np.linalg.solve(a, a.sum(axis=1))
    np.testing.assert_allclose(a @ x, a.sum(axis=1))  # dozens of small numpy helpers
"""


def test_update_runs_keep_few_ops_and_pool_through_them(
    pytester: pytest.Pytester, run_pytest: PytestRunner
) -> None:
    pytester.makepyfile(test_pooled=POOLED_SUITE)
    args = ["--opprof-update-baselines", "--opprof-capture", "numpy", "--opprof-rounds", "3"]
    # Pooling, not time, is tested: a tolerance no wait for a CPU (another xdist worker) reaches.
    args += ["--opprof-max-wait=100%", "--opprof-time-tolerance", "100000%", "-p", "no:randomly"]
    run_pytest(*args).assert_outcomes(passed=1)
    first = stored_test(pytester.path, "test_many_ops")
    ops = first["ops"]
    assert isinstance(ops, dict) and OTHER_OPS in ops and "numpy.linalg.solve" in ops
    assert len(ops) <= MAX_KEPT_OPS + 1 and first["left_out"]["ops"] >= 10  # type: ignore[index]
    # The next run folds the same left-out ops, so it pools with the trimmed baseline.
    run_pytest(*args).stdout.fnmatch_lines(["1 test(s) showed no real change*"])
    second = stored_test(pytester.path, "test_many_ops")
    assert second["sessions"] == [3, 3] and second["ops"].keys() == ops.keys()  # type: ignore[attr-defined]
    assert second["left_out"] == first["left_out"]
