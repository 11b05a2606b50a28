"""record_function's fast doors to the native scope API (native/fastscope.c)."""

from __future__ import annotations

import types

import pytest
from thread_helpers import run_threads

import pytest_opprof as opprof
from pytest_opprof import _native
from pytest_opprof.errors import NativeError


def test_doors_are_builtins_called_with_the_gil() -> None:
    assert isinstance(_native.scope_push_fast, types.BuiltinFunctionType)
    assert isinstance(_native.scope_pop_fast, types.BuiltinFunctionType)


def test_pop_without_open_scope_returns_the_status_and_sets_the_error() -> None:
    status = _native.scope_pop_fast(0, 0)
    assert status == int(_native.lib.OPPROF_E_STATE)
    with pytest.raises(NativeError, match="no open scope"):
        _native.check(status)


@pytest.mark.parametrize("bad", [-1, 2**32, 2**70])
def test_name_ids_out_of_range_raise(bad: int) -> None:
    with pytest.raises(OverflowError):
        _native.scope_push_fast(bad)


def test_non_int_argument_raises_type_error() -> None:
    with pytest.raises(TypeError):
        _native.scope_push_fast("scope")


def test_scopes_nest_and_flag_exceptions_through_the_fast_path() -> None:
    with opprof.profile(capture=["none"]) as prof:
        with opprof.record_function("outer"):
            with pytest.raises(ValueError), opprof.record_function("inner"):
                raise ValueError("boom")
    events = {e.name: e for e in prof.events()}
    assert events["inner"].cpu_parent is events["outer"]
    assert events["inner"].is_exception and not events["outer"].is_exception


def test_scopes_from_threads_stay_per_thread() -> None:
    def work() -> None:
        for _ in range(100):
            with opprof.record_function("worker"):
                pass

    with opprof.profile(capture=["none"]) as prof:
        run_threads(work, [()] * 4)
    rows = {r.key: r for r in prof.key_averages()}
    assert rows["worker"].count == 400
    assert len({e.thread for e in prof.events()}) == 4
