"""The git commit a run measured, where git and a repository are there."""

from __future__ import annotations

import subprocess
from pathlib import Path

from pytest_opprof.history.store import Commit


def _git(cwd: Path, *args: str) -> str | None:
    try:
        done = subprocess.run(
            ["git", *args], cwd=cwd, capture_output=True, text=True, check=False, timeout=30
        )
    except (OSError, subprocess.TimeoutExpired):  # no git, or a hung file system
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def commit_of(where: Path) -> Commit | None:
    """HEAD of the repository holding ``where``: its sha, first parent, branch (None when
    detached) and commit time; None outside a repository or without git."""
    shown = _git(where, "log", "-1", "--format=%H%n%P%n%cI")
    if not shown:
        return None
    sha, parents, time = [*shown.splitlines(), "", "", ""][:3]
    branch = _git(where, "rev-parse", "--abbrev-ref", "HEAD")
    # Only tracked files: an untracked report or history inside the checkout is no change.
    status = _git(where, "status", "--porcelain", "--untracked-files=no")
    return Commit(
        sha=sha,
        parent=parents.split()[0] if parents.split() else None,
        branch=branch if branch and branch != "HEAD" else None,
        time=time or None,
        dirty=bool(status),
    )
