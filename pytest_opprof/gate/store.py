"""Baselines on disk: one JSON file per test module, read strictly, written atomically.

Layout: ``<baseline-dir>/<test file relative to rootdir, .py -> .json>``; inside,
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
raises :class:`~pytest_opprof.errors.BaselineError` naming the file and field.
"""

from __future__ import annotations

import contextlib
import datetime
import json
import os
import sys
import tempfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath, PureWindowsPath

if sys.platform != "win32":
    import fcntl

from pytest_opprof.errors import BaselineError, FieldError
from pytest_opprof.gate.jsonio import Fields, dumps_stable
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
    relative = (
        posix.with_suffix(".json")
        if posix.suffix == ".py"
        else posix.parent / (posix.name + ".json")
    )
    root = Path(baseline_dir).resolve()
    target = root.joinpath(*relative.parts)
    if not target.resolve().is_relative_to(root):
        raise BaselineError(target, f"resolves outside the baseline directory {root}")
    return target


def loads(text: str, path: str | os.PathLike[str]) -> dict[str, BaselineEntry]:
    """Entries of a baseline file's text; ``path`` only names it in errors."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise BaselineError(
            path, f"not valid JSON (truncated or corrupted?): {exc.msg} at line {exc.lineno}"
        ) from None
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
    """Entries of a baseline file, ``{}`` when it does not exist; the file is only read."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    except (OSError, UnicodeDecodeError) as exc:
        raise BaselineError(path, f"cannot be read: {exc}") from None
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

    Writes atomically (see :func:`write_atomic`); returns whether the text
    changed.  An unreadable existing file is an error, not overwritten: it may
    hold other tests' baselines.
    """
    target = Path(path)
    with _update_lock(target):
        merged = load(target)
        merged.update(entries)
        text = dumps(merged)
        try:
            if target.read_text(encoding="utf-8") == text:
                return False
        except FileNotFoundError:
            pass
        write_atomic(target, text)
        return True


@contextlib.contextmanager
def _update_lock(path: Path) -> Iterator[None]:
    """Serialise read-merge-write of ``path`` among processes (pytest-xdist, parallel CI jobs).

    An advisory ``flock`` on the file's directory: the file itself is replaced by
    rename, so a lock on it would be on the old inode, and a lock file would sit
    next to the committed baselines.  Where ``fcntl`` does not exist (Windows),
    updates are not serialised.
    """
    if sys.platform == "win32":
        yield
        return
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path.parent, os.O_RDONLY)
    except OSError as exc:
        raise BaselineError(path, f"cannot be written: {exc.strerror or exc}") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing releases the lock


def write_atomic(path: Path, text: str) -> None:
    """Replace ``path`` with ``text`` so that a crash leaves the old file or the new one whole.

    The text goes to a temporary file in the same directory, is flushed and
    fsynced, then renamed over ``path`` (``os.replace`` is atomic within a
    file system); the directory is fsynced so the rename itself survives a crash.
    A symlink at ``path`` is replaced by the file, never written through.  A
    directory that cannot be written (read-only, full) raises
    :class:`~pytest_opprof.errors.BaselineError` naming ``path``.
    """
    try:
        _write_atomic(path, text)
    except OSError as exc:
        raise BaselineError(path, f"cannot be written: {exc.strerror or exc}") from None
    _fsync_dir(path.parent)


def write_output(path: Path, text: str) -> None:
    """Write a report to ``path`` the way pytest's ``--junitxml`` does: through a symlink
    or into a non-regular file (``/dev/stdout``, a FIFO) as it is; a regular file, or
    none yet, is replaced atomically (:func:`write_atomic`), so a reader never sees half.
    Raises :class:`~pytest_opprof.errors.BaselineError` naming ``path``."""
    try:
        through = path.is_symlink() or (path.exists() and not path.is_file())
    except OSError:
        through = False
    if not through:
        write_atomic(path, text)
        return
    try:
        with open(path, "w", encoding="utf-8", newline="\n") as out:
            out.write(text)
    except OSError as exc:
        raise BaselineError(path, f"cannot be written: {exc.strerror or exc}") from None


def _write_atomic(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as tmp:
            tmp.write(text)
            tmp.flush()
            os.fsync(tmp.fileno())
        # mkstemp creates 0600; keep the old file's mode, or the usual one for a data file.
        try:
            mode = 0o644 if path.is_symlink() else path.stat().st_mode & 0o777
        except FileNotFoundError:
            mode = 0o644
        os.chmod(tmp_name, mode)
        os.replace(tmp_name, path)
    except BaseException:
        try:
            os.unlink(tmp_name)
        except FileNotFoundError:
            pass
        raise


def _fsync_dir(directory: Path) -> None:
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return  # Windows cannot open a directory; its rename is durable enough.
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
