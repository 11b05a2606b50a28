"""The op table of torch.profiler's ``EventList.table()``, in torch's layout.

Works on any sequence of :class:`FunctionEvent` or :class:`FunctionEventAvg`
(duck-typed: the attributes the columns read).  Times are microseconds,
memory bytes; both are formatted here.  Columns, their order, widths, units
and limits are torch's (``torch.autograd.profiler_util._build_table``, torch
2.13), so a table reads the same from either profiler: fixed-width columns
two spaces apart, right-aligned but for the source location; 12 characters
for every figure, the name and input-shapes columns as wide as their widest
entry plus 4 up to their limits.  One deliberate difference: with both FLOPs
and source locations, torch heads the last two columns "Source Location",
"Total FLOPs" but fills them FLOPs first; here head and cells agree (the
source column stays last, where its further frames go).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

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
_FIGURE_WIDTH = 12  # torch's DEFAULT_COLUMN_WIDTH
_SPACING = 2


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
    max_src_column_width: int | None = 75,
    max_name_column_width: int | None = 55,
    max_shapes_column_width: int | None = 80,
    header: str | None = None,
    top_level_events_only: bool = False,
    time_unit: str | None = None,
    profile_memory: bool = False,
    with_flops: bool = False,
    use_device: str | None = None,
) -> str:
    """Render ``events`` as torch's op table; ``""`` for no events.

    ``sort_by`` sorts descending by one of :data:`SORT_KEYS`; ``row_limit``
    (``None`` or negative: all; 0: none, header and footer still) bounds the
    rows; ``time_unit`` (``s``, ``ms``, ``us``) fixes the unit of every time.
    The ``max_*_column_width`` limits (``None``: unbounded) cut names (with
    ``...``), input shapes, and source frames (their start, with ``...``).
    Percentages are shares of the self CPU time of all events, shown or not.
    """
    check_time_unit(time_unit)
    attr = sort_attribute(sort_by) if sort_by is not None else None
    if not events:
        return ""
    has_device_time = any(evt.self_device_time_total > 0 for evt in events)
    has_device_mem = any(evt.self_device_memory_usage > 0 for evt in events)
    has_shapes = any(len(evt.input_shapes) > 0 for evt in events)
    stacks = [evt.stack for evt in events if evt.stack]
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

    # Widths from every event, shown or not, as torch measures them.
    name_width = _bounded(max(len(str(evt.key)) for evt in events) + 4, max_name_column_width)
    shapes_width = _bounded(
        max(len(str(evt.input_shapes)) for evt in events) + 4, max_shapes_column_width
    )
    src_width = (
        _bounded(max(len(frame) for stack in stacks for frame in stack) + 4, max_src_column_width)
        if stacks
        else 0
    )

    def t(us: float) -> str:
        return format_time(us, time_unit)

    columns: list[tuple[str, int, str]] = [("Name", name_width, ">")]
    figures = ["Self CPU %", "Self CPU", "CPU total %", "CPU total", "CPU time avg"]
    if has_device_time:
        figures += [f"Self {device}", f"Self {device} %", f"{device} total", f"{device} time avg"]
    show_device_mem = profile_memory and use_device is not None and has_device_mem
    if profile_memory:
        figures += ["CPU Mem", "Self CPU Mem"]
        if show_device_mem:
            figures += [f"{device} Mem", f"Self {device} Mem"]
    # Only the traffic figures some event has (FunctionEvent's; none in torch's events):
    # a host-only table reads as it did.
    traffic = [
        (header, attr)
        for header, attr in TRAFFIC_COLUMNS
        if any(getattr(evt, attr, 0) for evt in events)
    ]
    figures += [header for header, _ in traffic]
    figures.append("# of Calls")
    columns += [(name, _FIGURE_WIDTH, ">") for name in figures]
    if has_shapes:
        columns.append(("Input Shapes", shapes_width, ">"))
    if positive_flops:
        scale, flops_header = flops_scale(min(positive_flops))
        columns.append((f"Total {flops_header}", _FIGURE_WIDTH, ">"))
    if stacks:
        columns.append(("Source Location", src_width, "<"))

    def line(cells: Sequence[str]) -> str:
        return "".join(
            f"{cell:{align}{width}}" + " " * _SPACING
            for cell, (_, width, align) in zip(cells, columns, strict=True)
        )

    rows = []
    blank = [""] * len(columns)
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
            if show_device_mem:
                row += [
                    format_memory(evt.device_memory_usage),
                    format_memory(evt.self_device_memory_usage),
                ]
        row += [
            str(getattr(evt, attr, 0)) if attr == "device_syncs" else _traffic(evt, attr)
            for _, attr in traffic
        ]
        row.append(str(evt.count))
        if has_shapes:
            row.append(str(evt.input_shapes)[:shapes_width])
        if positive_flops:
            row.append(_format_flops(evt.flops, scale))
        if stacks:
            frames = [_trim_path(frame, src_width) for frame in evt.stack]
            row.append(frames[0] if frames else "")
            rows.append(line(row))
            # Further frames under the first, then a blank line: torch's layout.
            rows += [line([*blank[:-1], frame]) for frame in frames[1:]]
            rows.append(line(blank))
        else:
            rows.append(line(row))

    separator = "".join("-" * width + " " * _SPACING for _, width, _ in columns)
    width = len(separator) - _SPACING
    lines = []
    if header is not None:
        lines += ["=" * width, header]
    if top_level_events_only:
        # torch's wording, kept for parity.
        lines += ["=" * width, "This report only display top-level ops statistics"]
    lines += [separator, line([name for name, _, _ in columns]), separator, *rows, separator]
    lines.append(f"Self CPU time total: {t(sum_self_cpu)}")
    if has_device_time:
        lines.append(f"Self {device} time total: {t(sum_self_device)}")
    return "\n".join(lines) + "\n"


TRAFFIC_COLUMNS = (
    ("Host->Dev", "host_to_device_bytes"),
    ("Dev->Host", "device_to_host_bytes"),
    ("Dev->Dev", "device_to_device_bytes"),
    ("Syncs", "device_syncs"),
)
"""The columns of host<->device traffic (``model/event_traffic.py``): header, attribute."""


def _traffic(evt: Any, attr: str) -> str:
    return format_memory(getattr(evt, attr, 0))


def _bounded(width: int, limit: int | None) -> int:
    return width if limit is None else min(width, limit)


def _trim_name(name: str, width: int | None) -> str:
    if width is not None and len(name) >= width - 3:
        return name[: width - 3] + "..."
    return name


def _trim_path(path: str, width: int) -> str:
    """Keep the end of a long ``file(line): function`` frame, its start marked ``...``."""
    if len(path) <= width:
        return path
    path = path[len(path) - width :]
    return "..." + path[3:] if len(path) > 3 else path


def _format_flops(flops: int, scale: float) -> str:
    """FLOPs in the column's unit, as torch prints them (``%8.3f``); ``--`` for none."""
    if flops <= 0:
        return "--"
    return f"{flops * scale:8.3f}"
