"""The A/B time basis: a test's and its ops' times judged by their paired rounds.

Pair ``k`` is the base's round ``k`` and the head's round ``k``, run one right after the
other (``head.py``).  A figure's pairs become log ratios; ``paired.py`` turns them into a
change with its interval, pooled with how far unchanged pairs scatter on this machine in
this run, and a decision against the tolerance (the smallest change worth failing for)
at the level the run's online false-discovery control grants the test.

FLOPs, memory and op counts are exact: they are judged as against a baseline, the base
side's figures of this run standing in for it (``verdict.compare``).
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from pytest_opprof.ab import paired
from pytest_opprof.gate.round_figures import SummedOps
from pytest_opprof.gate.summary import OTHER_OPS, OpFigures, RoundFigures
from pytest_opprof.gate.verdict import MetricRow, OpReason, RowStatus, Tolerances
from pytest_opprof.gate.waiting import WAIT_SHARE_LIMIT

WORK_TIME = "work time"
EXTRA_PAIRS_PER_TEST = 5
"""The run's budget of pairs beyond each test's first: this many times its tests, plus one
test's maximum (a heavy test's pairs are also held to :data:`HEAVY`).  Unchanged tests
take 1-2 extra pairs to pass (``PASS_PAIRS``), so the
budget binds where many tests lean slower: replayed on recorded runs with 13 of 40 tests'
kernels 10% slower (tolerance 5%), 5 a test caught 129 of 156 where 3 caught 121, and
A/A runs took 2.9 pairs a test either way (``bench/ab_replay.py``)."""
FAIR_SHARE = 3
"""A test may run up to this many times its share of the extra pairs left (the budget
left over the tests left, at least one), so no test spends the pairs of the tests after
it.  Simulated runs of 80 tests (``bench/ab_budget.py``, 3.5% pair scatter): spent first
come, first served, the first 40 tests took every pair and the last 40 caught 0 of 94
+10% slowdowns; with fair shares and ``LEAN`` the halves caught 76 of 89 and 77 of 91."""
HEAVY = 4.0
"""A test's pairs beyond its first may take at most the time the most pairs
(``--opprof-ab-max-pairs``) of a test this many times the run's typical one would (the
median first pair of the tests whose time is judged), and one pair at least.  Pairs are
not equal: a round of numpy's ``TestCond::test_generalized_sq_cases`` takes 3.6 s, a
thousand times most of its file's, and the op-dense tests whose many op figures stay
undecided took 12 pairs each, so 9 of the file's 470 tests spent 80% of an A/A run that
cost 20x a plain one.  The time is work time (waits out), so a test is heavy for what it
runs.  Replayed (``bench/ab_replay.py``, tolerance 5%): numpy's file cost x5.0 its head
rounds instead of x8.2, 136 of its 150 times of 1 ms or more decided against 142; the
generated suite's 1-4 ms tests, within this factor of each other, decided and caught the
same in every scenario.  Held in time alone (the run's budget counted in time), a mixed
file's 1-4 ms tests went short: numpy's A/A runs decided 48-79% of their times against
91-95%, four runs interleaved."""
LEAN = 0.5
"""An undecided figure asks for another pair only while it leans slower by at least this
share of the tolerance (an op's interval must also lie above zero): the pairs go to the
figures that may have regressed, not to proving that unchanged ones did not.  At 2% pair
scatter (``bench/ab_budget.py``) the run caught 95 of 98 and 94 of 96 +10% slowdowns in
2.4-2.6 pairs a test, where spending on every undecided figure caught 77 of 107 and 0 of
94 in 5.3 and 1.0; it leaves more unchanged tests undecided (28-32% decided in each
half, against 76% and 1%).  A test's own time that does not lean slower still runs up to
``PASS_PAIRS``: with the wild pairs out (``paired.WILD_Z``), that decides most unchanged
tests in two or three pairs."""
OP_REACH = 2.0
"""An op whose interval still reaches below zero leans slower when its change is at least
this many times the tolerance: at one pair a +10% kernel read +11.1% [-0.3%, +23.8%] and
stopped.  On recorded pairs it caught 1-3 more of 13 slowed kernels at 0-0.3 more pairs a
test in A/A runs (``bench/ab_replay.py``)."""
PASS_PAIRS = 12
"""An undecided test time that does not lean slower (``LEAN``) still runs pairs up to
this many (within ``--opprof-ab-max-pairs`` and its share of the budget), so an unchanged
test can show it passes: pairs of scipy.signal's 1-4 ms tests scatter 4-5% a pair here
even quiet (their median absolute deviation), and an interval's high end falls under a
5% tolerance only after many of them when the test's mean lies a few percent off zero.
Replayed on every saved recording (``bench/ab_replay.py``, tolerance 5%, two processes a
side: 1,769 unchanged times of 1 ms or more, synthetic, numpy's and scipy's, quiet,
loaded and bursty), up to 12 pairs decided 1,366 against 1,322 up to 8 (scipy's 66 of 87
against 62), caught 191 of 312 slowed kernels against 188, failed no unchanged test
either way, and ran 0-5% more round time; up to 6, earlier, decided 5 points fewer than
up to 8; pairs only for figures leaning slower decided 15% quiet."""

SETTLED_PAIRS = 2
"""Pairs after each process's first that must agree on the test's work before its time is
judged without those first rounds: a test whose first call in a process does more (numpy's
``unique`` set itself up in its first call there, 7.8 ms of a 9 ms round of the example
suite's ``test_kmeans_separates_blobs``) is judged on its later pairs, and a test whose data
is drawn anew each call shows it in two of them."""
CONFIDENCE = paired.DEFAULT_CONFIDENCE
"""The interval shown with each paired change, and the one a ``pass`` must fall inside."""


@dataclass(frozen=True)
class Pairs:
    """One figure's usable pairs (ns) and how they were taken."""

    base_ns: tuple[int, ...]
    head_ns: tuple[int, ...]
    on_work: int = 0
    """Pairs judged on work time (a side waited for a CPU)."""
    dropped: int = 0
    """Pairs left out: a round with no work time to judge (``paired.pair_basis``)."""
    index: tuple[int, ...] = ()
    """Each usable pair's number in the test (0 the first): pair ``k`` ran in process
    ``k % processes`` of each side (``replicas.py``)."""
    first: int = 0
    """Pairs before these left out: each process's first round did other work."""

    @property
    def log_ratios(self) -> list[float]:
        return [math.log(h / b) for b, h in zip(self.base_ns, self.head_ns, strict=True) if b and h]

    def in_process(self, process: int, processes: int) -> list[float]:
        """The log ratios of the pairs that ran in ``process`` of each side."""
        index = self.index or tuple(range(len(self.base_ns)))
        return [
            math.log(h / b)
            for k, b, h in zip(index, self.base_ns, self.head_ns, strict=True)
            if b and h and k % processes == process
        ]

    @property
    def scale_ns(self) -> float:
        """The figure's size, for the noise model's bins: the base's median."""
        ordered = sorted(self.base_ns)
        return float(ordered[len(ordered) // 2]) if ordered else 0.0


def wait_limit(tol: Tolerances) -> float:
    """The share of its wall time a round may wait for a CPU and keep its wall time
    (``--opprof-max-wait``; none set: every round does)."""
    return tol.max_wait_share if tol.max_wait_share is not None else 1.0


def test_pairs(
    base: Sequence[RoundFigures],
    head: Sequence[RoundFigures],
    limit: float = WAIT_SHARE_LIMIT,
    start: int = 0,
) -> Pairs:
    """The test-level time of each pair from ``start`` on: wall time when neither round
    waited for a CPU beyond ``limit`` of its wall time, work time (wall less wait) on both
    rounds when one did, the pair left out when a round has no work time
    (``paired.pair_basis``)."""
    b_ns, h_ns, index, on_work, dropped = [], [], [], 0, 0
    for k, (b, h) in enumerate(zip(base, head, strict=False)):
        if k < start:
            continue
        basis = paired.pair_basis(
            b.wall_time_ns, b.wait_ns or 0, h.wall_time_ns, h.wait_ns or 0, limit
        )
        if basis == "rerun":
            dropped += 1
            continue
        index.append(k)
        if basis == "work":
            on_work += 1
            b_ns.append(_work_ns(b))
            h_ns.append(_work_ns(h))
        else:
            b_ns.append(b.wall_time_ns)
            h_ns.append(h.wall_time_ns)
    return Pairs(tuple(b_ns), tuple(h_ns), on_work, dropped, tuple(index), start)


class _OpTable:
    """One test's pairs, read for each of its ops (:meth:`pairs`: the op's self time in each
    pair from ``start`` on where both rounds ran it; its waits are already out of its self
    time where they were measured per op, so only pairs with no work time to judge are
    left out): each pair's basis found once, each round's ops as a plain dict.
    ``ABJudge.figures`` runs at every pair for every op of the test (scipy.signal's
    ``test_spectral``: 35,657 op figures in one A/A run, each asking each pair's basis and
    each round's op again)."""

    def __init__(
        self,
        base: Sequence[RoundFigures],
        head: Sequence[RoundFigures],
        limit: float,
        start: int,
    ) -> None:
        self.start = start
        self.rows: list[tuple[int, Mapping[str, OpFigures], Mapping[str, OpFigures], bool]] = []
        for k, (b, h) in enumerate(zip(base, head, strict=False)):
            if k < start:
                continue
            basis = paired.pair_basis(
                b.wall_time_ns, b.wait_ns or 0, h.wall_time_ns, h.wait_ns or 0, limit
            )
            self.rows.append((k, _plain(b.ops), _plain(h.ops), basis == "rerun"))

    def pairs(self, key: str) -> Pairs:
        b_ns, h_ns, index, dropped = [], [], [], 0
        for k, bops, hops, rerun in self.rows:
            bo, ho = bops.get(key), hops.get(key)
            # A round whose op has no self time left (all of it a wait) has no ratio.
            if bo is None or ho is None or bo.self_cpu_ns <= 0 or ho.self_cpu_ns <= 0:
                continue
            if rerun:
                dropped += 1
                continue
            index.append(k)
            b_ns.append(bo.self_cpu_ns)
            h_ns.append(ho.self_cpu_ns)
        return Pairs(tuple(b_ns), tuple(h_ns), 0, dropped, tuple(index), self.start)


def _plain(ops: Mapping[str, OpFigures]) -> Mapping[str, OpFigures]:
    """``ops`` with a dict's own ``get`` (a ``SummedOps``' made dict)."""
    return ops.made() if isinstance(ops, SummedOps) else ops


@dataclass(frozen=True)
class JudgedFigure:
    """One figure's paired estimate and decision."""

    key: str
    pairs: Pairs
    estimate: paired.Estimate
    decision: paired.Verdict
    """``pass``, ``regressed``, ``improved`` or ``undecided``."""


class ABJudge:
    """The run's paired judgement: its noise models and its false-discovery control.

    ``tests``: how many tests the run compares (the online control's horizon)."""

    def __init__(
        self,
        tests: int,
        q: float,
        max_pairs: int,
        min_pairs: int = 1,
        heavy: float | None = HEAVY,
        processes: int = 1,
    ) -> None:
        self.heavy = heavy
        """:data:`HEAVY`; None: every test may take the most pairs, whatever they cost
        (``bench/ab_replay.py`` compares them)."""
        self.processes = processes
        """Partner processes a side (``--opprof-ab-processes``): a regression (or an
        improvement) must be reached on each one's pairs alone too (:meth:`figures`)."""
        self.firsts: list[int] = []
        """The first pairs' work (:func:`_pair_costs`) of the settled tests whose time
        is judged (at or above the time floor)."""
        self.test_noise = paired.NoiseModel()
        self.op_noise = paired.NoiseModel()
        self.test_offset = paired.OffsetModel()
        self.op_offset = paired.OffsetModel()
        self.fdr = paired.OnlineFdr(q, max(tests, 1))
        self.max_pairs = max_pairs
        self.min_pairs = min_pairs
        """Pairs every test runs, whatever its figures (``--opprof-ab-min-pairs``)."""
        self.extra_budget = (EXTRA_PAIRS_PER_TEST + min_pairs - 1) * max(tests, 1) + max_pairs
        self.extra_pairs = 0
        """Pairs run beyond each test's first, against :attr:`extra_budget`."""
        self.test_extra = 0
        """Extra pairs the test now running has taken."""
        self.stopped: str | None = None
        """Why the test now running stopped taking pairs while a figure was undecided."""
        self.pairs_run = 0
        self.pairs_on_work = 0
        self.pairs_dropped = 0
        self.base_ns = 0
        """Time the head spent on the base side's rounds: each round, its summary and its
        hand-off, as the head waited for them."""
        self.head_ns = 0
        """Time the head spent on its own measured rounds and their summaries."""

    def horizon(self, tests: int) -> None:
        """The run's number of tests, once collected (before any is judged)."""
        self.fdr = paired.OnlineFdr(self.fdr.q, max(tests, 1))
        self.extra_budget = (EXTRA_PAIRS_PER_TEST + self.min_pairs - 1) * max(
            tests, 1
        ) + self.max_pairs

    def figures(
        self,
        base: Sequence[RoundFigures],
        head: Sequence[RoundFigures],
        tol: Tolerances,
        level: float,
    ) -> list[JudgedFigure]:
        """The test's time and each op time at or above the floor, judged together at
        ``level`` (one test is one hypothesis of the run), each at the level Hochberg's
        step-up gives it (``paired.hochberg_level``).  Replayed on 40 recorded runs of the
        generated suite (``bench/ab_replay.py``, tolerance 5%, two processes a side,
        quiet, loaded, bursty and ``-n 2``), it caught 83 of 131 kernels made 10% slower
        where Bonferroni's even split caught 79, decided 1,151 of 1,419 unchanged times
        against 1,144, and failed the same unchanged tests (none in 31 A/A runs)."""
        limit = wait_limit(tol)
        start = settled_from(base, head, self.processes)
        if start is None:
            return []
        wall = test_pairs(base, head, limit, start)
        candidates: list[tuple[str, Pairs, paired.NoiseModel, paired.OffsetModel]] = []
        if _at_floor(wall, tol):
            candidates.append(("", wall, self.test_noise, self.test_offset))
        first = slice(start, start + 1)
        keys = set().union(*(r.ops for r in base[first])) & set().union(
            *(r.ops for r in head[first])
        )
        table = _OpTable(base, head, limit, start)
        for key in sorted(keys - {OTHER_OPS}):
            pairs = table.pairs(key)
            if _at_floor(pairs, tol):
                candidates.append((key, pairs, self.op_noise, self.op_offset))
        estimates = []
        for key, pairs, noise, offset in candidates:
            sigma, df = noise.sigma(pairs.scale_ns)
            estimate = paired.estimate(
                pairs.log_ratios, sigma, df, CONFIDENCE, offset=offset.offset()
            )
            estimates.append((key, pairs, sigma, estimate))
        each = paired.hochberg_level(
            [paired.needed_level(e, tol.time) for *_, e in estimates], level
        )
        out = []
        for key, pairs, sigma, estimate in estimates:
            decision = paired.decide(estimate, tol.time, each)
            if decision in ("regressed", "improved") and self.processes > 1:
                # Every process's pairs alone must say it too: a process that runs the
                # same code slower (docs/ab.md, "Two processes a side") moves only its own.
                if not all(
                    paired.agrees(
                        pairs.in_process(process, self.processes), decision, tol.time, sigma
                    )
                    for process in range(self.processes)
                ):
                    decision = "undecided"
            out.append(JudgedFigure(key, pairs, estimate, decision))
        return out

    def allowance(self) -> int:
        """The extra pairs the test now running may take: ``FAIR_SHARE``
        times its share of the budget left when it started, at least one."""
        left = max(self.extra_budget - self.extra_pairs + self.test_extra, 0)
        tests_left = max(self.fdr.m - self.fdr.tested, 1)
        return max(1, math.ceil(FAIR_SHARE * left / tests_left))

    def _too_heavy(self, base: Sequence[RoundFigures], head: Sequence[RoundFigures]) -> bool:
        """Whether another pair would take the test beyond :data:`HEAVY`'s time; its first
        extra pair never does."""
        cost = _pair_costs(base, head)
        if self.heavy is None or len(cost) < 2:
            return False
        typical = statistics.median([*self.firsts, cost[0]])
        limit = (self.max_pairs - 1) * self.heavy * typical
        return sum(cost[1:]) + statistics.median(cost) > limit

    def another_pair(self) -> None:
        """Account one more pair of the test now running, beyond its first (also the
        second pair ``ABSession.more_pairs`` runs to confirm an exact figure)."""
        self.extra_pairs += 1
        self.test_extra += 1
        self.stopped = None

    def more_pairs(
        self, base: Sequence[RoundFigures], head: Sequence[RoundFigures], tol: Tolerances
    ) -> bool:
        """Whether the test runs another pair: while a figure is undecided and leans slower
        (``LEAN``), within ``--opprof-ab-max-pairs`` and the test's :meth:`allowance`.  A
        test above the time floor whose pairs all waited too long runs another too."""
        judged = self.figures(base, head, tol, self.fdr.level())
        leaning = any(_leans_slower(j, tol.time) or (j.key == "" and _may_pass(j)) for j in judged)
        # A test whose work varied may be showing a lazy set-up in each process's first
        # round: worth the pairs to see only when its time reaches the floor.
        settling = may_settle(base, head, self.processes) and _above_floor(base, head, tol)
        waited = not test_pairs(base, head, wait_limit(tol)).base_ns and _above_floor(
            base, head, tol
        )
        undecided = any(j.decision == "undecided" for j in judged)
        pairs = min(len(base), len(head))
        self.stopped = None
        if pairs < self.min_pairs:
            self.another_pair()
            return True
        if not (leaning or waited or settling):
            own_undecided = any(j.key == "" and j.decision == "undecided" for j in judged)
            after = f" after {PASS_PAIRS} pairs" if own_undecided else ""
            self.stopped = (
                f"leaning no slower{after}: more pairs go to figures that may have regressed"
            )
        elif pairs >= self.max_pairs:
            self.stopped = f"the most pairs a test runs ({self.max_pairs}, --opprof-ab-max-pairs)"
        elif pairs - 1 >= self.allowance():
            self.stopped = f"its share of the run's budget of {self.extra_budget} extra pairs"
        elif self._too_heavy(base, head):
            self.stopped = (
                f"more pairs would take longer than {self.max_pairs - 1} of a test "
                f"{self.heavy:g} times the run's typical one"
            )
        else:
            self.another_pair()
            return True
        if not undecided:
            self.stopped = None
        return False

    def settle(
        self, base: Sequence[RoundFigures], head: Sequence[RoundFigures], tol: Tolerances
    ) -> list[JudgedFigure]:
        """The test's final figures: consumes its level of the run's control, and adds its
        pairs to the noise models and their time to the run's."""
        judged = self.figures(base, head, tol, self.fdr.level())
        cost = _pair_costs(base, head)
        if cost and any(j.key == "" for j in judged):  # a test whose time is judged
            self.firsts.append(cost[0])
        self.fdr.record(any(j.decision in ("regressed", "improved") for j in judged))
        self.test_extra = 0
        # The offsets the estimates were made with (figures() above), read before any of
        # this test's figures moves them: each estimate's interval less its own offset.
        test_offset, op_offset = self.test_offset.offset(), self.op_offset.offset()
        for j in judged:
            (self.test_noise if j.key == "" else self.op_noise).add(
                j.pairs.scale_ns, j.pairs.log_ratios
            )
            within = j.estimate.se_log**2 - (test_offset if j.key == "" else op_offset) ** 2
            (self.test_offset if j.key == "" else self.op_offset).add(
                j.estimate.mean_log, max(within, 0.0)
            )
        wall = test_pairs(base, head, wait_limit(tol))
        self.pairs_run += min(len(base), len(head))
        self.pairs_on_work += wall.on_work
        self.pairs_dropped += wall.dropped
        return judged

    def count_shipped(self, pairs: Sequence[int]) -> None:
        """Account a pytest-xdist worker's pair counts of one test (run, on work time, left
        out, ns on the base side, ns on the head side) in this controller's totals."""
        run, on_work, dropped, base_ns, head_ns = (int(n) for n in pairs)
        self.pairs_run += run
        self.pairs_on_work += on_work
        self.pairs_dropped += dropped
        self.base_ns += base_ns
        self.head_ns += head_ns

    def unjudged_why(
        self, base: Sequence[RoundFigures], head: Sequence[RoundFigures], tol: Tolerances
    ) -> str:
        """Why a test's own time has no paired verdict."""
        if settled_from(base, head, self.processes) is None:
            if not may_settle(base, head, self.processes):
                return (
                    "A/B: not judged: the test's FLOPs or op calls differ between rounds of "
                    "the same side, beyond each process's first (its data is drawn anew each "
                    "call), so no two rounds did the same work"
                )
            if _above_floor(base, head, tol):
                return (
                    "A/B: not judged: each process's first round of the test did other work "
                    "than its later rounds (a lazy set-up), and too few later rounds ran to "
                    f"judge on ({self.stopped or 'its pairs ended there'})"
                )
        wall = test_pairs(base, head, wait_limit(tol))
        if (wall.base_ns and not _at_floor(wall, tol)) or not _above_floor(base, head, tol):
            # The partners' rounds, not the pytest process's own, which can lie above the
            # floor when theirs lie under it.
            base_ns, head_ns, _ = partner_times(base, head)
            return (
                f"A/B: under the {tol.min_time_ns / 1e6:g} ms time floor (--opprof-min-time) "
                f"in the partners' rounds: {base_ns / 1e6:.3g} ms on the base side, "
                f"{head_ns / 1e6:.3g} ms on the head's"
            )
        pairs = min(len(base), len(head))
        return (
            f"A/B: not judged: in all {pairs} pair(s) a side has no work time to judge "
            "(no time measured, or it waited for a CPU all along)"
        )


def _at_floor(pairs: Pairs, tol: Tolerances) -> bool:
    """Whether a figure's pairs reach the time floor on either side (their medians)."""
    return bool(pairs.base_ns) and max(pairs.scale_ns, _median(pairs.head_ns)) >= tol.min_time_ns


def _work_ns(r: RoundFigures) -> int:
    """A round's work time: its wall time less its wait for a CPU."""
    return r.wall_time_ns - (r.wait_ns or 0)


def _pair_costs(base: Sequence[RoundFigures], head: Sequence[RoundFigures]) -> list[int]:
    """Each pair's work: both rounds' wall time less their waits for a CPU, so a test is
    heavy for what it runs, not for the moment the machine was busy."""
    return [_work_ns(b) + _work_ns(h) for b, h in zip(base, head, strict=False)]


def settled_from(
    base: Sequence[RoundFigures], head: Sequence[RoundFigures], processes: int
) -> int | None:
    """The first pair whose rounds the test's time is judged on: 0 when each side's rounds
    all did the same work; ``processes`` when only each process's first round of the test
    did other work (a lazy set-up a process's first call runs) and :data:`SETTLED_PAIRS`
    rounds after those agree; None when the work varies otherwise (data drawn anew)."""
    if not (work_varies(base) or work_varies(head)):
        return 0
    if min(len(base), len(head)) >= processes + SETTLED_PAIRS and not _varies_after(
        base, head, processes
    ):
        return processes
    return None


def may_settle(base: Sequence[RoundFigures], head: Sequence[RoundFigures], processes: int) -> bool:
    """Whether the test's work varies but may yet show it is only each process's first
    round: fewer than :data:`SETTLED_PAIRS` pairs after those, agreeing so far (where
    :func:`settled_from` is None for want of pairs)."""
    return (
        min(len(base), len(head)) < processes + SETTLED_PAIRS
        and (work_varies(base) or work_varies(head))
        and not _varies_after(base, head, processes)
    )


def _varies_after(
    base: Sequence[RoundFigures], head: Sequence[RoundFigures], processes: int
) -> bool:
    return work_varies(base[processes:]) or work_varies(head[processes:])


def work_varies(rounds: Sequence[RoundFigures]) -> bool:
    """Whether the rounds of one side did different work, as their exact figures count
    it (FLOPs, op calls): a test that draws its sizes from an unseeded generator.  Its
    pairs then compare different work, and one pair where the head drew the larger input
    twice read +64% [+52%, +78%] (``tests/test_ab.py``)."""
    return len({r.work for r in rounds}) > 1


def _above_floor(
    base: Sequence[RoundFigures], head: Sequence[RoundFigures], tol: Tolerances
) -> bool:
    """Whether the test's work reaches the time floor on either side (its least-waited
    round's wall less wait)."""
    return any(min(_work_ns(r) for r in side) >= tol.min_time_ns for side in (base, head) if side)


def _leans_slower(judged: JudgedFigure, tolerance: float) -> bool:
    """Whether an undecided figure may yet be failed: slower by ``LEAN`` of the tolerance,
    and for an op (many per test, each noisier than the test) its interval above zero or
    its change at least ``OP_REACH`` times the tolerance."""
    e = judged.estimate
    return (
        judged.decision == "undecided"
        and e.change >= LEAN * tolerance
        and (judged.key == "" or e.low > 0 or e.change >= OP_REACH * tolerance)
    )


def _may_pass(judged: JudgedFigure) -> bool:
    """Whether the test's own time, undecided, runs another pair to show it passes: one
    or two pairs that cannot yet tell a wild one (``paired.wild_pairs``), or fewer than
    ``PASS_PAIRS``."""
    return judged.decision == "undecided" and (
        judged.estimate.unsettled or judged.estimate.pairs < PASS_PAIRS
    )


def _median(values: Sequence[int]) -> float:
    ordered = sorted(values)
    return float(ordered[len(ordered) // 2]) if ordered else 0.0


def _status(decision: str) -> RowStatus:
    return "not judged" if decision == "undecided" else decision  # type: ignore[return-value]


def time_row(judged: JudgedFigure, tol: Tolerances) -> MetricRow:
    """The test's time row: the paired change, its interval, how many pairs."""
    e, pairs = paired.shown_estimate(judged.estimate, judged.decision), judged.pairs
    metric = WORK_TIME if pairs.on_work > len(pairs.base_ns) / 2 else "wall time"
    note = "A/B: " + paired.describe(e, judged.decision)
    if pairs.on_work:
        note += f"; {pairs.on_work} of {len(pairs.base_ns)} pairs on work time"
    if pairs.first:
        note += (
            f"; the first {pairs.first} pair(s) left out: each process's first round did "
            "other work (a lazy set-up)"
        )
    return MetricRow(
        metric,
        "ns",
        _median(pairs.base_ns),
        _median(pairs.head_ns),
        e.change,
        tol.time,
        _status(judged.decision),
        note,
    )


def op_reason(judged: JudgedFigure, test_ns: float) -> OpReason:
    """An op's paired change as a reason (its interval in the kind's words)."""
    e, pairs = paired.shown_estimate(judged.estimate, judged.decision), judged.pairs
    base, now = _median(pairs.base_ns), _median(pairs.head_ns)
    return OpReason(
        op=judged.key,
        kind="slower" if e.change > 0 else "faster",
        unit="ns",
        baseline=base,
        now=now,
        change=e.change,
        status=_status(judged.decision),
        impact=abs(now - base) / test_ns if test_ns else 0.0,
        note="A/B: " + paired.describe(e, judged.decision),
    )


def partner_times(
    base: Sequence[RoundFigures], head: Sequence[RoundFigures]
) -> tuple[float, float, bool]:
    """The partners' median round times, waits out (what the time floor reads), base and
    head, and whether any of their rounds waited for a CPU."""
    waited = any(_work_ns(r) != r.wall_time_ns for r in (*base, *head))
    return _median([_work_ns(r) for r in base]), _median([_work_ns(r) for r in head]), waited


def replace_time(
    rows: Sequence[MetricRow],
    reasons: Sequence[OpReason],
    judged: Sequence[JudgedFigure],
    tol: Tolerances,
    unjudged_why: str = "",
    unjudged_times: tuple[float, float, bool] | None = None,
) -> tuple[list[MetricRow], list[OpReason]]:
    """The exact verdict's rows and reasons with its (unjudged) times replaced by the
    paired ones: the test's time row, and a reason for each op time judged.  A test time
    without a verdict shows ``unjudged_times`` (:func:`partner_times`) where given: the
    rounds' medians with their waits in read a 0.7 ms test beside CPU-bound processes as
    4.3 ms on one side, under the floor its note names."""
    by_key = {j.key: j for j in judged}
    out_rows = []
    for row in rows:
        if row.metric == "wall time" and "" in by_key:
            out_rows.append(time_row(by_key[""], tol))
        elif row.metric == "wall time":
            if unjudged_times is not None and min(unjudged_times[:2]) > 0:
                base_ns, head_ns, waited = unjudged_times
                row = dataclasses.replace(
                    row,
                    metric=WORK_TIME if waited else row.metric,
                    baseline=base_ns,
                    now=head_ns,
                    change=head_ns / base_ns - 1,
                )
            out_rows.append(dataclasses.replace(row, tolerance=tol.time, note=unjudged_why))
        else:
            out_rows.append(row)
    test_ns = next((r.now or 0.0 for r in out_rows if r.metric in ("wall time", WORK_TIME)), 0.0)
    out_reasons = [r for r in reasons if r.unit != "ns"]
    op_judged = [j for j in judged if j.key]
    # Regressed first, then by the time each moved: what failed the test is named first.
    op_judged.sort(
        key=lambda j: (
            j.decision != "regressed",
            -abs(_median(j.pairs.head_ns) - _median(j.pairs.base_ns)),
        )
    )
    for j in op_judged:
        if j.decision != "pass" or abs(j.estimate.change) >= tol.time:
            out_reasons.append(op_reason(j, float(test_ns)))
    return out_rows, out_reasons
