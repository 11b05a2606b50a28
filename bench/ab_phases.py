"""Where an A/B run's wall time goes, phase by phase, beside a plain run of the same tests.

Runs, alternately and ``--repeats`` times: a plain ``pytest`` of the tests, then an A/B
run (``--opprof --opprof-against=HEAD``) under each checkout of the plugin named by
``--code`` (its ``PYTHONPATH``: e.g. the main branch's and a change's, to compare them
side by side).  A probe plugin (``-p``, written here) stamps the wall clock at pytest's
phases; the A/B run's own ``time:`` line gives its start and its rounds.  Prints, per
run kind, the fastest repeat's seconds for each phase:

* ``imports``: the interpreter and pytest up to ``pytest_configure``;
* ``configure``: configuring (an A/B run's worktree and partners' start are here);
* ``collect``; ``tests`` (of which the A/B run's rounds: base side and head);
* ``finish``: ``pytest_sessionfinish`` and the terminal summary;
* ``unconfigure``: to the end of ``pytest_unconfigure`` (an A/B run waits for its
  partners there); ``exit``: the rest, to the process's end.

The repository: ``--repo`` (a git repository whose ``HEAD`` is the base), or the study's
generated suite made afresh (``bench/ab_study.py``'s ``make_repo``), whose ``opprof/``
or ``np/`` (numpy's own ``test_linalg``) is run with ``--suite``.

    python bench/ab_phases.py [--suite synth|numpy] [--repeats 3] [--code DIR[,DIR]]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import REPO, loadavg, machine_line, now_utc

PROBE = """
import json, os, time
import pytest

_OUT = os.environ["AB_PHASES_OUT"]
_stamps = {}


def _stamp(name):
    _stamps[name] = time.time()
    with open(_OUT, "w") as f:
        json.dump(_stamps, f)


class _Last:
    @pytest.hookimpl(trylast=True)
    def pytest_collection_finish(self, session):
        _stamp("collected")

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionfinish(self, session):
        _stamp("tests done")

    @pytest.hookimpl(trylast=True)
    def pytest_unconfigure(self, config):
        _stamp("unconfigured")


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config):
    _stamp("configure")
    config.pluginmanager.register(_Last(), "ab-phases-last")


@pytest.hookimpl(trylast=True)
def pytest_sessionstart(session):
    _stamp("configured")


@pytest.hookimpl(tryfirst=True)
def pytest_unconfigure(config):
    _stamp("finished")
"""

PHASES = (
    ("imports", "start", "configure"),
    ("configure", "configure", "configured"),
    ("collect", "configured", "collected"),
    ("tests", "collected", "tests done"),
    ("finish", "tests done", "finished"),
    ("unconfigure", "finished", "unconfigured"),
    ("exit", "unconfigured", "end"),
)
NUMPY_DESELECT = "not generalized and not sdot_bug_8577"


def run(repo: Path, args: list[str], code: str, probe_dir: Path) -> dict[str, float]:
    """One pytest run's phases in seconds, its wall time, and its ``time:`` line's start
    and rounds where it has one."""
    out = probe_dir / "stamps.json"
    out.unlink(missing_ok=True)
    env = dict(os.environ, AB_PHASES_OUT=str(out))
    env["PYTHONPATH"] = os.pathsep.join([code, str(probe_dir), str(repo)])
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "ab_phases_probe", "-p", "no:randomly"]
    cmd += ["-p", "no:cacheprovider", "-p", "no:benchmark", *args]
    cpu_before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.time()
    done = subprocess.run(cmd, cwd=repo, env=env, capture_output=True, text=True)
    end = time.time()
    cpu_after = resource.getrusage(resource.RUSAGE_CHILDREN)
    output = done.stdout + done.stderr
    if done.returncode not in (0, 1) or not out.exists():
        raise RuntimeError(f"{' '.join(cmd)} exited {done.returncode}:\n{output[-3000:]}")
    stamps = {**json.loads(out.read_text()), "start": start, "end": end}
    got = {name: stamps[b] - stamps[a] for name, a, b in PHASES}
    got["wall"] = end - start
    # The run's and its partners' CPU time (each process is waited for by its parent):
    # what it cost, whatever the machine's load did to its wall time.
    got["cpu"] = (cpu_after.ru_utime + cpu_after.ru_stime) - (
        cpu_before.ru_utime + cpu_before.ru_stime
    )
    line = next((x for x in output.splitlines() if x.startswith("time: ")), "")
    if line:
        sys.path.insert(0, str(Path(__file__).parent))
        from ab_study import time_split

        got.update({f"ab {k}": v for k, v in time_split(line).items()})
    return got


def make_repo(root: Path) -> None:
    from ab_study import make_repo as study_repo

    study_repo(root, 40, 1)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--repo", type=Path, help="a git repository (default: the study's suite)")
    p.add_argument("--suite", choices=("synth", "numpy"), default="synth")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--code", default=str(REPO), help="plugin checkouts, comma-separated")
    p.add_argument("pytest_args", nargs="*", help="what to run (default: the suite's folder)")
    args = p.parse_args()
    codes = args.code.split(",")
    with tempfile.TemporaryDirectory(prefix="opprof-ab-phases-") as tmp:
        probe_dir = Path(tmp) / "probe"
        probe_dir.mkdir()
        (probe_dir / "ab_phases_probe.py").write_text(PROBE)
        repo = args.repo
        if repo is None:
            repo = Path(tmp) / "repo"
            repo.mkdir()
            make_repo(repo)
        what = args.pytest_args or (
            ["opprof"] if args.suite == "synth" else ["np", "-k", NUMPY_DESELECT]
        )
        print(f"# {machine_line()}, {now_utc()}, load {loadavg():.1f}; {' '.join(what)}")
        kinds = ["plain"] + [f"A/B {c}" for c in codes]
        runs: dict[str, list[dict[str, float]]] = {k: [] for k in kinds}
        for _ in range(args.repeats):
            runs["plain"].append(run(repo, what, codes[0], probe_dir))
            for code in codes:
                ab = [*what, "--opprof", "--opprof-against=HEAD"]
                runs[f"A/B {code}"].append(run(repo, ab, code, probe_dir))
        print(f"# load {loadavg():.1f} at the end; seconds, the fastest of {args.repeats}")
        names = [n for n, _, _ in PHASES] + ["wall", "cpu", "ab start", "ab rounds", "ab base"]
        names.append("ab head")
        print("| phase | " + " | ".join(kinds) + " |")
        print("|---|" + "---|" * len(kinds))
        for name in names:
            cells = []
            for kind in kinds:
                values = [r[name] for r in runs[kind] if name in r]
                cells.append(f"{min(values):.2f}" if values else "-")
            print(f"| {name} | " + " | ".join(cells) + " |")
        plain = min(r["wall"] for r in runs["plain"])
        plain_cpu = min(r["cpu"] for r in runs["plain"])
        for code in codes:
            rs = runs[f"A/B {code}"]
            whole = min(r["wall"] for r in rs) / plain
            bare = min(r["wall"] - r.get("ab start", 0.0) for r in rs) / plain
            cpu = min(r["cpu"] for r in rs) / plain_cpu
            print(
                f"A/B {code}: wall x{whole:.1f} a plain run (x{bare:.1f} without the start), "
                f"CPU time x{cpu:.1f}"
            )


if __name__ == "__main__":
    main()
