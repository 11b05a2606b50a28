"""The op table of torch.profiler's ``EventList.table()``, rendered with tabulate.

Works on any sequence of :class:`FunctionEvent` or :class:`FunctionEventAvg`
(duck-typed: the attributes the columns read).  Times are microseconds,
memory bytes; both are formatted here.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tabulate import tabulate

from pytest_opprof.render.units import (
    check_time_unit,
    device_attribute,
    flops_scale,
    format_memory,
    format_time,
    format_time_share,
)

SORT_KEYS = (
    "cpu_time",
    "cpu_time_total",
    "self_cpu_time_total",
    "device_time",
    "device_time_total",
    "self_device_time_total",
    "cpu_memory_usage",
    "self_cpu_memory_usage",
    "device_memory_usage",
    "self_device_memory_usage",
    "count",
    "flops",
)
_MAX_SRC_COLUMN_WIDTH = 75
_MAX_SHAPES_COLUMN_WIDTH = 80


def sort_attribute(sort_by: str) -> str:
    """The attribute behind a sort key (``cuda_*``/``xpu_*`` read as ``device_*``)."""
    attr = device_attribute(sort_by)
    if attr not in SORT_KEYS:
        raise ValueError(
            f"sort_by={sort_by!r} is not a sort key; use one of {', '.join(SORT_KEYS)} "
            "(cuda_*, xpu_* and privateuse1_* name the device_* keys)"
        )
    return attr


def table(
    events: Sequence[Any],
    *,
    sort_by: str | None = None,
    row_limit: int | None = 100,
    max_name_column_width: int | None = 55,
    header: str | None = None,
    top_level_events_only: bool = False,
    time_unit: str | None = None,
    profile_memory: bool = False,
    with_flops: bool = False,
    use_device: str | None = None,
) -> str:
    """Render ``events`` as torch's op table; ``""`` for no events.

    ``sort_by`` sorts descending by one of :data:`SORT_KEYS`; ``row_limit``
    (``None`` or negative: all) bounds the rows; ``time_unit`` (``s``, ``ms``,
    ``us``) fixes the unit of every time.  Percentages are shares of the self
    CPU time of all events, shown or not.
    """
    check_time_unit(time_unit)
    attr = sort_attribute(sort_by) if sort_by is not None else None
    if not events:
        return ""
    has_device_time = any(evt.self_device_time_total > 0 for evt in events)
    has_device_mem = any(evt.self_device_memory_usage > 0 for evt in events)
    has_shapes = any(len(evt.input_shapes) > 0 for evt in events)
    has_stack = any(len(evt.stack) > 0 for evt in events)
    positive_flops = [evt.flops for evt in events if evt.flops > 0] if with_flops else []
    device = use_device.upper() if use_device else "DEVICE"

    sum_self_cpu = sum(evt.self_cpu_time_total for evt in events)
    sum_self_device = sum(evt.self_device_time_total for evt in events)

    rows_src = list(events)
    if attr is not None:
        rows_src.sort(key=lambda evt: getattr(evt, attr), reverse=True)
    if top_level_events_only:
        rows_src = [evt for evt in rows_src if evt.is_top_level]
    if row_limit is not None and row_limit >= 0:
        rows_src = rows_src[:row_limit]

    def t(us: float) -> str:
        return format_time(us, time_unit)

    headers = ["Name", "Self CPU %", "Self CPU", "CPU total %", "CPU total", "CPU time avg"]
    if has_device_time:
        headers += [f"Self {device}", f"Self {device} %", f"{device} total", f"{device} time avg"]
    if profile_memory:
        headers += ["CPU Mem", "Self CPU Mem"]
    if has_device_mem:
        headers += [f"{device} Mem", f"Self {device} Mem"]
    if positive_flops:
        scale, flops_header = flops_scale(min(positive_flops))
        headers.append(f"Total {flops_header}")
    headers.append("# of Calls")
    if has_shapes:
        headers.append("Input Shapes")
    if has_stack:
        headers.append("Source Location")

    rows = []
    for evt in rows_src:
        row = [
            _trim_name(str(evt.key), max_name_column_width),
            format_time_share(evt.self_cpu_time_total, sum_self_cpu),
            t(evt.self_cpu_time_total),
            format_time_share(evt.cpu_time_total, sum_self_cpu),
            t(evt.cpu_time_total),
            t(evt.cpu_time),
        ]
        if has_device_time:
            row += [
                t(evt.self_device_time_total),
                format_time_share(evt.self_device_time_total, sum_self_device),
                t(evt.device_time_total),
                t(evt.device_time),
            ]
        if profile_memory:
            row += [format_memory(evt.cpu_memory_usage), format_memory(evt.self_cpu_memory_usage)]
        if has_device_mem:
            row += [
                format_memory(evt.device_memory_usage),
                format_memory(evt.self_device_memory_usage),
            ]
        if positive_flops:
            row.append(_format_flops(evt.flops, scale))
        row.append(str(evt.count))
        if has_shapes:
            row.append(str(evt.input_shapes)[:_MAX_SHAPES_COLUMN_WIDTH] if evt.input_shapes else "")
        if has_stack:
            row.append("\n".join(_trim_path(frame) for frame in evt.stack))
        rows.append(row)

    align = ["left"] + ["right"] * (len(headers) - 1)
    for i, name in enumerate(headers):
        if name in ("Input Shapes", "Source Location"):
            align[i] = "left"
    body = tabulate(rows, headers=headers, tablefmt="simple", colalign=align, disable_numparse=True)
    width = max(len(line) for line in body.splitlines())

    lines = []
    if header is not None:
        lines += ["=" * width, header]
    if top_level_events_only:
        lines += ["=" * width, "This report only displays top-level ops statistics"]
    lines += ["-" * width, body, "-" * width]
    lines.append(f"Self CPU time total: {t(sum_self_cpu)}")
    if has_device_time:
        lines.append(f"Self {device} time total: {t(sum_self_device)}")
    return "\n".join(lines) + "\n"


def _trim_name(name: str, width: int | None) -> str:
    if width is not None and len(name) >= width - 3:
        return name[: width - 3] + "..."
    return name


def _trim_path(path: str) -> str:
    """Keep the end of a long ``file(line): function`` frame, marked with ``...``."""
    if len(path) <= _MAX_SRC_COLUMN_WIDTH:
        return path
    return "..." + path[len(path) - _MAX_SRC_COLUMN_WIDTH + 3 :]


def _format_flops(flops: int, scale: float) -> str:
    """FLOPs in the column's unit; whole counts stay whole when the unit is plain FLOPs."""
    if flops <= 0:
        return "--"
    if scale == 1.0:
        return str(int(flops))
    return f"{flops * scale:.3f}"
