"""``--opprof-history`` and ``pytest-opprof history``: real runs write real run files,
concurrently and under pytest-xdist; a killed run, a damaged file and a file of another
schema leave the history readable; the command names the commit where a figure stepped."""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import numpy as np
import pytest
from history_helpers import SUITE
from history_helpers import git as _git
from run_helpers import PLUGIN, REPO_ROOT, PytestRunner

from pytest_opprof.__main__ import main
from pytest_opprof.history.changes import find_time_changes, time_steps
from pytest_opprof.history.series import Detection, TimeSteps
from pytest_opprof.history.store import encode_arrays, read_run, scan


def _suite(pytester: pytest.Pytester, n: int = 32) -> None:
    pytester.makepyfile(test_suite=SUITE)
    (pytester.path / "knob.json").write_text(json.dumps({"n": n}))


def _args(history: Path, *more: str) -> list[str]:
    return ["--opprof", "--opprof-capture", "numpy", f"--opprof-history={history}", *more]


def _files(history: Path) -> list[Path]:
    return sorted(history.rglob("*.npz"))


def test_a_run_appends_its_figures(pytester: pytest.Pytester, run_pytest: PytestRunner) -> None:
    _suite(pytester)
    history = pytester.path / "history"
    result = run_pytest(*_args(history, "-p", "no:xdist"))
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["opprof: history: 2 test(s) added to *history*.npz (*a test)"])
    (path,) = _files(history)
    run = read_run(path)
    assert run.tests == ["test_suite.py::test_matmul", "test_suite.py::test_add"]
    assert run.meta["commit"] is None  # pytester's directory is no git repository
    assert run.meta["machine"]["numpy"] == np.__version__
    ops = {run.ops[o] for o in run.arrays["op_name"]}
    assert {"numpy.matmul", "numpy.add"} <= ops
    flops = dict(zip(run.tests, run.arrays["test_exact"][:, 0].tolist(), strict=True))
    assert flops["test_suite.py::test_matmul"] == 2 * 32**3
    assert (run.wall_medians() > 0).all()


def test_a_run_records_its_commit(pytester: pytest.Pytester, run_pytest: PytestRunner) -> None:
    _suite(pytester)
    _git(pytester.path, "init", "-q", "-b", "trunk")
    shas = [_commit(pytester.path, f"first {i}", day=i) for i in range(2)]
    history = pytester.path.parent / f"{pytester.path.name}-history"
    run_pytest(*_args(history, "-p", "no:xdist")).assert_outcomes(passed=2)
    commit = read_run(_files(history)[0]).meta["commit"]
    assert commit["sha"] == shas[1] and commit["parent"] == shas[0]
    assert commit["branch"] == "trunk" and commit["time"].startswith("2026-11-02")
    assert commit["dirty"] is False


@pytest.mark.slow
def test_xdist_workers_write_one_run(pytester: pytest.Pytester, run_pytest: PytestRunner) -> None:
    _suite(pytester)
    history = pytester.path / "history"
    run_pytest(*_args(history, "-n", "2")).assert_outcomes(passed=2)
    (path,) = _files(history)  # the controller writes, the workers never do
    assert sorted(read_run(path).tests) == ["test_suite.py::test_add", "test_suite.py::test_matmul"]


def test_two_runs_at_once_both_land(pytester: pytest.Pytester, run_pytest: PytestRunner) -> None:
    _suite(pytester)
    history = pytester.path / "history"
    cmd = [sys.executable, "-m", "pytest", *PLUGIN, "-p", "no:cacheprovider", "-p", "no:xdist"]
    cmd += _args(history)
    env = dict(os.environ, PYTHONPATH=str(REPO_ROOT))
    procs = [
        subprocess.Popen(cmd, cwd=pytester.path, env=env, stdout=subprocess.PIPE, text=True)
        for _ in range(2)
    ]
    for proc in procs:
        out, _ = proc.communicate(timeout=300)
        assert proc.returncode == 0, out
    files = _files(history)
    assert len(files) == 2
    assert all(read_run(f).tests for f in files)
    assert not [p for p in history.iterdir() if p.name.startswith(".")]


def test_a_killed_run_leaves_the_history_whole(
    pytester: pytest.Pytester, run_pytest: PytestRunner
) -> None:
    _suite(pytester)
    history = pytester.path / "history"
    run_pytest(*_args(history, "-p", "no:xdist")).assert_outcomes(passed=2)
    before = _files(history)
    pytester.makepyfile(
        test_zz_hang="""
        import pathlib
        import time

        def test_hang():
            pathlib.Path("started").write_text("")
            time.sleep(120)
        """
    )
    cmd = [sys.executable, "-m", "pytest", *PLUGIN, "-p", "no:cacheprovider", "-p", "no:xdist"]
    env = dict(os.environ, PYTHONPATH=str(REPO_ROOT))
    proc = subprocess.Popen(
        cmd + _args(history), cwd=pytester.path, env=env, stdout=subprocess.DEVNULL
    )
    deadline = time.monotonic() + 120
    while not (pytester.path / "started").exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=60)
    # What a kill between writing and renaming leaves: a dot-named partial temporary file.
    good = before[0].read_bytes()
    (history / f".{before[0].name}.abcd1234.tmp").write_bytes(good[: len(good) // 2])
    assert _files(history) == before
    loaded = scan(history)
    assert [h.path for h in loaded.runs] == before and not loaded.skipped


def _write_other_files(history: Path, good: Path) -> tuple[Path, Path, Path]:
    damaged = history / "damaged.npz"
    damaged.write_bytes(good.read_bytes()[:300])
    other = history / "other.npz"
    meta = json.dumps({"kind": "opprof-history", "schema": 99}).encode()
    other.write_bytes(encode_arrays({"meta": np.frombuffer(meta, dtype=np.uint8)}))
    foreign = history / "foreign.npz"
    foreign.write_bytes(encode_arrays({"x": np.arange(3)}))
    return damaged, other, foreign


def test_damaged_and_other_schema_files_are_named_and_skipped(
    pytester: pytest.Pytester, run_pytest: PytestRunner, capsys: pytest.CaptureFixture[str]
) -> None:
    _suite(pytester)
    history = pytester.path / "history"
    run_pytest(*_args(history, "-p", "no:xdist")).assert_outcomes(passed=2)
    (good,) = _files(history)
    damaged, other, foreign = _write_other_files(history, good)
    capsys.readouterr()  # the run's own output
    assert main(["history", str(history)]) == 0
    out = capsys.readouterr().out.splitlines()
    skipped = [line for line in out if line.startswith("opprof history: skipped")]
    assert len(skipped) == 3
    assert any(f"{damaged}: damaged (" in line for line in skipped)
    assert any(f"{other}: schema: history schema 99, this version reads 1" in line for line in out)
    assert any(f"{foreign}: not a pytest-opprof history run (no meta)" in line for line in out)
    assert "opprof history: 1 run(s), 1 machine(s)" in "\n".join(out)
    # A run appended beside them still lands and reads.
    run_pytest(*_args(history, "-p", "no:xdist")).assert_outcomes(passed=2)
    assert len(scan(history).runs) == 2


def test_the_command_names_the_commit_where_flops_stepped(
    pytester: pytest.Pytester, run_pytest: PytestRunner, capsys: pytest.CaptureFixture[str]
) -> None:
    _suite(pytester, n=32)
    _git(pytester.path, "init", "-q", "-b", "main")
    history = pytester.path.parent / f"{pytester.path.name}-history"
    shas = []
    for i, n in enumerate((32, 32, 48, 48)):
        (pytester.path / "knob.json").write_text(json.dumps({"n": n}))
        shas.append(_commit(pytester.path, f"n={n}", day=i))
        run_pytest(*_args(history, "-p", "no:xdist")).assert_outcomes(passed=2)
    capsys.readouterr()  # the runs' own output
    assert main(["history", str(history)]) == 0
    out = capsys.readouterr().out
    flops = f"{(48**3 / 32**3 - 1):+.0%}"
    line = next(x for x in out.splitlines() if "test_matmul: flops" in x)
    assert line.strip().startswith(
        f"test_suite.py::test_matmul: flops {flops} (65,536 -> 221,184) at {shas[2][:7]} "
        "(2026-11-03), "
    ), out
    assert f", numpy.matmul flops {flops} (65,536 -> 221,184)" in line
    assert "test_add" not in out  # nothing of it stepped
    assert main(["history", str(history), "--json", "--op", "matmul"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert {(c["op"], c["figure"]) for c in report["changes"]} >= {("numpy.matmul", "flops")}
    assert all(c["op"] == "numpy.matmul" for c in report["changes"])
    assert {c["commit"]["sha"] for c in report["changes"]} == {shas[2]}
    assert main(["history", str(history), "--since", shas[3][:8]]) == 0
    assert "0 change point(s)" in capsys.readouterr().out
    assert main(["history", str(history), "--since", "2026-11-03"]) == 0
    assert "test_matmul: flops" in capsys.readouterr().out
    assert main(["history", str(history), "--since", "1234abcd"]) == 2  # no such commit
    assert main(["history", str(history), "-k", "test_add"]) == 0
    assert "0 change point(s)" in capsys.readouterr().out


@pytest.mark.slow
def test_a_step_the_history_cannot_place_says_at_which_commits_it_may_be(
    pytester: pytest.Pytester, run_pytest: PytestRunner, capsys: pytest.CaptureFixture[str]
) -> None:
    """The commit that grew the matmul ran only ``test_add``: the FLOPs stepped there or at
    the next commit, whose run is the first that shows it, and the report says both."""
    _suite(pytester, n=32)
    _git(pytester.path, "init", "-q", "-b", "main")
    history = pytester.path.parent / f"{pytester.path.name}-history"
    shas = []
    for i, (n, only) in enumerate(((32, ""), (32, ""), (48, "test_add"), (48, ""))):
        (pytester.path / "knob.json").write_text(json.dumps({"n": n}))
        shas.append(_commit(pytester.path, f"n={n}", day=i))
        run = run_pytest(*_args(history, "-p", "no:xdist", *(["-k", only] if only else [])))
        run.assert_outcomes(passed=1 if only else 2)
    capsys.readouterr()  # the runs' own output
    assert main(["history", str(history)]) == 0
    out = capsys.readouterr().out
    line = next(x for x in out.splitlines() if "test_matmul: flops" in x)
    flops = f"{(48**3 / 32**3 - 1):+.0%}"
    assert line.strip().startswith(
        f"test_suite.py::test_matmul: flops {flops} (65,536 -> 221,184) at {shas[2][:7]} or "
        "the next commit (2026-11-03), "
    ), out
    assert main(["history", str(history), "--json", "-k", "matmul"]) == 0
    changes = json.loads(capsys.readouterr().out)["changes"]
    assert changes and all(c["at"] == f"{shas[2][:7]} or the next commit" for c in changes)
    assert all([b["sha"] for b in c["between"]] == shas[2:4] for c in changes)
    # Where the detector placed it: the first run that shows it.
    assert {c["commit"]["sha"] for c in changes} == {shas[3]}


def test_a_bad_since_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["history", str(tmp_path), "--since", "deadbeef"]) == 2
    assert capsys.readouterr().err.startswith("error: --since deadbeef: no run")
    assert main(["history", str(tmp_path / "none")]) == 2
    assert "not a directory" in capsys.readouterr().err


def _commit(cwd: Path, message: str, day: int) -> str:
    _git(cwd, "add", "-A", day=day)
    _git(cwd, "commit", "-q", "--allow-empty", "-m", message, day=day)
    return _git(cwd, "rev-parse", "HEAD")


# -- the detector on series of known steps ----------------------------------------------


def _series(rng: np.random.Generator, n: int, at: int | None, step: float) -> np.ndarray:
    values = 1e6 * rng.lognormal(0, 0.02, size=n)
    if at is not None:
        values[at:] *= 1 + step
    return values


@pytest.mark.parametrize("step", [0.05, 0.08, 0.12, -0.1])
def test_a_time_step_is_found_where_it_is(step: float) -> None:
    rng = np.random.default_rng(7)
    x = _series(rng, 44, 10, step)
    cuts = find_time_changes(x[None, :])[0]
    (found,) = time_steps(x, cuts)
    assert found.at == 10
    assert found.low is not None and found.high is not None
    assert found.low <= step <= found.high
    assert math.isclose(found.change, step, abs_tol=0.02)


def test_noise_and_bursts_make_few_false_change_points() -> None:
    rng = np.random.default_rng(3)
    x = 1e6 * rng.lognormal(0, 0.03, size=(2000, 200))
    burst = rng.random(x.shape) < 0.05  # a bursty neighbour: 5% of runs 5-40% slower
    x[burst] *= 1 + rng.uniform(0.05, 0.4, size=burst.sum())
    found = find_time_changes(x)
    reported = [time_steps(x[row], cuts) for row, cuts in found.items()]
    assert sum(map(len, reported)) <= 2  # at most 1 per 1,000 series


def test_a_series_switching_between_two_speeds_is_no_step() -> None:
    """An op 5x slower in some runs and not others, more often later in the history (a
    large numpy.sort in bench/history_study.py): the runs after the split still at the
    old speed say it is no level that moved."""
    rng = np.random.default_rng(11)
    x = 1e6 * rng.lognormal(0, 0.03, size=46)
    slow = np.arange(46) >= 26
    slow[[30, 35, 40]] = False  # 3 of the last 20 runs at the old speed
    slow[7] = True
    x[slow] *= 5
    found = find_time_changes(x[None, :])
    assert found, "the rank test sees the series change"
    assert time_steps(x, found[0]) == []


@pytest.mark.parametrize("step", [0.12, 1.0])
def test_a_step_with_bursts_on_its_slower_side_is_still_a_step(step: float) -> None:
    """Bursts make runs slower, never faster: slow runs before a step up are a
    neighbour's and leave the step reported, however large."""
    rng = np.random.default_rng(5)
    x = _series(rng, 46, 20, step)
    x[[3, 15]] *= 1 + step * 1.5  # bursts before the step, beyond its new level
    cuts = find_time_changes(x[None, :])[0]
    (found,) = time_steps(x, cuts)
    assert found.at == 20


@pytest.mark.parametrize(("run", "factor"), [(20, 0.75), (19, 1.25)])
def test_a_wild_run_beside_a_step_does_not_pull_it_to_itself(run: int, factor: float) -> None:
    """A +12% step at run 20 with one run beside it far off its level (the reference
    took a run 25% under just after the step; a burst just before it): least squares
    put the step on that run's far side in every series; with each run's square capped
    the run costs the same on either side and the others place the step."""
    at_step = 0
    for seed in range(40):
        rng = np.random.default_rng(seed)
        x = _series(rng, 46, 20, 0.12)
        x[run] *= factor
        (found,) = time_steps(x, find_time_changes(x[None, :])[0])
        first, last = found.first or found.at, found.last or found.at
        at_step += first <= 20 <= last
    assert at_step >= 12


def test_a_run_between_two_levels_leaves_the_step_where_least_squares_put_it() -> None:
    """A machine 40% slow in the run before a +100% step: that run lies between the two
    levels, nearer the old one, and least squares leaves it there (the step at its run in
    36 of 40 series); capped squares, the run capped on both sides, had moved it a run
    early by a median's shift (at its run in 24)."""
    at_step = 0
    for seed in range(40):
        rng = np.random.default_rng(seed)
        x = _series(rng, 28, 14, 1.0)
        x[13] = 1.4 * float(np.median(x[:13]))
        (found,) = time_steps(x, find_time_changes(x[None, :])[0])
        at_step += found.at == 14
    assert at_step >= 34


def test_a_time_step_beside_its_work_step_is_placed_at_the_work() -> None:
    """An op's FLOPs stepped at run 20; its time read the old level there (the machine
    read slow for every other test that run, so the reference took it back) and the
    detector placed the step at 21: it is placed where the work changed."""
    rng = np.random.default_rng(2)
    x = _series(rng, 46, 20, 0.2)
    x[20] = float(np.median(x[:20]))
    matrix = x[None, :].astype(np.float32)
    cols = np.arange(46)
    (_, (placed,)) = next(iter(TimeSteps(matrix, matrix, cols, Detection())))
    assert placed.at == 21
    (_, (moved,)) = next(iter(TimeSteps(matrix, matrix, cols, Detection(), {0: {20}})))
    assert moved.at == 20
    assert math.isclose(moved.change, 0.2, abs_tol=0.03)
    far = next(iter(TimeSteps(matrix, matrix, cols, Detection(), {0: {30}})))[1][0]
    assert far.at == 21  # a work step beyond a run of its window is another change


def _crept(seed: int, runs: int = 46) -> np.ndarray:
    """One test's time creeping by three +10% steps (runs 12, 20, 28) beside 23 of the
    same op that do not move, at 3.5% run-to-run noise (``bench/history_study.py``'s
    scope read 2.5-4%)."""
    rng = np.random.default_rng(seed)
    x = 1e6 * rng.lognormal(0, 0.035, size=(24, runs))
    for at in (12, 20, 28):
        x[0, at:] *= 1.10
    return x.astype(np.float32)


def test_a_creep_is_found_as_its_three_steps() -> None:
    """Eight runs between two steps are too few for ranks (12 and 8 runs all apart reach
    p = 0.003 after the search over splits); the shift test, with the noise of the op's
    24 series, splits them: in 40 such histories the ranks alone found 43 of the 120
    steps and never all three of one, the shift test 99 and all three in 21."""
    found_steps = all_three = flat = 0
    for seed in range(40):
        m = _crept(seed)
        groups = np.zeros(len(m), dtype=np.int64)
        found = dict(TimeSteps(m, m, np.arange(m.shape[1]), Detection(), {}, groups))
        flat += sum(len(steps) for row, steps in found.items() if row)
        hits = sum(
            any((s.first or s.at) <= at <= (s.last or s.at) for at in (12, 20, 28))
            for s in found.get(0, [])
        )
        found_steps += hits
        all_three += hits == 3
    assert found_steps >= 80
    assert all_three >= 10
    assert flat == 0  # 920 series that did not move


def test_the_shift_test_splits_no_noise_inside_a_stepped_series() -> None:
    """2,000 series that step +20% at run 23, at 3% noise with a bursty neighbour: the
    shift test tries each side of every step, and splits one side of one series (the
    ranks alone: none); without the rank test's screen it split 21."""
    rng = np.random.default_rng(3)
    x = 1e6 * rng.lognormal(0, 0.03, size=(2000, 46))
    burst = rng.random(x.shape) < 0.05
    x[burst] *= 1 + rng.uniform(0.05, 0.4, size=burst.sum())
    x[:, 23:] *= 1.2
    m = x.astype(np.float32)
    groups = np.zeros(len(m), dtype=np.int64)
    found = dict(TimeSteps(m, m, np.arange(46), Detection(), {}, groups))
    assert len(found) >= 1990
    inside = sum(len(steps) > 1 for steps in found.values())
    assert inside <= 2  # at most 1 per 1,000 series


def test_a_series_of_one_value_has_no_change_point() -> None:
    assert find_time_changes(np.full((3, 50), 5.0)) == {}


def test_a_file_of_another_kind_is_damaged_not_a_crash(tmp_path: Path) -> None:
    (tmp_path / "a.npz").write_bytes(b"PK\x03\x04 not a zip")
    with zipfile.ZipFile(tmp_path / "b.npz", "w") as z:
        z.writestr("meta.npy", b"\x93NUMPY garbage")
    loaded = scan(tmp_path)
    assert not loaded.runs and len(loaded.skipped) == 2
    assert all("damaged" in why for why in loaded.skipped), loaded.skipped
