"""A fresh memory layout for every round of an A/B run, on both sides.

How fast the same Python code runs depends on where its objects lie in memory (cache
sets, pages, alignment), and that layout is set by everything the process allocated
before: it differs between the base and the head process and between one test and the
next, and holds still while one test's rounds run.  Measured here (``docs/ab.md``,
"Memory layout"): an unchanged pure-Python loop ran up to 10% slower in one process than
in the other for all eight pairs of one test and 0.3% for the next test's, so pairs
agreed with each other about a difference that was not there and an A/A run of 40 tests
at 8 pairs failed 3.

Shuffling the small-object heap before each round draws a new layout per round (the
idea of STABILIZER, Curtsinger and Berger, ASPLOS 2013, done for Python's allocator):
the layout's effect becomes scatter between pairs, which the pairs average and the noise
model measures, instead of a bias that no number of pairs reveals.
"""

from __future__ import annotations

import contextlib
import os
import random
import sys
from collections.abc import Callable, Iterator
from types import FrameType

MAX_OBJECTS = 2048
"""At most this many small objects are allocated before a round (0.2 ms here, median)."""
MAX_BYTES = 480
"""Their payloads spread over pymalloc's size classes (objects up to 512 bytes)."""
FLOOR_DEPTH = 120
"""A round's body is called at this depth of Python frames or more, whatever depth the
call path that started it had: the head and its partner reach a round through different
hooks, and whatever walks the stack (a traceback, a profiler's unwinding) costs with its
depth: 27 frames deep on the head and 33 on its partner for a plain test here."""
SPREAD_DEPTH = 48
"""...plus a random number of frames below this: where the test's frames lie on the
interpreter's frame stack is part of the layout too."""
C_SPREAD = 32
"""...and reached through a random number of C-level calls below this, each a new
activation of the interpreter's evaluation loop on the C stack: where the C stack lies
against the heap is part of the layout as well, and Python-to-Python calls do not move it
(CPython 3.11 runs them in one activation).  Two identical processes taking turns on one
CPU (``bench/ab_processes.py``, 16 pairs of processes a mode): median offset 2.3% run
plainly, 2.5% at a random Python depth, 1.6% through this whole layout; with address-space
randomisation off as well, as an A/B run's partners start, 0.1%."""


class Layout:
    """A fresh layout for each round: :meth:`round` shuffles the small-object heap (a
    random number of objects of random sizes allocated and a random part of them freed,
    the rest kept alive until the round ends, so the round's own objects land at
    addresses no earlier round used in the same order); :meth:`call` runs a round's body
    at a random depth of Python frames above a floor both sides share, reached through a
    random number of C-level calls."""

    def __init__(self, seed: int | None = None) -> None:
        self._rng = random.Random(seed if seed is not None else os.urandom(8))

    @contextlib.contextmanager
    def round(self) -> Iterator[None]:
        # One draw of random bytes gives every size and every keep-or-free: drawing each
        # from the generator took twice as long (0.38 ms a round against 0.20 ms here).
        count = self._rng.randrange(MAX_OBJECTS)
        raw = self._rng.randbytes(2 * count)
        pad = [_filler(b * MAX_BYTES >> 8) for b in raw[:count]]
        keep = [obj for obj, bit in zip(pad, raw[count:], strict=True) if bit & 1]
        del pad
        try:
            yield
        finally:
            del keep

    def call(self, body: Callable[[], object]) -> None:
        """``body()`` called at ``FLOOR_DEPTH`` plus a random number of frames; the
        recursion limit is raised by as many frames while it runs, so a test that recurses
        close to the limit behaves as it does without the plugin."""
        pad = max(FLOOR_DEPTH + self._rng.randrange(SPREAD_DEPTH) - _depth(), 0)
        through_c = self._rng.randrange(C_SPREAD)
        raised = pad + 2 * through_c
        limit = sys.getrecursionlimit()
        sys.setrecursionlimit(limit + raised)
        try:
            _through_c(through_c, lambda: _at_depth(pad, body))
        finally:
            if sys.getrecursionlimit() == limit + raised:  # unless the test set its own
                sys.setrecursionlimit(limit)


def _filler(size: int) -> object:
    """A new object in the size class of about ``size`` bytes.  A bytes object takes 33
    bytes or more: the 16 and 32-byte classes (``object()``, most ints) get a bare object
    and an int, or those classes kept the layout of the rounds before (and the rounds of
    one test, which free what they allocate, found the same addresses in turn)."""
    if size < 16:
        return object()
    if size < 32:
        return (1 << 40) + size
    return bytes(size)


def _depth() -> int:
    depth = 0
    frame: FrameType | None = sys._getframe(1)
    while frame is not None:
        frame = frame.f_back
        depth += 1
    return depth


def _through_c(levels: int, body: Callable[[], object]) -> None:
    """``body()`` called through ``levels`` calls from C (``map`` calling back into
    Python): each starts a new activation of the evaluation loop, deeper on the C stack."""
    if levels:
        next(map(lambda _: _through_c(levels - 1, body), (0,)))
    else:
        body()


def _at_depth(depth: int, body: Callable[[], object]) -> None:
    if depth:
        _at_depth(depth - 1, body)
    else:
        body()
