"""A pytest plugin for ``ab_replay.py``: writes every A/B test's pairs as it settles.

Loaded with ``-p _ab_record`` (``bench/`` on ``PYTHONPATH``) beside ``--opprof-against``;
``OPPROF_AB_RECORD`` names the JSON-lines file.  Each line: the test's node id and, per
side, each round's wall time, CPU wait and op self times (ns).  The judge itself is
untouched: the session's ``_verdict`` is wrapped to see what it is given.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from typing import Any

from pytest_opprof.ab.session import ABSession
from pytest_opprof.gate.summary import RoundFigures

_verdict = ABSession._verdict


def _rounds(side: Sequence[RoundFigures]) -> list[list[Any]]:
    return [
        [r.wall_time_ns, r.wait_ns or 0, {k: o.self_cpu_ns for k, o in r.ops.items()}] for r in side
    ]


def _recording_verdict(self: ABSession, nodeid: str, summary: Any, pending: Any, tol: Any) -> Any:
    path = os.environ.get("OPPROF_AB_RECORD")
    if path and pending is not None and pending[0].rounds:
        base, head = pending
        line = {"id": nodeid, "base": _rounds(base.rounds), "head": _rounds(head)}
        with open(path, "a") as out:
            out.write(json.dumps(line) + "\n")
    return _verdict(self, nodeid, summary, pending, tol)


ABSession._verdict = _recording_verdict  # type: ignore[method-assign]
