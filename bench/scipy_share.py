"""How much of real scipy and scikit-learn test time the op tables see: the captured share.

Runs scipy's own installed test modules, and scikit-learn's when asked (suites no one here
wrote), the way the README tells
users to gate tests outside their rootdir (``--rootdir`` at the package), once with numpy
capture alone (numpy's ops, its Python functions and numpy.testing), and with the defaults
(also scipy's f2py LAPACK/BLAS routines, Cython and C functions, scipy.special ufuncs and
its public Python API; scikit-learn's public Python API), one round each, and
reports the median over tests of ``op_time_share``: the share of a test's wall time spent
inside captured ops.

    python bench/scipy_share.py [--suite linalg|signal|sklearn-linear] [--config LABEL]
        [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import scipy  # type: ignore[import-untyped]

SCIPY = Path(scipy.__file__).parent
SUITES = {
    "linalg": [
        "linalg/tests/test_basic.py",
        "linalg/tests/test_decomp_cholesky.py",
        "linalg/tests/test_decomp_lu.py",
        "linalg/tests/test_matfuncs.py",
    ],
    "signal": [
        "signal/tests/test_signaltools.py",
        "signal/tests/test_spectral.py",
    ],
    # scikit-learn (optional): Python estimators over numpy, scipy and Cython
    "sklearn-linear": [
        "linear_model/tests/test_ridge.py",
        "linear_model/tests/test_base.py",
    ],
}


def package_dir(suite: str) -> Path:
    if suite.startswith("sklearn"):
        import sklearn  # type: ignore[import-untyped]

        return Path(sklearn.__file__).parent
    return SCIPY


REPO = Path(__file__).resolve().parents[1]
# numpy's source alone (its ops and Python functions), and every source (scipy's compiled
# routines and public Python API too).
CONFIGS = (
    ("numpy only", "numpy"),
    ("defaults", None),
)


def run(suite: str, capture: str | None, out: Path) -> dict[str, object]:
    root = package_dir(suite)
    paths = [str(root / p) for p in SUITES[suite]]
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:randomly", "-p", "no:cacheprovider"]
    cmd += ["-x", "--rootdir", str(root), "--opprof", "--opprof-rounds", "1"]
    cmd += [
        "--opprof-baseline-dir",
        str(out.parent / "baselines"),
        "--opprof-report",
        str(out),
        "--opprof-report-details",
    ]
    if capture:
        cmd += ["--opprof-capture", capture]
    env = {**os.environ, "PYTHONPATH": str(REPO), "OPENBLAS_NUM_THREADS": "1"}
    t0 = time.perf_counter()
    done = subprocess.run(cmd + paths, capture_output=True, text=True, env=env, cwd=out.parent)
    seconds = time.perf_counter() - t0
    if done.returncode not in (0, 1):
        raise SystemExit(f"pytest failed ({done.returncode}):\n{done.stdout[-3000:]}")
    tests = json.loads(out.read_text())["tests"]
    shares = [t["summary"]["op_time_share"] for t in tests.values()]
    top_scipy = sum(
        1
        for t in tests.values()
        if t["ops"]
        and max(t["ops"].items(), key=lambda kv: kv[1]["self_cpu_time"]["median_ns"])[0].startswith(
            ("scipy.", "sklearn.")
        )
    )
    return {
        "tests": len(tests),
        "median_share": statistics.median(shares),
        "share_p25": statistics.quantiles(shares, n=4)[0],
        "tests_top_op_scipy": top_scipy,
        "seconds": round(seconds, 1),
        "outcome": done.stdout.strip().splitlines()[-1],
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--suite", action="append", choices=sorted(SUITES))
    p.add_argument("--json", type=Path)
    p.add_argument("--config", action="append", choices=[label for label, _ in CONFIGS])
    args = p.parse_args()
    results = {}
    with tempfile.TemporaryDirectory(prefix="opprof-scipy-") as tmp:
        for suite in args.suite or ["linalg", "signal"]:
            for label, capture in CONFIGS:
                if args.config and label not in args.config:
                    continue
                out = Path(tmp) / f"{suite}-{label.replace(' ', '-')}.json"
                r = run(suite, capture, out)
                results[f"{suite}: {label}"] = r
                print(
                    f"{suite} ({', '.join(SUITES[suite])}), {label}: {r['tests']} tests, "
                    f"median captured share {r['median_share']:.0%} (25th percentile "
                    f"{r['share_p25']:.0%}), top op from scipy or sklearn in "
                    f"{r['tests_top_op_scipy']}, "
                    f"{r['seconds']} s; {r['outcome']}",
                    flush=True,
                )
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
