"""Run a function in several threads at once and wait for all of them."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable


def run_threads(target: Callable[..., object], args: Iterable[tuple[object, ...]]) -> None:
    """Start one thread per argument tuple, all before the first join, then join them."""
    threads = [threading.Thread(target=target, args=a) for a in args]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
