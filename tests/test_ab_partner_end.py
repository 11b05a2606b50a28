"""How an A/B run's partners end: at once after their last test, writing nothing of the user's.

Real A/B runs (``--opprof-against=HEAD``) in real git repositories, as in ``test_ab.py``.
"""

from __future__ import annotations

import textwrap
import time
from pathlib import Path

import pytest
from test_ab import make_repo, run_ab

SLOW_SUMMARY_S = 30
"""What each partner's terminal summary would take (the project's conftest below)."""

CONFTEST = f"""
import time

from pytest_opprof.ab import partner_key


def pytest_terminal_summary(terminalreporter, config):
    if config.stash.get(partner_key, None) is not None:  # only in a partner process
        time.sleep({SLOW_SUMMARY_S})
"""


@pytest.mark.slow
def test_the_run_does_not_wait_for_what_a_partner_does_after_its_session(
    pytester: pytest.Pytester,
) -> None:
    """A partner's output goes to a log nobody reads: its terminal summary (another
    plugin's, here one that sleeps) must not hold the run's end."""
    (pytester.path / "conftest.py").write_text(CONFTEST)
    make_repo(pytester.path, n=2_000)
    started = time.perf_counter()
    result = run_ab(pytester)
    took_s = time.perf_counter() - started
    result.assert_outcomes(passed=2)
    assert took_s < SLOW_SUMMARY_S, result.stdout.str()


@pytest.mark.slow
def test_a_partner_writes_neither_the_users_junit_nor_leaves_its_temp_dirs_locked(
    pytester: pytest.Pytester, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``--junitxml`` from the project's ini reaches the partners too: the head's partner
    runs in the head's directory, and its report (without the A/B properties) must not
    replace the head's.  And a partner that ends early still removes the locks of its
    temporary directories, as a process that exits normally does."""
    pytester.makeini("[pytest]\naddopts = --junitxml=junit.xml\n")
    (pytester.path / "test_tmp.py").write_text("def test_tmp(tmp_path):\n    assert tmp_path\n")
    make_repo(pytester.path, n=2_000)
    temproot = tmp_path / "temproot"
    temproot.mkdir()
    monkeypatch.setenv("PYTEST_DEBUG_TEMPROOT", str(temproot))
    result = run_ab(pytester)
    result.assert_outcomes(passed=3)
    junit = (pytester.path / "junit.xml").read_text()
    assert junit.count('name="opprof_time_basis"') == 3, junit
    sessions = list(temproot.glob("pytest-of-*/pytest-*"))
    assert len(sessions) >= 2, sessions  # both partners made theirs
    locked = [str(p) for p in temproot.glob("pytest-of-*/pytest-*/.lock")]
    assert not locked, locked


@pytest.mark.slow
def test_a_partner_writes_no_other_plugins_session_end_but_tears_its_fixtures_down(
    pytester: pytest.Pytester,
) -> None:
    """A report plugin writes its file in ``pytest_sessionfinish`` (pytest-html,
    pytest-json-report; pytest's cache its ``lastfailed``), a path relative to where the
    run started: the head's partner runs there too, and what it wrote would land over the
    head's.  Only the head's session end runs such hooks; every process still tears its
    session-scoped fixtures down."""
    (pytester.path / "conftest.py").write_text(
        textwrap.dedent(
            """
            import os

            import pytest

            def pytest_sessionfinish(session):
                with open("session-end.log", "a") as log:
                    log.write(f"{os.getpid()}\\n")

            @pytest.fixture(scope="session", autouse=True)
            def held():
                yield
                with open(os.environ["TEARDOWN_LOG"], "a") as log:
                    log.write(f"{os.getpid()}\\n")
            """
        )
    )
    make_repo(pytester.path, n=2_000)
    torn = pytester.path / "teardown.log"
    pytester._monkeypatch.setenv("TEARDOWN_LOG", str(torn))
    # One partner a side: a second one tears down only where some test's pairs reached it,
    # which a CI box's noise decides (it once did: five processes, not three).
    result = run_ab(pytester, "--opprof-ab-processes=1")
    result.assert_outcomes(passed=2)
    assert len((pytester.path / "session-end.log").read_text().split()) == 1
    assert len(set(torn.read_text().split())) == 3  # the head and both partners
