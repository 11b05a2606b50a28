"""A session's baseline work as the plugin drives it: judge, stage, write once per module file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from baseline_helpers import machine, simple_summary

from pytest_opprof.errors import BaselineError
from pytest_opprof.gate.session import BaselineSession, GateOptions


def test_new_then_recorded_then_judged(tmp_path: Path) -> None:
    base = tmp_path / "baselines"
    ids = [
        "tests/test_a.py::test_x",
        "tests/test_a.py::TestK::test_p[a/b-..]",
        "tests/sub/test_b.py::test_y",
    ]
    first = BaselineSession(GateOptions(base), machine=machine())
    assert [first.judge(i, simple_summary(), {}).label for i in ids] == ["new"] * 3
    for nodeid in ids:
        first.stage(nodeid, simple_summary())
    written = first.write()
    assert written == [base / "tests/sub/test_b.json", base / "tests/test_a.json"]
    stored = json.loads((base / "tests/test_a.json").read_text(encoding="utf-8"))
    assert sorted(stored["tests"]) == ["TestK::test_p[a/b-..]", "test_x"]
    assert first.write() == []  # nothing staged any more

    second = BaselineSession(GateOptions(base), machine=machine())
    same = second.judge(ids[0], simple_summary(), {}).result
    assert same is not None
    assert same.verdict.status == "pass"
    assert same.baseline_file == "baselines/tests/test_a.json"
    worse = second.judge(ids[1], simple_summary(matmul_flops=3_000_000), {})
    assert worse.fails and worse.result is not None and worse.result.verdict.failed
    assert [r.nodeid for r in second.results] == ids[:2]


def test_unsafe_module_path_is_an_error(tmp_path: Path) -> None:
    session = BaselineSession(GateOptions(tmp_path / "baselines"), machine=machine())
    with pytest.raises(BaselineError):
        session.path_of("../outside/test_a.py::test_x")
