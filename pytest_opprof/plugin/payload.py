"""What travels from the side that runs a test to the side that collects it.

One :class:`ProfiledTest` per profiled test.  Its figures are always judged as
their JSON form reads back (times rounded like a baseline's), so a pytest-xdist
controller judging a worker's figures again reaches the verdict the worker
reached.  Then:

* a pytest-xdist worker puts that JSON on the call report as text (attribute
  ``opprof``, :func:`attach`), which xdist carries to the controller: execnet, its
  transport, cannot carry an int below -2**31 (an op that freed more than 2 GiB: numpy's
  ``test_big_arrays``), and one such figure ended the whole run with an internal error;
* a single process builds the rounded figures directly (:meth:`ProfiledTest.as_stored`,
  no text) and hands them, with the judgement already made, to its controller
  side in memory: no parse, no second verdict.

The stepped-aside flag (a test that started its own profile) rides on the
report in both cases: it is one boolean, and it must reach a controller even
when no figures do.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from typing import Any

import pytest

from pytest_opprof.gate.jsonio import Fields
from pytest_opprof.gate.session import Judgement
from pytest_opprof.gate.summary import TestSummary

REPORT_ATTRIBUTE = "opprof"
WORKER_NOTES = "opprof_notes"
"""Key of a pytest-xdist worker's session notes in its ``workeroutput``."""
STEPPED_ASIDE_ATTRIBUTE = "opprof_stepped_aside"
"""Set on the call report of a test that started its own profile (the plugin stepped
aside), so a pytest-xdist controller learns it from its workers too."""
LEFT_BEHIND_ATTRIBUTE = "opprof_left_behind"
"""Set on the teardown report of a test that left a profile recording or scopes open
(what it left, which the plugin reset), for the same reason."""


def attach(report: pytest.TestReport, data: dict[str, object]) -> None:
    """Put a worker's payload on its call report, as JSON text (see the module docstring)."""
    setattr(report, REPORT_ATTRIBUTE, json.dumps(data, separators=(",", ":")))


def attached(report: pytest.TestReport) -> dict[str, Any] | None:
    """The payload on ``report``, parsed once (the parsed form replaces the text)."""
    data = getattr(report, REPORT_ATTRIBUTE, None)
    if isinstance(data, str):
        data = json.loads(data)
        setattr(report, REPORT_ATTRIBUTE, data)
    return data if isinstance(data, dict) else None


@dataclass
class ProfiledTest:
    """What the terminal summary (and later the verdict) needs of one profiled test."""

    __test__ = False  # not a pytest test class

    nodeid: str
    marked: bool
    summary: TestSummary
    table: str | None = None
    trace_path: str | None = None
    tolerances: dict[str, float] = field(default_factory=dict)
    """The marker's tolerance overrides (``time``, ``memory``, ``flops``), fractions, and
    budgets (``max_memory`` ..., ``gate/budgets.py``: bytes, FLOPs, ns)."""
    judged: bool = False
    """Whether the gate judges it (only tests whose call passed are judged)."""
    judgement: Judgement | None = field(default=None, compare=False)
    """The verdict reached where the test ran, when that process is also the collector
    (never sent: a pytest-xdist controller judges a worker's figures itself)."""
    flame: dict[str, object] | None = None
    """The median round's flame tree (``render.flame``), for tests the reports draw it of."""
    shown_round: Any = field(default=None, compare=False, repr=False)
    """The median round's profile, held from the end of the call phase until the verdict
    says whether its flame tree is wanted (never sent)."""

    def to_json(self) -> dict[str, object]:
        """Plain JSON, small enough to ride on a ``TestReport`` through pytest-xdist."""
        return {
            "marked": self.marked,
            "summary": self.summary.to_json(),
            "table": self.table,
            "trace_path": self.trace_path,
            "tolerances": self.tolerances,
            "judged": self.judged,
            "flame": self.flame,
        }

    @classmethod
    def from_json(cls, nodeid: str, data: object) -> ProfiledTest:
        f = Fields(data)
        raw = data if isinstance(data, dict) else {}
        tolerances = raw.get("tolerances")
        return cls(
            nodeid=nodeid,
            marked=bool(raw.get("marked")),
            summary=TestSummary.from_json(f.obj("summary")),
            table=f.opt_text("table"),
            trace_path=f.opt_text("trace_path"),
            tolerances=(
                {str(k): float(v) for k, v in tolerances.items()}
                if isinstance(tolerances, dict)
                else {}
            ),
            judged=bool(raw.get("judged")),
            flame=raw["flame"] if isinstance(raw.get("flame"), dict) else None,
        )

    def as_stored(self) -> ProfiledTest:
        """This test with the figures :meth:`as_sent` would give, built without the JSON
        text: for a process that is its own collector."""
        # shown_round (a profile) stays with the worker, as it never travels in as_sent.
        return replace(self, summary=self.summary.as_stored(), judgement=None, shown_round=None)

    def as_sent(self) -> tuple[dict[str, object], ProfiledTest]:
        """(the JSON form, this test parsed back from it): the figures as they travel,
        which are the ones judged on either side."""
        data = self.to_json()
        return data, ProfiledTest.from_json(self.nodeid, data)
