"""The files pytest-opprof reads and writes: baselines, reports, Markdown, traces.

Writing (:func:`write_file`) goes the way pytest's ``--junitxml`` does: a symlink is
followed, and a path that ends in something other than a regular file (a FIFO, a
process substitution's pipe, ``/dev/stdout``, ``/dev/null``) is opened and written.
Only where the path ends in a regular file, or in nothing yet, is the text written
to a temporary file beside it and renamed over it, so that a crash leaves the old
file or the new one whole.  Renaming over every path, as this module once did,
replaced a symlink with a copy and, for a process run as root, the system's
``/dev/null`` with a JSON file.

A temporary file is named ``.<name>.<8 random characters>.tmp`` (a stable hash
shortens a long name so that it stays under 255 bytes).  A process killed between
writing it and renaming it leaves it behind: the next write of the same file
removes the ones of its name, under the directory's lock, which every writer of
this module holds while it writes (:func:`directory_lock`).

Reading (:func:`read_text`) refuses anything but a regular file without blocking:
opening a FIFO to read waits for a writer that may never come.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import re
import stat
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

if sys.platform != "win32":
    import fcntl

from pytest_opprof.errors import BaselineError

MAX_NAME_BYTES = 255
"""The longest file name (in bytes) of the usual file systems (ext4, XFS, APFS, NTFS)."""
_TMP_SUFFIX = ".tmp"
_RANDOM = 8  # characters tempfile.mkstemp puts between prefix and suffix


def short_name(name: str, limit: int = MAX_NAME_BYTES) -> str:
    """``name`` if it fits in ``limit`` bytes, else its start and a stable hash of all of it.

    The suffix after the last dot is kept (``.json``), so a shortened baseline
    file still reads as one; the same long name always gives the same short one.
    """
    encoded = name.encode("utf-8", "surrogatepass")
    if len(encoded) <= limit:
        return name
    stem, dot, suffix = name.rpartition(".")
    if not dot or len(suffix.encode("utf-8", "surrogatepass")) > 16:
        stem, suffix = name, ""
    tail = "-" + hashlib.sha1(encoded).hexdigest()[:16] + (f".{suffix}" if suffix else "")
    room = limit - len(tail.encode("utf-8"))
    head = stem.encode("utf-8", "surrogatepass")[:room].decode("utf-8", "ignore")
    return head + tail


def _tmp_prefix(name: str) -> str:
    return "." + short_name(name, MAX_NAME_BYTES - 2 - _RANDOM - len(_TMP_SUFFIX)) + "."


def read_text(path: str | os.PathLike[str]) -> str:
    """The text of a regular file; raises ``FileNotFoundError`` when there is none and
    :class:`BaselineError` naming ``path`` when it cannot be read or is no regular file."""
    try:
        # O_NONBLOCK: opening a FIFO to read returns at once instead of waiting for a writer.
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise BaselineError(path, f"cannot be read: {exc.strerror or exc}") from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise BaselineError(path, "not a regular file (a directory, FIFO or device)")
        with os.fdopen(fd, "rb", closefd=False) as f:
            data = f.read()
    except OSError as exc:
        raise BaselineError(path, f"cannot be read: {exc.strerror or exc}") from None
    finally:
        os.close(fd)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BaselineError(path, f"cannot be read: not UTF-8 text ({exc.reason})") from None


def write_file(path: str | os.PathLike[str], text: str, *, locked: bool = False) -> None:
    """:func:`write_bytes` of ``text`` in UTF-8; raises :class:`BaselineError` naming
    ``path`` when it cannot be written (a lone surrogate included: nothing is written)."""
    try:
        write_bytes(path, text.encode("utf-8"), locked=locked)
    except (OSError, UnicodeEncodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else exc
        raise BaselineError(path, f"cannot be written: {reason}") from None


def write_bytes(path: str | os.PathLike[str], data: bytes, *, locked: bool = False) -> None:
    """Write ``data`` to ``path`` as ``--junitxml`` would, atomically where it is a file.

    ``locked``: the caller holds :func:`directory_lock` of the file's directory.
    Raises ``OSError`` (the public ``export_*`` methods raise it as ``open`` would).
    """
    path = Path(path)
    try:
        mode: int | None = os.stat(path).st_mode  # follows symlinks, as opening it would
    except FileNotFoundError:
        mode = None
    if mode is not None and stat.S_ISDIR(mode):
        raise IsADirectoryError(errno.EISDIR, "Is a directory", str(path))
    if mode is not None and not stat.S_ISREG(mode):
        with open(path, "wb") as f:
            f.write(data)
        return
    # A symlink (dangling or to a regular file) keeps pointing where it did: the
    # file it ends in is the one replaced.
    target = Path(os.path.realpath(path)) if path.is_symlink() else path
    target.parent.mkdir(parents=True, exist_ok=True)
    if locked:
        _replace(target, data, clean=True)
    else:
        with directory_lock(target.parent) as held:
            _replace(target, data, clean=held)
    _fsync_dir(target.parent)


@contextlib.contextmanager
def directory_lock(directory: Path) -> Iterator[bool]:
    """Serialise writers of files in ``directory`` among processes (pytest-xdist, parallel
    CI jobs): an advisory ``flock`` on the directory itself.

    The files are replaced by rename, so a lock on one would be on its old inode, and a
    lock file would sit next to the committed baselines.  Where ``fcntl`` does not exist
    (Windows), or the directory cannot be opened to read, writes are not serialised.
    Not re-entrant: a holder passes ``locked=True`` to :func:`write_file`.  Yields
    whether the lock is held.
    """
    fd = -1
    if sys.platform != "win32":
        try:
            fd = os.open(directory, os.O_RDONLY)
        except OSError:
            fd = -1
    try:
        if fd >= 0:
            fcntl.flock(fd, fcntl.LOCK_EX)
        yield fd >= 0
    finally:
        if fd >= 0:
            os.close(fd)  # closing releases the lock


def remove_stale_temps(path: Path) -> list[Path]:
    """Remove the temporary files :func:`write_file` left beside ``path`` when its process
    was killed mid-write; call only under :func:`directory_lock` of ``path.parent``, where
    no live writer of this module has one open.  Returns those removed."""
    if sys.platform == "win32":  # no lock, so a live writer's file cannot be told apart
        return []
    prefix = _tmp_prefix(path.name)
    pattern = re.compile(re.escape(prefix) + f"[a-z0-9_]{{{_RANDOM}}}" + re.escape(_TMP_SUFFIX))
    removed = []
    try:
        names = os.listdir(path.parent)
    except OSError:
        return []
    for name in names:
        if not pattern.fullmatch(name):
            continue
        stale = path.parent / name
        with contextlib.suppress(OSError):
            if stat.S_ISREG(os.lstat(stale).st_mode):
                stale.unlink()
                removed.append(stale)
    return removed


def _replace(path: Path, data: bytes, *, clean: bool) -> None:
    """Write ``data`` beside ``path`` (flushed, fsynced) and rename it over ``path``;
    ``clean``: the directory's lock is held, so leftover temporary files are stale."""
    if clean:
        remove_stale_temps(path)
    fd, tmp_name = tempfile.mkstemp(
        prefix=_tmp_prefix(path.name), suffix=_TMP_SUFFIX, dir=path.parent
    )
    try:
        with os.fdopen(fd, "wb") as tmp:
            tmp.write(data)
            tmp.flush()
            os.fsync(tmp.fileno())
        # mkstemp creates 0600; keep the old file's mode, or the usual one for a data file.
        try:
            mode = path.stat().st_mode & 0o777
        except FileNotFoundError:
            mode = 0o644
        os.chmod(tmp_name, mode)
        os.replace(tmp_name, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp_name)
        raise


def _fsync_dir(directory: Path) -> None:
    """Make a rename in ``directory`` survive a crash (where a directory can be opened)."""
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


def same_file(a: str | os.PathLike[str], b: str | os.PathLike[str]) -> bool:
    """Whether two paths name one file: one path once symlinks and ``..`` are resolved, or
    (both there) one file by two names (a hard link)."""
    if Path(a).resolve() == Path(b).resolve():
        return True
    try:
        return os.path.samefile(a, b)
    except OSError:  # one of them is not there yet: no hard link between them either
        return False


def within(path: str | os.PathLike[str], directory: str | os.PathLike[str]) -> bool:
    """Whether ``path`` is ``directory`` or lies under it, symlinks resolved."""
    return Path(path).resolve().is_relative_to(Path(directory).resolve())
