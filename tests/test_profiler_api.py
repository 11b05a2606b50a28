"""``profile`` and ``record_function``: the torch.profiler-style Python API."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from thread_helpers import run_threads

import pytest_opprof as opprof
from pytest_opprof import _native
from pytest_opprof.capture import recorder, sources
from pytest_opprof.errors import OpprofError
from pytest_opprof.native_layout.records import FLAG_EXCEPTION, KIND_SCOPE, Records


def scope_names(records: Records) -> list[str]:
    """Scope names in start order."""
    ev = records.events[records.events["kind"] == KIND_SCOPE]
    ev = ev[ev["start_ns"].argsort(kind="stable")]
    return [records.names[n] for n in ev["name"]]


@pytest.fixture(autouse=True)
def no_profile_left() -> Iterator[None]:
    yield
    assert recorder._active is None
    assert not _native.is_recording()


def test_profile_context_manager_records_nested_scopes() -> None:
    with opprof.profile(capture=["none"]) as prof:
        with opprof.record_function("forward"):
            with opprof.record_function("layer"):
                pass
    records = prof.records()
    assert scope_names(records) == ["forward", "layer"]
    fwd, layer = sorted(records.events, key=lambda e: e["depth"])
    assert layer["parent"] == fwd["id"]
    assert prof.wall_time_ns > 0
    assert records.clock_source == _native.clock_source()


def test_start_stop_api_matches_the_context_manager() -> None:
    prof = opprof.profile(capture=["none"])
    prof.start()
    with opprof.record_function("step"):
        pass
    prof.stop()
    assert scope_names(prof.records()) == ["step"]


def test_record_function_counts_as_context_manager_and_decorator() -> None:
    @opprof.record_function("decorated")
    def work(x: int) -> int:
        return x * 2

    with opprof.profile(capture=["none"], profile_memory=False) as prof:
        results = [work(i) for i in range(3)]
        for _ in range(2):
            with opprof.record_function("block"):
                pass
    assert results == [0, 2, 4]
    assert work.__name__ == "work"
    counts = {row.key: row.count for row in prof.key_averages()}
    assert counts == {"decorated": 3, "block": 2}


def test_exception_propagates_and_flags_the_scope() -> None:
    with opprof.profile(capture=["none"]) as prof:
        with pytest.raises(ValueError, match="boom"):
            with opprof.record_function("failing"):
                raise ValueError("boom")
        with opprof.record_function("fine"):
            pass
    ev = prof.records().events
    flags = {prof.records().names[e["name"]]: int(e["flags"]) for e in ev}
    assert flags["failing"] & FLAG_EXCEPTION
    assert not flags["fine"] & FLAG_EXCEPTION


def test_exception_in_profile_body_still_stops_and_releases() -> None:
    numpy_source = sources.get("numpy")
    with pytest.raises(RuntimeError, match="body failed"):
        with opprof.profile(capture=["numpy"]) as prof:
            raise RuntimeError("body failed")
    assert prof.records() is not None
    if numpy_source is not None:
        assert not getattr(numpy_source, "installed", False)


class CallSpy:
    """Counts attribute reads on the native lib the profiler uses."""

    def __init__(self, lib: Any) -> None:
        self.lib = lib
        self.calls: list[str] = []

    def __getattr__(self, name: str) -> Any:
        self.calls.append(name)
        return getattr(self.lib, name)


def test_record_function_without_a_profile_makes_no_native_call(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    spy = CallSpy(_native.lib)
    monkeypatch.setattr(recorder, "_lib", spy)
    # record_function's own doors to the core (builtins, see native/fastscope.c).
    for door, name in (("_scope_push", "opprof_scope_push"), ("_scope_pop", "opprof_scope_pop")):
        real = getattr(recorder, door)
        monkeypatch.setattr(
            recorder,
            door,
            lambda *args, real=real, name=name: spy.calls.append(name) or real(*args),
        )

    @opprof.record_function("idle decorated")
    def idle() -> int:
        return 1

    with opprof.record_function("idle"):
        pass
    assert idle() == 1
    assert spy.calls == []
    # The spy does see calls once a profile records.
    with opprof.profile(capture=["none"]) as prof:
        with opprof.record_function("active"):
            pass
    assert "opprof_scope_push" in spy.calls and "opprof_scope_pop" in spy.calls
    assert scope_names(prof.records()) == ["active"]


def test_scope_entered_before_the_profile_is_not_recorded() -> None:
    with opprof.record_function("before"):
        with opprof.profile(capture=["none"]) as prof:
            with opprof.record_function("inside"):
                pass
    assert scope_names(prof.records()) == ["inside"]


def test_one_profile_records_at_a_time() -> None:
    with opprof.profile(capture=["none"]):
        second = opprof.profile(capture=["none"])
        with pytest.raises(OpprofError, match="already recording; one profile records at a time"):
            second.start()
        with pytest.raises(OpprofError, match="not recording"):
            second.stop()


def test_a_yielding_profile_steps_aside_for_one_started_inside_it() -> None:
    outer = opprof.profile(capture=["none"])
    outer.yields = True  # what the plugin's rounds set
    outer.start()
    with opprof.record_function("before inner"):
        pass
    with opprof.profile(capture=["none"]) as inner:
        with opprof.record_function("inner scope"):
            pass
    with opprof.record_function("after inner"):  # nobody records this
        pass
    outer.stop()  # already stopped: no error
    assert outer.preempted and not inner.preempted
    assert scope_names(outer.records()) == ["before inner"]
    assert scope_names(inner.records()) == ["inner scope"]
    # Started again, it records normally.
    with outer:
        with opprof.record_function("again"):
            pass
    assert not outer.preempted and scope_names(outer.records()) == ["again"]


def test_stop_without_start_and_records_before_stop_are_errors() -> None:
    prof = opprof.profile(capture=["none"])
    with pytest.raises(OpprofError, match="not recording"):
        prof.stop()
    with pytest.raises(OpprofError, match="stop it first"):
        prof.records()


def test_unknown_capture_source_names_the_accepted_ones() -> None:
    with pytest.raises(OpprofError) as info:
        opprof.profile(capture=["bogus"]).start()
    message = str(info.value)
    assert "'bogus'" in message
    assert "accepted: numpy, scipy, sklearn, torch, none" in message
    assert recorder._active is None


def test_capture_none_stands_alone() -> None:
    with pytest.raises(OpprofError, match="'none' stands alone"):
        sources.resolve(["none", "numpy"])
    assert sources.resolve(["none"]) == []


def test_capture_as_a_plain_string_is_refused() -> None:
    with pytest.raises(OpprofError, match="list of source names"):
        opprof.profile(capture="numpy")  # type: ignore[arg-type]


def test_with_stack_points_at_the_user_line() -> None:
    with opprof.profile(capture=["none"], with_stack=True) as prof:
        line = test_with_stack_points_at_the_user_line.__code__.co_firstlineno + 3
        with opprof.record_function("here"):
            pass
    records = prof.records()
    (ev,) = records.events[records.events["kind"] == KIND_SCOPE]
    frames = records.stacks[ev["stack"]]
    assert frames[0] == f"{__file__}({line}): test_with_stack_points_at_the_user_line"


def test_scopes_from_threads_land_in_one_profile() -> None:
    def worker(i: int) -> None:
        with opprof.record_function(f"thread {i}"):
            pass

    with opprof.profile(capture=["none"]) as prof:
        run_threads(worker, [(i,) for i in range(3)])
    records = prof.records()
    assert sorted(scope_names(records)) == ["thread 0", "thread 1", "thread 2"]
    assert len(set(records.events["thread"])) == 3


def test_events_and_exports_come_from_the_model(tmp_path: Any) -> None:
    with opprof.profile(capture=["none"]) as prof:
        with opprof.record_function("outer"):
            with opprof.record_function("inner"):
                # Long enough to weigh whole microseconds in the collapsed stacks, which
                # leave out paths whose (overhead-corrected) self time rounds to zero.
                t0 = time.perf_counter_ns()
                while time.perf_counter_ns() - t0 < 50_000:
                    pass
    events = prof.events()
    names = sorted(e.name for e in events)
    assert names == ["inner", "outer"]
    trace = tmp_path / "trace.json"
    prof.export_chrome_trace(str(trace))
    assert "outer" in trace.read_text()
    stacks = tmp_path / "stacks.txt"
    prof.export_stacks(str(stacks))
    assert "outer;inner" in stacks.read_text()


def test_package_import_is_lazy() -> None:
    import subprocess
    import sys

    code = (
        "import sys, pytest_opprof\n"
        "heavy = ['numpy', 'pytest_opprof._opprof_native',\n"
        "         'pytest_opprof.capture.recorder', 'pytest_opprof.profiler']\n"
        "print([m for m in heavy if m in sys.modules])\n"
        "pytest_opprof.record_function\n"
        "print('pytest_opprof.profiler' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split("\n")[:2] == ["[]", "True"]


def test_a_profile_stopped_while_another_holds_the_lock_does_not_hang() -> None:
    # The garbage collector finalizes an abandoned generator that holds an open profile
    # at any allocation, even one inside another profile's start(), under the lock: its
    # profile's stop() runs in the same thread.  Run apart, so a hang fails one process.
    import subprocess
    import sys

    code = """
import pytest_opprof as opprof
from pytest_opprof.capture import recorder

def abandoned():
    with opprof.profile(capture=["none"]) as prof:
        yield prof

gen = abandoned()
prof = next(gen)
with recorder._lock:
    gen.close()  # what the collector does to it
assert recorder._active is None and prof.wall_time_ns > 0
print("stopped")
"""
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    assert out.stdout.strip() == "stopped"


def test_is_user_annotation_tells_scopes_from_ops() -> None:
    # torch's FunctionEvent(Avg).is_user_annotation: a record_function region, not an op.
    import numpy as np

    with opprof.profile(profile_memory=True, memory_events=True) as prof:
        with opprof.record_function("forward"):
            a = np.ones((300, 300))
            np.add(a, 1)
        del a
    events = prof.events()
    by_kind = {(e.name, e.is_user_annotation) for e in events}
    assert ("forward", True) in by_kind and ("numpy.add", False) in by_kind
    assert all(e.is_user_annotation == (e.name == "forward") for e in events)
    for averages in (
        prof.key_averages(),
        prof.key_averages(group_by_input_shape=True),
        events.key_averages(),
    ):
        flags = {row.key: row.is_user_annotation for row in averages}
        assert flags.pop("forward") is True
        assert "[memory]" in flags and "numpy.add" in flags
        assert not any(flags.values()), flags


def test_memory_holds_the_profiles_figures_in_bytes() -> None:
    # The example of docs/python-api.md.
    import numpy as np

    with opprof.profile(profile_memory=True) as prof:
        a = np.ones((1000, 1000))
    assert prof.memory is not None
    assert prof.memory.peak_bytes >= a.nbytes and prof.memory.allocated_bytes >= a.nbytes
    assert prof.memory.allocations >= 1 and prof.memory.leaked_bytes >= a.nbytes
    with opprof.profile(profile_memory=False) as without:
        np.ones(3)
    assert without.memory is None
