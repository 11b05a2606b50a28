"""The suite as its own speed reference: how much of a run's time every test shared.

A machine's speed moves between runs: on this 2-CPU VM, in a quiet 44-commit study
(``bench/history_study.py``), the median self time of ``numpy.add`` over the 15 tests
that call it went from 28% under its level to 50% over it in 46 runs, a pure-Python
scope's over 24 tests by up to 7%.  Every test that calls an op moves with it, so each
series alone reads the machine's phases as steps (32 false change points in 230 series
there); the same op in the other tests of the same run says how much of a move was the
machine's (2 false change points with it; BENCHMARKS.md has every run).

Per group of series (one op's self time in every test that calls it, or every test's
own time) and per run, the **reference** of a series is the median, over the group's
other series present in that run, of their log times less each one's median over the
runs (leave-one-out: a series that stepped does not move its own reference).  Each
series then loses ``beta`` times its reference, ``beta`` the least-squares slope of its
log times on the reference, in ``[0, 1]``: ops follow the machine in different measure
(a memory-bound copy more than a pure-Python loop, some not at all: subtracting the
whole move from every series made steps of its own in those that do not follow it), and
no series loses more than its peers moved, so a test's own step in the run where the
machine also moved stays its own (a slope fitted freely took it for more machine).  A
series with fewer than ``MIN_PEERS`` others of its group in a run keeps that run as
measured.

What this cannot see: a commit that slows an op in every test alike (a change of a
helper every test calls) is the same thing to a history as a slower machine, and is
taken for it; such a change is a step of a deterministic figure (FLOPs, calls, bytes)
where it changes the work, a step beyond tolerance is the baseline gate's, and
``pytest-opprof history --no-reference`` searches the times as measured.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

Floats = npt.NDArray[np.float64]

MIN_PEERS = 4
"""The fewest other series of a group in a run for its reference to be used."""
MAX_BETA = 1.0
"""The largest share of its peers' move a series loses (see the module docstring)."""


def reference_factors(logs: Floats, groups: npt.NDArray[np.int64]) -> Floats:
    """Per row of ``logs`` (series x runs, log times, NaN where absent), the log
    factor the suite's reference explains in each run (``beta * reference``; 0 where
    a run has fewer than ``MIN_PEERS`` other series of its group).  ``groups``: each
    row's group id."""
    out = np.zeros_like(logs)
    for g in np.unique(groups):
        rows = np.flatnonzero(groups == g)
        if len(rows) > MIN_PEERS:
            out[rows] = _group_factors(logs[rows])
    return out


def _group_factors(y: Floats) -> Floats:
    centred = y - _nanmedian_rows(y)[:, None]
    ref = _leave_one_out_median(centred)
    usable = ~np.isnan(centred) & ~np.isnan(ref)
    fitted = usable.sum(axis=1) >= 2 * MIN_PEERS
    beta = np.zeros(len(y))
    if fitted.any():
        # The slope over the runs where both are there: zeros elsewhere add nothing.
        w = usable[fitted]
        count = w.sum(axis=1)
        v = np.where(w, centred[fitted], 0.0)
        r = np.where(w, ref[fitted], 0.0)
        v -= (v.sum(axis=1) / count)[:, None]
        r -= (r.sum(axis=1) / count)[:, None]
        v *= w
        r *= w
        denom = np.einsum("ij,ij->i", r, r)
        slope = np.einsum("ij,ij->i", r, v) / np.where(denom > 0, denom, 1.0)
        beta[fitted] = np.clip(slope, 0.0, MAX_BETA)
    ref[~usable] = 0.0
    ref *= beta[:, None]
    return ref


def _nanmedian_rows(y: Floats) -> Floats:
    """Each row's median over its present values (0 for a row with none)."""
    gaps = np.isnan(y)
    if not gaps.any():
        return np.median(y, axis=1)
    out = np.zeros(len(y))
    some = ~gaps.all(axis=1)
    if some.any():
        out[some] = np.nanmedian(y[some], axis=1)
    return out


def _leave_one_out_median(y: Floats) -> Floats:
    """``[i, r]``: the median of column ``r`` of ``y`` without row ``i`` (NaN where row
    ``i`` is absent or fewer than ``MIN_PEERS`` other rows are present).  Worked on
    runs x series, so each sort runs along contiguous memory (3x faster here)."""
    yt = np.ascontiguousarray(y.T)
    rows = yt.shape[1]
    if not np.isnan(yt).any():
        return np.ascontiguousarray(_leave_one_out_full(yt, rows).T)
    order = np.argsort(yt, axis=1)  # NaN sorts last
    s = np.take_along_axis(yt, order, axis=1)
    rank = np.empty_like(order)
    np.put_along_axis(rank, order, np.arange(rows)[None, :], axis=1)
    others = ((~np.isnan(yt)).sum(axis=1) - 1)[:, None]  # present, without row i
    out = 0.5 * (_reduced(s, rank, (others - 1) // 2) + _reduced(s, rank, others // 2))
    out[np.broadcast_to(others < MIN_PEERS, out.shape) | np.isnan(yt)] = np.nan
    return np.ascontiguousarray(out.T)


def _leave_one_out_full(yt: Floats, rows: int) -> Floats:
    """As :func:`_leave_one_out_median` where every series is in every run: only the
    order statistics around the middle matter, found by partition, not a sort.  Taking
    out a value above the ``k``-th smallest leaves it; taking out one at or below it
    moves it to the next (equal values give the same either way)."""
    m = rows - 1
    if m < MIN_PEERS:
        return np.full(yt.shape, np.nan)
    a, b = (m - 1) // 2, m // 2
    part = np.partition(yt, sorted({a, a + 1, b, b + 1}), axis=1)
    out = np.zeros(yt.shape)
    for k in (a, b):
        out += np.where(yt > part[:, k : k + 1], part[:, k : k + 1], part[:, k + 1 : k + 2])
    return 0.5 * out


def _reduced(s: Floats, rank: npt.NDArray[Any], k: npt.NDArray[Any]) -> Floats:
    """Per run (a row of ``s``, sorted), the ``k``-th smallest once series ``i``, at
    ``rank[:, i]``, is taken out."""
    j = np.clip(np.where(k < rank, k, k + 1), 0, s.shape[1] - 1)
    return np.take_along_axis(s, j, axis=1)
