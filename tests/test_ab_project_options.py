"""The project's own options travel to the partners as the values the user gave."""

from __future__ import annotations

import pytest

from pytest_opprof.ab import project_options

CONFTEST = """
import pathlib


def pytest_addoption(parser, pluginmanager):
    group = parser.getgroup("project", "the project's options")
    group.addoption("--runslow", action="store_true", default=False)
    group._addoption("--size", type=int, default=10)
    parser.addoption("--tag", action="append", default=[])
    parser.addoption("--data-dir", type=pathlib.Path, default=None)
    parser.addoption("--mode", dest="run_mode", default="fast")
    parser.addini("project_flag", "an ini value of the project's", default="")
"""


def test_the_values_given_other_than_the_defaults_travel(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(CONFTEST)
    config = pytester.parseconfigure("--runslow", "--tag=a", "--tag=b", "--data-dir=here")
    # --size and --mode left at their defaults stay the base's own; a path is no JSON.
    assert project_options.given(config) == {"runslow": True, "tag": ["a", "b"]}
    config = pytester.parseconfigure("--size=3000", "--mode=slow")
    assert project_options.given(config) == {"size": 3000, "run_mode": "slow"}


def test_a_conftest_that_cannot_be_read_keeps_its_options(pytester: pytest.Pytester) -> None:
    # Its hook raises when called a second time (by project_options.given).
    pytester.makeconftest(
        "import os\n\n"
        "def pytest_addoption(parser):\n"
        "    parser.addoption('--size', type=int, default=10)\n"
        "    if os.environ.get('OPPROF_TEST_READ_TWICE'):\n"
        "        raise RuntimeError('read twice')\n"
        "    os.environ['OPPROF_TEST_READ_TWICE'] = '1'\n"
    )
    with pytest.MonkeyPatch.context() as mp:
        mp.delenv("OPPROF_TEST_READ_TWICE", raising=False)
        config = pytester.parseconfigure("--size=5")
        assert project_options.given(config) == {}


def test_a_partner_sets_only_the_options_its_own_conftest_defines(
    pytester: pytest.Pytester,
) -> None:
    pytester.makeconftest(
        "def pytest_addoption(parser):\n    parser.addoption('--size', default=10)\n"
    )
    config = pytester.parseconfigure()
    project_options.apply(config, {"size": 3000, "label": "head only"})
    assert config.getoption("size") == 3000
    assert not hasattr(config.option, "label")


def test_a_plugin_module_of_the_project_counts_and_an_installed_one_does_not(
    pytester: pytest.Pytester,
) -> None:
    """A module of the project's tree loaded with ``-p`` adds the project's options too;
    an installed plugin's (pytest-benchmark's ``--benchmark-max-time``) stay the head's."""
    pytester.makepyfile(
        localopts="def pytest_addoption(parser):\n    parser.addoption('--level', default='1')\n"
    )
    pytester.syspathinsert()
    config = pytester.parseconfigure("-p", "localopts", "--level=3", "--benchmark-max-time=2")
    assert project_options.given(config) == {"level": "3"}
