"""The history store: one file per profiled run in a directory, nothing to start.

A run's file is ``<run time>-<commit>-<random>.npz`` (numpy's zip of arrays, each
array compressed), written whole to a temporary file beside it and renamed into
place (``gate/files.py``): a run killed on the way leaves a dot-named temporary file
that no reader opens, two runs writing at once write two files, and histories from
CI shards or machines merge by copying their files into one directory.  Only the
process that reports writes (a pytest-xdist controller, never a worker): the
workers' figures reach it on their call reports, as for baselines.

Why arrays and not JSON lines or SQLite: the figures of 1,000 runs of a 2,000-test
suite with some ten ops a test are 20 million numbers; parsed from JSON they took
longer than detection may (``bench/history_study.py`` measures it), while numpy
loads these arrays at disk speed.  A run's description (commit, machine, names) is
JSON inside the file, readable with ``numpy.load(path)["meta"].tobytes()``.

Arrays of a run (schema :data:`SCHEMA`); ``T`` tests, ``O`` (test, op) rows::

    meta         uint8   JSON: kind, schema, run_at (UTC), commit {sha, parent, branch,
                         time, dirty} or null, machine (gate/machine.py, with the
                         environment: python, numpy, blas, torch), tests [T names],
                         ops [op names], replaced [the tests whose baseline this
                         run replaced: the history gate judges them from it on]
    rounds       uint16[T]      measured rounds of each test
    wall_ns      float32[sum rounds]  each round's wall time, test after test
    wall_med_ns  float32[T]     median wall time
    cpu_ns       float32[T]     median CPU time
    test_exact   int64[T, 4]    flops, op_count, peak_bytes, leaked_bytes (-1: not measured)
    test_varied  uint8[T]       bit i: exact figure i varied over the rounds
    op_test      uint32[O]      the test's index
    op_name      uint32[O]      the op's index in meta's ops
    op_exact     int64[O, 3]    count, flops, self_memory_bytes
    op_varied    uint8[O]       bit i: exact figure i varied over the rounds
    op_self_ns   float32[sum of the op's test's rounds]  each round's self CPU time
    op_med_ns    float32[O]     median self CPU time

Times are float32 (7 significant digits, more than the 3 a baseline keeps).  The
medians are stored beside the rounds because detection reads only them: the rounds
are most of a file, and decompressing and reducing them took two thirds of the time
to load 1,000 runs.
"""

from __future__ import annotations

import io
import json
import os
import secrets
import zipfile
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from pytest_opprof.errors import BaselineError
from pytest_opprof.gate.files import write_bytes
from pytest_opprof.gate.summary import TestSummary

KIND = "opprof-history"
SCHEMA = 1
SUFFIX = ".npz"
TEST_EXACT = ("flops", "op_count", "peak_bytes", "leaked_bytes")
"""A test's deterministic figures, in the columns of ``test_exact``."""
OP_EXACT = ("count", "flops", "self_memory_bytes")
"""An op's deterministic figures, in the columns of ``op_exact``."""
_OP_RANGE_NAMES = ("count", "flops", "self_memory_bytes")


@dataclass(frozen=True)
class Commit:
    """The commit a run measured: full sha, first parent, branch, commit time (ISO 8601)."""

    sha: str
    parent: str | None
    branch: str | None
    time: str | None
    dirty: bool = False
    """Whether tracked files differed from the commit."""

    def to_json(self) -> dict[str, object]:
        return {
            "sha": self.sha,
            "parent": self.parent,
            "branch": self.branch,
            "time": self.time,
            "dirty": self.dirty,
        }


class RunWriter:
    """Collects one run's tests as they finish, then writes the run's file."""

    def __init__(self) -> None:
        self.tests: list[str] = []
        self._ops: dict[str, int] = {}
        self._rounds: list[int] = []
        self._wall: list[float] = []
        self._wall_med: list[float] = []
        self._op_med: list[float] = []
        self._cpu: list[float] = []
        self._test_exact: list[tuple[int, int, int, int]] = []
        self._test_varied: list[int] = []
        self._op_test: list[int] = []
        self._op_name: list[int] = []
        self._op_exact: list[tuple[int, int, int]] = []
        self._op_varied: list[int] = []
        self._op_self: list[float] = []

    def __len__(self) -> int:
        return len(self.tests)

    def add(self, nodeid: str, s: TestSummary) -> None:
        """Keep the figures of ``nodeid``'s summary (a few hundred bytes in lists)."""
        index = len(self.tests)
        self.tests.append(nodeid)
        rounds = len(s.wall_time.samples_ns)
        self._rounds.append(rounds)
        self._wall += s.wall_time.samples_ns
        self._wall_med.append(s.wall_time.median_ns)
        self._cpu.append(s.cpu_time.median_ns)
        memory = s.memory
        self._test_exact.append(
            (
                s.flops,
                s.op_count,
                memory.peak_bytes if memory is not None else -1,
                memory.leaked_bytes if memory is not None else -1,
            )
        )
        self._test_varied.append(_bits(TEST_EXACT, s.ranges))
        for key, op in s.ops.items():
            samples = op.self_cpu_time.samples_ns
            if len(samples) != rounds:  # a pooled or odd summary: one value per round only
                samples = (op.self_cpu_time.median_ns,) * rounds
            self._op_test.append(index)
            self._op_name.append(self._ops.setdefault(key, len(self._ops)))
            self._op_exact.append((op.count, op.flops, op.self_memory_bytes))
            self._op_varied.append(_bits(_OP_RANGE_NAMES, op.ranges))
            self._op_self += samples
            self._op_med.append(op.self_cpu_time.median_ns)

    def encode(self, meta: Mapping[str, object]) -> bytes:
        """The run's file: ``meta`` (commit, machine, run time) with the names added."""
        head = dict(meta, kind=KIND, schema=SCHEMA, tests=self.tests, ops=list(self._ops))
        arrays: dict[str, npt.NDArray[Any]] = {
            "meta": np.frombuffer(json.dumps(head, sort_keys=True).encode(), dtype=np.uint8),
            "rounds": np.array(self._rounds, dtype=np.uint16),
            "wall_ns": np.array(self._wall, dtype=np.float32),
            "wall_med_ns": np.array(self._wall_med, dtype=np.float32),
            "cpu_ns": np.array(self._cpu, dtype=np.float32),
            "test_exact": np.array(self._test_exact, dtype=np.int64).reshape(-1, len(TEST_EXACT)),
            "test_varied": np.array(self._test_varied, dtype=np.uint8),
            "op_test": np.array(self._op_test, dtype=np.uint32),
            "op_name": np.array(self._op_name, dtype=np.uint32),
            "op_exact": np.array(self._op_exact, dtype=np.int64).reshape(-1, len(OP_EXACT)),
            "op_varied": np.array(self._op_varied, dtype=np.uint8),
            "op_self_ns": np.array(self._op_self, dtype=np.float32),
            "op_med_ns": np.array(self._op_med, dtype=np.float32),
        }
        return encode_arrays(arrays)


def encode_arrays(arrays: Mapping[str, npt.NDArray[Any]]) -> bytes:
    """The ``.npz`` bytes of ``arrays``, each compressed."""
    out = io.BytesIO()
    np.savez_compressed(out, **arrays)  # type: ignore[arg-type]
    return out.getvalue()


def _bits(names: Sequence[str], ranges: Mapping[str, object]) -> int:
    return sum(1 << i for i, name in enumerate(names) if name in ranges)


def run_file_name(run_at: str, commit: Commit | None) -> str:
    """``20261120T101500Z-3f2c1ab0-<8 random hex>.npz``: sorts by run time, never collides."""
    stamp = run_at.replace("-", "").replace(":", "")
    sha = commit.sha[:8] if commit is not None else "nogit"
    return f"{stamp}-{sha}-{secrets.token_hex(4)}{SUFFIX}"


def write_run(directory: Path, data: bytes, name: str) -> Path:
    """Write one run's file into ``directory`` atomically; raises :class:`BaselineError`
    naming the file when it cannot be written."""
    path = directory / name
    try:
        directory.mkdir(parents=True, exist_ok=True)
        write_bytes(path, data)
    except OSError as exc:
        raise BaselineError(path, f"cannot be written: {exc.strerror or exc}") from None
    return path


@dataclass(frozen=True)
class Run:
    """One run of the history, its arrays as stored (see the module docstring)."""

    path: Path
    meta: Mapping[str, Any]
    arrays: Mapping[str, npt.NDArray[Any]]

    @property
    def tests(self) -> list[str]:
        tests: list[str] = self.meta["tests"]
        return tests

    @property
    def ops(self) -> list[str]:
        ops: list[str] = self.meta["ops"]
        return ops

    def wall_medians(self) -> npt.NDArray[np.float32]:
        """Each test's median wall time over its rounds (ns)."""
        return self.arrays["wall_med_ns"]

    def op_medians(self) -> npt.NDArray[np.float32]:
        """Each op row's median self CPU time over its test's rounds (ns)."""
        return self.arrays["op_med_ns"]


_ARRAYS = {
    "meta": 1,
    "rounds": 1,
    "wall_ns": 1,
    "wall_med_ns": 1,
    "cpu_ns": 1,
    "test_exact": 2,
    "test_varied": 1,
    "op_test": 1,
    "op_name": 1,
    "op_exact": 2,
    "op_varied": 1,
    "op_self_ns": 1,
    "op_med_ns": 1,
}
DETECTION_ARRAYS = (
    "test_exact",
    "test_varied",
    "wall_med_ns",
    "op_test",
    "op_name",
    "op_exact",
    "op_varied",
    "op_med_ns",
)
"""What change-point detection reads of a run (the rounds stay compressed)."""


def _meta(path: Path, z: Any) -> dict[str, Any]:
    if "meta" not in z.files:
        raise BaselineError(path, "not a pytest-opprof history run (no meta)")
    meta = json.loads(z["meta"].tobytes().decode("utf-8"))
    if not isinstance(meta, dict) or meta.get("kind") != KIND:
        raise BaselineError(path, "not a pytest-opprof history run", field="kind")
    if meta.get("schema") != SCHEMA:
        raise BaselineError(
            path,
            f"history schema {meta.get('schema')!r}, this version reads {SCHEMA}",
            field="schema",
        )
    _check_meta(path, meta)
    return meta


def read_meta(path: Path) -> dict[str, Any]:
    """A run file's description alone (its arrays are not decompressed); raises
    :class:`BaselineError` naming it when it is damaged or from another schema."""
    try:
        with np.load(path) as z:  # numpy refuses object arrays (allow_pickle) by default
            return _meta(path, z)
    except BaselineError:
        raise
    except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile) as exc:
        raise BaselineError(path, f"damaged ({type(exc).__name__}: {exc})") from None


def read_run(
    path: Path, meta: Mapping[str, Any] | None = None, names: Sequence[str] | None = None
) -> Run:
    """One run's file; raises :class:`BaselineError` naming it when it is damaged, from
    another schema, or its arrays do not fit together.  ``meta``: its description, read
    already (:func:`read_meta`); ``names``: the arrays to read (default: all)."""
    wanted = [n for n in _ARRAYS if n != "meta"] if names is None else list(names)
    try:
        with np.load(path) as z:  # numpy refuses object arrays (allow_pickle) by default
            meta = _meta(path, z) if meta is None else meta
            missing = [name for name in wanted if name not in z.files]
            if missing:
                raise BaselineError(path, f"no array {missing[0]!r}")
            arrays = {name: z[name] for name in wanted}
    except BaselineError:
        raise
    except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile) as exc:
        raise BaselineError(path, f"damaged ({type(exc).__name__}: {exc})") from None
    _check(path, meta, arrays)
    return Run(path, meta, arrays)


def _check_meta(path: Path, meta: Mapping[str, Any]) -> None:
    tests, ops = meta.get("tests"), meta.get("ops")
    machine = meta.get("machine")
    if not isinstance(tests, list) or not isinstance(ops, list):
        raise BaselineError(path, "no list of tests and ops", field="meta")
    if not isinstance(machine, dict) or not isinstance(machine.get("fingerprint"), str):
        raise BaselineError(path, "no machine fingerprint", field="machine")
    if not isinstance(meta.get("run_at"), str):
        raise BaselineError(path, "no run time", field="run_at")
    commit = meta.get("commit")
    if commit is not None and not (isinstance(commit, dict) and isinstance(commit.get("sha"), str)):
        raise BaselineError(path, "not a commit", field="commit")


def _check(path: Path, meta: Mapping[str, Any], a: Mapping[str, npt.NDArray[Any]]) -> None:
    """Raise :class:`BaselineError` where the arrays disagree in length or with the names."""
    tests, ops = meta["tests"], meta["ops"]
    for name, array in a.items():
        if array.ndim != _ARRAYS[name]:
            raise BaselineError(path, f"{array.ndim} dimensions, not {_ARRAYS[name]}", field=name)
    t, o = len(tests), len(a["op_test"])
    sizes = dict.fromkeys(("rounds", "cpu_ns", "wall_med_ns", "test_exact", "test_varied"), t)
    sizes.update(dict.fromkeys(("op_name", "op_exact", "op_varied", "op_med_ns"), o))
    if "rounds" in a:
        rounds = a["rounds"].astype(np.int64)
        sizes["wall_ns"] = int(rounds.sum())
        if "op_self_ns" in a and len(rounds) == t and (not o or int(a["op_test"].max()) < t):
            sizes["op_self_ns"] = int(rounds[a["op_test"]].sum()) if o else 0
    for name, size in sizes.items():
        if name in a and len(a[name]) != size:
            raise BaselineError(path, f"{len(a[name])} rows where {size} belong", field=name)
    if o and (int(a["op_test"].max()) >= t or int(a["op_name"].max()) >= len(ops)):
        raise BaselineError(path, "an op row names a test or op that is not there", field="op")


@dataclass(frozen=True)
class RunHead:
    """A run file's path and description, before its arrays are read."""

    path: Path
    meta: Mapping[str, Any]

    @property
    def fingerprint(self) -> str:
        return str(self.meta["machine"]["fingerprint"])

    @property
    def commit(self) -> Mapping[str, Any] | None:
        commit: Mapping[str, Any] | None = self.meta.get("commit")
        return commit

    def order_key(self) -> tuple[str, str]:
        """Runs sort by their commit's time, then by when they ran."""
        when = str(self.meta["run_at"])
        return ((self.commit or {}).get("time") or when, when)


@dataclass(frozen=True)
class History:
    """The readable runs of a history directory, oldest first, and one line per file
    skipped (``path: why``)."""

    runs: list[RunHead]
    skipped: list[str]


def run_files(directory: Path) -> Iterator[Path]:
    """The run files of ``directory`` and its subdirectories (copied-in shards), not the
    temporary files of runs still writing (or killed while writing)."""
    for root, dirs, files in os.walk(directory):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for name in sorted(files):
            if name.endswith(SUFFIX) and not name.startswith("."):
                yield Path(root, name)


def scan(directory: Path) -> History:
    """The descriptions of every run file under ``directory``, oldest first; raises
    :class:`BaselineError` when it is not a directory."""
    if not directory.is_dir():
        raise BaselineError(directory, "not a directory (a history is a directory of runs)")
    runs, skipped = [], []
    for path in run_files(directory):
        try:
            runs.append(RunHead(path, read_meta(path)))
        except BaselineError as exc:
            skipped.append(str(exc))
    runs.sort(key=RunHead.order_key)
    return History(runs, skipped)
