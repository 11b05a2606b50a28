"""A/B's decision rules replayed on real pairs: what each rule decides, catches and costs.

``record`` runs real A/B runs (``ab_study.py``'s generated suite in a real git repository,
and numpy's own ``test_linalg``) with every test held to ``--pairs`` pairs, and writes each
test's rounds on both sides as the judge received them (``_ab_record.py``): unchanged (A/A),
and with the ``kernel`` of half the tests made 5% or 10% slower (numpy: ``svd`` 10%
slower in the head).  ``replay`` then runs the plugin's own judge (``pytest_opprof/ab``)
over those pairs as a run would: each test starts with one pair and takes the next
recorded pair only while the judge asks for it, within its budget, in the recorded order.
So a change to the rules is measured on the same pairs, side by side, in seconds.

    python bench/ab_replay.py record --scenario quiet,loaded,bursty --out pairs.json
    python bench/ab_replay.py replay pairs.json

A replay cannot see what a rule would change in the pairs themselves (a longer run meets
another phase of the machine); ``ab_study.py`` measures the whole run.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import os
import random
import statistics
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from _common import loadavg, machine_line, now_utc
from ab_study import FLOOR_NS, Runner, condition, make_repo, set_head
from busy_study import NUMPY_OP, numpy_targets
from verdict_study import KERNEL

from pytest_opprof.ab.judge import HEAVY, ABJudge, JudgedFigure
from pytest_opprof.ab.session import DEFAULT_Q
from pytest_opprof.gate.summary import OpFigures, RoundFigures
from pytest_opprof.gate.tolerance import Tolerances

BENCH = Path(__file__).resolve().parent
TOLERANCE = 0.03
VARIANTS = (("aa", 0.0), ("slow5", 0.05), ("slow10", 0.10))
AXES = {
    "order": ("orders", ("alternate", "abba")),
    "layout": ("layouts", ("shuffled", "fixed")),
    "head": ("heads", ("partner", "inline")),
    "addresses": ("addresses", ("fixed", "random")),
}
"""Each ``--opprof-ab-NAME`` setting a recording can run side by side: its option here
(``--orders alternate,abba``) and its values, the default first."""
Q = DEFAULT_Q
"""The run's false-discovery rate, as a run of the plugin has it."""


def record_run(
    runner: Runner,
    name: str,
    pairs: int,
    suite: str = "synth",
    settings: dict[str, str] | None = None,
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """One A/B run with every test held to ``pairs`` pairs: its recorded pairs, and its
    report."""
    path = runner.root / "reports" / f"{name}.jsonl"
    path.parent.mkdir(exist_ok=True)
    path.unlink(missing_ok=True)
    env = dict(runner.env, OPPROF_AB_RECORD=str(path))
    env["PYTHONPATH"] = os.pathsep.join((str(BENCH), env["PYTHONPATH"]))
    report = runner.report(
        name,
        "-p",
        "_ab_record",
        "--opprof-against=HEAD",
        f"--opprof-ab-min-pairs={pairs}",
        f"--opprof-ab-max-pairs={pairs}",
        *(f"--opprof-ab-{name}={value}" for name, value in (settings or {}).items()),
        env=env,
        suite=suite,
    )
    lines = [json.loads(x) for x in path.read_text().splitlines()]
    return lines, report


def record(args: argparse.Namespace) -> None:
    out: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        kernels = make_repo(root, args.tests, args.seed)
        for scenario in args.scenario.split(","):
            seed = args.seed * 1000 + len(out)
            runner = Runner(root, scenario, seed)
            targets = sorted(random.Random(seed).sample(sorted(kernels), len(kernels) // 2))
            with condition(scenario, seed):
                variants = [v for v in VARIANTS if v[0] in args.variants]
                chosen = [getattr(args, option) for option, _ in AXES.values()]
                ways = itertools.product(range(args.repeats), variants, *chosen)
                for _, (variant, slowdown), *values in ways:
                    settings = dict(zip(AXES, values, strict=True))
                    slow = {t: 1 + slowdown for t in targets} if slowdown else {}
                    set_head(root, slow)
                    load = loadavg()
                    name = "-".join([scenario, variant, *values])
                    tests, _ = record_run(runner, name, args.pairs, settings=settings)
                    set_head(root, {})
                    out.append(
                        {
                            "scenario": scenario,
                            "suite": "synth",
                            **settings,
                            "variant": variant,
                            "slowed": sorted(slow),
                            "named": KERNEL,
                            "load": load,
                            "tests": tests,
                        }
                    )
                    print(
                        name,
                        len(tests),
                        "tests",
                        f"load {load:.1f}",
                        flush=True,
                    )
                if "numpy" in args.suite.split(","):
                    set_head(root, {})
                    tests, report = record_run(runner, f"np-{scenario}-aa", args.pairs, "numpy")
                    targets_np = sorted(numpy_targets(report))
                    out.append(
                        {
                            "scenario": scenario,
                            "suite": "numpy",
                            "order": "alternate",
                            "variant": "aa",
                            "slowed": [],
                            "named": NUMPY_OP,
                            "tests": tests,
                        }
                    )
                    set_head(root, {}, svd=0.10)
                    tests, _ = record_run(runner, f"np-{scenario}-slow10", args.pairs, "numpy")
                    set_head(root, {})
                    out.append(
                        {
                            "scenario": scenario,
                            "suite": "numpy",
                            "order": "alternate",
                            "variant": "slow10",
                            "slowed": targets_np,
                            "named": NUMPY_OP,
                            "tests": tests,
                        }
                    )
                    print(scenario, "numpy", len(tests), "tests", flush=True)
    payload = {"when": now_utc(), "machine": machine_line(), "pairs": args.pairs, "runs": out}
    args.out.write_text(json.dumps(payload))
    print("wrote", args.out)


def _rounds(side: Sequence[Sequence[Any]]) -> list[RoundFigures]:
    return [
        RoundFigures(
            wall_time_ns=int(wall),
            cpu_time_ns=int(wall - wait),
            ops={k: OpFigures(count=1, self_cpu_ns=int(v)) for k, v in ops.items()},
            wait_ns=int(wait),
        )
        for wall, wait, ops in side
    ]


def _is_slowed(nodeid: str, slowed: set[str]) -> bool:
    return nodeid in slowed or nodeid.split("::")[-1] in slowed


def replay_run(
    run: dict[str, Any],
    tol: Tolerances,
    max_pairs: int,
    heavy: float | None = HEAVY,
    processes: int = 1,
) -> dict[str, Any]:
    """The recorded run judged as the plugin would have, test by test (``heavy``: the
    judge's hold on heavy tests, ``judge.HEAVY``; None: none; ``processes``: the pairs
    taken as if from that many processes a side in turn, though they were recorded from
    one, which prices the agreement a failure then needs)."""
    tests = run["tests"]
    judge = ABJudge(len(tests), Q, max_pairs, heavy=heavy, processes=processes)
    slowed = set(run["slowed"])
    got: dict[str, Any] = {"tests": len(tests), "long": 0, "judged": 0, "false": 0}
    got.update(slowed=0, caught=0, named=0, pairs=0, passed_slowed=0, own_ns=0, rounds_ns=0)
    for test in tests:
        base, head = _rounds(test["base"]), _rounds(test["head"])
        n = 1
        while n < len(base) and judge.more_pairs(base[:n], head[:n], tol):
            n += 1
        judged: list[JudgedFigure] = judge.settle(base[:n], head[:n], tol)
        got["pairs"] += n
        # The run's time: the head's own round (as long as its first) and the pairs'.
        got["own_ns"] += head[0].wall_time_ns
        got["rounds_ns"] += head[0].wall_time_ns + sum(
            b.wall_time_ns + h.wall_time_ns for b, h in zip(base[:n], head[:n], strict=True)
        )
        own = next((j for j in judged if j.key == ""), None)
        if statistics.median(r.wall_time_ns for r in base) >= FLOOR_NS:
            got["long"] += 1
            got["judged"] += own is not None and own.decision != "undecided"
        regressed = [j for j in judged if j.decision == "regressed"]
        if _is_slowed(test["id"], slowed):
            got["slowed"] += 1
            got["caught"] += bool(regressed)
            ops = [j for j in regressed if j.key]
            ops.sort(
                key=lambda j: (
                    -(statistics.median(j.pairs.head_ns) - statistics.median(j.pairs.base_ns))
                )
            )
            got["named"] += bool(ops) and ops[0].key == run["named"]
            got["passed_slowed"] += own is not None and own.decision == "pass"
        else:
            got["false"] += bool(regressed)
    got["offset"] = (judge.test_offset.offset(), judge.op_offset.offset())
    got["shift"] = _shift(run)
    return got


def _shift(run: dict[str, Any]) -> tuple[float, float]:
    """How far the head ran from the base over the run's unchanged tests of >= 1 ms, as
    the median of their mean paired changes: the test's time, and the named op's."""
    slowed = set(run["slowed"])
    walls, ops = [], []
    for test in run["tests"]:
        if _is_slowed(test["id"], slowed):
            continue
        base, head = test["base"], test["head"]
        if statistics.median(r[0] for r in base) < FLOOR_NS:
            continue
        walls.append(
            statistics.fmean(math.log(h[0] / b[0]) for b, h in zip(base, head, strict=True))
        )
        named = [
            math.log(h[2][run["named"]] / b[2][run["named"]])
            for b, h in zip(base, head, strict=True)
            if b[2].get(run["named"]) and h[2].get(run["named"])
        ]
        if named:
            ops.append(statistics.fmean(named))
    return (
        math.expm1(statistics.median(walls)) if walls else 0.0,
        math.expm1(statistics.median(ops)) if ops else 0.0,
    )


def replay(args: argparse.Namespace) -> None:
    data = json.loads(args.pairs_file.read_text())
    tol = Tolerances(time=args.tolerance)
    print(f"recorded {data['when']}, {data['pairs']} pairs a test; tolerance {tol.time:.0%}")
    print(
        "| scenario | suite | order | layout | head | addresses | variant | false "
        "| judged >= 1 ms | caught | named | slowed passed | pairs a test | rounds' time "
        "| offset test/op | unchanged shift test/op |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    caps = [None if c == "none" else float(c) for c in args.heavy.split(",")]
    counts = [int(c) for c in args.processes.split(",")]
    for run, cap, processes in itertools.product(data["runs"], caps, counts):
        g = replay_run(run, tol, min(args.max_pairs, data["pairs"]), cap, processes)
        said = (f" (heavy {cap})" if cap != HEAVY else "") + (
            f" ({processes} processes)" if processes != 1 else ""
        )
        print(
            f"| {run['scenario']}{said} "
            f"| {run['suite']} | {run.get('order', 'abba')} "
            f"| {run.get('layout', 'shuffled')} | {run.get('head', 'inline')} "
            f"| {run.get('addresses', 'random')} | {run['variant']} "
            f"| {g['false']}/{g['tests']} "
            f"| {g['judged']}/{g['long']} ({g['judged'] / max(g['long'], 1):.0%}) "
            f"| {g['caught']}/{g['slowed']} | {g['named']}/{g['slowed']} | {g['passed_slowed']} "
            f"| {g['pairs'] / g['tests']:.2f} | x{g['rounds_ns'] / max(g['own_ns'], 1):.1f} "
            f"| {g['offset'][0]:.2%}/{g['offset'][1]:.2%} "
            f"| {g['shift'][0]:+.1%}/{g['shift'][1]:+.1%} |"
        )


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="command", required=True)
    r = sub.add_parser("record")
    r.add_argument("--scenario", default="quiet")
    r.add_argument("--suite", default="synth", help="synth, or synth,numpy")
    r.add_argument("--tests", type=int, default=40)
    r.add_argument("--pairs", type=int, default=12)
    r.add_argument("--seed", type=int, default=1)
    r.add_argument(
        "--variants",
        type=lambda t: t.split(","),
        default=[v for v, _ in VARIANTS],
        help="any of aa, slow5, slow10",
    )
    r.add_argument("--repeats", type=int, default=1, help="each variant and setting")
    for name, (option, values) in AXES.items():
        r.add_argument(
            f"--{option}",
            type=lambda t: t.split(","),
            default=[values[0]],
            help=f"{' or '.join(values)}, or both (--opprof-ab-{name}), interleaved",
        )
    r.add_argument("--out", type=Path, required=True)
    s = sub.add_parser("replay")
    s.add_argument("pairs_file", type=Path)
    s.add_argument("--tolerance", type=float, default=TOLERANCE)
    s.add_argument("--max-pairs", type=int, default=12)
    s.add_argument(
        "--heavy",
        default=f"{HEAVY:g}",
        help="the judge's hold on tests heavier than the run's typical one (judge.HEAVY); "
        "'none': no hold; a list (none,4) replays each",
    )
    s.add_argument(
        "--processes",
        default="1",
        help="judge the pairs as if from this many processes a side in turn "
        "(--opprof-ab-processes; the recording's came from one); a list (1,2) replays each",
    )
    args = p.parse_args()
    record(args) if args.command == "record" else replay(args)


if __name__ == "__main__":
    main()
