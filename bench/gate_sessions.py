"""False failures of the example suite's gate on unchanged code, session after session.

``.ci/run``'s main job is ``pytest --opprof examples`` against the committed baselines: a
gate that fails unchanged code there fails CI.  This script runs that gate ``--sessions``
times (or reads the reports a previous run kept in ``--keep``) and judges every kept
session's tests with this checkout's gate, two ways:

* against the committed ``baselines/examples`` (what CI does);
* against baselines pooled from three kept sessions in a row (an update run's rules,
  ``pooling``), every other kept session judged against them: how the gate does when
  the baseline was recorded in the same hour.

Judging kept reports is what lets two rule sets be compared on identical measurements:
run it with ``--keep DIR`` once, then with ``--keep DIR --sessions 0`` from each
checkout (``PYTHONPATH``).

    python bench/gate_sessions.py --sessions 40 --keep /tmp/gate
"""

from __future__ import annotations

import argparse
import dataclasses
import subprocess
import sys
from collections import Counter
from pathlib import Path

from pytest_opprof.gate import pooling, store
from pytest_opprof.gate.results import read_report
from pytest_opprof.gate.spread import Spreads, op_spreads
from pytest_opprof.gate.store import BaselineEntry
from pytest_opprof.gate.verdict import Tolerances, compare

REPO = Path(__file__).resolve().parents[1]
Entries = dict[str, BaselineEntry]


def run_sessions(keep: Path, count: int) -> None:
    """``count`` gate sessions of the example suite, each report kept in ``keep``."""
    keep.mkdir(parents=True, exist_ok=True)
    first = len(list(keep.glob("gate-*.json")))
    for i in range(first, first + count):
        cmd = [sys.executable, "-m", "pytest", "--opprof", "examples", "-q"]
        cmd += [
            "-p",
            "no:cacheprovider",
            f"--opprof-report={keep / f'gate-{i:03d}.json'}",
            "--opprof-report-details",
        ]
        subprocess.run(cmd, cwd=REPO, capture_output=True, check=False)


def committed() -> Entries:
    """The committed example baselines, keyed by node id."""
    entries: Entries = {}
    for path in sorted((REPO / "baselines" / "examples").glob("*.json")):
        module = f"examples/{path.stem}.py"
        entries.update({f"{module}::{name}": e for name, e in store.load(path).items()})
    return entries


def module_spreads(entries: Entries) -> dict[str, Spreads]:
    """What the gate gives ``compare``: each module's spreads, over its file's entries."""
    modules = {nodeid.split("::")[0] for nodeid in entries}
    return {
        m: op_spreads(e.summary for k, e in entries.items() if k.split("::")[0] == m)
        for m in modules
    }


def pooled(sessions: list[Entries]) -> Entries:
    """The baseline that update runs measuring ``sessions`` in turn would have written."""
    entries: Entries = {}
    for new_entries in sessions:
        spreads = module_spreads(entries)
        for nodeid, new in new_entries.items():
            old = entries.get(nodeid)
            if old is not None:
                here = new.machine.fingerprint
                verdict = compare(
                    new.summary,
                    old,
                    fingerprint=here,
                    spreads=spreads.get(nodeid.split("::")[0]),
                    op_waits=True,
                )
                if pooling.replace_reason(new.summary, old, verdict, here) is None:
                    new = dataclasses.replace(new, summary=pooling.pool(new.summary, old.summary))
            entries[nodeid] = new
    return entries


@dataclasses.dataclass
class Score:
    sessions: int = 0
    failing_sessions: int = 0
    verdicts: int = 0
    judged: int = 0
    false: int = 0
    tests: Counter[str] = dataclasses.field(default_factory=Counter)

    def line(self, name: str) -> str:
        top = ", ".join(f"{t} {n}" for t, n in self.tests.most_common(3))
        return (
            f"| {name} | {self.failing_sessions}/{self.sessions} | {self.false}/{self.judged} "
            f"({self.verdicts} verdicts) | {top or '-'} |"
        )


def judge(sessions: list[Entries], base: Entries, score: Score) -> None:
    spreads = module_spreads(base)
    for entries in sessions:
        failed = False
        for nodeid, now in entries.items():
            stored = base.get(nodeid)
            if stored is None:
                continue
            verdict = compare(
                now.summary,
                stored,
                fingerprint=now.machine.fingerprint,
                tolerances=Tolerances(),
                machine=now.machine,
                spreads=spreads.get(nodeid.split("::")[0]),
                op_waits=True,
            )
            score.verdicts += 1
            score.judged += verdict.time_judged
            if verdict.status == "regressed":
                failed = True
                score.false += 1
                score.tests[nodeid.split("::")[-1]] += 1
        score.sessions += 1
        score.failing_sessions += failed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keep", type=Path, required=True, help="directory of kept reports")
    parser.add_argument("--sessions", type=int, default=40, help="gate sessions to run first")
    args = parser.parse_args()
    if args.sessions:
        run_sessions(args.keep, args.sessions)
    kept = [read_report(p) for p in sorted(args.keep.glob("gate-*.json"))]
    if len(kept) < 4:
        raise SystemExit(f"{args.keep}: {len(kept)} kept sessions, 4 or more needed")
    against_committed, same_hour = Score(), Score()
    judge(kept, committed(), against_committed)
    for start in range(0, len(kept) - 2, 3):
        recorded = kept[start : start + 3]
        rest = kept[:start] + kept[start + 3 :]
        judge(rest, pooled(recorded), same_hour)
    print(f"{len(kept)} kept gate sessions of the example suite in {args.keep}")
    print("| baseline | sessions failing | false failures of judged | most often |")
    print("|---|---|---|---|")
    print(against_committed.line("committed baselines/examples"))
    print(same_hour.line(f"pooled from 3 kept sessions in a row ({len(kept) // 3} baselines)"))


if __name__ == "__main__":
    main()
