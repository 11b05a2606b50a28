"""The machine record tells apart hosts whose model name is the same.

A virtual machine often shows a masked model name (``AMD EPYC``); the CPU's family,
model and vector units, and the kernel set OpenBLAS chose at load, go into the
fingerprint, so times recorded on one host are not judged on another.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from baseline_helpers import machine_parts

from pytest_opprof.capture.threadpools import blas_core
from pytest_opprof.gate.jsonio import Fields
from pytest_opprof.gate.machine import MachineInfo, cpu_identity, fingerprint, machine_info

if TYPE_CHECKING:
    from run_helpers import PytestRunner

MILAN = """processor\t: 0
vendor_id\t: AuthenticAMD
cpu family\t: 25
model\t\t: 1
model name\t: AMD EPYC
stepping\t: 1
flags\t\t: fpu sse4_2 avx avx2 fma

processor\t: 1
vendor_id\t: AuthenticAMD
cpu family\t: 25
model\t\t: 17
"""

GRAVITON = """processor\t: 0
BogoMIPS\t: 243.75
Features\t: fp asimd evtstrm aes sve
CPU implementer\t: 0x41
CPU architecture: 8
CPU variant\t: 0x1
CPU part\t: 0xd40
"""


def test_identity_of_an_x86_and_an_arm_cpu() -> None:
    assert cpu_identity(MILAN) == "family 25 model 1 stepping 1, avx2"
    assert cpu_identity(GRAVITON) == "implementer 0x41 part 0xd40 variant 0x1"
    assert cpu_identity("model name\t: Some CPU\n") is None


@pytest.mark.skipif(sys.platform != "linux", reason="/proc/cpuinfo is Linux's")
def test_this_machine_names_its_cpu_and_numpys_openblas_kernels() -> None:
    here = machine_info()
    assert here.cpu_id and ("family" in here.cpu_id or "part" in here.cpu_id), here.cpu_id
    # numpy's wheels carry an OpenBLAS built with every kernel; it picked one here.
    assert here.blas_core and here.blas_core == blas_core()
    assert here.cpu_id in here.describe() and f"OpenBLAS {here.blas_core}" in here.describe()


def _parts(**changed: str | None) -> dict[str, object]:
    """A VM host as this one describes itself, with ``changed`` parts."""
    here = {
        "cpu_model": "AMD EPYC",
        "cpu_id": "family 25 model 1 stepping 1, avx2",
        "blas_core": "Haswell",
    }
    return machine_parts(**(here | changed))


def test_the_same_model_name_on_another_cpu_or_kernel_set_is_another_machine() -> None:
    one = fingerprint(**_parts())  # type: ignore[arg-type]
    assert one == fingerprint(**_parts())  # type: ignore[arg-type]
    assert one != fingerprint(**_parts(cpu_id="family 25 model 17 stepping 1, avx512f"))  # type: ignore[arg-type]
    assert one != fingerprint(**_parts(blas_core="SkylakeX"))  # type: ignore[arg-type]


def test_the_record_round_trips_and_an_older_one_reads_without_them() -> None:
    here = machine_info()
    assert MachineInfo.from_json(Fields(here.to_json())) == here
    old = here.to_json()
    del old["cpu_id"], old["blas_core"]
    record = MachineInfo.from_json(Fields(old))
    assert record.cpu_id is None and record.blas_core is None
    assert record.fingerprint == here.fingerprint  # stored, not recomputed


SOLVE = """
import numpy as np

def test_solve():
    rng = np.random.default_rng(0)
    a = rng.standard_normal((100, 100)) + 100 * np.eye(100)
    for _ in range(20):
        np.linalg.solve(a, a)
"""


def _rewrite_machine(path: Path, **fields: object) -> None:
    data = json.loads(path.read_text())
    for record in data["machines"].values():
        for name, value in fields.items():
            if value is None:
                record.pop(name, None)
            else:
                record[name] = value
        parts = {k: record.get(k) for k in _parts()}
        record["fingerprint"] = fingerprint(**parts)  # type: ignore[arg-type]
    path.write_text(json.dumps(data))


def _notes(path: Path) -> list[str]:
    report = json.loads(path.read_text())
    return [n for t in report["tests"].values() for n in t["verdict"]["notes"]]


@pytest.mark.slow
def test_a_baseline_from_another_cpu_with_the_same_name_has_its_times_not_judged(
    pytester: pytest.Pytester, run_pytest: PytestRunner
) -> None:
    pytester.makepyfile(test_solve=SOLVE)
    run_pytest("--opprof-update-baselines", "--opprof-rounds=3").assert_outcomes(passed=1)
    path = pytester.path / "baselines" / "test_solve.json"

    # --opprof-warn-only: whether its time passes on a busy machine is not what is tested.
    gate = ("--opprof", "--opprof-rounds=3", "--opprof-warn-only")
    run_pytest(*gate, "--opprof-report=same.json").assert_outcomes(passed=1)
    same = json.loads((pytester.path / "same.json").read_text())
    recorded = json.loads(path.read_text())["machines"]
    assert [m["fingerprint"] for m in recorded.values()] == [same["machine"]["fingerprint"]]
    assert not [n for n in _notes(pytester.path / "same.json") if "another machine" in n]

    # Another CPU than this one: these machines have been both of these.
    here = recorded[next(iter(recorded))]
    cpu_id, blas_core, shown = (
        ("family 6 model 85 stepping 7, avx512f", "Haswell", "family 6 model 85")
        if here.get("cpu_id", "").startswith("family 25 model 17")
        else ("family 25 model 17 stepping 1, avx512f", "SkylakeX", "family 25 model 17")
    )
    _rewrite_machine(path, cpu_id=cpu_id, blas_core=blas_core)
    run_pytest(*gate, "--opprof-report=other.json").assert_outcomes(passed=1)
    other = json.loads((pytester.path / "other.json").read_text())
    assert [t["verdict"]["time_judged"] for t in other["tests"].values()] == [False]
    notes = _notes(pytester.path / "other.json")
    assert [n for n in notes if "another machine" in n and shown in n], notes
    assert not [n for n in notes if "predates" in n]

    # A record from before the fingerprint took these in says how to judge times again.
    _rewrite_machine(path, cpu_id=None, blas_core=None)
    run_pytest(*gate, "--opprof-report=old.json").assert_outcomes(passed=1)
    notes = _notes(pytester.path / "old.json")
    assert [n for n in notes if "predates" in n and "--opprof-update-baselines" in n], notes
