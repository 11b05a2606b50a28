"""Drained events live in pooled blocks: reused once the Records array is collected,
never while any view of it is alive, and the pool's size is bounded."""

from __future__ import annotations

import gc

import numpy as np

import pytest_opprof as opprof
from pytest_opprof import _native


def drained(n_ops: int) -> np.ndarray:
    x = np.ones(4)
    with opprof.profile(capture=["numpy"], profile_memory=False) as prof:
        for _ in range(n_ops):
            np.add(x, x)
    return prof.records().events


def test_a_collected_drain_gives_its_block_back_and_the_next_drain_takes_it() -> None:
    gc.collect()
    events = drained(5000)
    assert len(events) == 5000
    held_before = _native.pool_held_bytes()
    del events
    gc.collect()
    held = _native.pool_held_bytes()
    assert held >= held_before + 5000 * _native.EVENT_DTYPE.itemsize
    events = drained(4000)  # fits in the block just given back
    assert _native.pool_held_bytes() <= held - 5000 * _native.EVENT_DTYPE.itemsize
    assert len(events) == 4000


def test_live_events_are_never_overwritten_by_a_later_drain() -> None:
    first = drained(3000)
    view = first[100:200]
    snapshot = first.copy()
    del first
    gc.collect()  # the view keeps the block out of the pool
    for _ in range(3):
        drained(3000)
    assert np.array_equal(view, snapshot[100:200])


def test_the_pool_keeps_at_most_64_mib_in_four_blocks() -> None:
    lib = _native.lib
    earlier = []  # blocks earlier tests' drains gave back: out of the pool meanwhile
    while _native.pool_held_bytes():
        earlier.append(lib.opprof_pool_take(1))
    try:
        blocks = [lib.opprof_pool_take(20 << 20) for _ in range(6)]  # untouched: no RSS
        assert all(b != _native.ffi.NULL for b in blocks)
        for block in blocks:
            lib.opprof_pool_give(block)
        held = _native.pool_held_bytes()
        assert held == 3 * (20 << 20)  # three fit under the bound, a fourth does not
        taken = [lib.opprof_pool_take(20 << 20) for _ in range(3)]
        assert _native.pool_held_bytes() == 0
        for block in taken:
            lib.opprof_pool_give(block)
    finally:
        for block in earlier:
            lib.opprof_pool_give(block)


def test_drained_events_are_writable_like_any_array() -> None:
    events = drained(10)
    events["flags"] |= 0  # the model may update fields in place
    assert events.flags.writeable
