"""The HTML report without a browser: what the page holds, the CLI, the option, the writes.

The page's behaviour in a real browser is tests/test_html_browser.py.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from html_helpers import MARKED, REGRESSED, Reports, make_reports
from run_helpers import REPO_ROOT

import pytest_opprof as opprof
from pytest_opprof.model import build_tree
from pytest_opprof.render.flame import flame_tree
from pytest_opprof.render.html import DETAIL_LIMIT, ROW_OPS, page_data, render_html

if sys.version_info >= (3, 11):
    import tomllib
else:  # the test extra installs it there
    import tomli as tomllib


@pytest.fixture(scope="module")
def reports(tmp_path_factory: pytest.TempPathFactory) -> Reports:
    return make_reports(tmp_path_factory.mktemp("html"))


def cli(*args: object, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(REPO_ROOT))
    return subprocess.run(
        [sys.executable, "-m", "pytest_opprof", *map(str, args)],
        cwd=cwd, env=env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip


def test_json_report_keeps_flames_for_changed_and_marked_tests(reports: Reports) -> None:
    data = json.loads(reports.json.read_text(encoding="utf-8"))
    tests = data["tests"]
    assert tests[REGRESSED]["status"] == "regressed"
    assert tests[MARKED]["marked"] is True
    with_flame = {nodeid for nodeid, test in tests.items() if "flame" in test}
    assert with_flame == {REGRESSED, MARKED}  # the steady ones passed and are not marked
    flame = tests[REGRESSED]["flame"]
    names = flame["names"]
    nodes = {names[n[1]]: (i, n) for i, n in enumerate(flame["nodes"])}
    scope_index, scope = nodes["solve step"]
    _, matmul = nodes["numpy.matmul"]
    assert scope[0] == -1 and scope[2] == 0  # a top-level scope
    assert matmul[0] == scope_index and matmul[2] == 1 and matmul[5] == 3  # 3 calls, merged
    assert 0 < matmul[3] <= scope[3] <= flame["wall_ns"]


def test_page_is_self_contained_and_escapes_names(reports: Reports) -> None:
    page = reports.html.read_text(encoding="utf-8")
    assert page.startswith("<!DOCTYPE html>")
    lowered = page.lower()
    # Nothing to fetch: no linked file, no remote URL in markup, style or script.
    for fetch in ("src=", "href=", "url(", "@import", "http://", "https://", "fetch(", "xmlhttp"):
        assert fetch not in lowered, fetch
    assert "default-src 'none'" in page  # and the page forbids loading anything
    assert "<b>bold</b>" not in page  # the marked test's id is data, never markup
    assert "\\u003cb\\u003ebold" in page
    assert REGRESSED in page
    assert "1 regressed" in page and "5 profiled" in page


def test_cli_renders_the_same_page_as_the_plugin(reports: Reports, tmp_path: Path) -> None:
    out = tmp_path / "cli.html"
    done = cli("html", reports.json, "-o", out, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"wrote {out}"
    assert out.read_bytes() == reports.html.read_bytes()


def test_console_script_is_the_cli(reports: Reports, tmp_path: Path) -> None:
    scripts = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    target = scripts["project"]["scripts"]["pytest-opprof"]
    module, _, func = target.partition(":")
    out = tmp_path / "script.html"
    code = (
        f"import sys; sys.argv = ['pytest-opprof', 'html', {str(reports.json)!r}, '-o', "
        f"{str(out)!r}]; import {module}; {module}.{func}()"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], env=dict(os.environ, PYTHONPATH=str(REPO_ROOT)),
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert out.read_bytes() == reports.html.read_bytes()


def test_html_goes_through_a_symlink_and_into_stdout(reports: Reports, tmp_path: Path) -> None:
    target = tmp_path / "real.html"
    target.write_text("old", encoding="utf-8")
    link = tmp_path / "link.html"
    link.symlink_to(target)
    done = cli("html", reports.json, "-o", link, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert link.is_symlink()  # written through, like --junitxml, not replaced
    assert target.read_text(encoding="utf-8").startswith("<!DOCTYPE html>")
    piped = cli("html", reports.json, "-o", "/dev/stdout", cwd=tmp_path)
    assert piped.returncode == 0, piped.stderr
    assert piped.stdout.startswith("<!DOCTYPE html>") and REGRESSED in piped.stdout


def test_html_errors_name_the_file(reports: Reports, tmp_path: Path) -> None:
    missing = cli("html", tmp_path / "nope.json", cwd=tmp_path)
    assert missing.returncode == 2 and "nope.json: no such file" in missing.stderr
    baseline = next((reports.directory / "baselines").glob("*.json"))
    wrong = cli("html", baseline, cwd=tmp_path)
    assert wrong.returncode == 2
    assert f"{baseline}: not a JSON report" in wrong.stderr and "--opprof-report" in wrong.stderr
    blocked = tmp_path / "file"
    blocked.write_text("", encoding="utf-8")
    unwritable = cli("html", reports.json, "-o", blocked / "x.html", cwd=tmp_path)
    assert unwritable.returncode == 2 and "cannot be written" in unwritable.stderr
    for done in (missing, wrong, unwritable):
        assert "Traceback" not in done.stderr


PROJECT = """
import numpy as np

def test_one():
    np.add(np.ones(4), 1)
"""


def test_ini_twin_writes_the_page(run_pytest, pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_one=PROJECT)
    pytester.makefile(".ini", pytest="[pytest]\nopprof_html = reports/run.html\n")
    result = run_pytest("--opprof")
    assert result.ret == 0, result.stdout.str()
    page = (pytester.path / "reports" / "run.html").read_text(encoding="utf-8")
    assert "test_one.py::test_one" in page and "1 profiled" in page


def test_missing_jinja2_is_a_usage_error(
    run_pytest, pytester: pytest.Pytester, monkeypatch
) -> None:
    pytester.makepyfile(test_one=PROJECT)
    # A jinja2 that fails to import, ahead of the real one on the path.
    shadow = pytester.mkdir("shadow")
    (shadow / "jinja2.py").write_text("raise ImportError('no jinja2 here')\n", encoding="utf-8")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(shadow), os.environ["PYTHONPATH"]]))
    result = run_pytest("--opprof", "--opprof-html", "out.html")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["*--opprof-html / opprof_html: *pip install 'pytest-opprof?html?'*"]
    )
    assert not (pytester.path / "out.html").exists()


def test_flame_tree_merges_siblings_and_caps_closed() -> None:
    a = np.ones((32, 32))
    with opprof.profile() as prof:
        with opprof.record_function("outer"):
            for _ in range(20):
                a = a + 1
            with opprof.record_function("inner"):
                a = a @ a
        np.multiply(a, 2)
    tree = build_tree(prof.records())
    flame = flame_tree(tree, wall_time_ns=prof.wall_time_ns)
    names = flame["names"]
    rows = [(names[n[1]], n) for n in flame["nodes"]]
    by_name = {name: n for name, n in rows}
    assert by_name["numpy.add"][5] == 20  # twenty calls, one box
    assert [name for name, n in rows if n[0] == -1] == ["outer", "numpy.multiply"]  # by start
    for i, (_, node) in enumerate(rows):
        assert node[0] < i  # parents first
    capped = flame_tree(tree, wall_time_ns=prof.wall_time_ns, max_nodes=2)
    assert len(capped["nodes"]) == 2 and capped["omitted"] == len(rows) - 2
    kept = capped["nodes"]
    assert all(node[0] == -1 or 0 <= node[0] < i for i, node in enumerate(kept))
    assert capped["names"][kept[0][1]] == "outer"  # the widest survive


def test_page_data_embeds_full_figures_for_attention_first(reports: Reports) -> None:
    data = json.loads(reports.json.read_text(encoding="utf-8"))
    base = data["tests"]["test_project.py::test_steady[10]"]
    tests = {f"t.py::test_{i}": dict(base, status="pass") for i in range(DETAIL_LIMIT + 50)}
    tests["t.py::test_bad"] = data["tests"][REGRESSED]
    digest = page_data({"tests": tests})
    rows = digest["rows"]
    assert rows[0]["id"] == "t.py::test_bad" and rows[0]["d"]["reasons"]
    assert digest["detailed"] == DETAIL_LIMIT
    assert sum("d" in r for r in rows) == DETAIL_LIMIT
    assert all(len(r["ops"]) <= ROW_OPS for r in rows if "d" not in r)
    assert digest["names"][rows[0]["ops"][0][0]] == "numpy.matmul"  # names by index
    page = render_html({"tests": tests})
    assert f"Full figures are embedded for {DETAIL_LIMIT} of {DETAIL_LIMIT + 51} tests" in page


@pytest.mark.slow
def test_flames_travel_from_xdist_workers(tmp_path: Path) -> None:
    from html_helpers import PROJECT, run

    (tmp_path / "test_project.py").write_text(PROJECT, encoding="utf-8")
    recorded = run(tmp_path, "--opprof-update-baselines", "--opprof-rounds", "1", n=48)
    assert recorded.returncode == 0, recorded.stdout + recorded.stderr
    args = ("--opprof", "--opprof-rounds", "1", "--opprof-warn-only", "-p", "xdist", "-n", "2")
    done = run(tmp_path, *args, "--opprof-report", "r.json", "--opprof-html", "r.html", n=96)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "created: 2/2 workers" in done.stdout
    tests = json.loads((tmp_path / "r.json").read_text(encoding="utf-8"))["tests"]
    assert {k for k, t in tests.items() if "flame" in t} == {REGRESSED, MARKED}
    assert tests[MARKED]["marked"] is True
    flame = tests[REGRESSED]["flame"]
    assert "solve step" in flame["names"] and "numpy.matmul" in flame["names"]
    assert "solve step" in (tmp_path / "r.html").read_text(encoding="utf-8")


def test_unwritable_page_fails_the_session_naming_it(run_pytest, pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_one=PROJECT)
    (pytester.path / "blocked").write_text("a file, not a directory", encoding="utf-8")
    result = run_pytest("--opprof", "--opprof-html", "blocked/run.html")
    result.assert_outcomes(passed=1)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(
        ["opprof: report not written: *blocked/run.html: cannot be written*"]
    )
