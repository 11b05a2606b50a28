"""The footer that ties a test's printed op table to its summary line.

The table is one round, the median by wall time, as measured, less the profiler's
overhead; the summary line gives each op's median self time over the rounds with its
wait for a CPU left out (``measure._less_waits``) and the overhead kept, as baselines
keep it (``model/overhead.py``).  On a busy machine the two read differently for the same op
(26.5 ms on the line, 30.44 ms in the table), so the footer says which round the table
is and how long its ops waited: the table's self time less that wait, plus the
overhead the footer above it names, is the line's figure where the test ran one round.
"""

from __future__ import annotations

from pytest_opprof.model.waits import op_waits_ns
from pytest_opprof.plugin.measure import Rounds
from pytest_opprof.render.units import format_time

WAITS_NAMED = 3
"""Ops named with their wait in the footer, most waited first."""


def table_footer(rounds: Rounds, *, by_input_shape: bool) -> str:
    """``round 3 of 5 (the median by wall time), as measured; ...``: what the table above
    shows against the summary line (the round whose events were kept:
    ``Rounds.shown_profile``), ending in a newline."""
    n = rounds.measured
    shown = rounds.shown()
    which = (
        f"round {shown + 1} of {n} (the median by wall time, or the nearest kept)"
        if n > 1
        else "the test's round"
    )
    line = f"this table: {which}, as measured"
    waits = op_waits_ns(rounds.shown_profile().records(), by_input_shape=by_input_shape)
    waited = sorted(
        ((self_ns, key) for key, (self_ns, _total) in waits.items() if self_ns > 0), reverse=True
    )
    if waited:
        named = ", ".join(f"{key} {format_time(ns / 1000)}" for ns, key in waited[:WAITS_NAMED])
        more = f" and {len(waited) - WAITS_NAMED} more" if len(waited) > WAITS_NAMED else ""
        line += (
            f"; its ops' self times include "
            f"{format_time(sum(ns for ns, _ in waited) / 1000)} of waiting for a CPU "
            f"({named}{more}), which the summary line leaves out"
        )
    median = "each op's median self time over the rounds" if n > 1 else "each op's self time"
    return (
        f"{line}; the summary line: {median}, waits for a CPU left out, the profiler's "
        "overhead not subtracted\n"
    )
