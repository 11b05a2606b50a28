"""The head side of an A/B run: each test's rounds interleaved with its base partner's.

Every pair runs the base's round, then the head's: B H B H ..., so each round follows a
round of the other side, and a slow phase of the machine or a neighbour that comes and
goes falls on both sides alike.  (ABBA order, ``--opprof-ab-order=abba``, lets the first
round of each pair follow its own side's, on caches the other side has not touched: an
order effect of up to 20% per pair on numpy work, docs/ab.md "Order of rounds".)

The head's rounds of the pairs run in the head's partner, a process like the base's that
runs this tree (``--opprof-ab-head=partner``): measured in this pytest process, the same
pure-Python loop ran 2-12% slower than in the base's partner, run after run (docs/ab.md,
"Two partners").  This process runs each test once more, measured, for its outcome, its
report and its exact figures.  The first pair always runs; more run only while the A/B
judge (``judge.py``) says a figure is undecided and may have regressed, up to the test's
share of the budget.  pytest's own call is the last warm-up (or, with no warm-up, the
measured round), as on the base side.
"""

from __future__ import annotations

import time
from collections.abc import Generator, Sequence

import pytest

from pytest_opprof.ab.replicas import Replicas, ReplicatedTest
from pytest_opprof.capture import threadpools
from pytest_opprof.gate.summary import RoundFigures
from pytest_opprof.plugin.marker import TestSettings
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

    collector_paused = True

    base: Replicas

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        from pytest_opprof.ab.session import ABSession

        if isinstance(self.gate, ABSession):
            self.gate.judge_ab.horizon(len(session.items))
            self.gate.head_nodeids.update(item.nodeid for item in session.items)

    def pytest_sessionfinish(self) -> None:
        super().pytest_sessionfinish()
        self._quit_partners()  # a session that stopped early (-x, an interrupt)

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_runtest_protocol(
        self, item: pytest.Item, nextitem: pytest.Item | None
    ) -> Generator[None, object, object]:
        item.stash[next_key] = nextitem.nodeid if nextitem is not None else None
        try:
            return (yield)
        finally:
            if nextitem is None:  # this process's last test: the partners end meanwhile
                self._quit_partners()

    def _quit_partners(self) -> None:
        """Let the partners end (they exit once their fixtures are torn down) while this
        process writes its reports; ``close`` waits for them."""
        for side in (getattr(self, "base", None), self.head_partner):
            if side is not None:
                side.quit()

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
        base: ReplicatedTest | None = None
        partner: ReplicatedTest | None = None
        pin = threadpools.pinned(self.options.blas_threads)
        pin.__enter__()
        try:
            nextid = item.stash.get(next_key, None)
            base = self.base.begin(item.nodeid, nextid)
            if self.head_partner is not None:
                partner = self.head_partner.begin(item.nodeid, nextid)
            # pytest's own call is the last warm-up when there is one, so every measured
            # round runs through run_round, on a fresh layout (plugin/layout.py).
            own_call_warms = settings.warmup > 0
            for _ in range(settings.warmup - own_call_warms):
                item.runtest()
            if own_call_warms:
                result = yield
                if partner is None:
                    self._base_round(base)  # pair 0: the base first
                self._head_round(item, rounds)
            else:
                if partner is None:
                    self._base_round(base)
                started = time.perf_counter_ns()
                with self._round(item, rounds):
                    result = yield
                self.head_ns += time.perf_counter_ns() - started
            # This process's round gives the report and the exact figures; the pairs'
            # head rounds come from the head's partner while it runs them.
            if partner is not None:
                self._pair(base, partner, item, rounds, pairs=0)
            pairs = 1
            while (
                base.present
                and not base.failed
                and not rounds.preempted
                and (partner is None or _running(partner) is not None)
                and gate.more_pairs(base.rounds, _head_rounds(partner, rounds, settings), overrides)
            ):
                self._pair(base, partner, item, rounds, pairs)
                pairs += 1
            return result
        finally:
            pin.__exit__(None, None, None)
            if base is not None:
                self.base.end(base)
            if partner is not None and self.head_partner is not None:
                self.head_partner.end(partner)
            gate.spent[item.nodeid] = (self.base_ns, self.head_ns)
            self.base_ns = self.head_ns = 0
            if self.end_call(item, settings, rounds) and base is not None:
                gate.pending[item.nodeid] = (base, list(_head_rounds(partner, rounds, settings)))

    def _pair(
        self,
        base: ReplicatedTest,
        partner: ReplicatedTest | None,
        item: pytest.Item,
        rounds: Rounds,
        pairs: int,
    ) -> None:
        """One pair: the base's round and the head's (its partner's while it runs them),
        base first unless ABBA order puts the head first in odd pairs."""

        def head() -> None:
            running = _running(partner)
            if running is not None and self.head_partner is not None:
                started = time.perf_counter_ns()
                self.head_partner.round(running)
                self.head_ns += time.perf_counter_ns() - started
            else:
                self._head_round(item, rounds)

        if self.abba and pairs % 2:
            head()
            self._base_round(base)
        else:
            self._base_round(base)
            head()

    head_partner: Replicas | None = None
    """The head's partner (``--opprof-ab-head=partner``): this tree in a process like the
    base's, where the pairs' head rounds run (docs/ab.md, "Two partners")."""
    abba = False
    """Pairs in ABBA order (``--opprof-ab-order=abba``): B H, H B, B H, ...; else every
    pair runs B H, so each round follows the other side's (docs/ab.md, "Order of rounds")."""
    base_ns = 0
    """ns this test's base rounds took the head (``ABSession.spent``)."""
    head_ns = 0

    def _base_round(self, base: ReplicatedTest) -> None:
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
            for side in (getattr(self, "base", None), self.head_partner):
                if side is not None:
                    side.close()


def _running(partner: ReplicatedTest | None) -> ReplicatedTest | None:
    """The head's partner's copy of the test while it runs the head rounds: it has the
    test and has not failed it (else this process measures them, as without a partner)."""
    if partner is not None and partner.present and not partner.failed:
        return partner
    return None


def _head_rounds(
    partner: ReplicatedTest | None, rounds: Rounds, settings: TestSettings
) -> Sequence[RoundFigures]:
    """The pairs' head rounds: the partner's once it ran any (if it failed the test after,
    the pairs stop there), else this process's."""
    if partner is not None and partner.present and partner.rounds:
        return partner.rounds
    return rounds.summarised(settings)
