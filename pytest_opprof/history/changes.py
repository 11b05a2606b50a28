"""Change points of figures over a history's runs.

Times: binary segmentation with the Mann-Whitney change-point statistic (Pettitt 1979,
"A non-parametric approach to the change-point problem"; standardised at each split
as in Ross, Tasoulis and Adams 2011, "Nonparametric monitoring of data streams for
changes in location and scale").  For each series (one test's wall time, or one op's
self time in one test, per machine: the median over each run's rounds), there is
a change point when the largest standardised rank-sum statistic ``|z|`` over the splits
that leave ``min_size`` runs on each side has a two-sided p-value, times the number
of splits tried (Bonferroni: the search over splits is paid for), below ``alpha``;
it lies at the least-squares split of the log times (clipped to their 5-95% range),
moved up to :data:`PLACE_REACH` runs where squares capped at :data:`CAP_NOISE` noise
widths about each side's median put it (one wild run beside a step cannot pull it);
each side is then searched again.  A split whose slower side still holds runs at the
faster speed, more than the noise allows, is an op switching between two speeds from
run to run, not a step, and is not reported (:func:`two_speeds`).  Why this one:

* ranks: a run slowed by a busy neighbour is one rank however slow, so a burst
  moves the statistic little, where a mean-shift test (CUSUM, PELT with a Gaussian
  cost) counts it by its size;
* the first pass over every series is a handful of numpy array operations on a
  series x runs matrix (O(n log n) a series); E-Divisive means is O(n^2) a split;
* its p-value needs no permutations and no noise model.  Pettitt's own p-value
  (unstandardised) is so conservative away from the middle that a clean step a
  quarter of the way through 44 runs was not significant at 1e-4.

Where the data cannot tell the step's run from the one before or after it, the step says
so (``Step.first``, ``Step.last``): the split one run off is at least 1/:data:`TIE_RATIO` as
likely as the detector's (the Gaussian likelihood ratio of the two least-squares splits
of the clipped log times between the neighbouring change points, with the noise of the
detector's split), or the series has no value in the runs between its last run at the
old level and its first at the new one.  Where the step lies is not changed by it.

A rank test needs runs: even a clean step is seen only with enough runs on each side
at the default ``alpha``: 12 before and 12 after, 10 and 34, or 8 and 200.  Inside a
series that stepped, a segment too short for ranks (a creep's 8 runs between two steps)
is split by the shift test (:func:`shift_split`): a z-test of the mean log levels either
side, each run clipped at :data:`SHIFT_CLIP` noise widths about a two-level fit, the
noise the series' own run-to-run spread pooled with its group's (:func:`noise_widths`),
at ``alpha`` times :data:`SHIFT_SHARE`, and only where the rank test's p-value is below
:data:`SHIFT_SCREEN`.  A step is reported only when its size is at least ``min_change``
(a certain 0.3% on 1,000 runs is no news), with a 95% interval from the Hodges-Lehmann
shift of log times between the two
segments (Moses' distribution-free interval).

Deterministic figures (FLOPs, op counts, bytes) step exactly where the value changes
from one run to the next (``series.py``); runs where the figure varied over the
rounds are left out.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

Floats = npt.NDArray[np.float64]
Times = npt.NDArray[np.floating[Any]]

ALPHA = 1e-3
"""The p-value (Bonferroni over splits) below which a split is a change point; the false
change points it lets through are measured in bench/history_synthetic.py."""
MIN_SIZE = 3
"""The fewest runs on either side of a change point."""
MIN_CHANGE = 0.03
"""The smallest relative step in a time that is reported."""
TIE_RATIO = 20.0
"""A split one run earlier or later at least 1/20 as likely as the detector's own (about
5% of the two's posterior, with even odds before) is one it cannot tell from its own."""
CAP_NOISE = 3.0
"""Where a run's square stops growing when a step is placed (:func:`_robust_split`), in
noise widths: beyond it a run is a burst, not evidence of where the level moved."""
PLACE_REACH = 3
"""How far (in runs) the capped placement may move a step from the least-squares split
(:func:`_robust_split`): a wild run beside a step moves it a run or two (three where two
steps merged), and a search over every split costs a median per split and row, where the
history gate searches hundreds of rows at its looser threshold."""
MIXED_RUNS = 2
"""The fewest fast runs on a step's slower side that can make it two speeds mixed
(:func:`two_speeds`): one such run is an over-corrected burst as often as not."""
SHIFT_SHARE = 0.1
"""The shift test's threshold, a share of ``alpha``: at ``alpha`` itself it found 2 more
injected steps and made 1 more false change point of 2,070 series in
``bench/history_study.py``'s nine studies."""
SHIFT_SCREEN = 0.05
"""The rank test's p-value (Bonferroni over splits) a segment needs for the shift test
to try it (a split the ranks see nothing in is noise of no normal kind): without it the
shift test made 3 more false change points there."""
SHIFT_CLIP = 2.5
"""Where a run stops weighing in the shift test, in noise widths from its side's median:
a burst beyond it is one run at the clip, not its size."""
_Z95 = 1.959963984540054


def rank_split(
    x: Times, lo: int = 0, hi: int | None = None, min_size: int = MIN_SIZE, alpha: float = ALPHA
) -> Floats:
    """Per row of ``x`` (series x runs, no NaN), over runs ``lo:hi``, the p-value that it
    steps (Bonferroni over the splits tried) and, where it is below ``alpha``, the split
    ``k`` (the first run of the second segment), as columns ``[k, p]``; ``k`` is -1
    where the p-value is not below ``alpha`` or no split leaves ``min_size`` runs on each
    side."""
    x = x[:, lo:hi]
    rows, n = x.shape
    out = np.empty((rows, 2))
    out[:, 0], out[:, 1] = -1, 1.0
    if n < 2 * min_size:
        return out
    # Ties (equal times) are ranked in order, not mid-ranked: times at 7 digits rarely
    # tie, and a step found among equal values is under min_change, so not reported.
    ranks = np.empty(x.shape, dtype=np.float64)
    np.put_along_axis(
        ranks, np.argsort(x, axis=1), np.arange(1, n + 1, dtype=np.float64)[None, :], axis=1
    )
    t = np.arange(min_size, n - min_size + 1, dtype=np.float64)  # runs before the split
    u = np.cumsum(ranks, axis=1)[:, min_size - 1 : n - min_size] - t * (n + 1) / 2
    top = np.max(np.abs(u) / np.sqrt(t * (n - t) * (n + 1) / 12), axis=1)
    out[:, 1] = np.minimum(1.0, _erfc(top / math.sqrt(2)) * len(t))
    out[np.ptp(x, axis=1) == 0, 1] = 1.0  # one value throughout: nothing to split
    stepped = np.flatnonzero(out[:, 1] < alpha)
    if len(stepped):
        out[stepped, 0] = _where(x[stepped], t, min_size) + lo
    return out


def _where(x: Times, t: Floats, min_size: int) -> npt.NDArray[np.int64]:
    """Where each row steps: the split of least squares on its log times, each clipped to
    the row's 5-95% range so a burst cannot pull it, then moved where a wild run beside
    it had pulled it all the same (:func:`_robust_split`).  Rank statistics place a step
    worse: the standardised one moved a clean -10% step at run 10 of 44 to run 12, the
    plain one (Pettitt's) to run 13, where the first runs after the step ranked high."""
    y = np.log(np.maximum(x.astype(np.float64), 1e-3))
    low, high = np.quantile(y, [0.05, 0.95], axis=1)
    y = np.clip(y, low[:, None], high[:, None])
    n = y.shape[1]
    before = np.cumsum(y, axis=1)[:, min_size - 1 : n - min_size]
    mean_before = before / t
    mean_after = (y.sum(axis=1)[:, None] - before) / (n - t)
    gain = t * (n - t) * (mean_before - mean_after) ** 2
    split: npt.NDArray[np.int64] = np.argmax(gain, axis=1) + min_size
    logs = np.log(np.maximum(x.astype(np.float64), 1e-3))
    for row in range(len(split)):
        split[row] = _robust_split(logs[row], int(split[row]), min_size)
    return split


def _robust_split(y: Floats, start: int, min_size: int) -> int:
    """The split of ``y`` (log times), within :data:`PLACE_REACH` runs of ``start`` (the
    least-squares split), of least squares about each side's median, each run's square
    capped at :data:`CAP_NOISE` noise widths (the two sides' pooled median absolute
    deviation at ``start``): a run that far from its side's level costs the same on
    either side, so a burst or a run the reference took too far, beside the step, cannot
    pull the split to itself.  In ``bench/history_study.py``'s nine studies a run the
    reference read 25% under its level, just after a +12% step, had the split placed a
    run late, and a slow run just before a +5% step had it placed a run early."""
    n = len(y)
    a, b = y[:start], y[start:]
    noise = 1.4826 * float(np.median(np.abs(np.concatenate([a - np.median(a), b - np.median(b)]))))
    if noise <= 0:
        return start
    cap = (CAP_NOISE * noise) ** 2
    best, where = math.inf, start
    for k in range(max(min_size, start - PLACE_REACH), min(n - min_size, start + PLACE_REACH) + 1):
        left, right = y[:k], y[k:]
        cost = float(
            np.minimum((left - np.median(left)) ** 2, cap).sum()
            + np.minimum((right - np.median(right)) ** 2, cap).sum()
        )
        if cost < best:
            best, where = cost, k
    # Runs between the two levels are no wild runs: least squares puts each on the side it
    # is nearer, where the capped squares, both capped, would choose by a median's shift
    # (a run at 1.4x between levels 1x and 2x moved a clean step a run early).
    lo, hi = sorted((float(np.median(a)), float(np.median(b))))
    crossed = y[min(where, start) : max(where, start)]
    if len(crossed) and bool(((crossed > lo) & (crossed < hi)).all()):
        return start
    return where


_erfc = np.frompyfunc(math.erfc, 1, 1)


def segment(
    x: Times,
    alpha: float = ALPHA,
    min_size: int = MIN_SIZE,
    first: int | None = None,
    noise: float | None = None,
) -> list[int]:
    """Change points of one series (binary segmentation): the sorted indices of the
    first run of each new segment.  ``first``: the top split, found already.
    ``noise``: the series' run-to-run noise in log time (:func:`noise_widths`); with it,
    a segment the rank test cannot split is tried by the shift test (module docstring)."""
    found: list[int] = []
    pending = [(0, len(x), first)]
    while pending:
        lo, hi, k = pending.pop()
        if k is None:
            kp = rank_split(x[None, :], lo, hi, min_size, alpha)[0]
            if kp[0] < 0 and noise is not None and kp[1] < SHIFT_SCREEN:
                kp = shift_split(x, noise, lo, hi, min_size, alpha * SHIFT_SHARE)
            if kp[0] < 0:
                continue
            k = int(kp[0])
        found.append(k)
        pending += [(lo, k, None), (k, hi, None)]
    return sorted(found)


@dataclass(frozen=True)
class Step:
    """A change point of one series: where, how much, and the interval."""

    at: int
    """Index of the first run of the new level."""
    before: float
    after: float
    change: float
    """Relative, ``after / before - 1`` (inf from 0)."""
    low: float | None = None
    high: float | None = None
    """The 95% interval of ``change`` (times only)."""
    first: int | None = None
    last: int | None = None
    """Where the detector cannot tell ``at`` from the runs around it (module docstring):
    the first and last run the new level may have begun at; None: at ``at``."""


def hodges_lehmann(a: Floats, b: Floats) -> tuple[float, float, float]:
    """The Hodges-Lehmann shift from ``a`` to ``b`` (the median of all differences
    ``b_j - a_i``) and Moses' 95% distribution-free interval of it."""
    d = np.sort((b[None, :] - a[:, None]).ravel())
    m, n = len(a), len(b)
    mid = float(np.median(d))
    k = math.floor(m * n / 2 - _Z95 * math.sqrt(m * n * (m + n + 1) / 12))
    if k < 1:
        return mid, float(d[0]), float(d[-1])
    return mid, float(d[k - 1]), float(d[len(d) - k])


def time_steps(
    values: Floats,
    cuts: Sequence[int],
    min_change: float = MIN_CHANGE,
    measured: Floats | None = None,
) -> list[Step]:
    """The steps at ``cuts`` of a series of times (``values``, positive), each judged
    between its neighbouring change points; those under ``min_change`` left out.
    ``measured``: the times as measured, where ``values`` were corrected by the suite's
    reference (``reference.py``): the steps' ``before`` and ``after`` are theirs."""
    bounds = [0, *cuts, len(values)]
    logs = np.log(np.maximum(values, 1e-3))
    measured = values if measured is None else measured
    steps = []
    for i in range(1, len(bounds) - 1):
        a, b = logs[bounds[i - 1] : bounds[i]], logs[bounds[i] : bounds[i + 1]]
        shift, lo, hi = hodges_lehmann(a, b)
        change = math.expm1(shift)
        if abs(change) < min_change or two_speeds(a, b):
            continue
        before = float(np.median(measured[bounds[i - 1] : bounds[i]]))
        after = float(np.median(measured[bounds[i] : bounds[i + 1]]))
        earlier, later = adjacent_ties(
            logs[bounds[i - 1] : bounds[i + 1]], bounds[i] - bounds[i - 1]
        )
        at = bounds[i]
        first, last = (at - earlier, at + later) if earlier or later else (None, None)
        steps.append(Step(at, before, after, change, math.expm1(lo), math.expm1(hi), first, last))
    return steps


def two_speeds(a: Floats, b: Floats, alpha: float = ALPHA) -> bool:
    """Whether the split of log times ``a`` | ``b`` is a series switching between two
    speeds from run to run, not a level that moved: the slower side holds
    :data:`MIXED_RUNS` or more runs as fast as the faster side's level (below the midpoint
    of the two medians), more than the noise allows (binomial tail below ``alpha``, a
    run crossing with the probability of the normal tail beyond half the step, in units
    of the two sides' pooled median absolute deviation).  Only fast runs count: a burst
    makes a run slower, never faster, so slow runs on the fast side are a neighbour's.
    A 100,000-element ``numpy.sort`` in ``bench/history_study.py`` ran 5x slower in
    some runs and not others (the arrays' placement in memory, made anew by each run's
    process), and more often in some stretches of the history: ``+359%`` with 4 of the
    15 runs after it at the old speed."""
    ma, mb = float(np.median(a)), float(np.median(b))
    noise = 1.4826 * float(np.median(np.abs(np.concatenate([a - ma, b - mb]))))
    if noise <= 0:
        return False
    slow = b if mb > ma else a
    fast = int((slow < (ma + mb) / 2).sum())
    if fast < MIXED_RUNS:
        return False
    cross = 0.5 * math.erfc(abs(mb - ma) / (2 * noise) / math.sqrt(2))
    return _binomial_tail(fast, len(slow), cross) < alpha


def _binomial_tail(k: int, n: int, p: float) -> float:
    """P(X >= k) for X ~ Binomial(n, p), summed in logs (n may be thousands of runs)."""
    if p <= 0:
        return 0.0
    if p >= 1:
        return 1.0
    lp, lq = math.log(p), math.log1p(-p)
    total = 0.0
    for j in range(k, n + 1):
        log_term = math.lgamma(n + 1) - math.lgamma(j + 1) - math.lgamma(n - j + 1)
        total += math.exp(log_term + j * lp + (n - j) * lq)
    return min(total, 1.0)


def adjacent_ties(y: Floats, split: int) -> tuple[bool, bool]:
    """Whether the split of ``y`` (log times, one change point's two segments) one run
    before ``split``, and one run after it, is at least 1/:data:`TIE_RATIO` as likely as
    ``split``: least squares on ``y`` clipped to its 5-95% range, as the detector places
    its steps (:func:`_where`), with the noise of ``split``'s fit."""
    n = len(y)
    if n < 3:
        return False, False
    low, high = np.quantile(y, [0.05, 0.95])
    y = np.clip(y, low, high)

    def sse(k: int) -> float:
        return float(((y[:k] - y[:k].mean()) ** 2).sum() + ((y[k:] - y[k:].mean()) ** 2).sum())

    own = sse(split)
    noise = own / (n - 2)
    if noise <= 0:
        return False, False
    limit = 2 * noise * math.log(TIE_RATIO)
    earlier = split - 1 >= 1 and sse(split - 1) - own < limit
    later = split + 1 <= n - 1 and sse(split + 1) - own < limit
    return earlier, later


def find_time_changes(
    matrix: Times, alpha: float = ALPHA, min_size: int = MIN_SIZE, noise: Floats | None = None
) -> dict[int, list[int]]:
    """Row -> change points, for the rows of ``matrix`` (series x runs, no NaN) that
    have any: one pass over all rows at once, then segmentation of the few
    whose top split is significant.  ``noise``: each row's (:func:`noise_widths`), for
    the shift test inside the segmentation."""
    if matrix.size == 0:
        return {}
    first = rank_split(matrix, min_size=min_size, alpha=alpha)
    out: dict[int, list[int]] = {}
    for row in np.flatnonzero(first[:, 0] >= 0):
        width = None if noise is None else float(noise[row])
        out[int(row)] = segment(matrix[row], alpha, min_size, int(first[row, 0]), width)
    return out


def noise_widths(logs: Times, groups: npt.NDArray[np.int64]) -> Floats:
    """Per row of ``logs`` (series x runs, log times, no NaN), its run-to-run noise: the
    root mean square of its successive differences, each capped at :data:`SHIFT_CLIP`
    widths of their median absolute deviation (a step is one difference, a burst two,
    either capped), over ``sqrt(2)`` and scaled to a normal's; then the root mean square
    of its own and the median of its group's (``groups``: the same op in every test, as
    ``reference.py`` groups them).  Why each part, in ``bench/history_study.py``'s nine
    studies (46 runs): with the median deviation alone (heavy tails read as narrow) the
    shift test made one more false change point; with the series' own width alone (an
    underestimate is a false step, so the threshold must allow for it) it found 4 of 63
    injected steps fewer."""
    d = np.diff(logs, axis=1)
    d -= np.median(d, axis=1, keepdims=True)
    mad = 1.4826 * np.median(np.abs(d), axis=1)
    c = SHIFT_CLIP
    # E[min(Z^2, c^2)] for a standard normal Z: what the cap leaves of a normal's variance.
    kept = (
        math.erf(c / math.sqrt(2))
        - 2 * c * math.exp(-c * c / 2) / math.sqrt(2 * math.pi)
        + c * c * math.erfc(c / math.sqrt(2))
    )
    cap = (c * mad)[:, None] ** 2
    own: Floats = np.sqrt(np.mean(np.minimum(d * d, cap), axis=1, dtype=np.float64) / (2 * kept))
    out: Floats = own.copy()
    for g in np.unique(groups):
        rows = np.flatnonzero(groups == g)
        pooled = float(np.median(own[rows]))
        out[rows] = np.sqrt((own[rows] ** 2 + pooled**2) / 2)
    return out


def shift_split(
    x: Times, noise: float, lo: int, hi: int, min_size: int = MIN_SIZE, alpha: float = ALPHA
) -> Floats:
    """As :func:`rank_split` for one series ``x`` (times) over runs ``lo:hi``, by the
    shift test: the log times, each clipped at :data:`SHIFT_CLIP` ``noise`` widths about
    the median of its side of the least-squares split (of the 5-95% clipped logs, as
    :func:`_where`), then the largest ``|z|`` over splits of the difference of means,
    ``noise`` taken as known; Bonferroni over the splits.  Where a rank test needs runs
    (two segments of 12 and 8 runs, all apart, reach p = 0.003 after the search over
    15 splits), this one needs size: a +10% step between them at 4% noise is z = 5.2."""
    out = np.array([-1.0, 1.0])
    y = np.log(np.maximum(x[lo:hi].astype(np.float64), 1e-3))
    n = len(y)
    if n < 2 * min_size or noise <= 0:
        return out
    t = np.arange(min_size, n - min_size + 1, dtype=np.float64)
    low, high = np.quantile(y, [0.05, 0.95])
    yc = np.clip(y, low, high)
    before = np.cumsum(yc)[min_size - 1 : n - min_size]
    gain = t * (n - t) * (before / t - (yc.sum() - before) / (n - t)) ** 2
    k0 = int(np.argmax(gain)) + min_size
    fit = np.where(np.arange(n) < k0, np.median(y[:k0]), np.median(y[k0:]))
    w = fit + np.clip(y - fit, -SHIFT_CLIP * noise, SHIFT_CLIP * noise)
    cb = np.cumsum(w)[min_size - 1 : n - min_size]
    z = np.abs(cb / t - (w.sum() - cb) / (n - t)) / (noise * np.sqrt(1 / t + 1 / (n - t)))
    out[1] = min(1.0, math.erfc(float(np.max(z)) / math.sqrt(2)) * len(t))
    if out[1] < alpha:
        out[0] = int(_where(x[None, lo:hi], t, min_size)[0]) + lo
    return out
