"""CI check: numpy's own tests give exactly the same outcomes under ``pytest --opprof``.

Runs numpy's shipped test modules twice, each in a fresh ``python -m pytest``:
once plainly, once with the real plugin (``--opprof``: numpy capture and memory
figures for every test).  A small counting plugin records every test's outcome
(by node id and phase), and in the profiled run also how many tests opprof
profiled, the ops it saw, trampoline lookup misses and whether numpy's hooks were
gone at the end.  Exits non-zero unless the outcomes are identical test by test,
opprof profiled tests and saw ops, there were no misses and the hooks were removed.

    python tests/numpy_suite_check.py [--pairs N] [--slice | MODULE ...] [-- EXTRA PYTEST ARGS]

``--slice`` runs :data:`SLICE` (about a minute per run on two cores: the CI
step); no argument runs :data:`FULL`.  ``--pairs N`` runs N plain/profiled pairs one
after the other and prints each pair's wall-time ratio and their median: on a VM whose
speed moves from minute to minute, one pair's ratio spreads about as wide as a goal's
margin (x1.05-1.18 over six runs of the same code).
"""

from __future__ import annotations

import importlib.util
import json
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time

FULL = [
    "numpy._core.tests.test_ufunc",
    "numpy._core.tests.test_umath",
    "numpy._core.tests.test_einsum",
    "numpy.linalg.tests.test_linalg",
    "numpy._core.tests.test_overrides",
    "numpy._core.tests.test_multiarray",
    "numpy._core.tests.test_indexing",
    "numpy.random.tests.test_generator_mt19937",
    "numpy.random.tests.test_randomstate",
    "numpy.random.tests.test_random",
]
SLICE = [
    "numpy._core.tests.test_einsum",
    "numpy.linalg.tests.test_linalg",
    "numpy._core.tests.test_overrides",
    # every index form through the hooked mapping slots
    "numpy._core.tests.test_indexing",
]
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SITE = os.path.dirname(os.path.dirname(importlib.util.find_spec("numpy").origin or ""))
PROFILED_ARGS = ["--opprof", "--opprof-capture", "numpy"]

COUNTER = textwrap.dedent(
    '''
    """Records each test's outcome; in an --opprof run also what the profiler did."""
    import json
    import os

    import pytest

    OUTCOMES = {}
    STATS = {}


    def pytest_runtest_logreport(report):
        # The worst phase wins: an error in teardown of a passed test counts.
        outcome = report.outcome
        if hasattr(report, "wasxfail"):
            outcome = "xfailed" if report.skipped else "xpassed"
        elif report.when != "call" and report.failed:
            outcome = "error"
        elif report.when != "call" and report.passed:
            return
        if report.when == "call" or report.nodeid not in OUTCOMES or outcome == "error":
            OUTCOMES[report.nodeid] = outcome


    @pytest.hookimpl(tryfirst=True)
    def pytest_terminal_summary(terminalreporter, config):
        manager = config.pluginmanager.get_plugin("opprof-controller")
        if manager is not None:
            STATS["profiled"] = len(manager.results)
            STATS["ops"] = sum(line.op_count for line in manager.results)


    @pytest.hookimpl(trylast=True)
    def pytest_unconfigure(config):
        if config.getoption("opprof", False):
            from pytest_opprof import _native

            counts = _native.numpy_hook_counts()
            STATS["misses"] = counts.misses
            STATS["installed_after"] = counts.installed
        with open(os.environ["OPPROF_SUITE_OUT"], "w") as f:
            json.dump({"outcomes": OUTCOMES, **STATS}, f)
    '''
)


def run(modules: list[str], extra: list[str], profiled: bool, workdir: str) -> dict[str, object]:
    """One pytest run in a subprocess; its outcomes, stats and wall time."""
    label = "opprof" if profiled else "plain"
    out = os.path.join(workdir, f"result-{label}.json")
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([workdir, REPO, env.get("PYTHONPATH", "")])
    env["OPPROF_SUITE_OUT"] = out
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly"]
    cmd += ["-p", "opprof_counter"]
    # rootdir above numpy: node ids name their module, so tests of two modules never merge
    cmd += [f"--rootdir={SITE}", *(PROFILED_ARGS if profiled else []), *extra]
    cmd += ["--pyargs", *modules]
    began = time.perf_counter()
    proc = subprocess.run(cmd, cwd=workdir, env=env, capture_output=True, text=True)
    wall_s = time.perf_counter() - began
    tail = [line for line in proc.stdout.splitlines() if " in " in line and "=" not in line[:1]]
    print(f"{label:>6}: {tail[-1] if tail else proc.stdout[-200:]!s} (wall {wall_s:.1f} s)")
    if not os.path.exists(out):
        print(proc.stdout[-4000:], proc.stderr[-4000:], sep="\n")
        raise SystemExit(f"pytest wrote no result ({label} run, exit code {proc.returncode})")
    with open(out) as f:
        result: dict[str, object] = json.load(f)
    result["wall_s"] = wall_s
    result["exit_code"] = proc.returncode
    return result


def counts(outcomes: dict[str, str]) -> dict[str, int]:
    totals: dict[str, int] = {}
    for outcome in outcomes.values():
        totals[outcome] = totals.get(outcome, 0) + 1
    return dict(sorted(totals.items()))


def check(plain: dict[str, object], profiled: dict[str, object]) -> bool:
    """Print one pair's outcomes and ratio; True when they are identical and capture behaved."""
    plain_outcomes: dict[str, str] = plain["outcomes"]  # type: ignore[assignment]
    prof_outcomes: dict[str, str] = profiled["outcomes"]  # type: ignore[assignment]
    print(f"plain  outcomes: {counts(plain_outcomes)}")
    print(f"opprof outcomes: {counts(prof_outcomes)}")
    differing = sorted(
        nodeid
        for nodeid in plain_outcomes.keys() | prof_outcomes.keys()
        if plain_outcomes.get(nodeid) != prof_outcomes.get(nodeid)
    )
    for nodeid in differing[:20]:
        print(f"  differs: {nodeid}: {plain_outcomes.get(nodeid)} -> {prof_outcomes.get(nodeid)}")
    overhead = profiled["wall_s"] / plain["wall_s"]  # type: ignore[operator]
    print(
        f"opprof run: {profiled.get('profiled')} tests profiled, {profiled.get('ops')} ops, "
        f"{profiled.get('misses')} hook misses, hooks left installed: "
        f"{profiled.get('installed_after')}; wall {plain['wall_s']:.1f} s -> "
        f"{profiled['wall_s']:.1f} s (x{overhead:.2f})"
    )
    ok = (
        not differing
        and plain["exit_code"] == profiled["exit_code"]
        and bool(profiled.get("profiled"))
        and bool(profiled.get("ops"))
        and profiled.get("misses") == 0
        and profiled.get("installed_after") is False
    )
    print("OK: identical outcomes" if ok else "FAIL: outcomes differ or capture misbehaved")
    return ok


def main(argv: list[str]) -> int:
    extra: list[str] = []
    if "--" in argv:
        argv, extra = argv[: argv.index("--")], argv[argv.index("--") + 1 :]
    pairs = 1
    if argv[:1] == ["--pairs"]:
        if len(argv) < 2 or not argv[1].isdigit() or int(argv[1]) < 1:
            raise SystemExit("--pairs: expected a positive integer such as --pairs 3")
        pairs, argv = int(argv[1]), argv[2:]
    modules = SLICE if argv == ["--slice"] else (argv or FULL)
    ok = True
    ratios: list[float] = []
    with tempfile.TemporaryDirectory() as workdir:
        with open(os.path.join(workdir, "opprof_counter.py"), "w") as f:
            f.write(COUNTER)
        for _ in range(pairs):
            plain = run(modules, extra, False, workdir)
            profiled = run(modules, extra, True, workdir)
            ok = check(plain, profiled) and ok
            ratios.append(profiled["wall_s"] / plain["wall_s"])  # type: ignore[operator]
    if pairs > 1:
        listed = ", ".join(f"x{r:.2f}" for r in ratios)
        print(f"{pairs} pairs: {listed}; median x{statistics.median(ratios):.2f}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
