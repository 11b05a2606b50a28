"""Registry of capture sources: what records ops besides ``record_function``.

A source module is imported only when its source is asked for, so a missing
library (torch, say) never breaks the others.  Each
entry is ``"module:attribute"``; the attribute is a :class:`Source` object, or a
zero-argument callable making one (called once, the result is shared so its
acquire/release refcount covers every user).

Capture sources are user-facing names (``--opprof-capture``); helper sources
(memory) are added by :class:`~pytest_opprof.capture.recorder.Recorder` from its flags.
"""

from __future__ import annotations

import importlib
import os
import threading
from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from pytest_opprof.errors import OpprofError
from pytest_opprof.native_layout.records import Records

__all__ = ["CAPTURE_SOURCES", "HELPER_SOURCES", "Source", "accepted_names", "get", "resolve"]


@runtime_checkable
class Source(Protocol):
    """A capture source; acquire/release install and remove its hooks (refcounted)."""

    name: str

    def available(self) -> bool:
        """True when usable here; warns once and returns False otherwise."""
        ...

    def acquire(self) -> None: ...

    def release(self) -> None: ...

    def start_options(self) -> int:
        """``OPPROF_OPT_*`` bits to OR into the native start."""
        ...

    def collect(self) -> Records | None:
        """Records produced on the Python side after stop; None for native sources."""
        ...


CAPTURE_SOURCES: dict[str, str] = {
    "numpy": "pytest_opprof.capture.sources.numpy_source:SOURCE",
    "torch": "pytest_opprof.capture.sources.torch_source:SOURCE",
    "scipy": "pytest_opprof.capture.sources.scipy_source:SOURCE",
    "sklearn": "pytest_opprof.capture.sources.sklearn_source:SOURCE",
}
HELPER_SOURCES: dict[str, str] = {
    "memory": "pytest_opprof.capture.sources.memory_source:MemorySource",
    "python_memory": "pytest_opprof.capture.sources.memory_source:PythonMemorySource",
    "cuda": "pytest_opprof.capture.sources.cuda_source:CudaSource",
}
NONE = "none"

_lock = threading.Lock()


def _new_lock_in_child() -> None:
    """A forked child starts with this lock free: the parent may have held it (a native
    call under it releases the GIL) while another of its threads forked."""
    global _lock
    _lock = threading.Lock()


os.register_at_fork(after_in_child=_new_lock_in_child)
_loaded: dict[str, Source | None] = {}


def accepted_names() -> list[str]:
    """Names ``--opprof-capture`` accepts, ``none`` last."""
    return [*sorted(CAPTURE_SOURCES), NONE]


def get(name: str) -> Source | None:
    """The source registered as ``name``, or None when its module is not present."""
    with _lock:
        if name in _loaded:
            return _loaded[name]
        target = CAPTURE_SOURCES.get(name) or HELPER_SOURCES.get(name)
        if target is None:
            raise OpprofError(f"unknown source {name!r}; accepted: {', '.join(accepted_names())}")
        module_name, _, attr = target.partition(":")
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name != module_name:
                raise
            source = None
        else:
            obj = getattr(module, attr)
            # A class also has every attribute of the protocol: instantiate it.
            source = obj() if isinstance(obj, type) or not isinstance(obj, Source) else obj
        _loaded[name] = source
        return source


def resolve(capture: Sequence[str] | None) -> list[Source]:
    """The sources for a ``capture`` list: None = every available one, ``["none"]`` = none.

    Raises OpprofError for an unknown name or a registered source not present in
    this install; a known source that cannot run here warns once and is left out.
    """
    if capture is None:
        found = (get(name) for name in sorted(CAPTURE_SOURCES))
        return [s for s in found if s is not None and s.available()]
    names = list(dict.fromkeys(capture))
    unknown = [n for n in names if n != NONE and n not in CAPTURE_SOURCES]
    if unknown:
        raise OpprofError(
            f"unknown capture source(s) {', '.join(map(repr, unknown))}; "
            f"accepted: {', '.join(accepted_names())}"
        )
    if NONE in names:
        if len(names) > 1:
            raise OpprofError(f"capture source 'none' stands alone, got {', '.join(names)}")
        return []
    sources = []
    for name in names:
        source = get(name)
        if source is None:
            raise OpprofError(f"capture source {name!r} is not part of this pytest-opprof install")
        if source.available():
            sources.append(source)
    return sources
