"""Formatting of times (microseconds), memory (bytes) and FLOPs for tables."""

from __future__ import annotations

import math

TIME_UNITS = ("s", "ms", "us")
_US_PER_UNIT = {"s": 1_000_000.0, "ms": 1_000.0, "us": 1.0}
_FLOPS_PREFIXES = ("", "K", "M", "G", "T", "P")


def check_time_unit(time_unit: str | None) -> None:
    """Raise ``ValueError`` naming the accepted units unless ``time_unit`` is one (or None)."""
    if time_unit is not None and time_unit not in TIME_UNITS:
        raise ValueError(
            f"time_unit={time_unit!r} is not a time unit; use one of {', '.join(TIME_UNITS)} "
            "or None for automatic"
        )


def format_time(time_us: float, time_unit: str | None = None) -> str:
    """``time_us`` as ``1.234ms``: in ``time_unit``, or the largest unit it reaches."""
    check_time_unit(time_unit)
    if time_unit is None:
        time_unit = "us"
        for unit in ("s", "ms"):
            if abs(time_us) >= _US_PER_UNIT[unit]:
                time_unit = unit
                break
    return f"{time_us / _US_PER_UNIT[time_unit]:.3f}{time_unit}"


def format_time_share(time_us: float, total_us: float) -> str:
    """``time_us`` as a percentage of ``total_us`` (``NaN`` when the total is 0)."""
    if total_us == 0:
        return "NaN"
    return f"{time_us * 100.0 / total_us:.2f}%"


def format_memory(nbytes: int) -> str:
    """Bytes as ``B``, ``KB``, ``MB`` or ``GB`` (powers of 1024), torch's spelling."""
    kb = 1024
    mb = 1024 * kb
    gb = 1024 * mb
    if abs(nbytes) >= gb:
        return f"{nbytes / gb:.2f} GB"
    if abs(nbytes) >= mb:
        return f"{nbytes / mb:.2f} MB"
    if abs(nbytes) >= kb:
        return f"{nbytes / kb:.2f} KB"
    return f"{nbytes} B"


def flops_scale(smallest_flops: int) -> tuple[float, str]:
    """Multiplier and header (``FLOPs``, ``KFLOPs``, ...) fitting the smallest positive count."""
    if smallest_flops <= 0:
        raise ValueError(f"FLOPs scale needs a positive count, got {smallest_flops}")
    power = min(int(math.log10(smallest_flops) // 3), len(_FLOPS_PREFIXES) - 1)
    return 10.0 ** (-3 * power), f"{_FLOPS_PREFIXES[power]}FLOPs"


_DEVICE_ALIASES = ("cuda", "xpu", "privateuse1")


def device_attribute(name: str) -> str:
    """torch's spellings of device metrics (``cuda_*``, ``xpu_*``, ...) as our ``device_*``."""
    for alias in _DEVICE_ALIASES:
        name = name.replace(alias, "device")
    return name
