"""Why a test's time was not judged, and the one line a run's reports give it.

A gate run whose times were all left unjudged (baselines recorded on another machine, too
few rounds, a busy machine) passes on FLOPs, memory and op counts alone; each test's notes
say why, but a summary of ``12 pass`` read as if the times had been judged too.  Every
report (terminal, Markdown, HTML) counts those tests in one line that says why and what to
do: :class:`TimeUnjudged` is the reason of one verdict, :class:`UnjudgedTally` the line.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pytest_opprof.gate.machine import MachineInfo

REASONS = ("machine", "rounds", "speed", "busy", "moved", "short")
"""Why a time is not judged, in the order the line gives them (a verdict has one: ``short``
where it applies, since nothing else would have the time judged, else the first reached):

* ``machine``: the baseline was recorded on a machine of another fingerprint;
* ``rounds``: a side has fewer rounds than times are judged from;
* ``speed``: the machine-speed references moved beyond ``--opprof-max-speed-change``;
* ``busy``: the test's rounds waited for a CPU too long (``waiting.py``);
* ``moved``: every part of the test moved alike, or library ops beside other processes
  (``machine_moved.py``): the machine, not the code;
* ``short``: the time is under ``--opprof-min-time`` on both sides.
"""

FINGERPRINTED = (
    "cpu_model",
    "cpu_count",
    "cpu_id",
    "blas_core",
    "arch",
    "system",
    "python",
    "numpy",
    "blas",
    "torch",
)
"""The fields of :class:`MachineInfo` that its fingerprint hashes (``machine.fingerprint``)."""


def fingerprint_differs(now: MachineInfo, baseline: MachineInfo) -> tuple[str, ...]:
    """The fingerprinted fields in which ``now`` and ``baseline`` differ; ``fingerprint``
    where the fingerprints differ with every field alike (a record of another scheme)."""
    if now.fingerprint == baseline.fingerprint:
        return ()
    fields = tuple(f for f in FINGERPRINTED if getattr(now, f) != getattr(baseline, f))
    return fields or ("fingerprint",)


@dataclass(frozen=True)
class TimeUnjudged:
    """Why one verdict's test-level time was not judged (:data:`REASONS`)."""

    reason: str
    differs: tuple[str, ...] = ()
    """``machine``: the fingerprinted fields that differ (``fingerprint_differs``)."""
    rounds_needed: int = 0
    """``rounds``: the rounds both sides need."""
    floor_ns: int = 0
    """``short``: the time floor (``--opprof-min-time``)."""

    def to_json(self) -> dict[str, object]:
        return {
            "reason": self.reason,
            "differs": list(self.differs),
            "rounds_needed": self.rounds_needed,
            "floor_ns": self.floor_ns,
        }

    @classmethod
    def from_json(cls, data: object) -> TimeUnjudged | None:
        """Read back :meth:`to_json` leniently (the HTML page reads any report): None for
        anything that is not one."""
        if not isinstance(data, Mapping) or data.get("reason") not in REASONS:
            return None
        differs = data.get("differs")
        return cls(
            reason=str(data["reason"]),
            differs=tuple(str(f) for f in differs) if isinstance(differs, list) else (),
            rounds_needed=_count(data.get("rounds_needed")),
            floor_ns=_count(data.get("floor_ns")),
        )


def _duration(ns: int) -> str:
    for unit, scale in (("s", 1e9), ("ms", 1e6), ("us", 1e3)):
        if ns >= scale:
            return f"{ns / scale:g} {unit}"
    return f"{ns} ns"


def _count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


class UnjudgedTally:
    """The tests of a run whose times were not judged, by reason, and the line that says so."""

    def __init__(self) -> None:
        self.total = 0
        self.reasons: Counter[str] = Counter()
        self.differs: dict[str, None] = {}
        self.rounds_needed = 0
        self.floor_ns = 0

    def add(self, unjudged: TimeUnjudged | None) -> None:
        """Count one test compared with its baseline (``unjudged``: why its time was not
        judged, or None)."""
        self.total += 1
        if unjudged is None:
            return
        self.reasons[unjudged.reason] += 1
        self.differs.update(dict.fromkeys(unjudged.differs))
        self.rounds_needed = max(self.rounds_needed, unjudged.rounds_needed)
        self.floor_ns = max(self.floor_ns, unjudged.floor_ns)

    def line(self) -> str | None:
        """``times not judged for 12 of 12 test(s): 12 with baselines recorded on another
        machine (cpu_id, blas_core differ): ...``; None where every time was judged."""
        n = sum(self.reasons.values())
        if not n:
            return None
        parts = [self._part(reason, self.reasons[reason]) for reason in REASONS]
        shown = "; ".join(p for p in parts if p)
        return (
            f"times not judged for {n} of {self.total} test(s), only FLOPs, memory and op "
            f"counts: {shown}"
        )

    def _part(self, reason: str, k: int) -> str:
        if not k:
            return ""
        if reason == "machine":
            fields = ", ".join(self.differs) or "fingerprint"
            return (
                f"{k} with baselines recorded on another machine ({fields} differ): record "
                "them on this one (--opprof-update-baselines, e.g. in the CI job that gates), "
                "or judge anyway with --opprof-force-time"
            )
        if reason == "rounds":
            r = self.rounds_needed
            return (
                f"{k} with fewer than {r} rounds on a side: run with --opprof-rounds {r} "
                "or more (auto rounds), and record the baselines so too"
            )
        if reason == "speed":
            return (
                f"{k} on a machine whose speed moved beyond --opprof-max-speed-change since "
                "the baselines were recorded: record them again on this machine"
            )
        if reason == "busy":
            return (
                f"{k} ran while the machine was busy (their rounds waited for a CPU): run "
                "them where nothing else runs, or with more rounds"
            )
        if reason == "moved":
            return (
                f"{k} whose every part moved alike (the machine, not the code): run them "
                "again on a quiet machine"
            )
        floor = _duration(self.floor_ns)
        return (
            f"{k} under {floor} on both sides (--opprof-min-time): too short to judge "
            "against a machine's noise; lower it to judge them"
        )
