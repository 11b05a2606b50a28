"""Fuzzing what users and files hand the plugin: never a traceback, a clear error or a result.

Complements tests/test_store.py (hand-picked malformed files), test_verdict.py
(tolerance text) and test_model_tree.py (odd intervals) with generated inputs:
random JSON and mutations of a valid baseline file, option values, and op names
(unicode, empty, control characters, very long) through the table, trace and stacks.
"""

from __future__ import annotations

import json
import math
import tempfile
from pathlib import Path

import pytest
from baseline_helpers import entry, simple_summary
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from synthetic_records import Ev, records_from

from pytest_opprof.errors import BaselineError, OpprofError, OptionValueError
from pytest_opprof.gate.store import dumps, loads
from pytest_opprof.gate.tolerance import parse_duration_ns, parse_tolerance
from pytest_opprof.model import build_events, key_averages
from pytest_opprof.plugin.options import parse_capture, parse_non_negative_int, parse_positive_int

VALID = json.loads(dumps({"tests/test_a.py::t": entry(simple_summary())}))

json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats()  # NaN and infinities included
    | st.text(max_size=20)
)
json_values = st.recursive(
    json_scalars,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=25,
)


def _load_or_clear_error(text: str) -> None:
    try:
        entries = loads(text, "baselines/test_a.json")
    except BaselineError as exc:
        assert str(exc).startswith("baselines/test_a.json")
        assert exc.reason
        return
    for name, e in entries.items():  # a result is a usable one
        assert isinstance(name, str)
        assert e.summary.op_count >= 0
        assert all(math.isfinite(op.self_cpu_time.median_ns) for op in e.summary.ops.values())


@given(json_values)
def test_random_json_loads_or_names_the_file(data: object) -> None:
    _load_or_clear_error(json.dumps(data))


def _paths(value: object, prefix: tuple[object, ...] = ()) -> list[tuple[object, ...]]:
    found = [prefix]
    if isinstance(value, dict):
        for k, v in value.items():
            found += _paths(v, (*prefix, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            found += _paths(v, (*prefix, i))
    return found


ALL_PATHS = _paths(VALID)[1:]


def _mutated(path: tuple[object, ...], replacement: object, delete: bool) -> object:
    data = json.loads(json.dumps(VALID))
    parent = data
    for key in path[:-1]:
        parent = parent[key]
    if delete and isinstance(parent, dict):
        del parent[path[-1]]
    else:
        parent[path[-1]] = replacement
    return data


@settings(max_examples=400, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.sampled_from(ALL_PATHS),
    json_scalars | st.just(10**400) | st.lists(st.integers(), max_size=3) | st.just({}),
    st.booleans(),
)
def test_one_field_wrong_loads_or_names_the_file(
    path: tuple[object, ...], replacement: object, delete: bool
) -> None:
    data = _mutated(path, replacement, delete)
    try:
        text = json.dumps(data)
    except (OverflowError, ValueError):
        return
    _load_or_clear_error(text)


TEXT = dumps({"t": entry(simple_summary())})


@given(st.integers(min_value=0, max_value=len(TEXT.rstrip()) - 1))
def test_any_truncation_names_the_file(cut: int) -> None:
    with pytest.raises(BaselineError, match=r"^baselines/test_a\.json: "):
        loads(TEXT[:cut], "baselines/test_a.json")


@given(st.binary(max_size=200))
def test_random_bytes_on_disk_name_the_file(raw: bytes) -> None:
    from pytest_opprof.gate.store import load

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "test_a.json"
        path.write_bytes(raw)
        try:
            load(path)
        except BaselineError as exc:
            assert exc.path == str(path)


# ---- option values ------------------------------------------------------------

option_values = st.text(max_size=30) | st.integers() | st.floats() | st.none() | st.booleans()


@given(option_values)
def test_int_options_parse_or_state_the_accepted_form(value: object) -> None:
    for parse, minimum in ((parse_positive_int, 1), (parse_non_negative_int, 0)):
        try:
            parsed = parse(value)
        except OptionValueError as exc:
            assert "expected" in str(exc) and repr(value) in str(exc)
        else:
            assert isinstance(parsed, int) and parsed >= minimum
            assert parsed == int(str(value).strip())


@given(option_values)
def test_capture_parses_or_states_the_accepted_form(value: object) -> None:
    try:
        names = parse_capture(value)
    except OptionValueError as exc:
        assert "expected" in str(exc) or "'none'" in str(exc)
    else:
        assert names and all(n and n == n.strip() and "," not in n for n in names)
        assert "none" not in names or names == ("none",)


@given(option_values)
def test_tolerance_and_duration_parse_or_state_the_accepted_form(value: object) -> None:
    for parse in (parse_tolerance, parse_duration_ns):
        try:
            parsed = parse(value)
        except ValueError as exc:
            assert "expected" in str(exc)
        else:
            assert parsed >= 0 and math.isfinite(parsed)


# ---- odd op names through every renderer ---------------------------------------

odd_names = st.text(max_size=300) | st.sampled_from(
    ["", " ", "\n", "\t|", "名前", "🚀" * 100, "a" * 5000, "x\x00y", "\u202eevil", "%s{}%d"]
)


@settings(max_examples=60, deadline=None)
@given(st.lists(odd_names, min_size=1, max_size=5), st.integers(min_value=1, max_value=80))
def test_odd_names_render_everywhere(names: list[str], width: int) -> None:
    roots = [Ev(name, 10 * i, 10 * i + 5 + len(name) % 3) for i, name in enumerate(names)]
    roots[0].children.append(Ev(names[-1], 1, 1))  # zero length, equal timestamps
    records = records_from(roots)
    averages = key_averages(records, profile_memory=True, with_flops=True)
    text = averages.table(row_limit=10, max_name_column_width=width)
    assert isinstance(text, str) and text.count("\n") >= 3
    events = build_events(records, profile_memory=True, with_flops=True)
    assert len(events) == len(names) + 1
    with tempfile.TemporaryDirectory() as tmp:
        trace = Path(tmp) / "t.json"
        events.export_chrome_trace(str(trace))
        shown = {
            e["name"]
            for e in json.loads(trace.read_text(encoding="utf-8"))["traceEvents"]
            if e.get("ph") == "X"
        }
        assert set(names) <= shown
        stacks = Path(tmp) / "s.txt"
        try:
            events.export_stacks(str(stacks), "self_cpu_time_total")
        except OpprofError:
            return
        assert stacks.read_text(encoding="utf-8").count("\n") <= len(names) + 1


@pytest.mark.parametrize("rounds", [2**31, 10**12])
def test_a_huge_round_count_is_refused_before_anything_is_read_per_round(rounds: int) -> None:
    # A stored time may stand for every round ("1.2 ms"): read per round, 2**31 rounds took
    # every byte of memory and the process was killed.
    data = _mutated(("tests", "tests/test_a.py::t", "rounds"), rounds, False)
    with pytest.raises(BaselineError, match=r"^baselines/test_a\.json: .*rounds: expected <= "):
        loads(json.dumps(data), "baselines/test_a.json")
