"""Shared by the reliability tests: run pytest with the plugin in a subprocess."""

from __future__ import annotations

import importlib.metadata
import os
import sys
from pathlib import Path

import pytest

import pytest_opprof

REPO_ROOT = Path(pytest_opprof.__file__).resolve().parents[1]


def plugin_args() -> list[str]:
    """``-p`` for the plugin unless its entry point is installed (then -p would clash)."""
    installed = any(
        ep.value == "pytest_opprof.plugin"
        for ep in importlib.metadata.entry_points(group="pytest11")
    )
    return [] if installed else ["-p", "pytest_opprof.plugin"]


def importable(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make the package importable (with its entry point) in a subprocess's directory."""
    parts = [str(REPO_ROOT), os.environ.get("PYTHONPATH", "")]
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(p for p in parts if p))


def run(pytester: pytest.Pytester, *args: str, python: tuple[str, ...] = ()) -> pytest.RunResult:
    """``python [python...] -m pytest -p no:cacheprovider args`` in pytester's directory."""
    cmd = [sys.executable, *python, "-m", "pytest", *plugin_args(), "-p", "no:cacheprovider"]
    return pytester.run(*cmd, *args, timeout=600)
