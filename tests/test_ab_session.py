"""An A/B verdict as a pytest-xdist worker ships it to its controller (``ab/session.py``)."""

from __future__ import annotations

import json

from pytest_opprof.ab.session import verdict_from_json
from pytest_opprof.gate.reasons import OpReason
from pytest_opprof.gate.rows import MetricRow, VaryingFigure
from pytest_opprof.gate.verdict import Verdict


def test_a_shipped_verdict_arrives_whole() -> None:
    """Every field a worker's verdict carries comes back as it was, through real JSON:
    a figure the head's rounds disagreed on (``unsteady``) among them, else the
    controller would fail or list what the worker had set aside."""
    verdict = Verdict(
        status="pass",
        metrics=(
            MetricRow("work time", "ns", 2.0e6, 2.1e6, 0.05, 0.05, "pass", "A/B: +5.0%"),
            MetricRow("flops", "flops", 20_526, 20_550, 0.001, 0.0, "not judged"),
        ),
        reasons=(
            OpReason(
                op="kernel",
                kind="slower",
                unit="ns",
                baseline=1.0e6,
                now=1.04e6,
                change=0.04,
                status="pass",
                impact=0.02,
                note="A/B: +4.0% [+1.0%, +7.0%] over 6 pairs",
            ),
        ),
        notes=("times judged A/B against HEAD (abc1234)",),
        time_judged=True,
        time_not_judged=None,
        work_time=True,
        varying=(VaryingFigure("op count", "ops", 10, 12),),
        unsteady=(VaryingFigure("flops", "flops", 20_538, 20_582),),
        basis="A/B against HEAD (abc1234)",
    )
    shipped = json.loads(json.dumps(verdict.to_json()))
    assert verdict_from_json(shipped) == verdict
