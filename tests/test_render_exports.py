"""Chrome trace and collapsed-stack exports, written to real files."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from synthetic_records import Ev, records_from

from pytest_opprof.model import build_events, key_averages
from pytest_opprof.native_layout.records import EVENT_DTYPE, KIND_SCOPE, Records
from pytest_opprof.render.stacks import collapsed_stacks
from pytest_opprof.render.trace import chrome_trace

LINE = re.compile(r"^\S(.*\S)? [1-9]\d*$")


def _records() -> Records:
    return records_from(
        [
            Ev(
                "forward pass",
                0,
                90_000,
                kind=KIND_SCOPE,
                stack=["t.py(5): test_model"],
                children=[
                    Ev(
                        "numpy.matmul",
                        1_000,
                        41_000,
                        shape=[[2, 3], [3, 4]],
                        stack=["m.py(8): layer", "t.py(6): test_model"],
                        device_ns=7_000,
                    ),
                    Ev("numpy.add", 50_000, 80_000, alloc=64),
                    Ev("numpy.sum", 85_000, 85_300),
                ],
            ),
            Ev("numpy.add", 100_000, 110_000, thread=9),
        ]
    )


def test_chrome_trace_parses_and_holds_the_scopes(tmp_path: Path) -> None:
    events = build_events(_records(), profile_memory=True)
    path = tmp_path / "trace.json"
    events.export_chrome_trace(str(path))
    trace = json.loads(path.read_text())
    complete = [e for e in trace["traceEvents"] if e["ph"] == "X"]
    assert [e["name"] for e in complete] == [e.name for e in events]
    assert "forward pass" in {e["name"] for e in complete}
    matmul = next(e for e in complete if e["name"] == "numpy.matmul")
    assert matmul["ts"] == pytest.approx(1.0) and matmul["dur"] == pytest.approx(40.0)
    assert matmul["args"]["Input Dims"] == [[2, 3], [3, 4]]
    assert matmul["args"]["parent id"] == events[0].id
    assert {e["tid"] for e in complete} == {1, 9}
    names = {
        e["tid"]: e["args"]["name"] for e in trace["traceEvents"] if e["name"] == "thread_name"
    }
    assert set(names) == {1, 9}
    assert all(isinstance(e["pid"], int) for e in trace["traceEvents"])


def test_chrome_trace_refuses_averages(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="events"):
        key_averages(_records()).export_chrome_trace(str(tmp_path / "t.json"))


def test_collapsed_stacks(tmp_path: Path) -> None:
    events = build_events(_records())
    path = tmp_path / "stacks.txt"
    events.export_stacks(str(path), "self_cpu_time_total")
    lines = path.read_text().splitlines()
    assert lines and all(LINE.match(line) for line in lines)
    values = {line.rsplit(" ", 1)[0]: int(line.rsplit(" ", 1)[1]) for line in lines}
    # Python call site first (outermost first), then the scope, then the op.
    scope = "t.py(5):_test_model;forward_pass"
    assert values[f"{scope};t.py(6):_test_model;m.py(8):_layer;numpy.matmul"] == 40
    assert values[f"{scope};numpy.add"] == 30
    assert values[scope] == round(90 - 40 - 30 - 0.3)
    assert values["numpy.add"] == 10
    # numpy.sum's 0.3 us rounds to nothing: the line is left out.
    assert not any("numpy.sum" in line for line in lines)
    assert sum(values.values()) == pytest.approx(events.self_cpu_time_total, abs=1)


def test_stacks_device_metric_and_bad_metric(tmp_path: Path) -> None:
    events = build_events(_records())
    path = tmp_path / "dev.txt"
    events.export_stacks(str(path), "self_cuda_time_total")
    (line,) = path.read_text().splitlines()
    assert line.endswith(";numpy.matmul 7")
    with pytest.raises(ValueError, match=r"self_cpu_time_total, self_device_time_total"):
        events.export_stacks(str(path), "cpu_time_total")


def test_identical_paths_are_summed(tmp_path: Path) -> None:
    roots = [Ev("numpy.add", i * 1000, i * 1000 + 600) for i in range(5)]
    path = tmp_path / "s.txt"
    build_events(records_from(roots)).export_stacks(str(path))
    # 0.6 us each would round to 1 alone; summed they make 3.
    assert path.read_text() == "numpy.add 3\n"


@settings(max_examples=40, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(0, 50_000), st.integers(0, 20_000), st.sampled_from([1, 2])),
        max_size=25,
    )
)
def test_odd_intervals_export_cleanly(items: list[tuple[int, int, int]]) -> None:
    arr = np.zeros(len(items), dtype=EVENT_DTYPE)
    for i, (s, d, t) in enumerate(items):
        arr[i] = (s, s + d, i + 1, -2, 0, 0, -1, t, i % 3, 2, 0, 0, 0, 0, 0, -1)
    events = build_events(Records(events=arr, names=["a", "b;c", "d e"]))
    lines = collapsed_stacks(events)
    assert all(LINE.match(line) for line in lines)
    json.loads(json.dumps(chrome_trace(events)))
