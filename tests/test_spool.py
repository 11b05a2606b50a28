"""The on-disk spool of a session's results gives back equal objects, and reports built
from it are the ones built from the objects (issue 20, item 11)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from baseline_helpers import machine, simple_summary

from pytest_opprof.gate.jsonio import dumps_stable
from pytest_opprof.gate.results import build_report, report_text
from pytest_opprof.gate.session import BaselineSession, GateOptions
from pytest_opprof.gate.spool import Spool
from pytest_opprof.plugin.payload import ProfiledTest
from pytest_opprof.render.report import render_markdown


def test_results_come_back_equal_and_render_the_same(tmp_path: Path) -> None:
    base = tmp_path / "baselines"
    first = BaselineSession(GateOptions(base), machine=machine())
    nodeid = "tests/test_a.py::test_x[a-1]"
    first.judge(nodeid, simple_summary(), {})
    first.stage(nodeid, simple_summary())
    first.write()
    session = BaselineSession(GateOptions(base), machine=machine())
    judged = session.judge(nodeid, simple_summary(matmul_flops=3_000_000), {}).result
    assert judged is not None and judged.verdict.failed and judged.verdict.reasons

    spool: Spool[object] = Spool()
    payload = ProfiledTest(nodeid, True, simple_summary(), table="t", tolerances={"time": 0.5})
    spool.append(payload)
    spool.append(judged)
    assert len(spool) == 2
    assert spool[0] == payload and spool[1] == judged and list(spool) == [payload, judged]
    assert spool[-1] == judged and spool[:1] == [payload]
    kept = list(session.results)
    assert kept == [judged]
    assert (
        build_report(kept, machine=machine())["tests"]
        == build_report([judged], machine=machine())["tests"]
    )
    assert render_markdown(kept, machine=machine()) == render_markdown([judged], machine=machine())


def test_report_text_is_the_report_written_one_test_at_a_time(tmp_path: Path) -> None:
    session = BaselineSession(GateOptions(tmp_path / "baselines"), machine=machine())
    for nodeid in ("tests/test_b.py::test_z", "tests/test_a.py::test_x[é/1]", "tests/t.py::y"):
        session.judge(nodeid, simple_summary(), {})
    session.judge("tests/t.py::y", simple_summary(matmul_flops=1), {})  # judged twice: the last
    results = list(session.results)
    assert len(results) == 4
    stamp = re.compile(r'"created_at": "[^"]*"')
    assert stamp.sub("", report_text(session.results, machine=machine())) == stamp.sub(
        "", dumps_stable(build_report(results, machine=machine()))
    )
    empty = report_text([], machine=machine())
    assert json.loads(empty)["tests"] == {}


def test_an_object_it_cannot_store_is_refused_by_name() -> None:
    with pytest.raises(TypeError, match="cannot store set"):
        Spool[object]().append({1, 2})


def test_select_builds_the_named_fields_as_a_full_read_does(tmp_path: Path) -> None:
    session = BaselineSession(GateOptions(tmp_path / "baselines"), machine=machine())
    for nodeid, flops in (("tests/t.py::a", 1), ("tests/t.py::b[x-(1, 2)]", 2_000_000)):
        session.judge(nodeid, simple_summary(matmul_flops=flops), {})
    full = list(session.results)
    assert len(full) == 2
    picked = list(session.results.select("verdict", "nodeid"))
    assert picked == [(r.verdict, r.nodeid) for r in full]
    assert list(session.results.select("summary")) == [(r.summary,) for r in full]
    # A result's tuple and dict fields come back as tuples and dicts.
    verdict = picked[1][0]
    assert type(verdict.notes) is tuple and verdict == full[1].verdict
    with pytest.raises(ValueError):
        next(session.results.select("no_such_field"))
