"""pytest-opprof: op-level performance regression checks for pytest, torch.profiler's API.

Importing the package is cheap: the native core, numpy and the event model load
on first use of the names below (the pytest plugin imports this package on
every pytest run, profiling or not).

PYTEST_DONT_REWRITE: an A/B partner imports this package before its pytest starts
(pytest_opprof/ab/base_side.py), and pytest, marking an installed plugin's package for
assertion rewriting, warned that it was already imported: under a project's
``filterwarnings = error`` that warning stopped every partner before it collected.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from pytest_opprof.errors import OpprofError

if TYPE_CHECKING:
    from pytest_opprof.model import EventList, FunctionEvent, FunctionEventAvg
    from pytest_opprof.profiler import profile, record_function

__all__ = [
    "EventList",
    "FunctionEvent",
    "FunctionEventAvg",
    "OpprofError",
    "profile",
    "record_function",
]

_LAZY = {
    "profile": "pytest_opprof.profiler",
    "record_function": "pytest_opprof.profiler",
    "EventList": "pytest_opprof.model",
    "FunctionEvent": "pytest_opprof.model",
    "FunctionEventAvg": "pytest_opprof.model",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'pytest_opprof' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
