"""Verdict quality: false-regression and detection rates of pytest-opprof vs pytest-benchmark.

A synthetic suite of ``--tests`` tests with known work is generated into a
temporary directory: numpy ops of varied sizes (matmul, solve, sort, add, sum,
einsum: 10 µs to several ms each) and, in most tests, a ``record_function``
scope ``kernel`` of 1-4 ms of pure-Python work (a fixed number of loop
iterations: no numpy op, no FLOPs, no allocation inside, so the scope's self
time is the work).  Then:

1. ``--baseline-sessions`` sessions make the baseline: the first records it,
   each later one is an update run (``pooling.py``: a run whose verdict passes
   joins its rounds to the stored ones); verdicts are scored against the first
   session's baseline alone and against the refined one;
2. ``--sessions`` unchanged sessions: every test judged regressed is a false
   regression (rate = judged regressed / (tests x sessions));
3. one session with a +``--slowdown`` slowdown (iterations x 1.3) injected
   into the ``kernel`` scope of a random half of the tests that have one:
   the detection rate is the share of those judged regressed *because of*
   ``kernel`` (a regression blamed on another op does not count).

The same work runs under pytest-benchmark (its own sessions: one saved, the
same unchanged and slowed ones, each compared with
``--benchmark-compare-fail=mean:10%``; a test counts as flagged when
pytest-benchmark lists it under "Performance has regressed").

opprof sessions run with ``--opprof-rounds R`` for the largest R studied and
no warm-up; verdicts for fewer rounds take each test's first rounds, which is
what a session with fewer rounds measures (the default, ``auto``, is scored
the same way: ``AUTO_ROUNDS`` first rounds for a test whose first round
took at least the time floor, its first round alone otherwise; and, when the
verdict on those is ``time_undecided`` (a time beyond its tolerance),
the first ``AUTO_ROUNDS + CONFIRM_ROUNDS``: the plugin's confirmation rounds,
in update runs too; in a gate run, the first 3 or 4 where the verdict on them is settled,
``rounds.settled`` with a ``RoundNoise`` pool fed in the tests' order, as the plugin's
worker feeds it; ``no-settle`` rows score the policy without that early stop).
Verdicts are computed with ``pytest_opprof.gate.verdict.compare`` (the plugin's own
comparison) over a grid of
settings, so one set of sessions scores every candidate default.

    .venv/bin/python bench/verdict_study.py [--quick] [--json out.json]

Self-contained: every run generates its suite and records its own sessions (with the
defaults, about 9 minutes on 2 cores: BENCHMARKS.md, "Does a time verdict catch slowdowns?").
``--data DIR`` keeps those sessions' raw figures; ``--analyze DIR`` re-scores a directory
that an earlier ``--data DIR`` run wrote (after a change to the verdict, say) without
running any session.  Its sibling ``busy_study.py`` runs the plugin end to end on busy
machines, under ``-n 2`` and on numpy's own tests, sharing this suite and these sessions.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import json
import os
import random
import re
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from _common import loadavg, plugin_args, subprocess_env

from pytest_opprof.gate import tolerance as tolerances
from pytest_opprof.gate.jsonio import Fields
from pytest_opprof.gate.machine import MachineInfo, machine_info
from pytest_opprof.gate.pooling import can_pool, pool
from pytest_opprof.gate.store import BaselineEntry
from pytest_opprof.gate.summary import TestSummary, TimeStats
from pytest_opprof.gate.verdict import TimeLimit, Tolerances, Verdict, compare_limits
from pytest_opprof.plugin import options
from pytest_opprof.plugin.round_noise import RoundNoise
from pytest_opprof.plugin.rounds import (
    AUTO_ROUNDS,
    CONFIRM_ROUNDS,
    more_rounds,
    needs_confirmation,
    rounds_text,
    settled,
)

KERNEL = "kernel"
PYTHON = sys.executable

CONFTEST = '''
"""Writes every profiled test's summary (the figures a baseline stores) as JSON."""
import json
import os


def pytest_sessionstart(session):
    from dataclasses import replace

    from pytest_opprof.plugin import controller_key

    controller = session.config.stash.get(controller_key, None)
    if controller is not None:
        # Every judged test's result kept, as where a report is asked for: read below.
        controller.gate.options = replace(controller.gate.options, keep_results=True)
        # The study judges its sessions against each other afterwards, not against a
        # baseline here: every round runs the speed references, as where one is recorded.
        controller.gate.times_judged = lambda nodeid, rounds: True


def pytest_sessionfinish(session):
    from pytest_opprof.plugin import controller_key

    controller = session.config.stash.get(controller_key, None)
    out = os.environ.get("OPPROF_STUDY_OUT")
    if controller is None or not out:
        return
    data = {r.nodeid: r.summary.to_json() for r in controller.gate.results}
    with open(out, "w") as f:
        json.dump(data, f)
'''

WORK_HEADER = '''
"""Known work for the verdict study (generated; see bench/verdict_study.py)."""
import json
import os

import numpy as np

_SLOW = json.loads(os.environ.get("OPPROF_STUDY_SLOW", "{}"))
_rng = np.random.default_rng(0)
_cache = {}


def arr(*shape):
    return _cache[shape]


def prepare(shapes):
    """Inputs made at import, so every round of a test does the same work."""
    for shape in shapes:
        a = _rng.standard_normal(shape)
        if len(shape) == 2 and shape[0] == shape[1]:
            a += np.eye(shape[0]) * shape[0]  # well conditioned for solve
        _cache[shape] = a


def spin(iterations):
    acc = 0
    for i in range(iterations):
        acc += i ^ 7
    return acc


def kernel(name, iterations, scope):
    n = int(iterations * _SLOW.get(name, 1.0))
    with scope("kernel"):
        spin(n)
'''


def _op_lines(rng: random.Random) -> list[str]:
    """numpy work of one test: 2-6 ops of varied sizes (10 µs to several ms each)."""
    ops = [
        lambda: f"np.matmul(arr({(n := rng.choice([32, 64, 128, 192, 256]))}, {n}), arr({n}, {n}))",
        lambda: f"np.linalg.solve(arr({(n := rng.choice([32, 64, 128, 200]))}, {n}), arr({n}, 4))",
        lambda: f"np.sort(arr({rng.choice([1_000, 10_000, 50_000, 200_000])}))",
        lambda: f"np.add(arr({(n := rng.choice([1_000, 30_000, 300_000, 1_000_000]))}), arr({n}))",
        lambda: f"arr({rng.choice([1_000, 100_000, 1_000_000])}).sum()",
        lambda: "np.einsum('ij,jk->ik', arr({n}, {n}), arr({n}, {n}))".format(
            n=rng.choice([16, 48, 96])
        ),
    ]
    return [rng.choice(ops)() for _ in range(rng.randint(2, 6))]


def generate(root: Path, n_tests: int, iters_per_ms: float, seed: int) -> dict[str, int]:
    """Write the suites; return {test name: kernel iterations} of the tests with a kernel."""
    rng = random.Random(seed)
    work = [WORK_HEADER]
    kernels: dict[str, int] = {}
    names = []
    for i in range(n_tests):
        name = f"test_w{i:03d}"
        names.append(name)
        body = [f"    {line}" for line in _op_lines(rng)]
        if rng.random() < 0.7:
            iterations = int(rng.uniform(1.0, 4.0) * iters_per_ms)
            kernels[name] = iterations
            body.insert(rng.randint(0, len(body)), f"    kernel({name!r}, {iterations}, scope)")
        work.append(f"\n\ndef {name}(scope):\n" + "\n".join(body) + "\n")
    shapes = sorted(set(re.findall(r"arr\(([\d, ]+)\)", "".join(work[1:]))))
    work.append(f"\n\nprepare([{', '.join(f'({s},)' for s in shapes)}])\n")
    (root / "synthwork.py").write_text("".join(work))
    per_module = 20
    for flavour, signature, call in (
        ("opprof", "opprof", "synthwork.{n}(opprof.record_function)"),
        ("bench", "benchmark", "benchmark(synthwork.{n}, _no_scope)"),
    ):
        d = root / flavour
        d.mkdir()
        (d / "conftest.py").write_text(CONFTEST)
        for m in range(0, n_tests, per_module):
            lines = ["import contextlib", "", "import synthwork", ""]
            lines.append("\ndef _no_scope(name):\n    return contextlib.nullcontext()\n")
            for name in names[m : m + per_module]:
                lines.append(f"\ndef {name}({signature}):\n    {call.format(n=name)}\n")
            (d / f"test_synth_{m // per_module:02d}.py").write_text("\n".join(lines))
    (root / "pytest.ini").write_text("[pytest]\naddopts = -p no:cacheprovider\n")
    return kernels


def iterations_per_ms() -> float:
    """How many iterations of the generated ``spin`` loop take 1 ms of CPU here (fastest of 5).

    Thread CPU time, not wall time, and the fastest run: on a busy machine the wall time of a
    run includes waiting for a CPU, and a kernel sized by it ran under 1 ms once the CPU was
    free (a study run beside other work sized its ">= 1 ms" kernels at 0.6-0.8 ms)."""
    ns: dict[str, object] = {}
    exec(textwrap.dedent(WORK_HEADER.split("def kernel")[0].split("_cache = {}")[1]), ns)
    spin = ns["spin"]
    times = []
    for _ in range(5):
        t0 = time.thread_time_ns()
        spin(100_000)  # type: ignore[operator]
        times.append(time.thread_time_ns() - t0)
    return 100_000 / (min(times) / 1e6)


def run_opprof(root: Path, rounds: int, out: Path, slow: dict[str, float]) -> dict[str, object]:
    env = subprocess_env(
        OPPROF_STUDY_OUT=str(out), OPPROF_STUDY_SLOW=json.dumps(slow), PYTHONPATH=str(root)
    )
    cmd = [PYTHON, "-m", "pytest", "-q", *plugin_args(), "opprof", "--opprof"]
    cmd += [f"--opprof-rounds={rounds}"]
    cmd += ["--opprof-warmup=0", "-p", "no:benchmark", "-p", "no:randomly"]
    load = loadavg()
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True)
    if not out.exists():
        raise RuntimeError(f"opprof session wrote no summaries:\n{proc.stdout}\n{proc.stderr}")
    return {"seconds": time.perf_counter() - t0, "load": load, "rc": proc.returncode}


BENCH_FLAGGED = re.compile(r"^\s*(test_w\d+)\S* .*- Field 'mean' has failed", re.M)


def benchmark_cmd(
    root: Path, compare_to: str | None, max_time: float, storage: str = ".bm"
) -> list[str]:
    """The pytest-benchmark session over the ``bench`` flavour of the suite under ``root``:
    saves a run (``compare_to`` None) or compares with ``--benchmark-compare-fail=mean:10%``.
    ``storage``: the folder under ``root`` its saved runs live in."""
    cmd = [PYTHON, "-m", "pytest", "-q", "-p", "no:randomly", "bench"]
    cmd += [f"--benchmark-storage=file://{root}/{storage}"]
    cmd += [f"--benchmark-max-time={max_time}", "--benchmark-disable-gc"]
    if compare_to is None:
        cmd += ["--benchmark-save=base"]
    else:
        cmd += [f"--benchmark-compare={compare_to}", "--benchmark-compare-fail=mean:10%"]
    return cmd


def run_benchmark(
    root: Path, slow: dict[str, float], compare_to: str | None, max_time: float
) -> tuple[set[str], dict[str, object]]:
    env = subprocess_env(OPPROF_STUDY_SLOW=json.dumps(slow), PYTHONPATH=str(root))
    cmd = benchmark_cmd(root, compare_to, max_time)
    load = loadavg()
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True)
    text = proc.stdout + proc.stderr
    if compare_to is not None and "Performance has regressed" not in text and proc.returncode:
        raise RuntimeError(f"pytest-benchmark session failed:\n{text[-3000:]}")
    flagged = set(BENCH_FLAGGED.findall(text))
    return flagged, {"seconds": time.perf_counter() - t0, "load": load, "rc": proc.returncode}


def load_summaries(path: Path) -> dict[str, TestSummary]:
    raw = json.loads(path.read_text())
    return {nodeid: TestSummary.from_json(Fields(data)) for nodeid, data in raw.items()}


def _first(stats: TimeStats, k: int) -> TimeStats:
    return TimeStats.from_samples(stats.samples_ns[:k])


def first_rounds(summary: TestSummary, k: int) -> TestSummary:
    """What a session with ``k`` rounds would have measured: each time's first ``k`` rounds."""
    ops = {
        key: dataclasses.replace(
            op,
            self_cpu_time=_first(op.self_cpu_time, k),
            cpu_time=_first(op.cpu_time, k) if op.cpu_time is not None else None,
        )
        for key, op in summary.ops.items()
    }
    return dataclasses.replace(
        summary,
        rounds=min(k, summary.rounds),
        wall_time=_first(summary.wall_time, k),
        cpu_time=_first(summary.cpu_time, k),
        ops=ops,
        speed_ref=_first(summary.speed_ref, k) if summary.speed_ref is not None else None,
        native_ref=_first(summary.native_ref, k) if summary.native_ref is not None else None,
        # Cut with the rest: with a series longer than the rounds, the verdict would
        # not know which rounds waited for a CPU (gate/waiting.py) and keep them all.
        wait_time=_first(summary.wait_time, k) if summary.wait_time is not None else None,
    )


@dataclasses.dataclass(frozen=True)
class Setting:
    rounds: int | None
    """None: ``--opprof-rounds auto``."""
    tolerance: float
    min_time_us: int
    statistic: str = "median"
    alpha: float = 0.05
    force_time: bool = False
    """Judge times under ``Tolerances.time_min_rounds`` rounds (``--opprof-force-time``)."""
    scaled: bool = True
    """Scale times by the machine-speed references (False: ``--opprof-raw-times``)."""
    refined: bool = False
    """Judge against the baseline as the later baseline sessions' update runs refined it
    (``pooling.py``: a passing run's rounds join the stored ones) instead of the first's."""
    confirm: bool = True
    """With ``auto``: the confirmation rounds of an undecided verdict (False: without)."""
    settle: bool = True
    """With ``auto``: a gate run stops a test's rounds once its verdict is settled
    (``rounds.settled``; False: every test runs ``AUTO_ROUNDS``, as before it did)."""

    @property
    def label(self) -> str:
        return (
            f"rounds={rounds_text(self.rounds)} tol={self.tolerance:.0%} "
            f"floor={self.min_time_us}us "
            f"stat={self.statistic} alpha={self.alpha}"
            + (" force-time" if self.force_time else "")
            + ("" if self.scaled else " raw-times")
            + (" refined-baseline" if self.refined else "")
            + ("" if self.confirm or self.rounds is not None else " no-confirm")
            + ("" if self.settle or self.rounds is not None else " no-settle")
        )

    def tolerances(self) -> Tolerances:
        return dataclasses.replace(
            Tolerances(),
            time=self.tolerance,
            min_time_ns=self.min_time_us * 1000,
            alpha=self.alpha,
            statistic="min" if self.statistic == "min" else "median",
            speed_scaled=self.scaled,
        )


_VIEWS: dict[tuple[int, int | None, int], dict[str, TestSummary]] = {}


def _view(
    session: dict[str, TestSummary], rounds: int | None, floor_ns: int
) -> dict[str, TestSummary]:
    """``session`` as ``rounds`` rounds (None: auto) would have measured it (cached)."""
    key = (id(session), rounds, floor_ns if rounds is None else 0)
    if key not in _VIEWS:
        _VIEWS[key] = {
            n: first_rounds(s, _rounds_of(s, rounds, floor_ns)) for n, s in session.items()
        }
    return _VIEWS[key]


def _rounds_of(summary: TestSummary, rounds: int | None, floor_ns: int) -> int:
    """The rounds a session with ``--opprof-rounds rounds`` runs for this test: the
    plugin's own policy, for a test whose times can be judged (every test here has a
    baseline, or is recording one)."""
    # The first round's work, as the plugin decides: wall time less its wait for a CPU.
    waited = summary.wait_time.samples_ns[0] if summary.wait_time is not None else 0
    first_work_ns = summary.wall_time.samples_ns[0] - waited
    return 1 + more_rounds(rounds, first_work_ns, floor_ns, lambda _rounds: True)


def judge(
    bases: list[dict[str, TestSummary]], now: dict[str, TestSummary], setting: Setting
) -> dict[str, set[str]]:
    """{nodeid: ops blamed (``"wall time"`` for the test-level row)} of tests judged regressed.

    ``bases`` are the baseline sessions in order: the first alone is the baseline, or
    with ``setting.refined`` the entry the later ones' update runs made of it.
    """
    out: dict[str, set[str]] = {}
    base_view = _baseline_view(bases, setting)
    for nodeid, summary in _gated(bases, now, setting).items():
        verdict = _compare(summary, base_view[nodeid], setting)
        if verdict.failed:
            blamed = {r.op for r in verdict.reasons if r.status == "regressed"}
            if verdict.work_time:  # op times of contended rounds explain, as info
                blamed |= {r.op for r in verdict.reasons if r.kind == "slower"}
            blamed |= {m.metric for m in verdict.metrics if m.status == "regressed"}
            out[nodeid] = blamed
    return out


def _gated(
    bases: list[dict[str, TestSummary]], now: dict[str, TestSummary], setting: Setting
) -> dict[str, TestSummary]:
    """Each test of ``now`` that has a baseline, as a gate run under ``setting`` would have
    measured it: its rounds, with ``auto``'s early stop (a pool of the run's tests fed in
    their order, as the plugin's worker feeds it) and confirmation rounds."""
    floor_ns = setting.min_time_us * 1000
    base_view = _baseline_view(bases, setting)
    noise = RoundNoise() if setting.settle else None
    out = {}
    for nodeid, summary in _view(now, setting.rounds, floor_ns).items():
        if nodeid not in base_view:
            continue
        summary = _stopped(summary, now[nodeid], base_view[nodeid], setting, noise)
        if noise is not None:
            noise.add(summary, floor_ns)
        out[nodeid] = summary
    return out


def _stopped(
    summary: TestSummary,
    measured: TestSummary,
    base: TestSummary,
    setting: Setting,
    noise: RoundNoise | None,
) -> TestSummary:
    """``summary`` (a test's view under ``setting``) stopped at the first round count
    whose verdict against ``base`` is settled (``rounds.settled``, asked after each round
    as the worker asks), else with ``auto``'s confirmation rounds (:func:`_confirmed`)."""
    if noise is not None and summary.rounds >= AUTO_ROUNDS:
        min_rounds = setting.tolerances().time_min_rounds
        for k in range(min_rounds, AUTO_ROUNDS):
            early = first_rounds(measured, k)
            if settled(
                setting.rounds,
                k,
                min_rounds,
                functools.partial(_settles, early, base, setting, noise),
            ):
                return early
    return _confirmed(summary, measured, base, setting)


def _settles(summary: TestSummary, base: TestSummary, setting: Setting, noise: RoundNoise) -> bool:
    return noise.settled(_compare_limits(summary, base, setting))


def _baseline_view(bases: list[dict[str, TestSummary]], setting: Setting) -> dict[str, TestSummary]:
    """The baseline ``setting`` judges against: the first session's view, or with
    ``setting.refined`` the entry the later sessions' update runs made of it."""
    if setting.refined:
        return _refined(bases, setting)
    return _view(bases[0], setting.rounds, setting.min_time_us * 1000)


def _confirmed(
    summary: TestSummary, measured: TestSummary, base: TestSummary, setting: Setting
) -> TestSummary:
    """``summary`` (a test's view under ``setting``), or with ``auto``'s confirmation
    rounds when the verdict on it against ``base`` is undecided: the first
    ``AUTO_ROUNDS + CONFIRM_ROUNDS`` rounds of all that were ``measured``."""
    if not setting.confirm or not needs_confirmation(
        setting.rounds, summary.rounds, lambda: _compare(summary, base, setting).time_undecided
    ):
        return summary
    return first_rounds(measured, AUTO_ROUNDS + CONFIRM_ROUNDS)


def confirmed_share(
    bases: list[dict[str, TestSummary]], runs: list[dict[str, TestSummary]], setting: Setting
) -> float:
    """The share of the tests judged in ``runs`` that ``auto`` confirmed with more rounds
    (what its confirmation costs in sessions with nothing changed)."""
    gated = [_gated(bases, run, setting) for run in runs]
    judged = sum(len(g) for g in gated)
    confirmed = sum(s.rounds > AUTO_ROUNDS for g in gated for s in g.values())
    return confirmed / max(1, judged)


def mean_rounds(
    bases: list[dict[str, TestSummary]], runs: list[dict[str, TestSummary]], setting: Setting
) -> float:
    """Rounds a test of ``runs`` ran on average under ``setting``: what a gate run pays."""
    gated = [_gated(bases, run, setting) for run in runs]
    return sum(s.rounds for g in gated for s in g.values()) / max(1, sum(map(len, gated)))


def _entry(summary: TestSummary) -> BaselineEntry:
    """``summary`` as a baseline entry recorded on this machine."""
    return BaselineEntry(summary, _machine(), "")


def _compare(summary: TestSummary, base: TestSummary, setting: Setting) -> Verdict:
    """The plugin's verdict on ``summary`` against ``base`` under ``setting``."""
    return _compare_limits(summary, base, setting)[0]


def _compare_limits(
    summary: TestSummary, base: TestSummary, setting: Setting
) -> tuple[Verdict, tuple[TimeLimit, ...]]:
    """:func:`_compare` and the judged times' limits (``compare_limits``)."""
    return compare_limits(
        summary,
        _entry(base),
        fingerprint=_machine().fingerprint,
        tolerances=setting.tolerances(),
        force_time=setting.force_time,
    )


_REFINED: dict[tuple[tuple[int, ...], Setting], dict[str, TestSummary]] = {}


def _refined(bases: list[dict[str, TestSummary]], setting: Setting) -> dict[str, TestSummary]:
    """The baseline after update runs of each later baseline session, in order: a run whose
    verdict passes joins its rounds to the entry, any other replaces it (the plugin's rule)."""
    key = (tuple(id(b) for b in bases), setting)
    if key in _REFINED:
        return _REFINED[key]
    floor_ns = setting.min_time_us * 1000
    views = [_view(b, setting.rounds, floor_ns) for b in bases]
    out = {}
    for nodeid, entry_summary in views[0].items():
        for later, measured in zip(views[1:], bases[1:], strict=True):
            summary = later.get(nodeid)
            if summary is None:
                continue
            summary = _confirmed(summary, measured[nodeid], entry_summary, setting)
            verdict = _compare(summary, entry_summary, setting)
            if can_pool(summary, _entry(entry_summary), verdict, _machine().fingerprint):
                entry_summary = pool(summary, entry_summary)
            else:
                entry_summary = summary
        out[nodeid] = entry_summary
    _REFINED[key] = out
    return out


def default_setting() -> Setting:
    """The plugin's defaults (plugin/options.py, gate/tolerance.py)."""
    return Setting(
        rounds=options.DEFAULT_ROUNDS,
        tolerance=tolerances.DEFAULT_TIME_TOLERANCE,
        min_time_us=tolerances.DEFAULT_MIN_TIME_NS // 1000,
        statistic=tolerances.DEFAULT_TIME_STATISTIC,
        alpha=Tolerances().alpha,
    )


DEFAULT_LABEL = (
    f"Rows: the plugin's defaults (`--opprof-rounds auto`: {AUTO_ROUNDS} rounds for "
    "a test whose first round takes 1 ms, the time floor, or more; 1 round otherwise, when no "
    f"time of it can be judged; {CONFIRM_ROUNDS} more, and a verdict on all of them, "
    "when the first ones put a time beyond its tolerance), judged against the baseline the "
    "baseline sessions' update runs made (the first records it, a later passing run's "
    "rounds join it: how the README records a baseline, and what a project that updates its "
    'baselines has; rows say "refined") and against the first session alone; the defaults with '
    "`--opprof-rounds` 3, 5, 7 and 9, without the confirmation rounds, and with "
    "`--opprof-raw-times` (times judged as "
    "measured, not scaled by the machine-speed references); then settings that meet the goal "
    "(<= 1% false, >= 95% detected) and the best of each number of rounds, when they are "
    "not rows already (`force-time`: times judged under 3 rounds with `--opprof-force-time`)."
)


def pick_rows(result: dict[str, object]) -> list[tuple[str, dict[str, object]]]:
    """(label, row) pairs for the published table."""
    rows = result["opprof"]
    assert isinstance(rows, list)
    default = default_setting().label
    refined = dataclasses.replace(default_setting(), refined=True).label
    sessions = result.get("baseline_sessions", 1)
    out = [
        (f"**defaults, baseline recorded by {sessions} update runs** (the README's recording)", r)
        for r in rows
        if r["label"] == refined
    ]
    out += [
        (f"defaults, baseline of one session: {r['label']}", r)
        for r in rows
        if r["label"] == default
    ]
    raw_default = dataclasses.replace(default_setting(), scaled=False).label
    out += [("defaults, `--opprof-raw-times`", r) for r in rows if r["label"] == raw_default]
    for refined_too, what in ((False, ""), (True, ", refined baseline")):
        label = dataclasses.replace(default_setting(), confirm=False, refined=refined_too).label
        out += [
            (f"defaults without the confirmation rounds{what}", r)
            for r in rows
            if r["label"] == label
        ]
    for rounds in (3, 5, 7, 9):
        label = dataclasses.replace(default_setting(), rounds=rounds).label
        out += [(f"defaults, `--opprof-rounds {rounds}`", r) for r in rows if r["label"] == label]
        label = dataclasses.replace(default_setting(), rounds=rounds, refined=True).label
        out += [
            (f"defaults, `--opprof-rounds {rounds}`, refined baseline", r)
            for r in rows
            if r["label"] == label
        ]
        raw = dataclasses.replace(default_setting(), rounds=rounds, scaled=False).label
        out += [
            (f"defaults, `--opprof-rounds {rounds} --opprof-raw-times`", r)
            for r in rows
            if r["label"] == raw
        ]
    meets = [r for r in rows if r["false_rate"] <= 0.01 and r["detection_rate"] >= 0.95]
    meets.sort(key=lambda r: (r["false_rate"], -r["detection_rate"], r["setting"]["rounds"] or 0))
    out += [(f"meets goal: {r['label']}", r) for r in meets[:3]]
    for rounds in sorted({r["setting"]["rounds"] for r in rows} - {None}):
        mine = [r for r in rows if r["setting"]["rounds"] == rounds]
        best = min(mine, key=lambda r: r["false_rate"] + max(0.0, 0.95 - r["detection_rate"]))
        out.append((f"best at {rounds} round(s): {best['label']}", best))
    seen, unique = set(), []
    for label, r in out:
        if r["label"] not in seen:
            seen.add(r["label"])
            unique.append((label, r))
    return unique


@functools.cache
def _machine() -> MachineInfo:
    return machine_info()


def settings_grid(max_rounds: int) -> list[Setting]:
    grid = [default_setting(), dataclasses.replace(default_setting(), scaled=False)]
    grid += [
        dataclasses.replace(default_setting(), rounds=rounds, refined=True)
        for rounds in (None, 3, 5, 7, 9)
        if rounds is None or rounds <= max_rounds
    ]
    grid += [
        dataclasses.replace(default_setting(), confirm=False, refined=refined)
        for refined in (False, True)
    ]
    grid += [
        dataclasses.replace(default_setting(), settle=False, refined=refined)
        for refined in (False, True)
    ]
    for rounds in sorted({1, 3, 5, 7, max_rounds}):
        if rounds > max_rounds:
            continue
        for tolerance in (0.1, 0.15, 0.2):
            for floor in (50, 200, 1000):
                for statistic in ("median", "min"):
                    # The significance test needs Tolerances.min_rounds on both sides.
                    alphas = sorted({0.05, 0.3, 1.0, Tolerances().alpha})
                    for alpha in (
                        alphas if rounds >= Tolerances().min_rounds else (Tolerances().alpha,)
                    ):
                        forced = rounds < Tolerances().time_min_rounds
                        for scaled in (True, False):
                            setting = Setting(
                                rounds, tolerance, floor, statistic, alpha, forced, scaled
                            )
                            if setting not in grid:
                                grid.append(setting)
    return grid


def name_of(nodeid: str) -> str:
    return nodeid.rsplit("::", 1)[-1]


def run_sessions(args: argparse.Namespace, data: Path) -> None:
    """Generate the suite, run every session, keep the raw figures under ``data``."""
    rng = random.Random(args.seed)
    data.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="opprof-verdict-") as tmp:
        root = Path(tmp)
        ipm = iterations_per_ms()
        kernels = generate(root, args.tests, ipm, args.seed)
        slowed = sorted(rng.sample(sorted(kernels), len(kernels) // 2))
        slow = {name: 1.0 + args.slowdown for name in slowed}
        log: list[dict[str, object]] = []

        def opprof_session(label: str, spec: dict[str, float]) -> None:
            info = run_opprof(root, args.rounds, data / f"opprof-{label}.json", spec)
            log.append({"tool": "opprof", "session": label, **info})
            print(f"  opprof {label}: {info['seconds']:.1f}s load {info['load']:.2f}", flush=True)

        def bench_session(label: str, spec: dict[str, float], compare_to: str | None) -> None:
            flagged, info = run_benchmark(root, spec, compare_to, args.benchmark_max_time)
            log.append({"tool": "pytest-benchmark", "session": label, **info})
            (data / f"benchmark-{label}.json").write_text(json.dumps(sorted(flagged)))
            print(f"  pytest-benchmark {label}: {info['seconds']:.1f}s load {info['load']:.2f}")

        opprof_session("baseline", {})
        for i in range(1, args.baseline_sessions):
            opprof_session(f"baseline-{i}", {})
        for i in range(args.sessions):
            opprof_session(f"unchanged-{i}", {})
        opprof_session("slowed", slow)
        if args.benchmark:
            bench_session("baseline", {}, None)
            for i in range(args.sessions):
                bench_session(f"unchanged-{i}", {}, "0001")
            bench_session("slowed", slow, "0001")
    meta = {
        "tests": args.tests,
        "tests_with_kernel": len(kernels),
        "slowed": slowed,
        "slowdown": args.slowdown,
        "sessions": args.sessions,
        "baseline_sessions": args.baseline_sessions,
        "rounds_measured": args.rounds,
        "iterations_per_ms": ipm,
        "benchmark": args.benchmark,
        "benchmark_max_time_s": args.benchmark_max_time,
        "session_log": log,
    }
    (data / "meta.json").write_text(json.dumps(meta, indent=1))


Sessions = list[dict[str, TestSummary]]


def load_sessions(data: Path) -> tuple[dict[str, Any], Sessions, Sessions, dict[str, TestSummary]]:
    """(meta, baseline sessions, unchanged sessions, slowed session) kept under ``data``."""
    meta = json.loads((data / "meta.json").read_text())
    bases = [load_summaries(data / "opprof-baseline.json")]
    bases += [
        load_summaries(data / f"opprof-baseline-{i}.json")
        for i in range(1, meta.get("baseline_sessions", 1))
    ]
    unchanged = [
        load_summaries(data / f"opprof-unchanged-{i}.json") for i in range(meta["sessions"])
    ]
    return meta, bases, unchanged, load_summaries(data / "opprof-slowed.json")


def analyze(data: Path, grid: Iterable[Setting] | None = None) -> dict[str, object]:
    """Score every setting of ``grid`` on the sessions kept under ``data``."""
    meta, bases, unchanged, slowed_run = load_sessions(data)
    slowed: list[str] = meta["slowed"]
    base = bases[0]
    n_tests = len(base)
    rows = []
    for setting in grid or settings_grid(meta["rounds_measured"]):
        if setting.refined and len(bases) < 2:
            continue
        false = sum(len(judge(bases, run, setting)) for run in unchanged)
        judged = judge(bases, slowed_run, setting)
        detected = sum(1 for name in slowed if KERNEL in judged.get(_nodeid(base, name), set()))
        rows.append(
            {
                "setting": dataclasses.asdict(setting),
                "label": setting.label,
                "false_regressions": false,
                "judged": n_tests * len(unchanged),
                "false_rate": false / max(1, n_tests * len(unchanged)),
                "detected": detected,
                "slowed": len(slowed),
                "detection_rate": detected / max(1, len(slowed)),
                # Tests flagged in the slowed session that were not slowed.
                "false_in_slowed_session": sum(1 for nid in judged if name_of(nid) not in slowed),
                # What auto's gate runs cost, in rounds a test (fixed settings: their own).
                "mean_rounds": mean_rounds(bases, unchanged, setting)
                if setting.rounds is None
                else None,
            }
        )
    result: dict[str, object] = {**meta, "slowed": len(slowed), "opprof": rows}
    refined = dataclasses.replace(default_setting(), refined=len(bases) > 1)
    result["confirmed_share"] = confirmed_share(bases, unchanged, refined)
    if meta["benchmark"]:
        flagged = [
            set(json.loads((data / f"benchmark-unchanged-{i}.json").read_text()))
            for i in range(meta["sessions"])
        ]
        slow_flagged = set(json.loads((data / "benchmark-slowed.json").read_text()))
        false = sum(len(f) for f in flagged)
        result["pytest_benchmark"] = {
            "check": "--benchmark-compare-fail=mean:10%",
            "false_regressions": false,
            "judged": n_tests * len(flagged),
            "false_rate": false / max(1, n_tests * len(flagged)),
            "detected": len(slow_flagged & set(slowed)),
            "detection_rate": len(slow_flagged & set(slowed)) / max(1, len(slowed)),
            "false_in_slowed_session": len(slow_flagged - set(slowed)),
        }
    return result


def _nodeid(summaries: dict[str, TestSummary], name: str) -> str:
    return next(nid for nid in summaries if name_of(nid) == name)


def print_table(result: dict[str, object], only: Iterable[str] | None = None) -> None:
    rows = result["opprof"]
    assert isinstance(rows, list)
    log = result["session_log"]
    assert isinstance(log, list)
    loads = [float(s["load"]) for s in log]
    print(
        f"1-min load average at each session's start: {min(loads):.2f}-{max(loads):.2f} "
        f"on {os.cpu_count()} cores (other processes share this machine)"
    )
    print(
        f"auto confirmed {result['confirmed_share']:.1%} of the tests of the unchanged sessions "
        f"with {CONFIRM_ROUNDS} more rounds"
    )
    print(f"{'setting':58} {'false':>12} {'detected':>12} {'rounds':>7}")
    for row in rows:
        if only is not None and row["label"] not in only:
            continue
        rounds = row.get("mean_rounds")
        print(
            f"{row['label']:58} {row['false_regressions']:4d}/{row['judged']:<4d}"
            f"({row['false_rate']:5.1%}) {row['detected']:3d}/{row['slowed']:<3d}"
            f"({row['detection_rate']:6.1%})" + (f" {rounds:7.2f}" if rounds is not None else "")
        )
    bench = result.get("pytest_benchmark")
    if isinstance(bench, dict):
        label = "pytest-benchmark mean:10%"
        print(
            f"{label:58} {bench['false_regressions']:4d}/{bench['judged']:<4d}"
            f"({bench['false_rate']:5.1%}) {bench['detected']:3d}/{result['slowed']:<3d}"
            f"({bench['detection_rate']:6.1%})"
        )


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    p.add_argument("--tests", type=int, default=200)
    p.add_argument("--sessions", type=int, default=5, help="unchanged sessions")
    p.add_argument(
        "--baseline-sessions",
        type=int,
        default=3,
        help="baseline sessions: the first records it, each later one is an update run",
    )
    p.add_argument(
        "--rounds",
        type=int,
        default=AUTO_ROUNDS + CONFIRM_ROUNDS,
        help="rounds measured per session (auto's confirmation rounds need "
        f"{AUTO_ROUNDS + CONFIRM_ROUNDS})",
    )
    p.add_argument("--slowdown", type=float, default=0.3)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--benchmark-max-time", type=float, default=0.05)
    p.add_argument("--no-benchmark", dest="benchmark", action="store_false")
    p.add_argument("--quick", action="store_true", help="40 tests, 2 unchanged sessions")
    p.add_argument("--json", type=Path, help="write the results here")
    p.add_argument(
        "--data",
        type=Path,
        metavar="DIR",
        help="run the sessions and keep their raw figures in DIR (for a later --analyze DIR)",
    )
    p.add_argument(
        "--analyze",
        type=Path,
        metavar="DIR",
        help="run no session: re-score the figures that an earlier run with --data DIR kept",
    )
    return p


def main() -> None:
    args = parser().parse_args()
    if args.quick:
        args.tests, args.sessions = min(args.tests, 40), min(args.sessions, 2)
    if args.analyze:
        result = analyze(args.analyze)
    elif args.data:
        run_sessions(args, args.data)
        result = analyze(args.data)
    else:
        with tempfile.TemporaryDirectory(prefix="opprof-verdict-data-") as tmp:
            run_sessions(args, Path(tmp))
            result = analyze(Path(tmp))
    print_table(result)
    if args.json:
        args.json.write_text(json.dumps(result, indent=1, sort_keys=True))


if __name__ == "__main__":
    main()
