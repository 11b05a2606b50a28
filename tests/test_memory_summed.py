"""``memory_events=False``: allocations outside any op summed into one ``[memory]`` record per
thread instead of an event each (what the plugin runs unless it writes a trace).

The same workload is profiled both ways: every byte figure must agree, only the number of
``[memory]`` records differs.  Real numpy, real threads, real pytest runs.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path

import numpy as np
import pytest

import pytest_opprof as opprof
from pytest_opprof.native_layout.records import KIND_MEMORY, MEMORY_EVENT_NAME

SMALL = 100  # np.ones(10) outside any op: 100 allocations and 100 frees of 80 bytes


def _workload() -> np.ndarray:
    """Loose allocations and frees, one inside a scope, one block kept (the leak)."""
    for _ in range(SMALL):
        np.ones(10)
    kept = np.empty(1000)  # loose allocation, still held at stop
    with opprof.record_function("inside"):
        np.empty(500)  # allocated and freed inside the scope
    return kept


def _profile(memory_events: bool) -> tuple[opprof.profile, np.ndarray]:
    with opprof.profile(capture=["none"], memory_events=memory_events) as prof:
        kept = _workload()
    return prof, kept


def _memory_rows(prof: opprof.profile) -> np.ndarray:
    ev = prof.records().events
    return ev[ev["kind"] == KIND_MEMORY]


def test_summed_record_carries_the_same_bytes_as_the_events() -> None:
    per_event, kept_a = _profile(memory_events=True)
    summed, kept_b = _profile(memory_events=False)
    events, (record,) = _memory_rows(per_event), _memory_rows(summed)
    assert len(events) >= 2 * SMALL + 1
    for field in ("self_alloc_bytes", "self_free_bytes", "self_alloc_count"):
        assert int(record[field]) == int(events[field].sum()), field
    assert int(record["self_alloc_bytes"]) >= SMALL * 80 + kept_b.nbytes
    assert record["parent"] == -1 and record["depth"] == 0
    assert record["thread"] == threading.get_native_id()
    # An instant at the first allocation, before the scope that came after it.
    (inside,) = summed.records().events[summed.records().events["kind"] != KIND_MEMORY]
    assert record["start_ns"] == record["end_ns"] < inside["start_ns"]
    # Session figures come from the counters, not the events: identical both ways.
    assert per_event.memory is not None and summed.memory is not None
    for name in ("peak_bytes", "allocated_bytes", "allocations", "freed_bytes", "leaked_bytes"):
        assert getattr(summed.memory, name) == getattr(per_event.memory, name), name
    assert summed.memory.leaked_bytes == kept_b.nbytes == kept_a.nbytes
    rows = {r.key: r for r in summed.key_averages()}
    rows_events = {r.key: r for r in per_event.key_averages()}
    memory_usage = rows_events[MEMORY_EVENT_NAME].cpu_memory_usage
    assert rows[MEMORY_EVENT_NAME].cpu_memory_usage == memory_usage
    assert rows[MEMORY_EVENT_NAME].count == 1
    assert rows["inside"].self_cpu_memory_usage == rows_events["inside"].self_cpu_memory_usage == 0


def test_each_thread_gets_its_own_summed_record() -> None:
    def work() -> None:
        for _ in range(SMALL):
            np.ones(10)
        seen.append(threading.get_native_id())

    seen: list[int] = []
    with opprof.profile(capture=["none"], memory_events=False) as prof:
        threads = [threading.Thread(target=work) for _ in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    records = _memory_rows(prof)
    by_thread = {int(r["thread"]): r for r in records if int(r["thread"]) in seen}
    assert sorted(by_thread) == sorted(seen) and len(set(seen)) == 2
    # Both threads ran the same loop: the same sums, everything freed again.
    first, second = by_thread.values()
    for field in ("self_alloc_bytes", "self_free_bytes", "self_alloc_count"):
        assert first[field] == second[field], field
    assert first["self_alloc_bytes"] == first["self_free_bytes"] >= SMALL * 80
    assert first["self_alloc_count"] >= SMALL
    assert len(set(records["id"].tolist())) == len(records)


def test_a_new_session_starts_without_the_last_ones_sums() -> None:
    _profile(memory_events=False)
    with opprof.profile(capture=["none"], memory_events=False) as prof:
        np.empty(10)
    (record,) = _memory_rows(prof)
    assert (record["self_alloc_bytes"], record["self_free_bytes"]) == (80, 80)


TEST_MODULE = """
import numpy as np

def test_loose():
    for _ in range(50):
        np.ones(10)
"""


@pytest.mark.parametrize("with_trace", [False, True])
def test_plugin_writes_memory_instants_only_with_a_trace(
    pytester: pytest.Pytester, with_trace: bool
) -> None:
    pytester.makepyfile(test_mod=TEST_MODULE)
    args = ["--opprof", "--opprof-rounds", "1", "--opprof-capture", "none"]
    args += ["-p", "no:cacheprovider", "--opprof-report", "report.json"]
    if with_trace:
        args += ["--opprof-trace-dir", "traces"]
    result = pytester.runpytest_subprocess(*args)
    result.assert_outcomes(passed=1)
    report = json.loads(Path(pytester.path, "report.json").read_text())
    text = json.dumps(report)
    assert MEMORY_EVENT_NAME in text
    if with_trace:
        (trace,) = Path(pytester.path, "traces").glob("*.trace.json")
        events = json.loads(trace.read_text())["traceEvents"]
        instants = [e for e in events if e["name"] == MEMORY_EVENT_NAME]
        # One instant per allocation and per free of the loop's 50 arrays, at least.
        assert len(instants) >= 100 and all(e["ph"] == "i" for e in instants)
