"""The base revision: resolve ``--opprof-against=REF`` and check it out in a git worktree.

A worktree shares the repository's objects, so checking out a revision costs the files
it writes, not a clone (about 0.1 s for a small project).  It lives in a temporary
directory for the session and is removed with it (``git worktree remove``), whatever
way the session ends.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from pytest_opprof.errors import OpprofError


class RevisionError(OpprofError):
    """REF is not a revision of the repository under test, or its worktree cannot be made."""


@dataclass(frozen=True)
class BaseRevision:
    """The base side's checkout: ``ref`` as given, its commit, where it lies."""

    ref: str
    sha: str
    repo: Path
    """The head's repository top level (``git rev-parse --show-toplevel``)."""
    worktree: Path
    """The checkout of ``sha``: the base side's repository top level."""

    @property
    def short(self) -> str:
        return self.sha[:10]

    def describe(self) -> str:
        """``REF (sha)``, or the sha alone when REF is one."""
        return self.short if self.sha.startswith(self.ref) else f"{self.ref} ({self.short})"

    def base_path(self, head_path: Path) -> Path:
        """Where ``head_path`` (a path inside the head's repository) lies in the base."""
        return self.worktree / Path(head_path).resolve().relative_to(self.repo)


def _git(cwd: Path, *args: str) -> str:
    try:
        done = subprocess.run(
            ["git", *args], cwd=cwd, capture_output=True, text=True, check=False, timeout=120
        )
    except FileNotFoundError:
        raise RevisionError("git is not installed (A/B checks the base out with git)") from None
    if done.returncode != 0:
        said = (done.stderr or done.stdout).strip().splitlines()
        raise RevisionError(said[-1] if said else f"git {args[0]} failed ({done.returncode})")
    return done.stdout.strip()


def toplevel(where: Path) -> Path | None:
    """The top of the git repository holding ``where``; None where there is none."""
    try:
        return Path(_git(where, "rev-parse", "--show-toplevel")).resolve()
    except RevisionError:
        return None


def check_out(ref: str, where: Path) -> BaseRevision:
    """Check ``ref`` out, detached, in a new worktree of the repository holding ``where``."""
    try:
        repo = Path(_git(where, "rev-parse", "--show-toplevel")).resolve()
    except RevisionError as exc:
        raise RevisionError(f"{where} is not in a git repository ({exc})") from None
    try:
        sha = _git(repo, "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}")
    except RevisionError:
        sha = ""
    if not sha:
        raise RevisionError(f"{ref!r} is not a commit of the repository at {repo}")
    worktree = Path(tempfile.mkdtemp(prefix="opprof-base-")) / "base"
    try:
        _git(repo, "worktree", "add", "--detach", "--quiet", str(worktree), sha)
    except RevisionError as exc:
        shutil.rmtree(worktree.parent, ignore_errors=True)
        raise RevisionError(f"cannot check {ref!r} out in a worktree: {exc}") from None
    return BaseRevision(ref=ref, sha=sha, repo=repo, worktree=worktree)


def remove(revision: BaseRevision) -> None:
    """Remove the worktree and its registration (a failure leaves a note for git only)."""
    try:
        _git(revision.repo, "worktree", "remove", "--force", str(revision.worktree))
    except RevisionError:
        pass
    shutil.rmtree(revision.worktree.parent, ignore_errors=True)
    try:
        _git(revision.repo, "worktree", "prune")
    except RevisionError:
        pass
