"""Collapsed stacks (``frame;frame;...;op value``) for flamegraph tools.

Each event contributes its self metric to the path from its tree root down to
itself (scopes and ops as frames).  Python call sites, when recorded, come
before the event they belong to, outermost first; frames an event shares with
the call site of an ancestor on the path are not repeated.  Identical paths
are summed; values are whole microseconds and zero lines are left out.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pytest_opprof.gate.files import write_bytes
from pytest_opprof.render.units import device_attribute

STACK_METRICS = ("self_cpu_time_total", "self_device_time_total")
_FRAME_TRANSLATION = str.maketrans(" ;\t\n", "____")


def check_metric(metric: str) -> str:
    """The attribute for ``metric`` (``self_cuda_time_total`` reads as the device one)."""
    attr = device_attribute(metric)
    if attr not in STACK_METRICS:
        raise ValueError(
            f"metric={metric!r} is not a stack metric; use one of {', '.join(STACK_METRICS)}"
        )
    return attr


def collapsed_stacks(events: Sequence[Any], metric: str = "self_cpu_time_total") -> list[str]:
    """Lines ``frame;...;frame value`` with positive integer values, sorted by path."""
    attr = check_metric(metric)
    # Per event: its path text and the call site (outermost first) in force below it.
    paths: dict[int, tuple[str, list[str]]] = {}
    totals: dict[str, float] = {}
    for evt in events:
        if not hasattr(evt, "time_range"):
            raise ValueError(
                "export_stacks needs recorded events (prof.events()), not key averages"
            )
        path = _path(evt, paths)
        value = float(getattr(evt, attr))
        if value:
            totals[path] = totals.get(path, 0.0) + value
    lines = []
    for path, total_us in sorted(totals.items()):
        value = round(total_us)
        if value > 0:
            lines.append(f"{path} {value}")
    return lines


def _path(evt: Any, paths: dict[int, tuple[str, list[str]]]) -> str:
    # Iterative: walk up to the nearest ancestor already known, then down.
    chain = []
    node = evt
    while node is not None and id(node) not in paths:
        chain.append(node)
        node = node.cpu_parent
    text, site = paths[id(node)] if node is not None else ("", [])
    for item in reversed(chain):
        frames: list[str] = []
        own = [f.translate(_FRAME_TRANSLATION) for f in reversed(item.stack)]
        if own:
            common = 0
            while common < min(len(own), len(site)) and own[common] == site[common]:
                common += 1
            frames = own[common:]
            site = own
        frames.append(str(item.name).translate(_FRAME_TRANSLATION))
        text = ";".join([text, *frames]) if text else ";".join(frames)
        paths[id(item)] = (text, site)
    return text


def export_stacks(events: Sequence[Any], path: str, metric: str = "self_cpu_time_total") -> None:
    """Write :func:`collapsed_stacks` of ``events`` to ``path``, one line each (through a
    symlink, FIFO or device as ``open`` would; see ``gate.files.write_bytes``)."""
    lines = collapsed_stacks(events, metric)
    write_bytes(path, "".join(line + "\n" for line in lines).encode("utf-8"))
