"""Verdict quality on busy machines: the real plugin end to end, beside pytest-benchmark.

A sibling of ``verdict_study.py`` (same generated suite: numpy ops and a 1-4 ms
``kernel`` scope in most tests), but nothing is re-scored offline: every opprof
session is ``pytest --opprof`` with the plugin's defaults (``--opprof-rounds
auto``: its busy-round replacement and confirmation rounds included), scored from
its JSON report (``--opprof-report``: each test's verdict status, ``time_judged``,
``time_not_judged`` and the reasons naming ops), so contention is handled as users
get it.  Per scenario:

1. baseline: 3 update runs (``--opprof-update-baselines``, the README's recording;
   the plugin pools them) in the scenario's *recording* condition;
2. ``--sessions`` unchanged gate runs in its *judging* condition: a test whose
   verdict is ``regressed`` is a false failure;
3. one gate run with +``--slowdown`` injected into the ``kernel`` scope of a random
   half of the tests that have one (all kernels are >= 1 ms): detected = the test
   regressed and a regressed reason names ``kernel``; the rate is given among the
   slowed tests whose time was judged (the goal's measure) and among all of them;
4. cost: a gate run's wall seconds over a plain ``pytest`` run of the same tests in
   the same condition.

pytest-benchmark runs the same tests in the same conditions (one saved session,
the same unchanged and slowed ones, ``--benchmark-compare-fail=mean:10%``).  It
disables itself under pytest-xdist and cannot time tests that do not use its
fixture (numpy's own), so those cells say n/a.

Scenarios (``--scenario``, comma-separated): ``quiet``; ``loaded`` (one CPU-bound
process per core during recording and judging); ``n2`` (``-n 2``, recording and
judging); ``loaded-base`` (baseline recorded loaded, judged quiet) and
``quiet-base`` (recorded quiet, judged loaded), which reuse the baselines of
``loaded`` and ``quiet`` when those ran; ``numpy`` (numpy's own ``test_linalg``,
heaviest cases deselected, quiet; the slowed run makes ``numpy.linalg.svd`` 30%
slower from inside, ``NUMPY_INJECT``, and the targets are the tests whose svd took
>= 1 ms of self time in the first unchanged run); ``scipy`` and ``sklearn`` (some of
scipy.linalg's and scikit-learn's ``linear_model`` installed tests, :data:`REAL_SUITES`,
quiet) and their ``-loaded`` twins: unchanged runs only (false failures, share judged,
cost).

    python bench/busy_study.py [--scenario quiet,loaded] [--tests 100] [--sessions 3]
                               [--json out.json] [--plot out.png]

Time on 2 cores (measured with other work running, load 2-5): ``quiet`` with 120 tests
and one unchanged session took 5 min (an opprof session 39 s, a pytest-benchmark one
30 s); loaded with 100 tests, an update run 40-48 s and a gate run 88 s (its busy rounds
re-run).  All scenarios with the defaults: about 40 min (quiet 6, loaded 13, n2 4,
loaded-base 4, quiet-base 10, numpy 5).  ``--tests`` and ``--sessions`` scale it.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from _common import SINGLE_THREADED, cpu_burners, loadavg, plugin_args, subprocess_env
from verdict_study import BENCH_FLAGGED, KERNEL, PYTHON, benchmark_cmd, generate, name_of
from verdict_study import iterations_per_ms as _iterations_per_ms

UPDATE_RUNS = 3
SCENARIOS = (
    "quiet",
    "loaded",
    "n2",
    "loaded-base",
    "quiet-base",
    "numpy",
    "heavy",
    "scipy",
    "scipy-loaded",
    "sklearn",
    "sklearn-loaded",
)
DEFAULT_SCENARIOS = SCENARIOS[:6]
"""The standing scenarios; ``heavy`` (twice the load) and the other real suites run when
asked for."""
# Other projects' suites as installed (where gates that judge times often fail
# unchanged code), run unchanged only: no slowdown is injected there, so
# they give false failures, the share judged and the cost, not detection.
REAL_SUITES = {
    "scipy": (
        "scipy.linalg.tests.test_basic",
        "scipy.linalg.tests.test_decomp",
        "scipy.linalg.tests.test_decomp_cholesky",
        "scipy.linalg.tests.test_decomp_lu",
        "scipy.linalg.tests.test_matfuncs",
        "scipy.linalg.tests.test_solvers",
    ),
    "sklearn": (
        "sklearn.linear_model.tests.test_ridge",
        "sklearn.linear_model.tests.test_base",
    ),
    "sklearn-base": ("sklearn.linear_model.tests.test_base",),
    "scipy-spectral": ("scipy.signal.tests.test_spectral",),
}
NUMPY_MODULES = ("numpy.linalg.tests.test_linalg",)
# The generalized (stacked) cases and one BLAS regression test are 80% of the module's
# time under --opprof (10-100 ms a round, up to 10 rounds each): without them a gate run
# stays near a minute on 2 cores, with them it takes 5.
NUMPY_DESELECT = "not generalized and not sdot_bug_8577"
NUMPY_OP = "numpy.linalg.svd"
# The slowdown goes *inside* numpy.linalg.svd: the plugin times the op from its
# dispatcher's C entry, and svd's Python body calls the gufuncs of _umath_linalg
# through its module global, so a wrapper there busy-waits within the op (a wrapper
# around the public name would land in the caller, and the test modules imported
# the name before any conftest runs).  The wait is the given share of the gufunc's
# own elapsed time: +30% of svd's work, not a fixed amount.
NUMPY_INJECT = """
import os
import time

_SHARE = float(os.environ.get("OPPROF_STUDY_SLOW_SVD", "0"))
if _SHARE:
    import numpy.linalg._linalg as _linalg

    # Only the svd gufuncs are replaced: a proxy module in front of every linalg gufunc
    # made det, eig, inv and solve a Python call slower too, and failed their tests.
    def _slower(gufunc):
        def slower(*args, **kwargs):
            t0 = time.perf_counter()
            out = gufunc(*args, **kwargs)
            end = time.perf_counter() + (time.perf_counter() - t0) * _SHARE
            while time.perf_counter() < end:
                pass
            return out

        return slower

    for _name in [n for n in dir(_linalg._umath_linalg) if n.startswith("svd")]:
        setattr(_linalg._umath_linalg, _name, _slower(getattr(_linalg._umath_linalg, _name)))
"""


@dataclass(frozen=True)
class Condition:
    """How a session runs: with ``burners`` CPU-bound processes per core or none, under
    ``-n workers`` or not (0)."""

    burners: int = 0
    workers: int = 0

    @property
    def loaded(self) -> bool:
        return self.burners > 0

    @property
    def label(self) -> str:
        load = f"loaded ({self.burners}/core)" if self.loaded else "quiet"
        parts = [load] + ([f"-n {self.workers}"] if self.workers else [])
        return ", ".join(parts)

    def args(self) -> list[str]:
        return ["-n", str(self.workers)] if self.workers else []


# The loaded machine: 2 CPU-bound processes on 2 cores.  HEAVY doubles it (load
# 4-5 on 2 cores): rounds then wait 80-90% of their time, past what work time judges.
QUIET, LOADED, N2 = Condition(), Condition(burners=1), Condition(workers=2)
HEAVY = Condition(burners=2)


@dataclass(frozen=True)
class Scenario:
    name: str
    suite: str
    """``synth`` (the generated suite), ``numpy`` or a :data:`REAL_SUITES` key."""
    record: Condition
    judge: Condition
    baseline: str
    """Key of the baseline it judges against: scenarios with the same key share it."""


SCENARIO_SPECS = {
    "quiet": Scenario("quiet", "synth", QUIET, QUIET, "synth-quiet"),
    "loaded": Scenario("loaded", "synth", LOADED, LOADED, "synth-loaded"),
    "n2": Scenario("n2", "synth", N2, N2, "synth-n2"),
    "loaded-base": Scenario("loaded-base", "synth", LOADED, QUIET, "synth-loaded"),
    "quiet-base": Scenario("quiet-base", "synth", QUIET, LOADED, "synth-quiet"),
    "numpy": Scenario("numpy", "numpy", QUIET, QUIET, "numpy-quiet"),
    "heavy": Scenario("heavy", "synth", HEAVY, HEAVY, "synth-heavy"),
    "scipy": Scenario("scipy", "scipy", QUIET, QUIET, "scipy-quiet"),
    "scipy-loaded": Scenario("scipy-loaded", "scipy", LOADED, LOADED, "scipy-loaded"),
    "sklearn": Scenario("sklearn", "sklearn", QUIET, QUIET, "sklearn-quiet"),
    "sklearn-loaded": Scenario("sklearn-loaded", "sklearn", LOADED, LOADED, "sklearn-loaded"),
}


@contextlib.contextmanager
def condition(cond: Condition) -> Iterator[None]:
    """The machine state ``cond`` asks for, around one session."""
    if not cond.loaded:
        yield
        return
    # 900 s: longer than any one session here (the longest, loaded, is a few minutes),
    # short enough that burners orphaned by a killed study end soon by themselves.
    with cpu_burners(per_core=cond.burners, seconds=900):
        yield


@dataclass
class Study:
    """What every session needs: the suite's folder, the environment, the log."""

    root: Path
    args: argparse.Namespace
    log: list[dict[str, Any]]

    def env(self, extra: dict[str, str]) -> dict[str, str]:
        env = subprocess_env(**extra, PYTHONPATH=str(self.root))
        if not self.args.pin_blas:
            # As users run it: BLAS threads as the environment has them.
            for name in SINGLE_THREADED:
                if name in os.environ:
                    env[name] = os.environ[name]
                else:
                    env.pop(name, None)
        return env

    def run(
        self, what: str, cmd: list[str], cond: Condition, extra: dict[str, str]
    ) -> dict[str, Any]:
        """Run one session in ``cond`` (``extra``: environment variables, the injected
        slowdown); log and return wall seconds, load, exit status."""
        with condition(cond):
            load = loadavg()
            t0 = time.perf_counter()
            proc = subprocess.run(
                cmd, cwd=self.root, env=self.env(extra), capture_output=True, text=True
            )
            seconds = time.perf_counter() - t0
            load_end = loadavg()
        info = {
            "session": what,
            "condition": cond.label,
            "seconds": seconds,
            "load": load,
            "load_end": load_end,
            "rc": proc.returncode,
        }
        self.log.append(info)
        print(
            f"  {what} ({cond.label}): {seconds:.1f}s load {load:.2f}-{load_end:.2f} "
            f"rc {proc.returncode}",
            flush=True,
        )
        return {**info, "output": proc.stdout + proc.stderr}


# -- sessions ------------------------------------------------------------------


def _site() -> str:
    spec = importlib.util.find_spec("numpy")
    assert spec is not None and spec.origin is not None
    return str(Path(spec.origin).parent.parent)


def target_args(suite: str) -> list[str]:
    """The tests a session runs, the way the README tells users to name them."""
    if suite == "synth":
        return ["opprof"]
    # rootdir above the package: node ids name their module, and baselines have a path
    # under it.
    if suite in REAL_SUITES:
        return [f"--rootdir={_site()}", "--pyargs", *REAL_SUITES[suite]]
    # busy_inject: NUMPY_INJECT, a no-op unless the slowed session asks for it.
    args = [f"--rootdir={_site()}", "-p", "busy_inject", "-k", NUMPY_DESELECT]
    return [*args, "--pyargs", *NUMPY_MODULES]


def pytest_cmd(suite: str, cond: Condition) -> list[str]:
    cmd = [PYTHON, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly"]
    return [*cmd, "-p", "no:benchmark", *cond.args(), *plugin_args(), *target_args(suite)]


def opprof_session(
    study: Study,
    what: str,
    scenario: Scenario,
    cond: Condition,
    *,
    update: bool = False,
    extra: dict[str, str] | None = None,
) -> dict[str, Any]:
    """One ``pytest --opprof`` session with the defaults; its JSON report's tests."""
    report = study.root / "reports" / f"{scenario.name}-{what}.json"
    report.parent.mkdir(exist_ok=True)
    cmd = [*pytest_cmd(scenario.suite, cond), "--opprof"]
    cmd += [f"--opprof-baseline-dir={study.root / 'baselines' / scenario.baseline}"]
    cmd += [f"--opprof-report={report}", "--opprof-report-details"]
    if update:
        cmd += ["--opprof-update-baselines"]
    info = study.run(f"{scenario.name} opprof {what}", cmd, cond, extra or {})
    if not report.exists():
        raise RuntimeError(f"opprof session wrote no report:\n{info['output'][-3000:]}")
    tests: dict[str, Any] = json.loads(report.read_text())["tests"]
    return {"seconds": info["seconds"], "tests": tests}


def plain_session(study: Study, scenario: Scenario, cond: Condition) -> float:
    """Wall seconds of a plain ``pytest`` run of the same tests in ``cond``."""
    info = study.run(f"{scenario.name} plain", pytest_cmd(scenario.suite, cond), cond, {})
    return float(info["seconds"])


def benchmark_session(
    study: Study, what: str, storage: str, cond: Condition, compare: bool, slow: dict[str, float]
) -> dict[str, Any]:
    """One pytest-benchmark session (``slow``: {test name: kernel work factor})."""
    cmd = benchmark_cmd(
        study.root, "0001" if compare else None, study.args.benchmark_max_time, storage
    )
    info = study.run(f"pytest-benchmark {what}", cmd, cond, _slow_env(slow))
    text = info["output"]
    if compare and "Performance has regressed" not in text and info["rc"]:
        raise RuntimeError(f"pytest-benchmark session failed:\n{text[-3000:]}")
    return {"seconds": info["seconds"], "flagged": set(BENCH_FLAGGED.findall(text))}


# -- scoring -------------------------------------------------------------------


def _regressed_on(test: dict[str, Any], op: str) -> bool:
    """The test failed and its failure names ``op`` first among the slower ops: regressed
    on its own, or (a test-level time regressed; op times of contended rounds are never
    judged) the first explanation.  The report lists reasons regressed first, then by
    impact, as the failure text does."""
    if test["status"] != "regressed":
        return False
    slower = [r for r in test["verdict"]["reasons"] if r["kind"] == "slower"]
    return bool(slower) and slower[0]["op"] == op


def score_unchanged(unchanged: list[dict[str, Any]]) -> dict[str, Any]:
    """False failures and the share judged from the unchanged gate runs' JSON reports."""
    runs = [r["tests"] for r in unchanged]
    n = sum(len(tests) for tests in runs)
    false = sum(t["status"] == "regressed" for tests in runs for t in tests.values())
    judged = sum(bool(t["verdict"]["time_judged"]) for tests in runs for t in tests.values())
    busy = sum(
        t["verdict"]["time_not_judged"] is not None for tests in runs for t in tests.values()
    )
    return {
        "false": false,
        "runs_x_tests": n,
        "false_rate": false / max(1, n),
        "judged_share": judged / max(1, n),
        "not_judged_busy_share": busy / max(1, n),
        "gate_seconds": statistics.median(r["seconds"] for r in unchanged),
    }


def score_opprof(
    unchanged: list[dict[str, Any]],
    slowed_run: dict[str, Any],
    targets: set[str],
    op: str,
) -> dict[str, Any]:
    """:func:`score_unchanged`, and detection from the slowed run's report; ``targets``:
    node ids of the slowed tests, ``op``: the op slowed in them."""
    tests = slowed_run["tests"]
    present = [t for nid, t in tests.items() if nid in targets]
    judged_slowed = [t for t in present if t["verdict"]["time_judged"]]
    detected_judged = sum(_regressed_on(t, op) for t in judged_slowed)
    detected_all = sum(_regressed_on(t, op) for t in present)
    return {
        **score_unchanged(unchanged),
        "slowed": len(targets),
        "slowed_judged": len(judged_slowed),
        "detected_judged": detected_judged,
        "detected_all": detected_all,
        # None: no slowed test had its time judged, so the goal's measure is undefined.
        "detection_rate": detected_judged / len(judged_slowed) if judged_slowed else None,
        "detection_rate_all": detected_all / max(1, len(targets)),
        "false_in_slowed_run": sum(
            t["status"] == "regressed" for nid, t in tests.items() if nid not in targets
        ),
    }


def numpy_targets(run: dict[str, Any]) -> set[str]:
    """Tests of ``run`` in which ``NUMPY_OP`` took >= 1 ms of self time (median)."""
    return {
        nid
        for nid, t in run["tests"].items()
        if t["ops"].get(NUMPY_OP, {}).get("self_cpu_time", {}).get("median_ns", 0) >= 1_000_000
    }


def _slow_env(slow: dict[str, float]) -> dict[str, str]:
    return {"OPPROF_STUDY_SLOW": json.dumps(slow)}


def score_benchmark(
    unchanged: list[dict[str, Any]], slowed_run: dict[str, Any], slowed: list[str], n_tests: int
) -> dict[str, Any]:
    false = sum(len(r["flagged"]) for r in unchanged)
    n = n_tests * len(unchanged)
    detected = len(slowed_run["flagged"] & set(slowed))
    return {
        "false": false,
        "runs_x_tests": n,
        "false_rate": false / max(1, n),
        "judged_share": 1.0,
        "slowed": len(slowed),
        "detected_all": detected,
        "detection_rate": detected / max(1, len(slowed)),
        "false_in_slowed_run": len(slowed_run["flagged"] - set(slowed)),
        "gate_seconds": statistics.median(r["seconds"] for r in unchanged),
    }


# -- scenarios -----------------------------------------------------------------


def run_scenario(
    study: Study,
    scenario: Scenario,
    recorded: set[str],
    saved: set[str],
    slow: dict[str, float],
) -> dict[str, Any]:
    """Every session of ``scenario``; ``recorded``/``saved``: baselines that exist already
    (reused, and updated with the ones this scenario records)."""
    args = study.args
    first = len(study.log)
    print(f"== {scenario.name}: recorded {scenario.record.label}, judged {scenario.judge.label}")
    if scenario.baseline not in recorded:
        for i in range(UPDATE_RUNS):
            opprof_session(study, f"update-{i}", scenario, scenario.record, update=True)
        recorded.add(scenario.baseline)
    plain = plain_session(study, scenario, scenario.judge)
    unchanged = [
        opprof_session(study, f"unchanged-{i}", scenario, scenario.judge)
        for i in range(args.sessions)
    ]
    synth = scenario.suite == "synth"
    op: str | None
    if scenario.suite in REAL_SUITES:
        opprof, op = score_unchanged(unchanged), None
    elif synth:
        slowed_run = opprof_session(
            study, "slowed", scenario, scenario.judge, extra=_slow_env(slow)
        )
        targets = {nid for nid in slowed_run["tests"] if name_of(nid) in slow}
        op = KERNEL
        opprof = score_opprof(unchanged, slowed_run, targets, op)
    else:
        slowed_run = opprof_session(
            study,
            "slowed",
            scenario,
            scenario.judge,
            extra={"OPPROF_STUDY_SLOW_SVD": str(args.slowdown)},
        )
        targets, op = numpy_targets(unchanged[0]), NUMPY_OP
        opprof = score_opprof(unchanged, slowed_run, targets, op)
    opprof["cost"] = opprof["gate_seconds"] / plain
    result: dict[str, Any] = {
        "scenario": scenario.name,
        "recorded": scenario.record.label,
        "judged": scenario.judge.label,
        "plain_seconds": plain,
        "tests": len(unchanged[0]["tests"]),
        "slowed_op": op,
        "opprof": opprof,
    }
    if not synth:
        result["pytest_benchmark"] = (
            f"n/a: {scenario.suite}'s tests do not use the benchmark fixture"
        )
    elif scenario.judge.workers or scenario.record.workers:
        result["pytest_benchmark"] = "n/a: pytest-benchmark disables itself under pytest-xdist"
    elif not args.benchmark:
        result["pytest_benchmark"] = "not run (--no-benchmark)"
    else:
        storage = f".bm-{scenario.baseline}"
        if storage not in saved:
            benchmark_session(study, f"{scenario.name} save", storage, scenario.record, False, {})
            saved.add(storage)
        bench_unchanged = [
            benchmark_session(
                study, f"{scenario.name} unchanged-{i}", storage, scenario.judge, True, {}
            )
            for i in range(args.sessions)
        ]
        bench_slowed = benchmark_session(
            study, f"{scenario.name} slowed", storage, scenario.judge, True, slow
        )
        bench = score_benchmark(bench_unchanged, bench_slowed, sorted(slow), args.tests)
        bench_plain = study.run(
            f"{scenario.name} pytest-benchmark plain",
            # The saving command less its --benchmark-save: each test body runs once.
            [
                *(
                    arg
                    for arg in benchmark_cmd(study.root, None, args.benchmark_max_time, storage)
                    if not arg.startswith("--benchmark-save")
                ),
                "--benchmark-disable",
            ],
            scenario.judge,
            {},
        )
        bench["cost"] = bench["gate_seconds"] / bench_plain["seconds"]
        result["pytest_benchmark"] = bench
    sessions = study.log[first:]
    loads = [s["load"] for s in sessions] + [s["load_end"] for s in sessions]
    result["load"] = {"min": min(loads), "max": max(loads)}
    result["seconds"] = sum(s["seconds"] for s in sessions)
    return result


def run_study(args: argparse.Namespace) -> dict[str, Any]:
    names = [s for s in args.scenario.split(",") if s]
    rng = random.Random(args.seed)
    with contextlib.ExitStack() as stack:
        if args.keep is not None:
            args.keep.mkdir(parents=True, exist_ok=True)
            root = args.keep
        else:
            root = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="opprof-busy-")))
        ipm = _iterations_per_ms()
        kernels = generate(root, args.tests, ipm, args.seed)
        slowed = sorted(rng.sample(sorted(kernels), len(kernels) // 2))
        slow = {name: 1.0 + args.slowdown for name in slowed}
        (root / "busy_inject.py").write_text(NUMPY_INJECT)
        study = Study(root, args, [])
        recorded: set[str] = set()
        saved: set[str] = set()
        t0 = time.perf_counter()
        # Scenarios that record a baseline first, so the cross ones reuse theirs.
        order = sorted(names, key=lambda n: SCENARIO_SPECS[n].record != SCENARIO_SPECS[n].judge)
        results = {n: run_scenario(study, SCENARIO_SPECS[n], recorded, saved, slow) for n in order}
        total = time.perf_counter() - t0
    return {
        "tests": args.tests,
        "tests_with_kernel": len(kernels),
        "slowdown": args.slowdown,
        "sessions": args.sessions,
        "update_runs": UPDATE_RUNS,
        "pin_blas": args.pin_blas,
        "cores": os.cpu_count(),
        "seconds": total,
        "scenarios": [results[n] for n in names],
        "session_log": study.log,
    }


# -- output --------------------------------------------------------------------


def _pct(n: int, d: int) -> str:
    return f"{n}/{d} ({n / max(1, d):.1%})"


def _cells(tool: Any) -> list[str]:
    if not isinstance(tool, dict):
        return [str(tool)] + [""] * 4
    detection = "n/a"
    if "slowed" in tool:
        if "slowed_judged" in tool:
            of_judged = (
                _pct(tool["detected_judged"], tool["slowed_judged"])
                if tool["slowed_judged"]
                else "n/a (none judged)"
            )
            detection = (
                f"{of_judged} of judged; {_pct(tool['detected_all'], tool['slowed'])} of all"
            )
        else:
            detection = _pct(tool["detected_all"], tool["slowed"])
    return [
        _pct(tool["false"], tool["runs_x_tests"]),
        f"{tool['judged_share']:.1%}",
        detection,
        str(tool.get("false_in_slowed_run", "")),
        f"{tool['cost']:.1f}x",
    ]


def markdown(result: dict[str, Any]) -> str:
    """One table: a row per scenario and tool."""
    header = [
        "scenario",
        "tool",
        "false failures",
        "time judged",
        "detected +30%",
        "false in slowed run",
        "cost",
    ]
    rows = []
    for s in result["scenarios"]:
        load = f"load {s['load']['min']:.1f}-{s['load']['max']:.1f}"
        slowed = f"`{s['slowed_op']}` slowed" if s["slowed_op"] else "unchanged only"
        what = (
            f"{s['scenario']} (recorded {s['recorded']}, judged {s['judged']}; "
            f"{s['tests']} tests, {slowed}; {load})"
        )
        rows.append([what, "opprof defaults", *_cells(s["opprof"])])
        rows.append(["", "pytest-benchmark mean:10%", *_cells(s["pytest_benchmark"])])
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)


def plot_busy(result: dict[str, Any], path: Path) -> None:
    """Grouped bars per scenario: false-failure % and detection % of opprof and
    pytest-benchmark; the share of tests whose time opprof judged as a marker."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    scenarios = result["scenarios"]
    names = [s["scenario"] for s in scenarios]
    series = (
        ("opprof false %", "opprof", "false_rate", "#c44e52"),
        ("pytest-benchmark false %", "pytest_benchmark", "false_rate", "#e8a0a0"),
        ("opprof detected % (of judged)", "opprof", "detection_rate", "#4c72b0"),
        ("pytest-benchmark detected %", "pytest_benchmark", "detection_rate", "#9ab3d8"),
    )
    fig, ax = plt.subplots(figsize=(8, 4))
    width = 0.2
    for i, (label, tool, key, color) in enumerate(series):
        xs = [j + (i - 1.5) * width for j in range(len(names))]
        ys = []
        for s in scenarios:
            figures = s.get(tool)
            value = figures.get(key) if isinstance(figures, dict) else None
            ys.append(float("nan") if value is None else value * 100)
        ax.bar(xs, ys, width, label=label, color=color)
        for x, y in zip(xs, ys, strict=True):
            text = "n/a" if y != y else f"{y:.0f}"  # y != y: NaN, nothing measured
            ax.text(x, 0 if y != y else y, text, ha="center", va="bottom", fontsize=6)
    judged = [s["opprof"]["judged_share"] * 100 for s in scenarios]
    ax.scatter(
        range(len(names)),
        judged,
        marker="D",
        color="black",
        zorder=5,
        label="opprof: time judged %",
    )
    ax.axhline(1, color="grey", lw=0.8, ls="--")
    ax.axhline(90, color="grey", lw=0.8, ls=":")
    ax.set_xticks(range(len(names)), names)
    ax.set_ylim(0, 105)
    ax.set_ylabel("%")
    ax.set_title("Busy machines: false failures, detection of +30%, time judged (n/a: no bar)")
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    p.add_argument(
        "--scenario",
        default=",".join(DEFAULT_SCENARIOS),
        help=f"comma-separated, of {', '.join(SCENARIOS)} (default: all but heavy)",
    )
    p.add_argument("--tests", type=int, default=100, help="tests of the generated suite")
    p.add_argument("--sessions", type=int, default=3, help="unchanged gate runs per scenario")
    p.add_argument("--slowdown", type=float, default=0.3)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--benchmark-max-time", type=float, default=0.05)
    p.add_argument("--no-benchmark", dest="benchmark", action="store_false")
    p.add_argument(
        "--pin-blas",
        action="store_true",
        help="BLAS/OpenMP on one thread in every session (default: as the environment has it)",
    )
    p.add_argument("--json", type=Path, help="write the results here")
    p.add_argument("--plot", type=Path, help="write the grouped-bar plot (PNG) here")
    p.add_argument(
        "--keep",
        type=Path,
        help="generate and run the suite in DIR and keep it (reports, baselines)",
    )
    return p


def main() -> None:
    args = parser().parse_args()
    unknown = [s for s in args.scenario.split(",") if s and s not in SCENARIO_SPECS]
    if unknown:
        sys.exit(f"--scenario: unknown {', '.join(unknown)}; accepted: {', '.join(SCENARIOS)}")
    result = run_study(args)
    print(markdown(result))
    print(f"whole study: {result['seconds'] / 60:.1f} min")
    if args.json:
        args.json.write_text(json.dumps(result, indent=1, sort_keys=True))
    if args.plot:
        plot_busy(result, args.plot)


if __name__ == "__main__":
    main()
