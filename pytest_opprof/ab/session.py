"""One A/B run's comparison: the base side's figures of this run stand in for a baseline.

It answers the worker as ``BaselineSession`` does (``judge``), so a regression fails that
test's report and the reports carry the result; nothing is read from or written to
``baselines/``.  Times are judged by their pairs (``judge.py``), the exact figures against
the base side's (``gate.verdict.compare``), and the verdict says its basis.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from pytest_opprof.ab import paired
from pytest_opprof.ab.across import MIN_TESTS, WORDS, AcrossTests, AcrossVerdict, op_in_test
from pytest_opprof.ab.base_side import BaseTest
from pytest_opprof.ab.judge import (
    ABJudge,
    JudgedFigure,
    partner_times,
    replace_time,
    settled_from,
    test_pairs,
    wait_limit,
)
from pytest_opprof.ab.revision import BaseRevision
from pytest_opprof.gate.results import TestResult
from pytest_opprof.gate.rows import UNSTEADY_ADVICE
from pytest_opprof.gate.session import BaselineSession, GateOptions, Judged, Judgement
from pytest_opprof.gate.store import BaselineEntry
from pytest_opprof.gate.summary import RoundFigures, TestSummary, summarize_rounds
from pytest_opprof.gate.verdict import (
    NEW,
    UPDATE_HINT,
    MetricRow,
    OpReason,
    Tolerances,
    VaryingFigure,
    Verdict,
    compare,
)

DEFAULT_Q = 0.1
"""The run's false-discovery rate for time verdicts (online, ``paired.OnlineFdr``).  On
unchanged code every discovery is false, so at most this share of A/A runs fails any test
(LOND's bound): about ``q / m`` of a run's ``m`` tests, 0.25% of a 40-test run.  Replayed
on recorded runs (``bench/ab_replay.py``, tolerance 5%, 4 runs a scenario), 10% instead of
5% caught 51, 41 and 39 of 52 kernels made 10% slower (quiet, loaded, bursty) against 49,
35 and 35, failed none of the 480 unchanged tests of the A/A runs either way, and 2 of the
480 unchanged tests in the runs with slowed ones against none: the control lets the
level grow with the discoveries, as Benjamini-Hochberg's does."""


ACROSS_CAVEAT = (
    'the two sides can differ for one op in every test alike (docs/ab.md, "Ops across tests")'
)


class ABSession(BaselineSession):
    """The comparison of an A/B run (see the module docstring)."""

    def __init__(
        self,
        options: GateOptions,
        revision: BaseRevision,
        *,
        tests: int,
        max_pairs: int,
        min_pairs: int = 1,
        q: float = DEFAULT_Q,
        unmeasured: str | None = None,
        processes: int = 1,
    ) -> None:
        super().__init__(options, unmeasured=unmeasured)
        self.revision = revision
        self.judge_ab = ABJudge(tests, q, max_pairs, min_pairs, processes=processes)
        self.pending: dict[str, tuple[BaseTest, list[RoundFigures]]] = {}
        """Node id -> its base side and head rounds, from the call phase to the verdict."""
        self.new: list[str] = []
        """Tests only on the head side (not in the base)."""
        self.base_failed: dict[str, str] = {}
        self.shipped: dict[str, dict[str, object]] = {}
        """Node id -> the verdict a pytest-xdist worker reached and its pair counts, as
        :meth:`shipment` wrote them (on the controller)."""
        self.pair_counts: dict[str, tuple[int, int, int, int, int]] = {}
        """Node id -> its pairs run, judged on work time and left out, and the ns spent on
        the base and the head side (on a worker, until the verdict is shipped)."""
        self.spent: dict[str, tuple[int, int]] = {}
        """Node id -> ns the head spent on the base's rounds and on its own (``head.py``)."""
        self.start_s: dict[str, float] = {}
        """What the run's start cost, in seconds: the worktree, the base side's start."""
        self.base_nodeids: frozenset[str] = frozenset()
        self.head_nodeids: set[str] = set()
        """The tests this run selected (the single process's, or every xdist worker's)."""
        self.base_python: str | None = None
        """The base side's interpreter, when ``--opprof-against-python`` chose it."""
        self.across = AcrossTests()
        """Each op's paired estimates over the tests that time it (``across.py``)."""
        self.op_rows: dict[str, list[list[object]]] = {}
        """Node id -> its ops' estimates as shipped (on a pytest-xdist worker)."""
        self._across: list[AcrossVerdict] | None = None

    @property
    def basis(self) -> str:
        return f"A/B against {self.revision.describe()}"

    def extra_lines(self) -> list[str]:
        """The terminal summary's A/B lines: the pairs, and what was not compared."""
        j = self.judge_ab
        lines = []
        if self.base_python is not None:
            lines += ["", f"base side: {self.base_python}"]
        if j.pairs_run:
            lines += [
                "",
                f"pairs: {j.pairs_run} base/head round pairs, interleaved; "
                f"{j.pairs_on_work / j.pairs_run:.0%} judged on work time and "
                f"{j.pairs_dropped / j.pairs_run:.0%} left out (a side waited for a CPU)",
            ]
        if j.pairs_run:
            lines.append(
                f"offset between the two processes: {j.test_offset.offset():.1%} for a test's "
                f"time, {j.op_offset.offset():.1%} for an op's (no interval is narrower)"
            )
        if self.start_s or j.base_ns or j.head_ns:
            start = ", ".join(f"{what} {s:.1f} s" for what, s in self.start_s.items())
            lines.append(
                f"time: start {sum(self.start_s.values()):.1f} s ({start}); rounds "
                f"{(j.base_ns + j.head_ns) / 1e9:.1f} s (base side {j.base_ns / 1e9:.1f} s, "
                f"with its hand-offs; head {j.head_ns / 1e9:.1f} s)"
            )
        lines += self._across_lines()
        removed = sorted(self.base_nodeids - self.head_nodeids) if self.head_nodeids else []
        if removed:
            lines += ["", f"removed (only in the base): {len(removed)} test(s)"]
            lines += [f"  {n}" for n in removed[:10]]
            if len(removed) > 10:
                lines.append(f"  ... {len(removed) - 10} more")
        if self.base_failed:
            lines += ["", f"not compared: {len(self.base_failed)} test(s) failed on the base:"]
            lines += [f"  {n}: {why}" for n, why in list(self.base_failed.items())[:10]]
        return lines

    def _add_ops(self, judged: Sequence[JudgedFigure]) -> list[list[object]]:
        """Pool the test's op estimates into :attr:`across`; returns them as shipped."""
        rows = []
        for j in judged:
            if not j.key:
                continue
            p = j.pairs
            op = op_in_test(
                j.estimate.mean_log,
                j.estimate.se_log,
                zip(p.index or range(len(p.base_ns)), p.base_ns, p.head_ns, strict=True),
                self.judge_ab.processes,
            )
            self.across.add(j.key, op)
            rows.append(op.to_json(j.key))
        return rows

    def across_verdicts(self) -> list[AcrossVerdict]:
        """The ops judged over the run's tests (``across.py``), once the run has ended."""
        if self._across is None:
            self._across = self.across.judge(
                self.tolerances.time, self.judge_ab.fdr.q, paired.DEFAULT_CONFIDENCE
            )
        return self._across

    def across_counts(self) -> str:
        """For the summary's first line: the ops that moved across the run's tests."""
        moved = Counter(v.status for v in self.across_verdicts() if v.status != "pass")
        return ", ".join(
            f"{moved[s]} op(s) {word} across tests" for s, word in WORDS.items() if moved[s]
        )

    def _across_lines(self) -> list[str]:
        verdicts = self.across_verdicts()
        if not verdicts:
            return []
        moved = [v for v in verdicts if v.status != "pass"]
        tol = self.tolerances.time
        head = (
            f"ops across tests: {len(verdicts)} op(s) timed in {MIN_TESTS} tests or more, "
            "each one's paired changes pooled over its tests"
        )
        if not moved:
            return ["", f"{head}: none moved beyond the {tol:.0%} tolerance"]
        lines = ["", f"{head}; moved beyond the {tol:.0%} tolerance:"]
        lines += [v.line(tol) for v in moved]
        lines.append(f"  reported, not failed: {ACROSS_CAVEAT}")
        return lines

    def markdown_notes(self) -> list[str]:
        """The ops that moved across the run's tests, one paragraph each (none: nothing)."""
        tol = self.tolerances.time
        return [
            f"Across tests: {v.line(tol).strip()}"
            for v in self.across_verdicts()
            if v.status != "pass"
        ]

    def report_extra(self) -> dict[str, object]:
        return {"ab_ops": [v.to_json() for v in self.across_verdicts()]}

    def base_unmeasured(self, why: str | None) -> None:
        """The base side cannot measure FLOPs, op counts or op figures (``why``): neither
        side's are judged, as a baseline recorded without them is not."""
        if why and self.unmeasured is None:
            self.unmeasured = f"on the base side, {why}"

    def times_judged(self, nodeid: str, rounds: int) -> bool:
        return False  # no speed references: each pair is its own reference

    def more_pairs(
        self,
        base: Sequence[RoundFigures],
        head: Sequence[RoundFigures],
        overrides: Mapping[str, float],
    ) -> bool:
        tol = self.with_overrides(overrides)
        if len(base) == len(head) == 1 and self._exact_moved(base, head, tol):
            self.judge_ab.another_pair()
            return True
        return self.judge_ab.more_pairs(base, head, tol)

    def _exact_moved(
        self, base: Sequence[RoundFigures], head: Sequence[RoundFigures], tol: Tolerances
    ) -> bool:
        """Whether a FLOPs, op count or memory figure of the head's round lies beyond
        tolerance of the base's: one pair cannot tell code that changed from data that
        moved (scipy.signal's ``test_precenter_deprecation`` draws its sample size from an
        unseeded generator: 864,620 FLOPs on the base, 1,396,886 on the head, every
        time), so it gets a second pair, whose rounds show whether the figure varies."""
        return self._exact(base, summarize_rounds(head), tol).exact_moved

    def _exact(self, base: Sequence[RoundFigures], head: TestSummary, tol: Tolerances) -> Verdict:
        """The head's FLOPs, memory and op counts against the base's rounds; times not
        judged here (they are the pairs', never the medians')."""
        return compare(
            head,
            BaselineEntry.record(summarize_rounds(base), self.machine),
            fingerprint=self.machine.fingerprint,
            tolerances=dataclasses.replace(tol, time_min_rounds=1 << 30),
            unmeasured=self.unmeasured,
        )

    def shipment(self, nodeid: str, verdict: Verdict) -> dict[str, object] | None:
        """What a pytest-xdist worker sends its controller: an A/B verdict depends on this
        worker's base side and pairs, so it travels as reached, with its pair counts."""
        return {
            "verdict": verdict.to_json(),
            "pairs": list(self.pair_counts.pop(nodeid, (0, 0, 0, 0, 0))),
            "ops": self.op_rows.pop(nodeid, []),
        }

    def compares(self, nodeid: str) -> bool:
        return True

    def judge(self, nodeid: str, summary: TestSummary, overrides: Mapping[str, float]) -> Judgement:
        tol = self.with_overrides(overrides)
        pending = self.pending.pop(nodeid, None)
        shipped = self.shipped.pop(nodeid, None)
        if pending is None and shipped is not None:
            verdict = verdict_from_json(shipped["verdict"])  # type: ignore[arg-type]
            if verdict.status == "new":
                self.new.append(nodeid)
            self.judge_ab.count_shipped(shipped["pairs"])  # type: ignore[arg-type]
            self.across.add_rows(shipped.get("ops", ()))  # type: ignore[arg-type]
        else:
            verdict = self._verdict(nodeid, summary, pending, tol)
        verdict = self.with_budgets(verdict, summary, overrides)
        result = TestResult(nodeid, summary, verdict, baseline_file=self.basis)
        self.judged.append(
            Judged(nodeid, verdict.status, verdict.time_not_judged is not None, False, False)
        )
        self._kept_at[len(self.judged) - 1] = len(self.results)
        self.results.append(result)
        return Judgement(result, None, self.fails(result))

    def _verdict(
        self,
        nodeid: str,
        summary: TestSummary,
        pending: tuple[BaseTest, list[RoundFigures]] | None,
        tol: Tolerances,
    ) -> Verdict:
        if pending is None:
            return dataclasses.replace(NEW, notes=("not judged: no base side",), basis=self.basis)
        base, head = pending
        if not base.present:
            self.new.append(nodeid)
            return dataclasses.replace(
                NEW, notes=(f"new: {base.why} ({self.revision.describe()})",), basis=self.basis
            )
        if not base.rounds:
            self.base_failed[nodeid] = base.why
            return dataclasses.replace(
                NEW,
                status="pass",
                notes=(f"not compared: the test {base.why}",),
                time_judged=False,
                basis=self.basis,
            )
        # Exact figures against the base's, round for round from the pairs: a figure the
        # test's own data decides (an unseeded generator) varies among each side's rounds,
        # and is set aside as unsteady rather than failed (``more_pairs`` runs a second
        # pair to see it).
        # Each process's first rounds left out where only they did other work (a lazy
        # set-up), as the times are (``judge.settled_from``).
        start = settled_from(base.rounds, head, self.judge_ab.processes) or 0
        exact = self._exact(
            base.rounds[start:], summarize_rounds(head[start:]) if head else summary, tol
        )
        stopped = self.judge_ab.stopped
        judged = self.judge_ab.settle(base.rounds, head, tol)
        self.op_rows[nodeid] = self._add_ops(judged)
        rows, reasons = replace_time(
            exact.metrics,
            exact.reasons,
            judged,
            tol,
            self.judge_ab.unjudged_why(base.rounds, head, tol),
            partner_times(base.rounds, head) if head and base.rounds else None,
        )
        # No baselines here: an unsteady figure's note keeps its facts, not their advice.
        notes = [
            n.replace(UNSTEADY_ADVICE, "").replace(f"; {UPDATE_HINT}", "")
            for n in exact.notes
            if "judged from" not in n
        ]
        run = min(len(base.rounds), len(head))
        wall = test_pairs(base.rounds, head, wait_limit(tol))
        dropped = wall.dropped
        base_ns, head_ns = self.spent.pop(nodeid, (0, 0))
        self.judge_ab.base_ns += base_ns
        self.judge_ab.head_ns += head_ns
        self.pair_counts[nodeid] = (run, wall.on_work, dropped, base_ns, head_ns)
        left_out = f" ({dropped} left out: a side waited for a CPU)" if dropped else ""
        notes.insert(
            0,
            f"times judged {self.basis}: {run} pair(s) of base and head rounds, interleaved "
            f"on this machine{left_out}; FLOPs, memory and op counts against the base's",
        )
        if base.failed:
            notes.append(f"the base side stopped: the test {base.why}")
        statuses = {r.status for r in rows} | {r.status for r in reasons}
        status = (
            "regressed"
            if "regressed" in statuses
            else "improved"
            if "improved" in statuses
            else "pass"
        )
        undecided = [j for j in judged if j.decision == "undecided"]
        test_time = next((j for j in judged if j.key == ""), None)
        unjudged = self.judge_ab.unjudged_why(base.rounds, head, tol)
        busy = None
        if undecided:
            busy = f"time not decided: {_undecided_line(undecided, stopped)}"
        elif test_time is None and unjudged.startswith("A/B: not judged: "):
            busy = f"time not judged: {unjudged.removeprefix('A/B: not judged: ')}"
        return Verdict(
            status=status,  # type: ignore[arg-type]
            metrics=tuple(rows),
            reasons=tuple(reasons),
            notes=tuple(notes),
            time_judged=test_time is not None and test_time.decision != "undecided",
            time_not_judged=busy,
            varying=exact.varying,
            basis=self.basis,
        )


def verdict_from_json(data: Mapping[str, object]) -> Verdict:
    """A verdict as ``Verdict.to_json`` wrote it (a pytest-xdist worker's, on the controller)."""

    def rows(key: str) -> list[dict[str, Any]]:
        value = data.get(key)
        return [dict(v) for v in value] if isinstance(value, list) else []

    return Verdict(
        status=data["status"],  # type: ignore[arg-type]
        metrics=tuple(MetricRow(**row) for row in rows("metrics")),
        reasons=tuple(OpReason(**row) for row in rows("reasons")),
        notes=tuple(str(n) for n in data.get("notes") or ()),  # type: ignore[attr-defined]
        time_judged=bool(data.get("time_judged")),
        baseline_recorded_at=data.get("baseline_recorded_at"),  # type: ignore[arg-type]
        speed_change=data.get("speed_change"),  # type: ignore[arg-type]
        time_not_judged=data.get("time_not_judged"),  # type: ignore[arg-type]
        work_time=data.get("time_judged_on") == "work time",
        varying=tuple(VaryingFigure(**row) for row in rows("varying")),
        unsteady=tuple(VaryingFigure(**row) for row in rows("unsteady")),
        basis=str(data.get("time_basis") or "baseline"),
    )


def _undecided_line(undecided: Sequence[JudgedFigure], stopped: str | None) -> str:
    """``kernel +4.1% [-1.0%, +9.3%], not decided in 3 pairs (why it stopped there)`` for
    the first figure."""
    first = undecided[0]
    name = first.key or "the test's time"
    line = f"{name} {paired.describe(first.estimate, first.decision)}"
    return f"{line} ({stopped})" if stopped else line
