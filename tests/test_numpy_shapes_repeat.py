"""record_shapes over repeated calls: an op whose shapes equal the thread's
previous op shares that shape entry (native/core.c: opprof_op_shapes) and the
drain resolves repeated refs from a per-thread cache (native/drain.c).  What
must hold is what the records say: every event's shapes and dtypes are its
own, in any order of repeats and changes."""

from __future__ import annotations

import numpy as np
from thread_helpers import run_threads

import pytest_opprof as opprof
from pytest_opprof.native_layout.records import FLAG_TRUNCATED, Records


def _record(fn: object) -> Records:
    with opprof.profile(capture=["numpy"], record_shapes=True, profile_memory=False) as prof:
        fn()  # type: ignore[operator]
    return prof.records()


def _adds(recs: Records) -> list[tuple[list[list[int]], list[str]]]:
    ev = recs.events
    add = recs.names.index("numpy.add")
    rows = ev[(ev["name"] == add)]
    rows = rows[np.argsort(rows["start_ns"], kind="stable")]
    return [(recs.shapes[int(s)], list(recs.dtypes[int(s)])) for s in rows["shape"]]


def test_repeats_and_changes_keep_each_events_shapes() -> None:
    a, b = np.ones(8), np.ones((2, 3))
    i = np.ones(8, dtype=np.int64)
    order = [a, a, a, b, b, a, i, i, a, b, a, a]

    def run() -> None:
        for x in order:
            np.add(x, x)

    got = _adds(_record(run))
    want = [([list(x.shape)] * 2, [str(x.dtype)] * 2) for x in order]
    assert got == want


def test_equal_shapes_in_one_session_get_one_id_and_differing_dtypes_do_not() -> None:
    a, f32 = np.ones(8), np.ones(8, dtype=np.float32)

    def run() -> None:
        for _ in range(50):
            np.add(a, a)
        np.add(f32, f32)
        for _ in range(50):
            np.add(a, a)

    recs = _record(run)
    ev = recs.events
    ids = ev["shape"][ev["name"] == recs.names.index("numpy.add")]
    assert len(set(ids.tolist())) == 2
    assert sorted(np.bincount(ids).tolist())[-2:] == [1, 100]


def test_truncated_flag_stays_per_event_when_shapes_repeat() -> None:
    m = np.ones((2, 2))

    def run() -> None:
        # 9 positional arguments: past the 8 kept
        np.einsum("ab,bc,cd,de,ef,fg,gh,hi->ai", m, m, m, m, m, m, m, m)
        np.einsum("ab,bc,cd,de,ef,fg,gh,hi->ai", m, m, m, m, m, m, m, m)
        np.einsum("ij,jk->ik", m, m)

    recs = _record(run)
    ev = recs.events
    rows = ev[ev["name"] == recs.names.index("numpy.einsum")]
    rows = rows[np.argsort(rows["start_ns"], kind="stable")]
    truncated = [bool(f & FLAG_TRUNCATED) for f in rows["flags"]]
    assert truncated == [True, True, False]
    assert [len(recs.shapes[int(s)]) for s in rows["shape"]] == [8, 8, 3]


def test_threads_repeating_different_shapes_each_keep_their_own() -> None:
    # Arrays made up front: each thread's first entry then sits at the same
    # arena position (same ref) with different shapes.
    shapes = [(3,), (2, 2), (5, 1, 2)]
    arrays = [np.ones(s) for s in shapes]

    def work(x: np.ndarray) -> None:
        for _ in range(200):
            np.add(x, x)

    def run() -> None:
        run_threads(work, [(x,) for x in arrays])

    recs = _record(run)
    ev = recs.events
    rows = ev[ev["name"] == recs.names.index("numpy.add")]
    by_thread: dict[int, set[str]] = {}
    for tid, s in zip(rows["thread"].tolist(), rows["shape"].tolist(), strict=True):
        by_thread.setdefault(tid, set()).add(repr(recs.shapes[s]))
    assert sorted(by_thread.values(), key=repr) == sorted(
        ({repr([list(s), list(s)])} for s in shapes), key=repr
    )
