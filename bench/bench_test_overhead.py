"""Per-test and per-allocation overhead of the plugin.

1. Allocations: 10,000 ``np.ones(10)`` (one numpy data allocation and one free
   each) plain and under ``profile()`` as the plugin starts it, memory only
   (``capture=["none"]``) and with numpy capture; the *total* added ns per
   ``np.ones`` includes start, stop, drain and ``key_averages``.  Variants run
   interleaved, medians over repeats.
2. Per test: a generated module of ``--tests`` trivial tests run by a fresh
   ``python -m pytest`` plain, with ``--opprof --opprof-rounds 1`` and with the
   defaults, interleaved per repeat; added ms per test against plain, in wall time
   and in the child's CPU time (steadier on a shared machine).  The speed
   references' own share is timed in-process and reported beside it, and a
   variant stubs them out (a conftest.py replaces ``speed_probe.references_ns``):
   the cost outside them.  Last, the same stubbed variant as the slope from a
   1-test to a 500-test session: the per-test cost without the session's fixed
   cost (imports, calibration) spread over the tests.
   ``--trees A B`` runs each variant with ``PYTHONPATH=A`` and ``=B``
   interleaved (before/after checkouts with their extensions built).

    python bench/bench_test_overhead.py [--repeats 5] [--tests 1000] [--only alloc|tests]
                                        [--trees BEFORE AFTER]
"""

from __future__ import annotations

import argparse
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from _common import fmt_spread, loadavg, plugin_args, spread, subprocess_env

N_ALLOC = 10_000


def _loop(n: int) -> None:
    ones = np.ones
    for _ in range(n):
        ones(10)


def _alloc_variant(kind: str, **profile_kwargs: object) -> float:
    """ns for the loop under one variant (plain: no profile), the profile's start, stop
    and ``key_averages`` included.  The hooks are installed outside the timing, as the
    plugin holds them for its whole session."""
    from pytest_opprof.capture import sources
    from pytest_opprof.profiler import profile

    if kind == "plain":
        t0 = time.perf_counter_ns()
        _loop(N_ALLOC)
        return float(time.perf_counter_ns() - t0)
    held = [s for s in map(sources.get, ("numpy", "memory")) if s is not None]
    for source in held:
        source.acquire()
    try:
        t0 = time.perf_counter_ns()
        prof = profile(record_shapes=True, profile_memory=True, with_flops=True, **profile_kwargs)  # type: ignore[arg-type]
        prof.start()
        _loop(N_ALLOC)
        prof.stop()
        prof.key_averages()
        return float(time.perf_counter_ns() - t0)
    finally:
        for source in reversed(held):
            source.release()


def bench_alloc(repeats: int) -> None:
    import inspect

    from pytest_opprof.profiler import profile

    # The plugin's setting; a checkout from before it had events only.
    summed = "memory_events" in inspect.signature(profile).parameters
    kwargs: dict[str, object] = {"memory_events": False} if summed else {}
    variants: dict[str, dict[str, object]] = {
        "plain": {},
        "memory only": {"capture": ["none"], **kwargs},
        "numpy + memory": {"capture": ["numpy"], **kwargs},
    }
    if kwargs:
        variants["numpy + memory, per-allocation events"] = {
            "capture": ["numpy"],
            "memory_events": True,
        }
    for name, kw in variants.items():  # warm: hooks, calibration, first-use allocations
        _alloc_variant(name if name == "plain" else "p", **kw)
    times: dict[str, list[float]] = {k: [] for k in variants}
    for _ in range(repeats):
        for name, kw in variants.items():
            times[name].append(_alloc_variant(name if name == "plain" else "p", **kw))
    plain = statistics.median(times["plain"])
    print(f"{N_ALLOC} np.ones(10), {repeats} interleaved repeats; load {loadavg():.1f}")
    print(f"  {'variant':40s} {'ns/np.ones':>11s} {'+ns/np.ones':>12s}")
    for name, t in times.items():
        per = statistics.median(t) / N_ALLOC
        print(f"  {name:40s} {per:11.1f} {per - plain / N_ALLOC:+12.1f}")


NO_REFS_CONFTEST = """
import os

if os.environ.get("OPPROF_BENCH_NO_REFS"):
    # The variant that measures the cost outside the speed references: they answer at once.
    from pytest_opprof.capture import speed_probe

    speed_probe.references_ns = lambda: (1, 1)
"""


def _write_suite(tmp: Path, n: int) -> Path:
    body = "".join(f"def test_{i}():\n    assert {i} >= 0\n\n" for i in range(n))
    (tmp / "test_trivial.py").write_text(body)
    (tmp / "pytest.ini").write_text("[pytest]\n")
    (tmp / "conftest.py").write_text(NO_REFS_CONFTEST)
    return tmp


def _run(tmp: Path, extra: list[str], tree: str | None) -> tuple[float, float]:
    """(wall s, CPU s of the child) of one pytest run; ``tree``: a checkout to import
    pytest_opprof from instead of this one (a before/after comparison)."""
    env = subprocess_env()
    if "no-refs" in extra:
        extra = [a for a in extra if a != "no-refs"]
        env["OPPROF_BENCH_NO_REFS"] = "1"
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *plugin_args(), *extra]
    if tree is not None:
        env["PYTHONPATH"] = tree
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    done = subprocess.run(cmd, cwd=tmp, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"{cmd} failed:\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def _speed_refs_ms(rounds: int = 200) -> float:
    from pytest_opprof.capture import speed_probe

    speed_probe.references_ns()
    t0 = time.perf_counter_ns()
    for _ in range(rounds):
        speed_probe.references_ns()
    return (time.perf_counter_ns() - t0) / rounds / 1e6


def bench_tests(repeats: int, n: int, trees: list[str]) -> None:
    variants = {
        "plain": [],
        "--opprof --opprof-rounds 1": ["--opprof", "--opprof-rounds", "1"],
        "the same, speed refs stubbed": ["--opprof", "--opprof-rounds", "1", "no-refs"],
        "--opprof (defaults)": ["--opprof"],
    }
    checkouts: list[str | None] = [*trees] or [None]
    runs = [(tree, name) for tree in checkouts for name in variants]
    times: dict[tuple[str | None, str], list[tuple[float, float]]] = {k: [] for k in runs}
    with tempfile.TemporaryDirectory() as d:
        tmp = _write_suite(Path(d), n)
        for _ in range(repeats):
            for tree, name in runs:
                times[tree, name].append(_run(tmp, variants[name], tree))
    refs = _speed_refs_ms()
    print(f"{n} trivial tests, {repeats} interleaved repeats; load {loadavg():.1f}")
    print(f"speed references (2 per round, in-process): {2 * refs:.3f} ms per round")
    for tree, name in runs:
        t = times[tree, name]
        plain = times[tree, "plain"]
        added_wall = [(a[0] - b[0]) * 1000 / n for a, b in zip(t, plain, strict=True)]
        added_cpu = [(a[1] - b[1]) * 1000 / n for a, b in zip(t, plain, strict=True)]
        walls = spread([w for w, _ in t])
        print(
            f"  {tree or 'this checkout'}: {name:28s} wall s {fmt_spread(walls, 2)}"
            f"  added ms/test: wall {fmt_spread(spread(added_wall), 3)},"
            f" CPU {fmt_spread(spread(added_cpu), 3)}"
        )


def bench_slope(repeats: int, n: int, trees: list[str]) -> None:
    """Added child CPU per test as the slope from a 1-test to an n-test session (speed
    references stubbed): the per-test cost without the session's fixed cost (imports,
    calibration), which a plain division by n spreads over the tests."""
    opprof = ["--opprof", "--opprof-rounds", "1", "no-refs"]
    checkouts: list[str | None] = [*trees] or [None]
    keys = [(tree, size, o) for tree in checkouts for size in (1, n) for o in (False, True)]
    cpu: dict[tuple[str | None, int, bool], list[float]] = {k: [] for k in keys}
    with tempfile.TemporaryDirectory() as d1, tempfile.TemporaryDirectory() as dn:
        dirs = {1: _write_suite(Path(d1), 1), n: _write_suite(Path(dn), n)}
        for _ in range(repeats):
            for tree, size, o in keys:
                cpu[tree, size, o].append(_run(dirs[size], opprof if o else [], tree)[1])
    print(f"slope 1 -> {n} tests, refs stubbed, {repeats} repeats; load {loadavg():.1f}")
    for tree in checkouts:
        m = {k[1:]: statistics.median(v) for k, v in cpu.items() if k[0] == tree}
        fixed = m[1, True] - m[1, False]
        per_test = ((m[n, True] - m[n, False]) - fixed) / (n - 1)
        print(
            f"  {tree or 'this checkout'}: session fixed CPU added {fixed * 1000:.0f} ms, "
            f"per test {per_test * 1000:.3f} ms"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--tests", type=int, default=1000)
    parser.add_argument("--only", choices=["alloc", "tests"])
    parser.add_argument(
        "--trees", nargs="+", default=[], help="checkouts to compare (PYTHONPATH of each run)"
    )
    args = parser.parse_args()
    if args.only != "tests":
        bench_alloc(max(args.repeats, 15))
    if args.only != "alloc":
        bench_tests(args.repeats, args.tests, args.trees)
        bench_slope(max(args.repeats, 4), min(args.tests, 500), args.trees)


if __name__ == "__main__":
    main()
