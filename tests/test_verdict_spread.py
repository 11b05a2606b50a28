"""Times judged to the precision this machine's sessions allow (``gate/spread.py``), and
library ops that fail no test alone beside other processes (``TimeBasis.co_run``)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from baseline_helpers import Row, entry, machine, pooled

from pytest_opprof.gate.session import BaselineSession, GateOptions
from pytest_opprof.gate.spread import FLOOR_NS, SPREAD_Z, TEST_KEY, allowance, op_spreads
from pytest_opprof.gate.store import update
from pytest_opprof.gate.summary import OTHER_OPS, RoundFigures, TestSummary, summarize_rounds
from pytest_opprof.gate.verdict import Tolerances, Verdict, compare

HERE = machine().fingerprint
TOL = Tolerances(time=0.15, speed_scaled=False)


def session(
    kernel_us: float,
    add_us: float,
    rounds: int = 5,
    waited: float = 0.0,
    every: int = 2,
    library: str = "numpy.add",
) -> TestSummary:
    """One session of a test made of a Python scope and a library op (a little noise
    between rounds); every ``every``-th round waited ``waited`` of its wall time for a
    CPU, and its library op ran that much slower beside the process that held the CPU."""
    figures = []
    for i in range(rounds):
        wobble = 1 + 0.005 * (i - rounds // 2)
        busy = i % every == every - 1
        k, a = kernel_us * wobble, add_us * wobble * (1 + waited if busy else 1)
        wall = (k + a) / (1 - waited) if busy else k + a
        figures.append(
            RoundFigures.from_events(
                [Row("kernel", 1, k, k), Row(library, 1, a, a)],
                wall_time_ns=round(wall * 1000),
                cpu_time_ns=round((k + a) * 1000),
                wait_ns=round((wall - k - a) * 1000),
            )
        )
    return summarize_rounds(figures)


def moving_file(tests: int = 4) -> list[TestSummary]:
    """A baseline file's tests, mostly ``numpy.add``, on a machine whose phases move it by
    about 10% from one session to the next and the Python scope by under 1%."""
    return [
        pooled(
            session(500.0 * (1 + 0.01 * t), 3000.0),
            session(505.0 * (1 + 0.01 * t), 3750.0),
            session(497.0 * (1 + 0.01 * t), 3000.0),
        )
        for t in range(tests)
    ]


def judge(now: TestSummary, base: TestSummary, spreads: dict[str, float] | None) -> Verdict:
    return compare(now, entry(base), fingerprint=HERE, tolerances=TOL, spreads=spreads)


def test_spreads_are_the_median_over_a_files_tests_of_each_ops_session_spread() -> None:
    spreads = op_spreads(moving_file())
    # Sessions of 3.0, 3.75 and 3.0 ms: the sample standard deviation of their logs, over
    # its median for three normal values (so that the median over tests is unbiased).
    add = math.log(1.25) / math.sqrt(3) / 0.8326
    assert spreads["numpy.add"] == pytest.approx(add, rel=1e-3)
    assert spreads["kernel"] < 0.01
    assert allowance(spreads["numpy.add"]) == pytest.approx(SPREAD_Z * math.sqrt(2) * add)
    # The test's own time, 3.5, 4.255 and 3.497 ms (the ops' sum), has its spread too.
    walls = [math.log(w) for w in (3.5, 4.255, 3.497)]
    mean = sum(walls) / 3
    own = math.sqrt(sum((w - mean) ** 2 for w in walls) / 2) / 0.8326
    assert spreads[TEST_KEY] == pytest.approx(own, rel=0.01)
    # Too few tests show it: no estimate.
    assert op_spreads(moving_file(tests=2)) == {}
    # A single session shows nothing about sessions.
    assert op_spreads([session(2000.0, 1000.0)] * 4) == {}


def test_spreads_leave_out_short_ops_and_rounds_that_waited() -> None:
    short = [
        pooled(session(2000.0, 50.0), session(2000.0, 80.0), session(2000.0, 50.0))
        for _ in range(4)
    ]
    assert FLOOR_NS > 50_000
    assert "numpy.add" not in op_spreads(short)

    # A session on a busy machine: its clean rounds ran at the other sessions' speed, and
    # the spread is of those; one whose every round waited leaves its test out.
    def busy_file(every: int) -> list[TestSummary]:
        busy = session(2000.0, 1000.0, waited=0.5, every=every)
        return [pooled(session(2000.0, 1000.0), busy, session(2000.0, 1000.0))] * 4

    assert op_spreads(busy_file(every=2))["numpy.add"] == pytest.approx(0.0, abs=0.01)
    every = busy_file(every=1)
    assert op_spreads(every) == {}
    # With no wait limit (``Tolerances.max_wait_share`` None), those rounds count.
    assert op_spreads(every, limit=None)["numpy.add"] > 0.1


def test_a_test_made_of_a_moving_op_is_judged_beyond_its_spread() -> None:
    files = moving_file()
    spreads = op_spreads(files)
    base = files[0]
    # 5.2 ms against sessions of 3.5-4.26 ms: beyond 15% of the slowest, within the
    # 26% that numpy.add's spread allows a test that is 86% numpy.add.
    moved = session(500.0, 4700.0)
    plain = judge(moved, base, None)
    assert plain.status == "regressed"
    widened = judge(moved, base, spreads)
    assert widened.status == "pass"
    (note,) = [n for n in widened.notes if "from one session to the next" in n]
    assert "`numpy.add`" in note and "not 15%" in note
    (row,) = [m for m in widened.metrics if m.metric == "wall time"]
    assert row.tolerance is not None and row.tolerance > 0.15
    # Far beyond what the machine's sessions move: still a regression, naming the op.
    worse = judge(session(500.0, 6000.0), base, spreads)
    assert worse.status == "regressed"
    assert next(r.op for r in worse.reasons if r.status == "regressed") == "numpy.add"


def test_a_steady_scope_keeps_the_plain_tolerance() -> None:
    spreads = op_spreads(moving_file())
    base = pooled(session(8000.0, 0.0), session(8000.0, 0.0), session(8000.0, 0.0))
    verdict = judge(session(9600.0, 0.0), base, spreads)  # kernel +20%
    assert verdict.status == "regressed"
    assert not [n for n in verdict.notes if "from one session to the next" in n]


def test_a_moving_op_fails_no_test_alone_within_its_spread() -> None:
    spreads = op_spreads(moving_file())
    # A test of a long scope and a steady numpy.add: numpy.add +27% moves the test's
    # time 2%, within tolerance, so only an op that fails alone could fail it.
    base = pooled(session(20000.0, 1500.0), session(20000.0, 1500.0), session(20000.0, 1500.0))
    now = session(20000.0, 1900.0)
    assert judge(now, base, None).status == "regressed"
    alone = judge(now, base, spreads)
    assert alone.status == "pass"
    (reason,) = [r for r in alone.reasons if r.op == "numpy.add"]
    assert reason.kind == "slower" and reason.status == "info"
    # Beyond its spread, it fails the test alone.
    assert judge(session(20000.0, 2600.0), base, spreads).status == "regressed"


def test_a_library_op_fails_no_test_alone_when_rounds_waited_for_a_cpu() -> None:
    base = pooled(session(20000.0, 1500.0), session(20000.0, 1500.0), session(20000.0, 1500.0))
    quiet = session(20000.0, 2000.0)  # numpy.add +33%, the test +2%
    assert judge(quiet, base, None).status == "regressed"
    busy = session(20000.0, 2000.0, waited=0.3)
    verdict = judge(busy, base, None)
    assert verdict.status == "pass"
    (note,) = [n for n in verdict.notes if "fails no test alone" in n]
    assert note.startswith("`numpy.add` ran slower")
    # A baseline recorded on a busy machine holds it back the same way.
    busy_base = pooled(
        session(20000.0, 1500.0, waited=0.3),
        session(20000.0, 1500.0),
        session(20000.0, 1500.0),
    )
    assert judge(quiet, busy_base, None).status == "pass"
    # The ops a baseline folded into one key, short library calls mostly, likewise.
    folded = [session(20000.0, 1500.0, library=OTHER_OPS, waited=w) for w in (0.0, 0.0, 0.0, 0.3)]
    folded_base = pooled(*folded[:3])
    assert judge(session(20000.0, 2000.0, library=OTHER_OPS), folded_base, None).status == (
        "regressed"
    )
    held = judge(session(20000.0, 2000.0, library=OTHER_OPS, waited=0.3), folded_base, None)
    assert held.status == "pass"
    assert any(n.startswith(f"`{OTHER_OPS}` ran slower") for n in held.notes)
    # A Python scope's time still fails alone: the Python speed reference follows it.
    scope_base = pooled(session(1500.0, 20000.0), session(1500.0, 20000.0))
    assert judge(session(2000.0, 20000.0, waited=0.3), scope_base, None).status == "regressed"


def test_the_gate_reads_spreads_from_the_tests_own_baseline_file(tmp_path: Path) -> None:
    base_dir = tmp_path / "baselines"
    files = moving_file()
    update(
        base_dir / "test_moving.json",
        {f"test_{i}": entry(s, on=machine()) for i, s in enumerate(files)},
    )
    update(base_dir / "test_other.json", {"test_0": entry(files[0], on=machine())})
    elsewhere = machine(cpu_model="Another CPU")
    update(
        base_dir / "test_foreign.json",
        {f"test_{i}": entry(s, on=elsewhere) for i, s in enumerate(files)}
        | {"test_mine": entry(files[0], on=machine())},
    )
    gate = BaselineSession(GateOptions(base_dir), machine=machine())
    moved = session(500.0, 4700.0)
    assert gate.verdict("test_moving.py::test_0", moved).status == "pass"
    assert set(gate.spreads("test_moving.py::test_0")) == {"kernel", "numpy.add", TEST_KEY}
    # Another file with one test shows no spread: the plain tolerance.
    assert gate.verdict("test_other.py::test_0", moved).status == "regressed"
    # Entries recorded on another machine say nothing about this one.
    assert gate.spreads("test_foreign.py::test_mine") == {}
    assert gate.verdict("test_foreign.py::test_mine", moved).status == "regressed"


def rest_session(kernel_us: float, rest_us: float, rounds: int = 5) -> TestSummary:
    """One session of a test made of a steady Python scope and ``rest_us`` of time that no
    op with a spread covers (test code between ops, short library calls)."""
    figures = [
        RoundFigures.from_events(
            [Row("kernel", 1, kernel_us, kernel_us)],
            wall_time_ns=round((kernel_us + rest_us) * 1000),
            cpu_time_ns=round((kernel_us + rest_us) * 1000),
            wait_ns=0,
        )
        for _ in range(rounds)
    ]
    return summarize_rounds(figures)


def test_a_test_time_that_no_op_explains_is_judged_beyond_its_files_test_spread() -> None:
    # The tests' own times move about 19% from one session to the next, their scope not.
    files = [
        pooled(
            rest_session(1000.0, 3000.0), rest_session(1000.0, 3750.0), rest_session(1000.0, 3000.0)
        )
        for _ in range(4)
    ]
    spreads = op_spreads(files)
    assert spreads[TEST_KEY] > 0.1 and spreads["kernel"] < 0.01
    base = files[0]
    # 5.8 ms against sessions of 4-4.75 ms: beyond 15% of the slowest, within what the
    # file's tests show for the three quarters of the time that the scope does not explain.
    moved = rest_session(1000.0, 4800.0)
    assert judge(moved, base, None).status == "regressed"
    widened = judge(moved, base, spreads)
    assert widened.status == "pass"
    (note,) = [n for n in widened.notes if "from one session to the next" in n]
    assert "the times of this file's tests" in note and "not 15%" in note
    assert judge(rest_session(1000.0, 6500.0), base, spreads).status == "regressed"
    # The same spread does not widen a test made of its steady scope alone.
    steady = pooled(*[rest_session(4000.0, 0.0)] * 3)
    assert judge(rest_session(4800.0, 0.0), steady, spreads).status == "regressed"
