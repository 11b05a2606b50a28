"""The forms of an absolute budget: bytes, FLOPs and durations, parsed and named.

``--opprof-max-memory``, ``--opprof-max-leaked``, ``--opprof-max-flops`` and
``--opprof-max-time`` (and the ``profile`` marker's keywords of the same names) take
a figure with its unit.  As ``tolerance.py``'s parsers, each takes the raw value
(command-line text, ini text or a marker keyword's value) and returns it checked, or
raises :class:`OptionValueError` whose message states the accepted forms; the caller
names the setting.  Imports neither pytest nor numpy: the plugin reads these without
``--opprof``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping

from pytest_opprof.errors import OptionValueError
from pytest_opprof.gate.tolerance import DURATION_FORMS, parse_duration_ns

SIZE_FORMS = "a size such as 2 MB, 512 KiB, 0 B (units B, kB, MB, GB, KiB, MiB, GiB)"
FLOPS_FORMS = "a count such as 1 GFLOP or 250 MFLOP (units FLOP, kFLOP, MFLOP, GFLOP, TFLOP)"
TIME_FORMS = DURATION_FORMS.replace("(a bare number is µs)", "(units ns, us, ms, s)")

_NUMBER = r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?"
_FIGURE = re.compile(rf"({_NUMBER})\s*([A-Za-z]*)")
_BYTES_PER_UNIT = {
    "b": 1,
    "kb": 1000,
    "mb": 1000**2,
    "gb": 1000**3,
    "kib": 1024,
    "mib": 1024**2,
    "gib": 1024**3,
}
_FLOPS_PER_UNIT = {
    "flop": 1,
    "kflop": 1000,
    "mflop": 1000**2,
    "gflop": 1000**3,
    "tflop": 1000**4,
}


def _figure(value: object, units: Mapping[str, int], forms: str, plural: str = "") -> int:
    """``value`` (a number in the base unit, or text with a unit of ``units``, matched
    without case and with an optional trailing ``plural``) as an integer >= 0."""
    if isinstance(value, bool):
        raise OptionValueError(f"expected {forms}, got {value!r}")
    if isinstance(value, int | float):
        amount = float(value)
    elif isinstance(value, str) and (match := _FIGURE.fullmatch(value.strip())):
        number, unit = match.groups()
        unit = unit.lower()
        if plural and unit.endswith(plural) and unit.removesuffix(plural) in units:
            unit = unit.removesuffix(plural)
        scale = units.get(unit) if unit else 1
        if scale is None:
            raise OptionValueError(f"expected {forms}, got {value!r} (unknown unit {unit!r})")
        amount = float(number) * scale
    else:
        raise OptionValueError(f"expected {forms}, got {value!r}")
    if not math.isfinite(amount) or amount < 0:
        raise OptionValueError(f"expected {forms} (not negative), got {value!r}")
    return round(amount)


def parse_bytes(value: object) -> int:
    """A memory budget in bytes: ``"2 MB"`` (10**6), ``"512 KiB"`` (2**10), ``"0 B"``, or a
    number of bytes."""
    return _figure(value, _BYTES_PER_UNIT, SIZE_FORMS)


def parse_flops(value: object) -> int:
    """A FLOP budget: ``"1 GFLOP"`` (10**9; ``GFLOPs`` too), or a number of FLOPs."""
    return _figure(value, _FLOPS_PER_UNIT, FLOPS_FORMS, plural="s")


def parse_time_ns(value: object) -> int:
    """A time budget in ns: ``"5 ms"``, ``"200us"``, ``"1s"`` (``tolerance.parse_duration_ns``,
    whose bare number is µs)."""
    try:
        return parse_duration_ns(value.replace(" ", "") if isinstance(value, str) else value)
    except OptionValueError:
        raise OptionValueError(f"expected {TIME_FORMS}, got {value!r}") from None
