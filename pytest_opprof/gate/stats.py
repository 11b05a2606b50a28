"""The significance test of the time verdict: a one-sided Mann-Whitney U test, numpy only."""

from __future__ import annotations

import math
from collections.abc import Sequence
from functools import cache

import numpy as np


def mann_whitney_greater(x: Sequence[float], y: Sequence[float]) -> float:
    """One-sided Mann-Whitney U p-value for "x tends to be larger than y".

    Exact null distribution when there are no ties and both sides have at most
    20 values; otherwise the normal approximation with tie and continuity
    corrections.  numpy only, no scipy.
    """
    xs, ys = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    m, n = len(xs), len(ys)
    if m == 0 or n == 0:
        raise ValueError("mann_whitney_greater needs values on both sides")
    values = np.concatenate([xs, ys])
    _, inverse, counts = np.unique(values, return_inverse=True, return_counts=True)
    average_rank = np.cumsum(counts) - (counts - 1) / 2.0
    ranks = average_rank[inverse]
    u = float(ranks[:m].sum()) - m * (m + 1) / 2.0
    ties = bool((counts > 1).any())
    if not ties and m <= 20 and n <= 20:
        dist = _u_distribution(m, n)
        return float(dist[round(u) :].sum() / dist.sum())
    total = m + n
    tie_term = float((counts**3 - counts).sum()) / (total * (total - 1))
    variance = m * n / 12.0 * ((total + 1) - tie_term)
    if variance <= 0:
        return 1.0
    z = (u - m * n / 2.0 - 0.5) / math.sqrt(variance)
    return 0.5 * math.erfc(z / math.sqrt(2.0))


@cache
def _u_distribution(m: int, n: int) -> np.ndarray:
    """Number of orderings giving each U = 0..m*n for sizes m, n (no ties)."""
    if m == 0 or n == 0:
        return np.ones(1)
    # The largest value is either an x (it beats all n y's: U shifts by n) or a y.
    with_x = np.concatenate([np.zeros(n), _u_distribution(m - 1, n)])
    with_y = _u_distribution(m, n - 1)
    out = np.zeros(m * n + 1)
    out[: len(with_x)] += with_x
    out[: len(with_y)] += with_y
    return out
