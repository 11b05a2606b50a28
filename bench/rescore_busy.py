"""Re-judge kept ``bench/busy_study.py`` runs with this checkout's gate.

``busy_study.py --keep DIR`` keeps every session's JSON report.  This script rebuilds
each scenario's baseline from its three update runs' reports the way the plugin does
(``pooling.replace_reason`` / ``pooling.pool``, judged by ``verdict.compare``), judges
the unchanged and slowed runs' reports against it, and scores them as the study does:
false failures among the unchanged verdicts, and slowed tests whose failure names the
slowed op first among those judged on time.  Run it from two checkouts (``PYTHONPATH``)
on the same kept runs to compare two verdict rules on identical measurements; the rounds
each session ran (``auto``'s confirmation rounds) are those the recorded rule chose.

    PYTHONPATH=. python bench/rescore_busy.py /tmp/run1 /tmp/run2
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import random
import sys
import tempfile
from pathlib import Path
from typing import Any

from pytest_opprof.gate import pooling
from pytest_opprof.gate.results import read_report
from pytest_opprof.gate.spread import Spreads, op_spreads
from pytest_opprof.gate.store import BaselineEntry
from pytest_opprof.gate.verdict import Tolerances, Verdict, compare

sys.path.insert(0, str(Path(__file__).parent))
import busy_study
import verdict_study

RECORDED_BY = {"loaded-base": "loaded", "quiet-base": "quiet"}
"""Scenario -> the scenario whose update runs recorded its baseline, when it recorded none."""


def slowed_tests(args: argparse.Namespace) -> set[str]:
    """The synthetic tests the study slowed: its generator and draw, re-run."""
    rng = random.Random(args.seed)
    with tempfile.TemporaryDirectory() as tmp:
        kernels = verdict_study.generate(Path(tmp), args.tests, 1000, args.seed)
    return set(rng.sample(sorted(kernels), len(kernels) // 2))


def spreads_of(entries: dict[str, BaselineEntry], nodeid: str, here: str) -> Spreads:
    """What the plugin's gate gives ``compare`` for ``nodeid``: the spreads of its
    module's entries recorded on this machine (``BaselineSession.spreads``)."""
    module = nodeid.split("::")[0]
    return op_spreads(
        e.summary
        for key, e in entries.items()
        if key.split("::")[0] == module and e.machine.fingerprint == here
    )


def as_baseline(entry: BaselineEntry) -> BaselineEntry:
    """``entry`` as a baseline file holds it: without the per-round switched-out op keys,
    which the gate reads on the side it judges only."""
    if entry.summary.switched is None:
        return entry
    return dataclasses.replace(entry, summary=dataclasses.replace(entry.summary, switched=None))


def replay(reports: Path, scenario: str) -> dict[str, BaselineEntry]:
    """The baseline the scenario's update runs made, rebuilt with this checkout's rules."""
    entries: dict[str, BaselineEntry] = {}
    for i in range(busy_study.UPDATE_RUNS):
        stored = dict(entries)  # what this update run's gate read from the files
        spreads: dict[str, Spreads] = {}
        for nodeid, read in read_report(reports / f"{scenario}-update-{i}.json").items():
            new = as_baseline(read)
            old = entries.get(nodeid)
            if old is None:
                entries[nodeid] = new
                continue
            here = new.machine.fingerprint
            module = nodeid.split("::")[0]
            if module not in spreads:
                spreads[module] = spreads_of(stored, nodeid, here)
            verdict = compare(
                read.summary, old, fingerprint=here, spreads=spreads[module], op_waits=True
            )
            if pooling.replace_reason(new.summary, old, verdict, here) is None:
                new = dataclasses.replace(new, summary=pooling.pool(new.summary, old.summary))
            entries[nodeid] = new
    return entries


def names_first(verdict: Verdict, op: str) -> bool:
    slower = [r for r in verdict.reasons if r.kind == "slower"]
    return verdict.status == "regressed" and bool(slower) and slower[0].op == op


def score(run: Path, scenario: str, slowed: set[str]) -> dict[str, Any] | None:
    reports = run / "reports"
    if not (reports / f"{scenario}-unchanged-0.json").exists():
        return None
    recorded = scenario
    if not (reports / f"{recorded}-update-0.json").exists():
        recorded = RECORDED_BY.get(scenario, scenario)
        if not (reports / f"{recorded}-update-0.json").exists():
            return None
    base = replay(reports, recorded)
    numpy = scenario == "numpy"
    if numpy:
        unchanged = json.loads((reports / "numpy-unchanged-0.json").read_text())
        targets, op = busy_study.numpy_targets(unchanged), busy_study.NUMPY_OP
    out = {"false": 0, "verdicts": 0, "judged": 0, "detected": 0, "slowed_judged": 0}
    spreads: dict[str, Spreads] = {}
    for kind in [f"unchanged-{i}" for i in range(3)] + ["slowed"]:
        path = reports / f"{scenario}-{kind}.json"
        if not path.exists():
            continue
        for nodeid, now in read_report(path).items():
            here = now.machine.fingerprint
            module = nodeid.split("::")[0]
            if module not in spreads:
                spreads[module] = spreads_of(base, nodeid, here)
            verdict = compare(
                now.summary,
                base.get(nodeid),
                fingerprint=here,
                tolerances=Tolerances(),
                machine=now.machine,
                spreads=spreads[module],
                # The study's sessions ran where each op's wait is measured (as the
                # plugin's gate, BaselineSession.verdict, would say here).
                op_waits=True,
            )
            if kind == "slowed":
                target = nodeid in targets if numpy else nodeid.split("::")[-1] in slowed
                if target and verdict.time_judged:
                    out["slowed_judged"] += 1
                    out["detected"] += names_first(verdict, op if numpy else "kernel")
                continue
            out["verdicts"] += 1
            out["judged"] += verdict.time_judged
            out["false"] += verdict.status == "regressed"
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", type=Path, help="busy_study.py --keep directories")
    parser.add_argument("--tests", type=int, default=100)
    parser.add_argument("--seed", type=int, default=busy_study.parser().parse_args([]).seed)
    args = parser.parse_args()
    slowed = slowed_tests(args)
    totals: dict[str, dict[str, int]] = {}
    for run in args.runs:
        for scenario in busy_study.SCENARIOS:
            got = score(run, scenario, slowed)
            if got is None:
                continue
            print(
                f"{run.name} {scenario:12} false {got['false']}/{got['verdicts']}  "
                f"judged {got['judged']}  detected {got['detected']}/{got['slowed_judged']}"
            )
            total = totals.setdefault(scenario, dict.fromkeys(got, 0) | {"runs": 0})
            total["runs"] += 1
            for key, value in got.items():
                total[key] += value
    print("| scenario | runs | false failures | time judged | detected (of judged) |")
    print("|---|---|---|---|---|")
    for scenario, t in totals.items():
        print(
            f"| {scenario} | {t['runs']} | {t['false']}/{t['verdicts']} | "
            f"{t['judged']}/{t['verdicts']} | {t['detected']}/{t['slowed_judged']} |"
        )


if __name__ == "__main__":
    main()
