"""A synthetic history, written directly as run files (no pytest): size, load+detect time,
false change points.

``--runs`` runs of a ``--tests``-test suite with ``--ops`` ops a test and ``--rounds``
rounds, on one machine, one commit a run.  Times are lognormal with a 3% spread per
round, and one run in twenty is "busy" (every time of it 5-40% slower, as a bursty
neighbour makes them); a few series carry injected steps (+5%, +8%, +12% in an op's
self time, a FLOPs change in another test) so the detector is also seen to find them.
Every other change point found is a false one.

    python bench/history_synthetic.py [--runs 1000 --tests 2000] [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np
from _common import REPO  # noqa: F401  (the checkout importable)

from pytest_opprof.gate.machine import machine_info
from pytest_opprof.history.series import ChangePoint, find_changes
from pytest_opprof.history.store import KIND, SCHEMA, encode_arrays, scan

OP_NAMES = [f"numpy.op{i}" for i in range(40)]
INJECTED = {  # (test, op slot) -> (run fraction, factor); op None: a FLOPs step of the test
    (11, 2): (0.30, 1.05),
    (22, 0): (0.50, 1.08),
    (33, 5): (0.70, 1.12),
    (44, None): (0.40, 2.0),
}


def write_history(directory: Path, runs: int, tests: int, ops: int, rounds: int) -> int:
    """Write the runs; returns the bytes written."""
    rng = np.random.default_rng(1)
    machine = machine_info().to_json()
    names = [f"tests/test_mod{t // 20}.py::test_case_{t}" for t in range(tests)]
    op_test = np.repeat(np.arange(tests, dtype=np.uint32), ops)
    op_slot = np.tile(np.arange(ops), tests)
    op_name = ((op_slot + op_test) % len(OP_NAMES)).astype(np.uint32)
    base_op = rng.uniform(10e3, 2e6, size=tests * ops)  # 10 us .. 2 ms of self time
    base_wall = np.bincount(op_test, base_op) * 1.3
    flops = rng.integers(0, 10**9, size=tests * ops) * (op_slot % 2)
    counts = rng.integers(1, 200, size=tests * ops)
    total = 0
    for r in range(runs):
        factor_op = np.ones(tests * ops)
        test_flops = np.bincount(op_test, flops).astype(np.int64)
        for (t, slot), (at, f) in INJECTED.items():
            if r >= int(at * runs):
                if slot is None:
                    test_flops[t] = int(test_flops[t] * f)
                else:
                    factor_op[t * ops + slot] *= f
        busy = 1 + (rng.uniform(0.05, 0.4) if rng.random() < 0.05 else 0.0)
        noise = rng.lognormal(0, 0.03, size=(tests * ops, rounds))
        op_self = (base_op * factor_op * busy)[:, None] * noise
        wall = base_wall[:, None] * busy * rng.lognormal(0, 0.03, size=(tests, rounds))
        test_exact = np.stack(
            [
                test_flops,
                np.bincount(op_test, counts).astype(np.int64),
                np.full(tests, 1 << 20),
                np.zeros(tests, dtype=np.int64),
            ],
            axis=1,
        )
        meta = {
            "kind": KIND,
            "schema": SCHEMA,
            "run_at": f"2026-01-01T00:00:{r:04d}Z",
            "commit": {
                "sha": f"{r:040x}",
                "parent": f"{max(r - 1, 0):040x}",
                "branch": "main",
                "time": f"2026-{1 + r // 28 // 24 % 12:02d}-{1 + r // 24 % 28:02d}T"
                f"{r % 24:02d}:00:00+00:00",
                "dirty": False,
            },
            "machine": machine,
            "tests": names,
            "ops": OP_NAMES,
        }
        data = encode_arrays(
            {
                "meta": np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8),
                "rounds": np.full(tests, rounds, dtype=np.uint16),
                "wall_ns": wall.astype(np.float32).ravel(),
                "wall_med_ns": np.median(wall, axis=1).astype(np.float32),
                "cpu_ns": np.median(wall, axis=1).astype(np.float32),
                "test_exact": test_exact,
                "test_varied": np.zeros(tests, dtype=np.uint8),
                "op_test": op_test,
                "op_name": op_name,
                "op_exact": np.stack([counts, flops, np.zeros_like(counts)], axis=1),
                "op_varied": np.zeros(tests * ops, dtype=np.uint8),
                "op_self_ns": op_self.astype(np.float32).ravel(),
                "op_med_ns": np.median(op_self, axis=1).astype(np.float32),
            }
        )
        (directory / f"run-{r:05d}.npz").write_bytes(data)
        total += len(data)
    return total


def main() -> None:
    p = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    p.add_argument("--runs", type=int, default=1000)
    p.add_argument("--tests", type=int, default=2000)
    p.add_argument("--ops", type=int, default=8)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--keep", type=Path, help="write (or reuse) the history here")
    args = p.parse_args()
    directory = args.keep or Path(tempfile.mkdtemp(prefix="opprof-history-"))
    try:
        directory.mkdir(parents=True, exist_ok=True)
        if not any(directory.iterdir()):
            started = time.perf_counter()
            size = write_history(directory, args.runs, args.tests, args.ops, args.rounds)
            print(f"wrote {args.runs} runs in {time.perf_counter() - started:.0f} s")
        else:
            size = sum(f.stat().st_size for f in directory.iterdir())
        started, cpu = time.perf_counter(), time.process_time()
        history = scan(directory)
        scanned = time.perf_counter() - started
        found = find_changes(history)
        elapsed = time.perf_counter() - started
        cpu = time.process_time() - cpu
        injected = {(f"tests/test_mod{t // 20}.py::test_case_{t}", slot) for (t, slot) in INJECTED}
        hits: list[ChangePoint] = []
        false: list[ChangePoint] = []
        for c in found.changes:
            slot = None
            if c.op is not None:
                slot = (OP_NAMES.index(c.op) - int(c.test.rsplit("_", 1)[1])) % len(OP_NAMES)
            key = (c.test, None if c.exact and c.op is None else slot)
            (hits if key in injected else false).append(c)
        for why in found.skipped[:3]:
            print(f"skipped {why}")
        per_test_run = size / (args.runs * args.tests)
        print(
            f"{args.runs} runs x {args.tests} tests x {args.ops} ops x {args.rounds} rounds: "
            f"{size / 2**20:.0f} MiB, {per_test_run:.0f} bytes a test a run"
        )
        print(
            f"load + detect: {elapsed:.1f} s wall, {cpu:.1f} s CPU (reading descriptions "
            f"{scanned:.1f} s); {found.series:,} series; load average {os.getloadavg()[0]:.1f}"
        )
        for c in hits:
            print(
                f"  found injected: {c.test} {c.op} {c.figure} {c.step.change:+.1%} at run "
                f"{int(c.run.path.stem.split('-')[1])}"
            )
        time_series = found.series
        print(
            f"false change points: {len(false)} in {time_series:,} series "
            f"({1000 * len(false) / max(time_series, 1):.2f} per 1,000)"
        )
        for c in false[:10]:
            print(f"  false: {c.test} {c.op} {c.figure} {c.step.change:+.1%}")
    finally:
        if args.keep is None:
            shutil.rmtree(directory, ignore_errors=True)


if __name__ == "__main__":
    main()
