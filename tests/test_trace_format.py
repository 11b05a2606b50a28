"""The Chrome trace file against the Trace Event Format, from real profiles and real files.

A profile's export streams text from its records (``render/trace.py``); the
checks here parse that text and hold every event to the format's rules
(JSON object form, the fields each phase needs, their types), and hold the
records path to the ``FunctionEvent`` path event for event.
"""

from __future__ import annotations

import json
import threading
from numbers import Real
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import pytest_opprof as opprof
from pytest_opprof.render import trace as trace_module

PHASES = set("BEXiICbnestfPNODMVvRc()")  # every phase the format defines
INSTANT_SCOPES = {"g", "p", "t"}
METADATA_NAMES = {"process_name", "process_labels", "process_sort_index", "thread_name"}
METADATA_NAMES |= {"thread_sort_index"}


def check_trace_event_format(trace: Any) -> list[dict[str, Any]]:
    """Assert the JSON object form's rules; return the events."""
    assert isinstance(trace, dict), "the object form: a JSON object at the top"
    assert set(trace) <= {"traceEvents", "displayTimeUnit", "otherData", "metadata"}
    assert trace.get("displayTimeUnit", "ms") in ("ms", "ns")
    events = trace["traceEvents"]
    assert isinstance(events, list)
    for e in events:
        assert isinstance(e, dict)
        ph = e["ph"]
        assert isinstance(ph, str) and len(ph) == 1 and ph in PHASES, e
        assert isinstance(e["name"], str), e
        assert type(e["pid"]) is int and type(e["tid"]) is int, e
        assert isinstance(e["ts"], Real) and not isinstance(e["ts"], bool), e
        assert isinstance(e.get("args", {}), dict), e
        if ph == "X":
            assert isinstance(e["dur"], Real) and e["dur"] >= 0, e
            assert isinstance(e.get("cat", ""), str)
        elif ph == "i":
            assert e.get("s", "t") in INSTANT_SCOPES, e
        elif ph == "C":
            assert e["args"] and all(isinstance(v, Real) for v in e["args"].values()), e
        elif ph == "M":
            assert e["name"] in METADATA_NAMES and isinstance(e["args"]["name"], str), e
    return list(events)


def assert_complete_events_nest(events: list[dict[str, Any]]) -> None:
    """Perfetto's rule for X events of one thread: nested or disjoint, never half over."""
    by_thread: dict[int, list[tuple[float, float]]] = {}
    for e in events:
        if e["ph"] == "X":
            by_thread.setdefault(e["tid"], []).append((e["ts"], e["ts"] + e["dur"]))
    for spans in by_thread.values():
        spans.sort(key=lambda s: (s[0], -s[1]))
        open_ends: list[float] = []
        for start, end in spans:
            while open_ends and start >= open_ends[-1]:
                open_ends.pop()
            # 1 ns of rounding either way (ts and dur are printed to the ns).
            assert not open_ends or end <= open_ends[-1] + 0.002, (start, end, open_ends[-1])
            open_ends.append(end)


def workload() -> opprof.profile:
    x = np.ones(1000)

    def worker() -> None:
        with opprof.record_function("in a thread"):
            np.add(x, x)

    with opprof.profile(with_stack=True) as prof:
        with opprof.record_function('forward "quoted" \\ back\u00e9'):
            y = np.matmul(np.ones((4, 3)), np.ones((3, 5)))
            kept = np.ones(10_000)
            np.add(x, 1.0, out=x)
        with pytest.raises(ValueError), opprof.record_function("raises"):
            raise ValueError("in scope")
        thread = threading.Thread(target=worker)
        thread.start()
        thread.join()
        del kept
    assert y.shape == (4, 5)
    return prof


def load(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


def test_profile_trace_follows_the_format_and_holds_every_record(tmp_path: Path) -> None:
    prof = workload()
    path = tmp_path / "trace.json"
    prof.export_chrome_trace(str(path))
    events = check_trace_event_format(load(path))
    assert_complete_events_nest(events)
    records = prof.records()
    calls = [e for e in events if e["ph"] in "Xi"]
    assert len(calls) == len(records)
    named = {e["name"]: e for e in calls}
    assert 'forward "quoted" \\ back\u00e9' in named
    matmul = named["numpy.matmul"]
    assert matmul["args"]["Input Dims"] == [[4, 3], [3, 5]]
    assert matmul["args"]["FLOPs"] == 2 * 4 * 3 * 5
    assert matmul["args"]["parent id"] == named['forward "quoted" \\ back\u00e9']["args"]["id"]
    assert "Call stack" in matmul["args"]
    assert named["raises"]["args"]["exception"] is True
    threads = {e["tid"] for e in events if e["ph"] == "M" and e["name"] == "thread_name"}
    assert {e["tid"] for e in calls} == threads and len(threads) == 2
    assert any(e["ph"] == "C" for e in events)


def test_records_path_writes_what_the_event_objects_path_writes(tmp_path: Path) -> None:
    prof = workload()
    fast, objects = tmp_path / "fast.json", tmp_path / "objects.json"
    prof.export_chrome_trace(str(fast))
    prof.events().export_chrome_trace(str(objects))
    assert load(fast) == load(objects)


def test_chunks_join_into_one_valid_document(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    x = np.ones(4)
    with opprof.profile(capture=["numpy"]) as prof:
        for _ in range(50):
            held = np.add(x, x)
    del held
    # Chunks of 7 events: the joins between writes are where a stream breaks.
    monkeypatch.setattr(trace_module, "_CHUNK", 7)
    path = tmp_path / "chunked.json"
    prof.export_chrome_trace(str(path))
    events = check_trace_event_format(load(path))
    assert sum(e["name"] == "numpy.add" for e in events) == 50
    monkeypatch.undo()
    whole = tmp_path / "whole.json"
    prof.export_chrome_trace(str(whole))
    assert load(path) == load(whole)


def test_empty_profile_is_a_valid_trace(tmp_path: Path) -> None:
    with opprof.profile(capture=["none"], profile_memory=False) as prof:
        pass
    path = tmp_path / "empty.json"
    prof.export_chrome_trace(str(path))
    events = check_trace_event_format(load(path))
    assert [e["name"] for e in events] == ["process_name"]
