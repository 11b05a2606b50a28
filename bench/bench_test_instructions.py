"""A trivial test's added cost in instructions, counted by callgrind.

This VM's speed moves 1.5-2x from minute to minute, and a trivial test's whole protocol
moved by +-200 us between runs of the same tree: too much to see a 20 us cut in any
timing.  Instructions executed in user space do not move with the machine.  This script
runs pytest under ``valgrind --tool=callgrind`` on ``--tests`` and on three times as
many trivial tests (speed references stubbed, recalibration off: under valgrind a
minute passes every few hundred tests), plain and with ``--opprof --opprof-rounds 1``,
and prints the slope: instructions per test, which leaves every one-time cost
(imports, calibration, the session's start and end) out.

Kernel work (system calls: the contention probe's reads) is not counted: this
measures the Python and C the plugin runs per test, not the syscalls it makes.
Needs ``valgrind`` (``apt-get install valgrind``); about 5 minutes at the default size.

    python bench/bench_test_instructions.py [--tests 300] [--body trivial|numpy] [--trees DIR ...]
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

CONFTEST = """\
from pytest_opprof.capture import recorder, speed_probe

speed_probe.references_ns = lambda: (1, 1)
recorder.RECALIBRATE_S = 1e9
"""


NUMPY_TEST = """\
def test_{i}():
    a = np.arange({n}, dtype=float)
    b = a * 2.0 + 1.0
    assert np.sqrt(b).sum() > 0
    assert np.maximum(a, b).reshape(-1, 1).T.shape == (1, {n})

"""
"""A small numpy test: six ops (a creation, three ufuncs, a reduction, two methods) on
arrays of a size no other test uses, so each test's shapes are new to the FLOP memo."""


def _suite(where: Path, tests: int, body: str) -> Path:
    where.mkdir(parents=True)
    (where / "conftest.py").write_text(CONFTEST)
    if body == "numpy":
        text = "import numpy as np\n\n" + "".join(
            NUMPY_TEST.format(i=i, n=i + 2) for i in range(tests)
        )
    else:
        text = "".join(f"def test_{i}():\n    assert {i} >= 0\n\n" for i in range(tests))
    (where / "test_trivial.py").write_text(text)
    return where


def _instructions(suite: Path, tree: Path, profiled: bool) -> int:
    """Instructions (callgrind's Ir) of one pytest session over ``suite``."""
    args = ["--opprof", "--opprof-rounds", "1"] if profiled else []
    with tempfile.NamedTemporaryFile(suffix=".callgrind") as out:
        subprocess.run(
            [
                "valgrind",
                "--tool=callgrind",
                f"--callgrind-out-file={out.name}",
                sys.executable,
                "-m",
                "pytest",
                "-q",
                "-p",
                "no:cacheprovider",
                "-p",
                "no:randomly",
                *args,
                "test_trivial.py",
            ],
            cwd=suite,
            # A fixed hash seed: string hashes move dict layouts, and so counts, run to run.
            env={**os.environ, "PYTHONPATH": str(tree), "PYTHONHASHSEED": "0"},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            check=True,
        )
        found = re.search(rb"^summary: (\d+)", Path(out.name).read_bytes(), re.MULTILINE)
    if found is None:
        raise SystemExit(f"callgrind wrote no summary for {suite} ({tree})")
    return int(found.group(1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tests", type=int, default=300)
    parser.add_argument(
        "--body",
        choices=("trivial", "numpy"),
        default="trivial",
        help="each test's body: an assert, or six numpy ops on a size of its own",
    )
    parser.add_argument(
        "--trees", nargs="+", type=Path, default=[Path(__file__).resolve().parent.parent]
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        small = _suite(Path(tmp) / "small", args.tests, args.body)
        large = _suite(Path(tmp) / "large", 3 * args.tests, args.body)
        runs = [
            (tree, profiled, suite)
            for tree in args.trees
            for profiled in (False, True)
            for suite in (small, large)
        ]
        with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
            counts = list(pool.map(lambda run: _instructions(run[2], run[0], run[1]), runs))
    got = {
        (tree, profiled, suite): n for (tree, profiled, suite), n in zip(runs, counts, strict=True)
    }
    per = 2 * args.tests
    print(f"instructions per {args.body} test (slope over {args.tests} -> {3 * args.tests} tests)")
    for tree in args.trees:
        plain = (got[tree, False, large] - got[tree, False, small]) / per
        profiled = (got[tree, True, large] - got[tree, True, small]) / per
        print(
            f"  {tree!s:40} plain {plain / 1e3:8.1f}k  --opprof {profiled / 1e3:8.1f}k  "
            f"added {(profiled - plain) / 1e3:8.1f}k"
        )


if __name__ == "__main__":
    main()
