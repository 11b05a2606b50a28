"""How much a numpy upgrade moves op counts: the example suite under numpy ``--base-numpy``
and under this environment's numpy, each test's op count and its ops' counts side by side.

Counts include the calls numpy's own Python functions make into numpy (``np.allclose``
calls ``isclose``, ``all``, ``isinf``, ...), and those change between releases: the
measurement behind ``DEFAULT_COUNT_TOLERANCE`` (``pytest_opprof/gate/tolerance.py``).

    python bench/count_drift.py [--base-numpy 2.3.5]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from _common import REPO, machine_line, plugin_args, subprocess_env
from ab_dependency import make_env


def counts(python: str, report: Path) -> tuple[str, dict[str, Any]]:
    """(numpy's version, the JSON report's tests) of the example suite run by ``python``."""
    cmd = [python, "-m", "pytest", *plugin_args(), "-p", "no:cacheprovider", "-q", "--opprof"]
    cmd += ["--opprof-report", str(report), "--opprof-report-details", "examples"]
    subprocess.run(cmd, cwd=REPO, check=True, capture_output=True, env=subprocess_env())
    version = subprocess.run(
        [python, "-c", "import numpy; print(numpy.__version__)"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    tests: dict[str, Any] = json.loads(report.read_text())["tests"]
    return version, tests


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base-numpy", default="2.3.5")
    args = parser.parse_args()
    print(machine_line())
    with tempfile.TemporaryDirectory() as tmp:
        python = make_env(Path(tmp) / "env", args.base_numpy)
        base_version, base = counts(str(python), Path(tmp) / "base.json")
        head_version, head = counts(sys.executable, Path(tmp) / "head.json")
    print(f"| test | numpy {base_version} | numpy {head_version} | change | ops that moved |")
    print("| --- | ---: | ---: | ---: | --- |")
    changes = []
    for nodeid in sorted(base.keys() & head.keys()):
        b, h = base[nodeid]["summary"]["op_count"], head[nodeid]["summary"]["op_count"]
        changes.append((h - b) / b if b else 0.0)
        ops_b = {k: o["count"] for k, o in base[nodeid]["ops"].items()}
        ops_h = {k: o["count"] for k, o in head[nodeid]["ops"].items()}
        moved = sorted(
            f"{k} {ops_b.get(k, 0)}->{ops_h.get(k, 0)}"
            for k in ops_b.keys() | ops_h.keys()
            if ops_b.get(k, 0) != ops_h.get(k, 0)
        )
        print(f"| {nodeid.split('::')[-1]} | {b} | {h} | {changes[-1]:+.1%} | {', '.join(moved)} |")
    moved_tests = sum(c != 0 for c in changes)
    print(
        f"\n{moved_tests} of {len(changes)} tests' op counts moved, by "
        f"{min(changes):+.1%} to {max(changes):+.1%}"
    )


if __name__ == "__main__":
    main()
