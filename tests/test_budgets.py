"""Absolute budgets (``--opprof-max-*``, the marker's ``max_*``): a test within passes, a test
beyond fails naming the op that used the budget, with or without a baseline; bad values
are refused naming the option or keyword and the accepted forms; a time measured on a
busy machine is not judged rather than failed."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING
from xml.etree import ElementTree

import pytest
from baseline_helpers import Row
from baseline_helpers import waited_rounds as _rounds

from pytest_opprof.gate.budgets import judge_time
from pytest_opprof.gate.summary import OTHER_OPS, RoundFigures, TestSummary, summarize_rounds
from pytest_opprof.gate.trim import align, new_ops, trim
from pytest_opprof.gate.verdict import Tolerances

if TYPE_CHECKING:
    from run_helpers import PytestRunner

MEMORY_TESTS = """
import pytest
import numpy as np

@pytest.mark.profile(max_memory="{limit}")
def test_big():
    a = np.zeros(250_000)  # 2 MB
    assert float(a.sum()) == 0.0
"""


@pytest.mark.parametrize(("limit", "over"), [("4 MB", False), ("1 MiB", True)])
def test_peak_memory_within_passes_and_beyond_fails_naming_the_op(
    pytester: pytest.Pytester, run_pytest: PytestRunner, limit: str, over: bool
) -> None:
    pytester.makepyfile(test_mem=MEMORY_TESTS.format(limit=limit))
    result = run_pytest(
        "--opprof",
        "--opprof-report=rep.json",
        "--junitxml=junit.xml",
        "--opprof-markdown=sum.md",
    )
    result.assert_outcomes(failed=1) if over else result.assert_outcomes(passed=1)
    verdict = json.loads((pytester.path / "rep.json").read_text())["tests"][
        "test_mem.py::test_big"
    ]["verdict"]
    (row,) = verdict["budgets"]
    assert row["budget"] == "max_memory" and row["now"] >= 2_000_000
    props = {
        p.get("name"): p.get("value")
        for p in ElementTree.parse(pytester.path / "junit.xml").iter("property")
    }
    if not over:
        assert row["status"] == "within" and verdict["status"] == "new"
        assert props["opprof_budget_max_memory"].startswith("peak memory")
        return
    assert row["status"] == "over" and verdict["status"] == "regressed"
    assert row["ops"][0]["op"] == "numpy.zeros"
    result.stdout.fnmatch_lines(
        [
            "opprof OVER BUDGET: test_mem.py::test_big",
            "@@ budgets @@",
            "+ peak memory * budget 1.00 MB (max_memory)  OVER BUDGET",
            "    used by numpy.zeros 1.91 MB",
        ]
    )
    assert props["opprof_verdict"] == "regressed"
    assert (
        "over its budget of 1.00 MB (max_memory): numpy.zeros" in props["opprof_budget_max_memory"]
    )
    markdown = (pytester.path / "sum.md").read_text()
    assert "over its budget of 1.00 MB (max\\_memory): `numpy.zeros`" in markdown


LEAK_TESTS = """
import os
import pytest
import numpy as np

HELD = []

@pytest.mark.profile(max_leaked=os.environ.get("LEAK_BUDGET"))
def test_cache():
    # A temporary larger than the leak: what an op allocated and did not free itself
    # (its net bytes) would name np.arange; the blocks still held name np.zeros.
    scratch = np.arange(300_000.0)
    assert np.sort(scratch)[-1] > 0
    if os.environ.get("LEAK"):
        HELD.append(np.zeros(100_000))  # 800 kB kept by the module
"""


def test_a_leak_beyond_its_budget_names_the_op_that_allocated_it(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, run_pytest: PytestRunner
) -> None:
    pytester.makepyfile(test_leak=LEAK_TESTS)
    monkeypatch.setenv("LEAK", "1")
    monkeypatch.setenv("LEAK_BUDGET", "1 MB")
    run_pytest("--opprof").assert_outcomes(passed=1)
    monkeypatch.setenv("LEAK_BUDGET", "0 B")
    result = run_pytest("--opprof")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "+ leaked memory     781.25 KB       budget 0 B (max_leaked)  OVER BUDGET",
            "    used by numpy.zeros 781.25 KB",
        ]
    )
    assert "[other ops]" not in result.stdout.str()
    assert "numpy.arange" not in result.stdout.str().split("@@ budgets @@")[1].split("note:")[0]


TRIMMED_LEAK_TESTS = """
import os
import numpy as np

HELD = []

def test_cache():
    data = np.random.default_rng(0).random(200_000)
    np.sort(data)
    small = data[:16]
    assert np.isfinite(small).all() and small.max() <= 1.0 and small.min() >= 0.0
    np.abs(small)
    np.mean(small)
    if os.environ.get("LEAK"):
        HELD.append(np.zeros(100_000))  # 800 kB kept by the module
"""


def test_a_new_leaking_op_is_named_against_a_trimmed_baseline_not_other_ops(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, run_pytest: PytestRunner
) -> None:
    """The baseline keeps the ops that explain its test and folds the rest; the comparison
    folded the new op into ``[other ops]`` too, which then took the blame for the leak."""
    pytester.makepyfile(test_leak=TRIMMED_LEAK_TESTS)
    run_pytest("--opprof-update-baselines").assert_outcomes(passed=1)
    stored = json.loads((pytester.path / "baselines" / "test_leak.json").read_text())
    assert "[other ops]" in stored["tests"]["test_cache"]["ops"]
    monkeypatch.setenv("LEAK", "1")
    result = run_pytest("--opprof")
    result.assert_outcomes(failed=1)
    # numpy.zeros ran in the baseline too (numpy calls it), folded: the growth of the
    # folded ops names it.  An op the baseline never ran is named as itself (new_ops).
    result.stdout.fnmatch_lines(
        [
            "+ leaked memory     781.25 KB       new  (tolerance 10%)  REGRESSED",
            "@@ ops, by impact @@",
            "+ [[]other ops[]]  more memory (most in numpy.zeros): 781.2? KB*REGRESSED",
            "note: the leaked memory was allocated by numpy.zeros (800,000 bytes)",
        ]
    )


RENAMED_LEAK_TESTS = """
import os
import numpy as np

HELD = []

def test_cache():
    data = np.random.default_rng(0).random(200_000)
    np.sort(data)
    small = data[:16]
    assert np.isfinite(small).all() and small.max() <= 1.0 and small.min() >= 0.0
    np.abs(small)
    if os.environ.get("LEAK"):
        HELD.append(np.arange(100_000.0))  # 800 kB kept by the module, in place of the mean
    else:
        np.mean(small)
"""


def test_a_leaking_op_in_place_of_one_a_trimmed_baseline_folded_is_named_not_other_ops(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, run_pytest: PytestRunner
) -> None:
    """The baseline folded ``numpy.mean`` with the other small ops; now ``numpy.arange``
    runs in its place and leaks.  As many ops are folded as the baseline folded, so none is
    provably new (``trim.new_ops``), and the growth was blamed on ``[other ops]``: the op
    alone holds it, whatever the baseline's ``[other ops]`` held, so it is named."""
    pytester.makepyfile(test_leak=RENAMED_LEAK_TESTS)
    run_pytest("--opprof-update-baselines").assert_outcomes(passed=1)
    stored = json.loads((pytester.path / "baselines" / "test_leak.json").read_text())
    assert "numpy.mean" not in stored["tests"]["test_cache"]["ops"]
    monkeypatch.setenv("LEAK", "1")
    result = run_pytest("--opprof", "--opprof-max-leaked=0 B", "--opprof-report=rep.json")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "+ leaked memory     781.25 KB       new  (tolerance 10%)  REGRESSED",
            "@@ ops, by impact @@",
            "- numpy.arange  more memory (folded in the baseline: at most its [[]other ops[]]): *",
            "+ numpy.arange  more memory (folded in the baseline: at most its [[]other ops[]]): "
            "781.25 KB*REGRESSED",
            "*used by numpy.arange 781.25 KB",
        ]
    )
    assert "[other ops]  more memory" not in result.stdout.str()
    reasons = json.loads((pytester.path / "rep.json").read_text())["tests"][
        "test_leak.py::test_cache"
    ]["verdict"]["reasons"]
    (grew,) = (r for r in reasons if r["kind"] == "more memory")
    assert (grew["op"], grew["now"], grew["status"]) == ("numpy.arange", 800_000, "regressed")
    assert (
        grew["baseline"] == stored["tests"]["test_cache"]["ops"]["[other ops]"]["self_memory_bytes"]
    )


FLOPS_TESTS = """
import pytest
import numpy as np

def test_unmarked():
    a = np.ones((20, 20))
    assert (a @ a).sum() > 0

@pytest.mark.profile(max_flops="1 GFLOP")
def test_marked():
    a = np.ones((20, 20))
    assert (a @ a).sum() > 0
"""


def test_the_marker_overrides_the_option_for_its_test(
    pytester: pytest.Pytester, run_pytest: PytestRunner
) -> None:
    pytester.makepyfile(test_flops=FLOPS_TESTS)
    result = run_pytest("--opprof", "--opprof-max-flops=1 kFLOP")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        [
            "opprof OVER BUDGET: test_flops.py::test_unmarked",
            "+ flops             16.40 kFLOP     budget 1.00 kFLOP (max_flops)  OVER BUDGET",
            "    used by numpy.matmul 16.00 kFLOP*",
        ]
    )
    assert "OVER BUDGET: test_flops.py::test_marked" not in result.stdout.str()


def test_the_ini_form_sets_a_budget_and_a_baseline_does_not_lift_it(
    pytester: pytest.Pytester, run_pytest: PytestRunner
) -> None:
    pytester.makepyfile(test_mem=MEMORY_TESTS.format(limit=None).replace('"None"', "None"))
    run_pytest("--opprof-update-baselines").assert_outcomes(passed=1)
    pytester.makeini("[pytest]\nopprof_max_memory = 512 KiB\n")
    result = run_pytest("--opprof")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        ["opprof OVER BUDGET: test_mem.py::test_big", "*budget 512.00 KB (max_memory)*"]
    )


TIME_TESTS = """
import numpy as np

def test_sorts():
    a = np.random.default_rng(0).random(200_000)
    for _ in range(3):
        np.sort(a)
"""


@pytest.mark.slow
def test_a_time_budget_is_judged_on_rounds_and_names_the_op(
    pytester: pytest.Pytester, run_pytest: PytestRunner
) -> None:
    pytester.makepyfile(test_time=TIME_TESTS)
    # Every round judged (100%), so that a busy machine cannot make it "not judged".
    fast = run_pytest("--opprof", "--opprof-max-time=10 s", "--opprof-report=rep.json")
    fast.assert_outcomes(passed=1)
    over = run_pytest(
        "--opprof", "--opprof-max-time=100us", "--opprof-max-wait=100%", "--opprof-report=rep.json"
    )
    over.assert_outcomes(failed=1)
    over.stdout.fnmatch_lines(
        [
            "+ wall time * budget 100.000us (max_time)  OVER BUDGET",
            "    used by numpy.ndarray.sort *",
            "    judged on the median wall time of 9 clean rounds",
        ]
    )
    (row,) = json.loads((pytester.path / "rep.json").read_text())["tests"][
        "test_time.py::test_sorts"
    ]["verdict"]["budgets"]
    # The first round was over: auto rounds repeated it, and confirmed it.
    assert row["status"] == "over" and row["now"] > 100_000


def test_a_busy_machine_leaves_a_time_budget_not_judged_rather_than_failed() -> None:
    tol = Tolerances()
    limit_ns = 5_000_000
    # 6 ms of work each round, and every round waited 22-40 ms for a CPU (over 80% of
    # it: not even work time is judged), so nothing says whether it is over.
    waits = [30.0, 25.0, 28.0, 40.0, 22.0]
    busy = judge_time(_rounds([6.0] * 5, waits), limit_ns, tol)
    assert busy.status == "not judged"
    assert "the machine was busy" in busy.note and "5 of 5 rounds waited" in busy.note
    # The same waits with 4 ms of work: a round's work within its budget says it is.
    assert judge_time(_rounds([4.0] * 5, waits), limit_ns, tol).status == "within"
    # Waits of 50%: judged on work time, within.
    worked = judge_time(_rounds([4.0] * 5, [4.0, 4.5, 3.8, 4.2, 4.1]), limit_ns, tol)
    assert worked.status == "within" and worked.note.startswith("judged on the median work time")
    # The same work over its budget on work time fails.
    slow = judge_time(_rounds([6.0] * 5, [6.0, 6.5, 5.8, 6.2, 6.1]), limit_ns, tol)
    assert slow.status == "over" and slow.ops == (("kernel", slow.ops[0][1]),)
    # One round: within when its work was, never over on one round.
    assert judge_time(_rounds([4.0], [0.0]), limit_ns, tol).status == "within"
    one = judge_time(_rounds([6.0], [0.0]), limit_ns, tol)
    assert one.status == "not judged" and "1 round, 3 are needed" in one.note


@pytest.mark.parametrize(
    ("option", "bad", "forms"),
    [
        ("--opprof-max-memory", "2 MBs", "units B, kB, MB, GB, KiB, MiB, GiB"),
        ("--opprof-max-memory", "-1 MB", "not negative"),
        ("--opprof-max-memory", "lots", "a size such as 2 MB"),
        ("--opprof-max-leaked", "1 KFLOP", "unknown unit 'kflop'"),
        ("--opprof-max-flops", "1 GB", "units FLOP, kFLOP, MFLOP, GFLOP, TFLOP"),
        ("--opprof-max-flops", "nan GFLOP", "a count such as 1 GFLOP"),
        ("--opprof-max-time", "5 minutes", "units ns, us, ms, s"),
        ("--opprof-max-time", "-5ms", "not negative|units ns"),
    ],
)
def test_a_bad_budget_option_names_the_option_and_its_forms(
    run_pytest: PytestRunner, option: str, bad: str, forms: str
) -> None:
    result = run_pytest.inprocess("--opprof", f"{option}={bad}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert f"argument {option}: expected" in result.stderr.str()
    assert any(form in result.stderr.str() for form in forms.split("|"))


@pytest.mark.parametrize(
    ("keyword", "bad"),
    [
        ("max_memory", "'2 parsecs'"),
        ("max_leaked", "True"),
        ("max_flops", "'x'"),
        ("max_time", "'-1 s'"),
    ],
)
def test_a_bad_marker_budget_errors_at_collection_naming_the_keyword(
    pytester: pytest.Pytester, run_pytest: PytestRunner, keyword: str, bad: str
) -> None:
    pytester.makepyfile(
        f"import pytest\n\n@pytest.mark.profile({keyword}={bad})\ndef test_x():\n    pass\n"
    )
    # Without --opprof too: markers are checked at collection in every run.
    result = run_pytest.inprocess()
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines([f"*@pytest.mark.profile({keyword}=...): expected*"])


def test_a_bad_ini_budget_names_the_ini_key(
    pytester: pytest.Pytester, run_pytest: PytestRunner
) -> None:
    pytester.makeini("[pytest]\nopprof_max_time = soon\n")
    result = run_pytest.inprocess("--opprof")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "ini setting opprof_max_time = 'soon': expected a duration" in result.stderr.str()


def _summary(ops: dict[str, tuple[float, int]]) -> TestSummary:
    """One round of ops, each (self time µs, self bytes)."""
    rows = [
        Row(key, 1, self_cpu_time_total=us, cpu_time_total=us, self_cpu_memory_usage=n)
        for key, (us, n) in ops.items()
    ]
    total_us = sum(us for us, _ in ops.values())
    return summarize_rounds(
        [RoundFigures.from_events(rows, wall_time_ns=round(total_us * 1000), cpu_time_ns=0)]
    )


def test_an_op_a_trimmed_baseline_never_ran_stays_named_where_the_digest_proves_it() -> None:
    small = {f"numpy.tiny{i}": (1.0, 0) for i in range(8)}
    base = trim(_summary({"numpy.sort": (1000.0, 0), **small}))
    assert OTHER_OPS in base.ops and "numpy.tiny0" not in base.ops
    now = _summary({"numpy.sort": (1000.0, 0), **small, "numpy.full": (1.0, 800_000)})
    aligned, aligned_base = align(now, base)
    # Before: numpy.full was folded with the tiny ops, and [other ops] took its bytes.
    assert new_ops(now, base) == {"numpy.full"}
    assert aligned.ops["numpy.full"].self_memory_bytes == 800_000
    assert aligned.left_out == aligned_base.left_out  # [other ops] holds the same ops
    # A new op that only takes time stays folded: it explains, as [other ops].
    timed = _summary({"numpy.sort": (1000.0, 0), **small, "numpy.view": (5.0, 0)})
    assert "numpy.view" not in align(timed, base)[0].ops
    # An op the baseline folded is not taken for a new one.
    again = _summary({"numpy.sort": (1000.0, 0), **small})
    assert new_ops(again, base) == set()
