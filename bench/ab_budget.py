"""How an A/B run spends its pairs: simulated runs through the plugin's own judge.

Each simulated test has a time made of a ``kernel`` op (60%) and another op; a share of
the tests has its kernel made ``--slowdown`` slower.  A pair's base and head times scatter
lognormally with the test's own sigma (spread by a factor e^0.3 around ``--sigma``), as
unchanged pairs scatter on a real machine; the judge is :class:`pytest_opprof.ab.judge.
ABJudge`, driven as ``ab/head.py`` drives it (a pair, then more while ``more_pairs``).

Two ways of spending the run's budget of pairs are compared on the same simulated tests:

* ``plugin``: the judge as shipped (each test at most ``FAIR_SHARE`` times its share of
  the pairs left; more pairs only for a figure leaning slower, ``LEAN``);
* ``first-come``: every undecided figure asks for pairs, first come first served, until
  the run's budget is spent (the rule before the fair shares).

Reported per rule and half of the run (tests 1-40, 41-80): slowed tests caught (test or
kernel regressed), unchanged tests failed, tests whose time was decided, mean pairs.

    python bench/ab_budget.py [--tests 80] [--sigma 0.02,0.035] [--runs 8]
"""

from __future__ import annotations

import argparse
import math
import random
import statistics
from collections.abc import Callable, Sequence

import _common  # noqa: F401  (the checkout on sys.path)

from pytest_opprof.ab.judge import ABJudge
from pytest_opprof.gate.round_figures import OpFigures, RoundFigures
from pytest_opprof.gate.tolerance import Tolerances

Rule = Callable[[ABJudge, Sequence[RoundFigures], Sequence[RoundFigures], Tolerances], bool]


def first_come(
    judge: ABJudge, base: Sequence[RoundFigures], head: Sequence[RoundFigures], tol: Tolerances
) -> bool:
    if min(len(base), len(head)) >= judge.max_pairs or judge.extra_pairs >= judge.extra_budget:
        return False
    judged = judge.figures(base, head, tol, judge.fdr.level())
    more = any(j.decision == "undecided" for j in judged)
    judge.extra_pairs += more
    return more


def plugin(
    judge: ABJudge, base: Sequence[RoundFigures], head: Sequence[RoundFigures], tol: Tolerances
) -> bool:
    return judge.more_pairs(base, head, tol)


def _pair(
    rng: random.Random,
    base: list[RoundFigures],
    head: list[RoundFigures],
    scale: float,
    sigma: float,
    factor: float,
) -> None:
    """One pair: the kernel ``factor`` slower on the head, each time scattered by ``sigma``."""
    for side, f in ((base, 1.0), (head, factor)):
        kernel = scale * 0.6 * f * math.exp(rng.gauss(0, sigma / math.sqrt(2)))
        other = scale * 0.4 * math.exp(rng.gauss(0, sigma))
        ops = {
            "kernel": OpFigures(count=1, self_cpu_ns=int(kernel)),
            "numpy.add": OpFigures(count=1, self_cpu_ns=int(other)),
        }
        side.append(
            RoundFigures(wall_time_ns=int(kernel + other), cpu_time_ns=1, ops=ops, wait_ns=0)
        )


def one_run(
    rule: Rule, tests: int, sigma: float, slowdown: float, seed: int
) -> list[tuple[int, bool, str, bool, int]]:
    """(index, slowed, the test time's decision, caught, pairs) of each simulated test."""
    rng = random.Random(seed)
    judge = ABJudge(tests, 0.05, 12)
    tol = Tolerances(time=0.03, max_wait_share=None)
    out: list[tuple[int, bool, str, bool, int]] = []
    for i in range(tests):
        scale = 10 ** rng.uniform(6.2, 7.3)
        sig = sigma * math.exp(0.3 * rng.gauss(0, 1))
        slowed = rng.random() < 0.3
        factor = 1 + slowdown if slowed else 1.0
        base: list[RoundFigures] = []
        head: list[RoundFigures] = []
        _pair(rng, base, head, scale, sig, factor)
        while rule(judge, base, head, tol):
            _pair(rng, base, head, scale, sig, factor)
        decisions = {j.key: j.decision for j in judge.settle(base, head, tol)}
        if "" not in decisions:
            continue
        caught = "regressed" in (decisions[""], decisions.get("kernel"))
        out.append((i, slowed, decisions[""], caught, len(base)))
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--tests", type=int, default=80)
    p.add_argument("--sigma", default="0.02,0.035")
    p.add_argument("--slowdown", type=float, default=0.10)
    p.add_argument("--runs", type=int, default=8)
    args = p.parse_args()
    print("| pair scatter | rule | half | slowed caught | unchanged failed | decided | pairs |")
    print("|---|---|---|---|---|---|---|")
    for sigma in (float(s) for s in args.sigma.split(",")):
        for name, rule in (("first-come", first_come), ("plugin", plugin)):
            rows = [
                r
                for seed in range(args.runs)
                for r in one_run(rule, args.tests, sigma, args.slowdown, seed)
            ]
            half = args.tests // 2
            for label, part in (
                (f"1-{half}", [r for r in rows if r[0] < half]),
                (f"{half + 1}-{args.tests}", [r for r in rows if r[0] >= half]),
            ):
                slowed = [r for r in part if r[1]]
                same = [r for r in part if not r[1]]
                print(
                    f"| {sigma:.1%} | {name} | {label} | "
                    f"{sum(r[3] for r in slowed)}/{len(slowed)} | "
                    f"{sum(r[3] for r in same)}/{len(same)} | "
                    f"{sum(r[2] != 'undecided' for r in part) / len(part):.0%} | "
                    f"{statistics.mean(r[4] for r in part):.1f} |"
                )


if __name__ == "__main__":
    main()
