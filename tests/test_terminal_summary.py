"""The terminal summary at scale: by default a line for each test that needs attention
(not ``pass``, marked, or among the slowest) and one totals line; ``-v`` or
``--opprof-summary all`` lists every profiled test."""

from __future__ import annotations

import pytest
from run_helpers import PytestRunner

MANY = """
import numpy as np
import pytest


@pytest.mark.parametrize("k", range(30))
def test_many(k):
    np.add(np.ones(8), k)


@pytest.mark.profile
def test_marked():
    np.multiply(np.ones(8), 2)


def test_slow():
    a = np.ones((120, 120))
    for _ in range(40):
        a = a @ a / 120
"""

STEADY = ("--opprof-time-tolerance", "1000%", "--opprof-rounds", "3")


def listed(lines: list[str]) -> list[str]:
    """Node ids of the summary's test lines (between its header and its totals line)."""
    start = next(i for i, line in enumerate(lines) if line.lstrip().startswith("self CPU"))
    end = next(i for i in range(start, len(lines)) if lines[i].startswith("opprof: "))
    return [line.split()[-1] for line in lines[start + 1 : end]]


@pytest.mark.slow
def test_default_lists_what_needs_attention(
    pytester: pytest.Pytester, run_pytest: PytestRunner
) -> None:
    pytester.makepyfile(test_many=MANY)
    recorded = run_pytest("--opprof-update-baselines", *STEADY)
    recorded.assert_outcomes(passed=32)
    pytester.makepyfile(test_new="import numpy as np\n\ndef test_new():\n    np.ones(3)\n")
    result = run_pytest("--opprof", *STEADY)
    result.assert_outcomes(passed=33)
    shown = listed(result.outlines)
    assert "test_many.py::test_slow" in shown  # the slowest
    assert "test_many.py::test_marked" in shown  # marked
    assert "test_new.py::test_new" in shown  # no baseline: new
    # The 10 slowest, the marked one, the new one, and those whose times a busy machine
    # kept from being judged (a busy CI box has some), at most.
    busy = [x for x in result.outlines if " time not judged " in x and "::" in x]
    summary = result.stdout.str()  # shown when an assertion fails: what was listed, and why
    assert len(shown) <= 12 + len(busy), summary
    hidden = 33 - len(shown)
    line = next(line for line in result.outlines if line.startswith("opprof: 33 profiled"))
    assert f"; {hidden} passing test(s) not listed: -v or --opprof-summary all" in line, summary
    assert "1 new" in line and "pass)" in line
    new_line = next(x for x in result.outlines if x.endswith("test_new.py::test_new"))
    assert " new " in new_line

    for every in (("-v",), ("--opprof-summary", "all")):
        full = run_pytest("--opprof", *STEADY, *every)
        full.assert_outcomes(passed=33)
        assert len(listed(full.outlines)) == 33
        assert "not listed" not in full.stdout.str()


def test_a_first_run_lists_a_few_new_tests_and_counts_the_rest(
    pytester: pytest.Pytester, run_pytest: PytestRunner
) -> None:
    # Every test of a first run is new: a line each (twice) buried the summary of a large
    # suite.  The table shows the first new ones and the slowest; the gate's list stops
    # at the row limit and says how many more there are.
    pytester.makepyfile(test_many=MANY)
    result = run_pytest("--opprof", "--opprof-rounds", "1", "--opprof-row-limit", "5")
    result.assert_outcomes(passed=32)
    summary = result.stdout.str()
    shown = listed(result.outlines)
    assert "test_many.py::test_many[0]" in shown, summary  # the first new ones
    assert "test_many.py::test_slow" in shown, summary  # among the slowest
    assert "test_many.py::test_marked" in shown, summary  # marked: always
    assert len(shown) <= 10 + 10 + 1, summary
    line = next(x for x in result.outlines if x.startswith("opprof: 32 profiled"))
    assert f"; {32 - len(shown)} new test(s) not listed: -v" in line, summary
    start = result.outlines.index("new (no baseline):")
    assert result.outlines[start + 1 : start + 7] == [
        "  test_many.py::test_many[0]",
        "  test_many.py::test_many[1]",
        "  test_many.py::test_many[2]",
        "  test_many.py::test_many[3]",
        "  test_many.py::test_many[4]",
        "  ... 27 more (the JSON and HTML reports list all)",
    ], summary


def test_summary_option_is_checked(pytester: pytest.Pytester, run_pytest: PytestRunner) -> None:
    pytester.makepyfile("def test_a(): pass")
    result = run_pytest.inprocess("--opprof", "--opprof-summary", "some")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--opprof-summary*expected attention or all, got 'some'*"])
