"""BLAS/OpenMP thread pools: found, recorded beside the machine, pinned per test.

The pools' default size is set through ``OPENBLAS_NUM_THREADS=2`` in the inner runs, so
that pinning to 1 changes something on any machine and "restored" means back to 2.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pytest

from pytest_opprof.capture import threadpools
from pytest_opprof.gate.jsonio import Fields
from pytest_opprof.gate.machine import MachineInfo, machine_info
from pytest_opprof.plugin.blas_threads import blas_threads_for
from pytest_opprof.plugin.options import parse_blas_threads

if TYPE_CHECKING:
    from run_helpers import PytestRunner

# Each test of the inner module writes the OpenBLAS pool's size where its fixture set
# up, in its body (every round), and where the fixture tore down, to counts.jsonl.
INNER = """
import json, numpy as np, pytest
from pytest_opprof.capture.threadpools import thread_counts

def _log(where, name):
    with open("counts.jsonl", "a") as f:
        f.write(json.dumps([name, where, thread_counts().get("openblas")]) + "\\n")

@pytest.fixture(autouse=True)
def around(request):
    _log("setup", request.node.name)
    yield
    _log("teardown", request.node.name)

def test_solves():
    a = np.eye(50) * 2.0
    np.linalg.solve(a, np.ones(50))
    _log("body", "test_solves")

def test_fails():
    _log("body", "test_fails")
    assert False, "this test fails on purpose"
"""


@pytest.fixture
def runner(run_pytest: PytestRunner, monkeypatch: pytest.MonkeyPatch) -> PytestRunner:
    for name in threadpools.THREAD_ENV:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("OPENBLAS_NUM_THREADS", "2")
    return run_pytest


def _counts(pytester: pytest.Pytester) -> list[tuple[str, str, int | None]]:
    lines = (pytester.path / "counts.jsonl").read_text().splitlines()
    return [tuple(json.loads(line)) for line in lines]  # type: ignore[misc]


def test_pinned_to_one_in_every_round_and_restored_on_every_exit(
    pytester: pytest.Pytester, runner: PytestRunner
) -> None:
    pytester.makepyfile(test_inner=INNER)
    result = runner("--opprof", "--opprof-blas-threads=1", "--opprof-rounds=3", "-q")
    result.assert_outcomes(passed=1, failed=1)
    counts = _counts(pytester)
    body = [n for name, where, n in counts if where == "body"]
    # test_solves ran 3 rounds; test_fails stopped at its first.
    assert body == [1, 1, 1, 1], counts
    around = [n for name, where, n in counts if where != "body"]
    assert around == [2] * 4, counts


@pytest.mark.slow
def test_each_xdist_worker_pins_its_own_pools(
    pytester: pytest.Pytester, runner: PytestRunner
) -> None:
    pytester.makepyfile(test_inner=INNER)
    result = runner("--opprof", "-n", "2", "--opprof-rounds=2", "-q", "-p", "no:randomly")
    result.assert_outcomes(passed=1, failed=1)
    counts = _counts(pytester)
    assert sorted(n for _, where, n in counts if where == "body") == [1, 1, 1], counts
    assert {n for _, where, n in counts if where != "body"} == {2}, counts


def test_keep_leaves_the_pools_alone(pytester: pytest.Pytester, runner: PytestRunner) -> None:
    pytester.makepyfile(test_inner=INNER)
    result = runner("--opprof", "--opprof-blas-threads=keep", "-q", "-k", "solves")
    result.assert_outcomes(passed=1)
    assert {n for _, _, n in _counts(pytester)} == {2}


@pytest.mark.slow
def test_the_default_pins_to_one_and_the_ini_twin_overrides_it(
    pytester: pytest.Pytester, runner: PytestRunner
) -> None:
    pytester.makepyfile(test_inner=INNER)
    runner("--opprof", "-q", "-k", "solves").assert_outcomes(passed=1)
    assert [n for _, where, n in _counts(pytester) if where == "body"] == [1]
    (pytester.path / "counts.jsonl").unlink()
    pytester.makeini("[pytest]\nopprof_blas_threads = keep\n")
    runner("--opprof", "-q", "-k", "solves").assert_outcomes(passed=1)
    assert [n for _, where, n in _counts(pytester) if where == "body"] == [2]
    (pytester.path / "counts.jsonl").unlink()
    # The command line over the ini file.
    runner("--opprof", "-q", "-k", "solves", "--opprof-blas-threads=1").assert_outcomes(passed=1)
    assert [n for _, where, n in _counts(pytester) if where == "body"] == [1]


SOLVE = """
import numpy as np

def test_solve():
    rng = np.random.default_rng(0)
    a = rng.standard_normal((120, 120)) + 120 * np.eye(120)
    for _ in range(20):
        np.linalg.solve(a, a)
"""


def _machine(path: Path) -> dict[str, object]:
    data = json.loads(path.read_text())
    machine = data["tests"]["test_solve"]["machine"] if "tests" in data else data["machine"]
    if isinstance(machine, str):  # a baseline names its entry's machine in "machines"
        machine = data["machines"][machine]
    assert isinstance(machine, dict)
    return machine


@pytest.mark.slow
def test_the_baseline_records_the_pools_and_a_different_size_gets_a_note(
    pytester: pytest.Pytester, runner: PytestRunner
) -> None:
    pytester.makepyfile(test_solve=SOLVE)
    runner(
        "--opprof-update-baselines", "--opprof-blas-threads=1", "--opprof-rounds=3"
    ).assert_outcomes(passed=1)
    recorded = _machine(pytester.path / "baselines" / "test_solve.json")
    assert recorded["threads"] == {"openblas": 1}
    assert recorded["thread_env"] == {"OPENBLAS_NUM_THREADS": "2"}

    # Pinned alike: no note.
    runner(
        "--opprof", "--opprof-blas-threads=1", "--opprof-report=same.json", "--opprof-warn-only"
    ).assert_outcomes(passed=1)
    same = json.loads((pytester.path / "same.json").read_text())
    assert not [
        n for t in same["tests"].values() for n in t["verdict"]["notes"] if "thread pools" in n
    ]

    # Left at 2: the report's machine says so, and the verdict notes the difference.
    result = runner(
        "--opprof", "--opprof-blas-threads=keep", "--opprof-report=kept.json", "--opprof-warn-only"
    )
    result.assert_outcomes(passed=1)
    kept = json.loads((pytester.path / "kept.json").read_text())
    assert kept["machine"]["threads"]["openblas"] == 2
    notes = [n for t in kept["tests"].values() for n in t["verdict"]["notes"]]
    assert [n for n in notes if "thread pools differ" in n and "openblas 1" in n], notes
    # The fingerprint leaves the pools out: times are still judged against the baseline.
    assert kept["machine"]["fingerprint"] == recorded["fingerprint"]


@pytest.mark.parametrize("value", ["0", "-1", "many", "1.5"])
def test_a_bad_value_is_a_usage_error_naming_the_option(
    pytester: pytest.Pytester, run_pytest: PytestRunner, value: str
) -> None:
    pytester.makepyfile(test_x="def test_x(): pass")
    result = run_pytest.inprocess("--opprof", f"--opprof-blas-threads={value}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["*--opprof-blas-threads: expected a positive integer such as 1, auto or keep*"]
    )


def test_a_bad_ini_value_names_the_ini_key(
    pytester: pytest.Pytester, run_pytest: PytestRunner
) -> None:
    pytester.makepyfile(test_x="def test_x(): pass")
    pytester.makeini("[pytest]\nopprof_blas_threads = lots\n")
    result = run_pytest.inprocess("--opprof")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*opprof_blas_threads = 'lots'*auto or keep*"])


def test_parse_forms() -> None:
    assert parse_blas_threads("1") == 1
    assert parse_blas_threads(" AUTO ") == "auto"
    assert parse_blas_threads("keep") == "keep"


def test_auto_pins_under_xdist_and_on_a_busy_machine(
    run_pytest: PytestRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("os.getloadavg", lambda: (0.0, 0.0, 0.0))
    quiet = run_pytest.parseconfig()
    assert blas_threads_for("auto", quiet) is None
    assert blas_threads_for("keep", quiet) is None
    assert blas_threads_for(3, quiet) == 3
    assert blas_threads_for("auto", run_pytest.parseconfig("-n", "2")) == 1
    assert blas_threads_for("auto", run_pytest.parseconfig("-n", "1")) is None
    monkeypatch.setattr("os.getloadavg", lambda: (64.0, 64.0, 64.0))
    assert blas_threads_for("auto", quiet) == 1


def test_this_process_has_numpys_openblas_and_pinning_restores_it() -> None:
    np.linalg.solve(np.eye(3), np.ones(3))  # the BLAS library is loaded with numpy
    pools = threadpools.thread_pools()
    assert "openblas" in {pool.api for pool in pools}
    before = threadpools.thread_counts()
    with threadpools.pinned(1):
        assert set(threadpools.thread_counts().values()) == {1}
    assert threadpools.thread_counts() == before


def test_without_proc_maps_nothing_is_found(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(threadpools, "_MAPS", "/nonexistent/maps")
    monkeypatch.setattr(threadpools, "_found", None)
    assert threadpools.thread_pools() == []
    assert threadpools.thread_counts() == {}
    with threadpools.pinned(1) as pools:
        assert pools == []


def test_an_older_record_without_pools_loads_and_gets_no_note() -> None:
    now = machine_info()
    old = now.to_json()
    del old["threads"], old["thread_env"]
    record = MachineInfo.from_json(Fields(old))
    assert record.threads is None and record.thread_env == {}
    assert record.fingerprint == now.fingerprint
    assert now.pinned(7).threads_differ(record) is None


def test_pinning_changes_the_pools_not_the_fingerprint() -> None:
    now = MachineInfo.from_json(Fields(dict(machine_info().to_json(), threads={"openblas": 2})))
    pinned = now.pinned(1)
    assert pinned.threads == {"openblas": 1}
    assert pinned.fingerprint == now.fingerprint
    note = pinned.threads_differ(now)
    assert note is not None and "openblas 2, now openblas 1" in note
    # A pool that only one side loaded is no difference in size.
    wider = MachineInfo.from_json(Fields(dict(now.to_json(), threads={"openblas": 2, "openmp": 4})))
    assert now.threads_differ(wider) is None
