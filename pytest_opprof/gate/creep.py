"""A figure that crept against the history, as the verdict carries it to every report.

The history gate (``history/gate.py``) finds a test whose figure crept beyond tolerance
against its history's level before the creep began; :class:`Crept` is what it found,
with nothing of the history left in it, so the verdict can hold it (``verdict.py``), the
spool keep it and the reports read it: the JSON report's ``verdict.crept`` rows
(:meth:`Crept.to_json`), the JUnit property, the Markdown and HTML reports and the
terminal's ``opprof CREPT:`` lines, all in one wording (:meth:`Crept.sentence`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from pytest_opprof.gate.judge import change
from pytest_opprof.gate.rows import json_change

TIMES = ("cpu", "self")
"""The figures that are times (ns): the test's CPU time and an op's self CPU time."""
UNITS = {"flops": "flops", "op_count": "ops", "peak_bytes": "bytes", "leaked_bytes": "bytes"}
"""The unit of each deterministic figure a creep is judged on (``history/store.py``)."""


@dataclass(frozen=True)
class CreepStep:
    """One commit where a crept figure stepped up."""

    sha: str | None
    """The commit's full sha; None where the run had no git checkout."""
    date: str
    """The commit's date (``2026-11-20``), else the run's."""
    run_at: str
    """The run's time stamp (UTC), which names the step where there is no commit."""
    change: float
    """Relative, ``after / before - 1`` (inf from 0)."""
    low: float | None = None
    high: float | None = None
    """The 95% interval of ``change`` (times only)."""
    between: tuple[str, ...] = ()
    """Where the history cannot tell the commit from the next (``history/changes.py``):
    the full sha of each commit the step may be at, in order (``date`` is the first's);
    none where it is at ``sha``."""

    @property
    def at(self) -> str:
        """``3f2c1ab``, or ``3f2c1ab or the next commit`` (:func:`commits_text`); the run
        where there is no commit."""
        if self.between:
            return commits_text(self.between[0][:7], len(self.between) - 1)
        return self.sha[:7] if self.sha else f"the run of {self.run_at}"

    def to_json(self) -> dict[str, object]:
        return {
            "sha": self.sha,
            "date": self.date,
            "run_at": self.run_at,
            "change": json_change(self.change),
            "low": json_change(self.low),
            "high": json_change(self.high),
            **({"at": self.at, "between": list(self.between)} if self.between else {}),
        }


def commits_text(short_sha: str, more: int) -> str:
    """``3f2c1ab``; where a step may also be at the ``more`` commits after it, ``3f2c1ab or
    the next commit`` or ``3f2c1ab or one of the next 3 commits``: the wording of the
    history's change points and of the gate's creep alike."""
    if more == 1:
        return f"{short_sha} or the next commit"
    return f"{short_sha} or one of the next {more} commits" if more > 1 else short_sha


@dataclass(frozen=True)
class Crept:
    """One figure of one test that crept beyond tolerance against its history."""

    test: str
    figure: str
    """``cpu`` (the test's CPU time), ``self`` (an op's) or a deterministic figure
    (:data:`UNITS`)."""
    op: str | None
    """The op whose own figure crept (``self``); None: the test's."""
    before: float
    """The level before the creep (ns, or the figure's unit)."""
    now: float
    """This run's figure."""
    steps: tuple[CreepStep, ...]
    """The creep's steps, oldest first."""
    ops: tuple[str, ...] = ()
    """The ops that stepped with it, most first."""
    this_run: float | None = None
    """This run's own step from the level of the runs since the creep's last step."""

    @property
    def unit(self) -> str:
        return "ns" if self.figure in TIMES else UNITS.get(self.figure, "")

    @property
    def change(self) -> float:
        """Relative, ``now / before - 1`` (inf from 0)."""
        moved = change(self.before, self.now)
        return math.inf if moved is None else moved

    def sentence(self, detailed: bool = True) -> str:
        """``cpu +16% against its level before 3f2c1ab (2026-11-20), 2.000ms -> 2.320ms:
        stepped +5% [+3%, +7%] at 3f2c1ab (2026-11-20), +6% [+4%, +8%] at 9e01d2c
        (2026-11-24); op numpy.linalg.svd``.  Not ``detailed`` (the terminal's line, where
        the failure's diff is beside it): a time without its levels, the steps without
        their dates and intervals."""
        label = self.figure if self.op is None else f"{self.op} {self.figure}"
        first = self.steps[0]
        if self.figure in TIMES:
            figures = ""
            levels = f", {_time(self.before)} -> {_time(self.now)}" if detailed else ""
        else:
            figures, levels = f" ({self.before:,.0f} -> {self.now:,.0f})", ""
        stepped = ", ".join(_step(s, detailed) for s in self.steps)
        if self.this_run is not None:
            stepped += f", {_pct(self.this_run)} in this run"
        ops = f"; op {', '.join(self.ops)}" if self.ops else ""
        return (
            f"{label} {_pct(self.change)}{figures} against its level before {first.at} "
            f"({first.date}){levels}: stepped {stepped}{ops}"
        )

    def text(self) -> str:
        """The terminal's line: the test, then its :meth:`sentence`, not detailed."""
        return f"{self.test}: {self.sentence(detailed=False)}"

    def to_json(self) -> dict[str, object]:
        """A row of the JSON report's ``verdict.crept`` (``gate/results.py``)."""
        return {
            "figure": self.figure,
            "op": self.op,
            "unit": self.unit,
            "before": self.before,
            "now": self.now,
            "change": json_change(self.change),
            "steps": [s.to_json() for s in self.steps],
            "ops": list(self.ops),
            "this_run": json_change(self.this_run),
            "text": self.sentence(),
        }


def _step(s: CreepStep, detailed: bool) -> str:
    """``+5% [+3%, +7%] at 3f2c1ab (2026-11-20)``; not ``detailed``: ``+5% at 3f2c1ab``."""
    if not detailed:
        return f"{_pct(s.change)} at {s.at}"
    interval = (
        f" [{_pct(s.low)}, {_pct(s.high)}]" if s.low is not None and s.high is not None else ""
    )
    return f"{_pct(s.change)}{interval} at {s.at} ({s.date})"


def _pct(x: float) -> str:
    return "new" if math.isinf(x) else f"{x:+.0%}"


def _time(ns: float) -> str:
    """``2.320ms``, as the reports' tables write times."""
    for unit, scale in (("s", 1e9), ("ms", 1e6)):
        if abs(ns) >= scale:
            return f"{ns / scale:.3f}{unit}"
    return f"{ns / 1e3:.3f}us"
