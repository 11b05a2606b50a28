"""From a history's runs to its change points, one machine fingerprint at a time.

Runs are read one after another in commit order and poured into dense matrices (one
row per run; one column per test, or per test and op; NaN where a run lacks the
series), so memory holds one float per series and run, not the runs' arrays.  Rows
per run, because a run fills a row: filled by column, 1,000 runs took seconds more.  A
deterministic figure is compared, as each run arrives, with its value in the last run
that had it: a step is found where it differs.
"""

from __future__ import annotations

import dataclasses
import math
from collections import defaultdict
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from pytest_opprof.errors import BaselineError
from pytest_opprof.gate.creep import commits_text
from pytest_opprof.history.changes import (
    ALPHA,
    MIN_CHANGE,
    MIN_SIZE,
    Step,
    find_time_changes,
    noise_widths,
    time_steps,
)
from pytest_opprof.history.reference import reference_factors
from pytest_opprof.history.store import (
    DETECTION_ARRAYS,
    OP_EXACT,
    TEST_EXACT,
    History,
    RunHead,
    read_run,
)

WALL = "wall"
CPU = "cpu"
SELF = "self"
"""The time figures: a test's wall time and CPU time, an op's self CPU time."""


@dataclass(frozen=True)
class ChangePoint:
    """A step of one figure of one test (or of one op in it) on one machine."""

    machine: str
    test: str
    op: str | None
    """None: the test's own figure."""
    figure: str
    """``wall`` or ``self`` (times), else a deterministic figure's name (store.py)."""
    step: Step
    run: RunHead
    """The first run at the new level."""
    runs: int
    """How many runs of this machine the series was judged on."""
    between: tuple[RunHead, ...] = ()
    """Where the history cannot tell the commit (``Step.first``, ``Step.last``): the first
    run of each commit it may be at, in order; none where it is at :attr:`run`'s."""

    @property
    def exact(self) -> bool:
        return self.figure not in (WALL, CPU, SELF)

    @property
    def sha(self) -> str | None:
        commit = self.run.commit
        return str(commit["sha"]) if commit else None

    @property
    def date(self) -> str:
        return run_date(self.run)

    @property
    def at(self) -> str:
        """``3f2c1ab``, or ``3f2c1ab or the next commit`` where the history cannot tell the
        two apart (``or one of the next 3 commits``, and so on)."""
        first = self.between[0] if self.between else self.run
        commit = first.commit
        sha = str(commit["sha"])[:7] if commit else "no commit"
        return commits_text(sha, len(self.between) - 1)

    def to_json(self) -> dict[str, object]:
        s = self.step
        return {
            "machine": self.machine,
            "test": self.test,
            "op": self.op,
            "figure": self.figure,
            "change": None if math.isinf(s.change) else round(s.change, 4),
            "low": None if s.low is None else round(s.low, 4),
            "high": None if s.high is None else round(s.high, 4),
            "before": s.before,
            "after": s.after,
            "commit": dict(self.run.commit) if self.run.commit else None,
            "at": self.at,
            "between": [dict(h.commit) if h.commit else None for h in self.between] or None,
            "run_at": self.run.meta["run_at"],
            "run_file": str(self.run.path),
            "runs": self.runs,
        }


def run_date(head: RunHead) -> str:
    """``2026-11-20``: the day of the run's commit, else of the run."""
    commit = head.commit
    return str((commit or {}).get("time") or head.meta["run_at"])[:10]


@dataclass
class Detection:
    """Settings of the detector (``changes.py``)."""

    alpha: float = ALPHA
    min_size: int = MIN_SIZE
    min_change: float = MIN_CHANGE
    reference: bool = True
    """Whether times are corrected by the suite's reference first (``reference.py``)."""


@dataclass
class Found:
    """What a history held: its change points, the files skipped, and how many series
    were searched (for a false-positive rate)."""

    changes: list[ChangePoint]
    skipped: list[str]
    series: int = 0
    runs: int = 0
    machines: dict[str, Mapping[str, Any]] | None = None


def find_changes(history: History, detection: Detection | None = None) -> Found:
    """Every change point of ``history``'s runs, per machine fingerprint."""
    detection = detection or Detection()
    by_machine: dict[str, list[RunHead]] = defaultdict(list)
    for head in history.runs:
        by_machine[head.fingerprint].append(head)
    found = Found([], list(history.skipped), machines={})
    for fingerprint, heads in by_machine.items():
        assert found.machines is not None
        found.machines[fingerprint] = heads[-1].meta["machine"]
        MachineSeries(fingerprint, heads, detection, found).run()
    return found


class Names:
    """Names to dense ids, with the last list's ids kept (most runs list the same names)."""

    def __init__(self) -> None:
        self.ids: dict[str, int] = {}
        self.names: list[str] = []
        self._last: tuple[list[str], npt.NDArray[np.int64]] | None = None

    def of(self, names: list[str]) -> npt.NDArray[np.int64]:
        if self._last is not None and self._last[0] == names:
            return self._last[1]
        out = np.empty(len(names), dtype=np.int64)
        for i, name in enumerate(names):
            gid = self.ids.get(name)
            if gid is None:
                gid = self.ids[name] = len(self.names)
                self.names.append(name)
            out[i] = gid
        self._last = (names, out)
        return out


def _grown(a: npt.NDArray[Any], rows: int, fill: float) -> npt.NDArray[Any]:
    if rows <= a.shape[0]:
        return a
    more = np.full((max(rows, 2 * a.shape[0]) - a.shape[0], *a.shape[1:]), fill, dtype=a.dtype)
    return np.concatenate([a, more])


def _columns(a: npt.NDArray[np.float32], columns: int) -> npt.NDArray[np.float32]:
    if columns <= a.shape[1]:
        return a
    more = np.full((a.shape[0], max(columns, 2 * a.shape[1]) - a.shape[1]), np.nan, a.dtype)
    return np.concatenate([a, more], axis=1)


class Exact:
    """Deterministic figures of many series, compared with their last value as runs arrive."""

    def __init__(self, columns: int) -> None:
        self.value = np.zeros((0, columns), dtype=np.int64)
        self.seen = np.zeros((0, columns), dtype=np.int64)  # how many runs had it
        self.last = np.zeros((0, columns), dtype=np.int64)  # the last run that had it
        self.steps: list[tuple[int, int, int, int, int, int]] = []
        """(row, column, run, before, after, the last run at ``before``)."""
        self._last: tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], Any] | None = None
        self._run = 0  # the run of the last call

    def add(
        self, rows: npt.NDArray[np.int64], values: npt.NDArray[np.int64], usable: Any, run: int
    ) -> None:
        last = self._last
        self._last = (rows, values, usable)
        if (
            last is not None
            and (last[0] is rows or np.array_equal(last[0], rows))
            and np.array_equal(last[1], values)
            and np.array_equal(last[2], usable)
        ):
            self._run = run
            return  # as the last run had them (most runs): nothing moved, nothing to store
        top = int(rows.max()) + 1 if len(rows) else 0
        self.value = _grown(self.value, top, 0)
        self.seen = _grown(self.seen, top, 0)
        self.last = _grown(self.last, top, 0)
        if last is not None:  # the runs since the last change had what it had
            for c in range(values.shape[1]):
                self.last[last[0][last[2][:, c]], c] = self._run
        self._run = run
        for c in range(values.shape[1]):
            ok = usable[:, c]
            r, v = rows[ok], values[ok, c]
            moved = np.flatnonzero((self.seen[r, c] > 0) & (self.value[r, c] != v))
            for j in moved:
                before = int(self.value[r[j], c])
                self.steps.append((int(r[j]), c, run, before, int(v[j]), int(self.last[r[j], c])))
            self.value[r, c] = v
            self.seen[r, c] += 1
            self.last[r, c] = run


class MachineSeries:
    """One machine's runs poured into series, then searched: after :meth:`run`, the
    series stay for a reader (the history gate, ``history/gate.py``): ``wall[run, test
    id]`` and ``self_time[run, series id]`` (NaN where a run lacks it), ``table[test id,
    op id]`` the series id (-1: none), the ids in ``tests`` and ``ops``, and the
    deterministic figures' steps in ``test_exact`` and ``op_exact``."""

    def __init__(
        self,
        fingerprint: str,
        heads: Sequence[RunHead],
        detection: Detection,
        found: Found,
        *,
        cpu: bool = False,
    ) -> None:
        self.fingerprint = fingerprint
        self.heads = heads
        self.detection = detection
        self.found = found
        n = len(heads)
        self.tests = Names()
        self.ops = Names()
        self.wall = np.full((n, 64), np.nan, dtype=np.float32)
        self.cpu: npt.NDArray[np.float32] | None = (
            np.full((n, 64), np.nan, dtype=np.float32) if cpu else None
        )
        """With ``cpu``: each test's CPU time, searched too (``cpu[run, test id]``)."""
        self.cpu_referenced: npt.NDArray[np.float32] | None = None
        self.self_time_referenced: npt.NDArray[np.float32] | None = None
        """With ``cpu``, after :meth:`run`: ``cpu`` and ``self_time`` as searched, corrected
        by the suite's reference (``reference.py``; NaN in runs not loaded)."""
        self.self_time = np.full((n, 256), np.nan, dtype=np.float32)
        self.table = np.full((64, 16), -1, dtype=np.int64)  # [test id, op id] -> op series
        self.series: list[tuple[int, int]] = []  # op series -> (test id, op id)
        self.test_exact = Exact(len(TEST_EXACT))
        self.op_exact = Exact(len(OP_EXACT))

    def run(self) -> None:
        loaded = []
        for r, head in enumerate(self.heads):
            try:
                self._pour(r, head)
            except BaselineError as exc:
                self.found.skipped.append(str(exc))
                continue
            loaded.append(r)
        cols = np.array(loaded, dtype=np.int64)
        self.found.runs += len(loaded)
        n_tests, n_series = len(self.tests.names), len(self.series)
        self.found.series += n_tests + n_series
        one_group = np.zeros(n_tests, dtype=np.int64)  # a test's time: every test's peers
        test_work: dict[int, set[int]] = defaultdict(set)  # where each one's work changed
        op_work: dict[int, set[int]] = defaultdict(set)
        for row, _, r, *_ in self.test_exact.steps:
            test_work[row].add(r)
        for row, _, r, *_ in self.op_exact.steps:
            op_work[row].add(r)
            test_work[self.series[row][0]].add(r)
        wall = np.ascontiguousarray(self.wall[cols, :n_tests].T)
        for row, steps in self._time_steps(wall, cols, one_group, test_work):
            self._add(self.tests.names[row], None, WALL, steps, len(cols))
        if self.cpu is not None:
            cpu = np.ascontiguousarray(self.cpu[cols, :n_tests].T)
            cpu_steps = self._time_steps(cpu, cols, one_group, test_work)
            for row, steps in cpu_steps:
                self._add(self.tests.names[row], None, CPU, steps, len(cols))
            self.cpu_referenced = _rows_of(cpu_steps.referenced, cols, len(self.heads))
        self_time = np.ascontiguousarray(self.self_time[cols, :n_series].T)
        by_op = np.array([op for _, op in self.series], dtype=np.int64)  # an op's: its own
        self_steps = self._time_steps(self_time, cols, by_op, op_work)
        for row, steps in self_steps:
            test, op = self.series[row]
            self._add(self.tests.names[test], self.ops.names[op], SELF, steps, len(cols))
        if self.cpu is not None:
            self.self_time_referenced = _rows_of(self_steps.referenced, cols, len(self.heads))
        for row, c, r, before, after, seen in self.test_exact.steps:
            step = _exact_step(r, before, after, seen)
            self._add(self.tests.names[row], None, TEST_EXACT[c], [step], len(cols))
        for row, c, r, before, after, seen in self.op_exact.steps:
            test, op = self.series[row]
            step = _exact_step(r, before, after, seen)
            self._add(self.tests.names[test], self.ops.names[op], OP_EXACT[c], [step], len(cols))

    def _add(self, test: str, op: str | None, figure: str, steps: list[Step], runs: int) -> None:
        for s in steps:
            self.found.changes.append(
                ChangePoint(
                    self.fingerprint,
                    test,
                    op,
                    figure,
                    s,
                    self.heads[s.at],
                    runs,
                    self._between(s),
                )
            )

    def _between(self, s: Step) -> tuple[RunHead, ...]:
        """The first run of each commit the step may be at (``Step.first`` to ``last``), in
        order, where there are two or more; none where it is at its own."""
        if s.first is None or s.last is None:
            return ()
        heads: dict[str, RunHead] = {}
        for head in self.heads[s.first : s.last + 1]:
            commit = head.commit
            heads.setdefault(str(commit["sha"]) if commit else str(head.path), head)
        return tuple(heads.values()) if len(heads) > 1 else ()

    def _pour(self, r: int, head: RunHead) -> None:
        names = DETECTION_ARRAYS if self.cpu is None else (*DETECTION_ARRAYS, "cpu_ns")
        run = read_run(head.path, head.meta, names)
        a = run.arrays
        tg = self.tests.of(run.tests)
        n_tests = len(self.tests.names)
        self.wall = _columns(self.wall, n_tests)
        self.wall[r, tg] = run.wall_medians()
        if self.cpu is not None:
            self.cpu = _columns(self.cpu, n_tests)
            self.cpu[r, tg] = a["cpu_ns"]
        exact = a["test_exact"]
        varied = a["test_varied"][:, None] >> np.arange(len(TEST_EXACT)) & 1
        self.test_exact.add(tg, exact, (varied == 0) & (exact >= 0), r)
        if not len(a["op_test"]):
            return
        og = self.ops.of(run.ops)
        t, o = tg[a["op_test"]], og[a["op_name"]]
        if n_tests > self.table.shape[0] or len(self.ops.names) > self.table.shape[1]:
            table = np.full(
                (max(n_tests, self.table.shape[0]), max(len(self.ops.names), self.table.shape[1])),
                -1,
                dtype=np.int64,
            )
            table[: self.table.shape[0], : self.table.shape[1]] = self.table
            self.table = table
        sid = self.table[t, o]
        new = np.flatnonzero(sid < 0)
        if len(new):
            ids = np.arange(len(self.series), len(self.series) + len(new))
            self.table[t[new], o[new]] = ids
            sid[new] = ids
            self.series += zip(t[new].tolist(), o[new].tolist(), strict=True)
        self.self_time = _columns(self.self_time, len(self.series))
        self.self_time[r, sid] = run.op_medians()
        exact = a["op_exact"]
        varied = a["op_varied"][:, None] >> np.arange(len(OP_EXACT)) & 1
        self.op_exact.add(sid, exact, varied == 0, r)

    def _time_steps(
        self,
        matrix: npt.NDArray[np.float32],
        cols: npt.NDArray[np.int64],
        peers: npt.NDArray[np.int64],
        work: Mapping[int, set[int]],
    ) -> TimeSteps:
        """The steps of each row of ``matrix`` (series x loaded runs), first corrected
        by the suite's reference from the rows of its ``peers`` id (``reference.py``);
        ``work``: row -> the runs where its deterministic figures stepped."""
        referenced = matrix
        if self.detection.reference and matrix.size:
            logs = np.log(np.maximum(matrix.astype(np.float64), 1e-3))
            referenced = np.exp(logs - reference_factors(logs, peers))
        return TimeSteps(matrix, referenced, cols, self.detection, work, peers)


@dataclass
class TimeSteps:
    """Series of times and their steps: iterate for ``(row, steps)`` of each row with a
    step, their ``at`` a run index of the machine's runs.  Rows are searched in groups
    that have the same runs (a test added later has fewer)."""

    measured: npt.NDArray[Any]
    referenced: npt.NDArray[Any]
    """``measured`` corrected by the suite's reference (the same where it is off)."""
    cols: npt.NDArray[np.int64]
    """The machine's run of each column."""
    detection: Detection
    work: Mapping[int, set[int]] = dataclasses.field(default_factory=dict)
    """Row -> the machine's runs where the work it times changed (a deterministic figure
    of the same test, or op, stepped): a time step the detector placed within a run of
    its window from one is placed there (:func:`at_work`)."""
    groups: npt.NDArray[np.int64] | None = None
    """Each row's group (the same op in every test): their run-to-run noise is pooled for
    the shift test (``changes.noise_widths``); None: no shift test."""

    def __iter__(self) -> Iterator[tuple[int, list[Step]]]:
        d, matrix, cols = self.detection, self.referenced, self.cols
        if not matrix.size:
            return
        present = ~np.isnan(matrix)
        masks, group = np.unique(np.packbits(present, axis=1), axis=0, return_inverse=True)
        for g in range(len(masks)):
            rows = np.flatnonzero(group.ravel() == g)
            where = np.flatnonzero(present[rows[0]])
            if len(where) < 2 * d.min_size:
                continue
            sub = matrix[np.ix_(rows, where)]
            as_measured = self.measured[np.ix_(rows, where)]
            noise = None
            if self.groups is not None:
                # float32 as the history stores times: half the memory traffic
                logs = np.log(np.maximum(sub, np.float32(1e-3)))
                noise = noise_widths(logs, self.groups[rows])
            for row, cuts in find_time_changes(sub, d.alpha, d.min_size, noise).items():
                values = sub[row].astype(np.float64)
                measured = as_measured[row].astype(np.float64)
                steps = time_steps(values, cuts, d.min_change, measured)
                work = self.work.get(int(rows[row]))
                if work:
                    moved = at_work(steps, cuts, np.searchsorted(cols[where], sorted(work)))
                    if moved != cuts:
                        steps = time_steps(values, moved, d.min_change, measured)
                yield int(rows[row]), [_in_runs(s, cols[where]) for s in steps]


def at_work(steps: Sequence[Step], cuts: Sequence[int], work: npt.NDArray[np.int64]) -> list[int]:
    """``cuts`` with each reported step's moved to where the work it times changed
    (``work``: positions in the series where its deterministic figures stepped, sorted),
    where one lies within a run of the step's window (``Step.first`` to ``last``, or its
    own run): a time cannot step before its work does, and the detector places a step
    one or two runs off where a run beside it is noisy (``bench/history_study.py``: a
    matmul's FLOPs stepped at commit 34, its self time was placed at 35 or 36, the run
    at 34 having read the machine slow for every matmul)."""
    out = list(cuts)
    for s in steps:
        first = s.at if s.first is None else s.first
        last = s.at if s.last is None else s.last
        near = [int(w) for w in work if first - 1 <= w <= last + 1 and w not in out]
        if near and s.at in out:
            out[out.index(s.at)] = min(near, key=lambda w: abs(w - s.at))
    return sorted(out)


def _in_runs(s: Step, runs: npt.NDArray[np.int64]) -> Step:
    """``s``, found in a series that has values in ``runs`` (the machine's runs), with its
    run and its window as the machine's runs: its window reaches back to the run after
    the last with a value at the old level (the runs between had none)."""
    first = s.at if s.first is None else s.first
    last = s.at if s.last is None else s.last
    lo, hi = int(runs[first - 1]) + 1, int(runs[last])
    at = int(runs[s.at])
    window = (lo, hi) if lo < hi else (None, None)
    return Step(at, s.before, s.after, s.change, s.low, s.high, *window)


def _rows_of(
    matrix: npt.NDArray[Any], cols: npt.NDArray[np.int64], runs: int
) -> npt.NDArray[np.float32]:
    """``matrix`` (series x loaded runs) as runs x series, NaN in the runs not loaded."""
    out = np.full((runs, matrix.shape[0]), np.nan, dtype=np.float32)
    out[cols] = matrix.T
    return out


def _exact_step(run: int, before: int, after: int, seen: int) -> Step:
    """A deterministic figure's step at ``run``, last at ``before`` in run ``seen``: the runs
    between had no value of it (not run, not loaded, varied), so it stepped at one of them
    or at ``run``."""
    change = after / before - 1 if before else math.inf
    first, last = (seen + 1, run) if seen + 1 < run else (None, None)
    return Step(run, float(before), float(after), change, first=first, last=last)
