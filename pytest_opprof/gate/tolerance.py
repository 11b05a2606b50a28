"""Parsing of tolerance and duration settings, shared by the plugin and the CLI.

Each parser takes the raw value (command-line text, ini text, or a marker
keyword's number) and returns it checked, or raises ``ValueError`` whose message
states the accepted forms; the caller prefixes the option's name (the plugin
raises ``pytest.UsageError``, the CLI an argparse error).
"""

from __future__ import annotations

import math
import re

TOLERANCE_FORMS = "a fraction such as 0.2 or a percentage such as 20%"
DURATION_FORMS = "a duration such as 50us, 0.5ms, 200ns or 1s (a bare number is µs)"

_NUMBER = r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?"
_TOLERANCE = re.compile(rf"({_NUMBER})\s*(%?)")
_DURATION = re.compile(rf"({_NUMBER})\s*(ns|us|µs|ms|s)?")
_NS_PER_UNIT = {"ns": 1, "us": 1_000, "µs": 1_000, "ms": 1_000_000, "s": 1_000_000_000}


def parse_tolerance(value: object) -> float:
    """A relative tolerance >= 0: ``0.2``, ``"0.2"`` and ``"20%"`` all give 0.2."""
    if isinstance(value, bool):
        raise ValueError(f"expected {TOLERANCE_FORMS}, got {value!r}")
    if isinstance(value, int | float):
        fraction = float(value)
    elif isinstance(value, str) and (match := _TOLERANCE.fullmatch(value.strip())):
        number, percent = match.groups()
        fraction = float(number) / 100 if percent else float(number)
    else:
        raise ValueError(f"expected {TOLERANCE_FORMS}, got {value!r}")
    if not math.isfinite(fraction) or fraction < 0:
        raise ValueError(f"expected {TOLERANCE_FORMS} (not negative), got {value!r}")
    return fraction


def parse_duration_ns(value: object) -> int:
    """A duration >= 0 in ns: ``"50us"``, ``"0.5ms"``, ``"200ns"``, ``"1s"``, or µs as a number."""
    if isinstance(value, bool):
        raise ValueError(f"expected {DURATION_FORMS}, got {value!r}")
    if isinstance(value, int | float):
        ns = float(value) * _NS_PER_UNIT["us"]
    elif isinstance(value, str) and (match := _DURATION.fullmatch(value.strip())):
        number, unit = match.groups()
        ns = float(number) * _NS_PER_UNIT[unit or "us"]
    else:
        raise ValueError(f"expected {DURATION_FORMS}, got {value!r}")
    if not math.isfinite(ns) or ns < 0:
        raise ValueError(f"expected {DURATION_FORMS} (not negative), got {value!r}")
    return round(ns)


def format_tolerance(fraction: float) -> str:
    """``0.2`` -> ``"20%"`` (as the report prints it)."""
    return f"{fraction * 100:g}%"
