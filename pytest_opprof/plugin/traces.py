"""The trace directory (``--opprof-trace-dir``): shown usable before any test runs, and
one flat, safe file name in it per test.

Imports neither numpy nor the native core: the options check the directory in every
process that profiles, before the worker is loaded.
"""

from __future__ import annotations

import hashlib
import os
import re
import tempfile
from pathlib import Path

import pytest


def usable_trace_dir(path: Path | None, setting: str) -> Path | None:
    """``path``, created if need be and shown to take a file; else a ``pytest.UsageError``
    naming ``setting`` (its option and ini key) before any test runs (a trace failing to
    be written would fail a passing test)."""
    if path is None:
        return None
    where = f"{setting} {path}"
    try:
        path.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        raise pytest.UsageError(f"{where}: not a directory") from None
    except OSError as exc:
        raise pytest.UsageError(f"{where}: cannot be created: {exc.strerror or exc}") from None
    try:
        fd, probe = tempfile.mkstemp(prefix=".opprof-probe-", dir=path)
    except OSError as exc:
        raise pytest.UsageError(f"{where}: cannot be written: {exc.strerror or exc}") from None
    os.close(fd)
    os.unlink(probe)
    return path


_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]+")


def trace_file(trace_dir: Path, nodeid: str) -> Path:
    """Where the Chrome trace of ``nodeid`` goes: a flat, safe name inside ``trace_dir``.

    Separators (``/``, ``::``), brackets and dot runs become ``_`` so no nodeid
    can climb out of the directory; a short hash of the nodeid keeps two ids that
    sanitise alike apart.
    """
    stem = _UNSAFE.sub("_", nodeid)
    stem = re.sub(r"\.{2,}", "_", stem).strip("._-")[:120] or "test"
    digest = hashlib.sha1(nodeid.encode("utf-8")).hexdigest()[:10]
    return trace_dir / f"{stem}-{digest}.trace.json"
