"""Shared by the bench scripts: the checkout on sys.path, statistics, machine and load.

Importing this module makes ``pytest_opprof`` importable from the checkout
(without ``pip install -e .``), so every script runs alone as
``.venv/bin/python bench/<script>.py``.
"""

from __future__ import annotations

import contextlib
import datetime
import importlib.metadata
import os
import platform
import random
import statistics
import subprocess
import sys
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))


# A multi-threaded BLAS on a small shared machine turns 1 ms of matmul into tens of
# ms whenever another process holds a core (its threads wait on each other).
SINGLE_THREADED = {
    name: "1" for name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")
}


def subprocess_env(**extra: str) -> dict[str, str]:
    """The environment for a child Python: the checkout importable, BLAS on one thread."""
    env = dict(os.environ, **SINGLE_THREADED, **extra)
    env["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(REPO), extra.get("PYTHONPATH", ""), os.environ.get("PYTHONPATH", "")) if p
    )
    return env


def plugin_args() -> list[str]:
    """``-p pytest_opprof.plugin`` unless the plugin is installed (its pytest11 entry point)."""
    installed = any(ep.name == "opprof" for ep in importlib.metadata.entry_points(group="pytest11"))
    return [] if installed else ["-p", "pytest_opprof.plugin"]


def loadavg() -> float:
    """1-minute load average (0 where the platform has none)."""
    try:
        return os.getloadavg()[0]
    except OSError:
        return 0.0


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def machine_line() -> str:
    """CPU model, cores, OS, Python and numpy versions, in one line."""
    import numpy

    return (
        f"{cpu_model()}, {os.cpu_count()} cores, {platform.system()} {platform.release()}, "
        f"Python {sys.version.split()[0]}, numpy {numpy.__version__}"
    )


def now_utc() -> str:
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")


def spread(values: Sequence[float]) -> dict[str, float]:
    """median, quartiles (IQR), min and max of repeated measurements."""
    v = sorted(values)
    if len(v) >= 2:
        q1, _, q3 = statistics.quantiles(v, n=4, method="inclusive")
    else:
        q1 = q3 = v[0]
    return {"median": statistics.median(v), "q1": q1, "q3": q3, "min": v[0], "max": v[-1]}


def fmt_spread(s: dict[str, float], digits: int = 0) -> str:
    """``median [q1-q3]``."""
    return f"{s['median']:.{digits}f} [{s['q1']:.{digits}f}-{s['q3']:.{digits}f}]"


_BURN = (
    "import os, sys, time\nt = time.monotonic()\nparent = int(sys.argv[2])\n"
    "while time.monotonic() - t < float(sys.argv[1]) and os.getppid() == parent: pass\n"
)


@contextlib.contextmanager
def cpu_burners(
    per_core: int = 2, seconds: float = 600.0, niceness: int | None = None
) -> Iterator[None]:
    """``per_core`` CPU-bound processes per core while the block runs: each ends by itself
    after ``seconds`` or as soon as its parent is gone (a study killed mid-run left two
    spinning for 15 minutes under the next one), and is ended by pid when the block ends.
    ``niceness``: theirs (a study run under ``nice -n 19`` whose neighbour is the
    scenario sets 0; where the system refuses, they keep the study's)."""

    def renice() -> None:
        if niceness is not None:
            with contextlib.suppress(OSError):
                os.setpriority(os.PRIO_PROCESS, 0, niceness)

    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _BURN, str(seconds), str(os.getpid())], preexec_fn=renice
        )
        for _ in range(per_core * (os.cpu_count() or 1))
    ]
    try:
        yield
    finally:
        for proc in procs:
            proc.kill()
            proc.wait()


@contextlib.contextmanager
def bursty_neighbours(seed: int = 0, niceness: int | None = None) -> Iterator[None]:
    """CPU-bound processes, one per core, that start and stop every 0.5-3 s while the
    block runs (each burst ends by itself; all are ended by pid when the block ends);
    ``niceness`` as for :func:`cpu_burners`."""
    rng = random.Random(seed)
    stop = threading.Event()

    def churn() -> None:
        while not stop.is_set():
            with cpu_burners(per_core=1, seconds=3.5, niceness=niceness):
                stop.wait(rng.uniform(0.5, 3.0))
            stop.wait(rng.uniform(0.5, 3.0))

    thread = threading.Thread(target=churn, daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()
