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
      "schema": 2,
      "machines": {"<machine id>": {cpu_model, cpu_count, arch, system, platform,
                                   python, numpy, blas, torch, fingerprint,
                                   threads: {"openblas": int, ...} | null,
                                   thread_env: {"OMP_NUM_THREADS": str, ...}}},
      "tests": {
        "<test name in module>": {
          "recorded_at": "2025-01-31T12:00:00Z",      # UTC, seconds
          "machine": "<machine id>",                   # a key of "machines"
          "rounds": 5, "summary": {...}, "ops": {...}  # the compact form: compact.py
        }
      }
    }

The machine id is 8 hex digits of a hash of the machine's record, so entries
recorded on one machine share it and a merge of two files keeps it.  Schema 1
(every op, every time with its statistics, the machine in every entry; ``TIME``
below) is still read, and judged as before; writing a file writes schema 2::

    "tests": {"<name>": {"schema": 1, "recorded_at": ..., "machine": {...},
                         "rounds": 5, "sessions": [5, 5, 5],
                         "summary": {"wall_time": TIME, "cpu_time": TIME, "op_count",
                                     "flops", "op_time_share", "memory", "speed_ref",
                                     "native_ref", "wait_time", "ranges", ...},
                         "ops": {"<op key>": {"count", "flops", "self_memory_bytes",
                                              "memory_bytes", "self_cpu_time": TIME,
                                              "cpu_time": TIME, "ranges",
                                              "self_device_memory_bytes", ...}}}}
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
import hashlib
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath, PureWindowsPath

from pytest_opprof.errors import BaselineError, FieldError
from pytest_opprof.gate import compact
from pytest_opprof.gate.files import directory_lock, read_text, short_name, write_file
from pytest_opprof.gate.jsonio import DocumentError, Fields, dumps_stable, field_path, parse
from pytest_opprof.gate.machine import MachineInfo, machine_info
from pytest_opprof.gate.summary import TestSummary

SCHEMA_VERSION = 2
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

    def to_json(self, machine_id: str) -> dict[str, object]:
        """The entry in the compact form (schema 2), its machine named by ``machine_id``."""
        return {
            "recorded_at": self.recorded_at,
            "machine": machine_id,
            **compact.summary_to_json(self.summary),
        }

    @classmethod
    def from_json(cls, f: Fields, machines: Mapping[str, MachineInfo]) -> BaselineEntry:
        """Read one schema-2 entry, its machine from the file's ``machines``."""
        if f.has("schema"):  # none is written; one that is there must not be newer
            _check_schema(f)
        machine = f.text("machine")
        if machine not in machines:
            raise FieldError(field_path(f.path, "machine"), f"no machine {machine!r} in machines")
        return cls(
            summary=compact.summary_from_json(f),
            machine=machines[machine],
            recorded_at=f.text("recorded_at"),
        )

    @classmethod
    def from_json_v1(cls, f: Fields) -> BaselineEntry:
        """Read one schema-1 entry (raises ``FieldError``; a newer schema is refused first)."""
        schema = _check_schema(f)
        return cls(
            summary=TestSummary.from_json(f),
            machine=MachineInfo.from_json(f.obj("machine")),
            recorded_at=f.text("recorded_at"),
            schema=schema,
        )


def machine_id(machine: MachineInfo) -> str:
    """The key of a machine's record in a file's ``machines``: a hash of the record."""
    text = json.dumps(machine.to_json(), sort_keys=True)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:8]


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
        schema = _check_schema(f)
        kind = f.text("kind")
        if kind != KIND:
            raise FieldError("kind", f"expected {KIND!r}, got {kind!r}")
        if schema == 1:
            tests = f.obj("tests").entries()
            return {name: BaselineEntry.from_json_v1(entry) for name, entry in tests}
        machines = {key: MachineInfo.from_json(m) for key, m in f.obj("machines").entries()}
        return {
            name: BaselineEntry.from_json(entry, machines)
            for name, entry in f.obj("tests").entries()
        }
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
    """A baseline file's text (schema 2): sorted keys, indented, an object of numbers or
    short strings on one line, one trailing newline."""
    ids = {name: machine_id(entry.machine) for name, entry in entries.items()}
    machines = {ids[name]: entry.machine.to_json() for name, entry in entries.items()}
    return dumps_stable(
        {
            "kind": KIND,
            "schema": SCHEMA_VERSION,
            "machines": machines,
            "tests": {name: entry.to_json(ids[name]) for name, entry in entries.items()},
        },
        flat_objects=True,
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
