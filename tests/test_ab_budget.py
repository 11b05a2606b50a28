"""How an A/B run spends its pairs: the plugin's judge driven as ``ab/head.py`` drives it,
on simulated rounds (real ``RoundFigures``, times drawn around known changes)."""

from __future__ import annotations

import math
import random

import pytest

from pytest_opprof.ab.judge import PASS_PAIRS, ABJudge, partner_times, replace_time
from pytest_opprof.gate.round_figures import OpFigures, RoundFigures
from pytest_opprof.gate.tolerance import Tolerances
from pytest_opprof.gate.verdict import MetricRow

TOL = Tolerances(time=0.03, max_wait_share=None)


def _round(rng: random.Random, scale: float, factor: float, sigma: float) -> RoundFigures:
    kernel = scale * 0.6 * factor * math.exp(rng.gauss(0, sigma / math.sqrt(2)))
    other = scale * 0.4 * math.exp(rng.gauss(0, sigma / math.sqrt(2)))
    ops = {
        "kernel": OpFigures(count=1, self_cpu_ns=int(kernel)),
        "numpy.add": OpFigures(count=1, self_cpu_ns=int(other)),
    }
    return RoundFigures(wall_time_ns=int(kernel + other), cpu_time_ns=1, ops=ops, wait_ns=0)


def _test(
    judge: ABJudge, rng: random.Random, slowdown: float, sigma: float
) -> tuple[list[str], int]:
    base: list[RoundFigures] = []
    head: list[RoundFigures] = []
    scale = 10 ** rng.uniform(6.3, 7.0)

    def pair() -> None:
        base.append(_round(rng, scale, 1.0, sigma))
        head.append(_round(rng, scale, 1.0 + slowdown, sigma))

    pair()
    while judge.more_pairs(base, head, TOL):
        pair()
    return [j.decision for j in judge.settle(base, head, TOL)], len(base)


def test_the_last_tests_of_a_run_keep_the_pairs_to_catch_their_slowdowns() -> None:
    """Forty noisy unchanged tests first must not spend the pairs of the slowed tests after
    them (first come, first served, the last tests got one pair each: never failed)."""
    caught = 0
    for seed in range(3):
        rng = random.Random(seed)
        judge = ABJudge(60, 0.05, 12)
        for _ in range(40):
            _test(judge, rng, 0.0, 0.035)
        for _ in range(20):
            decisions, pairs = _test(judge, rng, 0.15, 0.035)
            assert pairs >= 2
            caught += "regressed" in decisions
    assert caught >= 50, caught  # of 60


def test_an_unchanged_test_stops_early_and_says_why() -> None:
    rng = random.Random(7)
    judge = ABJudge(10, 0.05, 12)
    stops = []
    for _ in range(10):
        decisions, pairs = _test(judge, rng, -0.02, 0.03)
        assert "regressed" not in decisions
        if "undecided" in decisions:
            stops.append((pairs, judge.stopped))
    # Leaning faster, an undecided test runs at most PASS_PAIRS pairs to show it passes
    # (an op left undecided asks for none), then gives its pairs to tests that may have
    # regressed.
    assert stops and all(
        why is not None and why.startswith("leaning no slower") for _, why in stops
    ), stops
    assert all(p <= PASS_PAIRS for p, _ in stops), stops


def test_min_pairs_hold_every_test_to_its_pairs() -> None:
    rng = random.Random(3)
    judge = ABJudge(5, 0.05, 12, min_pairs=4)
    for _ in range(5):
        _, pairs = _test(judge, rng, 0.0, 0.001)
        assert pairs >= 4


def test_max_pairs_stop_a_test_and_say_so() -> None:
    rng = random.Random(5)
    judge = ABJudge(1, 0.05, 3)
    decisions, pairs = _test(judge, rng, 0.04, 0.05)  # leaning slower, never decided in 3
    assert pairs == 3
    if "undecided" in decisions:
        assert judge.stopped is not None and "--opprof-ab-max-pairs" in judge.stopped


def test_shipped_pair_counts_add_up() -> None:
    judge = ABJudge(2, 0.05, 12)
    judge.count_shipped([3, 1, 0, 7_000, 5_000])
    judge.count_shipped((2, 0, 1, 3_000, 4_000))
    assert (judge.pairs_run, judge.pairs_on_work, judge.pairs_dropped) == (5, 1, 1)
    assert (judge.base_ns, judge.head_ns) == (10_000, 9_000)


def _offset_run(offset: float, tests: int, seed: int) -> tuple[int, int]:
    """A/A with a per-test offset between the processes (every pair of a test shares it):
    (90% intervals of the test's time that miss zero, tests)."""
    rng = random.Random(seed)
    judge = ABJudge(tests, 0.05, 8, min_pairs=8)
    missed = 0
    for _ in range(tests):
        shift = math.exp(rng.gauss(0, offset))
        scale = 10 ** rng.uniform(6.3, 7.0)
        base = [_round(rng, scale, 1.0, 0.02) for _ in range(8)]
        head = [_round(rng, scale, shift, 0.02) for _ in range(8)]
        for n in range(1, 8):
            judge.more_pairs(base[:n], head[:n], TOL)
        time = next(j for j in judge.settle(base, head, TOL) if j.key == "")
        missed += time.estimate.low > 0 or time.estimate.high < 0
    return missed, tests


def test_intervals_stay_honest_when_the_processes_differ_per_test() -> None:
    """Pairs share a process's offset: without it in the interval, A/A intervals missed
    zero in a fifth to a quarter of tests (bench/ab_layout.py); with the run's measured
    offset, about the nominal 10%."""
    missed = tests = 0
    for seed in range(4):
        m, t = _offset_run(0.02, 60, seed)
        missed += m
        tests += t
    assert missed / tests < 0.15, (missed, tests)


def test_the_offset_is_measured_robustly_and_widens_every_interval() -> None:
    from pytest_opprof.ab import paired

    rng = random.Random(11)
    model = paired.OffsetModel()
    assert model.offset() == paired.OFFSET_PRIOR
    for i in range(200):
        real = 0.10 if i % 3 == 0 else 0.0  # a third of the figures really changed
        model.add(real + rng.gauss(0, 0.02) + rng.gauss(0, 0.005), 0.005**2)
    assert 0.014 < model.offset() < 0.035, model.offset()  # 0.032 read from a third changed
    tight = paired.estimate([0.0] * 20, 0.001, paired.MAX_PRIOR_DF, offset=0.02)
    assert tight.high > 0.02 * 1.6 and tight.low < -0.02 * 1.6, tight


def test_the_offset_keeps_its_prior_until_enough_figures_settled() -> None:
    """The lower quartile of one or two figures is no quartile: one figure 2.7% off zero
    once read an 8% offset and widened the intervals of the tests after it."""
    from pytest_opprof.ab import paired

    model = paired.OffsetModel()
    model.add(0.027, 0.022**2)
    model.add(-0.081, 0.059**2)
    assert model.offset() == paired.OFFSET_PRIOR
    for i in range(paired.OFFSET_MIN_FIGURES):
        model.add(0.001 * (i % 3 - 1), 0.01**2)
    assert model.offset() < paired.OFFSET_PRIOR, model.offset()


def test_the_offset_weighs_each_figure_by_its_own_pairs() -> None:
    """Figures of one pair scatter with their pairs' noise, not with the offset: a run of
    one-pair figures at 4% noise and no offset must not read their scatter as one."""
    from pytest_opprof.ab import paired

    rng = random.Random(5)
    model = paired.OffsetModel()
    for _ in range(300):
        model.add(rng.gauss(0, 0.04), 0.04**2)
    assert model.offset() < 0.015, model.offset()
    offset_model = paired.OffsetModel()
    for _ in range(300):
        offset_model.add(rng.gauss(0, 0.02) + rng.gauss(0, 0.005), 0.005**2)
    assert 0.014 < offset_model.offset() < 0.03, offset_model.offset()


def test_an_op_with_no_self_time_left_on_a_side_is_not_judged() -> None:
    """On a busy machine an op's wait can take all of its self time in a round (found in
    numpy's test_linalg beside other work): such pairs have no ratio, and a figure of
    only those is no candidate, never an estimate of no pairs."""
    judge = ABJudge(1, 0.05, 12)
    busy = OpFigures(count=1, self_cpu_ns=0)
    ran = OpFigures(count=1, self_cpu_ns=3_000_000)

    def rnd(op: OpFigures) -> RoundFigures:
        return RoundFigures(
            wall_time_ns=20_000_000, cpu_time_ns=1, ops={"numpy.linalg.lstsq": op}, wait_ns=0
        )

    base, head = [rnd(busy), rnd(ran)], [rnd(ran), rnd(busy)]
    judge.more_pairs(base, head, TOL)
    keys = [j.key for j in judge.settle(base, head, TOL)]
    assert keys == [""]
    base, head = [rnd(busy), rnd(ran), rnd(ran)], [rnd(ran), rnd(busy), rnd(ran)]
    judged = {j.key: j for j in ABJudge(1, 0.05, 12).settle(base, head, TOL)}
    assert judged["numpy.linalg.lstsq"].estimate.pairs == 1


def _drawn(rng: random.Random, scale: float, slowdown: float) -> tuple[list[RoundFigures], ...]:
    """A test's twelve pairs, drawn before the judge sees any (as ``bench/ab_replay.py``)."""
    base = [_round(rng, scale, 1.0, 0.035) for _ in range(12)]
    head = [_round(rng, scale, 1.0 + slowdown, 0.035) for _ in range(12)]
    return base, head


def _drive(judge: ABJudge, tests: list[tuple[list[RoundFigures], ...]]) -> list[int]:
    """Each test's pairs as ``ab/head.py`` runs them: one, then more while the judge asks."""
    used = []
    for base, head in tests:
        n = 1
        while n < len(base) and judge.more_pairs(base[:n], head[:n], TOL):
            n += 1
        judge.settle(base[:n], head[:n], TOL)
        used.append(n)
    return used


def test_a_test_far_heavier_than_the_rest_takes_few_pairs() -> None:
    """numpy's op-dense tests, a thousand times most of their file, took 12 pairs each and
    80% of an A/A run.  A test 300 times the others that leans slower gets its first
    extra pair and no more; unheld, it took the whole test's maximum."""
    rng = random.Random(2)
    tests = [
        _drawn(rng, 300e6 if i % 20 == 10 else 1e6, 0.04 if i % 20 == 10 else 0.0)
        for i in range(60)
    ]
    in_pairs = _drive(ABJudge(60, 0.05, 12, heavy=None), tests)
    in_time = _drive(ABJudge(60, 0.05, 12), tests)
    heavy = range(10, 60, 20)
    assert max(in_pairs[i] for i in heavy) > 2, in_pairs
    assert all(in_time[i] <= 2 for i in heavy), [in_time[i] for i in heavy]


def test_tests_within_a_few_times_each_other_are_not_held_back() -> None:
    """A file of 1-4 ms tests spends its pairs as if every pair cost the same."""
    rng = random.Random(4)
    tests = [_drawn(rng, rng.uniform(1e6, 4e6), 0.06 if i % 3 == 0 else 0.0) for i in range(60)]
    unheld = _drive(ABJudge(60, 0.05, 12, heavy=None), tests)
    assert _drive(ABJudge(60, 0.05, 12), tests) == unheld


def test_a_time_under_the_floor_says_what_the_partners_measured() -> None:
    """The report shows the pytest process's own round, which can lie above the floor when
    the partners' rounds, the ones judged, lie under it ("1.27 ms ... under the 1 ms time
    floor" in scipy.signal's test_spectral): the note says what they measured."""
    judge = ABJudge(1, 0.05, 12)

    def rnd(ns: int) -> RoundFigures:
        return RoundFigures(wall_time_ns=ns, cpu_time_ns=ns, ops={}, wait_ns=0)

    base = [rnd(900_000), rnd(910_000), rnd(920_000)]
    head = [rnd(940_000), rnd(950_000), rnd(960_000)]
    assert not [j for j in judge.figures(base, head, TOL, 0.05) if j.key == ""]
    why = judge.unjudged_why(base, head, TOL)
    assert why.startswith("A/B: under the 1 ms time floor"), why
    assert "0.91 ms on the base side, 0.95 ms on the head's" in why, why


def test_an_unjudged_time_row_shows_what_the_partners_measured_waits_out() -> None:
    """Beside CPU-bound processes a round's wall time holds its waits: the row of a time
    under the floor shows the partners' work, as its note does, not 4.3 ms against 0.7."""

    def rnd(wall: int, wait: int) -> RoundFigures:
        return RoundFigures(wall_time_ns=wall, cpu_time_ns=wall - wait, ops={}, wait_ns=wait)

    base, head = [rnd(4_300_000, 3_560_000)], [rnd(700_000, 0)]
    judge = ABJudge(1, 0.05, 12)
    shown = MetricRow("wall time", "ns", 4_300_000, 700_000, -0.837, None, "info", "")
    why = judge.unjudged_why(base, head, TOL)
    (row,), _ = replace_time([shown], [], [], TOL, why, partner_times(base, head))
    assert (row.metric, row.baseline, row.now) == ("work time", 740_000, 700_000), row
    assert row.change == pytest.approx(700 / 740 - 1) and row.note == why
    assert "0.74 ms on the base side, 0.7 ms on the head's" in why, why
    # No wait: the row keeps its name.
    quiet = [rnd(740_000, 0)]
    (row,), _ = replace_time([shown], [], [], TOL, why, partner_times(quiet, head))
    assert (row.metric, row.baseline) == ("wall time", 740_000), row


def _offset_test(
    judge: ABJudge, rng: random.Random, slow: tuple[float, float], sigma: float
) -> tuple[list[str], int]:
    """A test whose head runs ``slow[k % 2]`` slower in pair ``k``: process 0 and 1 of
    the head's side, as two partners a side take the pairs (``ab/replicas.py``)."""
    base: list[RoundFigures] = []
    head: list[RoundFigures] = []
    scale = 10 ** rng.uniform(6.3, 7.0)

    def pair() -> None:
        base.append(_round(rng, scale, 1.0, sigma))
        head.append(_round(rng, scale, 1.0 + slow[len(head) % 2], sigma))

    pair()
    while judge.more_pairs(base, head, TOL):
        pair()
    return [j.decision for j in judge.settle(base, head, TOL)], len(base)


def test_one_slow_process_fails_nothing_where_a_real_slowdown_still_fails() -> None:
    """Unchanged code that a head's process runs 20% slower: with one process a side,
    every pair shares it and the test fails; with two, the other process's pairs (0%)
    disagree, and none fails.  A real +15% moves both processes' pairs and fails as
    often either way."""
    for processes, offset in ((1, (0.2, 0.2)), (2, (0.2, 0.0))):
        rng = random.Random(11)
        judge = ABJudge(40, 0.05, 12, processes=processes)
        failed = sum("regressed" in _offset_test(judge, rng, offset, 0.02)[0] for _ in range(20))
        assert failed == (20 if processes == 1 else 0), (processes, failed)
        judge = ABJudge(40, 0.05, 12, processes=processes)  # its own run's budget
        caught = sum(
            "regressed" in _offset_test(judge, rng, (0.15, 0.15), 0.02)[0] for _ in range(20)
        )
        assert caught >= 18, (processes, caught)


def test_a_time_fails_only_after_two_pairs_in_each_process() -> None:
    """One pair of a process can read +50% where a neighbour slowed its head round with no
    wait to see: a process's pairs agree with a verdict only once it has run two of them
    (``paired.AGREE_MIN``).  Pairs 50% slower in both processes: undecided after one pair
    in one of them (three pairs: with one pair a process enough, the test's time and its
    kernel already failed there), regressed after two each."""
    rng = random.Random(5)
    judge = ABJudge(1, 0.05, 12, processes=2)
    base = [_round(rng, 3e6, 1.0, 0.01) for _ in range(4)]
    head = [_round(rng, 3e6, 1.5, 0.01) for _ in range(4)]
    three = {j.key: j.decision for j in judge.figures(base[:3], head[:3], TOL, 0.05)}
    assert set(three.values()) == {"undecided"}, three
    four = {j.key: j.decision for j in judge.figures(base, head, TOL, 0.05)}
    assert four[""] == four["kernel"] == "regressed", four


def _lazy_test(
    judge: ABJudge, rng: random.Random, slowdown: float, first_calls: int
) -> tuple[dict[str, str], int, str]:
    """Pairs of a test whose first round in each of the judge's processes runs an extra
    op call (a lazy set-up) when ``first_calls``; from then on the same work, or work drawn
    anew each round when ``first_calls`` is negative."""
    base: list[RoundFigures] = []
    head: list[RoundFigures] = []
    scale = 4e6

    def side(factor: float, k: int) -> RoundFigures:
        r = _round(rng, scale, factor, 0.01)
        extra = first_calls if k < judge.processes else 0
        if first_calls < 0:
            extra = rng.randrange(1, 50)
        ops = dict(r.ops)
        if extra:
            ops["numpy.unique"] = OpFigures(count=extra, self_cpu_ns=int(scale * 3))
        return RoundFigures(
            wall_time_ns=r.wall_time_ns + (int(scale * 3) if extra else 0),
            cpu_time_ns=1,
            ops=ops,
            wait_ns=0,
        )

    def pair() -> None:
        base.append(side(1.0, len(base)))
        head.append(side(1.0 + slowdown, len(head)))

    pair()
    while judge.more_pairs(base, head, TOL):
        pair()
    decisions = {j.key: j.decision for j in judge.settle(base, head, TOL)}
    return decisions, len(base), judge.unjudged_why(base, head, TOL)


@pytest.mark.parametrize("processes", [1, 2])
def test_a_lazy_first_round_in_each_process_is_left_out_and_the_rest_judged(
    processes: int,
) -> None:
    """Each process's first round of the test four times slower with an op call more:
    judged on the pairs after those, a +20% change caught and an unchanged test passed,
    where both had no time verdict (their rounds "did different work")."""
    rng = random.Random(5)
    judge = ABJudge(4, 0.05, 12, processes=processes)
    decisions, pairs, _ = _lazy_test(judge, rng, 0.0, 1)
    assert decisions.get("") == "pass", decisions
    assert pairs >= processes + 2
    decisions, _, _ = _lazy_test(judge, rng, 0.20, 1)
    assert decisions.get("") == "regressed", decisions
    assert "numpy.unique" not in decisions  # run only in the rounds left out


def test_work_drawn_anew_each_round_is_still_not_judged() -> None:
    rng = random.Random(6)
    judge = ABJudge(2, 0.05, 12, processes=2)
    decisions, pairs, why = _lazy_test(judge, rng, 0.0, -1)
    assert decisions == {}, decisions
    assert pairs <= 4  # two pairs after each process's first show it varies
    assert "beyond each process's first (its data is drawn anew each call)" in why, why
