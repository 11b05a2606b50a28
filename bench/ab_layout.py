"""A/A with many pairs: does a fixed memory layout pass for a change?

The suite is ``ab_study.py``'s generated one, committed as the base of a real git
repository; the head is the same tree (A/A: every failure is false).  Each run is
``pytest --opprof --opprof-against=HEAD`` with every test held to the same number of pairs
(``--opprof-ab-min-pairs`` = ``--opprof-ab-max-pairs``), so the judge sees as many pairs
as a careful user would ask for; the layout (``--opprof-ab-layout``) alternates between
``shuffled`` and ``fixed`` run by run, interleaved, so both meet the same machine.

Reported per layout: the false failures (regressed in an A/A run) over the tests, and the
spread of the tests' paired changes against their own intervals: ``|change| / half-width``
above 1 means the 90% interval missed zero, which an honest interval does for about 10%
of unchanged figures.

    python bench/ab_layout.py [--tests 40] [--pairs 8] [--repeats 4] [--scenario quiet]
"""

from __future__ import annotations

import argparse
import json
import math
import re
import tempfile
from pathlib import Path
from typing import Any

from _common import loadavg, machine_line, now_utc
from ab_study import FLOOR_NS, Runner, _wall, condition, make_repo

LAYOUTS = ("shuffled", "fixed")
INTERVAL = re.compile(r"A/B: ([+-][\d.]+)% \[([+-][\d.]+)%, ([+-][\d.]+)%\]")


def misses(tests: dict[str, Any]) -> tuple[int, int]:
    """(time intervals that miss zero, time intervals read) among tests of >= 1 ms."""
    missed = read = 0
    for test in tests.values():
        row = _wall(test)
        if row is None or (row["baseline"] or 0) < FLOOR_NS:
            continue
        found = INTERVAL.search(row.get("note") or "")
        if found is None:
            continue
        low, high = float(found[2]), float(found[3])
        read += 1
        missed += low > 0 or high < 0
    return missed, read


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--tests", type=int, default=40)
    p.add_argument("--pairs", type=int, default=8)
    p.add_argument("--repeats", type=int, default=4)
    p.add_argument("--scenario", default="quiet", help="quiet, loaded or bursty")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--json", type=Path)
    args = p.parse_args()
    out: dict[str, dict[str, int]] = {
        layout: {"false": 0, "tests": 0, "missed": 0, "read": 0} for layout in LAYOUTS
    }
    with tempfile.TemporaryDirectory(prefix="opprof-ab-layout-") as tmp:
        root = Path(tmp)
        make_repo(root, args.tests, args.seed)
        print(f"# {machine_line()}, {now_utc()}; {args.tests} tests, {args.pairs} pairs each")
        runner = Runner(root, args.scenario, args.seed)
        with condition(args.scenario, args.seed):
            for repeat in range(args.repeats):
                order = LAYOUTS if repeat % 2 == 0 else LAYOUTS[::-1]
                for layout in order:
                    run = runner.report(
                        f"aa-{layout}-{repeat}",
                        "--opprof-against=HEAD",
                        f"--opprof-ab-min-pairs={args.pairs}",
                        f"--opprof-ab-max-pairs={args.pairs}",
                        f"--opprof-ab-layout={layout}",
                    )
                    tests = run["tests"]
                    false = sum(t["status"] == "regressed" for t in tests.values())
                    missed, read = misses(tests)
                    tally = out[layout]
                    tally["false"] += false
                    tally["tests"] += len(tests)
                    tally["missed"] += missed
                    tally["read"] += read
                    print(
                        f"repeat {repeat} {layout:8}: {false} false of {len(tests)}, "
                        f"{missed}/{read} intervals miss zero (load {loadavg():.1f})",
                        flush=True,
                    )
    print()
    print("| layout | false failures (A/A) | 90% intervals that miss zero |")
    print("|---|---|---|")
    for layout, t in out.items():
        share = t["missed"] / t["read"] if t["read"] else math.nan
        print(f"| {layout} | {t['false']}/{t['tests']} | {t['missed']}/{t['read']} ({share:.0%}) |")
    if args.json:
        args.json.write_text(json.dumps({"args": vars(args) | {"json": None}, "out": out}))


if __name__ == "__main__":
    main()
