"""A doctest runs again in warm-ups and rounds, each run from the globals it began with."""

from __future__ import annotations

import json

import pytest

from tests.run_helpers import PytestRunner

MODULE = '''
import numpy as np


def total(n):
    """
    >>> 'seen' in globals()
    False
    >>> seen = total(1000)
    >>> seen
    1000.0
    """
    return float(np.ones(n).sum())
'''


def test_a_doctest_passes_every_round_and_warm_up(
    pytester: pytest.Pytester, run_pytest: PytestRunner
) -> None:
    """doctest's runner empties a doctest's globals once it has run: without a fresh
    copy each run, the second failed with ``NameError: name 'np' is not defined``; kept
    from the run before, ``seen`` would be in them."""
    pytester.makepyfile(ones=MODULE)
    result = run_pytest(
        "--opprof",
        "--opprof-rounds=3",
        "--opprof-warmup=1",
        "--doctest-modules",
        "--opprof-report=report.json",
        "ones.py",
    )
    result.assert_outcomes(passed=1)
    test = json.loads((pytester.path / "report.json").read_text())["tests"]["ones.py::ones.total"]
    assert test["rounds"] == 3, test
