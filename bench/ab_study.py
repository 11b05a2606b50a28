"""A/B against the base, end to end, beside the other ways of judging the same change.

The suite is ``verdict_study.py``'s generated one (numpy ops of varied sizes and, in 70% of
the tests, a 1-4 ms pure-Python ``kernel`` scope), committed as the base of a real git
repository.  The head is the working tree: unchanged (A/A: every failure is false), or
with the ``kernel`` of a random half of the tests made ``--slowdown`` slower (the same
ops, FLOPs and bytes: only the loop runs longer).  Per scenario and repeat:

* **interleaved A/B** (ours): ``pytest --opprof --opprof-against=HEAD``, scored from its
  JSON report: false failures in the A/A run, the share of tests of >= 1 ms whose time got
  a verdict, the slowed tests caught with ``kernel`` named first, the pairs it ran; and
  the ops judged across the run's tests (``pytest_opprof/ab/across.py``): in an A/A run
  each op that moved is a false verdict, in a slowed run whether the slowed op (``kernel``;
  numpy's ``svd``) regressed across its tests;
* **sequential A/B** (as ``asv continuous`` runs): the base's tests 3 times, then the
  head's 3 times, each ``pytest --opprof --opprof-rounds=1``; a test fails when the median
  of its 3 head wall times exceeds the median of its 3 base wall times by the tolerance;
* **committed baselines**: 3 update runs on the base, then the gate (default settings);
* **pytest-benchmark**: one saved run of the base, the head compared with
  ``--benchmark-compare-fail=mean:10%``;
* **cost**: the A/B run's wall time over a plain ``pytest`` run of the same tests, in
  the same condition, one right after the other; whole, and without the run's fixed start
  (the worktree and the partners' start, from the run's ``time:`` line), as the criterion
  reads (at most 4x a plain run, plus a start of at most 10 s).  A second table says
  where the time went: the start, the rounds and the rest (the pytest process's own run
  of each test, the partners' set-up and tear-down, the verdicts and reports).

Real suites run A/A beside it: numpy's own ``test_linalg`` (then with ``svd`` made
slower from inside, the head's conftest), scipy.signal's ``test_spectral`` and this
repository's example suite (``examples/``).

Scenarios: ``quiet``; ``loaded`` (one CPU-bound process per core throughout); ``bursty``
(CPU-bound processes that start and stop every 0.5-3 s, as a shared runner's neighbours
do); ``n2`` (``-n 2``).  pytest-benchmark disables itself under xdist (n/a there).

    python bench/ab_study.py [--scenario quiet,loaded,bursty,n2] [--tests 40]
                             [--repeats 2] [--slowdown 0.10] [--json out.json]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import random
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from _common import (
    bursty_neighbours,
    cpu_burners,
    loadavg,
    machine_line,
    now_utc,
    plugin_args,
    subprocess_env,
)
from busy_study import NUMPY_DESELECT, NUMPY_INJECT, NUMPY_OP, _regressed_on, numpy_targets
from verdict_study import BENCH_FLAGGED, KERNEL, benchmark_cmd, generate, iterations_per_ms

from pytest_opprof.gate.tolerance import DEFAULT_AB_TIME_TOLERANCE

PYTHON = sys.executable
SCENARIOS = ("quiet", "loaded", "bursty", "n2")
SEQUENTIAL_RUNS = 3
UPDATE_RUNS = 3
FLOOR_NS = 1_000_000
SCIPY_MODULE = "test_spectral.py"
"""scipy.signal's spectral tests: 133 tests, 50 of them with calls of 1 ms or more."""
EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
REAL = {"scipy": "sp", "examples": "ex"}
"""The real suites run A/A only, and the folder each lies in."""


@contextlib.contextmanager
def condition(scenario: str, seed: int) -> Iterator[None]:
    if scenario == "loaded":
        with cpu_burners(per_core=1, seconds=900):
            yield
    elif scenario == "bursty":
        with bursty_neighbours(seed):
            yield
    else:
        yield


def _git(root: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-c", "user.email=study@example.com", "-c", "user.name=study", *args],
        cwd=root,
        check=True,
        capture_output=True,
    )


def make_repo(root: Path, tests: int, seed: int) -> dict[str, int]:
    """The base commit of the generated suite, and copies of numpy's own ``test_linalg``
    (``np/``), scipy's module (``sp/``) and the example suite (``ex/``); {test name:
    kernel iterations} of the generated suite."""
    kernels = generate(root, tests, iterations_per_ms(), seed)
    import numpy

    (root / "np").mkdir()
    source = Path(numpy.__file__).parent / "linalg" / "tests" / "test_linalg.py"
    (root / "np" / "test_linalg.py").write_text(source.read_text())
    try:
        import scipy  # type: ignore[import-untyped]
    except ImportError:
        pass
    else:
        (root / "sp").mkdir()
        source = Path(scipy.__file__).parent / "signal" / "tests" / SCIPY_MODULE
        (root / "sp" / SCIPY_MODULE).write_text(source.read_text())
    (root / "ex").mkdir()
    for example in EXAMPLES.glob("*.py"):
        (root / "ex" / example.name).write_text(example.read_text())
    _git(root, "init", "-q")
    _git(root, "add", "-A")
    _git(root, "commit", "-qm", "base")
    return kernels


def set_head(root: Path, slow: dict[str, float], svd: float = 0.0) -> None:
    """The working tree: the base, or its ``kernel``s in ``slow`` made slower in code, or
    ``numpy.linalg.svd`` made ``svd`` slower from inside (a conftest only the head has)."""
    _git(root, "checkout", "--", "synthwork.py")
    inject = root / "np" / "conftest.py"
    inject.unlink(missing_ok=True)
    if svd:
        line = '_SHARE = float(os.environ.get("OPPROF_STUDY_SLOW_SVD", "0"))'
        assert line in NUMPY_INJECT
        inject.write_text(NUMPY_INJECT.replace(line, f"_SHARE = {svd!r}"))
    if slow:
        work = root / "synthwork.py"
        text = work.read_text()
        line = '_SLOW = json.loads(os.environ.get("OPPROF_STUDY_SLOW", "{}"))'
        assert line in text
        work.write_text(text.replace(line, f"_SLOW = {json.dumps(slow)}"))


class Runner:
    def __init__(self, root: Path, scenario: str, seed: int, keep: Path | None = None) -> None:
        self.root, self.scenario, self.seed = root, scenario, seed
        self.keep = keep
        """Where each A/B run's JSON report is copied (``--keep-reports``; None: nowhere)."""
        self.env = subprocess_env(PYTHONPATH=str(root))

    def pytest(self, *args: str, env: dict[str, str] | None = None) -> tuple[float, str, int]:
        cmd = [PYTHON, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly"]
        cmd += [*plugin_args(), *args]
        if self.scenario == "n2" and "bench" not in args:
            cmd += ["-n", "2"]
        t0 = time.perf_counter()
        proc = subprocess.run(
            cmd, cwd=self.root, env=env or self.env, capture_output=True, text=True
        )
        return time.perf_counter() - t0, proc.stdout + proc.stderr, proc.returncode

    def report(
        self, name: str, *args: str, env: dict[str, str] | None = None, suite: str = "synth"
    ) -> dict[str, Any]:
        path = self.root / "reports" / f"{name}.json"
        path.parent.mkdir(exist_ok=True)
        path.unlink(missing_ok=True)
        where = {"synth": ["opprof"], **{k: [v] for k, v in REAL.items()}}.get(
            suite, ["np", "-k", NUMPY_DESELECT]
        )
        seconds, output, _ = self.pytest(
            "-p",
            "no:benchmark",
            *where,
            "--opprof",
            f"--opprof-report={path}",
            "--opprof-report-details",
            *args,
            env=env,
        )
        if not path.exists():
            raise RuntimeError(f"{name}: no report written:\n{output[-3000:]}")
        if self.keep is not None:
            self.keep.mkdir(parents=True, exist_ok=True)
            shutil.copy(path, self.keep / path.name)
        report = json.loads(path.read_text())
        tests: dict[str, Any] = report["tests"]
        ops = report.get("ab_ops", [])
        return {"seconds": seconds, "tests": tests, "output": output, "ab_ops": ops}


def _wall(test: dict[str, Any]) -> dict[str, Any] | None:
    return next(
        (m for m in test["verdict"]["metrics"] if m["metric"] in ("wall time", "work time")),
        None,
    )


def score_ab(run: dict[str, Any], targets: set[str]) -> dict[str, Any]:
    tests = run["tests"]
    long = [
        t
        for t in tests.values()
        if (w := _wall(t)) is not None and (w["baseline"] or 0) >= FLOOR_NS
    ]
    judged = [t for t in long if _wall(t)["status"] in ("pass", "regressed", "improved")]  # type: ignore[index]
    slowed = [t for nid, t in tests.items() if nid.split("::")[-1] in targets]
    return {
        "tests": len(tests),
        "false": sum(
            t["status"] == "regressed"
            for nid, t in tests.items()
            if nid.split("::")[-1] not in targets
        ),
        "long": len(long),
        "judged": len(judged),
        "slowed": len(slowed),
        "caught": sum(t["status"] == "regressed" for t in slowed),
        "caught_named": sum(_regressed_on(t, KERNEL) for t in slowed),
        "seconds": run["seconds"],
        "pairs": _pairs(run["output"]),
        "time": next((x for x in run["output"].splitlines() if x.startswith("time: ")), ""),
        "offset": next((x for x in run["output"].splitlines() if x.startswith("offset ")), ""),
        # Ops judged across the run's tests (pytest_opprof/ab/across.py): in an A/A run
        # each one regressed or improved is a false verdict that fails the run.
        "ops_regressed": [o["op"] for o in run.get("ab_ops", []) if o["status"] == "regressed"],
        "ops_improved": [o["op"] for o in run.get("ab_ops", []) if o["status"] == "improved"],
        "ops_pooled": len(run.get("ab_ops", [])),
    }


TIME_PARTS = (
    re.compile(r"time: start (?P<start>[\d.]+) s"),
    re.compile(
        r"rounds (?P<rounds>[\d.]+) s \(base side (?P<base>[\d.]+) s, .*head (?P<head>[\d.]+) s\)"
    ),
)


def time_split(line: str) -> dict[str, float]:
    """The seconds an A/B run's ``time:`` line gives: its start, its rounds, and of those
    the base side's and the head's (each only where the line has it)."""
    out: dict[str, float] = {}
    for part in TIME_PARTS:
        found = part.search(line)
        if found:
            out.update({k: float(v) for k, v in found.groupdict().items()})
    return out


def _pairs(output: str) -> str:
    return next((line for line in output.splitlines() if line.startswith("pairs: ")), "")


def sequential(runner: Runner, slow: dict[str, float], tolerance: float, tag: str) -> set[str]:
    """asv-continuous style: 3 base runs, then 3 head runs; the tests whose median head
    wall time exceeds the median base wall time by ``tolerance``."""
    walls: dict[str, dict[str, list[float]]] = {"base": {}, "head": {}}
    for side, head_slow in (("base", {}), ("head", slow)):
        set_head(runner.root, head_slow)
        for i in range(SEQUENTIAL_RUNS):
            run = runner.report(f"seq-{tag}-{side}-{i}", "--opprof-rounds=1")
            for nid, t in run["tests"].items():
                walls[side].setdefault(nid.split("::")[-1], []).append(
                    t["summary"]["wall_time"]["median_ns"]
                )
    set_head(runner.root, {})
    return {
        name
        for name, base in walls["base"].items()
        if name in walls["head"]
        and statistics.median(walls["head"][name]) > statistics.median(base) * (1 + tolerance)
    }


def committed(runner: Runner, slow: dict[str, float], tag: str) -> dict[str, Any]:
    """3 update runs of the base, then the gate on the head (the plugin's defaults)."""
    baselines = runner.root / "baselines" / tag
    set_head(runner.root, {})
    for i in range(UPDATE_RUNS):
        runner.report(
            f"gate-{tag}-update-{i}",
            f"--opprof-baseline-dir={baselines}",
            "--opprof-update-baselines",
        )
    set_head(runner.root, slow)
    run = runner.report(f"gate-{tag}", f"--opprof-baseline-dir={baselines}")
    set_head(runner.root, {})
    return run


def benchmark(runner: Runner, slow: dict[str, float], tag: str) -> set[str] | None:
    if runner.scenario == "n2":
        return None
    storage = f".bm-{tag}"
    set_head(runner.root, {})
    runner_env = runner.env
    for compare, head_slow in ((None, {}), ("0001", slow)):
        set_head(runner.root, head_slow)
        cmd = benchmark_cmd(runner.root, compare, 0.2, storage)
        proc = subprocess.run(cmd, cwd=runner.root, env=runner_env, capture_output=True, text=True)
        if compare is not None:
            set_head(runner.root, {})
            return set(BENCH_FLAGGED.findall(proc.stdout + proc.stderr))
    return None


def numpy_suite(args: argparse.Namespace, root: Path, scenario: str, repeat: int) -> dict[str, Any]:
    """numpy's own test_linalg, A/A, then with svd ``--numpy-slowdown`` slower in the head;
    the targets: the tests whose svd took >= 1 ms in the A/A run."""
    runner = Runner(root, scenario, args.seed * 1000 + repeat, args.keep_reports)
    out: dict[str, Any] = {"scenario": scenario, "suite": "numpy", "repeat": repeat}
    with condition(scenario, args.seed * 1000 + repeat):
        set_head(root, {})
        aa = runner.report(f"np-aa-{scenario}-{repeat}", "--opprof-against=HEAD", suite="numpy")
        targets = numpy_targets(aa)
        out["ab_aa"] = score_ab(aa, set())
        out["plain_seconds"] = runner.pytest("-p", "no:benchmark", "np", "-k", NUMPY_DESELECT)[0]
        set_head(root, {}, svd=args.numpy_slowdown)
        slow = runner.report(f"np-slow-{scenario}-{repeat}", "--opprof-against=HEAD", suite="numpy")
        set_head(root, {})
        tests = slow["tests"]
        present = [t for nid, t in tests.items() if nid in targets]
        out["ab_slow"] = {
            **score_ab(slow, set()),
            # svd is slower in every test that calls it: a test under the 1 ms floor in
            # the A/A run that fails naming it is a catch, not a false failure.
            "false": sum(
                t["status"] == "regressed" and not _regressed_on(t, NUMPY_OP)
                for nid, t in tests.items()
                if nid not in targets
            ),
            "slowed": len(present),
            "caught": sum(t["status"] == "regressed" for t in present),
            "caught_named": sum(_regressed_on(t, NUMPY_OP) for t in present),
        }
    return out


def real_suite(
    args: argparse.Namespace, root: Path, scenario: str, repeat: int, suite: str
) -> dict[str, Any]:
    """A real suite of :data:`REAL` A/A: every failure is false; the share of its tests of
    >= 1 ms whose time was decided; the cost against a plain run."""
    runner = Runner(root, scenario, args.seed * 1000 + repeat, args.keep_reports)
    out: dict[str, Any] = {"scenario": scenario, "suite": suite, "repeat": repeat}
    with condition(scenario, args.seed * 1000 + repeat):
        set_head(root, {})
        name = f"{REAL[suite]}-aa-{scenario}-{repeat}"
        aa = runner.report(name, "--opprof-against=HEAD", suite=suite)
        out["ab_aa"] = score_ab(aa, set())
        out["plain_seconds"] = runner.pytest("-p", "no:benchmark", REAL[suite])[0]
    out["ab_slow"] = {"judged": 0, "long": 0, "caught_named": 0, "slowed": 0}
    return out


def one(
    args: argparse.Namespace, root: Path, kernels: dict[str, int], scenario: str, repeat: int
) -> dict[str, Any]:
    seed = args.seed * 1000 + repeat
    rng = random.Random(seed)
    targets = set(rng.sample(sorted(kernels), len(kernels) // 2))
    slow = {name: 1 + args.slowdown for name in targets}
    runner = Runner(root, scenario, seed, args.keep_reports)
    out: dict[str, Any] = {"scenario": scenario, "repeat": repeat, "load": loadavg()}
    with condition(scenario, seed):
        set_head(root, {})
        out["ab_aa"] = score_ab(
            runner.report(f"ab-aa-{scenario}-{repeat}", "--opprof-against=HEAD"), set()
        )
        plain = runner.pytest("-p", "no:benchmark", "opprof")[0]
        out["plain_seconds"] = plain
        set_head(root, slow)
        out["ab_slow"] = score_ab(
            runner.report(f"ab-slow-{scenario}-{repeat}", "--opprof-against=HEAD"), targets
        )
        set_head(root, {})
        if args.comparators:
            tag = f"{scenario}-{repeat}"
            tol = args.tolerance
            seq_aa = sequential(runner, {}, tol, f"aa-{tag}")
            seq_slow = sequential(runner, slow, tol, f"slow-{tag}")
            out["sequential"] = {
                "false": len(seq_aa),
                "caught": len(seq_slow & targets),
                "false_in_slowed_run": len(seq_slow - targets),
            }
            gate_aa = committed(runner, {}, f"aa-{tag}")
            gate_slow = committed(runner, slow, f"slow-{tag}")
            out["committed"] = {
                "false": sum(t["status"] == "regressed" for t in gate_aa["tests"].values()),
                "caught": sum(
                    _regressed_on(t, KERNEL)
                    for nid, t in gate_slow["tests"].items()
                    if nid.split("::")[-1] in targets
                ),
            }
            bm_aa = benchmark(runner, {}, f"aa-{tag}")
            bm_slow = benchmark(runner, slow, f"slow-{tag}")
            out["benchmark"] = (
                None
                if bm_aa is None or bm_slow is None
                else {"false": len(bm_aa), "caught": len(bm_slow & targets)}
            )
    out["targets"] = len(targets)
    return out


def _rate(n: int, d: int) -> str:
    return f"{n}/{d} ({n / d:.0%})" if d else "n/a"


def markdown(results: list[dict[str, Any]]) -> str:
    """One table row per scenario and suite: A/A false failures, share judged, detection,
    cost; and the comparators' false failures and detection where they ran."""
    rows = [
        "| scenario | suite | A/B false (A/A) | judged >= 1 ms | caught, named first | "
        "ops across tests: false (A/A) / slowed op found | "
        "pairs | cost vs plain (without the start) | sequential false / caught | "
        "committed false / caught | "
        "pytest-benchmark false / caught |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    keys = sorted({(r["scenario"], r.get("suite", "synth")) for r in results})
    for scenario, suite in keys:
        rs = [r for r in results if r["scenario"] == scenario and r.get("suite", "synth") == suite]
        aa = [r["ab_aa"] for r in rs]
        sl = [r["ab_slow"] for r in rs]
        false = sum(a["false"] for a in aa)
        tests = sum(a["tests"] for a in aa)
        judged = sum(a["judged"] for a in aa + sl)
        long = sum(a["long"] for a in aa + sl)
        caught = sum(a["caught_named"] for a in sl)
        slowed = sum(a["slowed"] for a in sl)
        cost = statistics.median(r["ab_aa"]["seconds"] / r["plain_seconds"] for r in rs)
        bare = statistics.median(
            (r["ab_aa"]["seconds"] - _start_s(r["ab_aa"])) / r["plain_seconds"] for r in rs
        )

        def other(name: str, rs: list[dict[str, Any]] = rs) -> str:
            got: list[dict[str, Any]] = [r[name] for r in rs if r.get(name) is not None]
            if not got:
                return "n/a"
            f = sum(g["false"] for g in got)
            c = sum(g["caught"] for g in got)
            t = sum(r["targets"] for r in rs if r.get(name) is not None)
            return f"{f} / {_rate(c, t)}"

        pairs = "; ".join(a["pairs"].split(";")[0].removeprefix("pairs: ") for a in aa[:1])
        ops_false = sum(
            len(a.get("ops_regressed", [])) + len(a.get("ops_improved", [])) for a in aa
        )
        ops_pooled = sum(a.get("ops_pooled", 0) for a in aa)
        slowed_op = {"numpy": NUMPY_OP, "synth": KERNEL}.get(suite)
        found = (
            f"{sum(slowed_op in a.get('ops_regressed', []) for a in sl)}/{len(sl)} runs"
            if slowed_op
            else "n/a"
        )
        rows.append(
            f"| {scenario} | {suite} | {_rate(false, tests)} | {_rate(judged, long)} | "
            f"{_rate(caught, slowed)} | {_rate(ops_false, ops_pooled)} / {found} | "
            f"{pairs} | x{cost:.1f} (x{bare:.1f}) | "
            f"{other('sequential')} | "
            f"{other('committed')} | {other('benchmark')} |"
        )
    return "\n".join([*rows, "", *where_time_goes(results)])


def _start_s(run: dict[str, Any]) -> float:
    return time_split(run.get("time", "")).get("start", 0.0)


def where_time_goes(results: list[dict[str, Any]]) -> list[str]:
    """Per scenario and suite, the A/A run's seconds (medians over the repeats): the plain
    run, the A/B run, its start and its rounds (base side with its hand-offs; head), and
    the rest of the A/B run."""
    rows = [
        "| scenario | suite | plain | A/B | start | rounds (base side; head) | rest |",
        "|---|---|---|---|---|---|---|",
    ]
    for scenario, suite in sorted({(r["scenario"], r.get("suite", "synth")) for r in results}):
        rs = [r for r in results if r["scenario"] == scenario and r.get("suite", "synth") == suite]
        splits = [time_split(r["ab_aa"].get("time", "")) for r in rs]

        def med(values: list[float]) -> float:
            return statistics.median(values) if values else float("nan")

        whole = [r["ab_aa"]["seconds"] for r in rs]
        part = {
            k: med([t.get(k, 0.0) for t in splits]) for k in ("start", "rounds", "base", "head")
        }
        rest = med(
            [
                w - t.get("start", 0.0) - t.get("rounds", 0.0)
                for w, t in zip(whole, splits, strict=True)
            ]
        )
        rows.append(
            f"| {scenario} | {suite} | {med([r['plain_seconds'] for r in rs]):.1f} s | "
            f"{med(whole):.1f} s | {part['start']:.1f} s | {part['rounds']:.1f} s "
            f"({part['base']:.1f}; {part['head']:.1f}) | {rest:.1f} s |"
        )
    return rows


def plot(results: list[dict[str, Any]], path: Path) -> None:
    """False failures and detection per method and scenario (synthetic suite)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    synth = [r for r in results if r.get("suite", "synth") == "synth"]
    scenarios = sorted({r["scenario"] for r in synth}, key=SCENARIOS.index)
    methods = [
        ("interleaved A/B", "ab"),
        ("sequential A/B", "sequential"),
        ("committed baselines", "committed"),
        ("pytest-benchmark", "benchmark"),
    ]
    fig, (ax_f, ax_d) = plt.subplots(1, 2, figsize=(11, 4))
    width = 0.2
    for i, (label, key) in enumerate(methods):
        false, caught = [], []
        for sc in scenarios:
            rs = [r for r in synth if r["scenario"] == sc]
            if key == "ab":
                n = sum(r["ab_aa"]["tests"] for r in rs)
                false.append(100 * sum(r["ab_aa"]["false"] for r in rs) / max(n, 1))
                t = sum(r["ab_slow"]["slowed"] for r in rs)
                caught.append(100 * sum(r["ab_slow"]["caught_named"] for r in rs) / max(t, 1))
            else:
                got = [r for r in rs if r.get(key)]
                n = sum(r["ab_aa"]["tests"] for r in got)
                t = sum(r["targets"] for r in got)
                false.append(100 * sum(r[key]["false"] for r in got) / n if n else float("nan"))
                caught.append(100 * sum(r[key]["caught"] for r in got) / t if t else float("nan"))
        xs = [j + i * width for j in range(len(scenarios))]
        ax_f.bar(xs, false, width, label=label)
        ax_d.bar(xs, caught, width, label=label)
    for ax, title in (
        (ax_f, "false failures, % of unchanged tests (A/A)"),
        (ax_d, "slowed tests caught, %"),
    ):
        ax.set_xticks([j + 1.5 * width for j in range(len(scenarios))], scenarios)
        ax.set_title(title, fontsize=10)
    ax_d.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=90)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--scenario", default=",".join(SCENARIOS))
    p.add_argument("--tests", type=int, default=40)
    p.add_argument("--repeats", type=int, default=2)
    p.add_argument("--slowdown", type=float, default=0.10)
    p.add_argument(
        "--suite", default="synth,numpy,scipy", help="any of synth, numpy, scipy, examples"
    )
    p.add_argument(
        "--numpy-slowdown",
        type=float,
        default=0.10,
        help="how much slower svd runs in the head of the numpy suite",
    )
    p.add_argument(
        "--tolerance",
        type=float,
        default=DEFAULT_AB_TIME_TOLERANCE,
        help="the sequential A/B's tolerance (the A/B default)",
    )
    p.add_argument("--seed", type=int, default=1)
    p.add_argument(
        "--comparators",
        action="store_true",
        help="also run sequential A/B, committed baselines and pytest-benchmark",
    )
    p.add_argument("--json", type=Path)
    p.add_argument(
        "--keep-reports", type=Path, metavar="DIR", help="copy each run's JSON report here"
    )
    p.add_argument("--plot", type=Path, help="a PNG of false failures and detection")
    args = p.parse_args()
    results = []
    with tempfile.TemporaryDirectory(prefix="opprof-ab-study-") as tmp:
        root = Path(tmp)
        kernels = make_repo(root, args.tests, args.seed)
        print(
            f"# {machine_line()}, {now_utc()}; {args.tests} tests, {len(kernels)} with a "
            f"kernel; slowdown +{args.slowdown:.0%}",
            flush=True,
        )
        for scenario in args.scenario.split(","):
            for repeat in range(args.repeats):
                if "synth" in args.suite:
                    result = one(args, root, kernels, scenario, repeat)
                    results.append(result)
                    print(json.dumps(result), flush=True)
                if "numpy" in args.suite:
                    result = numpy_suite(args, root, scenario, repeat)
                    results.append(result)
                    print(json.dumps(result), flush=True)
                for suite in REAL:
                    if suite in args.suite.split(","):
                        result = real_suite(args, root, scenario, repeat, suite)
                        results.append(result)
                        print(json.dumps(result), flush=True)
    print(markdown(results))
    if args.plot is not None:
        plot(results, args.plot)
    if args.json is not None:
        args.json.write_text(
            json.dumps(
                {
                    "machine": machine_line(),
                    "args": {
                        k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()
                    },
                    "results": results,
                },
                indent=1,
            )
        )


if __name__ == "__main__":
    main()
