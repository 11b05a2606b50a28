"""Suite-wide: pytest runs started by tests (pytester) keep file order.

pytest-randomly is installed (the plugin is tested beside it), and it would
shuffle every inner run and import numpy in it.  ``pytester`` clears
``PYTEST_ADDOPTS`` when it starts, so it is set after; tests that mean to run
beside pytest-randomly remove it (tests/test_reliability_plugin.py).
"""

from __future__ import annotations

import pytest


@pytest.fixture
def pytester(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    monkeypatch.setenv("PYTEST_ADDOPTS", "-p no:randomly")
    return pytester
