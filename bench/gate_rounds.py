"""A gate run's cost and verdicts under two rounds policies, side by side in one run.

A gate run (``pytest --opprof`` against committed baselines) repeats each test of 1 ms
or more to judge its time; how many rounds is ``pytest_opprof/plugin/rounds.py``'s
policy.  This study runs the same gate with this checkout's plugin and with another
checkout's (``--before``: a git worktree of the commit to compare with, native core
built), against the same baselines, interleaved with plain ``pytest`` runs of the same
tests, so that whatever else the machine runs falls on all three alike:

1. baselines: ``--update-runs`` update runs (``--opprof-update-baselines``) with this
   checkout, or the folder ``--baselines`` names (kept from an earlier run);
2. ``--repeats`` times, in turn: plain, then the two gates (before, after; then after,
   before), each writing a JSON report:
   cost = a gate run's wall seconds over the plain run's of the same repeat; a test
   judged ``regressed`` is a false failure; rounds a test ran, from the report;
3. on the synthetic suite (``busy_study.py``'s, from ``verdict_study.py``), a gate run
   of each with ``+--slowdown`` injected into the ``kernel`` scope of half the tests that
   have one: detected = regressed and ``kernel`` named first (``busy_study._regressed_on``).

Suites (``--suites``): ``synth`` and the installed suites of ``busy_study.REAL_SUITES``
(``sklearn``: scikit-learn's ``linear_model`` ``test_ridge`` and ``test_base``; ``scipy``).

    git worktree add --detach /tmp/before main
    (cd /tmp/before && python setup.py -q build_ext --inplace)
    python bench/gate_rounds.py --before /tmp/before [--suites synth,sklearn] [--repeats 2]

On 2 shared cores: synth (100 tests, 2 repeats) about 6 min; sklearn (1,172 tests) an update
run 4-6 min, a repeat 5-8 min.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import random
import resource
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from _common import loadavg
from busy_study import (
    QUIET,
    REAL_SUITES,
    Scenario,
    Study,
    opprof_session,
    plain_session,
    score_opprof,
    score_unchanged,
)
from verdict_study import KERNEL, generate, name_of
from verdict_study import iterations_per_ms as _iterations_per_ms

SUITES = ("synth", *REAL_SUITES)
POLICIES = ("before", "after")


@dataclass
class CheckoutStudy(Study):
    """A :class:`Study` whose sessions import the plugin from ``checkout`` (None: this one)."""

    checkout: Path | None = None

    def env(self, extra: dict[str, str]) -> dict[str, str]:
        env = super().env(extra)
        if self.checkout is not None:
            env["PYTHONPATH"] = f"{self.checkout}:{env['PYTHONPATH']}"
        return env


def _rounds(run: dict[str, Any]) -> dict[str, float]:
    """Rounds a test of ``run``'s report ran: mean, and the share of tests at each count."""
    counts = [int(t["rounds"]) for t in run["tests"].values()]
    shares = {str(n): counts.count(n) / len(counts) for n in sorted(set(counts))}
    return {"mean": statistics.fmean(counts), **shares}


def where_time_goes(run: dict[str, Any], plain_cpu_s: float) -> dict[str, float]:
    """A gate run's CPU seconds split: the plain run's (pytest and the tests' first
    rounds), the later rounds' (the test bodies run again, from the report's per-round
    CPU times), and the rest: the plugin's work per test and per round (profiles, speed
    references, summaries, verdicts, reports).  CPU, not wall time: other processes
    move it least."""
    cpu = [t["summary"]["cpu_time"]["samples_ns"] for t in run["tests"].values()]
    later_s = sum(sum(c[1:]) for c in cpu) / 1e9
    return {
        "gate_cpu_s": run["cpu_seconds"],
        "plain_cpu_s": plain_cpu_s,
        "first_rounds_cpu_s": sum(c[0] for c in cpu) / 1e9,
        "later_rounds_cpu_s": later_s,
        "plugin_cpu_s": run["cpu_seconds"] - plain_cpu_s - later_s,
        "rounds": sum(map(len, cpu)),
        "tests": len(cpu),
    }


def run_suite(
    study: CheckoutStudy, suite: str, before: Path, slow: dict[str, float]
) -> dict[str, Any]:
    args = study.args
    scenario = Scenario(
        "quiet" if suite == "synth" else suite, suite, QUIET, QUIET, f"{suite}-quiet"
    )
    print(f"== {suite}", flush=True)
    if args.baselines is not None:
        target = study.root / "baselines" / scenario.baseline
        target.parent.mkdir(exist_ok=True)
        if not target.exists():
            target.symlink_to(args.baselines.resolve())
    else:
        for i in range(args.update_runs):
            opprof_session(study, f"update-{i}", scenario, QUIET, update=True)
    plains: list[float] = []
    plain_cpu: list[float] = []
    runs: dict[str, list[dict[str, Any]]] = {p: [] for p in POLICIES}
    for i in range(args.repeats):
        with _cpu() as used:
            plains.append(plain_session(study, scenario, QUIET))
        plain_cpu.append(used[0])
        # ABBA: neither policy always runs first after the plain run.
        for policy in POLICIES if i % 2 == 0 else POLICIES[::-1]:
            study.checkout = before if policy == "before" else None
            with _cpu() as used:
                run = opprof_session(study, f"{policy}-{i}", scenario, QUIET)
            runs[policy].append({**run, "cpu_seconds": used[0]})
        study.checkout = None
    result: dict[str, Any] = {"suite": suite, "plain_seconds": plains}
    for policy in POLICIES:
        unchanged = runs[policy]
        costs = [r["seconds"] / p for r, p in zip(unchanged, plains, strict=True)]
        cpu_costs = [r["cpu_seconds"] / p for r, p in zip(unchanged, plain_cpu, strict=True)]
        if suite == "synth":
            study.checkout = before if policy == "before" else None
            slowed = opprof_session(
                study, f"{policy}-slowed", scenario, QUIET, extra=_slow_env(slow)
            )
            study.checkout = None
            targets = {nid for nid in slowed["tests"] if name_of(nid) in slow}
            scores = score_opprof(unchanged, slowed, targets, KERNEL)
        else:
            scores = score_unchanged(unchanged)
        result[policy] = {
            **scores,
            "gate_seconds_each": [r["seconds"] for r in unchanged],
            "cost_each": costs,
            "cost": statistics.median(costs),
            # CPU seconds of the session's processes: what other processes' load moves
            # least (a wall-clock ratio moved 2.8x-6.6x between repeats at load 2-7).
            "cpu_cost_each": cpu_costs,
            "cpu_cost": statistics.median(cpu_costs),
            "rounds": _rounds(unchanged[0]),
            "time": where_time_goes(unchanged[0], plain_cpu[0]),
        }
    result["tests"] = len(runs["after"][0]["tests"])
    return result


@contextlib.contextmanager
def _cpu() -> Iterator[list[float]]:
    """CPU seconds (user + system) of the child processes run inside, once it ends."""
    used: list[float] = []
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    yield used
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    used.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)


def _slow_env(slow: dict[str, float]) -> dict[str, str]:
    return {"OPPROF_STUDY_SLOW": json.dumps(slow)}


def markdown(result: dict[str, Any]) -> str:
    header = ["suite", "policy", "cost (gate / plain)", "CPU cost", "rounds a test"]
    header += ["false failures"]
    header += ["detected +30%", "CPU s: plain", "later rounds", "plugin"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for s in result["suites"]:
        for policy in POLICIES:
            r = s[policy]
            costs = ", ".join(f"{c:.2f}x" for c in r["cost_each"])
            detected = (
                f"{r['detected_all']}/{r['slowed']} ({r['detection_rate_all']:.0%})"
                if "slowed" in r
                else "n/a"
            )
            cells = [
                f"{s['suite']} ({s['tests']} tests)" if policy == "before" else "",
                policy,
                f"**{r['cost']:.2f}x** ({costs})",
                f"**{r['cpu_cost']:.2f}x** ("
                + ", ".join(f"{c:.2f}x" for c in r["cpu_cost_each"])
                + ")",
                f"{r['rounds']['mean']:.2f}",
                f"{r['false']}/{r['runs_x_tests']}",
                detected,
                f"{r['time']['plain_cpu_s']:.1f}",
                f"{r['time']['later_rounds_cpu_s']:.1f}",
                f"{r['time']['plugin_cpu_s']:.1f}",
            ]
            lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    p.add_argument("--before", type=Path, required=True, help="the other checkout (built)")
    p.add_argument("--suites", default="synth", help=f"comma-separated, of {', '.join(SUITES)}")
    p.add_argument("--tests", type=int, default=100, help="tests of the synthetic suite")
    p.add_argument("--repeats", type=int, default=2)
    p.add_argument("--update-runs", type=int, default=1)
    p.add_argument("--baselines", type=Path, help="reuse this baseline folder (one suite)")
    p.add_argument("--slowdown", type=float, default=0.3)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--json", type=Path, help="write the results here")
    p.add_argument("--keep", type=Path, help="run in DIR and keep it (reports, baselines)")
    return p


def main() -> None:
    args = parser().parse_args()
    # busy_study's sessions read these: BLAS on one thread (its --pin-blas), whose
    # pools would otherwise make a 1 ms matmul wait on a busy core.
    args.pin_blas, args.benchmark_max_time = True, 0.05
    suites = [s for s in args.suites.split(",") if s]
    if any(s not in SUITES for s in suites):
        sys.exit(f"--suites: accepted {', '.join(SUITES)}")
    with contextlib.ExitStack() as stack:
        if args.keep is not None:
            args.keep.mkdir(parents=True, exist_ok=True)
            root = args.keep
        else:
            root = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="opprof-gate-")))
        kernels = generate(root, args.tests, _iterations_per_ms(), args.seed)
        rng = random.Random(args.seed)
        slowed = sorted(rng.sample(sorted(kernels), len(kernels) // 2))
        study = CheckoutStudy(root, args, [])
        t0, load = time.perf_counter(), loadavg()
        results = [
            run_suite(study, s, args.before, {n: 1 + args.slowdown for n in slowed}) for s in suites
        ]
    result: dict[str, Any] = {
        "suites": results,
        "seconds": time.perf_counter() - t0,
        "load": [load, loadavg()],
        "session_log": study.log,
    }
    print(markdown(result))
    print(f"whole study: {result['seconds'] / 60:.1f} min")
    if args.json:
        args.json.write_text(json.dumps(result, indent=1, sort_keys=True))


if __name__ == "__main__":
    main()
