"""Timing accuracy: a busy-wait of known length, and the profiler's overhead subtraction.

Timings on a shared CI machine are disturbed by other load, so each check takes
the best of a few attempts; the tolerances still fail on a wrong clock
conversion (a TSC rate off by 2%) or on a subtraction that does not help.
"""

from __future__ import annotations

import time

import numpy as np
import pytest

import pytest_opprof as opprof
from pytest_opprof.capture import recorder
from pytest_opprof.capture.overhead import Overhead
from pytest_opprof.gate.summary import RoundFigures
from pytest_opprof.native_layout.records import KIND_NUMPY, KIND_SCOPE

ATTEMPTS = 15
"""Timing tests judge their least disturbed attempt: on a VM whose speed swings from
moment to moment, 5 attempts left none undisturbed in 2 of 4 CI runs here (errors of
-9% to +13% against the 3% bound), and 9 left none in one CI run of a noisier phase (the
least disturbed +3.9% raw, +3.2% corrected; the others +5% to +11%)."""


def spin(ns: int) -> int:
    """Busy-wait ``ns``; return the duration the loop itself measured (ns)."""
    t0 = time.perf_counter_ns()
    while (t := time.perf_counter_ns()) - t0 < ns:
        pass
    return t - t0


def scope_error(ms: float) -> float:
    with opprof.profile(capture=["none"], profile_memory=False) as prof:
        with opprof.record_function("wait"):
            truth = spin(int(ms * 1e6))
    (row,) = [r for r in prof.key_averages() if r.key == "wait"]
    return row.cpu_time_total * 1000 / truth - 1


@pytest.mark.parametrize("ms", [2.0, 20.0])
def test_busy_wait_of_known_length_within_2_percent(ms: float) -> None:
    errors = [scope_error(ms) for _ in range(ATTEMPTS)]
    assert min(abs(e) for e in errors) < 0.02, errors


def _nested_errors(children: int, depth: int) -> tuple[float, float]:
    """(raw, corrected) relative error of a root's self time around a 5 ms busy-wait."""
    scopes = [opprof.record_function(f"level{i}") for i in range(depth)]

    def tree(i: int = 0) -> None:
        if i < depth:
            with scopes[i]:
                tree(i + 1)

    def root_share() -> int:
        """ns of the unprofiled loop spent at the root's level: its own loop, the call of
        level 0 and entering and leaving its scope (the whole tree less the tree below)."""
        whole = min(_time_ns(lambda: [tree() for _ in range(children)]) for _ in range(3))
        below = min(_time_ns(lambda: [tree(1) for _ in range(children)]) for _ in range(3))
        loop = min(_time_ns(lambda: [None for _ in range(children)]) for _ in range(3))
        return max(whole - below, 0) + loop

    # The unprofiled loops are timed right before and right after the profiled one: another
    # process on the other core (a pytest-xdist worker) slows all of them alike.  So is
    # the profiler's own cost: calibrated at a process's first profile (and once a minute
    # after), it came out 3x the quiet figure in a CI worker whose first profile ran
    # beside heavy tests.  This test holds the subtraction to the truth, so each attempt
    # calibrates afresh.
    recorder._overheads.clear()
    before = root_share()
    with opprof.profile(capture=["none"], profile_memory=False) as prof:
        with opprof.record_function("root"):
            spun = spin(5_000_000)
            for _ in range(children):
                tree()
    truth_us = (spun + (before + root_share()) / 2) / 1000
    root = next(e for e in prof.events() if e.name == "root")
    return root.self_cpu_time_total_raw / truth_us - 1, root.self_cpu_time_total / truth_us - 1


def _time_ns(fn: object) -> int:
    t0 = time.perf_counter_ns()
    fn()  # type: ignore[operator]
    return time.perf_counter_ns() - t0


# Its truth is timed beside the profiled run: another worker's tests slowed one side.
@pytest.mark.slow
@pytest.mark.alone
def test_overhead_subtraction_brings_nested_scopes_near_the_truth() -> None:
    attempts = [_nested_errors(children=2000, depth=6) for _ in range(ATTEMPTS)]
    # Being descheduled adds time, to both figures of an attempt (or, during the idle
    # timings the truth is built from, to the truth): judge the least disturbed attempt,
    # the one with the smallest raw error in size, as a whole.
    raw, corrected = min(attempts, key=lambda attempt: abs(attempt[0]))
    # 2000 recorded children cost the root measurable time, which subtraction removes ...
    assert corrected < raw, attempts
    # ... leaving the root's self time within 3% of the spin plus its own loop.
    assert abs(corrected) < 0.03, attempts


def test_overhead_shown_in_footer_and_raw_figures_kept() -> None:
    x = np.ones(16)
    with opprof.profile(capture=["numpy"]) as prof:
        with opprof.record_function("outer"):
            for _ in range(200):
                np.add(x, x)
    overhead = prof.overhead
    assert overhead is not None
    assert overhead.per_event_ns(KIND_SCOPE) > 0
    assert overhead.per_event_ns(KIND_NUMPY) > 0
    rows = prof.key_averages()
    assert overhead.describe() in rows.table()
    assert "profiler overhead subtracted:" in rows.table()
    outer = next(r for r in rows if r.key == "outer")
    # The 200 numpy children's outside cost comes off the scope's self time.
    expected = outer.self_cpu_time_total_raw - 200 * overhead.outside_ns[KIND_NUMPY] / 1000
    assert outer.self_cpu_time_total == pytest.approx(
        max(expected - overhead.inside_ns[KIND_SCOPE] / 1000, 0), abs=1e-3
    )
    for row in rows:
        assert row.self_cpu_time_total <= row.self_cpu_time_total_raw
    events = prof.events()
    assert events.overhead is overhead
    assert sum(e.self_cpu_time_total_raw for e in events) == pytest.approx(
        sum(r.self_cpu_time_total_raw for r in rows)
    )


def test_without_subtraction_self_times_are_raw() -> None:
    with opprof.profile(capture=["none"], subtract_overhead=False) as prof:
        with opprof.record_function("outer"):
            for _ in range(50):
                with opprof.record_function("inner"):
                    pass
    assert prof.overhead is None
    rows = prof.key_averages()
    assert "profiler overhead subtracted" not in rows.table()
    for row in rows:
        assert row.self_cpu_time_total == row.self_cpu_time_total_raw


def test_baseline_figures_use_raw_self_times() -> None:
    with opprof.profile(capture=["none"]) as prof:
        with opprof.record_function("outer"):
            for _ in range(100):
                with opprof.record_function("inner"):
                    pass
    rows = prof.key_averages()
    outer = next(r for r in rows if r.key == "outer")
    assert outer.self_cpu_time_total < outer.self_cpu_time_total_raw
    figures = RoundFigures.from_events(rows, wall_time_ns=prof.wall_time_ns, cpu_time_ns=1)
    assert figures.ops["outer"].self_cpu_ns == round(outer.self_cpu_time_total_raw * 1000)


def test_one_calibration_made_beside_other_work_is_outvoted() -> None:
    quiet = Overhead(inside_ns={KIND_SCOPE: 160.0}, outside_ns={KIND_SCOPE: 25.0})
    busy = Overhead(inside_ns={KIND_SCOPE: 180.0}, outside_ns={KIND_SCOPE: 75.0})
    again = Overhead(
        inside_ns={KIND_SCOPE: 162.0, KIND_NUMPY: 0.0},
        outside_ns={KIND_SCOPE: 27.0, KIND_NUMPY: 31.0},
    )
    median = Overhead.median([quiet, busy, again])
    assert median.inside_ns == {KIND_SCOPE: 162.0, KIND_NUMPY: 0.0}
    assert median.outside_ns == {KIND_SCOPE: 27.0, KIND_NUMPY: 31.0}


def test_the_profiler_calibrates_again_after_a_while_and_uses_the_median(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def run() -> opprof.profile:
        with opprof.profile(capture=["none"], profile_memory=False) as prof:
            with opprof.record_function("root"):
                pass
        return prof

    recorder._overheads.clear()
    first = run().overhead
    assert first is not None and first.outside_ns
    assert run().overhead is first  # within the minute: the same calibration
    [key] = [k for k, (_, kept) in recorder._calibrations.items() if first in kept]
    assert recorder._calibrations[key][1] == [first]

    monkeypatch.setattr(recorder, "RECALIBRATE_S", 0.0)  # every profile is "a minute later"
    for _ in range(recorder.CALIBRATIONS_KEPT + 2):
        used = run().overhead
    _, kept = recorder._calibrations[key]
    assert len(kept) == recorder.CALIBRATIONS_KEPT  # the last few
    assert all(k is not first for k in kept)
    assert used == Overhead.median(kept)
    assert recorder._overheads[key] is used

    recorder._overheads.clear()  # a fresh start forgets the history
    run()
    assert len(recorder._calibrations[key][1]) == 1
