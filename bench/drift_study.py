"""A session-level drift correction, scored on kept verdict-study runs (tried, not adopted).

The idea: what the speed references leave of a machine's drift is shared by every test of a
session, so divide each test's times by the median ratio (speed-scaled wall time, now over
baseline) of the tests judged before it in the same process.  A pytest-xdist controller could
reproduce it from figures sent on the reports.  This script scores it as the plugin would run
it (tests in run order, the estimate from earlier tests only) on sessions kept by
``verdict_study.py --data DIR``, against the plugin's verdicts without it:

    .venv/bin/python bench/drift_study.py DIR [DIR ...]

Each row: how many runs meet the goal (<= 1% false, >= 95% detected) and the means over the
runs, against the refined and the single baseline.  A kept run from before the study had
update sessions uses its first two unchanged sessions as the update runs.  bench/NOTES.md
has the result and why the plugin does without it.
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
from collections.abc import Callable, Sequence
from pathlib import Path

import verdict_study as vs

from pytest_opprof.gate import speed
from pytest_opprof.gate.summary import TestSummary, TimeStats

Sessions = vs.Sessions
Estimate = Callable[[Sequence[float]], float]
FIRST = 8
"""Tests judged before the estimate is used."""


@dataclasses.dataclass(frozen=True)
class Run:
    slowed: list[str]
    bases: Sessions
    unchanged: Sessions
    slowed_session: dict[str, TestSummary]


def load(directory: Path) -> Run:
    meta, bases, unchanged, slowed_session = vs.load_sessions(directory)
    if len(bases) == 1:  # kept before the study recorded update sessions
        bases, unchanged = bases + unchanged[:2], unchanged[2:]
    return Run(meta["slowed"], bases, unchanged, slowed_session)


def scaled(summary: TestSummary, factor: float) -> TestSummary:
    """Every CPU time of ``summary`` times ``factor`` (what a machine that much faster gives)."""

    def times(stats: TimeStats) -> TimeStats:
        return TimeStats.from_samples([s * factor for s in stats.samples_ns])

    ops = {
        key: dataclasses.replace(
            op, self_cpu_time=times(op.self_cpu_time), cpu_time=times(op.cpu_time)
        )
        for key, op in summary.ops.items()
    }
    return dataclasses.replace(
        summary, wall_time=times(summary.wall_time), cpu_time=times(summary.cpu_time), ops=ops
    )


def ratio(summary: TestSummary, base: TestSummary, floor_ns: int) -> float | None:
    """Speed-scaled median wall time, now over baseline; None where times are not judged."""
    if min(summary.rounds, base.rounds) < 3 or not (speed.usable(summary) and speed.usable(base)):
        return None
    now, then = speed.at_speed(summary, base), speed.at_speed(base, base)
    if max(now.wall_time.median_ns, then.wall_time.median_ns) < floor_ns:
        return None
    return now.wall_time.median_ns / then.wall_time.median_ns


def judge(
    bases: Sessions, now: dict[str, TestSummary], setting: vs.Setting, estimate: Estimate | None
) -> dict[str, set[str]]:
    """``verdict_study.judge`` with each test's times divided by the session's estimate so far."""
    out: dict[str, set[str]] = {}
    floor_ns = setting.min_time_us * 1000
    base_view = vs._baseline_view(bases, setting)
    ratios: list[float] = []
    for nodeid, summary in vs._view(now, setting.rounds, floor_ns).items():
        base = base_view.get(nodeid)
        if base is None:
            continue
        drift = estimate(ratios) if estimate is not None and len(ratios) >= FIRST else 1.0
        measured = now[nodeid]
        if drift != 1.0:
            summary, measured = scaled(summary, 1 / drift), scaled(measured, 1 / drift)
        summary = vs._confirmed(summary, measured, base, setting)
        verdict = vs._compare(summary, base, setting)
        r = ratio(scaled(summary, drift) if drift != 1.0 else summary, base, floor_ns)
        if r is not None:
            ratios.append(r)
        if verdict.failed:
            out[nodeid] = {x.op for x in verdict.reasons if x.status == "regressed"}
    return out


def score(
    runs: list[Run], setting: vs.Setting, estimate: Estimate | None
) -> list[tuple[float, float]]:
    """(false rate, detection rate) of each run."""
    out = []
    for run in runs:
        vs._REFINED.clear()
        false = sum(len(judge(run.bases, u, setting, estimate)) for u in run.unchanged)
        judged = sum(len(u) for u in run.unchanged)
        flagged = judge(run.bases, run.slowed_session, setting, estimate)
        found = sum(
            vs.KERNEL in flagged.get(vs._nodeid(run.bases[0], name), set()) for name in run.slowed
        )
        out.append((false / judged, found / len(run.slowed)))
    return out


def beyond(band: float) -> Estimate:
    """The running median's part beyond +-``band`` (1.0 inside it)."""

    def estimate(ratios: Sequence[float]) -> float:
        m = statistics.median(ratios)
        return m / (1 + band) if m > 1 + band else m / (1 - band) if m < 1 - band else 1.0

    return estimate


ESTIMATES: dict[str, Estimate | None] = {
    "none (the plugin)": None,
    "running median": statistics.median,
    "median of the last 30 tests": lambda r: statistics.median(r[-30:]),
    "running median beyond +-5%": beyond(0.05),
}


def main() -> None:
    p = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    p.add_argument("dirs", nargs="+", type=Path, help="runs kept by verdict_study.py --data")
    args = p.parse_args()
    runs = [load(d) for d in args.dirs]
    print(f"{len(runs)} runs; goal: <= 1% false with >= 95% detected")
    for refined in (True, False):
        setting = dataclasses.replace(vs.default_setting(), refined=refined)
        for label, estimate in ESTIMATES.items():
            out = score(runs, setting, estimate)
            meets = sum(f <= 0.01 and d >= 0.95 for f, d in out)
            false = sum(f for f, _ in out) / len(out)
            found = sum(d for _, d in out) / len(out)
            print(
                f"{'refined' if refined else 'single '} {label:30} meets {meets:2d} of {len(out)}"
                f"  mean {false:.2%} false, {found:.1%} detected"
            )


if __name__ == "__main__":
    main()
