"""tracemalloc started or stopped by a test, with ``--opprof-python-memory`` on.

tracemalloc puts its hooks on top of Python's allocator, or takes them out with
whatever was under them; either way opprof's hooks are no longer on top when the
session ends.  That ended the run with a ``NativeError ... hooks left in place``
traceback from ``pytest_unconfigure`` and exit status 1, and under
``PYTHONTRACEMALLOC=1`` the message blamed a start for a stop.
Now the tests pass, the run exits 0 and one line says what happened.
"""

from __future__ import annotations

import subprocess
import sys
from typing import TYPE_CHECKING

import pytest
from run_helpers import REPO_ROOT

if TYPE_CHECKING:
    from run_helpers import PytestRunner

TESTS = """
import tracemalloc

import numpy as np


def test_changes_tracemalloc():
    getattr(tracemalloc, "{action}")()
    np.ones(10).sum()


def test_after():
    np.ones(10).sum()
"""


@pytest.mark.slow
@pytest.mark.parametrize(
    ("env", "action", "note"),
    [
        ("", "start", "tracemalloc, started during the run, runs on top of opprof's"),
        ("1", "stop", "tracemalloc, stopped during the run, took opprof's Python allocator"),
    ],
)
def test_tracemalloc_changed_by_a_test_ends_the_run_cleanly_with_one_note(
    pytester: pytest.Pytester,
    run_pytest: PytestRunner,
    monkeypatch: pytest.MonkeyPatch,
    env: str,
    action: str,
    note: str,
) -> None:
    monkeypatch.setenv("PYTHONTRACEMALLOC", env)
    pytester.makepyfile(test_tm=TESTS.replace("{action}", action))
    result = run_pytest("-q", "-p", "no:randomly", "--opprof", "--opprof-python-memory")
    result.assert_outcomes(passed=2)
    assert result.ret == 0
    output = result.outlines + result.errlines
    assert [line for line in output if line.startswith("opprof: tracemalloc")] == [
        next(line for line in output if note in line)
    ]
    assert not [line for line in output if "Traceback" in line or "NativeError" in line]


@pytest.mark.slow
def test_tracemalloc_unchanged_leaves_no_note(
    pytester: pytest.Pytester, run_pytest: PytestRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PYTHONTRACEMALLOC", "1")
    pytester.makepyfile(test_tm=TESTS.replace("{action}", "start"))  # already tracing: a no-op
    result = run_pytest("-q", "-p", "no:randomly", "--opprof", "--opprof-python-memory")
    result.assert_outcomes(passed=2)
    assert not [line for line in result.outlines + result.errlines if "opprof: tracemalloc" in line]


LEFT_BEHIND = """
import tracemalloc

import pytest_opprof as opprof


def kept():
    return [object() for _ in range(1000)]


with opprof.profile(capture=["none"], python_memory=True):
    tracemalloc.start()  # on top of opprof's hooks: they are left behind, passing through
with opprof.profile(capture=["none"], python_memory=True) as prof:
    held = kept()  # counted by a fresh install on top of tracemalloc
assert prof.memory is not None and prof.memory.leaked_bytes >= 1000 * 16, prof.memory
tracemalloc.stop()  # restores the left-behind hooks under the fresh ones
with opprof.profile(capture=["none"], python_memory=True) as prof:
    held = kept()
assert prof.memory is not None and prof.memory.leaked_bytes >= 1000 * 16, prof.memory
print("ok")
"""


def test_hooks_left_behind_pass_through_and_a_new_install_still_counts() -> None:
    """A left-behind copy keeps its own context: it never calls into a newer install
    (that would recurse without end once tracemalloc sits between them)."""
    done = subprocess.run(
        [sys.executable, "-c", LEFT_BEHIND],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO_ROOT,
        check=False,
    )
    assert (done.returncode, done.stdout.strip()) == (0, "ok"), done.stderr[-2000:]
