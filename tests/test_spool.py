"""The on-disk spool of a session's results gives back equal objects, and reports built
from it are the ones built from the objects."""

from __future__ import annotations

import dataclasses
import enum
import json
import re
from pathlib import Path

import pytest
from baseline_helpers import machine, simple_summary
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_opprof.gate.jsonio import dumps_stable
from pytest_opprof.gate.results import TestResult, build_report, dumps_report, report_text
from pytest_opprof.gate.session import BaselineSession, GateOptions
from pytest_opprof.gate.spool import SHORT_FORMS, Spool
from pytest_opprof.gate.summary import RoundFigures, TestSummary, TimeStats, summarize_rounds
from pytest_opprof.gate.verdict import NEW, compare
from pytest_opprof.plugin.kept import Lines, summary_line
from pytest_opprof.plugin.payload import ProfiledTest
from pytest_opprof.render.report import render_markdown, session_lines


def _recorded(base: Path, nodeid: str) -> None:
    """Write a baseline of ``simple_summary()`` for ``nodeid`` under ``base``."""
    first = BaselineSession(GateOptions(base), machine=machine())
    first.judge(nodeid, simple_summary(), {})
    first.stage(nodeid, simple_summary())
    first.write()


def test_results_come_back_equal_and_render_the_same(tmp_path: Path) -> None:
    base = tmp_path / "baselines"
    nodeid = "tests/test_a.py::test_x[a-1]"
    _recorded(base, nodeid)
    session = BaselineSession(GateOptions(base), machine=machine())
    judged = session.judge(nodeid, simple_summary(matmul_flops=3_000_000), {}).result
    assert judged is not None and judged.verdict.failed and judged.verdict.reasons

    spool: Spool[object] = Spool()
    payload = ProfiledTest(nodeid, True, simple_summary(), table="t", tolerances={"time": 0.5})
    spool.append(payload)
    spool.append(judged)
    assert len(spool) == 2
    assert spool[0] == payload and spool[1] == judged and list(spool) == [payload, judged]
    assert spool[-1] == judged and spool[:1] == [payload]
    kept = list(session.results)
    assert kept == [judged]
    # The statuses kept in memory for the summary follow the spool, one per result.
    assert [(j.nodeid, j.status) for j in session.judged] == [(nodeid, judged.verdict.status)]
    assert (
        build_report(kept, machine=machine())["tests"]
        == build_report([judged], machine=machine())["tests"]
    )
    assert render_markdown(kept, machine=machine()) == render_markdown([judged], machine=machine())


def test_report_text_is_the_report_written_one_test_at_a_time(tmp_path: Path) -> None:
    session = BaselineSession(GateOptions(tmp_path / "baselines"), machine=machine())
    for nodeid in ("tests/test_b.py::test_z", "tests/test_a.py::test_x[é/1]", "tests/t.py::y"):
        session.judge(nodeid, simple_summary(), {})
    session.judge("tests/t.py::y", simple_summary(matmul_flops=1), {})  # judged twice: the last
    results = list(session.results)
    assert len(results) == 4
    stamp = re.compile(r'"created_at": "[^"]*"')
    for details in (False, True):
        assert stamp.sub(
            "", report_text(session.results, machine=machine(), details=details)
        ) == stamp.sub("", dumps_report(build_report(results, machine=machine(), details=details)))
    # The details' layout is the one every data file has.
    assert stamp.sub("", report_text(session.results, machine=machine(), details=True)) == (
        stamp.sub("", dumps_stable(build_report(results, machine=machine(), details=True)))
    )
    empty = report_text([], machine=machine())
    assert json.loads(empty)["tests"] == {}


def test_an_object_it_cannot_store_is_refused_by_name() -> None:
    with pytest.raises(TypeError, match="cannot store set"):
        Spool[object]().append({1, 2})


@dataclasses.dataclass(frozen=True)
class _Record:
    x: object
    y: object = None


@dataclasses.dataclass(frozen=True, slots=True)
class _Slotted:
    z: object


class _Str(str, enum.Enum):
    A = "aa"


class _Int(enum.IntEnum):
    X = 3


def test_every_form_comes_back_as_it_went_in_and_appends_after_reads_land_at_the_end() -> None:
    # Lists and tuples stay apart, dicts keep keys that are not strings, scalar subclasses
    # come back as their plain values, and a read between appends moves nothing.
    items: list[object] = [
        _Record([1, [2, (3, 4)], {"k": [5]}], {(1, 2): "t", 3: None, "s": 1.5}),
        _Record({"l": 1, "d": [True, False]}, _Slotted((_Record({}, []),))),
        _Record(_Str.A, _Int.X),
    ]
    spool: Spool[object] = Spool()
    spool.append(items[0])
    assert spool[0] == items[0]
    spool.append(items[1])
    assert spool[-1] == items[1]
    spool.append(items[2])
    back = list(spool)
    assert back == items
    first = back[0]
    assert isinstance(first, _Record) and isinstance(first.x, list)
    assert isinstance(first.x[1], list) and isinstance(first.x[1][1], tuple)
    last = back[2]
    assert isinstance(last, _Record) and type(last.x) is str and type(last.y) is int
    with pytest.raises(TypeError, match="cannot store bytes"):
        spool.append(_Record({b"l": 1}))
    assert len(spool) == 3 and list(spool) == items


def test_summary_lines_come_back_as_made_with_their_extras() -> None:
    # The collector keeps each test's summary line in flat arrays: what comes back is
    # the line its payload made, marker flag, table, trace path and top op included.
    empty = TestSummary(
        rounds=1,
        wall_time=TimeStats.from_samples([2_000]),
        cpu_time=TimeStats.from_samples([2_000]),
        op_count=0,
        flops=0,
        op_time_share=0.0,
    )
    payloads = [
        ProfiledTest("tests/test_a.py::test_0", False, simple_summary(matmul_flops=1000)),
        ProfiledTest("tests/test_a.py::test_1", True, simple_summary(), table="table"),
        ProfiledTest(
            "tests/test_a.py::test_2",
            False,
            dataclasses.replace(empty, dropped_events=5),
            trace_path="/t/2.json",
        ),
        ProfiledTest("tests/test_b.py::test_3", True, simple_summary(rounds=1)),
        ProfiledTest("tests/test_b.py::test_4", True, empty),
    ]
    lines = Lines()
    for payload in payloads:
        lines.append(payload)
    made = [summary_line(p) for p in payloads]
    assert len(lines) == 5 and list(lines) == made and lines[:] == made
    assert lines[-1] == made[-1] and lines[1].marked and not lines[0].marked
    assert lines[4].marked and lines[4].top_op is None  # marked, with no op
    first = made[0]
    # numpy.matmul's 800 us a round is the top op; the scope and add count in the sum.
    assert first.top_op == "numpy.matmul" and first.op_count == payloads[0].summary.op_count
    assert first.ops_self_ns == pytest.approx(
        sum(op.self_cpu_time.median_ns for op in payloads[0].summary.ops.values())
    )
    assert made[2].top_op is None and made[2].ops_self_ns == 0
    assert [line.nodeid for line in lines.with_tables()] == ["tests/test_a.py::test_1"]
    assert lines.trace_paths() == ["/t/2.json"]
    assert lines.partial() == [(5, "tests/test_a.py::test_2")]
    with pytest.raises(IndexError):
        lines[5]


@dataclasses.dataclass
class _Mutable:
    x: object


def test_a_frozen_record_met_twice_is_written_once_and_read_back_as_one() -> None:
    # A one-round op that called nothing has one time object for its self and total time.
    shared = _Record((1, 2), _Record("inner"))
    other = _Record((1, 2), _Record("inner"))  # equal, not the same object
    mutable = _Mutable([1])
    spool: Spool[object] = Spool()
    spool.append(_Record([shared, other, shared, {"k": shared}], (mutable, mutable)))
    spool.append(_Record([shared, other], None))  # numbering starts again per item
    first, second = list(spool)
    assert first == _Record([shared, other, shared, {"k": shared}], (mutable, mutable))
    a, b, c, d = first.x
    assert a is c is d["k"] and a is not b and a.y is c.y
    m1, m2 = first.y
    assert m1 == m2 == mutable and m1 is not m2  # a mutable record stays two copies
    assert second == _Record([shared, other], None) and second.x[0] is not second.x[1]
    # Written once: "inner" is in the text once for shared, once for other.
    assert spool._text(0).count(b'"inner"') == 2 and spool._text(1).count(b'"inner"') == 2


_INTS = st.integers(-(2**63), 2**63)
_NUMBERS = st.one_of(_INTS, st.sampled_from([0, 1, 0.0, 1.0, 2.5, True, False]))


@settings(max_examples=200, deadline=None)
@given(
    st.one_of(
        _INTS.map(TimeStats.single),
        st.builds(
            TimeStats,
            st.one_of(st.tuples(_NUMBERS), st.lists(_NUMBERS, max_size=3).map(tuple)),
            _NUMBERS,
            _NUMBERS,
            _NUMBERS,
            _NUMBERS,
            _NUMBERS,
            _NUMBERS,
        ),
    )
)
def test_times_come_back_equal_in_short_or_whole_form(stats: TimeStats) -> None:
    # One sample's statistics are written as that one number: they must come back as
    # the very fields (ints, not equal floats or bools) that single builds, and any
    # other statistics whole.
    spool: Spool[object] = Spool()
    spool.append([stats, stats])
    back = spool[0]
    assert isinstance(back, list)
    assert back[0] is back[1]
    assert vars(back[0]) == vars(stats)
    assert [type(v) for v in vars(back[0]).values()] == [type(v) for v in vars(stats).values()]
    assert [type(v) for v in back[0].samples_ns] == [type(v) for v in stats.samples_ns]
    numbers = [*stats.samples_ns, *(v for v in vars(stats).values() if not isinstance(v, tuple))]
    single = (
        len(stats.samples_ns) == 1
        and all(type(v) is int for v in numbers)
        and stats == TimeStats.single(stats.min_ns)
    )
    assert (SHORT_FORMS[TimeStats].values(stats) is not None) == single
    assert (b'"v":[%d]}' % stats.min_ns in spool._text(0)) == single


def _same_tree(a: object, b: object) -> None:
    """Equal, field by field, with the same types all the way down (not only ==)."""
    assert type(a) is type(b), (a, b)
    if dataclasses.is_dataclass(a):
        assert list(vars(a)) == list(vars(b))
        for name in vars(a):
            _same_tree(getattr(a, name), getattr(b, name))
    elif isinstance(a, dict):
        assert isinstance(b, dict) and list(a) == list(b)
        for k in a:
            _same_tree(a[k], b[k])
    elif isinstance(a, (list, tuple)):
        assert isinstance(b, (list, tuple)) and len(a) == len(b)
        for x, y in zip(a, b, strict=True):
            _same_tree(x, y)
    else:
        assert a == b or (a != a and b != b)  # NaN


def _one_round(sums: list[list[int]], memory: bool, device: bool, wait: int | None) -> TestSummary:
    class Mem:
        peak_bytes, allocated_bytes, allocations, leaked_bytes = 96, 80, 3, -16

    keys = [f"numpy.op{i % 3}" for i in range(len(sums))]
    figures = RoundFigures.from_sums(
        keys,
        sums,
        wall_time_ns=123_456,
        cpu_time_ns=120_001,
        memory=Mem() if memory else None,
        device_memory_bytes=4096 if device else None,
        wait_ns=wait,
        library_self_ns=77_000,
    )
    return summarize_rounds([figures])


_SUMS = st.lists(st.lists(st.integers(0, 2**62), min_size=9, max_size=9), min_size=0, max_size=5)


@settings(max_examples=100, deadline=None)
@given(_SUMS, st.booleans(), st.booleans(), st.one_of(st.none(), st.integers(0, 10**9)))
def test_one_round_summaries_come_back_the_same_from_their_flat_form(
    sums: list[list[int]], memory: bool, device: bool, wait: int | None
) -> None:
    # A one-round summary (most tests) is written as one flat list of its values; read
    # back it must be the very tree the generic form gives: same fields, same types, and
    # an op's total time the same object as its self time where it was.
    summary = _one_round(sums, memory, device, wait)
    for s in (summary, summary.as_stored()):
        assert SHORT_FORMS[TestSummary].values(s) is not None
        payload = ProfiledTest("t.py::x", False, s)
        spool: Spool[object] = Spool()
        spool.append(payload)
        back = spool[0]
        assert back == payload
        assert isinstance(back, ProfiledTest)
        _same_tree(back.summary, s)
        for key, op in s.ops.items():
            assert (op.cpu_time is op.self_cpu_time) == (
                back.summary.ops[key].cpu_time is back.summary.ops[key].self_cpu_time
            )
        # One record for the whole summary: no per-op record in the text.
        assert spool._text(0).count(b'"c":') == 2  # the payload and its summary


def test_summaries_the_flat_form_has_no_place_for_are_written_whole() -> None:
    base = _one_round([[2, 10, 5, 0, 0, 8, 8, 3, 3]], True, False, None)
    ops = dict(base.ops)
    key = next(iter(ops))
    varied = {
        "rounds": simple_summary(rounds=3),
        "ranges": dataclasses.replace(base, ranges={"flops": (1, 2)}),
        "op ranges": dataclasses.replace(
            base, ops={key: dataclasses.replace(ops[key], ranges={"count": (1, 2)})}
        ),
        "float time": dataclasses.replace(
            base, wall_time=dataclasses.replace(base.wall_time, min_ns=1.0)
        ),
        "two samples": dataclasses.replace(base, cpu_time=TimeStats.from_samples([1, 3])),
        "sessions": dataclasses.replace(base, sessions=(1, 1)),
    }
    for name, summary in varied.items():
        assert SHORT_FORMS[TestSummary].values(summary) is None, name
        spool: Spool[object] = Spool()
        spool.append(summary)
        _same_tree(spool[0], summary)


def test_the_verdict_of_a_test_without_baseline_is_written_short() -> None:
    new = compare(simple_summary(), None, fingerprint=machine().fingerprint)
    assert new is NEW
    equal = dataclasses.replace(new)  # an equal verdict built elsewhere: the whole form
    spool: Spool[TestResult] = Spool()
    spool.append(TestResult("t.py::test_a", simple_summary(), new))
    spool.append(TestResult("t.py::test_b", simple_summary(), equal))
    short, whole = spool
    assert short.verdict is NEW
    assert whole.verdict == NEW and whole.verdict is not NEW
    assert short == TestResult("t.py::test_a", simple_summary(), NEW)


def test_without_a_report_only_the_results_the_summary_reads_are_kept(tmp_path: Path) -> None:
    base = tmp_path / "baselines"
    regressing = "tests/test_a.py::test_r"
    _recorded(base, regressing)
    session = BaselineSession(GateOptions(base, keep_results=False), machine=machine())
    for i in range(3):
        assert session.judge(f"tests/test_a.py::test_{i}", simple_summary(), {}).label == "new"
    judged = session.judge(regressing, simple_summary(matmul_flops=3_000_000), {}).result
    assert judged is not None and judged.verdict.status == "regressed"
    # Three new tests are counted in memory, not spooled; the regressed one is, and the
    # terminal summary finds it by its place among the judged.
    assert [j.status for j in session.judged] == ["new", "new", "new", "regressed"]
    assert len(session.results) == 1 and session.result_of(3) == judged
    assert any(regressing in line for line in session_lines(session))
    with pytest.raises(KeyError):
        session.result_of(0)
    # With a report asked for (the default for a session built in code), every one is.
    every = BaselineSession(GateOptions(base), machine=machine())
    for i in range(3):
        every.judge(f"tests/test_a.py::test_{i}", simple_summary(), {})
    assert len(every.results) == 3 and every.result_of(1).nodeid == "tests/test_a.py::test_1"
