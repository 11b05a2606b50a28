"""The CI workflows of docs/ci/ hold commands that work: their YAML parses as GitHub Actions
workflows, and their ``run:`` steps, run in order by bash against a small real project, record
baselines, pass on unchanged code, write the step summary and the reports, and fail a change.

What cannot run here is replaced, each named: the ``install`` steps (this suite runs with
the package installed, as the README's second command does), and in the artifacts workflow
``gh run download`` (no GitHub here) by a copy of what the record job wrote.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from run_helpers import REPO_ROOT

yaml = pytest.importorskip("yaml")

RECIPES = REPO_ROOT / "docs" / "ci"
WORKFLOWS = sorted(RECIPES.glob("*.yml"))

PROJECT_TEST = """
import numpy as np

def test_small_matmul():
    a = np.arange(36.0).reshape(6, 6)
    assert (a @ a).shape == (6, 6)

def test_small_sum():
    assert np.add.reduce(np.ones(WIDTH)) == WIDTH
"""


def _load(path: Path) -> dict:
    doc = yaml.safe_load(path.read_text())
    # YAML 1.1 reads the bare key `on` as True; GitHub reads it as "on".
    if True in doc:
        doc["on"] = doc.pop(True)
    return doc


def test_the_recipes_are_there() -> None:
    assert [p.name for p in WORKFLOWS] == [
        "opprof-ab.yml",
        "opprof-artifacts.yml",
        "opprof-deterministic.yml",
        "opprof-time-gate.yml",
    ]


@pytest.mark.parametrize("path", WORKFLOWS, ids=lambda p: p.stem)
def test_workflow_shape(path: Path) -> None:
    doc = _load(path)
    assert doc["name"] and doc["on"]
    assert doc["jobs"], path
    for name, job in doc["jobs"].items():
        assert job["runs-on"], (path, name)
        for step in job["steps"]:
            assert ("uses" in step) != ("run" in step), (path, name, step)
            if "uses" in step:
                assert re.fullmatch(r"[\w-]+/[\w-]+@v\d+", step["uses"]), step["uses"]
    runs = "\n".join(s.get("run", "") for j in doc["jobs"].values() for s in j["steps"])
    # every recipe publishes its summary and keeps its HTML report
    assert '--opprof-markdown "$GITHUB_STEP_SUMMARY"' in runs
    assert "--opprof-html" in runs
    uploads = [
        s
        for j in doc["jobs"].values()
        for s in j["steps"]
        if "upload-artifact" in s.get("uses", "")
    ]
    assert uploads, path


def _project(root: Path, width: int) -> None:
    root.mkdir(exist_ok=True)
    (root / "test_project.py").write_text(PROJECT_TEST.replace("WIDTH", str(width)))
    (root / "pytest.ini").write_text("[pytest]\nopprof_warmup = 1\n")


def _run_steps(job: dict, root: Path, summary: Path, skip: tuple[str, ...] = ()) -> list[int]:
    """Each ``run:`` step of ``job`` in bash in ``root``, as a runner would; exit statuses."""
    env = dict(os.environ)
    for name in (
        "PYTEST_XDIST_WORKER",
        "PYTEST_XDIST_WORKER_COUNT",
        "PYTEST_XDIST_TESTRUNUID",
        "PYTEST_ADDOPTS",
    ):
        env.pop(name, None)
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO_ROOT), env.get("PYTHONPATH", "")) if p)
    env["GITHUB_STEP_SUMMARY"] = str(summary)
    for key, value in (job.get("env") or {}).items():
        env[key] = value.replace("${{ github.workspace }}", str(root))
    statuses = []
    for step in job["steps"]:
        if "run" not in step or step.get("name", "") in skip or step.get("name") == "install":
            continue
        script = step["run"].replace("pytest ", "pytest -p no:randomly -p no:cacheprovider ")
        done = subprocess.run(
            ["bash", "-e", "-c", script],
            cwd=root,
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert done.returncode in (0, 1), (
            step.get("name"),
            done.stdout[-3000:],
            done.stderr[-3000:],
        )
        statuses.append(done.returncode)
        if done.returncode:
            break
    return statuses


@pytest.mark.slow
def test_deterministic_gate_passes_unchanged_and_fails_more_flops(tmp_path: Path) -> None:
    job = _load(RECIPES / "opprof-deterministic.yml")["jobs"]["opprof"]
    root = tmp_path / "project"
    _project(root, 100)
    record = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "no:randomly",
            "--opprof-update-baselines",
            "--opprof-warmup",
            "1",
        ],
        cwd=root,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
    )
    assert record.returncode == 0, record.stdout[-2000:]
    summary = tmp_path / "summary.md"
    assert _run_steps(job, root, summary) == [0]
    assert "opprof" in summary.read_text()
    assert (root / "opprof-report.html").stat().st_size > 0
    assert (root / "opprof-report.json").stat().st_size > 0

    _project(root, 1000)  # 10x the additions: the FLOPs gate must fail it
    assert _run_steps(job, root, summary) == [1]
    assert "test_small_sum" in summary.read_text()


@pytest.mark.slow
def test_time_gate_records_on_first_use_then_gates(tmp_path: Path) -> None:
    job = _load(RECIPES / "opprof-time-gate.yml")["jobs"]["opprof"]
    root = tmp_path / "ws"
    _project(root, 100)
    summary = tmp_path / "summary.md"
    assert _run_steps(job, root, summary) == [0, 0, 0]
    baselines = tmp_path / "opprof-baselines"
    assert sorted(p.name for p in baselines.iterdir()) == ["test_project.json"]
    assert (root / "opprof-report.html").exists()


@pytest.mark.slow
def test_artifacts_recipe_records_on_main_and_gates_pull_requests(tmp_path: Path) -> None:
    jobs = _load(RECIPES / "opprof-artifacts.yml")["jobs"]
    main = tmp_path / "main"
    _project(main, 100)
    assert _run_steps(jobs["record"], main, tmp_path / "main.md") == [0]
    recorded = main / "opprof-baselines"
    assert (recorded / "test_project.json").exists()

    pull = tmp_path / "pull"
    _project(pull, 100)
    # `gh run download` fetches what the record job uploaded: here, a copy of it.
    subprocess.run(["cp", "-r", str(recorded), str(pull / "opprof-baselines")], check=True)
    summary = tmp_path / "pull.md"
    assert _run_steps(
        jobs["gate"], pull, summary, skip=("download the main branch's baselines",)
    ) == [0]
    assert "opprof" in summary.read_text()


def _git(cwd: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-c", "user.email=t@example.com", "-c", "user.name=t", *args],
        cwd=cwd,
        check=True,
        capture_output=True,
    )


@pytest.mark.slow
def test_ab_recipe_judges_a_pull_request_against_its_base(tmp_path: Path) -> None:
    job = _load(RECIPES / "opprof-ab.yml")["jobs"]["opprof"]
    # The pull request's checkout: a clone of a real origin whose main is the base.
    origin = tmp_path / "origin.git"
    seed = tmp_path / "seed"
    _project(seed, 100)
    _git(seed, "init", "-q", "-b", "main")
    _git(seed, "add", "-A")
    _git(seed, "commit", "-qm", "base")
    _git(tmp_path, "clone", "-q", "--bare", str(seed), str(origin))
    pull = tmp_path / "pull"
    _git(tmp_path, "clone", "-q", str(origin), str(pull))
    job = {**job, "env": {"GITHUB_BASE_REF": "main"}}
    summary = tmp_path / "summary.md"
    assert _run_steps(job, pull, summary) == [0, 0]
    assert "A/B against origin/main" in summary.read_text()
    assert (pull / "opprof-report.html").stat().st_size > 0

    _project(pull, 1000)  # the pull request adds 10x the additions: FLOPs judged exactly
    assert _run_steps(job, pull, summary) == [0, 1]
    assert "test_small_sum" in summary.read_text()
