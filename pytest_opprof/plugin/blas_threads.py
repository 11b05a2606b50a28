"""How many threads the BLAS/OpenMP pools get in the measured rounds: the
``--opprof-blas-threads`` setting resolved against this session, once, at its start.

``auto`` reads the session (pytest-xdist workers) and the machine (its load average),
so it is resolved here rather than parsed with the options; ``capture/threadpools.py``
pins the pools to the result.  Imports neither numpy nor the native core.
"""

from __future__ import annotations

import os
from typing import Literal

import pytest

BlasThreads = int | Literal["auto", "keep"]
"""The setting's forms: a pool size >= 1, ``auto`` or ``keep``."""


def blas_threads_for(setting: BlasThreads, config: pytest.Config) -> int | None:
    """The pools' size for the measured rounds, None to leave them alone.

    ``auto`` pins to 1 where more than one pytest-xdist worker shares the machine's
    cores (the case measured to hurt most) or where the machine is already busy: a load
    average of at least half its cores at session start.
    """
    if setting == "keep":
        return None
    if setting != "auto":
        return setting
    return 1 if _xdist_workers(config) > 1 or _busy() else None


def _xdist_workers(config: pytest.Config) -> int:
    workerinput = getattr(config, "workerinput", None)
    if workerinput is not None:  # on a worker: how many the controller started
        return int(workerinput.get("workercount", 1))
    numprocesses = getattr(config.option, "numprocesses", None)
    if isinstance(numprocesses, int):
        return numprocesses
    # -n auto / logical: resolved by xdist later, to about the core count.
    return (os.cpu_count() or 1) if numprocesses else 1


def _busy() -> bool:
    try:
        load = os.getloadavg()[0]
    except OSError:  # no load average on this platform: nothing says busy
        return False
    return load >= (os.cpu_count() or 1) / 2
