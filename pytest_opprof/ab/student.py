"""Student's t distribution for the paired A/B judgement, stdlib only (no scipy at run time).

The CDF goes through the regularized incomplete beta function, evaluated by its continued
fraction (modified Lentz); the quantile inverts the CDF by safeguarded Newton steps.  Both
agree with ``scipy.stats.t`` to 1e-9 (``tests/test_ab_paired.py``) for any positive,
possibly fractional, degrees of freedom: the moderated t of :mod:`pytest_opprof.ab.paired`
has ``prior_df + pairs - 1`` of them.
"""

from __future__ import annotations

import math
from statistics import NormalDist

_EPS = 1e-16
_TINY = 1e-300
_MAX_TERMS = 100_000


def _beta_fraction(a: float, b: float, x: float) -> float:
    """The continued fraction of I_x(a, b); it converges fast for x < (a + 1) / (a + b + 2)."""
    c, d = 1.0, 1.0 - (a + b) * x / (a + 1.0)
    d = 1.0 / (d if abs(d) > _TINY else _TINY)
    h = d
    for m in range(1, _MAX_TERMS):
        for numerator in (
            m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
            -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1)),
        ):
            d = 1.0 + numerator * d
            d = 1.0 / (d if abs(d) > _TINY else _TINY)
            c = 1.0 + numerator / c
            c = c if abs(c) > _TINY else _TINY
            h *= d * c
        if abs(d * c - 1.0) < _EPS:
            return h
    raise ArithmeticError(f"incomplete beta fraction did not converge for a={a}, b={b}, x={x}")


def betainc(a: float, b: float, x: float) -> float:
    """The regularized incomplete beta function I_x(a, b), for a, b > 0 and 0 <= x <= 1."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    log_front = (
        math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    )
    if x < (a + 1.0) / (a + b + 2.0):
        return math.exp(log_front) * _beta_fraction(a, b, x) / a
    return 1.0 - math.exp(log_front) * _beta_fraction(b, a, 1.0 - x) / b


def t_sf(t: float, df: float) -> float:
    """P(T >= t) for Student's t with ``df`` degrees of freedom (the upper tail)."""
    if math.isnan(t):
        return math.nan
    if math.isinf(t):
        return 0.0 if t > 0 else 1.0
    # The upper tail is I_x(df/2, 1/2) / 2 with x = df / (df + t^2); the continued
    # fraction runs on whichever of x and 1 - x converges, and 1 - x is formed as
    # t^2 / (df + t^2) rather than by subtraction, which would cancel near t = 0.
    t2 = t * t
    a = 0.5 * df
    x = df / (df + t2)
    if x < (a + 1.0) / (a + 2.5):
        tail = 0.5 * betainc(a, 0.5, x)
    else:
        tail = 0.5 - 0.5 * betainc(0.5, a, t2 / (df + t2))
    return tail if t > 0 else 1.0 - tail


def t_cdf(t: float, df: float) -> float:
    """P(T <= t) for Student's t with ``df`` degrees of freedom."""
    return t_sf(-t, df)


def t_pdf(t: float, df: float) -> float:
    """The density of Student's t with ``df`` degrees of freedom at ``t``."""
    log_norm = math.lgamma(0.5 * (df + 1)) - math.lgamma(0.5 * df) - 0.5 * math.log(df * math.pi)
    return math.exp(log_norm - 0.5 * (df + 1) * math.log1p(t * t / df))


def t_ppf(p: float, df: float) -> float:
    """The quantile: the t with P(T <= t) = p, for 0 < p < 1."""
    if not 0.0 < p < 1.0:
        raise ValueError(f"t_ppf needs 0 < p < 1, got {p}")
    if p > 0.5:
        return -t_ppf(1.0 - p, df)
    if p == 0.5:
        return 0.0
    # Lower tail from here on: find a bracket [lo, hi] around the root, then Newton steps
    # from the normal quantile, bisecting whenever a step leaves the bracket (heavy tails).
    hi = 0.0
    lo = min(NormalDist().inv_cdf(p), -1.0)
    while t_cdf(lo, df) > p:
        hi, lo = lo, 2.0 * lo
    x = lo
    for _ in range(400):
        gap = t_cdf(x, df) - p
        if gap > 0:
            hi = x
        else:
            lo = x
        density = t_pdf(x, df)
        step = gap / density if density > 0 else math.inf
        nxt = x - step
        if not lo < nxt < hi:
            nxt = 0.5 * (lo + hi)
        if abs(nxt - x) <= 1e-15 * max(1.0, abs(x)):
            return nxt
        x = nxt
    return x
