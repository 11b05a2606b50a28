"""Whole-suite overhead: wall time of real test suites with and without ``--opprof``.

Suites: a slice of numpy's own tests (``--numpy-tests``, run with ``--pyargs``
from an empty directory) and this repository's ``examples/``.  Each repeat runs
every suite plain, with ``--opprof`` (its defaults: ``--opprof-rounds auto``
runs a test of 1 ms or more 5 times, so its times can be judged) and with
``--opprof --opprof-rounds 1`` (the cost of profiling alone) back to back, in a
rotating order; the ratios are taken within a repeat, and the median ratio over
repeats is reported with its range.  Wall time is the whole pytest process (start-up,
collection, the tests, the report), as a CI job sees it.

``--trees BEFORE AFTER`` runs every suite and variant with ``PYTHONPATH`` set to each
checkout (with its extension built) in the same repeat, so a before/after pair shares
the machine's load; ``--suites numpy`` leaves ``examples/`` out.

    .venv/bin/python bench/bench_suite_overhead.py [--repeats 3] [--quick] [--json PATH]
                                                   [--trees BEFORE AFTER] [--suites numpy]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _common import REPO, fmt_spread, loadavg, plugin_args, spread, subprocess_env

NUMPY_TESTS = ["numpy._core.tests.test_einsum", "numpy.linalg.tests.test_linalg"]
QUICK_NUMPY_TESTS = ["numpy._core.tests.test_einsum"]
# test_linalg's core classes (~450 tests, ~10 s): the rest of the module adds minutes of
# a few huge cases that say nothing more about per-test overhead.
NUMPY_K = (
    "TestEinsum or TestSolve or TestInv or TestDet or TestEig or TestSVD or TestNorm or TestQR "
    "or TestCholesky or TestMatrixPower or einsum"
)


def suites(numpy_tests: list[str], k: str, tmp: Path) -> dict[str, tuple[list[str], Path]]:
    """name -> (pytest arguments, working directory).

    numpy's tests run with site-packages as the rootdir (node ids, and so baseline
    files, need a path under it) and baselines in the temporary directory.
    """
    import numpy

    site = Path(numpy.__file__).resolve().parent.parent
    numpy_args = ["--pyargs", *numpy_tests, f"--rootdir={site}", "-c", str(tmp / "pytest.ini")]
    (tmp / "pytest.ini").write_text(f"[pytest]\nopprof_baseline_dir = {tmp / 'baselines'}\n")
    return {
        "numpy: " + " + ".join(t.rsplit(".", 1)[-1] for t in numpy_tests): (
            [*numpy_args, *(["-k", k] if k else [])],
            tmp,
        ),
        "examples/": (["examples"], REPO),
    }


VARIANTS: dict[str, list[str] | None] = {
    "plain": None,
    "opprof": ["--opprof"],
    "one_round": ["--opprof", "--opprof-rounds", "1"],
}


def run(
    args: list[str], cwd: Path, opprof: list[str] | None, tree: str | None = None
) -> tuple[float, int]:
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *plugin_args()]
    cmd += ["-p", "no:benchmark", "-p", "no:randomly", *args]
    if opprof is not None:
        cmd += opprof
    # Bytecode cached as on a developer's machine: with PYTHONDONTWRITEBYTECODE (set on some
    # CI boxes) every --opprof run compiled the plugin's modules again, 0.1-0.2 s that
    # the plain runs, which never import them, did not pay.
    env = subprocess_env()
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    if tree is not None:
        env["PYTHONPATH"] = tree
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - t0
    if proc.returncode not in (0, 1):
        raise RuntimeError(f"{' '.join(cmd)} exited {proc.returncode}:\n{proc.stdout[-3000:]}")
    return seconds, proc.returncode


def measure(
    numpy_tests: list[str],
    k: str,
    repeats: int,
    trees: list[str | None] | None = None,
    only: str | None = None,
) -> dict[str, Any]:
    rows: dict[str, Any] = {}
    checkouts = trees or [None]
    with tempfile.TemporaryDirectory(prefix="opprof-suite-") as tmp:
        for suite, (args, cwd) in suites(numpy_tests, k, Path(tmp)).items():
            if only is not None and not suite.startswith(only):
                continue
            keys = [(tree, variant) for tree in checkouts for variant in VARIANTS]
            times: dict[tuple[str | None, str], list[float]] = {key: [] for key in keys}
            ratios: dict[tuple[str | None, str], list[float]] = {key: [] for key in keys}
            loads: list[float] = []
            outcomes: dict[str | None, set[tuple[str, int]]] = {tree: set() for tree in checkouts}
            for tree, variant in keys:  # untimed: writes the bytecode caches the runs use
                run(args, cwd, VARIANTS[variant], tree)
            for i in range(repeats):
                loads.append(loadavg())
                order = keys[i % len(keys) :] + keys[: i % len(keys)]
                now = {}
                for tree, variant in order:
                    now[tree, variant], rc = run(args, cwd, VARIANTS[variant], tree)
                    outcomes[tree].add((variant, rc))
                for (tree, variant), seconds in now.items():
                    times[tree, variant].append(seconds)
                    ratios[tree, variant].append(seconds / now[tree, "plain"])
            for tree in checkouts:
                name = suite if tree is None else f"{suite} ({tree})"
                rows[name] = _row(
                    {v: times[tree, v] for v in VARIANTS},
                    {v: ratios[tree, v] for v in VARIANTS},
                    loads,
                    outcomes[tree],
                )
    return {"repeats": repeats, "numpy_k": k, "rows": rows}


def _row(
    times: dict[str, list[float]],
    ratios: dict[str, list[float]],
    loads: list[float],
    outcomes: set[tuple[str, int]],
) -> dict[str, Any]:
    return {
        "plain_s": spread(times["plain"]),
        "opprof_s": spread(times["opprof"]),
        "ratio": spread(ratios["opprof"]),
        "one_round_s": spread(times["one_round"]),
        "one_round_ratio": spread(ratios["one_round"]),
        "load": spread(loads),
        "exit_codes": sorted(f"{variant}={rc}" for variant, rc in outcomes),
    }


def print_result(result: dict[str, Any]) -> None:
    print(f"wall time (s), median [IQR] of {result['repeats']} repeats; ratio per repeat")
    for name, row in result["rows"].items():
        print(
            f"  {name:<32} plain {fmt_spread(row['plain_s'], 1):>18}  --opprof "
            f"{fmt_spread(row['opprof_s'], 1):>18}  ratio {fmt_spread(row['ratio'], 2)}"
            f"  1 round ratio {fmt_spread(row['one_round_ratio'], 2)}"
            f"  (load {row['load']['median']:.1f}; {', '.join(row['exit_codes'])})"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--numpy-tests", nargs="+", default=NUMPY_TESTS)
    parser.add_argument("--numpy-k", default=NUMPY_K, help="pytest -k for the numpy tests")
    parser.add_argument("--quick", action="store_true", help="one repeat, test_einsum only")
    parser.add_argument("--json", type=Path)
    parser.add_argument(
        "--trees", nargs="+", default=[], help="checkouts to compare (PYTHONPATH of each run)"
    )
    parser.add_argument("--suites", choices=["numpy", "examples"], help="only this suite")
    args = parser.parse_args()
    if args.quick:
        args.repeats, args.numpy_tests = 1, QUICK_NUMPY_TESTS
    trees: list[str | None] = list(args.trees)
    result = measure(
        args.numpy_tests,
        args.numpy_k,
        args.repeats,
        trees or None,
        None if args.suites is None else args.suites.rstrip("/"),
    )
    print_result(result)
    if args.json:
        args.json.write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
