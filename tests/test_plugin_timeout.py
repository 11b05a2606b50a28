"""A test that passes plain under pytest-timeout passes with ``--opprof`` too.

A body of a million ops left the plugin a tenth of a second or more of work (the
drain of its events, its summary) inside the call, where pytest-timeout and the
call's duration counted it: ``@pytest.mark.timeout(1)`` failed tests that passed
without the plugin.  The work now runs as the call's report is made, with the
timer held (``plugin/timeout_window.py``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from run_helpers import PytestRunner

LOOP_S = 1.0
"""The body calls ops for this long: at 300-1,500 ns an op recorded (a quiet or a loaded
machine), a million or more, which left the plugin 0.25-0.4 s of work after the body
(about a quarter of what recording them cost the body, quiet or loaded)."""
MAX_OPS = 3_000_000
"""At most (about 400 MB of events at the peak)."""
BODY_S = LOOP_S + 0.5
"""The body's length: its ops, then a sleep to this time."""
MARGIN_S = 0.12
"""The timeout is the body's length and this: room for pytest's own work around it."""

TIMED_TEST = f"""
import time

import numpy as np
import pytest


def test_a_first():
    # The first profiled test installs the hooks and calibrates: not the timed one.
    np.add(np.ones(8), 1.0)


@pytest.mark.timeout({BODY_S + MARGIN_S})
def test_body_of_many_ops():
    start = time.monotonic()
    x, y, z = np.ones(8), np.ones(8), np.empty(8)
    add = np.add
    ops = 0
    while ops < {MAX_OPS} and time.monotonic() < start + {LOOP_S}:
        for _ in range(1000):
            add(x, y, out=z)
        ops += 1000
    left = start + {BODY_S} - time.monotonic()
    assert left > 0, "the ops took longer than the body's time"
    time.sleep(left)
"""


# Alone under pytest -n: the body's ops must end within its time, which the other
# worker's runs would stretch.
@pytest.mark.slow
@pytest.mark.alone
@pytest.mark.parametrize("method", ["signal", "thread"])
def test_a_test_within_its_timeout_passes_with_opprof(
    pytester: pytest.Pytester, run_pytest: PytestRunner, method: str
) -> None:
    pytester.makepyfile(test_timed=TIMED_TEST)
    common = ("-p", "no:randomly", "-q", f"--timeout-method={method}")
    run_pytest(*common).assert_outcomes(passed=2)
    result = run_pytest(*common, "--opprof", "--durations=0", "--durations-min=0")
    result.assert_outcomes(passed=2)
    # The call's own clock (what --durations shows) sees the body, not the plugin's work.
    durations = [line for line in result.outlines if "call" in line and "many_ops" in line]
    assert durations, result.stdout.str()
    assert float(durations[0].split("s", 1)[0]) < BODY_S + MARGIN_S
