"""Files and values a hostile user hands a profiled run.

Each test runs real ``python -m pytest`` processes on real files (FIFOs, symlinks,
oversized names, hand-broken baselines).  What must hold: the plugin writes
through a symlink or FIFO the way ``--junitxml`` does (never replacing them), a
baseline it cannot use fails only its own module's tests with the file named, a
bad option is a usage error naming it, and nothing ends in an INTERNALERROR.
"""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from baseline_helpers import entry, simple_summary

from pytest_opprof.gate.store import dumps

if TYPE_CHECKING:
    from run_helpers import PytestRunner

TESTS_DIR = Path(__file__).parent
MAX_NAME_BYTES = 255  # a file name's limit on ext4, XFS, APFS, NTFS

TWO_MODULES = {
    "test_np": "import numpy as np\n\ndef test_a():\n    np.ones(100).sum()\n",
    "test_other": "import numpy as np\n\ndef test_b():\n    np.ones(10).sum()\n",
}


def _assert_clean(result: pytest.RunResult) -> None:
    text = result.stdout.str() + result.stderr.str()
    assert "INTERNALERROR" not in text
    assert "Traceback" not in text


def _recorded(pytester: pytest.Pytester, run_pytest: PytestRunner, *args: str) -> Path:
    """Both modules' baselines recorded by a real update run; the baseline directory."""
    pytester.makepyfile(**TWO_MODULES)
    result = run_pytest("--opprof-update-baselines", *args)
    result.assert_outcomes(passed=2)
    return pytester.path / "baselines"


# ---- written through, never replaced --------------------------------------------------


def test_report_and_markdown_at_fifos_reach_their_readers(
    pytester: pytest.Pytester, run_pytest: PytestRunner
) -> None:
    # A FIFO stands for /dev/stdout, a device or a process substitution: renaming a
    # temporary file over it replaced it, and its reader never saw a byte.
    pytester.makepyfile(**TWO_MODULES)
    report, markdown = pytester.path / "report.pipe", pytester.path / "summary.pipe"
    os.mkfifo(report)
    os.mkfifo(markdown)
    (pytester.path / "md-link").symlink_to(markdown)
    readers = [
        subprocess.Popen(["cat", str(p)], stdout=subprocess.PIPE) for p in (report, markdown)
    ]
    try:
        result = run_pytest(
            "--opprof", "--opprof-report", "report.pipe", "--opprof-markdown", "md-link"
        )
        outs = [reader.communicate(timeout=60)[0] for reader in readers]
    finally:
        for reader in readers:
            reader.kill()
            reader.wait()
    result.assert_outcomes(passed=2)
    _assert_clean(result)
    assert json.loads(outs[0])["kind"] == "opprof-report"
    assert b"test_np.py::test_a" in outs[1]
    assert stat.S_ISFIFO(os.lstat(report).st_mode) and stat.S_ISFIFO(os.lstat(markdown).st_mode)
    assert (pytester.path / "md-link").is_symlink()


def test_trace_dir_entry_that_is_a_fifo_is_written_through(
    pytester: pytest.Pytester, run_pytest: PytestRunner
) -> None:
    from pytest_opprof.plugin.traces import trace_file

    pytester.makepyfile(test_np=TWO_MODULES["test_np"])
    traces = pytester.path / "traces"
    traces.mkdir()
    fifo = trace_file(traces, "test_np.py::test_a")
    os.mkfifo(fifo)
    reader = subprocess.Popen(["cat", str(fifo)], stdout=subprocess.PIPE)
    try:
        result = run_pytest("--opprof", "--opprof-trace-dir", "traces")
        out = reader.communicate(timeout=60)[0]
    finally:
        reader.kill()
        reader.wait()
    result.assert_outcomes(passed=1)
    assert json.loads(out)["traceEvents"]
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode) and os.listdir(traces) == [fifo.name]


# ---- a baseline that cannot be read fails its module only ---------------------------


HOSTILE_BASELINES = {
    "a 5,000-digit integer": lambda good: good.replace(
        '"op_count": ', '"op_count": ' + "9" * 5000 + ', "x": ', 1
    ),
    "JSON nested 200,000 deep": lambda good: "[" * 200_000 + "]" * 200_000,
    "a duplicated test key": lambda good: good.replace(
        '"tests": {', '"tests": {"test_dup": {}, "test_dup": {},', 1
    ),
}


@pytest.mark.slow
@pytest.mark.parametrize("what", sorted(HOSTILE_BASELINES))
def test_hostile_baseline_fails_only_its_module_naming_the_file(
    pytester: pytest.Pytester, run_pytest: PytestRunner, what: str
) -> None:
    base = _recorded(pytester, run_pytest)
    broken = base / "test_np.json"
    broken.write_text(HOSTILE_BASELINES[what](broken.read_text()))
    before = broken.read_bytes()
    result = run_pytest("--opprof")
    _assert_clean(result)
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines([f"*unusable baseline: {broken}: *"])
    assert "test_other.py::test_b" not in "".join(
        line for line in result.stdout.lines if line.startswith("FAILED")
    )
    # An update neither drops the file nor a duplicate silently: it stays as it was.
    updated = run_pytest("--opprof-update-baselines")
    _assert_clean(updated)
    updated.stdout.fnmatch_lines(["*unusable baseline*left untouched*"])
    assert broken.read_bytes() == before


def test_duplicate_key_is_named(pytester: pytest.Pytester, run_pytest: PytestRunner) -> None:
    base = _recorded(pytester, run_pytest)
    broken = base / "test_np.json"
    broken.write_text(HOSTILE_BASELINES["a duplicated test key"](broken.read_text()))
    result = run_pytest("--opprof")
    result.stdout.fnmatch_lines(['*test_np.json: the key "test_dup" appears twice*'])


def test_fifo_at_a_baseline_path_is_refused_without_waiting(
    pytester: pytest.Pytester, run_pytest: PytestRunner
) -> None:
    base = _recorded(pytester, run_pytest)
    (base / "test_np.json").unlink()
    os.mkfifo(base / "test_np.json")
    result = run_pytest("--opprof")  # before: blocked in open() until the 600 s timeout
    _assert_clean(result)
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*test_np.json: not a regular file*"])


@pytest.mark.parametrize("what", sorted(HOSTILE_BASELINES))
def test_cli_prints_one_line_and_exits_2(tmp_path: Path, what: str) -> None:
    good = dumps({"test_a": entry(simple_summary())})
    path = tmp_path / "hostile.json"
    path.write_text(HOSTILE_BASELINES[what](good))
    (tmp_path / "good.json").write_text(good)
    for args in (["show", str(path)], ["compare", str(tmp_path / "good.json"), str(path)]):
        done = subprocess.run(
            [sys.executable, "-m", "pytest_opprof", *args],
            capture_output=True,
            text=True,
            env={**os.environ, "PYTHONPATH": str(TESTS_DIR.parent)},
            timeout=120,
        )
        assert done.returncode == 2, done.stderr
        assert done.stderr.count("\n") == 1 and done.stderr.startswith(f"error: {path}: ")


# ---- poor errors: options ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["--opprof-max-events", str(2**63)],
            "*--opprof-max-events: expected a positive integer*(at most 4294967296, 2**32)*",
        ),
        (
            ["--opprof-cuda-sample-rate", str(2**63)],
            "*--opprof-cuda-sample-rate: expected a positive integer*(at most 2147483648, 2**31)*",
        ),
        (
            ["--opprof-rounds", "99999999999"],
            "*--opprof-rounds: expected auto or a positive integer*(at most 1000)*",
        ),
        (
            ["--opprof-warmup", "99999999999"],
            "*--opprof-warmup: expected an integer >= 0*(at most 1000)*",
        ),
    ],
)
def test_out_of_range_numbers_are_usage_errors(
    pytester: pytest.Pytester, run_pytest: PytestRunner, args: list[str], message: str
) -> None:
    pytester.makepyfile(test_np=TWO_MODULES["test_np"])
    result = run_pytest("--opprof", *args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([message])


def test_marker_rounds_out_of_range_is_named(
    pytester: pytest.Pytester, run_pytest: PytestRunner
) -> None:
    pytester.makepyfile(
        test_np="import pytest\n\n@pytest.mark.profile(rounds=10**9)\ndef test_a():\n    pass\n"
    )
    result = run_pytest("--opprof")
    _assert_clean(result)
    result.stdout.fnmatch_lines(["*rounds*(at most 1000)*"])


@pytest.mark.parametrize("kind", ["a file", "a fifo", "under a file"])
def test_unusable_trace_dir_is_a_usage_error(
    pytester: pytest.Pytester, run_pytest: PytestRunner, kind: str
) -> None:
    pytester.makepyfile(test_np=TWO_MODULES["test_np"])
    blocker = pytester.path / "blocker"
    if kind == "a fifo":  # like /dev/null: exists, is not a directory
        os.mkfifo(blocker)
    else:
        blocker.write_text("a file\n")
    target = "blocker/traces" if kind == "under a file" else "blocker"
    result = run_pytest("--opprof", "--opprof-trace-dir", target)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    why = "cannot be created" if kind == "under a file" else "not a directory"
    result.stderr.fnmatch_lines([f"*--opprof-trace-dir*{target}: {why}*"])
    assert "passed" not in result.stdout.str()  # refused before any test ran


# ---- poor errors: baselines ---------------------------------------------------------------


@pytest.mark.slow
def test_lone_surrogate_key_survives_an_update(
    pytester: pytest.Pytester, run_pytest: PytestRunner
) -> None:
    base = _recorded(pytester, run_pytest)
    path = base / "test_np.json"
    data = json.loads(path.read_text())
    data["tests"]["\ud800odd"] = data["tests"]["test_a"]
    path.write_text(json.dumps(data))  # ensure_ascii: the surrogate as \ud800, as JSON allows
    result = run_pytest("--opprof-update-baselines")
    _assert_clean(result)
    result.assert_outcomes(passed=2)
    assert "not written" not in result.stdout.str()
    assert sorted(json.loads(path.read_text())["tests"]) == ["test_a", "\ud800odd"]
    shown = subprocess.run(
        [sys.executable, "-m", "pytest_opprof", "show", str(path)],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(TESTS_DIR.parent)},
        timeout=120,
    )
    assert shown.returncode == 0, shown.stderr
    assert "\\ud800odd" in shown.stdout


@pytest.mark.slow
def test_too_few_samples_fail_the_test_naming_the_field(
    pytester: pytest.Pytester, run_pytest: PytestRunner
) -> None:
    base = _recorded(pytester, run_pytest, "--opprof-rounds", "3")
    path = base / "test_np.json"
    data = json.loads(path.read_text())
    # Schema 2 stores a time as its samples in one string: two of the three rounds'.
    assert len(data["tests"]["test_a"]["summary"]["wall_time"].split()) == 4  # 3 + unit
    data["tests"]["test_a"]["summary"]["wall_time"] = "1.5 1.6 ms"
    path.write_text(json.dumps(data))
    for args in (["--opprof"], ["--opprof-update-baselines"]):
        result = run_pytest(*args, "--opprof-rounds", "3")
        _assert_clean(result)  # before: INTERNALERROR (no sample to scale)
        result.stdout.fnmatch_lines(
            [
                "*test_np.json: tests.test_a.summary.wall_time*: "
                "expected one time per round (3), got 2*"
            ]
        )
        result.assert_outcomes(passed=1, failed=1)
    assert json.loads(path.read_text()) == data  # the update left it as it was


def test_one_unwritable_baseline_directory_stops_no_other(
    pytester: pytest.Pytester, run_pytest: PytestRunner
) -> None:
    pytester.makepyfile(test_top=TWO_MODULES["test_np"])
    (pytester.path / "pkg").mkdir()
    (pytester.path / "pkg" / "test_sub.py").write_text(TWO_MODULES["test_other"])
    locked = pytester.path / "baselines" / "pkg"
    locked.mkdir(parents=True)
    mounted = False
    if os.geteuid() == 0:  # root ignores modes: a read-only tmpfs
        done = subprocess.run(["mount", "-t", "tmpfs", "-o", "ro,size=64k", "tmpfs", str(locked)])
        if done.returncode != 0:
            pytest.skip("running as root without the right to mount a read-only tmpfs")
        mounted = True
    else:
        locked.chmod(0o555)
    try:
        # Sorted, baselines/pkg/ comes first: its failure used to end the writing.
        result = run_pytest("--opprof-update-baselines")
    finally:
        if mounted:
            subprocess.run(["umount", str(locked)], check=True)
        else:
            locked.chmod(0o755)
    _assert_clean(result)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["*baselines not written*baselines/pkg/test_sub.json*"])
    top = json.loads((pytester.path / "baselines" / "test_top.json").read_text())
    assert list(top["tests"]) == ["test_a"]


@pytest.mark.parametrize("name_bytes", [252, 255])
def test_longest_test_file_names_get_a_baseline(
    pytester: pytest.Pytester, run_pytest: PytestRunner, name_bytes: int
) -> None:
    name = "test_" + "x" * (name_bytes - len("test_.py"))
    assert len(name + ".py") == name_bytes
    (pytester.path / f"{name}.py").write_text(TWO_MODULES["test_np"])
    first = run_pytest("--opprof-update-baselines")
    _assert_clean(first)
    first.assert_outcomes(passed=1)
    written = list((pytester.path / "baselines").iterdir())
    assert len(written) == 1 and len(written[0].name.encode()) <= MAX_NAME_BYTES
    again = run_pytest("--opprof", "--opprof-require-baselines")
    again.assert_outcomes(passed=1)
    again.stdout.fnmatch_lines(["*opprof baselines (baselines): 1 pass*"])


_KILLED_WRITER = textwrap.dedent(
    """
    import os, signal, sys
    sys.path.insert(0, sys.argv[1])
    from baseline_helpers import entry, simple_summary
    from pytest_opprof.gate import store

    # Killed for real between writing the temporary file and renaming it.
    os.replace = lambda *args: os.kill(os.getpid(), signal.SIGKILL)
    store.update(sys.argv[2], {"test_killed": entry(simple_summary())})
    """
)


def test_temporary_file_of_a_killed_writer_is_removed_by_the_next(tmp_path: Path) -> None:
    from pytest_opprof.gate.store import load, update

    path = tmp_path / "test_a.json"
    update(path, {"test_keep": entry(simple_summary())})
    old = path.read_bytes()
    killed = subprocess.run(
        [sys.executable, "-c", _KILLED_WRITER, str(TESTS_DIR), str(path)],
        env={**os.environ, "PYTHONPATH": str(TESTS_DIR.parent)},
        timeout=120,
    )
    assert killed.returncode == -signal.SIGKILL
    left = [p.name for p in tmp_path.iterdir() if p.name != "test_a.json"]
    assert len(left) == 1 and left[0].startswith(".test_a.json.") and left[0].endswith(".tmp")
    assert path.read_bytes() == old
    # Someone else's file of a similar name is no temporary file of ours: kept.
    (tmp_path / ".test_a.json.not-ours.tmp").write_text("keep\n")
    update(path, {"test_new": entry(simple_summary())})
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        ".test_a.json.not-ours.tmp",
        "test_a.json",
    ]
    assert sorted(load(path)) == ["test_keep", "test_new"]
