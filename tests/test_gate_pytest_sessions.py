"""The regression gate end to end: real pytest sessions (``pytester`` subprocesses) that
record baselines, compare against them, and fail exactly the test that regressed.

Times are noisy on a shared machine, so every comparison here sets a time floor
(``--opprof-min-time 1000s``) that keeps times out of the verdict: the figures under
test are the deterministic ones (FLOPs, bytes, op counts), which a warm-up round makes
independent of test order.  The test bodies read their sizes from environment
variables, so one file serves the baseline run and the changed run.
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from run_helpers import PytestRunner

NO_TIMES = ["--opprof-min-time", "1000s", "--opprof-warmup", "1"]

MATH_TESTS = """
import os
import numpy as np

N = int(os.environ.get("MATMUL_N", "32"))
EXTRA_MB = int(os.environ.get("EXTRA_MB", "0"))

def test_matmul():
    a = np.ones((N, N))
    assert (a @ a)[0, 0] == N

def test_alloc():
    x = np.ones(1000)
    if EXTRA_MB:
        big = np.ones(EXTRA_MB * 2**20 // 8)
        assert big.nbytes == EXTRA_MB * 2**20
    assert x.sum() == 1000

def test_add():
    x = np.arange(1000.0)
    assert (x + x).sum() == 999000.0
"""

OTHER_TESTS = """
import os
import numpy as np

def test_other():
    n = int(os.environ.get("MATMUL_N", "32"))
    a = np.ones((n, n))
    assert (a @ a).shape == (n, n)
"""


@pytest.fixture(autouse=True)
def _env(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MATMUL_N", raising=False)
    monkeypatch.delenv("EXTRA_MB", raising=False)
    pytester.makeini("[pytest]\n")  # pins the rootdir: baselines/ lands here


def run(run_pytest: PytestRunner, *args: str) -> pytest.RunResult:
    return run_pytest("--opprof", *NO_TIMES, *args)


def update(run_pytest: PytestRunner, *args: str) -> pytest.RunResult:
    result = run(run_pytest, "--opprof-update-baselines", *args)
    assert result.ret == 0, result.stdout.str()
    return result


def stored(pytester: pytest.Pytester, module: str) -> dict[str, object]:
    path = pytester.path / "baselines" / module
    data: dict[str, object] = json.loads(path.read_text(encoding="utf-8"))["tests"]
    return data


def failed_section(result: pytest.RunResult, test: str) -> str:
    """The FAILURES section of one test (its longrepr) from the terminal output."""
    text = result.stdout.str()
    start = text.index(f"_ {test} _")
    end = min(
        (i for i in (text.find("\n___", start + 1), text.find("\n===", start + 1)) if i != -1),
        default=len(text),
    )
    return text[start:end]


# -- the gate --------------------------------------------------------------------


def test_update_then_unchanged_passes_then_bigger_matmul_or_64mb_more_fails_that_test(
    pytester: pytest.Pytester,
    monkeypatch: pytest.MonkeyPatch,
    run_pytest: PytestRunner,
) -> None:
    pytester.makepyfile(test_math=MATH_TESTS)
    first = update(run_pytest)
    first.assert_outcomes(passed=3)
    first.stdout.fnmatch_lines(["*3 new*", "wrote 1 baseline file(s)", "*test_math.json"])
    assert sorted(stored(pytester, "test_math.json")) == ["test_add", "test_alloc", "test_matmul"]

    same = run(run_pytest)
    same.assert_outcomes(passed=3)
    same.stdout.fnmatch_lines(["opprof baselines (baselines): 3 pass"])

    monkeypatch.setenv("MATMUL_N", "48")
    worse = run(run_pytest)
    worse.assert_outcomes(passed=2, failed=1)
    worse.stdout.fnmatch_lines(["FAILED test_math.py::test_matmul - opprof REGRESSED*"])
    section = failed_section(worse, "test_matmul")
    assert "--- baseline" in section and "baselines/test_math.json" in section
    assert "REGRESSED" in section
    flops_lines = [line for line in section.splitlines() if line.startswith(("- flops", "+ flops"))]
    assert len(flops_lines) == 2 and "(tolerance 0%)" in flops_lines[1], section
    assert "numpy.matmul  more flops" in section

    warn = run(run_pytest, "--opprof-warn-only")
    warn.assert_outcomes(passed=3)
    warn.stdout.fnmatch_lines(
        [
            "*1 regressed, 2 pass*",
            "*--opprof-warn-only: regressions are reported, not failed*",
            "opprof REGRESSED: test_math.py::test_matmul",
            "*numpy.matmul  more flops*",
        ]
    )

    # Compare runs wrote nothing: the same baseline judges 64 MB more in another test.
    monkeypatch.delenv("MATMUL_N")
    monkeypatch.setenv("EXTRA_MB", "64")
    result = run(run_pytest)
    result.assert_outcomes(passed=2, failed=1)
    result.stdout.fnmatch_lines(["FAILED test_math.py::test_alloc - opprof REGRESSED*"])
    section = failed_section(result, "test_alloc")
    peak = [line for line in section.splitlines() if line.startswith("+ peak memory")]
    assert peak and "REGRESSED" in peak[0], section
    assert "64" in section  # the new peak, in Mb


@pytest.mark.slow
def test_marker_tolerances_override_the_command_line(
    pytester: pytest.Pytester,
    monkeypatch: pytest.MonkeyPatch,
    run_pytest: PytestRunner,
) -> None:
    pytester.makepyfile(
        """
        import os
        import numpy as np
        import pytest

        N = int(os.environ.get("MATMUL_N", "32"))

        @pytest.mark.profile(flops_tolerance="300%")
        def test_lenient():
            a = np.ones((N, N))
            assert (a @ a).shape == (N, N)

        @pytest.mark.profile(flops_tolerance=0)
        def test_strict():
            a = np.ones((N, N))
            assert (a @ a).shape == (N, N)

        def test_plain():
            a = np.ones((N, N))
            assert (a @ a).shape == (N, N)
        """
    )
    update(run_pytest)
    monkeypatch.setenv("MATMUL_N", "48")  # about 3.4x the FLOPs: +240%
    memory = ["--opprof-memory-tolerance", "100"]  # the matrices grow too: not under test
    result = run(run_pytest, *memory, "--opprof-flops-tolerance", "10")
    # The command line allows +1000%: only the test whose marker allows none fails.
    result.assert_outcomes(passed=2, failed=1)
    result.stdout.fnmatch_lines(["FAILED *::test_strict*"])
    result = run(run_pytest, *memory, "--opprof-flops-tolerance", "0")
    # The command line allows none: only the test whose marker allows +300% passes.
    result.assert_outcomes(passed=1, failed=2)
    result.stdout.no_fnmatch_line("FAILED *::test_lenient*")


@pytest.mark.slow
def test_xdist_update_then_compare(
    pytester: pytest.Pytester,
    monkeypatch: pytest.MonkeyPatch,
    run_pytest: PytestRunner,
) -> None:
    pytester.makepyfile(test_math=MATH_TESTS, test_other=OTHER_TESTS)
    first = update(run_pytest, "-n", "2")
    first.assert_outcomes(passed=4)
    assert sorted(stored(pytester, "test_math.json")) == ["test_add", "test_alloc", "test_matmul"]
    assert sorted(stored(pytester, "test_other.json")) == ["test_other"]

    same = run(run_pytest, "-n", "2")
    same.assert_outcomes(passed=4)
    same.stdout.fnmatch_lines(["opprof baselines (baselines): 4 pass"])

    monkeypatch.setenv("EXTRA_MB", "64")
    worse = run(run_pytest, "-n", "2", "--opprof-report", "report.json")
    worse.assert_outcomes(passed=3, failed=1)
    worse.stdout.fnmatch_lines(["FAILED test_math.py::test_alloc - opprof REGRESSED*"])
    report = json.loads((pytester.path / "report.json").read_text(encoding="utf-8"))
    assert report["totals"] == {"pass": 3, "regressed": 1, "improved": 0, "new": 0}


@pytest.mark.slow
def test_xdist_update_keeps_the_old_entry_of_a_failed_test(
    pytester: pytest.Pytester,
    monkeypatch: pytest.MonkeyPatch,
    run_pytest: PytestRunner,
) -> None:
    pytester.makepyfile(
        test_math=MATH_TESTS
        + """
def test_flaky():
    assert os.environ.get("BREAK") is None
"""
    )
    update(run_pytest, "-n", "2")
    before = stored(pytester, "test_math.json")
    monkeypatch.setenv("BREAK", "1")
    monkeypatch.setenv("MATMUL_N", "40")
    result = run(run_pytest, "-n", "2", "--opprof-update-baselines")
    result.assert_outcomes(passed=3, failed=1)
    after = stored(pytester, "test_math.json")
    assert after["test_flaky"] == before["test_flaky"]  # failed: kept as it was
    assert after["test_matmul"] != before["test_matmul"]  # passed: refreshed
    leftovers = [p.name for p in (pytester.path / "baselines").iterdir()]
    assert leftovers == ["test_math.json"]  # no temporary files left behind


# -- bad baselines -------------------------------------------------------------


def _corrupt(text: str, how: str) -> str:
    data = json.loads(text)
    if how == "truncated":
        return text[: len(text) // 2]
    if how == "garbage":
        return "\x00not json at all"
    if how == "wrong type":
        data["tests"]["test_matmul"]["summary"]["flops"] = "lots"
        return json.dumps(data)
    data["schema"] = 99  # newer schema
    return json.dumps(data)


BAD_BASELINES = [
    ("truncated", "not valid JSON"),
    ("garbage", "not valid JSON"),
    ("wrong type", "flops"),
    ("newer schema", "newer than this pytest-opprof reads"),
]


@pytest.mark.slow
def test_bad_baseline_fails_its_module_names_the_file_and_is_left_untouched(
    pytester: pytest.Pytester,
    monkeypatch: pytest.MonkeyPatch,
    run_pytest: PytestRunner,
) -> None:
    # One update run records the baselines every kind of damage starts from.
    pytester.makepyfile(test_math=MATH_TESTS, test_other=OTHER_TESTS)
    update(run_pytest)
    path = pytester.path / "baselines" / "test_math.json"
    other = pytester.path / "baselines" / "test_other.json"
    recorded = path.read_text(encoding="utf-8"), other.read_bytes()
    other_before = stored(pytester, "test_other.json")["test_other"]
    monkeypatch.setenv("MATMUL_N", "40")  # test_other regresses: still judged

    for how, message in BAD_BASELINES:
        other.write_bytes(recorded[1])  # an update run below refreshes it
        path.write_text(_corrupt(recorded[0], how), encoding="utf-8")
        bad = path.read_bytes()
        # Both kinds of run with one kind of damage; the others, a compare run (faster suite).
        runs = [[], ["--opprof-update-baselines"]] if how == "truncated" else [[]]
        for extra in runs:
            result = run(run_pytest, *extra)
            # test_other regressed: it fails a compare run, an update run records it.
            result.assert_outcomes(passed=1 if extra else 0, failed=4 if not extra else 3)
            for test in ("test_matmul", "test_alloc", "test_add"):
                section = failed_section(result, test)
                assert "unusable baseline" in section and "test_math.json" in section, (
                    how,
                    section,
                )
                assert message in section, (how, section)
            result.stdout.fnmatch_lines(["opprof REGRESSED: test_other.py::test_other"])
            assert path.read_bytes() == bad, how  # untouched, by the compare and the update run
        if len(runs) == 2:  # the update run still refreshed the other module's file
            assert stored(pytester, "test_other.json")["test_other"] != other_before

    # Under --opprof-warn-only an unusable baseline is reported, not failed (the same
    # recorded baselines; test_math.py alone and unchanged, as when it had its own run).
    monkeypatch.delenv("MATMUL_N")
    path.write_text("{", encoding="utf-8")
    result = run(run_pytest, "--opprof-warn-only", "test_math.py")
    result.assert_outcomes(passed=3)
    result.stdout.fnmatch_lines(["unusable baselines:", "*test_math.json*not valid JSON*"])


@pytest.mark.slow
def test_sigkill_during_update_leaves_the_old_file_whole(
    pytester: pytest.Pytester,
    monkeypatch: pytest.MonkeyPatch,
    run_pytest: PytestRunner,
) -> None:
    pytester.makepyfile(test_math=MATH_TESTS)
    update(run_pytest)
    path = pytester.path / "baselines" / "test_math.json"
    old = path.read_bytes()
    # The kill is real; the conftest only picks the worst moment for it: the new text
    # is written to its temporary file and being flushed, just before the rename.
    pytester.makeconftest(
        """
        import os
        import signal

        _fsync = os.fsync

        def _fsync_then_die(fd):
            _fsync(fd)
            target = os.readlink(f"/proc/self/fd/{fd}")
            if os.environ.get("KILL_IN_WRITE") and "baselines" in target:
                os.kill(os.getpid(), signal.SIGKILL)

        os.fsync = _fsync_then_die
        """
    )
    monkeypatch.setenv("KILL_IN_WRITE", "1")
    monkeypatch.setenv("MATMUL_N", "40")
    killed = run(run_pytest, "--opprof-update-baselines")
    assert killed.ret == -9, killed.stdout.str()
    assert path.read_bytes() == old
    json.loads(old)  # whole and valid
    monkeypatch.delenv("KILL_IN_WRITE")
    # A stray temporary file from the killed run does not disturb the next one.
    monkeypatch.setenv("MATMUL_N", "32")
    run(run_pytest).assert_outcomes(passed=3)


def test_parametrized_ids_with_slashes_and_dots_stay_inside_the_baseline_dir(
    pytester: pytest.Pytester,
    run_pytest: PytestRunner,
) -> None:
    pytester.makepyfile(
        test_ids="""
        import numpy as np
        import pytest

        @pytest.mark.parametrize("p", ["../../escape", "a/b", "/abs", "..", "x::y"])
        def test_ids(p):
            assert np.add(np.ones(3), 1).sum() == 6
        """
    )
    result = update(run_pytest)
    result.assert_outcomes(passed=5)
    files = sorted(p.relative_to(pytester.path).as_posix() for p in pytester.path.rglob("*.json"))
    assert files == ["baselines/test_ids.json"]
    keys = sorted(stored(pytester, "test_ids.json"))
    assert keys == sorted(f"test_ids[{p}]" for p in ["../../escape", "a/b", "/abs", "..", "x::y"])
    run(run_pytest).assert_outcomes(passed=5)


# -- reports ---------------------------------------------------------------------


def test_json_report_markdown_and_junit_properties(
    pytester: pytest.Pytester,
    monkeypatch: pytest.MonkeyPatch,
    run_pytest: PytestRunner,
) -> None:
    pytester.makepyfile(test_math=MATH_TESTS)
    update(run_pytest, "-k", "not test_add")
    monkeypatch.setenv("MATMUL_N", "48")
    result = run(
        run_pytest,
        "--opprof-report",
        "out/report.json",
        "--opprof-markdown",
        "out/summary.md",
        "--junitxml",
        "out/junit.xml",
    )
    result.assert_outcomes(passed=2, failed=1)

    report = json.loads((pytester.path / "out/report.json").read_text(encoding="utf-8"))
    assert report["kind"] == "opprof-report" and report["schema"] == 2
    assert report["totals"] == {"pass": 1, "regressed": 1, "improved": 0, "new": 1}
    matmul = report["tests"]["test_math.py::test_matmul"]
    assert matmul["status"] == "regressed"
    assert matmul["baseline_file"] == "baselines/test_math.json"
    flops = next(m for m in matmul["verdict"]["metrics"] if m["metric"] == "flops")
    assert flops["status"] == "regressed" and flops["now"] > flops["baseline"] > 0
    assert flops["change"] == pytest.approx(48**3 / 32**3 - 1, rel=0.05)
    assert matmul["verdict"]["reasons"][0]["op"] == "numpy.matmul"
    assert report["tests"]["test_math.py::test_add"]["status"] == "new"

    markdown = (pytester.path / "out/summary.md").read_text(encoding="utf-8")
    assert markdown.startswith("## pytest-opprof: 1 regressed, 1 new, 1 pass")
    assert "| `test_math.py::test_matmul` | ❌ regressed |" in markdown
    assert "| `numpy.matmul` | more flops |" in markdown

    suite = ET.parse(pytester.path / "out/junit.xml").getroot()
    props = {
        case.get("name"): {p.get("name"): p.get("value") for p in case.iter("property")}
        for case in suite.iter("testcase")
    }
    assert props["test_matmul"]["opprof_verdict"] == "regressed"
    assert props["test_add"]["opprof_verdict"] == "new"
    assert props["test_alloc"]["opprof_verdict"] == "pass"
    assert int(props["test_matmul"]["opprof_flops"]) == flops["now"]
    assert int(props["test_alloc"]["opprof_peak_bytes"]) >= 8000  # np.ones(1000)
    assert float(props["test_add"]["opprof_cpu_time_us"]) > 0
    assert int(props["test_add"]["opprof_op_count"]) >= 3


XPASS_TESTS = """
import os
import numpy as np
import pytest

@pytest.mark.xfail(reason="flaky on some machines")
def test_xpassed():
    n = int(os.environ.get("MATMUL_N", "32"))
    a = np.ones((n, n))
    assert (a @ a)[0, 0] == n

@pytest.mark.xfail(reason="fails", strict=True)
def test_xfailed():
    assert np.ones(3).sum() == 4
"""


@pytest.mark.slow
def test_xpassed_test_is_baselined_judged_and_fails_when_it_regresses(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, run_pytest: PytestRunner
) -> None:
    # An xpassed test (non-strict xfail that passed) was profiled and
    # printed but never baselined, judged or listed as new.
    pytester.makepyfile(test_x=XPASS_TESTS)
    first = update(run_pytest, "--junitxml", "junit.xml")
    first.assert_outcomes(xpassed=1, xfailed=1)
    first.stdout.fnmatch_lines(["new (no baseline):", "  test_x.py::test_xpassed"])
    assert sorted(stored(pytester, "test_x.json")) == ["test_xpassed"]

    run(run_pytest).assert_outcomes(xpassed=1, xfailed=1)
    monkeypatch.setenv("MATMUL_N", "48")
    worse = run(run_pytest, "--junitxml", "junit.xml")
    worse.assert_outcomes(failed=1, xfailed=1)
    worse.stdout.fnmatch_lines(["FAILED test_x.py::test_xpassed - opprof REGRESSED*"])
    assert "numpy.matmul  more flops" in failed_section(worse, "test_xpassed")
    # JUnit XML reports the regression as a failure, not as an xfail-marked skip.
    case = next(
        c
        for c in ET.parse(pytester.path / "junit.xml").getroot().iter("testcase")
        if c.get("name") == "test_xpassed"
    )
    assert case.find("failure") is not None and case.find("skipped") is None


@pytest.mark.slow
def test_require_baselines_fails_new_tests_only(
    pytester: pytest.Pytester, run_pytest: PytestRunner
) -> None:
    pytester.makepyfile(test_math=MATH_TESTS)
    update(run_pytest, "-k", "test_add")
    result = run(run_pytest, "--opprof-require-baselines")
    result.assert_outcomes(passed=1, failed=2)
    result.stdout.fnmatch_lines(["FAILED test_math.py::test_alloc - opprof NEW*"])
    assert "--opprof-require-baselines" in failed_section(result, "test_matmul")
    # Recording them is what the option asks for: an update run passes and writes them.
    update(run_pytest, "--opprof-require-baselines")
    run(run_pytest, "--opprof-require-baselines").assert_outcomes(passed=3)


def test_baseline_dir_option_and_ini(pytester: pytest.Pytester, run_pytest: PytestRunner) -> None:
    pytester.makepyfile(test_math=MATH_TESTS)
    update(run_pytest, "--opprof-baseline-dir", "perf/base")
    assert (pytester.path / "perf/base/test_math.json").is_file()
    pytester.makeini("[pytest]\nopprof_baseline_dir = perf/base\n")
    run(run_pytest).assert_outcomes(passed=3)
    assert not (pytester.path / "baselines").exists()


# -- bad option values (usage errors: nothing is profiled, so in this process) -----


@pytest.mark.parametrize(
    ("args", "ini", "expected"),
    [
        (
            ["--opprof-time-tolerance", "fast"],
            "",
            "*argument --opprof-time-tolerance: expected a fraction such as 0.2 or a "
            "percentage such as 20%, got 'fast'*",
        ),
        (
            ["--opprof-memory-tolerance=-5%"],
            "",
            "*argument --opprof-memory-tolerance: expected a fraction*(not negative)*",
        ),
        (
            ["--opprof-min-time", "5 parsecs"],
            "",
            "*argument --opprof-min-time: expected a duration such as 50us*",
        ),
        ([], "opprof_flops_tolerance = lots", "*ini setting opprof_flops_tolerance = 'lots'*20%*"),
        ([], "opprof_warn_only = maybe", "*ini setting opprof_warn_only: expected true or false*"),
    ],
)
def test_bad_gate_option_is_a_usage_error(
    pytester: pytest.Pytester,
    args: list[str],
    ini: str,
    expected: str,
    run_pytest: PytestRunner,
) -> None:
    pytester.makeini(f"[pytest]\n{ini}\n")
    pytester.makepyfile("def test_a(): pass")
    result = run_pytest.inprocess("--opprof", *NO_TIMES, *args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([expected])
