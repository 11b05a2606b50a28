"""What the history tests share: a two-test numpy suite whose matrix size a file sets, git
commits at chosen dates, and pytest runs in a project of their own."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from run_helpers import PLUGIN, REPO_ROOT, unused_plugins

SUITE = """
import json
import pathlib

import numpy as np

KNOB = json.loads((pathlib.Path(__file__).parent / "knob.json").read_text())


def test_matmul():
    n = KNOB["n"]
    np.matmul(np.ones((n, n)), np.ones((n, n)))


def test_add():
    np.add(np.ones(1000), 1.0)
"""
"""``test_matmul`` multiplies ``n x n`` matrices, ``n`` read from ``knob.json`` beside it."""


def git(cwd: Path, *args: str, day: int = 0) -> str:
    """``git ARGS`` in ``cwd``, its author and commit dated 2026-11-(1 + ``day``)."""
    date = f"2026-11-{1 + day:02d}T12:00:00+00:00"
    env = dict(
        os.environ,
        GIT_AUTHOR_DATE=date,
        GIT_COMMITTER_DATE=date,
        GIT_AUTHOR_NAME="t",
        GIT_AUTHOR_EMAIL="t@example.com",
        GIT_COMMITTER_NAME="t",
        GIT_COMMITTER_EMAIL="t@example.com",
    )
    done = subprocess.run(["git", *args], cwd=cwd, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def run_pytest(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``python -m pytest ARGS`` in ``root``, in a subprocess with this checkout's package:
    for a module's fixture, whose runs share a repository and its history (pytester's
    directory is a test's own)."""
    env = dict(os.environ, PYTEST_ADDOPTS="-p no:randomly")
    for name in ("PYTEST_XDIST_WORKER", "PYTEST_XDIST_WORKER_COUNT", "PYTEST_XDIST_TESTRUNUID"):
        env.pop(name, None)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO_ROOT), env.get("PYTHONPATH")) if p)
    cmd = [sys.executable, "-m", "pytest", *PLUGIN, "-p", "no:cacheprovider"]
    cmd += [*unused_plugins(root, args), *args]
    return subprocess.run(
        cmd, cwd=root, env=env, capture_output=True, text=True, timeout=600, check=False
    )
