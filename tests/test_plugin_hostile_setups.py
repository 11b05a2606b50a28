"""The plugin beside other plugins and interpreters, under interruption, and with hostile paths.

Every run that profiles is a real ``python -m pytest`` subprocess (native hooks are
process state); the one refused at the command line runs in this process.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from run_helpers import PLUGIN

import pytest_opprof
from pytest_opprof.plugin.traces import trace_file

if TYPE_CHECKING:
    from run_helpers import PytestRunner


NUMPY_TESTS = """
import numpy as np
import pytest

@pytest.mark.parametrize("n", range(6))
def test_ops(n):
    a = np.arange(12.0).reshape(3, 4) + n
    assert (a @ a.T).sum() > 0

def test_fails():
    assert np.ones(3).sum() == 4

@pytest.mark.skip(reason="skipped on purpose")
def test_skipped():
    pass

@pytest.mark.xfail(reason="expected", strict=True)
def test_xfail():
    assert np.zeros(2).any()
"""

# Written at the very end of the session: are numpy and the allocator restored?
RESTORED_CONFTEST = """
import pytest

@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config):
    import sys
    state = {"manager_imported": "pytest_opprof.plugin.worker" in sys.modules}
    if state["manager_imported"]:
        from pytest_opprof import _native
        state["numpy_installed"] = bool(_native.lib.opprof_numpy_installed())
        state["recording"] = _native.is_recording()
        state["memory"] = _native.memory_counters()._asdict()
    with open("restored.json", "w") as f:
        import json
        json.dump(state, f)
"""

OUTCOMES = {"passed": 6, "failed": 1, "skipped": 1, "xfailed": 1}


def _restored(pytester: pytest.Pytester) -> dict[str, object]:
    state: dict[str, object] = json.loads((pytester.path / "restored.json").read_text())
    return state


def _assert_clean(result: pytest.RunResult) -> None:
    text = result.stdout.str() + result.stderr.str()
    assert "INTERNALERROR" not in text
    assert "Traceback" not in text


def test_same_outcomes_with_and_without_opprof(
    pytester: pytest.Pytester, run_pytest: PytestRunner
) -> None:
    pytester.makepyfile(test_np=NUMPY_TESTS)
    pytester.makeconftest(RESTORED_CONFTEST)
    run_pytest().assert_outcomes(**OUTCOMES)
    assert _restored(pytester) == {"manager_imported": False}
    result = run_pytest("--opprof")
    result.assert_outcomes(**OUTCOMES)
    result.stdout.fnmatch_lines(["*test_np.py::test_ops[[]5[]]*"])
    state = _restored(pytester)
    assert state["numpy_installed"] is False and state["recording"] is False


@pytest.mark.slow
def test_beside_xdist(pytester: pytest.Pytester, run_pytest: PytestRunner) -> None:
    pytester.makepyfile(test_np=NUMPY_TESTS)
    result = run_pytest("-n", "2", "--opprof")
    result.assert_outcomes(**OUTCOMES)
    result.stdout.fnmatch_lines(["*created: 2/2 workers*", "*test_np.py::test_ops[[]0[]]*"])
    _assert_clean(result)


def test_an_op_that_frees_more_than_2_gib_reaches_the_xdist_controller(
    pytester: pytest.Pytester, run_pytest: PytestRunner
) -> None:
    """A figure below -2**31 (here the bytes freed outside any op, as numpy's own
    ``test_big_arrays`` frees them) rides to the controller: execnet, pytest-xdist's
    transport, cannot carry such an int, and the worker's report ended the whole run with
    an internal error until the payload travelled as JSON text.  ``np.empty`` touches no
    page, so the 2 GiB cost no memory."""
    pytester.makepyfile(
        test_big="""
        import numpy as np

        def test_frees_a_big_block():
            a = np.empty(2**31 + 2**20, dtype=np.uint8)
            del a

        def test_after():
            assert np.ones(3).sum() == 3
        """
    )
    result = run_pytest("-n", "2", "--opprof", "--opprof-report=report.json")
    result.assert_outcomes(passed=2)
    _assert_clean(result)
    tests = json.loads((pytester.path / "report.json").read_text())["tests"]
    freed = [
        op["self_memory_bytes"]
        for op in tests["test_big.py::test_frees_a_big_block"]["ops"].values()
    ]
    assert min(freed) < -(2**31), freed


def test_beside_pytest_benchmark(pytester: pytest.Pytester, run_pytest: PytestRunner) -> None:
    pytester.makepyfile(
        """
        import numpy as np

        def test_bench(benchmark):
            a = np.ones((32, 32))
            result = benchmark.pedantic(lambda: (a @ a).sum(), rounds=20, iterations=5)
            assert result == 32 * 32 * 32

        def test_plain():
            assert np.add(1, 2) == 3
        """
    )
    result = run_pytest("--opprof")  # pytest-benchmark loads by its entry point
    result.assert_outcomes(passed=2)
    # Its loops are off (plugin/repeatable.py): the pedantic call runs the function once,
    # not 20 rounds x 5 iterations, and pytest-benchmark records no timing.
    result.stdout.fnmatch_lines(["opprof: pytest-benchmark's timing loops are off*"])
    result.stdout.no_fnmatch_line("*benchmark: 1 tests*")
    line = next(x for x in result.stdout.lines if x.endswith("::test_bench"))
    assert "numpy.matmul" in line and int(line.split()[1]) < 10
    _assert_clean(result)


@pytest.mark.slow
def test_beside_pytest_randomly(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, run_pytest: PytestRunner
) -> None:
    monkeypatch.delenv(
        "PYTEST_ADDOPTS", raising=False
    )  # tests/conftest.py turns it off for other runs
    pytester.makepyfile(test_np=NUMPY_TESTS)
    pytester.makeconftest(RESTORED_CONFTEST)
    for seed in ("1", "2"):
        result = run_pytest("-p", "randomly", f"--randomly-seed={seed}", "--opprof")
        result.assert_outcomes(**OUTCOMES)
        result.stdout.fnmatch_lines([f"*randomly-seed={seed}*"])
        assert _restored(pytester)["numpy_installed"] is False


def test_disabled_with_p_no_opprof(pytester: pytest.Pytester, run_pytest: PytestRunner) -> None:
    if PLUGIN:
        pytest.skip("the pytest11 entry point is not visible here: -p no:opprof has no effect")
    pytester.makepyfile(test_np=NUMPY_TESTS)
    pytester.makeconftest(RESTORED_CONFTEST)
    result = run_pytest("-p", "no:opprof")
    result.assert_outcomes(**OUTCOMES)
    assert _restored(pytester) == {"manager_imported": False}
    refused = run_pytest.inprocess("-p", "no:opprof", "--opprof")
    assert refused.ret == pytest.ExitCode.USAGE_ERROR
    refused.stderr.fnmatch_lines(["*unrecognized arguments: --opprof*"])


def test_under_python_dev_mode(pytester: pytest.Pytester, run_pytest: PytestRunner) -> None:
    """-X dev: debug allocators under the memory hooks, ResourceWarnings shown, asserts on."""
    pytester.makepyfile(test_np=NUMPY_TESTS)
    pytester.makeconftest(RESTORED_CONFTEST)
    result = run_pytest("--opprof", "--opprof-python-memory", "-W", "error", python=("-X", "dev"))
    result.assert_outcomes(**OUTCOMES)
    _assert_clean(result)
    assert "Warning" not in result.stderr.str()
    result.stdout.no_fnmatch_line("*warnings summary*")
    state = _restored(pytester)
    assert state["numpy_installed"] is False and state["recording"] is False


INTERRUPTED = """
import numpy as np

def test_before():
    assert np.ones(3).sum() == 3

def test_interrupted():
    np.ones(3).sum()
    raise KeyboardInterrupt

def test_never_runs():
    pass
"""


def test_keyboard_interrupt_restores_hooks_and_writes_no_baseline_for_it(
    pytester: pytest.Pytester,
    run_pytest: PytestRunner,
) -> None:
    pytester.makepyfile(test_int=INTERRUPTED)
    pytester.makeconftest(RESTORED_CONFTEST)
    result = run_pytest("--opprof-update-baselines", "--opprof-python-memory")
    assert result.ret == pytest.ExitCode.INTERRUPTED
    state = _restored(pytester)
    assert state["numpy_installed"] is False and state["recording"] is False
    stored = pytester.path / "baselines" / "test_int.json"
    names = set(json.loads(stored.read_text())["tests"]) if stored.exists() else set()
    assert "test_interrupted" not in names and "test_never_runs" not in names


def test_baseline_dir_under_a_file_is_a_clear_error(
    pytester: pytest.Pytester, run_pytest: PytestRunner
) -> None:
    pytester.makepyfile(test_np=NUMPY_TESTS)
    (pytester.path / "blocker").write_text("a file where a directory should be\n")
    result = run_pytest("--opprof-update-baselines", "--opprof-baseline-dir", "blocker/base")
    _assert_clean(result)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["*unusable baseline*blocker/base/test_np.json*Not a directory*"])


def test_read_only_baseline_dir_is_a_clear_error(
    pytester: pytest.Pytester, run_pytest: PytestRunner
) -> None:
    pytester.makepyfile(test_np=NUMPY_TESTS)
    base = pytester.path / "base"
    base.mkdir()
    mounted = False
    if os.geteuid() == 0:  # root ignores modes: a read-only tmpfs
        done = subprocess.run(["mount", "-t", "tmpfs", "-o", "ro,size=64k", "tmpfs", str(base)])
        if done.returncode != 0:
            pytest.skip("running as root without the right to mount a read-only tmpfs")
        mounted = True
    else:
        base.chmod(0o555)
    try:
        result = run_pytest("--opprof-update-baselines", "--opprof-baseline-dir", "base")
    finally:
        if mounted:
            subprocess.run(["umount", str(base)], check=True)
        else:
            base.chmod(0o755)
    _assert_clean(result)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["*baselines not written*base/test_np.json: cannot be written*"])


def test_report_at_a_symlink_is_written_through_as_junitxml_does(
    pytester: pytest.Pytester, run_pytest: PytestRunner
) -> None:
    # A link a CI job set up (report.json -> artifacts/...): kept, and its target written.
    pytester.makepyfile(test_np=NUMPY_TESTS)
    (pytester.path / "artifacts").mkdir()
    report_target = pytester.path / "artifacts" / "report.json"
    report_target.write_text("old\n")
    (pytester.path / "report.json").symlink_to(report_target)
    (pytester.path / "summary.md").symlink_to(pytester.path / "artifacts" / "summary.md")
    result = run_pytest(
        "--opprof", "--opprof-report", "report.json", "--opprof-markdown", "summary.md"
    )
    result.assert_outcomes(**OUTCOMES)
    assert (pytester.path / "report.json").is_symlink()
    assert json.loads(report_target.read_text())["kind"] == "opprof-report"
    assert (pytester.path / "summary.md").is_symlink()  # dangling before: now its file exists
    assert "test_np.py::test_ops" in (pytester.path / "artifacts" / "summary.md").read_text()
    assert sorted(os.listdir(pytester.path / "artifacts")) == ["report.json", "summary.md"]


def test_unwritable_report_path_is_a_clear_error(
    pytester: pytest.Pytester, run_pytest: PytestRunner
) -> None:
    pytester.makepyfile(test_np=NUMPY_TESTS)
    (pytester.path / "blocker").write_text("a file\n")
    result = run_pytest("--opprof", "--opprof-report", "blocker/report.json")
    _assert_clean(result)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["*report not written*blocker/report.json: cannot be written*"])


def test_trace_at_a_symlink_is_written_through(
    pytester: pytest.Pytester, run_pytest: PytestRunner
) -> None:
    pytester.makepyfile(test_np="def test_a():\n    import numpy as np\n    np.ones(2).sum()\n")
    target = pytester.path / "kept.json"
    target.write_text("old\n")
    traces = pytester.path / "traces"
    traces.mkdir()
    link = trace_file(traces, "test_np.py::test_a")
    link.symlink_to(target)
    result = run_pytest("--opprof", "--opprof-trace-dir", "traces")
    result.assert_outcomes(passed=1)
    assert link.is_symlink() and json.loads(target.read_text())["traceEvents"]
    assert os.listdir(traces) == [link.name]


def test_package_never_unpickles_or_evaluates(pytester: pytest.Pytester) -> None:
    # The whole package, not the plugin/ folder trace_file now lives in.
    package = Path(pytest_opprof.__file__).parent
    offenders = []
    for path in sorted(package.rglob("*.py")):
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            code = line.split("#", 1)[0]
            if any(word in code for word in ("pickle", "marshal", "eval(", "exec(", "shelve")):
                offenders.append(f"{path.name}:{number}: {line.strip()}")
            if "yaml.load(" in code or "literal_eval" in code:
                offenders.append(f"{path.name}:{number}: {line.strip()}")
    assert offenders == []
    assert len(list(package.rglob("*.py"))) > 20  # the grep saw the whole package
