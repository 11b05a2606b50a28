"""The session's outputs never land on its inputs or on each other.

A report written onto a committed baseline replaced it (the next gate then failed every
test of that file on an unusable baseline), three report options at one path kept only the
last, and a report or trace directory inside the baseline directory passes for baselines
there.  Each is refused before any test runs, in one line naming both paths, so nothing
is written.  Imports neither numpy nor the native core (the options check every run).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest

from pytest_opprof.gate.files import same_file, within

__all__ = ["check_outputs"]


def check_outputs(outputs: Sequence[tuple[str, Path | None]], baselines: tuple[str, Path]) -> None:
    """``pytest.UsageError`` when two of ``outputs`` (``(setting, path)``, a path None when
    not asked for) are one file, or one lies in the baseline directory ``baselines``
    (``(setting, directory)``)."""
    given = [(setting, path) for setting, path in outputs if path is not None]
    setting_dir, directory = baselines
    for i, (setting, path) in enumerate(given):
        for earlier, earlier_path in given[:i]:
            if same_file(path, earlier_path):
                raise pytest.UsageError(
                    f"{earlier} {earlier_path} and {setting} {path} are one file: each "
                    "output needs its own path (nothing was written)"
                )
        if within(path, directory):
            raise pytest.UsageError(
                f"{setting} {path} lies in the baseline directory {directory} "
                f"({setting_dir}): it would overwrite a baseline or pass for one; write it "
                "elsewhere (nothing was written)"
            )
