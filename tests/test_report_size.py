"""The JSON report is compact by default (about 2 KB a test) and whole on request, and every
reader takes both forms: ``read_report``, ``pytest-opprof compare/show/html``, the page."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from pytest_opprof.gate.results import read_report
from pytest_opprof.render.html import page_data

if TYPE_CHECKING:
    from run_helpers import PytestRunner

REPO_ROOT = Path(__file__).resolve().parent.parent
TESTS = 100
SUITE = "import numpy as np\n\n" + "".join(
    f"def test_{i}():\n    a = np.arange({i % 7 + 3}.0)\n    assert (a + 1).sum() > 0\n\n"
    for i in range(TESTS)
)


def cli(*args: object, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(REPO_ROOT))
    return subprocess.run(
        [sys.executable, "-m", "pytest_opprof", *map(str, args)],
        cwd=cwd, env=env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip


@pytest.mark.slow
def test_report_is_compact_by_default_and_whole_on_request(
    pytester: pytest.Pytester, run_pytest: PytestRunner
) -> None:
    pytester.makeini("[pytest]\n")
    pytester.makepyfile(test_tiny=SUITE)
    run_pytest("--opprof-update-baselines").assert_outcomes(passed=TESTS)
    compact, whole = pytester.path / "compact.json", pytester.path / "whole.json"
    run_pytest("--opprof", f"--opprof-report={compact}").assert_outcomes(passed=TESTS)
    run_pytest("--opprof", f"--opprof-report={whole}", "--opprof-report-details").assert_outcomes(
        passed=TESTS
    )

    # Compact: schema 2, at most 2 KB a test (the whole form took 7 KB for these tests),
    # a time as its per-round string, the verdict without its empty fields.
    small = json.loads(compact.read_text(encoding="utf-8"))
    assert small["schema"] == 2 and len(small["tests"]) == TESTS
    assert compact.stat().st_size / TESTS <= 2048, compact.stat().st_size / TESTS
    test = small["tests"]["test_tiny.py::test_3"]
    assert test["status"] == "pass" and isinstance(test["summary"]["wall_time"], str)
    assert all(row.get("note", "x") and row.get("change", 0) is not None
               for row in test["verdict"]["metrics"])  # fmt: skip

    # On request: schema 1, every op and each time's statistics.
    big = json.loads(whole.read_text(encoding="utf-8"))
    assert big["schema"] == 1
    stats = big["tests"]["test_tiny.py::test_3"]["summary"]["wall_time"]
    assert {"median_ns", "mad_ns", "samples_ns"} <= set(stats)
    assert whole.stat().st_size > 2 * compact.stat().st_size

    # Both read back with the same exact figures.
    a, b = read_report(compact), read_report(whole)
    assert sorted(a) == sorted(b)
    for nodeid in a:
        x, y = a[nodeid].summary, b[nodeid].summary
        assert (x.flops, x.op_count, x.memory) == (y.flops, y.op_count, y.memory), nodeid
        assert sum(op.count for op in x.ops.values()) == sum(op.count for op in y.ops.values())

    # The command line tool and the page take either form.
    done = cli("compare", whole, compact, cwd=pytester.path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"{TESTS} tests in {compact}, 0 regressed" in done.stdout
    shown = cli("show", compact, "-k", "test_tiny.py::test_3", cwd=pytester.path)
    assert shown.returncode == 0 and "numpy.arange" in shown.stdout, shown.stdout + shown.stderr
    pytest.importorskip("jinja2")
    page = cli("html", compact, "-o", pytester.path / "page.html", cwd=pytester.path)
    assert page.returncode == 0, page.stdout + page.stderr
    assert "test_tiny.py::test_3" in (pytester.path / "page.html").read_text(encoding="utf-8")
    rows = page_data(small)["rows"]
    assert len(rows) == TESTS
    for row in rows:  # the wall time and the top op's self time read from the strings
        assert row["w"] > 0 and row["ops"] and row["ops"][0][2] is not None, row
