"""record_function scopes close by their own handle, not by the thread's innermost scope.

Coroutines and generators interleave scopes on one thread: ``asyncio.gather``
of A (10 ms) and B (50 ms) opens A, then B, then closes A first.  Closed by
"pop the innermost", A was recorded as 55 ms with B as its child.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator

import numpy as np
import pytest

import pytest_opprof as opprof
from pytest_opprof import _native
from pytest_opprof.errors import NativeError
from pytest_opprof.model import EventList, FunctionEvent


def by_name(events: EventList) -> dict[str, FunctionEvent]:
    named = {}
    for event in events:
        assert event.name not in named, f"{event.name} recorded twice"
        named[event.name] = event
    return named


def test_gathered_coroutines_get_their_own_names_and_times() -> None:
    async def work(name: str, seconds: float) -> None:
        with opprof.record_function(name):
            await asyncio.sleep(seconds)

    async def main() -> None:
        await asyncio.gather(work("A", 0.010), work("B", 0.050))

    with opprof.profile(capture=["none"]) as prof:
        asyncio.run(main())
    events = by_name(prof.events())
    a, b = events["A"], events["B"]
    # A's sleep is 10 ms, B's 50: a busy machine only makes both longer.
    assert 10_000 <= a.cpu_time_total < 40_000
    assert b.cpu_time_total >= 50_000
    assert a.cpu_time_total < b.cpu_time_total
    # B began inside A and ended after it: no relation, as torch's interval nesting says.
    assert b.cpu_parent is None and a.cpu_parent is None
    assert a.cpu_children == [] and b.cpu_children == []
    # Self time is total less the profiler's calibrated cost of the scope itself.
    assert a.cpu_time_total - 5 <= a.self_cpu_time_total <= a.cpu_time_total


def test_ops_of_a_coroutine_after_the_other_scope_closed_stay_in_their_scope() -> None:
    x = np.ones(64)

    async def short() -> None:
        with opprof.record_function("short"):
            await asyncio.sleep(0)

    async def long() -> None:
        with opprof.record_function("long"):
            await asyncio.sleep(0.005)
            np.add(x, x)

    async def main() -> None:
        await asyncio.gather(short(), long())

    with opprof.profile(capture=["numpy"]) as prof:
        asyncio.run(main())
    events = prof.events()
    add = [e for e in events if e.name == "numpy.add"]
    assert len(add) == 1
    assert add[0].cpu_parent is not None and add[0].cpu_parent.name == "long"
    named = {e.name: e for e in events if e.name in ("short", "long")}
    assert named["long"].self_cpu_time_total >= 0
    assert named["long"].cpu_parent is None


def scoped_numbers(n: int) -> Iterator[int]:
    with opprof.record_function("generator"):
        yield from range(n)


def test_generator_scope_outliving_its_caller_scope() -> None:
    with opprof.profile(capture=["none"]) as prof:
        with opprof.record_function("caller"):
            numbers = scoped_numbers(3)
            assert next(numbers) == 0  # the generator's scope opens inside "caller"
        with opprof.record_function("later"):
            assert list(numbers) == [1, 2]  # ... and closes inside "later"
    events = by_name(prof.events())
    caller, generator, later = events["caller"], events["generator"], events["later"]
    assert caller.time_range.end <= later.time_range.start
    assert caller.time_range.start <= generator.time_range.start < caller.time_range.end
    assert later.time_range.start < generator.time_range.end <= later.time_range.end
    # Overlapping, not nested: nobody is anybody's parent, and no self time is negative.
    assert {e.cpu_parent for e in (caller, generator, later)} == {None}
    assert all(e.self_cpu_time_total >= 0 for e in (caller, generator, later))


def test_scope_closed_out_of_order_hands_its_children_to_its_parent() -> None:
    outer = opprof.record_function("outer")
    middle = opprof.record_function("middle")
    inner = opprof.record_function("inner")
    with opprof.profile(capture=["none"]) as prof:
        outer.__enter__()
        middle.__enter__()
        inner.__enter__()
        middle.__exit__(None, None, None)  # not the innermost
        with opprof.record_function("after middle"):
            pass
        inner.__exit__(None, None, None)
        with opprof.record_function("after inner"):
            pass
        outer.__exit__(None, None, None)
    events = by_name(prof.events())
    assert events["middle"].cpu_parent is events["outer"]
    assert events["inner"].cpu_parent is events["outer"]
    assert events["after middle"].cpu_parent is events["inner"]
    assert events["after inner"].cpu_parent is events["outer"]
    assert events["middle"].time_range.end <= events["inner"].time_range.end


def test_memory_after_an_out_of_order_close_goes_to_the_open_scope() -> None:
    first = opprof.record_function("first")
    second = opprof.record_function("second")
    with opprof.profile(capture=["none"], profile_memory=True) as prof:
        first.__enter__()
        second.__enter__()
        first.__exit__(None, None, None)
        kept = np.ones(100_000)  # 800 kB while "second" is the only open scope
        second.__exit__(None, None, None)
    del kept
    events = by_name(prof.events())
    assert events["second"].self_cpu_memory_usage >= 800_000
    assert events["first"].self_cpu_memory_usage < 800_000


def test_the_stack_balances_after_interleaved_scopes() -> None:
    # Many interleaved coroutines, then plain nesting must still link parents.
    async def work(i: int) -> None:
        with opprof.record_function(f"task {i % 3}"):
            await asyncio.sleep(0.001 * (i % 4))

    async def main() -> None:
        await asyncio.gather(*(work(i) for i in range(30)))

    with opprof.profile(capture=["none"]) as prof:
        asyncio.run(main())
        with opprof.record_function("outer"), opprof.record_function("inner"):
            pass
    rows = {r.key: r for r in prof.key_averages()}
    assert sum(rows[f"task {i}"].count for i in range(3)) == 30
    events = [e for e in prof.events() if e.name in ("outer", "inner")]
    outer, inner = sorted(events, key=lambda e: e.name != "outer")
    assert inner.cpu_parent is outer and outer.cpu_parent is None
    # A later session starts from an empty stack on this thread.
    with opprof.profile(capture=["none"]) as again, opprof.record_function("alone"):
        pass
    assert [e.cpu_parent for e in again.events()] == [None]


def test_closing_on_another_thread_is_an_error_naming_it() -> None:
    scope = opprof.record_function("moved")
    errors: list[BaseException] = []

    def close() -> None:
        try:
            scope.__exit__(None, None, None)
        except BaseException as exc:
            errors.append(exc)

    with opprof.profile(capture=["none"]):
        scope.__enter__()
        with opprof.record_function("opened there"):
            pass
        thread = threading.Thread(target=close)
        thread.start()
        thread.join()
        assert len(errors) == 1 and isinstance(errors[0], NativeError)
        assert "another thread" in str(errors[0])
    # The failed close left the scope open: it still closes on its own thread.
    scope.__exit__(None, None, None)
    assert _native.scope_pop_fast(0, 0) == int(_native.lib.OPPROF_E_STATE)


def test_a_handle_closes_once() -> None:
    with opprof.profile(capture=["none"]):
        handle = _native.scope_push_fast(_native.intern("twice"))
        with opprof.record_function("keeps the stack non-empty"):
            assert _native.scope_pop_fast(handle, 0) == 0
            status = _native.scope_pop_fast(handle, 0)
        assert status == int(_native.lib.OPPROF_E_STATE)
        with pytest.raises(NativeError, match="closed twice"):
            _native.check(status)
