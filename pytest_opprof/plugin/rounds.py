"""The rounds policy: how many times a test body runs, as pure functions.

Kept apart from the pytest glue (no pytest import, no profile, no file read) so that
``bench/verdict_study.py`` scores exactly the policy the plugin runs: each decision
takes plain figures, and the one input that may read a baseline file is a callable
the policy asks only when its answer matters.

``auto`` runs one round, then ``AUTO_ROUNDS`` in all for a test whose first round
reached the time floor and whose times can be judged, then ``CONFIRM_ROUNDS`` more
when the verdict on those rounds is ``time_undecided`` (a time beyond its tolerance):
judging all of them buys what ``AUTO_ROUNDS + CONFIRM_ROUNDS`` rounds for every test
would, at the cost of the few tests that look slower.  The constants live with the
options, whose help text states them.

In a gate run (a stored baseline, none being recorded) ``auto`` stops a test's rounds
early, from the ``time_min_rounds`` its times need to be judged, once the verdict on
them passes with every judged time clearly within its limit (``round_noise.py``):
:func:`settled`.  An update run keeps ``AUTO_ROUNDS``, the rounds a baseline is judged
against.

On a busy machine, rounds whose thread waited for a CPU are not judged
(``gate/waiting.py``): ``auto`` replaces them, one round at a time and at most
``BUSY_ROUNDS`` more, until ``AUTO_ROUNDS`` clean rounds exist, unless no round was
clean and ``AUTO_ROUNDS`` are fit to be judged on work time (the time judged then).
When the machine stays busy, the verdict judges work time or says why it could not.

``auto`` runs one round more for a test measured once whose FLOPs, op count or memory
moved beyond tolerance (:func:`confirms_exact`): where its two rounds disagree the figure
depends on data the test draws anew, and is not judged (``gate/rows.py``).
"""

from __future__ import annotations

from collections.abc import Callable

from pytest_opprof.plugin.options import AUTO_ROUNDS, CONFIRM_ROUNDS, rounds_text

BUSY_ROUNDS = 5
"""At most this many rounds more for ``auto`` to replace rounds that waited for a CPU."""

__all__ = [
    "AUTO_ROUNDS",
    "BUSY_ROUNDS",
    "CONFIRM_ROUNDS",
    "another_clean_round",
    "confirms_exact",
    "more_rounds",
    "needs_confirmation",
    "rounds_line",
    "rounds_text",
    "settled",
]


def more_rounds(
    fixed: int | None,
    first_work_ns: int,
    min_time_ns: int,
    times_judged: Callable[[int], bool],
    *,
    preempted: bool = False,
) -> int:
    """How many rounds to run after the first.

    ``fixed``: the test's ``rounds`` setting (None: ``auto``).  ``auto`` repeats a test
    only when its times can be judged: its first round's work (``first_work_ns``: wall
    time less its wait for a CPU, so that a trivial test another process held up is not
    taken for a long one) reached the time floor (``min_time_ns``) and
    ``times_judged(AUTO_ROUNDS)`` says a baseline is being recorded or the stored one has
    enough rounds.  Without baselines,
    ``--opprof`` costs one round.  A ``preempted`` test profiles itself: repeating it
    measures nothing.
    """
    if preempted:
        return 0
    if fixed is not None:
        return fixed - 1
    if first_work_ns < min_time_ns:
        return 0
    return AUTO_ROUNDS - 1 if times_judged(AUTO_ROUNDS) else 0


def another_clean_round(
    fixed: int | None,
    measured: int,
    clean: int | None,
    replaced: int,
    *,
    preempted: bool = False,
    workable: int | None = None,
) -> bool:
    """Whether ``auto`` runs one more round because rounds waited for a CPU.

    ``measured``: rounds so far; ``clean``: how many of them waited at most the limit
    (None: waiting not measured); ``replaced``: rounds already run for this reason;
    ``workable``: how many waited at most ``waiting.WORK_WAIT_LIMIT`` (None: not
    counted).  Only a test ``auto`` repeats (``measured`` reached ``AUTO_ROUNDS``) asks
    for them.  When no round was clean but ``AUTO_ROUNDS`` can be judged on work time,
    the machine is busy throughout: more rounds would buy no clean one, only time.
    """
    if fixed is not None or preempted or clean is None or measured < AUTO_ROUNDS:
        return False
    if clean == 0 and workable is not None and workable >= AUTO_ROUNDS:
        return False
    return clean < AUTO_ROUNDS and replaced < BUSY_ROUNDS


def settled(
    fixed: int | None,
    measured: int,
    min_rounds: int,
    settle: Callable[[], bool],
    *,
    preempted: bool = False,
) -> bool:
    """Whether ``auto`` stops a test's rounds before ``AUTO_ROUNDS``.

    Only ``auto`` stops early, with at least ``min_rounds`` rounds (``measured``: the
    rounds a time verdict needs, ``Tolerances.time_min_rounds``), and only when
    ``settle()`` says the verdict on them is settled (asked last: it summarises the
    rounds and reads the baseline)."""
    if fixed is not None or preempted or not min_rounds <= measured < AUTO_ROUNDS:
        return False
    return settle()


def needs_confirmation(
    fixed: int | None,
    measured: int,
    undecided: Callable[[], bool],
    *,
    preempted: bool = False,
) -> bool:
    """Whether ``auto`` runs ``CONFIRM_ROUNDS`` more rounds and judges all of them.

    Only ``auto`` confirms, once it has ``AUTO_ROUNDS`` rounds (``measured``), and only
    when ``undecided()`` says the verdict on them is ``time_undecided`` (asked last: it
    summarises the rounds and reads the baseline).
    """
    if fixed is not None or preempted or measured < AUTO_ROUNDS:
        return False
    return undecided()


def confirms_exact(
    fixed: int | None, measured: int, moved: Callable[[], bool], *, preempted: bool = False
) -> bool:
    """Whether ``auto`` runs one more round to check the deterministic figures (a ``fixed``
    setting runs its rounds, no more): only after a single round (two that agree already
    confirm a change), and only when ``moved()`` says one is beyond tolerance (asked last:
    it reads the baseline), so an unchanged suite pays nothing."""
    return fixed is None and not preempted and measured == 1 and moved()


def needs_references(fixed: int | None, times_judged: Callable[[int], bool]) -> bool:
    """Whether the rounds run the machine-speed references: they serve time verdicts and
    the baselines that keep them, so they run only where ``times_judged`` (the gate's
    ``times_judged``) says this test's rounds, ``fixed`` or ``auto``'s most, buy one: a
    baseline being recorded, or a stored one whose times they would judge.  A test outside
    the rootdir, or with no baseline in a run that records none, skips them.  Measured
    on numpy's ``test_umath`` (4,761 tests, no baselines): 2.6 s of the 11.7 s
    ``--opprof`` added at one round; about 1 ms a test at the default rounds."""
    return times_judged(fixed if fixed is not None else AUTO_ROUNDS)


def rounds_line(fixed: int | None, min_time_ns: int) -> str:
    """The report header's account of the rounds setting (``fixed`` None: ``auto``)."""
    if fixed is not None:
        return rounds_text(fixed)
    floor_ms = min_time_ns / 1e6
    return (
        f"auto ({AUTO_ROUNDS} for tests of {floor_ms:g} ms or more when recording baselines "
        f"or when the baseline has 3+ rounds, fewer once a gate's time verdict is settled, "
        f"{CONFIRM_ROUNDS} more to confirm a time beyond its tolerance, else 1)"
    )
