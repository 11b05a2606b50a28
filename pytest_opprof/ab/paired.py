"""How A/B judges a time: paired rounds of base and head, a pooled noise model, a moderated
t, an online false-discovery control and a stopping rule.  Pure functions, numpy and the
stdlib only; ``docs/ab.md`` ("How A/B judges a time") explains them in reader's terms and
``tests/test_ab_paired.py`` measures the figures quoted here.

A figure's pairs are base times ``b_i`` and head times ``h_i`` of the same work, run
back to back on this machine.  Everything works on their log ratios ``d_i = ln(h_i/b_i)``:
a slowdown is a shift of ``d``, the machine's drift between pairs cancels inside each pair,
and the scatter of ``d`` hardly depends on how long the work takes within a duration bin.
"""

from __future__ import annotations

import itertools
import math
import statistics
import sys
from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Literal

import numpy as np

from pytest_opprof.ab.student import betainc, t_ppf, t_sf
from pytest_opprof.gate.waiting import WAIT_SHARE_LIMIT

Verdict = Literal["pass", "regressed", "improved", "undecided"]
Step = Literal["pass", "regressed", "improved", "undecided", "more"]
Basis = Literal["wall", "work", "rerun"]

DEFAULT_SIGMA = 0.05
"""The scatter of ``d`` assumed before a run has measured any (log units, i.e. about 5%
between two rounds of the same work): wider than rounds of the same work scattered even
beside CPU burners (``pytest_opprof/gate/waiting.py``: work time 0.97-1.08x quiet, 10th to
90th percentile), so the first figures take more pairs rather than fail on a guess."""
PRIOR_DF = 2.0
"""The weight, in degrees of freedom, of a bin's prior (the default sigma, or its
neighbours' pool): enough to judge a one-pair figure, small enough that a bin's own
residuals outweigh it after a couple of figures."""
MAX_PRIOR_DF = 4.0
"""The most degrees of freedom the pool lends a figure.  A bin's pool describes its
typical figure, not every one, and tests differ in how they scatter: simulated A/A runs of
200 figures whose sigmas spread lognormally by a factor e^0.5 around their bin's failed
an unchanged figure in 10-37% of runs with 20, 7-17% with 8, none of 30 with 4.  The
price, with 2% wild pairs at sigma 0.01: 85% of unchanged figures pass within two pairs
instead of 92% with 8; a +10% change at sigma 0.02 is still caught in a median
of 3 pairs.  (limma estimates this weight from the spread of the figures' variances; one-
and two-pair figures, most of a run, measure that spread too poorly.)"""
BIN_FACTOR = 4.0
"""Durations within this factor share a noise bin: short figures scatter more (timer
resolution, a cache line, an interrupt weigh more in 20 us than in 20 ms)."""
BORROW_DF = 10.0
"""A neighbouring bin, or the whole pool, stands in for the default sigma as a bin's prior
once it holds this many degrees of freedom."""
POOL_KEEP = 4096
"""The most differences a bin keeps (the latest): enough for its median to sit within 2%
of the truth, and recent enough to follow a machine that got busier."""
POOL_FIT = 5.0
"""A figure whose own robust sigma is more than this many times its bin's is kept out of
the pool.  An F test cannot do it at the start of a run, when the pool is a prior of
``PRIOR_DF`` degrees of freedom: a first test whose pairs scattered 34% (recorded, quiet)
passed it against the 5% prior and made the pool's sigma 31-38% for the ten tests after,
none of which could then be decided.  At 3 times, simulated runs whose figures' sigmas
spread by e^0.5 kept their noisier figures out, and the pool shrank to a quarter of the
truth as each shrink kept more out."""
_MAD_TO_SIGMA = 1.482602218505602
"""A normal variable's sigma over its median absolute deviation."""
WILD_Z = 4.0
"""A pair whose ``d`` lies more than this many pooled sigmas from its figure's median is
wild: one of its rounds was held up by something that was not the code (an interrupt, a
page-fault storm, a hypervisor's pause).  Recorded quiet here (``bench/ab_replay.py``),
5-9% of pairs lay beyond 5 sigmas of the normal core, single rounds 12% to 3x slower,
on either side alike; the core's sigma was 2.0-2.4%, the pairs' plain standard deviation
9-10%.  A real change moves all of a figure's pairs alike, so it never makes one wild.
Replayed on those pairs (tolerance 5%), leaving wild pairs out of a pass decided 91% of
unchanged tests of 1 ms or more instead of 86%, in 2.9 pairs a test instead of 3.1, and
caught as many kernels made 10% slower (129 and 130 of 156)."""
WILD_FAIL_Z = 6.0
"""A regression (or an improvement) is judged without the pairs more than this many
sigmas from the figure's median, the larger of the pool's sigma and the figure's own
(1.4826 times its pairs' median absolute deviation), where at least ``WILD_FAIL_KEPT``
pairs remain (:func:`failing_estimate`).  A wild base round hides a slowdown: a kernel 10%
slower read -86% in the pair where the base was held up, and the figure's mean fell to
+3% with an interval 40% wide.  Replayed on recorded runs (``bench/ab_replay.py``,
tolerance 5%; 6 quiet runs, 4 loaded, 4 bursty), it caught 65 of 78, 28 of 52 and 27 of
52 kernels made 10% slower, against 57, 25 and 25 on every pair, and failed none of the
1,280 unchanged tests' verdicts.  The cut is wider than a pass's (``WILD_Z`` pooled
sigmas) and follows a noisy figure's own scatter: cut at ``WILD_Z`` pooled sigmas, a
figure three times noisier than its pool lost its ordinary low pairs and failed, and
simulated A/A runs (150 runs of 150 figures, ``tests/test_ab_paired.py``'s) had a
false discovery in 15-23 at sigma 0.02, against 8 judged on every pair and 8 with this
cut (1 and 4 at sigma 0.01)."""
WILD_FAIL_KEPT = 4
"""The fewest pairs a failure is judged on without its wild ones (:data:`WILD_FAIL_Z`):
three bursty pairs, +10.4%, +12.5% and -2.5%, where a neighbour held up the head twice,
made the clean third look wild and failed an unchanged test."""
DEFAULT_CONFIDENCE = 0.9
"""The two-sided confidence of a figure's interval: a pass needs its high end below the
tolerance, a one-sided test at 5%."""
WILD_LEVEL = 0.01
"""The F test level at which a figure's own scatter is too wide for the pool
(:func:`fits_pool`).  Simulated A/A runs of 200 figures at sigma 0.01 with 2% wild pairs
(+-20-100%): kept in, wild figures made the pool's sigma 2.7x the truth, so unchanged
figures took longer to pass; kept out, 1.2x, as without wild pairs (that 1.2 is the
stopping rule: pairs are added while a figure looks far from zero).  Judged against a
pool lending 20 df, two same-signed wild pairs in a row failed a figure in 10-20% of
runs; judged on its own scatter, none of 30."""
FAIL_LOW_SHARE = 0.5
"""A regression's interval must lie at or above this share of the tolerance, besides its
change at or above the tolerance and its significance at the run's level.  A run of one
test judges it at the whole false-discovery rate (10%): a 1 ms test whose three pairs
read +16.8% [+2.4%, +33.2%], unchanged code beside a parallel test suite, failed on
significance and its change alone.  Replayed on recorded runs (``bench/ab_replay.py``,
tolerance 5%), the floor caught 49, 40 and 39 of 52 kernels made 10% slower (quiet,
loaded, bursty) against 51, 41 and 39 without it, and no A/A failure either way."""
MIN_FAIL_PAIRS = 2
"""A figure is never failed (or called improved) on fewer pairs: one pair is one
base-then-head order, so an order effect is not yet cancelled, and a single wild pair,
judged against a tight pool, would be significant at any level.  From two pairs on, the
figure must also be failed without its most extreme pair (:func:`decide`)."""
AGREE_MIN = 2
"""A time fails (or is called improved) only once each process of a side has run at
least this many of its pairs, and each process's pairs see the change (:func:`agrees`).
One pair of a process can read +50% where a neighbour on the other hyperthread slowed
its head round, with no wait to see: unchanged code that one head process runs 50%
slower (``tests/test_ab.py``) failed once in CI and in 2 of 37 runs beside a bursty
neighbour (its other process's one or two pairs agreeing), and in none of 44 with two
pairs a process (20 of each interleaved: 1 failure against 0).  Replayed on every saved
recording (``bench/ab_replay.py --processes 2``): the same 188 of 312 slowed kernels
caught, one unchanged test's failure gone (bursty), 1,322 times decided against 1,323;
three pairs a process caught 186."""


@dataclass(frozen=True)
class Estimate:
    """A figure's change from base to head with its interval and one-sided p-values.

    ``change``, ``low`` and ``high`` are relative (0.05 = 5% slower); ``df`` is the moderated
    t's degrees of freedom; ``p_slower`` tests "the true change is at most 0",
    ``p_faster`` "at least 0".  ``without_slowest`` and ``without_fastest`` are the same
    figure judged without its slowest or its fastest pair (None where that leaves nothing
    to judge): a verdict of regressed or improved must hold there too (:func:`decide`)."""

    change: float
    low: float
    high: float
    confidence: float
    pairs: int
    df: float
    p_slower: float
    p_faster: float
    mean_log: float
    se_log: float
    without_slowest: Estimate | None = None
    without_fastest: Estimate | None = None
    without_wild: Estimate | None = None
    """The figure without its wild pairs (``WILD_Z``), where it had any: what a ``pass``
    is judged on."""
    without_outliers: Estimate | None = None
    """The figure without the pairs ``WILD_FAIL_Z`` cuts, where it had any and at least
    ``WILD_FAIL_KEPT`` remain: what a regression is judged on (:func:`failing_estimate`)."""
    unsettled: bool = False
    """One or two pairs that cannot yet say which of them is wild (:func:`wild_pairs`):
    the figure is not decided on them."""


def log_ratios(base_ns: Sequence[float], head_ns: Sequence[float]) -> list[float]:
    """``ln(h_i / b_i)`` for each pair of positive times."""
    if len(base_ns) != len(head_ns):
        raise ValueError(f"{len(base_ns)} base times against {len(head_ns)} head times")
    return [math.log(h / b) for b, h in zip(base_ns, head_ns, strict=True)]


@lru_cache(maxsize=4096)
def _quantile(p: float, df: float) -> float:
    return t_ppf(p, df)


def estimate(
    d: Sequence[float],
    prior_sigma: float,
    prior_df: float,
    confidence: float = DEFAULT_CONFIDENCE,
    offset: float = 0.0,
) -> Estimate:
    """The moderated paired t (Smyth 2004, "limma") of the log ratios ``d``, and the
    same without its wild pairs (``without_wild``, :func:`wild_pairs`).

    The figure's variance is shrunk towards the pool's: ``s~^2 = (d0 s0^2 + (n-1) s^2) /
    (d0 + n - 1)`` with ``d0 + n - 1`` degrees of freedom, so one pair is judged on the pool
    alone and a figure noisier than its pool pulls its own sigma up as pairs come in.

    ``offset`` (log units) is how far two processes running the same code differ for one
    figure, whatever its pairs: the mean's variance is ``s~^2 / n + offset^2``, so no
    number of pairs makes its interval narrower than the offset (:class:`OffsetModel`)."""
    values = sorted(float(x) for x in d)
    main = _with_extremes(values, prior_sigma, prior_df, confidence, offset)
    kept, unsettled = wild_pairs(values, prior_sigma)
    if len(kept) < len(values):
        main = replace(
            main, without_wild=_moderated(kept, prior_sigma, prior_df, confidence, offset)
        )
    inliers = _inliers(values, prior_sigma)
    if WILD_FAIL_KEPT <= len(inliers) < len(values):
        main = replace(
            main,
            without_outliers=_with_extremes(inliers, prior_sigma, prior_df, confidence, offset),
        )
    return replace(main, unsettled=unsettled)


def _inliers(values: Sequence[float], sigma: float) -> list[float]:
    """``values`` (sorted) within ``WILD_FAIL_Z`` sigmas of their median: the pool's
    ``sigma`` or their own robust one, whichever is larger."""
    if len(values) < 3:
        return list(values)
    middle = statistics.median(values)
    own = _MAD_TO_SIGMA * statistics.median(abs(x - middle) for x in values)
    limit = WILD_FAIL_Z * max(sigma, own)
    return [x for x in values if abs(x - middle) <= limit]


def _with_extremes(
    values: Sequence[float], prior_sigma: float, prior_df: float, confidence: float, offset: float
) -> Estimate:
    """The moderated estimate of sorted ``values``, with its ``without_slowest`` and
    ``without_fastest`` twins where enough pairs remain to judge."""
    main = _moderated(values, prior_sigma, prior_df, confidence, offset)
    if len(values) >= (2 if prior_df > 0 else 3):
        main = replace(
            main,
            without_slowest=_moderated(values[:-1], prior_sigma, prior_df, confidence, offset),
            without_fastest=_moderated(values[1:], prior_sigma, prior_df, confidence, offset),
        )
    return main


def wild_pairs(values: Sequence[float], sigma: float) -> tuple[list[float], bool]:
    """``values`` (sorted) without their wild pairs, and whether the figure is unsettled.

    From three pairs on, a pair more than ``WILD_Z`` sigmas from the figure's median is
    wild and left out: the median of three stands whatever one pair did.  Two pairs that
    far apart, or a single pair that far from zero, cannot say which round was held up, so
    the figure is unsettled: not decided, and given another pair.  (A single pair far
    *below* zero is the case that matters: a base round held up by 20% would pass a head
    10% slower.)"""
    n = len(values)
    limit = WILD_Z * sigma
    if n >= 3:
        middle = statistics.median(values)
        kept = [x for x in values if abs(x - middle) <= limit]
        if 2 * len(kept) > n:
            return kept, False
        return list(values), True
    if n == 2:
        return list(values), values[1] - values[0] > limit * math.sqrt(2.0)
    return list(values), bool(values) and abs(values[0]) > limit


def _moderated(
    values: Sequence[float],
    prior_sigma: float,
    prior_df: float,
    confidence: float,
    offset: float = 0.0,
) -> Estimate:
    n = len(values)
    if n == 0:
        raise ValueError("estimate needs at least one pair")
    if prior_sigma < 0 or prior_df < 0 or (prior_df == 0 and n < 2):
        raise ValueError(f"no variance to judge {n} pair(s) with prior_df={prior_df}")
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must lie in (0, 1), got {confidence}")
    mean = math.fsum(values) / n
    own = math.fsum((x - mean) ** 2 for x in values)
    if prior_df > 0 and not fits_pool(own, n - 1, prior_sigma, prior_df):
        prior_df = 0.0
    df = prior_df + n - 1
    se = math.sqrt((prior_df * prior_sigma**2 + own) / df / n + offset**2)
    if se > 0:
        t = mean / se
        p_slower, p_faster = t_sf(t, df), t_sf(-t, df)
        half = -_quantile((1 - confidence) / 2, df) * se
    else:
        p_slower = 0.0 if mean > 0 else 1.0 if mean < 0 else 0.5
        p_faster = 0.0 if mean < 0 else 1.0 if mean > 0 else 0.5
        half = 0.0
    return Estimate(
        change=_relative(mean),
        low=_relative(mean - half),
        high=_relative(mean + half),
        confidence=confidence,
        pairs=n,
        df=df,
        p_slower=p_slower,
        p_faster=p_faster,
        mean_log=mean,
        se_log=se,
    )


_LOG_MAX = math.log(sys.float_info.max)
"""The largest log change a float can give as a relative one."""


def _relative(log_change: float) -> float:
    """``exp(x) - 1``: a change in log units as a relative one (an interval too wide to
    say anything, as one or two wild pairs at high confidence give, reaches infinity)."""
    return math.expm1(log_change) if log_change < _LOG_MAX else math.inf


def fits_pool(squares: float, df: float, prior_sigma: float, prior_df: float) -> bool:
    """Whether a figure's own scatter, ``squares`` (its squared residuals) over ``df``
    degrees of freedom, is one the pool could give: the F test of ``s^2 / s0^2`` against
    ``F(df, prior_df)`` does not reject at ``WILD_LEVEL``.  A figure the pool does not
    describe (a wild pair, work that scatters on its own) is judged on its own scatter
    alone, and is kept out of the pool."""
    if df <= 0 or squares <= 0:
        return True
    if prior_sigma <= 0:
        return False
    ratio = squares / df / prior_sigma**2
    return betainc(0.5 * prior_df, 0.5 * df, prior_df / (prior_df + df * ratio)) > WILD_LEVEL


def decide(estimate: Estimate, tolerance: float, level: float) -> Verdict:
    """The figure's verdict against ``tolerance``, the smallest relative slowdown worth
    failing for, at significance ``level`` (the run's online FDR level for this test).

    - regressed: at least ``MIN_FAIL_PAIRS`` pairs, slower with ``p_slower <= level``, the
      change at or above ``tolerance`` and its interval's low end at or above
      ``FAIL_LOW_SHARE`` of it: the change is real, the best estimate of it is one worth
      failing for, and it is confidently more than a fraction of one.  It must hold
      without the slowest pair too, so one wild pair never fails a figure; it is judged
      without the pairs far outside the others (``WILD_FAIL_Z``), so one never hides a
      slowdown either.
    - improved: the mirror, the change at or below ``-tolerance / (1 + tolerance)`` (the
      same distance in log units) and the high end at or below half that, without the
      fastest pair too.
    - pass: the interval's high end lies below ``tolerance``: confidently not slower by a
      change worth failing for (a one-sided test at 5%), whether or not a smaller change,
      or a speed-up short of ``improved``, is significant.  The gate fails slowdowns; asking
      a pass to rule out speed-ups too (the interval inside the tolerance on both sides)
      left up to 11 more of 33 tests undecided in recorded quiet runs and caught no
      more slowdowns (``bench/ab_replay.py``, BENCHMARKS.md).
    - undecided: anything else; the caller runs another pair or, at its budget, reports it.

    Why the change itself and not its interval's low end against the tolerance: the
    tolerance is the smallest change worth failing for, so a change measured there is a
    coin flip under any rule, and the low end asks more than the tolerance: confidence
    that the change is beyond it.  Replayed on recorded runs (``bench/ab_replay.py``,
    tolerance 5%, 4 runs a scenario), the low end caught 41, 28 and 27 of 52 kernels made
    10% slower (quiet, loaded, bursty), most of them still undecided at 12 pairs reading
    +6% to +9% [+2%, +13%]; the change caught 49, 35 and 35, and neither failed any of the
    480 unchanged tests of the A/A runs.  The price, simulated (sigma 0.02, tolerance 3%,
    ``docs/ab.md``): 7% of figures really 2% slower fail, against under 0.5%.  A false
    failure of unchanged code needs significance, which the run's false-discovery control
    bounds either way.

    A figure is judged at the same ``level`` at every pair it is looked at, uncorrected
    for the repeated looks: failing also needs the change past the tolerance and the low
    end past ``FAIL_LOW_SHARE`` of it, and simulated A/A runs with those looks stay under
    the FDR target where figures scatter as their pool does (``docs/ab.md``)."""
    if tolerance <= 0:
        raise ValueError(f"tolerance must be positive, got {tolerance}")
    if estimate.unsettled:
        return "undecided"
    faster_limit = -tolerance / (1 + tolerance)
    estimate = failing_estimate(estimate)
    if estimate.pairs >= MIN_FAIL_PAIRS:
        slower = (estimate, estimate.without_slowest)
        floor = FAIL_LOW_SHARE * tolerance
        if all(
            e is not None and e.p_slower <= level and e.change >= tolerance and e.low >= floor
            for e in slower
        ):
            return "regressed"
        faster = (estimate, estimate.without_fastest)
        ceiling = FAIL_LOW_SHARE * faster_limit
        if all(
            e is not None and e.p_faster <= level and e.change <= faster_limit and e.high <= ceiling
            for e in faster
        ):
            return "improved"
    if (estimate.without_wild or estimate).high < tolerance:
        return "pass"
    return "undecided"


def needed_level(estimate: Estimate, tolerance: float) -> float:
    """The smallest significance level at which :func:`decide` fails the figure (or calls
    it improved): the larger p-value of the figure with and without its most extreme pair,
    where significance is all the verdict lacks; ``math.inf`` where something else is
    missing (the change short of the tolerance, too few pairs)."""
    verdict = decide(estimate, tolerance, 1.0)
    e = failing_estimate(estimate)
    if verdict == "regressed" and e.without_slowest is not None:
        return max(e.p_slower, e.without_slowest.p_slower)
    if verdict == "improved" and e.without_fastest is not None:
        return max(e.p_faster, e.without_fastest.p_faster)
    return math.inf


def hochberg_level(needed: Sequence[float], level: float) -> float:
    """The level each of one test's figures is judged at, so that together they fail the
    test at ``level`` at most: Hochberg's step-up (Biometrika 1988).  The k-th smallest of
    the ``m`` figures' :func:`needed_level` is held to ``level / (m - k + 1)``; the largest
    k that holds sets the level of every figure, and where none does each gets Bonferroni's
    ``level / m``.  So a test whose time and an op both moved is failed at up to ``level``
    where Bonferroni asked ``level / m`` of each, and a test with one figure that moved is
    judged as before.  It holds a test's chance of failing any unchanged figure to
    ``level`` where the figures' errors are independent or positively dependent (Sarkar,
    Ann. Statist. 1998), as a test's time and its ops' times are: an op's time is part of
    the test's, and a slow moment of the machine slows all of them."""
    m = len(needed)
    if m == 0:
        return level
    ordered = sorted(needed)
    for k in range(m, 0, -1):
        cut = level / (m - k + 1)
        if ordered[k - 1] <= cut:
            return cut
    return level / m


def agrees(d: Sequence[float], verdict: Verdict, tolerance: float, sigma: float) -> bool:
    """Whether one process's pairs ``d`` (log ratios) see the change ``verdict`` needs:
    their mean, without the pairs ``WILD_FAIL_Z`` cuts, at least the tolerance slower for
    ``regressed`` (as far faster for ``improved``).  No significance is asked of them: the
    verdict already has it from every process's pairs together, but fewer than
    ``AGREE_MIN`` pairs never agree.

    Unchanged code that one process runs 50% slower gave the other process's pairs a mean
    of +2.5% or more now and then (three pairs of a 3 ms test, the machine busy with the
    test suite), and half the tolerance let such a test fail; at the whole tolerance,
    replayed as from two processes (``bench/ab_replay.py --processes 2``), the generated
    suite's kernels made 10% slower were caught 47, 38 and 36 times of 52 (quiet, loaded,
    bursty) against 47, 39 and 38 at half of it."""
    if len(d) < AGREE_MIN:
        return False
    kept = _inliers(sorted(d), sigma)
    mean = math.fsum(kept) / len(kept)
    if verdict == "regressed":
        return mean >= math.log1p(tolerance)
    if verdict == "improved":
        return mean <= -math.log1p(tolerance)
    return True


def next_step(estimate: Estimate, tolerance: float, level: float, max_pairs: int) -> Step:
    """The verdict when decided, ``"more"`` when another pair may decide it, and
    ``"undecided"`` when ``max_pairs`` pairs have not."""
    verdict = decide(estimate, tolerance, level)
    if verdict != "undecided" or estimate.pairs >= max_pairs:
        return verdict
    return "more"


def describe(estimate: Estimate, verdict: Verdict) -> str:
    """One line: ``+4.1% [-1.0%, +9.3%], not decided in 3 pairs`` or ``+0.3% [-1.2%,
    +1.8%] over 4 pairs (1 wild, left out)``."""
    shown = shown_estimate(estimate, verdict)
    text = f"{shown.change:+.1%} [{shown.low:+.1%}, {shown.high:+.1%}]"
    pairs = f"{estimate.pairs} pair{'s' * (estimate.pairs != 1)}"
    if shown is not estimate:
        pairs += f" ({estimate.pairs - shown.pairs} wild, left out)"
    if verdict == "undecided":
        return f"{text}, not decided in {pairs}"
    return f"{text} over {pairs}"


def failing_estimate(estimate: Estimate) -> Estimate:
    """The estimate a regression (or an improvement) is judged on: without its outlying
    pairs (``WILD_FAIL_Z``) where it had any, else every pair."""
    return estimate.without_outliers or estimate


def shown_estimate(estimate: Estimate, verdict: Verdict) -> Estimate:
    """The estimate a verdict was reached on: a pass's without its wild pairs, a failure's
    as :func:`failing_estimate` chose."""
    if verdict == "pass" and estimate.without_wild is not None:
        return estimate.without_wild
    if verdict in ("regressed", "improved"):
        return failing_estimate(estimate)
    return estimate


class NoiseModel:
    """How far pairs of the same work scatter in ``d`` on this machine in this run.

    Fed each figure's log ratios once its pairs are done (:meth:`add`).  The differences of
    a figure's successive pairs measure the scatter: its true change, whatever it is,
    cancels in ``d_(i+1) - d_i``, and so does a drift of the machine slower than a pair;
    each difference over sqrt(2) scatters as one pair does.  The pool's sigma is their
    median absolute value times 1.4826 (the normal's sigma over its MAD): wild pairs
    (``WILD_Z``), 5-9% of a quiet run's here, barely move a median, where they made a
    standard deviation 4-5 times the normal core's.  Differences are pooled per duration
    bin (``BIN_FACTOR``), the latest ``POOL_KEEP`` of each, on top of a prior of
    ``PRIOR_DF`` degrees of freedom: the neighbouring bins' pool, else the whole pool, else
    ``DEFAULT_SIGMA``.  A figure whose own scatter is over ``POOL_FIT`` times the pool's
    (a test that scatters on its own, or the first test of a run whose machine was still
    settling, its pairs 34% apart) is kept out.  Hold one for test times and one for op
    self times: they scatter differently."""

    def __init__(self) -> None:
        self._diffs: dict[int, deque[float]] = {}
        self._all: deque[float] = deque(maxlen=POOL_KEEP)
        self._cache: dict[int, tuple[float, float]] = {}
        """:meth:`sigma` per bin until the next :meth:`add`: it is read for every figure
        at every pair."""

    @staticmethod
    def _bin(duration_ns: float) -> int:
        return math.floor(math.log(max(duration_ns, 1.0), BIN_FACTOR))

    def add(self, duration_ns: float, d: Sequence[float]) -> None:
        """Pool a figure's log ratios ``d``, in the order its pairs ran; ``duration_ns`` is
        its base time scale.  A figure of one pair holds no scatter and adds nothing."""
        if len(d) < 2:
            return
        diffs = [abs(b - a) / math.sqrt(2.0) for a, b in itertools.pairwise(d)]
        if _robust_sigma(diffs) > POOL_FIT * self.sigma(duration_ns)[0]:
            return
        self._diffs.setdefault(self._bin(duration_ns), deque(maxlen=POOL_KEEP)).extend(diffs)
        self._all.extend(diffs)
        self._cache.clear()

    def sigma(self, duration_ns: float) -> tuple[float, float]:
        """The pooled sigma (log units) for a figure of ``duration_ns`` and the degrees of
        freedom to lend it (at most ``MAX_PRIOR_DF``)."""
        key = self._bin(duration_ns)
        if key not in self._cache:
            own = self._diffs.get(key, ())
            prior = self._prior(key)
            count = len(own)
            variance = (PRIOR_DF * prior**2 + count * _robust_sigma(own) ** 2) / (PRIOR_DF + count)
            self._cache[key] = (math.sqrt(variance), min(PRIOR_DF + count, MAX_PRIOR_DF))
        return self._cache[key]

    def _prior(self, key: int) -> float:
        near = [x for k in (key - 1, key + 1) for x in self._diffs.get(k, ())]
        if len(near) >= BORROW_DF:
            return _robust_sigma(near)
        if len(self._all) >= BORROW_DF:
            return _robust_sigma(self._all)
        return DEFAULT_SIGMA


def _robust_sigma(magnitudes: Iterable[float]) -> float:
    """The sigma of a centred normal whose absolute values have this median."""
    # statistics, not numpy: numpy's median caches references to 74 of its ufuncs on its
    # first call, which a test the plugin runs could observe (tests/test_numpy_hooks_
    # unobservable.py), and a gate run pools its rounds here too.
    values = list(magnitudes)
    return _MAD_TO_SIGMA * statistics.median(values) if values else 0.0


OFFSET_PRIOR = 0.015
"""The offset between processes assumed before a run has measured its own (log units).
Measured here, A/A with 8 pairs a test on a quiet machine: the tests' mean changes
scattered 1.8-2.4% where their pairs' scatter allowed 1.1%, an offset of about 1.7%, and
18-25% of the 90% intervals left out zero where 10% should; with the offset in every
interval, 5-6% (``bench/ab_layout.py``)."""
OFFSET_MIN_FIGURES = 10
"""Settled figures the run needs before its own offset replaces the prior: the lower
quartile of fewer is no quartile (one figure's squared mean over ``_CHI2_1_Q25`` read an
offset of 8% from a figure 2.7% off zero, and judged the tests after it on that)."""
_CHI2_1_Q25 = 0.10153104426762156
"""The lower quartile of a chi-square with one degree of freedom (of ``z^2``, ``z``
standard normal)."""


class OffsetModel:
    """How far two processes differ, per figure, running the same code: an offset that
    every pair of a figure shares (where each process's code and data happen to lie in
    memory, what it ran before), which the pairs' own scatter cannot show.

    Measured across the run's settled figures as a random-effects meta-analysis does
    across studies: a figure's mean ``m_i`` scatters with variance ``v_i + offset^2``,
    ``v_i`` its pairs' share.  The offset is the one at which the lower quartile of the
    standardised squares ``m_i^2 / (v_i + offset^2)`` is that of a chi-square with one
    degree of freedom: robust, so the figures that really changed, even a third of them,
    hardly count, and fair to figures of one pair and of twelve alike.  Until
    ``OFFSET_MIN_FIGURES`` figures have settled, it is ``OFFSET_PRIOR``."""

    def __init__(self) -> None:
        self._squares: list[float] = []
        self._within: list[float] = []
        self._offset: float | None = OFFSET_PRIOR
        """:meth:`offset` once computed, None while figures added since wait for it: it is
        read for every figure at every pair, and a test's figures are added at once."""

    def add(self, mean_log: float, within_variance: float) -> None:
        self._squares.append(mean_log * mean_log)
        self._within.append(max(within_variance, 0.0))
        if len(self._squares) >= OFFSET_MIN_FIGURES:
            self._offset = None

    def offset(self) -> float:
        """The offset (log units): the prior, then the run's own."""
        if self._offset is None:
            self._offset = min(
                _offset_for(np.asarray(self._squares), np.asarray(self._within)), OFFSET_PRIOR
            )
        return self._offset


def _offset_for(squares: np.ndarray, within: np.ndarray) -> float:
    """The ``offset`` whose standardised squares have the chi-square's lower quartile
    (bisection: their quartile falls as the offset grows)."""
    # The quartile as np.quantile's default (linear) method takes it, from the two order
    # statistics around it, found by a partial sort: a twentieth of np.quantile's time
    # on a run's few hundred figures, asked 41 times an offset.
    where = 0.25 * (len(squares) - 1)
    low_k = int(where)
    high_k = min(low_k + 1, len(squares) - 1)
    frac = where - low_k

    def quartile(offset: float) -> float:
        ordered = np.partition(
            squares / np.maximum(within + offset * offset, 1e-18), (low_k, high_k)
        )
        low, high = float(ordered[low_k]), float(ordered[high_k])
        return low + frac * (high - low)

    if quartile(0.0) <= _CHI2_1_Q25:
        return 0.0
    low, high = 0.0, 1.0
    for _ in range(40):
        mid = (low + high) / 2
        low, high = (mid, high) if quartile(mid) > _CHI2_1_Q25 else (low, mid)
    return high


class OnlineFdr:
    """LOND (Javanmard & Montanari, Ann. Statist. 2018): false discovery rate control for
    hypotheses judged one at a time, as each test ends, with no going back.

    The i-th hypothesis is tested at ``q * (D + 1) / m``, D the discoveries so far and ``m``
    the number of hypotheses announced (the run's tests): Bonferroni's level until the
    first discovery, then growing with them, the online counterpart of Benjamini-Hochberg.
    FDR <= q under independence.  Hypotheses beyond ``m`` get level 0: the budget is spent."""

    def __init__(self, q: float, m: int) -> None:
        if not 0 < q < 1 or m < 1:
            raise ValueError(f"OnlineFdr needs 0 < q < 1 and m >= 1, got q={q}, m={m}")
        self.q, self.m = q, m
        self.tested = 0
        self.discoveries = 0

    def level(self) -> float:
        """The significance level of the next hypothesis."""
        if self.tested >= self.m:
            return 0.0
        return self.q * (self.discoveries + 1) / self.m

    def record(self, discovered: bool) -> None:
        """Account the hypothesis just judged at :meth:`level`."""
        self.tested += 1
        self.discoveries += bool(discovered)


def benjamini_hochberg(pvalues: Sequence[float], q: float) -> list[bool]:
    """Which of ``pvalues`` Benjamini-Hochberg's step-up rejects at FDR ``q`` (offline)."""
    m = len(pvalues)
    order = sorted(range(m), key=lambda i: pvalues[i])
    # p <= q k / m, multiplied out and with a rounding's slack: a p-value exactly at its
    # cutoff (0.1777 against 0.1777 * 3 / 3) is rejected, as the rule says.
    passed = [k for k, i in enumerate(order, 1) if pvalues[i] * m <= q * k * (1 + 1e-12)]
    cut = max(passed, default=0)
    rejected = [False] * m
    for i in order[:cut]:
        rejected[i] = True
    return rejected


def pair_basis(
    b_wall_ns: int,
    b_wait_ns: int,
    h_wall_ns: int,
    h_wait_ns: int,
    limit: float = WAIT_SHARE_LIMIT,
) -> Basis:
    """Which time a pair is judged on, both sides alike so the ratio compares like with like.

    ``"wall"`` when each round waited for a CPU at most ``limit`` of its wall time (a quiet
    machine's 0-1%); ``"work"`` (wall less wait) when one waited more, however long;
    ``"rerun"`` only when a round has no work time to judge (no wall time measured, or a
    wait as long as it).

    The committed-baseline gate leaves out rounds that waited more than
    ``WORK_WAIT_LIMIT`` of their time, since their work time ran up to 20% above a quiet
    baseline's (``pytest_opprof/gate/waiting.py``).  A pair needs no such rule: both of its
    rounds ran in the same minute of the same busy machine, one right after the other, the
    pool and the figure's own scatter carry what the waits add, and a pair left out is a
    pair paid for and not used.  Replayed on recorded busy runs (``bench/ab_replay.py``,
    tolerance 5%, 4 runs a scenario and variant): judging those pairs on work time instead
    of leaving them out caught 26 and 25 of 52 kernels made 10% slower beside a CPU-bound
    process per core and beside bursty ones, against 21 and 21, in 5.2 pairs a test against
    5.6-5.7; it decided 112 of 141 unchanged tests' times loaded against 104, 119 of 134
    bursty against 125; and failed none of 320 unchanged tests' A/A verdicts either way."""
    shares = [
        wait / wall if wall > 0 else 1.0
        for wall, wait in ((b_wall_ns, b_wait_ns), (h_wall_ns, h_wait_ns))
    ]
    if max(shares) <= limit:
        return "wall"
    if max(shares) < 1.0:
        return "work"
    return "rerun"
