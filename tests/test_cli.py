"""``python -m pytest_opprof compare/show`` on real files, and the reports they read."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from baseline_helpers import entry, machine, simple_summary

from pytest_opprof.gate.results import TestResult, build_report, read_report, write_json_report
from pytest_opprof.gate.store import update
from pytest_opprof.gate.verdict import compare
from pytest_opprof.render.report import MARKDOWN_LIMIT, render_markdown, write_markdown

ROOT = Path(__file__).parent.parent


def cli(*args: str | Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-m", "pytest_opprof", *map(str, args)],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=env,
        timeout=120,
    )


def _baselines(tmp_path: Path, flops: int) -> Path:
    path = tmp_path / f"b{flops}" / "test_a.json"
    update(
        path,
        {
            "test_x": entry(simple_summary(matmul_flops=flops)),
            "TestK::test_p[a/b-..]": entry(simple_summary()),
        },
    )
    return path


def test_show_prints_tables(tmp_path: Path) -> None:
    path = _baselines(tmp_path, 2_000_000)
    done = cli("show", path, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "TestK::test_p[a/b-..]" in out and "test_x" in out
    assert "recorded 2025-01-31T12:00:00Z on Test CPU 3000 x8" in out
    assert "numpy.matmul" in out and "2.00 MFLOP" in out
    assert "7.63 MB" in out  # 8,000,000 bytes allocated
    lines = [line for line in out.splitlines() if line.startswith("numpy.")]
    assert [line.split()[0] for line in lines[:2]] == ["numpy.matmul", "numpy.add"]  # by time


def test_compare_regression_exits_1_and_names_the_op(tmp_path: Path) -> None:
    old, new = _baselines(tmp_path, 2_000_000), _baselines(tmp_path, 3_000_000)
    done = cli("compare", old, new, cwd=tmp_path)
    assert done.returncode == 1, done.stderr
    assert "opprof REGRESSED: test_x" in done.stdout
    assert "+ numpy.matmul  more flops: 3.00 MFLOP" in done.stdout
    # Regressions only by default, the rest counted; every test with -v.
    assert "TestK::test_p" not in done.stdout
    assert done.stdout.rstrip().endswith(
        f"1 regressed against {old}; 1 pass (-v/--all prints every test)"
    )
    every = cli("compare", old, new, "-v", cwd=tmp_path)
    assert "opprof PASS: TestK::test_p[a/b-..]" in every.stdout
    assert every.stdout.rstrip().endswith(f"1 regressed against {old}; 1 pass")
    relaxed = cli("compare", old, new, "--flops-tolerance", "60%", cwd=tmp_path)
    assert relaxed.returncode == 0, relaxed.stdout
    improved = cli("compare", new, old, cwd=tmp_path)
    assert improved.returncode == 0 and "1 improved, 1 pass" in improved.stdout
    improved = cli("compare", new, old, "-v", cwd=tmp_path)
    assert improved.returncode == 0 and "opprof IMPROVED: test_x" in improved.stdout


def test_compare_report_against_baseline_file(tmp_path: Path) -> None:
    old = _baselines(tmp_path, 2_000_000)
    now = simple_summary(matmul_flops=8_000_000)
    verdict = compare(now, entry(simple_summary()), fingerprint=machine().fingerprint)
    report = tmp_path / "report.json"
    results = [TestResult("tests/test_a.py::test_x", now, verdict)]
    write_json_report(report, build_report(results, machine=machine()))
    done = cli("compare", old, report, cwd=tmp_path)
    assert done.returncode == 1
    assert "opprof REGRESSED: tests/test_a.py::test_x" in done.stdout
    assert done.stdout.rstrip().endswith("1 gone (-v/--all prints every test)")
    assert (
        "opprof GONE: TestK::test_p[a/b-..]"
        in cli("compare", old, report, "--all", cwd=tmp_path).stdout
    )
    shown = cli("show", report, cwd=tmp_path)
    assert shown.returncode == 0 and "8.00 MFLOP" in shown.stdout


@pytest.mark.slow
def test_errors_name_the_file_and_exit_2(tmp_path: Path) -> None:
    good = _baselines(tmp_path, 2_000_000)
    missing = cli("show", tmp_path / "nope.json", cwd=tmp_path)
    assert missing.returncode == 2 and "nope.json: no such file or directory" in missing.stderr
    (tmp_path / "empty").mkdir()
    empty = cli("compare", good, tmp_path / "empty", cwd=tmp_path)
    assert empty.returncode == 2 and empty.stderr.count("\n") == 1
    assert "empty: no baseline files or JSON reports (*.json) in it" in empty.stderr
    broken = tmp_path / "broken.json"
    broken.write_text(good.read_text(encoding="utf-8")[:300], encoding="utf-8")
    done = cli("compare", good, broken, cwd=tmp_path)
    assert done.returncode == 2
    assert f"error: {broken}: not valid JSON" in done.stderr
    assert "Traceback" not in done.stderr
    bad_option = cli("compare", good, good, "--time-tolerance", "abc", cwd=tmp_path)
    assert bad_option.returncode == 2
    assert "--time-tolerance" in bad_option.stderr and "20%" in bad_option.stderr


@pytest.mark.parametrize(("details", "schema"), [(False, 2), (True, 1)])
def test_json_report_schema_and_roundtrip(tmp_path: Path, details: bool, schema: int) -> None:
    now = simple_summary(matmul_flops=4_000_000)
    regressed = compare(now, entry(simple_summary()), fingerprint=machine().fingerprint)
    new = compare(simple_summary(), None, fingerprint=machine().fingerprint)
    results = [
        TestResult("tests/test_a.py::test_r", now, regressed, "baselines/tests/test_a.json"),
        TestResult("tests/test_a.py::test_n", simple_summary(), new),
    ]
    path = tmp_path / "out" / "report.json"
    write_json_report(path, build_report(results, machine=machine(), details=details))
    data = json.loads(path.read_text(encoding="utf-8"))
    assert data["kind"] == "opprof-report" and data["schema"] == schema
    assert data["totals"] == {"pass": 0, "regressed": 1, "improved": 0, "new": 1}
    test = data["tests"]["tests/test_a.py::test_r"]
    assert test["status"] == "regressed"
    assert test["baseline_file"] == "baselines/tests/test_a.json"
    assert test["ops"]["numpy.matmul"]["flops"] == 4_000_000
    flops_row = next(r for r in test["verdict"]["metrics"] if r["metric"] == "flops")
    assert flops_row["status"] == "regressed" and flops_row["tolerance"] == 0.0
    assert test["verdict"]["reasons"][0]["op"] == "numpy.matmul"
    back = read_report(path)
    assert back["tests/test_a.py::test_r"].summary.flops == now.flops
    assert back["tests/test_a.py::test_r"].machine == machine()


def test_markdown_summary(tmp_path: Path) -> None:
    now = simple_summary(matmul_flops=4_000_000)
    verdict = compare(now, entry(simple_summary()), fingerprint=machine().fingerprint)
    results = [
        TestResult("tests/test_a.py::test_r[a|b]", now, verdict),
        TestResult(
            "tests/test_a.py::test_ok",
            simple_summary(),
            compare(simple_summary(), entry(simple_summary()), fingerprint=machine().fingerprint),
        ),
    ]
    text = render_markdown(results, machine=machine())
    assert text.startswith("## pytest-opprof: 1 regressed, 1 pass\n")
    lines = text.splitlines()
    row = next(line for line in lines if "test_r" in line and line.startswith("| `"))
    assert (
        "test_r[a\\|b]" in row and "❌ regressed" in row and "+99.8%" in row
    )  # (4,005,000 - 2,005,000) / 2,005,000
    assert lines.index(row) < next(i for i, line in enumerate(lines) if "test_ok" in line)
    assert "| `numpy.matmul` | more flops | 2.00 MFLOP | 4.00 MFLOP | +100.0% | regressed |" in text
    out = tmp_path / "summary.md"
    write_markdown(out, results, machine=machine())
    assert out.read_text(encoding="utf-8") == text


def test_compare_takes_baseline_directories_and_reports_in_them(tmp_path: Path) -> None:
    old, new = tmp_path / "old", tmp_path / "new"
    for root, flops in ((old, 2_000_000), (new, 3_000_000)):
        update(
            root / "tests" / "test_a.json", {"test_x": entry(simple_summary(matmul_flops=flops))}
        )
        update(root / "tests" / "sub" / "test_b.json", {"test_y": entry(simple_summary())})
    done = cli("compare", old, new, cwd=tmp_path)
    assert done.returncode == 1, done.stderr
    assert "opprof REGRESSED: tests/test_a.py::test_x" in done.stdout
    assert done.stdout.rstrip().endswith(
        f"2 tests in {new}, 1 regressed against {old}; 1 pass (-v/--all prints every test)"
    )
    # A folder of reports against the baseline directory: node ids meet baseline keys.
    now = simple_summary(matmul_flops=2_000_000)
    verdict = compare(now, entry(simple_summary()), fingerprint=machine().fingerprint)
    reports = tmp_path / "reports"
    write_json_report(
        reports / "run.json",
        build_report([TestResult("tests/test_a.py::test_x", now, verdict)], machine=machine()),
    )
    same = cli("compare", old, reports, cwd=tmp_path)
    assert same.returncode == 0, same.stdout + same.stderr
    assert same.stdout.rstrip().endswith(
        "0 regressed against " + f"{old}; 1 pass, 1 gone (-v/--all prints every test)"
    )


def test_show_filters_by_test_and_op(tmp_path: Path) -> None:
    path = _baselines(tmp_path, 2_000_000)
    by_test = cli("show", path, "-k", "testk", cwd=tmp_path)
    assert by_test.returncode == 0, by_test.stderr
    assert "TestK::test_p[a/b-..]" in by_test.stdout and "test_x" not in by_test.stdout
    by_op = cli("show", path.parent, "--op", "ADD", cwd=tmp_path)
    lines = [line.split()[0] for line in by_op.stdout.splitlines() if line.startswith("numpy.")]
    assert lines == ["numpy.add", "numpy.add"]  # both tests, only the op asked for
    assert "test_a.py::test_x" in by_op.stdout  # a directory names tests by node id
    nothing = cli("show", path, "--op", "svd", cwd=tmp_path)
    assert (
        nothing.returncode == 0 and nothing.stdout.strip() == f"{path}: no test matches --op 'svd'"
    )


def test_markdown_stays_under_the_comment_limit(tmp_path: Path) -> None:
    now = simple_summary(matmul_flops=4_000_000)
    regressed = compare(now, entry(simple_summary()), fingerprint=machine().fingerprint)
    steady = compare(simple_summary(), entry(simple_summary()), fingerprint=machine().fingerprint)
    long = "x" * 60  # parametrised ids of a real suite are long too
    results = [TestResult(f"tests/test_a.py::test_r{i}[{long}]", now, regressed) for i in range(40)]
    results += [
        TestResult(f"tests/test_b.py::test_p{i}[{long}]", simple_summary(), steady)
        for i in range(3_000)
    ]
    text = render_markdown(results, machine=machine())
    assert len(text) < MARKDOWN_LIMIT
    # Every regression is there with its op table; the passing tests that do not fit
    # are counted.
    for i in range(40):
        assert f"test_r{i}[{long}]`" in text
    assert text.count("<details>") == 40
    listed = text.count("✅ pass")
    assert 0 < listed < 3_000
    assert f"{3_000 - listed} test(s) not listed ({3_000 - listed} pass)" in text
    # A run that fits is listed whole, with no such line.
    small = render_markdown(results[38:45], machine=machine())
    assert "not listed" not in small and small.count("| `tests/") == 7
