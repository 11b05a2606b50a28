"""A ``record_function`` scope's name: the same outcome with ``--opprof`` and without it.

A name that is no ``str`` raises ``TypeError`` where the scope is made in both runs (it
used to pass without ``--opprof`` and fail with it on an ``encode``), and a ``str`` keeps
every character: a NUL no longer cuts a name short, which merged ``"a\\x00b"`` with
``"a\\x00c"`` into one scope ``"a"`` (docs/python-api.md).
"""

from __future__ import annotations

import json

import pytest
from run_helpers import PytestRunner

SCOPES = r"""
import pytest
import pytest_opprof


class NoText:
    def __str__(self):
        raise RuntimeError("no text")


class Text(str):
    def __str__(self):
        raise RuntimeError("a str subclass's own __str__")


NAMES = [123, None, b"x", NoText()]


@pytest.mark.parametrize("name", NAMES, ids=["int", "none", "bytes", "no_text"])
def test_fixture_refuses(opprof, name):
    with pytest.raises(TypeError, match=r"record_function: a scope's name must be a str, not "):
        opprof.record_function(name)


@pytest.mark.parametrize("name", NAMES, ids=["int", "none", "bytes", "no_text"])
def test_api_refuses(name):
    with pytest.raises(TypeError, match=r"must be a str, not " + type(name).__name__):
        pytest_opprof.record_function(name)


def test_every_character_kept(opprof):
    for name in ("a\x00b", "a\x00c", "s\udcff", Text("sub")):
        with opprof.record_function(name):
            pass

    @pytest_opprof.record_function("d\x00e")
    def decorated():
        pass

    decorated()
"""


@pytest.mark.parametrize("profiled", [False, True], ids=["plain", "opprof"])
def test_same_outcome_with_and_without_opprof(
    run_pytest: PytestRunner, pytester: pytest.Pytester, profiled: bool
) -> None:
    pytester.makepyfile(test_scopes=SCOPES)
    args = (
        ("--opprof", "--opprof-report=report.json", "--opprof-report-details") if profiled else ()
    )
    result = run_pytest(*args)
    result.assert_outcomes(passed=9)
    if not profiled:
        return
    tests = json.loads((pytester.path / "report.json").read_text())["tests"]
    ops = tests["test_scopes.py::test_every_character_kept"]["ops"]
    scopes = {key for key in ops if not key.startswith(("[", "numpy"))}
    assert scopes == {"a\\x00b", "a\\x00c", "s\\udcff", "sub", "d\\x00e"}, sorted(ops)
