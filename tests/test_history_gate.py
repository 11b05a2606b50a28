"""The gate with ``--opprof-history``: real runs at real commits write a real history, and
a figure that crept by steps each under tolerance fails the test, naming the commits;
an unchanged series never fails; runs of another machine, or a damaged file, are said
and not judged against; ``--opprof-update-baselines`` keeps working beside a history."""

from __future__ import annotations

import datetime
import json
from pathlib import Path

import numpy as np
import pytest
from baseline_helpers import Row, summary_of, waited_rounds
from history_helpers import SUITE
from history_helpers import git as _git
from run_helpers import PytestRunner

from pytest_opprof.__main__ import main
from pytest_opprof.gate.summary import TestSummary
from pytest_opprof.gate.tolerance import Tolerances
from pytest_opprof.history.gate import HistoryGate, gate_lines
from pytest_opprof.history.store import RunWriter, encode_arrays, read_run, write_run

MATMUL = "test_suite.py::test_matmul"


def _flops(n: int) -> int:
    return 2 * n**3


def _args(history: Path, *more: str) -> list[str]:
    # FLOPs may move 10% a commit (each step below is 8-10%); memory is left to its own
    # tolerance far away, so the lines below are the FLOPs' alone.
    return [
        "--opprof",
        "--opprof-capture",
        "numpy",
        f"--opprof-history={history}",
        "--opprof-flops-tolerance=10%",
        "--opprof-memory-tolerance=100%",
        "-p",
        "no:randomly",
        *more,
    ]


def _at_commit(pytester: pytest.Pytester, n: int, day: int) -> str:
    """Commit the suite with a matmul of size ``n``; its sha."""
    (pytester.path / "knob.json").write_text(json.dumps({"n": n}))
    _git(pytester.path, "add", "-A", day=day)
    _git(pytester.path, "commit", "-q", "--allow-empty", "-m", f"n={n}", day=day)
    return _git(pytester.path, "rev-parse", "HEAD")


@pytest.fixture
def project(pytester: pytest.Pytester) -> tuple[pytest.Pytester, Path]:
    """The suite in a git repository, and a history directory beside it (outside the
    checkout, so writing it leaves the commit clean)."""
    pytester.makepyfile(test_suite=SUITE)
    _git(pytester.path, "init", "-q", "-b", "main")
    return pytester, pytester.path.parent / f"{pytester.path.name}-history"


@pytest.mark.slow
def test_flops_that_crept_by_steps_under_tolerance_fail_naming_the_commits(
    project: tuple[pytest.Pytester, Path], run_pytest: PytestRunner
) -> None:
    pytester, history = project
    shas = {}
    for day, n in enumerate((32, 32, 33)):  # +9.7%: within the 10% tolerance
        shas[day] = _at_commit(pytester, n, day)
        run_pytest(*_args(history, "-p", "no:xdist")).assert_outcomes(passed=2)
    shas[3] = _at_commit(pytester, 34, 3)  # +9.4% again, +20% since n=32
    result = run_pytest(*_args(history, "-p", "no:xdist"))
    result.assert_outcomes(passed=1, failed=1)
    grew = f"{_flops(34) / _flops(32) - 1:+.0%}"
    line = (
        f"{MATMUL}: flops {grew} ({_flops(32):,} -> {_flops(34):,}) against its level before "
        f"{shas[2][:7]} (2026-11-03): stepped +10% at {shas[2][:7]}, +9% in this run; "
        "op numpy.matmul"
    )
    result.stdout.fnmatch_lines(
        [
            f"opprof CREPT: {MATMUL}: beyond tolerance against its history's level before *",
            f"  {line}",
            "*crept*test_suite.py::test_matmul",
            "opprof: history: judged against 3 run(s) of this machine in *: "
            "1 test(s) crept beyond tolerance",
        ]
    )
    assert "test_add" not in "\n".join(x for x in result.outlines if "against its level" in x)
    # The failed run is in the history (its body passed): the next commit's run names
    # both steps, and pytest-xdist workers reach the same verdict.
    shas[4] = _at_commit(pytester, 35, 4)
    result = run_pytest(*_args(history, "-n", "2"))
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        [
            f"*{MATMUL}: flops +31% ({_flops(32):,} -> {_flops(35):,}) against its level "
            f"before {shas[2][:7]} (2026-11-03): stepped +10% at {shas[2][:7]}, +9% at "
            f"{shas[3][:7]}, +9% in this run; op numpy.matmul",
        ]
    )


@pytest.mark.slow
def test_an_unchanged_series_never_fails(
    project: tuple[pytest.Pytester, Path], run_pytest: PytestRunner
) -> None:
    pytester, history = project
    _at_commit(pytester, 48, 0)
    for _ in range(6):
        result = run_pytest(*_args(history, "-p", "no:xdist", "--opprof-rounds=3"))
        result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(
        ["opprof: history: judged against 5 run(s) of this machine in *: 0 test(s) crept *"]
    )
    # A step beyond tolerance at one commit is the baseline gate's to judge, not a creep.
    _at_commit(pytester, 64, 1)
    run_pytest(*_args(history, "-p", "no:xdist")).assert_outcomes(passed=2)
    run_pytest(*_args(history, "-p", "no:xdist")).assert_outcomes(passed=2)


def _copy_as_other_machine(path: Path, directory: Path) -> Path:
    """``path``'s run as measured on another machine (its fingerprint changed)."""
    with np.load(path) as z:
        arrays = {name: z[name] for name in z.files}
    meta = json.loads(arrays["meta"].tobytes())
    meta["machine"]["fingerprint"] = "0123456789abcdef"
    arrays["meta"] = np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8)
    return write_run(directory, encode_arrays(arrays), "other-machine.npz")


def test_runs_of_another_machine_are_not_judged_against(
    project: tuple[pytest.Pytester, Path], run_pytest: PytestRunner
) -> None:
    pytester, history = project
    ran = pytester.path.parent / f"{pytester.path.name}-ran"
    _at_commit(pytester, 32, 0)
    run_pytest(*_args(ran, "-p", "no:xdist")).assert_outcomes(passed=2)
    (first,) = ran.glob("*.npz")
    _copy_as_other_machine(first, history)
    _at_commit(pytester, 34, 1)  # +20% FLOPs: a creep, were the run this machine's
    result = run_pytest(*_args(history, "-p", "no:xdist"))
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(
        [
            "opprof: history: not judged against history: none of its 1 run(s) was "
            "measured on this machine (fingerprint *)"
        ]
    )


@pytest.mark.slow
def test_a_damaged_history_file_is_named_and_skipped(
    project: tuple[pytest.Pytester, Path], run_pytest: PytestRunner
) -> None:
    pytester, history = project
    for day, n in enumerate((32, 33)):
        _at_commit(pytester, n, day)
        run_pytest(*_args(history, "-p", "no:xdist")).assert_outcomes(passed=2)
    damaged = history / "damaged.npz"
    damaged.write_bytes(next(history.glob("*.npz")).read_bytes()[:300])
    _at_commit(pytester, 34, 2)
    result = run_pytest(*_args(history, "-p", "no:xdist"))
    result.assert_outcomes(passed=1, failed=1)  # judged against the two readable runs
    result.stdout.fnmatch_lines(
        [
            f"opprof: history: skipped {damaged}: damaged (*",
            "opprof: history: judged against 2 run(s) of this machine *: 1 test(s) crept *",
        ]
    )
    assert "Traceback" not in result.stdout.str()


@pytest.mark.slow
def test_update_baselines_beside_a_history_accepts_a_replaced_baseline(
    project: tuple[pytest.Pytester, Path], run_pytest: PytestRunner
) -> None:
    pytester, history = project
    _at_commit(pytester, 32, 0)
    run_pytest(*_args(history, "-p", "no:xdist", "--opprof-update-baselines")).assert_outcomes(
        passed=2
    )
    _at_commit(pytester, 33, 1)
    run_pytest(*_args(history, "-p", "no:xdist")).assert_outcomes(passed=2)
    _at_commit(pytester, 35, 2)
    failed = run_pytest(*_args(history, "-p", "no:xdist"))
    failed.assert_outcomes(passed=1, failed=1)  # the baseline's FLOPs and the history's
    failed.stdout.fnmatch_lines(["opprof CREPT: *test_matmul*"])
    # An update fails nothing, replaces the baseline that changed for real, and says so
    # in its history run: the history gate judges the test from that run on.
    before = set(history.glob("*.npz"))
    update = run_pytest(*_args(history, "-p", "no:xdist", "--opprof-update-baselines"))
    update.assert_outcomes(passed=2)
    assert (pytester.path / "baselines" / "test_suite.json").is_file()
    # The update's own file: runs within one second sort by their random suffix.
    (last,) = set(history.glob("*.npz")) - before
    assert read_run(last).meta["replaced"] == [MATMUL]
    after = run_pytest(*_args(history, "-p", "no:xdist"))
    after.assert_outcomes(passed=2)
    after.stdout.fnmatch_lines(["opprof: history: judged against 4 run(s) *: 0 test(s) crept *"])


@pytest.mark.slow
def test_a_test_only_its_creep_failed_is_counted_as_crept_not_under_its_baselines_status(
    project: tuple[pytest.Pytester, Path], run_pytest: PytestRunner
) -> None:
    """Baselines updated at every commit pool each step under tolerance: the comparison
    passes, the history fails the test; the baselines' counts said ``2 pass``."""
    pytester, history = project
    for day, n in enumerate((32, 32, 33)):
        _at_commit(pytester, n, day)
        update = run_pytest(*_args(history, "-p", "no:xdist", "--opprof-update-baselines"))
        update.assert_outcomes(passed=2)
    _at_commit(pytester, 34, 3)
    result = run_pytest(*_args(history, "-p", "no:xdist"))
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        [
            f"opprof CREPT: {MATMUL}: *",
            "opprof: 2 profiled test(s) (1 crept, 1 pass)",
            "opprof baselines (baselines): 1 crept, 1 pass",
        ]
    )
    assert "REGRESSED" not in result.stdout.str()


# -- times, on histories of known steps ----------------------------------------------------


def _timed(rng: np.random.Generator, level_us: float, kernel_us: float) -> TestSummary:
    """Five rounds of a test whose ``kernel`` scope takes ``kernel_us`` of its wall time
    ``level_us``, each round with 2% noise."""
    rounds = []
    for _ in range(5):
        noise = rng.lognormal(0, 0.02)
        rows = [Row("kernel", 1, kernel_us * noise, kernel_us * noise)]
        rounds.append((level_us * noise, rows))
    return summary_of(rounds)


FIRST_DAY = datetime.datetime(2026, 9, 1, 12, tzinfo=datetime.timezone.utc)


def _history(
    directory: Path, levels: list[float], seed: int, fingerprint: str
) -> tuple[list[str], np.random.Generator]:
    """A history of one test, a run per level (wall time in µs, the kernel 80% of it),
    each run at its own commit with a day apart; the commits' shas."""
    rng = np.random.default_rng(seed)
    machine = {"fingerprint": fingerprint}
    shas = []
    for day, level in enumerate(levels):
        writer = RunWriter()
        writer.add("t.py::test_fit", _timed(rng, level, 0.8 * level))
        sha = f"{day:02d}" + "ab" * 19
        shas.append(sha)
        when = (FIRST_DAY + datetime.timedelta(days=day)).isoformat()
        commit = {"sha": sha, "parent": None, "branch": "main", "time": when, "dirty": False}
        meta = {"run_at": when, "commit": commit, "machine": machine, "replaced": []}
        write_run(directory, writer.encode(meta), f"run-{day:03d}.npz")
    return shas, rng


def test_a_time_step_between_two_runs_says_it_may_be_at_either_commit(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A run midway between the levels before and after a +8% step: the split before it
    and the split after it are as likely, so the step is at its commit or the next; a
    clean step says one commit."""
    midway = tmp_path / "midway"
    levels = [2000.0] * 14 + [2080.0] + [2160.0] * 14
    shas, _ = _history(midway, levels, seed=2, fingerprint="f" * 16)
    clean = tmp_path / "clean"
    clean_shas, _ = _history(clean, [2000.0] * 14 + [2160.0] * 15, seed=2, fingerprint="f" * 16)
    capsys.readouterr()
    assert main(["history", str(midway), "--json"]) == 0
    (wall,) = (c for c in json.loads(capsys.readouterr().out)["changes"] if c["figure"] == "wall")
    assert wall["at"] == f"{shas[14][:7]} or the next commit"
    assert [b["sha"] for b in wall["between"]] == shas[14:16]
    assert wall["commit"]["sha"] in shas[14:16]
    assert main(["history", str(midway)]) == 0
    out = capsys.readouterr().out
    assert "t.py::test_fit: wall +8% [" in out
    assert f"] at {shas[14][:7]} or the next commit (2026-09-15)" in out
    assert main(["history", str(clean), "--json"]) == 0
    (wall,) = (c for c in json.loads(capsys.readouterr().out)["changes"] if c["figure"] == "wall")
    assert (wall["at"], wall["between"]) == (clean_shas[14][:7], None)


def _judge(directory: Path, now: TestSummary, fingerprint: str) -> list[str]:
    gate = HistoryGate(directory)
    gate.load(fingerprint)
    return [c.text() for c in gate.judge("t.py::test_fit", now, Tolerances())]


def test_a_time_that_crept_in_three_steps_fails_naming_them(tmp_path: Path) -> None:
    levels = [2000.0] * 14 + [2160.0] * 12 + [2333.0] * 12 + [2520.0] * 12  # +8% three times
    shas, rng = _history(tmp_path, levels, seed=1, fingerprint="f" * 16)
    (line,) = _judge(tmp_path, _timed(rng, 2520.0, 0.8 * 2520.0), "f" * 16)
    assert line.startswith(f"t.py::test_fit: cpu +26% against its level before {shas[14][:7]} ")
    assert f"stepped +8% at {shas[14][:7]}, +8% at {shas[26][:7]}, +8% at {shas[38][:7]}" in line
    assert line.endswith("; op kernel")


def test_a_creep_step_between_two_runs_says_it_may_be_at_either_commit(tmp_path: Path) -> None:
    """The creep's first step has a run midway between its levels: the gate's line says
    the step (and the level before it) may be at its commit or the next, as the history's
    change point does; the steps it can place name one commit."""
    levels = [2000.0] * 14 + [2080.0] + [2160.0] * 12 + [2333.0] * 12 + [2520.0] * 12
    shas, rng = _history(tmp_path, levels, seed=2, fingerprint="f" * 16)
    gate = HistoryGate(tmp_path)
    gate.load("f" * 16)
    (creep,) = gate.judge("t.py::test_fit", _timed(rng, 2520.0, 0.8 * 2520.0), Tolerances())
    first = f"{shas[14][:7]} or the next commit"
    line = creep.text()
    assert line.startswith("t.py::test_fit: cpu +2")
    assert f"% against its level before {first} (2026-09-15): " in line
    assert f"stepped +8% at {first}, +8% at {shas[27][:7]}, +8% at {shas[39][:7]}" in line
    row = creep.record().to_json()
    step = row["steps"][0]
    assert (step["at"], step["between"], step["date"]) == (first, shas[14:16], "2026-09-15")
    assert step["sha"] in shas[14:16]
    assert "between" not in row["steps"][1]
    assert f"+8% [{step['low']:+.0%}, {step['high']:+.0%}] at {first} (2026-09-15), " in row["text"]


@pytest.mark.parametrize("seed", range(10))
def test_times_under_tolerance_do_not_fail(tmp_path: Path, seed: int) -> None:
    """A flat history, and one that crept 12% (under 15%), at 2% noise: no failure."""
    flat = tmp_path / "flat"
    _, rng = _history(flat, [2000.0] * 40, seed=seed, fingerprint="f" * 16)
    assert _judge(flat, _timed(rng, 2000.0, 1600.0), "f" * 16) == []
    crept = tmp_path / "crept"
    _, rng = _history(crept, [2000.0] * 20 + [2240.0] * 20, seed=seed, fingerprint="f" * 16)
    assert _judge(crept, _timed(rng, 2240.0, 1792.0), "f" * 16) == []


def test_a_crept_time_reaches_the_reports_with_its_levels_and_intervals(tmp_path: Path) -> None:
    levels = [2000.0] * 14 + [2160.0] * 12 + [2333.0] * 12 + [2520.0] * 12
    shas, rng = _history(tmp_path, levels, seed=1, fingerprint="f" * 16)
    gate = HistoryGate(tmp_path)
    gate.load("f" * 16)
    (creep,) = gate.judge("t.py::test_fit", _timed(rng, 2520.0, 0.8 * 2520.0), Tolerances())
    row = creep.record().to_json()
    assert (row["figure"], row["op"], row["unit"], row["ops"]) == ("cpu", None, "ns", ["kernel"])
    assert row["before"] == pytest.approx(2_000_000, rel=0.05)  # ns: the level of 2,000 us
    assert row["now"] == pytest.approx(2_520_000, rel=0.05)
    steps = row["steps"]
    assert [s["sha"] for s in steps] == [shas[14], shas[26], shas[38]]
    assert [s["date"] for s in steps] == ["2026-09-15", "2026-09-27", "2026-10-09"]
    for s in steps:  # a time's step has its 95% interval, around +8%
        assert s["low"] < s["change"] < s["high"]
        assert s["low"] < 0.08 < s["high"]
    # The reports' sentence gives the levels, and each step its date and interval.
    first = creep.record().steps[0]
    low, high = f"{first.low:+.0%}", f"{first.high:+.0%}"
    assert f"({steps[0]['date']}), {row['before'] / 1e6:.3f}ms -> " in row["text"]
    assert f"stepped +8% [{low}, {high}] at {shas[14][:7]} (2026-09-15), " in row["text"]


@pytest.mark.parametrize(
    ("unjudged", "wait_ms", "judged"),
    [
        (None, 0.0, True),  # the verdict judged the time
        ("busy", 0.0, True),  # the baseline's rounds waited; this run's did not
        ("machine", 0.0, True),  # a baseline of another machine; the history is this one's
        ("busy", 9.0, False),  # this run's rounds waited 90%: not judged here either
        ("moved", 0.0, False),  # every part of the test moved alike: the machine
        ("short", 0.0, False),
    ],
)
def test_the_history_judges_times_by_this_runs_own_rounds(
    tmp_path: Path, unjudged: str | None, wait_ms: float, judged: bool
) -> None:
    now = waited_rounds([1.0] * 5, [wait_ms] * 5)
    assert HistoryGate(tmp_path).times_judged(now, Tolerances(), unjudged) is judged


def test_a_crept_test_whose_times_this_run_could_not_judge_is_named(tmp_path: Path) -> None:
    """A run whose rounds waited for a CPU judges no time (beside a bursty neighbour, the
    crept test's rounds in bench/history_study.py waited 84-91%, 18-31 ms of wall time for
    2.9 ms of CPU time): the gate's lines name the test and its steps, where they would
    otherwise have counted it among the tests that did not creep."""
    levels = [2000.0] * 14 + [2160.0] * 12 + [2333.0] * 12 + [2520.0] * 12
    shas, rng = _history(tmp_path, levels, seed=1, fingerprint="f" * 16)
    gate = HistoryGate(tmp_path)
    gate.load("f" * 16)
    now = _timed(rng, 2520.0, 0.8 * 2520.0)
    assert gate.judge("t.py::test_fit", now, Tolerances(), times=False) == []
    lines = gate_lines(gate, {})
    assert lines[0].endswith(": 0 test(s) crept beyond tolerance")
    assert lines[1].startswith("opprof: history: 1 test(s) whose CPU time stepped up in the")
    assert lines[2].startswith(f"  t.py::test_fit: cpu stepped +8% at {shas[14][:7]}, ")
    assert lines[2].endswith(f"+8% at {shas[38][:7]}")
    judged = HistoryGate(tmp_path)
    judged.load("f" * 16)
    assert judged.judge("t.py::test_fit", now, Tolerances())  # judged, it crept
    assert judged.unjudged == {}
