"""Baselines on disk: one JSON file per test module, read strictly, written atomically.

Layout: ``<baseline-dir>/<test file relative to rootdir, .py -> .json>`` (a name
over 255 bytes shortened with a hash of it, ``files.short_name``); inside,
entries keyed by the test's name within its module (``TestX::test_y[a-b]``).
A test's name, parameters included, is only ever a key inside the JSON, never
a path part, and :func:`baseline_path` refuses any module path that would
resolve outside the baseline directory (``..``, absolute paths, symlinks).

File schema (version :data:`SCHEMA_VERSION`)::

    {
      "kind": "opprof-baseline",
      "schema": 1,
      "tests": {
        "<test name in module>": {
          "schema": 1,
          "recorded_at": "2025-01-31T12:00:00Z",      # UTC, seconds
          "machine": {cpu_model, cpu_count, arch, system, platform, python,
                      numpy, blas, torch, fingerprint,
                      threads: {"openblas": int, ...} | null,   # optional: thread
                      thread_env: {"OMP_NUM_THREADS": str, ...}},  # pools, issue 16
          "rounds": 5,
          "summary": {
            "wall_time": TIME, "cpu_time": TIME,
            "op_count": int, "flops": int,
            "op_time_share": float,                      # 3 decimals
            "memory": {peak_bytes, allocated_bytes, allocations, leaked_bytes} | null,
            "speed_ref": TIME, "native_ref": TIME,  # the machine-speed references beside
                                           # each round (capture/speed_probe.py); optional
            "ranges": {"flops": [low, high], ...}   # optional: only the deterministic figures
                                           # that varied over rounds and pooled sessions
          },
          "sessions": [5, 5, 5],             # optional: rounds per pooled update run
          "ops": {
            "<op key>": {
              "count": int, "flops": int,
              "self_memory_bytes": int, "memory_bytes": int,   # net bytes, may be < 0
              "self_cpu_time": TIME, "cpu_time": TIME,         # per-round totals
              "self_device_time": TIME, "device_time": TIME,   # only when measured
              "ranges": {"count": [low, high], ...}  # optional, as the summary's
            }
          }
        }
      }
    }

    TIME = {"samples_ns": [per round], "median_ns", "min_ns", "max_ns",
            "mean_ns", "stdev_ns", "mad_ns"}       # ints, 3 significant digits

Writing sorts keys and indents (:func:`~pytest_opprof.gate.jsonio.dumps_stable`), so a
refreshed baseline reads as a small diff.  Reading never modifies the file and
raises :class:`~pytest_opprof.errors.BaselineError` naming the file and field, for
a FIFO or device, hostile JSON (a key twice, a 5,000-digit number, deep nesting:
``jsonio.parse``) and a time with a sample count other than the rounds alike.
"""

from __future__ import annotations

import datetime
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath, PureWindowsPath

from pytest_opprof.errors import BaselineError, FieldError
from pytest_opprof.gate.files import directory_lock, read_text, short_name, write_file
from pytest_opprof.gate.jsonio import DocumentError, Fields, dumps_stable, parse
from pytest_opprof.gate.machine import MachineInfo, machine_info
from pytest_opprof.gate.summary import TestSummary

SCHEMA_VERSION = 1
KIND = "opprof-baseline"


@dataclass(frozen=True)
class BaselineEntry:
    """One test's stored figures and where and when they were recorded."""

    summary: TestSummary
    machine: MachineInfo
    recorded_at: str
    schema: int = SCHEMA_VERSION

    @classmethod
    def record(
        cls,
        summary: TestSummary,
        machine: MachineInfo | None = None,
        *,
        now: datetime.datetime | None = None,
    ) -> BaselineEntry:
        """An entry for ``summary`` measured now on this machine (or the given ones)."""
        when = now or datetime.datetime.now(datetime.timezone.utc)
        stamp = when.astimezone(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
        return cls(summary=summary, machine=machine or machine_info(), recorded_at=stamp)

    def to_json(self) -> dict[str, object]:
        return {
            "schema": self.schema,
            "recorded_at": self.recorded_at,
            "machine": self.machine.to_json(),
            **self.summary.to_json(),
        }

    @classmethod
    def from_json(cls, f: Fields) -> BaselineEntry:
        """Read one entry (raises ``FieldError``; a newer schema is refused first)."""
        schema = _check_schema(f)
        return cls(
            summary=TestSummary.from_json(f),
            machine=MachineInfo.from_json(f.obj("machine")),
            recorded_at=f.text("recorded_at"),
            schema=schema,
        )


def _check_schema(f: Fields) -> int:
    schema = f.integer("schema", minimum=1)
    if schema > SCHEMA_VERSION:
        raise FieldError(
            f.path + ".schema" if f.path else "schema",
            f"written with schema {schema}, newer than this pytest-opprof reads "
            f"({SCHEMA_VERSION}); upgrade pytest-opprof or re-record the baseline",
        )
    return schema


def split_nodeid(nodeid: str) -> tuple[str, str]:
    """``("tests/test_a.py", "TestX::test_y[p]")`` from a pytest node id."""
    module, _, name = nodeid.partition("::")
    return module, name


def baseline_path(baseline_dir: Path, module: str) -> Path:
    """Baseline file of a test module (its path relative to rootdir, ``/``-separated).

    Raises :class:`BaselineError` when the module path is absolute, climbs with
    ``..`` or resolves (through symlinks) outside ``baseline_dir``.
    """
    posix, windows = PurePosixPath(module), PureWindowsPath(module)
    if not module or posix.is_absolute() or windows.is_absolute() or windows.drive:
        raise BaselineError(module, "a test module path must be relative to the rootdir")
    if ".." in posix.parts or ".." in windows.parts:
        raise BaselineError(module, "a test module outside the rootdir has no baseline file")
    name = posix.stem + ".json" if posix.suffix == ".py" else posix.name + ".json"
    # A test file's name may take all 255 bytes a file system allows, and ".json" is
    # longer than ".py": such a name is shortened with a hash of it, so it still has one.
    relative = posix.parent / short_name(name)
    root = Path(baseline_dir).resolve()
    target = root.joinpath(*relative.parts)
    if not target.resolve().is_relative_to(root):
        raise BaselineError(target, f"resolves outside the baseline directory {root}")
    return target


def loads(text: str, path: str | os.PathLike[str]) -> dict[str, BaselineEntry]:
    """Entries of a baseline file's text; ``path`` only names it in errors."""
    try:
        data = parse(text)
    except DocumentError as exc:
        raise BaselineError(path, str(exc)) from None
    try:
        f = Fields(data)
        _check_schema(f)
        kind = f.text("kind")
        if kind != KIND:
            raise FieldError("kind", f"expected {KIND!r}, got {kind!r}")
        return {name: BaselineEntry.from_json(entry) for name, entry in f.obj("tests").entries()}
    except FieldError as exc:
        raise BaselineError(path, exc.reason, field=exc.field or None) from None


def load(path: str | os.PathLike[str]) -> dict[str, BaselineEntry]:
    """Entries of a baseline file, ``{}`` when it does not exist; the file is only read,
    and anything but a regular file (a FIFO would block the run) is refused."""
    try:
        text = read_text(path)
    except FileNotFoundError:
        return {}
    return loads(text, path)


def dumps(entries: Mapping[str, BaselineEntry]) -> str:
    """A baseline file's text: sorted keys, indented, one trailing newline."""
    return dumps_stable(
        {
            "kind": KIND,
            "schema": SCHEMA_VERSION,
            "tests": {name: entry.to_json() for name, entry in entries.items()},
        }
    )


def update(path: str | os.PathLike[str], entries: Mapping[str, BaselineEntry]) -> bool:
    """Merge ``entries`` into the file at ``path``: others kept, these replaced.

    Read-merge-write under the directory's lock (pytest-xdist, parallel CI jobs lose
    no entry), written by :func:`~pytest_opprof.gate.files.write_file`; returns
    whether the text changed.  An unreadable existing file is an error, not
    overwritten: it may hold other tests' baselines.
    """
    target = Path(path)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise BaselineError(target, f"cannot be written: {exc.strerror or exc}") from None
    with directory_lock(target.parent) as held:
        merged = load(target)
        merged.update(entries)
        text = dumps(merged)
        try:
            if read_text(target) == text:
                return False
        except FileNotFoundError:
            pass
        write_file(target, text, locked=held)
        return True
