"""A/B across a dependency upgrade: the same tests under numpy 2.3 (base) and this one (head).

A virtual environment gets numpy ``--base-numpy`` (the checkout's plugin on its path, so
both sides run the same pytest-opprof); the generated suite of ``verdict_study.py`` is
committed in a git repository, and ``pytest --opprof --opprof-against=HEAD
--opprof-against-python=VENV/bin/python`` runs it: the same code on both sides, only
numpy differs.  For the op the run names as changed the most (its paired change decided),
an independent ``timeit`` of that op's call in the test, in each environment, says
whether the A/B run got its direction and size right: the timeit ratio should fall
inside the A/B interval.  An upgrade's audit asks for smaller changes than a gate: the run
uses a 3% tolerance, judges op times down to 0.1 ms (the generated tests' ops take 0.1-1
ms, under the default 1 ms floor) and runs 6 pairs of every test.

    python bench/ab_dependency.py [--base-numpy 2.3.5] [--tests 30]
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
import venv
from pathlib import Path
from typing import Any

from _common import REPO, machine_line, now_utc, plugin_args, subprocess_env
from verdict_study import generate, iterations_per_ms

# The call in a generated test that each op key comes from (verdict_study._op_lines).
CALLS = {
    "numpy.matmul": "np.matmul(",
    "numpy.linalg.solve": "np.linalg.solve(",
    "numpy.sort": "np.sort(",
    "numpy.add": "np.add(",
    "numpy.einsum": "np.einsum(",
    "numpy.add.reduce": ".sum()",
    "numpy.ndarray.sum": ".sum()",
}

TIMEIT_ROUNDS = 5
TIMEIT = r"""
import sys, timeit
sys.path.insert(0, sys.argv[1])
import numpy as np
from synthwork import arr
import re
call = sys.argv[2]
# The op alone, as the A/B run's op figure counts it: its operands (each ``arr(...)``) are
# built once, outside the timing (timing them too diluted a +18% solve to +6%).
built = {}
def prebuilt(found):
    name = f"_operand{len(built)}"
    built[name] = eval(found.group(0))
    return name
fn = eval("lambda: " + re.sub(r"arr\([^()]*\)", prebuilt, call), {**globals(), **built})
fn()
runs = [min(timeit.repeat(fn, number=max(1, int(sys.argv[3])), repeat=7)) / int(sys.argv[3])]
print(np.__version__, runs[0])
"""


def make_env(where: Path, numpy_version: str) -> Path:
    venv.create(where, system_site_packages=True, symlinks=True)
    python = where / "bin" / "python"
    subprocess.run(
        [str(python), "-m", "pip", "install", "--quiet", f"numpy=={numpy_version}"], check=True
    )
    site = next((where / "lib").glob("python3*/site-packages"))
    (site / "opprof_checkout.pth").write_text(f"{REPO}\n")
    return python


def time_call(python: Path, root: Path, call: str) -> tuple[str, float]:
    out = subprocess.run(
        [str(python), "-c", TIMEIT, str(root), call, "20"],
        capture_output=True,
        text=True,
        check=True,
        env=subprocess_env(),
    ).stdout.split()
    return out[0], float(out[1])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--base-numpy", default="2.3.5")
    p.add_argument("--tests", type=int, default=30)
    p.add_argument("--seed", type=int, default=2)
    p.add_argument(
        "--tolerance",
        default="3%",
        help="--opprof-time-tolerance: an upgrade's audit asks for smaller changes than a gate",
    )
    p.add_argument(
        "--min-time",
        default="100us",
        help="--opprof-min-time: the generated tests' ops take 0.1-1 ms, under the 1 ms floor",
    )
    p.add_argument(
        "--min-pairs",
        type=int,
        default=6,
        help="--opprof-ab-min-pairs: pairs every test runs, so its ops' times can be decided",
    )
    args = p.parse_args()
    with tempfile.TemporaryDirectory(prefix="opprof-ab-dep-") as tmp:
        root = Path(tmp) / "repo"
        root.mkdir()
        generate(root, args.tests, iterations_per_ms(), args.seed)
        for cmd in (["init", "-q"], ["add", "-A"], ["commit", "-qm", "suite"]):
            subprocess.run(
                ["git", "-c", "user.email=s@example.com", "-c", "user.name=s", *cmd],
                cwd=root,
                check=True,
                capture_output=True,
            )
        python = make_env(Path(tmp) / "base-venv", args.base_numpy)
        report = root / "ab.json"
        cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:randomly", "-p", "no:benchmark"]
        cmd += [*plugin_args(), "opprof", "--opprof", "--opprof-against=HEAD"]
        cmd += [
            f"--opprof-against-python={python}",
            f"--opprof-report={report}",
            "--opprof-report-details",
            f"--opprof-ab-min-pairs={args.min_pairs}",
            f"--opprof-time-tolerance={args.tolerance}",
            f"--opprof-min-time={args.min_time}",
        ]
        done = subprocess.run(
            cmd, cwd=root, env=subprocess_env(PYTHONPATH=str(root)), capture_output=True, text=True
        )
        if not report.exists():
            raise SystemExit(f"no report:\n{done.stdout[-3000:]}\n{done.stderr[-2000:]}")
        tests: dict[str, Any] = json.loads(report.read_text())["tests"]
        moved = []
        for nodeid, test in tests.items():
            for r in test["verdict"]["reasons"]:
                if r["unit"] == "ns" and r["op"] in CALLS and r.get("note"):
                    decided = r["status"] in ("regressed", "improved")
                    moved.append((decided, abs(r["change"]), nodeid, r))
        print(f"# {machine_line()}, {now_utc()}; base numpy {args.base_numpy}")
        line = next((x for x in done.stdout.splitlines() if x.startswith("opprof A/B")), "")
        print(f"A/B run: rc {done.returncode}; {line}")
        named = [m for m in moved if m[0]]
        if not named:
            print(f"no op time decided changed ({len(moved)} listed, undecided)")
            return
        # The op the run names as changed the most: the largest decided change.
        named.sort(key=lambda m: -m[1])
        _, _, nodeid, reason = named[0]
        name = nodeid.split("::")[-1]
        body = (root / "synthwork.py").read_text().split(f"def {name}(")[1].split("\ndef ")[0]
        needle = CALLS.get(reason["op"])
        call = next((s.strip() for s in body.splitlines() if needle and needle in s), None)
        print(f"changed the most: {reason['op']} in {name} ({reason['status']}): {reason['note']}")
        if call is None:
            print("  (no single call of the test to time for it)")
            return
        call = re.sub(r"^kernel\(.*", "", call)
        # Each environment's timeit five times, alternating, and each side's fastest: the
        # machine's drift between two single timeits moved their ratio by 4% here.
        base_times, head_times = [], []
        for _ in range(TIMEIT_ROUNDS):
            base_v, seconds = time_call(python, root, call)
            base_times.append(seconds)
            head_v, seconds = time_call(Path(sys.executable), root, call)
            head_times.append(seconds)
        base_s, head_s = min(base_times), min(head_times)
        ratio = head_s / base_s - 1
        low, high = _interval(reason["note"])
        print(
            f"  timeit of `{call}` (operands built once): numpy {base_v} {base_s * 1e6:.1f} us, "
            f"numpy {head_v} {head_s * 1e6:.1f} us: {ratio:+.1%}; same direction: "
            f"{(ratio > 0) == (reason['change'] > 0)}, inside [{low:+.1%}, {high:+.1%}]: "
            f"{low <= ratio <= high}"
        )


def _interval(note: str) -> tuple[float, float]:
    """The interval of an A/B note: ``A/B: +18.0% [+12.3%, +24.0%] over 6 pairs``."""
    found = re.search(r"\[([-+][\d.]+)%, ([-+][\d.]+)%\]", note)
    if found is None:
        raise SystemExit(f"no interval in {note!r}")
    return float(found.group(1)) / 100, float(found.group(2)) / 100


if __name__ == "__main__":
    main()
