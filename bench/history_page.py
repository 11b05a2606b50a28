"""The history page of a large history: its size, the time to make it, the time to load it.

Writes a synthetic history (``history_synthetic.py``'s runs: ``--runs`` runs of a
``--tests``-test suite, written directly in ``--opprof-history``'s format) and makes its
page as ``pytest-opprof history DIR --html`` does, timing detection, the second read of
the charted tests' figures, and rendering; then, where Chromium is found, loads the page
and times it.  Two cases side by side:

* ``few``: the synthetic history's four injected steps (what a suite usually shows);
* ``every``: besides them, a FLOPs step in every test at mid-history (a shared helper
  changed): every test has a change point, so the charts reach their cap and the table
  lists one row a test.

    python bench/history_page.py [--runs 200 --tests 2000] [--keep DIR]
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import history_synthetic as synth
from _common import REPO  # noqa: F401  (the checkout importable)

from pytest_opprof.history.charts import CHART_LIMIT
from pytest_opprof.history.html import page_data, render_page
from pytest_opprof.history.series import find_changes
from pytest_opprof.history.store import scan


def measure(directory: Path, page: Path) -> dict[str, Any]:
    started = time.perf_counter()
    history = scan(directory)
    found = find_changes(history)
    detected = time.perf_counter()
    data = page_data(history, found, found.changes)
    read = time.perf_counter()
    page.write_text(render_page(data, found, title=str(directory)), encoding="utf-8")
    done = time.perf_counter()
    return {
        "changes": len(found.changes),
        "charts": len(data["charts"]),
        "bytes": page.stat().st_size,
        "detect_s": detected - started,
        "charts_s": read - detected,
        "render_s": done - read,
    }


def load_s(page: Path) -> float | None:
    import _browser

    executable = _browser.find_browser()
    if executable is None:
        return None
    with _browser.Browser(executable) as b:
        seconds = b.load(page)
        assert not b.errors, b.errors
        assert b.requests == [page.resolve().as_uri()], b.requests
        return seconds


def main() -> None:
    p = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    p.add_argument("--runs", type=int, default=200)
    p.add_argument("--tests", type=int, default=2000)
    p.add_argument("--ops", type=int, default=8)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--keep", type=Path, help="write the histories and pages here")
    args = p.parse_args()
    root = args.keep or Path(tempfile.mkdtemp(prefix="opprof-history-page-"))
    injected = dict(synth.INJECTED)
    try:
        for case in ("few", "every"):
            directory = root / case
            directory.mkdir(parents=True, exist_ok=True)
            synth.INJECTED.clear()
            synth.INJECTED.update(injected)
            if case == "every":
                synth.INJECTED.update({(t, None): (0.5, 1.25) for t in range(args.tests)})
            if not any(directory.iterdir()):
                synth.write_history(directory, args.runs, args.tests, args.ops, args.rounds)
            page = root / f"{case}.html"
            m = measure(directory, page)
            seconds = load_s(page)
            loaded = f"{seconds:.2f} s in Chromium" if seconds is not None else "no Chromium"
            print(
                f"{case:>5}: {args.runs} runs x {args.tests} tests: {m['changes']:,} change "
                f"point(s), {m['charts']} chart(s) (cap {CHART_LIMIT}); page "
                f"{m['bytes'] / 2**10:,.0f} KiB; detect {m['detect_s']:.1f} s, charts' "
                f"figures {m['charts_s']:.1f} s, render {m['render_s']:.2f} s; load {loaded}"
            )
    finally:
        synth.INJECTED.clear()
        synth.INJECTED.update(injected)
        if args.keep is None:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
