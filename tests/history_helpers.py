"""What the history tests share: a two-test numpy suite whose matrix size a file sets, git
commits at chosen dates."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

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
