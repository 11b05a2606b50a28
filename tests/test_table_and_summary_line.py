"""A test's summary line and its printed op table agree, or say why they differ.

The line gives each op's median self time with its waits for a CPU left out; the table
is one round as measured.  On a busy machine they read 26.5 ms and 30.44 ms for the same
op, neither saying why.  Real waits: this process, the pytest run and a CPU-bound
process share one CPU (``load_helpers.busy_machine``).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

import pytest
from load_helpers import busy_machine

if TYPE_CHECKING:
    from run_helpers import PytestRunner

TESTS = """
import numpy as np
import pytest


@pytest.mark.profile
def test_matmul():
    a = np.random.default_rng(0).random((160, 160))
    for _ in range(120):
        a @ a
"""

_UNITS_US = {"s": 1e6, "ms": 1e3, "us": 1.0}


def _us(text: str) -> float:
    number, unit = re.fullmatch(r"([\d.]+)(s|ms|us)", text).groups()  # type: ignore[union-attr]
    return float(number) * _UNITS_US[unit]


def test_the_tables_footer_reconciles_it_with_the_summary_line(
    pytester: pytest.Pytester, run_pytest: PytestRunner
) -> None:
    pytester.makepyfile(test_ops=TESTS)
    with busy_machine(seconds=60, per_core=1, one_cpu=True, last_cpu=True):
        result = run_pytest("--opprof", "--opprof-rounds", "1", "--opprof-capture", "numpy")
    result.assert_outcomes(passed=1)
    text = result.stdout.str()
    line = re.search(r"numpy\.matmul (\S+) +\S+ +test_ops\.py::test_matmul", text)
    assert line is not None, text
    summary_us = _us(line.group(1))
    row = re.search(r"^ +numpy\.matmul +\S+% +(\S+) ", text, re.MULTILINE)
    assert row is not None, text
    table_us = _us(row.group(1))
    footer = re.search(r"^this table: the test's round, as measured(.*)$", text, re.MULTILINE)
    assert footer is not None, text
    assert "the summary line: each op's self time, waits for a CPU left out" in footer.group(1)
    overhead = re.search(r"profiler overhead subtracted: .*?(\d+) ns/numpy op", text)
    assert overhead is not None
    # 120 calls' profiler cost is kept on the line, taken off in the table.
    table_us += 120 * int(overhead.group(1)) / 1000
    waited = re.search(r"numpy\.matmul ([\d.]+(?:s|ms|us))\b", footer.group(1))
    if waited is not None:  # the footer names the wait the line left out
        table_us -= _us(waited.group(1))
    # The line keeps three significant digits.
    assert abs(table_us - summary_us) <= 0.01 * summary_us, (table_us, summary_us, footer[0])
