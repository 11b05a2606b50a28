"""The HTML report at scale: a synthetic JSON report of 20,000 tests, rendered and opened.

    python bench/bench_html_report.py [--tests 20000] [--json OUT.json] [--keep DIR]

The JSON report is synthesised in the schema ``--opprof-report`` writes (numpy's own
suite is ~20,000 tests): 1% regressed, 1% improved, 2% new, 5% with times not
judged, 100 marked tests, 8-40 ops a test, and a flame tree of 60-300 nodes for
every test the plugin keeps one for (changed or marked, at most ``MAX_FLAMES``).
It is rendered with ``render_html`` and opened in headless Chromium (``_browser``);
the goal is a page under 20 MB that is drawn within 3 s.  Also timed: sorting the
whole table by wall time, and filtering it by a text.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _browser import Browser, find_browser
from _common import machine_line, now_utc

from pytest_opprof.gate.results import MAX_FLAMES, REPORT_KIND, REPORT_SCHEMA, STATUSES
from pytest_opprof.render.html import render_html

OPS = [
    "numpy.add", "numpy.multiply", "numpy.matmul", "numpy.dot", "numpy.einsum",
    "numpy.linalg.solve", "numpy.linalg.svd", "numpy.add.reduce", "numpy.ndarray.sum",
    "numpy.concatenate", "numpy.array", "numpy.asarray", "numpy.zeros", "numpy.empty",
    "numpy.subtract", "numpy.divide", "numpy.sqrt", "numpy.exp", "numpy.log", "numpy.sort",
    "numpy.argsort", "numpy.where", "numpy.isfinite", "numpy.all", "numpy.any",
    "numpy.ndarray.astype", "numpy.ndarray.copy", "numpy.fft.fft", "numpy.convolve",
    "numpy.linalg.norm", "numpy.cumsum", "numpy.maximum", "numpy.minimum", "numpy.equal",
]  # fmt: skip


def _time(ns: float, rng: random.Random) -> dict[str, Any]:
    samples = sorted(max(1, round(ns * rng.uniform(0.95, 1.1))) for _ in range(7))
    median = samples[3]
    return {
        "mad_ns": round(median * 0.02),
        "max_ns": samples[-1],
        "mean_ns": round(sum(samples) / 7),
        "median_ns": median,
        "min_ns": samples[0],
        "samples_ns": samples,
        "stdev_ns": round(median * 0.03),
    }


def _flame(rng: random.Random, wall_ns: int, nodes: int) -> dict[str, Any]:
    names = [f"scope {i}" for i in range(6)] + OPS
    out: list[list[int]] = []
    widths: list[int] = []
    room: list[int] = []
    for i in range(nodes):
        open_parents = [j for j in range(len(out)) if room[j] > 1000 and out[j][2] == 0]
        parent = rng.choice(open_parents) if open_parents and i > 3 else -1
        budget = room[parent] if parent >= 0 else max(1, wall_ns // 4)
        total = max(1, int(budget * rng.uniform(0.05, 0.5)))
        if parent >= 0:
            room[parent] -= total
        kind = 0 if i < 6 or rng.random() < 0.15 else 1
        name = rng.randrange(6) if kind == 0 else 6 + rng.randrange(len(OPS))
        out.append([parent, name, kind, total, total // 3, rng.randint(1, 500)])
        widths.append(total)
        room.append(total)
    order = sorted(range(nodes), key=lambda k: (_depth(out, k), k))
    index = {old: new for new, old in enumerate(order)}
    nodes_json = [[index[out[k][0]] if out[k][0] >= 0 else -1, *out[k][1:]] for k in order]
    return {"wall_ns": wall_ns, "names": names, "nodes": nodes_json, "omitted": 0}


def _depth(nodes: list[list[int]], k: int) -> int:
    d = 0
    while nodes[k][0] >= 0:
        k, d = nodes[k][0], d + 1
    return d


def synthetic_report(n_tests: int, seed: int = 19) -> dict[str, Any]:
    """A JSON report dict of ``n_tests`` tests, shaped like ``build_report``'s."""
    rng = random.Random(seed)
    tests: dict[str, Any] = {}
    totals = dict.fromkeys(STATUSES, 0)
    flames = 0
    for i in range(n_tests):
        module, klass = f"numpy/_core/tests/test_mod{i % 97}.py", f"TestClass{i % 13}"
        nodeid = f"{module}::{klass}::test_case_{i}[float64-{i % 7}]"
        roll = rng.random()
        status = (
            "regressed"
            if roll < 0.01
            else "improved"
            if roll < 0.02
            else "new"
            if roll < 0.04
            else "pass"
        )
        totals[status] += 1
        wall = rng.lognormvariate(12, 1.5)
        change = {"regressed": 0.4, "improved": -0.3}.get(status, rng.uniform(-0.08, 0.08))
        ops = {}
        for name in rng.sample(OPS, rng.randint(8, min(40, len(OPS)))):
            self_ns = wall * rng.uniform(0.001, 0.1)
            ops[name] = {
                "count": rng.randint(1, 300),
                "cpu_time": _time(self_ns * 1.2, rng),
                "flops": rng.choice([0, rng.randint(1, 10**9)]),
                "memory_bytes": rng.randint(0, 10**7),
                "self_cpu_time": _time(self_ns, rng),
                "self_memory_bytes": rng.randint(0, 10**7),
            }
        baseline = None if status == "new" else wall / (1 + change)
        metrics = [
            {"metric": m, "unit": u, "baseline": b, "now": v, "change": c, "tolerance": t,
             "status": s, "note": ""}
            for m, u, b, v, c, t, s in (
                ("wall time", "ns", baseline, wall, change, 0.15,
                 status if status in ("regressed", "improved") else "pass"),
                ("cpu time", "ns", baseline, wall * 0.98, change, None, "info"),
                ("flops", "flops", 10**6, 10**6, 0.0, 0.0, "pass"),
                ("op count", "ops", 120, 120, 0.0, None, "info"),
                ("peak memory", "bytes", 2**20, 2**20, 0.0, 0.1, "pass"),
                ("allocated memory", "bytes", 2**21, 2**21, 0.0, 0.1, "pass"),
                ("allocations", "allocations", 40, 40, 0.0, 0.1, "pass"),
                ("leaked memory", "bytes", 0, 0, None, 0.1, "pass"),
                ("op time share", "share", 0.6, 0.61, 0.016, None, "info"),
            )
        ] if baseline is not None else []  # fmt: skip
        reasons = [
            {"op": "numpy.matmul", "kind": "slower", "unit": "ns", "baseline": wall * 0.2,
             "now": wall * 0.5, "change": 1.5, "status": status, "impact": 0.3}
        ] if status in ("regressed", "improved") else []  # fmt: skip
        busy = rng.random() < 0.05
        test: dict[str, Any] = {
            "status": status,
            "baseline_file": None if status == "new" else f"baselines/test_mod{i % 97}.json",
            "rounds": 7,
            "summary": {
                "wall_time": _time(wall, rng),
                "cpu_time": _time(wall * 0.98, rng),
                "op_count": 120,
                "flops": 10**6,
                "op_time_share": round(rng.uniform(0.2, 0.95), 3),
                "memory": {
                    "allocated_bytes": 2**21,
                    "allocations": 40,
                    "leaked_bytes": 0,
                    "peak_bytes": rng.randint(2**10, 2**28),
                },
            },
            "ops": ops,
            "verdict": {
                "status": status,
                "time_judged": not busy,
                "time_not_judged": "the machine was busy (synthetic)" if busy else None,
                "time_judged_on": None if busy else "wall time",
                "baseline_recorded_at": None if status == "new" else "2026-11-20T10:00:00Z",
                "speed_change": round(rng.uniform(-0.02, 0.02), 4),
                "metrics": metrics,
                "reasons": reasons,
                "notes": [],
                "varying": [],
            },
        }
        marked = i % 200 == 0
        if marked:
            test["marked"] = True
        if (marked or status in ("regressed", "improved")) and flames < MAX_FLAMES:
            test["flame"] = _flame(rng, int(wall), rng.randint(60, 300))
            flames += 1
        tests[nodeid] = test
    return {
        "kind": REPORT_KIND,
        "schema": REPORT_SCHEMA,
        "created_at": now_utc(),
        "machine": {
            "cpu_model": "synthetic",
            "cpu_count": 2,
            "arch": "x86_64",
            "python": "CPython 3.11",
            "numpy": "2.4.6",
        },
        "totals": totals,
        "tests": tests,
    }


def measure(n_tests: int, directory: Path) -> dict[str, Any]:
    """Synthesise, render and open the report; its figures."""
    report = synthetic_report(n_tests)
    json_path = directory / "report.json"
    json_path.write_text(json.dumps(report), encoding="utf-8")
    started = time.perf_counter()
    page = render_html(report)
    render_s = time.perf_counter() - started
    html_path = directory / "report.html"
    html_path.write_text(page, encoding="utf-8")
    browser = find_browser()
    if browser is None:
        sys.exit("no Chromium found (apt-get install chromium, or set OPPROF_BROWSER)")
    with Browser(browser, width=1280, height=800) as b:
        loads = [b.load(html_path) for _ in range(3)]
        rows = b.evaluate("document.querySelectorAll('#tests tbody tr').length")
        sort_ms = b.evaluate(
            "(() => { const t = performance.now();"
            " document.querySelector('#tests th[data-key=w]').click();"
            " return performance.now() - t; })()"
        )
        filter_ms = b.evaluate(
            "(() => { const t = performance.now();"
            " const f = document.getElementById('filter-text');"
            " f.value = 'linalg.svd'; f.dispatchEvent(new Event('input'));"
            " return performance.now() - t; })()"
        )
        heap = b.evaluate("performance.memory ? performance.memory.usedJSHeapSize : null")
        errors = list(b.errors)
        b.screenshot(directory / "report.png")
    return {
        "tests": n_tests,
        "flames": sum("flame" in t for t in report["tests"].values()),
        "json_mb": json_path.stat().st_size / 1e6,
        "html_mb": html_path.stat().st_size / 1e6,
        "render_s": render_s,
        "load_s": sorted(loads)[1],
        "load_all_s": loads,
        "rows_drawn": rows,
        "sort_ms": sort_ms,
        "filter_ms": filter_ms,
        "js_heap_mb": heap / 1e6 if heap else None,
        "console_errors": errors,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tests", type=int, default=20_000)
    parser.add_argument("--json", type=Path, help="write the figures here")
    parser.add_argument("--keep", type=Path, help="keep the report files in this directory")
    args = parser.parse_args()
    if args.keep:
        args.keep.mkdir(parents=True, exist_ok=True)
        figures = measure(args.tests, args.keep)
    else:
        with tempfile.TemporaryDirectory() as tmp:
            figures = measure(args.tests, Path(tmp))
    figures["machine"] = machine_line()
    figures["date"] = now_utc()
    print(json.dumps(figures, indent=2))
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
