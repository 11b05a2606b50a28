"""The rounds policy (``plugin/rounds.py``) as plain functions: no pytest run, no profile.

The plugin and ``bench/verdict_study.py`` both call these, so what is pinned here is what
the study scores.  The lazy inputs (``times_judged``, ``undecided``) read a baseline file
in the plugin: they must be asked only when their answer decides.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_opprof.plugin.rounds import (
    AUTO_ROUNDS,
    CONFIRM_ROUNDS,
    more_rounds,
    needs_confirmation,
    rounds_line,
    settled,
)

FLOOR_NS = 1_000_000


def _never(*args: object) -> bool:
    raise AssertionError("asked although the answer decides nothing")


def test_the_constants_leave_room_to_confirm() -> None:
    # auto judges times from 3 rounds on; confirming must add rounds.
    assert AUTO_ROUNDS >= 3 and CONFIRM_ROUNDS >= 1


@given(st.integers(1, 50), st.integers(0, 10**9))
def test_a_fixed_setting_runs_exactly_its_rounds(fixed: int, first_wall_ns: int) -> None:
    assert 1 + more_rounds(fixed, first_wall_ns, FLOOR_NS, _never) == fixed


def test_auto_under_the_floor_runs_one_round_without_asking() -> None:
    assert more_rounds(None, FLOOR_NS - 1, FLOOR_NS, _never) == 0


def test_auto_at_the_floor_asks_whether_times_can_be_judged() -> None:
    asked: list[int] = []

    def judged(rounds: int) -> bool:
        asked.append(rounds)
        return True

    assert more_rounds(None, FLOOR_NS, FLOOR_NS, judged) == AUTO_ROUNDS - 1
    assert asked == [AUTO_ROUNDS]
    assert more_rounds(None, 10 * FLOOR_NS, FLOOR_NS, lambda rounds: False) == 0


@pytest.mark.parametrize("fixed", [None, 1, 7])
def test_a_preempted_test_is_never_repeated(fixed: int | None) -> None:
    assert more_rounds(fixed, 10 * FLOOR_NS, FLOOR_NS, _never, preempted=True) == 0


def test_auto_confirms_only_an_undecided_verdict_on_its_rounds() -> None:
    assert needs_confirmation(None, AUTO_ROUNDS, lambda: True) is True
    assert needs_confirmation(None, AUTO_ROUNDS, lambda: False) is False


@pytest.mark.parametrize(
    ("fixed", "measured", "preempted"),
    [(None, AUTO_ROUNDS - 1, False), (None, 1, False), (5, 5, False), (None, AUTO_ROUNDS, True)],
)
def test_no_confirmation_without_auto_rounds(
    fixed: int | None, measured: int, preempted: bool
) -> None:
    # A fixed setting, too few rounds or a test that profiles itself: nothing summarised.
    assert needs_confirmation(fixed, measured, _never, preempted=preempted) is False


def test_auto_stops_early_only_from_the_rounds_a_time_verdict_needs() -> None:
    # Asked after each round from min_rounds up to AUTO_ROUNDS (exclusive): the caller
    # runs AUTO_ROUNDS where none of those settled.
    assert settled(None, 3, 3, lambda: True) is True
    assert settled(None, AUTO_ROUNDS - 1, 3, lambda: False) is False
    for measured in (1, 2, AUTO_ROUNDS, AUTO_ROUNDS + CONFIRM_ROUNDS):
        assert settled(None, measured, 3, _never) is False


@pytest.mark.parametrize("fixed", [1, 3, 4, 9])
def test_a_fixed_setting_never_stops_early(fixed: int) -> None:
    assert settled(fixed, 3, 3, _never) is False
    assert settled(None, 3, 3, _never, preempted=True) is False


def test_rounds_line_states_the_policy() -> None:
    assert rounds_line(3, FLOOR_NS) == "3"
    line = rounds_line(None, 2_500_000)
    assert line.startswith(f"auto ({AUTO_ROUNDS} for tests of 2.5 ms or more ")
    assert f"{CONFIRM_ROUNDS} more to confirm" in line
