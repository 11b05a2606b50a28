"""The head side of an A/B run: each test's rounds interleaved with its base partner's.

Every pair runs the base's round, then the head's: B H B H ..., so each round follows a
round of the other side, and a slow phase of the machine or a neighbour that comes and
goes falls on both sides alike.  (ABBA order, ``--opprof-ab-order=abba``, lets the first
round of each pair follow its own side's, on caches the other side has not touched: an
order effect of up to 20% per pair on numpy work, docs/ab.md "Order of rounds".)  The first pair always runs;
more run only while the A/B judge (``judge.py``) says a figure is undecided and may have
regressed, up to the test's share of the budget.  pytest's own call is the last warm-up
(or, with no warm-up, the first round), as on the base side.
"""

from __future__ import annotations

import time
from collections.abc import Generator

import pytest

from pytest_opprof.ab.base_side import BaseSide, BaseTest
from pytest_opprof.capture import threadpools
from pytest_opprof.plugin.measure import Rounds
from pytest_opprof.plugin.worker import (
    Worker,
    _overrides,
    settings_key,
    threads_before_key,
)

next_key = pytest.StashKey[str | None]()
"""The node id of the test that runs after this one (the base tears down as the head does)."""


class ABWorker(Worker):
    """A :class:`Worker` whose rounds alternate with the base side's (``base``)."""

    base: BaseSide

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        from pytest_opprof.ab.session import ABSession

        if isinstance(self.gate, ABSession):
            self.gate.judge_ab.horizon(len(session.items))
            self.gate.head_nodeids.update(item.nodeid for item in session.items)

    def pytest_sessionfinish(self) -> None:
        super().pytest_sessionfinish()
        self.base.quit()  # the base tears down while the reports are written

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_protocol(self, item: pytest.Item, nextitem: pytest.Item | None) -> None:
        item.stash[next_key] = nextitem.nodeid if nextitem is not None else None

    @pytest.hookimpl(wrapper=True, trylast=True)
    def pytest_runtest_call(self, item: pytest.Item) -> Generator[None, object, object]:
        from pytest_opprof.ab.session import ABSession

        gate = self.gate
        assert isinstance(gate, ABSession)
        settings = item.stash[settings_key]
        overrides = _overrides(settings)
        self.sources.acquire()
        item.stash[threads_before_key] = self.threads.at_call_start()
        rounds = Rounds(references=False)
        base: BaseTest | None = None
        pin = threadpools.pinned(self.options.blas_threads)
        pin.__enter__()
        try:
            base = self.base.begin(item.nodeid, item.stash.get(next_key, None))
            # pytest's own call is the last warm-up when there is one, so every measured
            # round runs through run_round, on a fresh layout (plugin/layout.py).
            own_call_warms = settings.warmup > 0
            for _ in range(settings.warmup - own_call_warms):
                item.runtest()
            if own_call_warms:
                result = yield
                self._base_round(base)  # pair 0: the base first
                self._head_round(item, rounds)
            else:
                self._base_round(base)
                started = time.perf_counter_ns()
                with self._round(item, rounds):
                    result = yield
                self.head_ns += time.perf_counter_ns() - started
            pairs = 1
            while (
                base.present
                and not base.failed
                and not rounds.preempted
                and gate.more_pairs(base.rounds, rounds.summarised(settings), overrides)
            ):
                if self.abba and pairs % 2:
                    self._head_round(item, rounds)
                    self._base_round(base)
                else:
                    self._base_round(base)
                    self._head_round(item, rounds)
                pairs += 1
            return result
        finally:
            pin.__exit__(None, None, None)
            if base is not None:
                self.base.end(base)
            gate.spent[item.nodeid] = (self.base_ns, self.head_ns)
            self.base_ns = self.head_ns = 0
            if self.end_call(item, settings, rounds) and base is not None:
                gate.pending[item.nodeid] = (base, rounds.summarised(settings))

    abba = False
    """Pairs in ABBA order (``--opprof-ab-order=abba``): B H, H B, B H, ...; else every
    pair runs B H, so each round follows the other side's (docs/ab.md, "Order of rounds")."""
    base_ns = 0
    """ns this test's base rounds took the head (``ABSession.spent``)."""
    head_ns = 0

    def _base_round(self, base: BaseTest) -> None:
        started = time.perf_counter_ns()
        self.base.round(base)
        self.base_ns += time.perf_counter_ns() - started

    def _head_round(self, item: pytest.Item, rounds: Rounds) -> None:
        started = time.perf_counter_ns()
        self.run_round(item, rounds)
        self.head_ns += time.perf_counter_ns() - started

    def close(self) -> None:
        try:
            super().close()
        finally:
            base = getattr(self, "base", None)
            if base is not None:
                base.close()
