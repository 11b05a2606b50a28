"""Memory in the Chrome trace: the live-bytes counter track and ``"[memory]"`` instants.

Real numpy, real profiles, real files.  ``np.ones(n)`` allocates ``8 * n`` data
bytes (float64) through numpy's data allocator, the one the memory source counts.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pytest

import pytest_opprof as opprof
from pytest_opprof.native_layout.records import MEMORY_EVENT_NAME
from pytest_opprof.render.trace import MEMORY_COUNTER_NAME

if TYPE_CHECKING:
    from run_helpers import PytestRunner

N = 10**6
BYTES = 8 * N  # float64


def _trace(prof: opprof.profile, tmp_path: Path) -> list[dict[str, Any]]:
    path = tmp_path / "trace.json"
    prof.export_chrome_trace(str(path))
    events: list[dict[str, Any]] = json.loads(path.read_text(encoding="utf-8"))["traceEvents"]
    return events


def _counter(events: list[dict[str, Any]]) -> list[tuple[float, int]]:
    return [
        (e["ts"], e["args"]["Total Allocated"])
        for e in events
        if e["ph"] == "C" and e["name"] == MEMORY_COUNTER_NAME
    ]


def _assert_rise_and_return(counter: list[tuple[float, int]]) -> tuple[float, float]:
    """The counter steps up by BYTES and later back down to where it was; their ts."""
    values = [v for _, v in counter]
    steps = np.diff([0, *values])
    up = int(np.flatnonzero(steps == BYTES)[0])
    down = up + 1 + int(np.flatnonzero(steps[up + 1 :] == -BYTES)[0])
    before = values[up - 1] if up else 0
    assert values[down] == before
    return counter[up][0], counter[down][0]


def test_counter_rises_by_the_array_and_returns(tmp_path: Path) -> None:
    with opprof.profile(capture=["none"]) as prof:
        with opprof.record_function("allocate"):
            a = np.ones(N)
        with opprof.record_function("hold"):
            a += 1.0
        del a
    events = _trace(prof, tmp_path)
    counter = _counter(events)
    assert counter == sorted(counter, key=lambda c: c[0])
    up_ts, down_ts = _assert_rise_and_return(counter)
    scopes = {e["name"]: e for e in events if e["ph"] == "X"}
    # Same time axis as the calls: the rise lies inside "allocate", the fall after "hold".
    alloc = scopes["allocate"]
    assert alloc["ts"] <= up_ts <= alloc["ts"] + alloc["dur"]
    hold = scopes["hold"]
    assert down_ts >= hold["ts"] + hold["dur"]
    # The allocation happened inside a call: it is no "[memory]" event.
    assert "allocate" in scopes and scopes["allocate"]["args"]["Self CPU Mem (bytes)"] == BYTES


def test_a_free_outside_any_call_is_a_memory_instant(tmp_path: Path) -> None:
    with opprof.profile(capture=["none"]) as prof:
        with opprof.record_function("allocate"):
            a = np.ones(N)
        del a
    events = _trace(prof, tmp_path)
    instants = [e for e in events if e["name"] == MEMORY_EVENT_NAME]
    assert instants and all(e["ph"] == "i" and e["s"] == "t" for e in instants)
    (free,) = [e for e in instants if e["args"]["Bytes"] == -BYTES]
    assert {"Device Type", "Device Id"} <= set(free["args"])
    assert "dur" not in free
    (scope,) = [e for e in events if e["ph"] == "X" and e["name"] == "allocate"]
    assert free["tid"] == scope["tid"]
    assert free["ts"] >= scope["ts"] + scope["dur"]
    # The instant and the counter's fall are the same free, timed by the same clock.
    _, down_ts = _assert_rise_and_return(_counter(events))
    assert free["ts"] == pytest.approx(down_ts, abs=50.0)
    # No "[memory]" record became a complete ("X") event.
    assert not any(e["ph"] == "X" and e["name"] == MEMORY_EVENT_NAME for e in events)


def test_every_event_has_a_numeric_ts_and_the_file_is_json(tmp_path: Path) -> None:
    with opprof.profile() as prof:
        a = np.ones(N)
        b = np.add(a, 1.0)
        del a, b
    events = _trace(prof, tmp_path)
    assert {e["ph"] for e in events} >= {"M", "X", "C", "i"}
    for e in events:
        assert isinstance(e["ts"], (int, float)) and not isinstance(e["ts"], bool), e
        assert isinstance(e["pid"], int) and isinstance(e["tid"], int), e


def test_no_memory_profiling_no_memory_track(tmp_path: Path) -> None:
    with opprof.profile(profile_memory=False, capture=["none"]) as prof:
        a = np.ones(N)
        del a
    events = _trace(prof, tmp_path)
    assert not _counter(events)
    assert not any(e["name"] == MEMORY_EVENT_NAME for e in events)


def test_a_profile_keeps_its_samples_past_the_next_profile(tmp_path: Path) -> None:
    with opprof.profile(capture=["none"]) as first:
        a = np.ones(N)
        del a
    with opprof.profile(capture=["none"]) as second:
        b = np.ones(N // 2)
        del b
    _assert_rise_and_return(_counter(_trace(first, tmp_path)))
    assert max(v for _, v in _counter(_trace(second, tmp_path))) == BYTES // 2
    # EventList.export_chrome_trace carries them too (the profile hands them over).
    path = tmp_path / "events.json"
    first.events().export_chrome_trace(str(path))
    _assert_rise_and_return(_counter(json.loads(path.read_text())["traceEvents"]))


def test_plugin_trace_dir_traces_have_the_counter_track(
    pytester: pytest.Pytester,
    monkeypatch: pytest.MonkeyPatch,
    run_pytest: PytestRunner,
) -> None:
    pytester.makepyfile(
        f"""
        import numpy as np

        def test_alloc():
            a = np.ones({N})
            assert a.sum() == {N}
            del a
        """
    )
    # Three rounds: the trace shows one of them, exported after all three ran.
    result = run_pytest("--opprof", "--opprof-rounds", "3", "--opprof-trace-dir", "traces", "-q")
    result.assert_outcomes(passed=1)
    (path,) = (pytester.path / "traces").iterdir()
    events = json.loads(path.read_text(encoding="utf-8"))["traceEvents"]
    _assert_rise_and_return(_counter(events))
    assert any(e["name"] == MEMORY_EVENT_NAME and e["args"]["Bytes"] == -BYTES for e in events)
