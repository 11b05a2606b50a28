"""Change points in a real git history: are injected steps found at their commit, op named?
And does the gate with the history fail the crept test, and no other?

Builds a git repository of ``--commits`` commits of a small numerical project (24 tests
of numpy ops, each with a ``kernel`` scope of 1-2 ms of pure-Python work), in which
commits inject steps (at the same shares of the history whatever its length; for 44
commits):

* +5%, +8% and +12% in the ``kernel`` scope of one test each (commits 10, 18, 26; all
  under the gate's 15% time tolerance: the creep a baseline misses);
* three steps of +10% in the ``kernel`` scope of one more test (commits 12, 20, 28):
  each under 15%, +33% together, the creep the history gate must fail;
* a FLOPs change (a matmul 64 -> 72) in a fourth test (commit 34).

Every other commit touches only a notes file.  The suite runs at each commit with
``--opprof --opprof-rounds R --opprof-history DIR`` (each run also gated against the
history so far), then ``pytest-opprof history DIR --json`` finds the change points.  A
change point counts as found when it names the injected test and op (or figure) at the
injected commit, or says it may be there (``at 3f2c1ab or the next commit``: a step the
detector placed a commit late counts only so); every change point elsewhere is a false one.

With ``--neighbour bursty`` the whole study runs beside a bursty neighbour: CPU-bound
processes, one per core, that start and stop every 0.5-3 s (at normal priority, though
the study runs under ``nice -n 19``: the neighbour is the scenario), each burst ending by
itself within 3.5 s and all ended by pid when the study ends.

Then, at the last commit: ``--opprof-update-baselines`` with the history records the
baselines there (the worst case for the baseline gate: a baseline that followed the
creep), and the gate runs with the history: the tests it fails are reported (it must
fail the crept test and no other).  A/A: the last commit run ``--aa-runs`` times into
a history of its own, each run gated against the runs before it; every failure is a
false one.

    python bench/history_study.py [--commits 44] [--rounds 5] [--aa-runs 24]
                                  [--neighbour quiet|bursty] [--json out.json]
    python bench/history_study.py --analyze DIR [--first 44]  # score a kept study again

Side by side: asv's step detection (``pip install asv``) on the same series, scored alike.

About 8 minutes on this 2-CPU VM (BENCHMARKS.md); ``--commits 24 --aa-runs 6`` for a
quick try.  The load-and-detect time of a large history is ``bench/history_synthetic.py``'s.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from _common import bursty_neighbours, loadavg, plugin_args, subprocess_env

from pytest_opprof.history.changes import MIN_CHANGE

PYTHON = sys.executable
TESTS = 24
OPS = [
    "np.matmul(A[{n}], A[{n}])",
    "np.linalg.solve(A[{n}], V[{n}])",
    "np.sort(W[{m}])",
    "np.add(W[{m}], W[{m}])",
    "W[{m}].sum()",
]
WORK = '''
"""Inputs made at import, so every round does the same work."""
import numpy as np

from knobs import MATMUL_N

_rng = np.random.default_rng(0)
A = {n: _rng.standard_normal((n, n)) + n * np.eye(n) for n in (48, 64, 72, 96)}
V = {n: _rng.standard_normal(n) for n in (48, 64, 72, 96)}
W = {m: _rng.standard_normal(m) for m in (10_000, 100_000)}


def spin(iterations):
    acc = 0
    for i in range(iterations):
        acc += i ^ 7
    return acc
'''
FLOPS_TEST = 17
CREPT_TEST = 5
CREEP = 1.10
"""Each of the crept test's three steps: +10%, under the gate's 15%; +33% together."""


def steps_for(commits: int) -> dict[int, tuple[int, float | int, str]]:
    """Commit index -> (test index, kernel factor or matmul size, the figure that steps),
    at the same shares of the history whatever its length (44 commits: 10, 12, ...)."""

    def at(share: int) -> int:
        return round(share * commits / 44)

    return {
        at(10): (3, 1.05, "self"),
        at(12): (CREPT_TEST, CREEP, "self"),
        at(18): (8, 1.08, "self"),
        at(20): (CREPT_TEST, CREEP, "self"),
        at(26): (13, 1.12, "self"),
        at(28): (CREPT_TEST, CREEP, "self"),
        at(34): (FLOPS_TEST, 72, "flops"),
    }


STEPS = steps_for(44)


def iterations_per_ms() -> float:
    def spin(iterations: int) -> int:
        acc = 0
        for i in range(iterations):
            acc += i ^ 7
        return acc

    best = min(_timed(spin) for _ in range(5))
    return 100_000 / (best / 1e6)


def _timed(spin: object) -> int:
    t0 = time.thread_time_ns()
    spin(100_000)  # type: ignore[operator]
    return time.thread_time_ns() - t0


def knobs(iterations: dict[str, int], matmul_n: dict[str, int]) -> str:
    return (
        f"KERNEL = {json.dumps(iterations, indent=1, sort_keys=True)}\n"
        f"MATMUL_N = {json.dumps(matmul_n, indent=1, sort_keys=True)}\n"
    )


def test_module() -> str:
    lines = ["from knobs import KERNEL, MATMUL_N", "from work import A, V, W, np, spin", ""]
    for i in range(TESTS):
        name = f"test_k{i:02d}"
        body = []
        for j in range(2 + i % 3):
            body.append(
                OPS[(i + j) % len(OPS)].format(n=48 + 16 * (j % 2), m=10_000 * 10 ** (j % 2))
            )
        if i == FLOPS_TEST:
            body.append(f"np.matmul(A[MATMUL_N[{name!r}]], A[MATMUL_N[{name!r}]])")
        lines.append(f"\ndef {name}(opprof):")
        lines += [f"    {b}" for b in body]
        lines.append("    with opprof.record_function('kernel'):")
        lines.append(f"        spin(KERNEL[{name!r}])")
    return "\n".join(lines) + "\n"


def git(repo: Path, *args: str, day: int = 0) -> str:
    date = f"2026-{10 + day // 28:02d}-{1 + day % 28:02d}T12:00:00+00:00"
    env = subprocess_env(
        GIT_AUTHOR_DATE=date,
        GIT_COMMITTER_DATE=date,
        GIT_AUTHOR_NAME="study",
        GIT_AUTHOR_EMAIL="study@example.com",
        GIT_COMMITTER_NAME="study",
        GIT_COMMITTER_EMAIL="study@example.com",
    )
    done = subprocess.run(
        ["git", *args], cwd=repo, env=env, capture_output=True, text=True, check=True
    )
    return done.stdout.strip()


def build(repo: Path, commits: int, per_ms: float) -> dict[int, str]:
    """The repository; returns commit index -> sha."""
    repo.mkdir(parents=True)
    git(repo, "init", "-q", "-b", "main")
    iterations = {f"test_k{i:02d}": int(per_ms * (1.0 + (i % 4) * 0.3)) for i in range(TESTS)}
    matmul_n = {f"test_k{FLOPS_TEST:02d}": 64}
    (repo / "work.py").write_text(WORK)
    (repo / "tests").mkdir()
    (repo / "tests" / "test_numeric.py").write_text(test_module())
    (repo / "pytest.ini").write_text("[pytest]\naddopts = -p no:cacheprovider\npythonpath = .\n")
    shas = {}
    steps = steps_for(commits)
    for c in range(commits):
        if c in steps:
            test, change, _ = steps[c]
            name = f"test_k{test:02d}"
            if isinstance(change, float):
                iterations[name] = round(iterations[name] * change)
            else:
                matmul_n[name] = int(change)
        (repo / "knobs.py").write_text(knobs(iterations, matmul_n))
        (repo / "NOTES.md").write_text(f"commit {c}\n")
        git(repo, "add", "-A")
        git(repo, "commit", "-q", "-m", f"commit {c}", day=c)
        shas[c] = git(repo, "rev-parse", "HEAD")
    return shas


def run_suite(
    repo: Path, history: Path, baselines: Path, rounds: int, *more: str
) -> subprocess.CompletedProcess[str]:
    """The suite once at the checked-out commit, into (and gated against) ``history``."""
    cmd = [PYTHON, "-m", "pytest", "-q", *plugin_args(), "tests", "--opprof"]
    cmd += [f"--opprof-rounds={rounds}", f"--opprof-history={history}"]
    cmd += ["--opprof-baseline-dir", str(baselines), *more]
    cmd += ["-p", "no:randomly", "-p", "no:benchmark"]
    done = subprocess.run(cmd, cwd=repo, env=subprocess_env(), capture_output=True, text=True)
    if done.returncode not in (0, 1):
        raise RuntimeError(f"pytest failed\n{done.stdout}\n{done.stderr}")
    return done


def failed_tests(stdout: str) -> list[str]:
    """The node ids of the tests a run failed (pytest's short summary)."""
    return [line.split()[1] for line in stdout.splitlines() if line.startswith("FAILED tests/")]


def creep_lines(stdout: str) -> list[str]:
    """The history gate's lines: each figure that crept, and what it judged against."""
    keep = ("opprof: history: judged", "opprof: history: not judged", "opprof: history: skipped")
    lines = [
        line.strip()
        for line in stdout.splitlines()
        if "against its level before" in line or line.startswith(keep)
    ]
    return list(dict.fromkeys(lines))


def run_all(
    repo: Path, shas: dict[int, str], history: Path, rounds: int
) -> tuple[float, dict[int, list[str]]]:
    """Run the suite at every commit; the seconds it took and the tests each run failed
    (every run is gated against the history of the runs before it)."""
    started = time.perf_counter()
    failed = {}
    for c, sha in shas.items():
        git(repo, "checkout", "-q", sha)
        done = run_suite(repo, history, history.parent / "baselines", rounds)
        failed[c] = failed_tests(done.stdout)
        print(f"  commit {c:2d} {sha[:8]}: {done.stdout.strip().splitlines()[-1]}", flush=True)
    return time.perf_counter() - started, failed


def gated_commits(per_commit: dict[int, list[str]]) -> dict[str, object]:
    """What the history gate failed as the history grew: from which commit the crept test,
    and every other test it failed on the way (false failures)."""
    crept = f"tests/test_numeric.py::test_k{CREPT_TEST:02d}"
    first = next((c for c, failed in per_commit.items() if crept in failed), None)
    others = [f"commit {c}: {t}" for c, failed in per_commit.items() for t in failed if t != crept]
    return {
        "crept_test_first_failed_at": first,
        "crept_test_failed_runs": sum(crept in failed for failed in per_commit.values()),
        "other_failures": others,
        "test_verdicts": len(per_commit) * TESTS,
    }


def gate_side(repo: Path, shas: dict[int, str], history: Path, rounds: int) -> dict[str, object]:
    """At the last commit: record the baselines there (``--opprof-update-baselines`` with
    the history: a pooled baseline that followed the creep), then gate: the baseline gate
    sees nothing, the history gate must fail the crept test and no other."""
    git(repo, "checkout", "-q", shas[len(shas) - 1])
    baselines = history.parent / "baselines"
    update = run_suite(repo, history, baselines, rounds, "--opprof-update-baselines")
    gate = run_suite(repo, history, baselines, rounds)
    failed = failed_tests(gate.stdout)
    expected = [f"tests/test_numeric.py::test_k{CREPT_TEST:02d}"]
    lines = creep_lines(gate.stdout)
    crept = next((line for line in lines if line.startswith(expected[0])), "")
    return {
        "crept_steps_injected_at": sorted(
            c for c, (t, _, _) in steps_for(len(shas)).items() if t == CREPT_TEST
        ),
        "crept_steps_named_at": [c for c, sha in shas.items() if f" at {sha[:7]}" in crept],
        "update_exit": update.returncode,
        "update_baselines_written": "wrote" in update.stdout,
        "failed": failed,
        "expected": expected,
        "crept_test_only": failed == expected,
        "lines": lines,
    }


def aa_side(repo: Path, root: Path, rounds: int, runs: int) -> dict[str, object]:
    """A/A: the last commit run ``runs`` times into a history of its own, each run gated
    against the runs before it (no baselines: only the history judges); every test it
    fails is a false failure."""
    history, baselines = root / "aa-history", root / "aa-baselines"
    failures, judged = [], 0
    for r in range(runs):
        done = run_suite(repo, history, baselines, rounds)
        lines = creep_lines(done.stdout)
        if any(line.startswith("opprof: history: judged") for line in lines):
            judged += TESTS
        failures += [(r, test) for test in failed_tests(done.stdout)]
        print(f"  A/A run {r:2d}: {done.stdout.strip().splitlines()[-1]}", flush=True)
    return {
        "runs": runs,
        "test_verdicts_with_history": judged,
        "false_failures": len(failures),
        "false_failure_rate": round(len(failures) / max(judged, 1), 4),
        "failed": [f"run {r}: {test}" for r, test in failures],
    }


def named(change: dict[str, object], index: dict[str, int]) -> list[int]:
    """The commits a change point names: its own, or each it says it may be at (``3f2c1ab
    or the next commit``: ``between``)."""
    between = change.get("between") or [change["commit"]]
    assert isinstance(between, list)
    return [index[str(commit["sha"])] for commit in between]


def score(changes: list[dict[str, object]], shas: dict[int, str], series: int) -> dict[str, object]:
    """An injected step is found where a change point names its commit (one placed a
    commit off counts only where it says it may be at either); every other is false."""
    index = {sha: c for c, sha in shas.items()}
    steps = steps_for(len(shas))
    found: dict[int, str] = {}
    false = []
    for ch in changes:
        commit = ch["commit"]
        assert isinstance(commit, dict)
        c = index[str(commit["sha"])]
        commits = named(ch, index)
        test = str(ch["test"])
        hit = None
        for at, (t, _change, figure) in steps.items():
            if test.endswith(f"test_k{t:02d}") and at in commits:
                hit = at
                if ch["figure"] == figure and (figure != "self" or ch["op"] == "kernel"):
                    if len(commits) == 1:
                        found[at] = "at its commit"
                    else:
                        where = "its commit" if c == at else f"commit {c}"
                        found[at] = f"at {where}, said: {ch['at']}"
        if hit is None:
            false.append(ch)
    return {
        "steps": {
            str(at): {
                "test": f"test_k{t:02d}",
                "change": change,
                "found": found.get(at, "missed"),
            }
            for at, (t, change, _) in steps.items()
        },
        "false_change_points": len(false),
        "series": series,
        "false_per_1000_series": round(1000 * len(false) / max(series, 1), 2),
        "false": [f"{f['test']} {f['op']} {f['figure']} {f['change']}" for f in false],
    }


def asv_side(
    history: Path, shas: dict[int, str], min_change: float, reference: bool = False
) -> dict[str, object]:
    """asv's step detection (``asv.step_detect.detect_steps``, its L1 piecewise-constant
    fit) on the same series: a step between two of its pieces of at least ``min_change``
    is its change point, scored as ours.  ``reference``: on the series corrected by the
    suite's reference first, as ours are (``pytest_opprof/history/reference.py``)."""
    from asv.step_detect import detect_steps

    from pytest_opprof.history.reference import reference_factors
    from pytest_opprof.history.store import read_run, scan

    series: dict[tuple[str, str | None], dict[int, float]] = {}
    heads = scan(history).runs
    for r, head in enumerate(heads):
        run = read_run(head.path, head.meta)
        for test, wall in zip(run.tests, run.wall_medians().tolist(), strict=True):
            series.setdefault((test, None), {})[r] = wall
        a = run.arrays
        for t, o, v in zip(a["op_test"], a["op_name"], run.op_medians().tolist(), strict=True):
            series.setdefault((run.tests[t], run.ops[o]), {})[r] = v
    keys = list(series)
    matrix = np.array([[series[k].get(r, math.nan) for r in range(len(heads))] for k in keys])
    if reference:
        logs = np.log(np.maximum(matrix, 1e-3))
        ops = sorted({str(op) for _, op in keys})
        peers = np.array([ops.index(str(op)) for _, op in keys], dtype=np.int64)
        matrix = np.exp(logs - reference_factors(logs, peers))
    changes = []
    for (test, op), y in zip(keys, matrix.tolist(), strict=True):
        steps = detect_steps(y)
        for left, right in itertools.pairwise(steps):
            change = right[2] / left[2] - 1 if left[2] else math.inf
            if abs(change) >= min_change:
                commit = heads[right[0]].commit or {}
                changes.append(
                    {
                        "test": test,
                        "op": op,
                        "figure": "wall" if op is None else "self",
                        "change": change,
                        "commit": {"sha": commit.get("sha")},
                    }
                )
    return score(changes, shas, len(series))


def main() -> None:
    p = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    p.add_argument("--commits", type=int, default=44)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--keep", type=Path, help="build the repository and history here")
    p.add_argument("--json", type=Path, help="write the results here")
    p.add_argument(
        "--analyze", type=Path, metavar="DIR", help="score the study a --keep DIR run left"
    )
    p.add_argument(
        "--first",
        type=int,
        metavar="N",
        help="with --analyze: score the history's first N runs alone (44: the commits' own)",
    )
    p.add_argument(
        "--aa-runs",
        type=int,
        default=24,
        help="A/A: runs of the last commit into a history of their own, each gated (0: none)",
    )
    p.add_argument(
        "--neighbour",
        choices=("quiet", "bursty"),
        default="quiet",
        help="bursty: CPU-bound processes that start and stop every 0.5-3 s beside the study",
    )
    args = p.parse_args()
    if args.neighbour == "bursty" and not args.analyze:
        with bursty_neighbours(niceness=0):
            study(args)
    else:
        study(args)


def first_runs(history: Path, n: int, into: Path) -> Path:
    """A copy of ``history``'s first ``n`` runs (in the history's order) under ``into``."""
    from pytest_opprof.history.store import scan

    for head in scan(history).runs[:n]:
        shutil.copy2(head.path, into / head.path.name)
    return into


def study(args: argparse.Namespace) -> None:
    """The study as ``args`` say (see the module docstring)."""
    root = args.analyze or args.keep or Path(tempfile.mkdtemp(prefix="opprof-history-study-"))
    repo, history = root / "project", root / "history"
    per_commit: dict[int, list[str]] = {}
    if args.analyze:
        listed = git(repo, "rev-list", "--reverse", "HEAD").split()
        shas, seconds = dict(enumerate(listed)), 0.0
        if args.first:
            history = first_runs(history, args.first, Path(tempfile.mkdtemp(prefix="opprof-")))
    else:
        shas = build(repo, args.commits, iterations_per_ms())
        print(f"{args.commits} commits in {repo}; running the suite at each")
        seconds, per_commit = run_all(repo, shas, history, args.rounds)
    done = subprocess.run(
        [PYTHON, "-m", "pytest_opprof", "history", str(history), "--json"],
        env=subprocess_env(),
        capture_output=True,
        text=True,
        check=True,
    )
    report = json.loads(done.stdout)
    text = subprocess.run(
        [PYTHON, "-m", "pytest_opprof", "history", str(history)],
        env=subprocess_env(),
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    result = score(report["changes"], shas, report["series"])
    raw = subprocess.run(
        [PYTHON, "-m", "pytest_opprof", "history", str(history), "--json", "--no-reference"],
        env=subprocess_env(),
        capture_output=True,
        text=True,
        check=True,
    )
    result["without_reference"] = score(json.loads(raw.stdout)["changes"], shas, report["series"])
    result.update(
        commits=len(shas),
        rounds=args.rounds,
        run_seconds=round(seconds),
        neighbour=args.neighbour,
        load_at_end=round(loadavg(), 1),
    )
    result["asv"] = asv_side(history, shas, MIN_CHANGE)
    result["asv_with_reference"] = asv_side(history, shas, MIN_CHANGE, reference=True)
    if not args.analyze:
        result["gate_at_each_commit"] = gated_commits(per_commit)
        print("the gate with history at the last commit, after recording its baselines")
        result["gate"] = gate_side(repo, shas, history, args.rounds)
        if args.aa_runs:
            print(
                f"A/A: {args.aa_runs} runs of the last commit, each gated against the ones before"
            )
            result["aa"] = aa_side(repo, root, args.rounds, args.aa_runs)
    print(text)
    print(json.dumps(result, indent=1))
    if args.json:
        args.json.write_text(json.dumps(result, indent=1, sort_keys=True))


if __name__ == "__main__":
    main()
