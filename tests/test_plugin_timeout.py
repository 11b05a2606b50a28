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

OPS = 2_000_000
"""At the 90-100 ns an op the plugin took after the body, 0.18 s or more of its work."""
BODY_S = 3.0
"""The body's length: its ops, then a sleep to this time (its ops take 1-2 s recorded)."""
MARGIN_S = 0.15
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
    deadline = time.monotonic() + {BODY_S}
    x, y, z = np.ones(8), np.ones(8), np.empty(8)
    add = np.add
    for _ in range({OPS}):
        add(x, y, out=z)
    assert time.monotonic() < deadline, "the ops took longer than the body's time"
    time.sleep(deadline - time.monotonic())
"""


# Alone under pytest -n: the body's ops must end within its time, which the other
# worker's runs would stretch.
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
