"""Baseline writes under faults: racing writers, read-only and full directories, symlinks.

- Two processes updating the same module file lose no entry: ``store.update``
  holds an advisory ``flock`` on the file's directory around read-merge-write
  (without it, this test loses entries within a few rounds).
- A directory that cannot be written (read-only, full) is a ``BaselineError``
  naming the file, and the old file stays whole.
- A symlink at a written path is followed, as pytest's ``--junitxml`` follows it:
  the file it ends in is replaced and the link kept.  A baseline path that
  resolves outside the baseline directory (a symlinked file or subdirectory) is
  refused before anything is written.
"""

from __future__ import annotations

import contextlib
import os
import resource
import stat
import subprocess
import sys
import textwrap
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from baseline_helpers import entry, simple_summary

from pytest_opprof.errors import BaselineError
from pytest_opprof.gate.files import short_name, write_file
from pytest_opprof.gate.session import BaselineSession, GateOptions
from pytest_opprof.gate.store import baseline_path, load, update

TESTS_DIR = Path(__file__).parent

_RACER = textwrap.dedent(
    """
    import sys
    sys.path.insert(0, sys.argv[1])
    from baseline_helpers import entry, simple_summary
    from pytest_opprof.gate import store

    path, tag, rounds = sys.argv[2], sys.argv[3], int(sys.argv[4])
    e = entry(simple_summary())
    print("ready", flush=True)
    sys.stdin.readline()  # both start together
    for i in range(rounds):
        store.update(path, {f"{tag}_{i}": e})
    """
)


@pytest.mark.slow
def test_two_processes_updating_one_file_lose_no_entry(tmp_path: Path) -> None:
    path = tmp_path / "tests" / "test_a.json"
    rounds = 60
    env = {**os.environ, "PYTHONPATH": str(TESTS_DIR.parent)}
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _RACER, str(TESTS_DIR), str(path), tag, str(rounds)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )
        for tag in ("a", "b")
    ]
    for p in procs:
        assert p.stdout is not None and p.stdout.readline() == "ready\n"
    for p in procs:
        assert p.stdin is not None
        p.stdin.write("go\n")
        p.stdin.flush()
    for p in procs:
        assert p.wait(timeout=300) == 0
    names = set(load(path))
    expected = {f"{tag}_{i}" for tag in ("a", "b") for i in range(rounds)}
    assert names == expected, f"lost {len(expected - names)} of {len(expected)} entries"
    assert sorted(p.name for p in path.parent.iterdir()) == ["test_a.json"]  # no lock file


@contextlib.contextmanager
def _mounted_tmpfs(where: Path, options: str) -> Iterator[bool]:
    """A tmpfs at ``where`` (needs root and mount rights); yields whether it mounted."""
    where.mkdir()
    if os.geteuid() != 0:
        yield False
        return
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(where)], capture_output=True
    )
    try:
        yield done.returncode == 0
    finally:
        if done.returncode == 0:
            subprocess.run(["umount", str(where)], check=True)


@pytest.fixture
def read_only_dir(tmp_path: Path) -> Iterator[Path]:
    """A directory holding ``tests/test_a.json`` (one entry) that cannot be written.

    chmod for a normal user; root ignores modes, so it gets a read-only tmpfs."""
    base = tmp_path / "baselines"
    with _mounted_tmpfs(base, "size=1m") as mounted:
        update(base / "tests" / "test_a.json", {"test_keep": entry(simple_summary())})
        if os.geteuid() != 0:
            (base / "tests").chmod(0o555)
            yield base
            (base / "tests").chmod(0o755)
            return
        if not mounted:
            pytest.skip("running as root without the right to mount a read-only tmpfs")
        subprocess.run(["mount", "-o", "remount,ro", str(base)], check=True)
        yield base


def test_read_only_directory_is_a_clear_error_and_keeps_the_file(read_only_dir: Path) -> None:
    path = read_only_dir / "tests" / "test_a.json"
    old = path.read_bytes()
    with pytest.raises(BaselineError, match=r"test_a\.json: cannot be written: "):
        update(path, {"test_new": entry(simple_summary())})
    assert path.read_bytes() == old
    with pytest.raises(BaselineError, match=r"test_b\.json: cannot be written: "):
        update(read_only_dir / "tests" / "test_b.json", {"t": entry(simple_summary())})
    run = BaselineSession(GateOptions(read_only_dir))
    run.stage("tests/test_a.py::test_new", simple_summary())
    assert run.write() == []
    assert len(run.write_failures) == 1 and "cannot be written" in run.write_failures[0]


_FSIZE_WRITER = textwrap.dedent(
    """
    import resource, signal, sys
    sys.path.insert(0, sys.argv[1])
    from baseline_helpers import Row, entry, summary_of
    from pytest_opprof.gate import store
    from pytest_opprof.errors import BaselineError

    # A disk with room for the old file but not the new one.
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (int(sys.argv[3]), int(sys.argv[3])))
    rows = [Row(f"op{i}", i, self_cpu_time_total=i, flops=i) for i in range(20)]
    big = {f"test_big{i}": entry(summary_of([(1.0, rows)])) for i in range(300)}
    try:
        store.update(sys.argv[2], big)
    except BaselineError as exc:
        print("error:", exc)
    """
)


def test_full_disk_is_a_clear_error_and_keeps_the_file(tmp_path: Path) -> None:
    path = tmp_path / "test_a.json"
    update(path, {"test_keep": entry(simple_summary())})
    old = path.read_bytes()
    limit = str(len(old) * 4)
    env = {**os.environ, "PYTHONPATH": str(TESTS_DIR.parent)}
    done = subprocess.run(
        [sys.executable, "-c", _FSIZE_WRITER, str(TESTS_DIR), str(path), limit],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    assert done.stdout.startswith(f"error: {path}: cannot be written: File too large")
    assert path.read_bytes() == old
    assert [p.name for p in tmp_path.iterdir()] == ["test_a.json"]  # temporary file removed
    assert resource.getrlimit(resource.RLIMIT_FSIZE)  # the limit stayed in the child


def test_tmpfs_out_of_space_is_a_clear_error(tmp_path: Path) -> None:
    base = tmp_path / "small"
    with _mounted_tmpfs(base, "size=64k") as mounted:
        if not mounted:
            pytest.skip("needs root with mount rights (the RLIMIT_FSIZE test covers a full disk)")
        path = base / "test_a.json"
        update(path, {"test_keep": entry(simple_summary())})
        old = path.read_bytes()
        (base / "filler").write_bytes(b"\0" * (64 * 1024 - 2 * len(old) - 8192))
        big = {f"test_{i}": entry(simple_summary()) for i in range(200)}
        with pytest.raises(BaselineError, match=r"cannot be written: No space left on device"):
            update(path, big)
        assert path.read_bytes() == old
        assert sorted(p.name for p in base.iterdir()) == ["filler", "test_a.json"]


def test_symlink_at_the_file_is_written_through_and_kept(tmp_path: Path) -> None:
    victim = tmp_path / "elsewhere.txt"
    victim.write_text("old\n")
    base = tmp_path / "baselines"
    base.mkdir()
    link = base / "test_a.json"
    link.symlink_to(victim)
    # The link resolves outside the baseline directory: refused by the path check.
    with pytest.raises(BaselineError, match="outside the baseline directory"):
        baseline_path(base, "test_a.py")
    # Written directly (the report path goes this way): through the link, as --junitxml.
    write_file(link, "{}\n")
    assert link.is_symlink() and victim.read_text() == "{}\n"
    assert sorted(p.name for p in base.iterdir()) == ["test_a.json"]


def test_symlinked_subdirectory_out_of_the_baselines_gets_nothing(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    base = tmp_path / "baselines"
    base.mkdir()
    (base / "tests").symlink_to(outside, target_is_directory=True)
    run = BaselineSession(GateOptions(base))
    with pytest.raises(BaselineError, match="outside the baseline directory"):
        run.stage("tests/test_a.py::test_x", simple_summary())
    judgement = run.judge("tests/test_a.py::test_x", simple_summary(), {})
    assert judgement.fails and "outside the baseline directory" in (judgement.error or "")
    assert run.write() == []
    assert list(outside.iterdir()) == []


def test_symlink_inside_the_baselines_is_followed_for_reading_only(tmp_path: Path) -> None:
    base = tmp_path / "baselines"
    (base / "real").mkdir(parents=True)
    (base / "tests").symlink_to(base / "real", target_is_directory=True)
    path = baseline_path(base, "tests/test_a.py")
    update(path, {"test_x": entry(simple_summary())})
    assert list(load(base / "real" / "test_a.json")) == ["test_x"]


def test_write_file_goes_through_a_fifo_behind_a_symlink(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    link = tmp_path / "report.json"
    link.symlink_to(fifo)
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()), daemon=True)
    reader.start()
    write_file(link, "{}\n")  # a rename over the FIFO would leave the reader waiting
    reader.join(30)
    assert got == [b"{}\n"]
    assert link.is_symlink() and stat.S_ISFIFO(os.lstat(fifo).st_mode)
    with pytest.raises(BaselineError, match=r"cannot be written: Is a directory"):
        write_file(tmp_path, "{}\n")


def test_a_fifo_at_a_baseline_path_is_refused_at_once(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "test_a.json")
    with pytest.raises(BaselineError, match=r"test_a\.json: not a regular file"):
        load(tmp_path / "test_a.json")  # opening it to read used to wait for a writer
    with pytest.raises(BaselineError, match=r"not a regular file"):
        update(tmp_path / "test_a.json", {"t": entry(simple_summary())})


def test_long_names_shorten_stably_within_255_bytes() -> None:
    name = "test_" + "é" * 125 + ".json"  # 260 bytes
    short = short_name(name)
    assert len(short.encode()) <= 255 and short.endswith(".json")
    assert short == short_name(name) != short_name(name.replace("é.json", "e.json"))
    assert short_name("test_a.json") == "test_a.json"
