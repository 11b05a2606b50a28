"""The ``@pytest.mark.profile(...)`` marker: its keywords, help text and validation.

The signature of :func:`profile` below *is* the marker's interface: the help text
shown by ``pytest --markers`` is built from it, and a marker's keywords are bound
against it, so an unknown keyword is reported by name next to the accepted ones.
A keyword named like a setting (``Setting.marker`` in ``options.py``: ``rounds``,
``time_tolerance``, ...) is parsed by that setting's parser, so it accepts exactly
the forms of ``--opprof-<name>``; where its default is None, None keeps the
session's value.
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from pytest_opprof.errors import MarkerUsageError, OptionValueError
from pytest_opprof.gate.tolerance import DEFAULT_ROW_LIMIT
from pytest_opprof.plugin.options import (
    FLOPS_TOLERANCE,
    MAX_FLOPS,
    MAX_LEAKED,
    MAX_MEMORY,
    MAX_TIME,
    MEMORY_TOLERANCE,
    ROUNDS,
    ROW_LIMIT,
    TIME_TOLERANCE,
    WARMUP,
    OpprofOptions,
)
from pytest_opprof.render.units import check_time_unit

MARKER_NAME = "profile"


def profile(
    *,
    row_limit: int = DEFAULT_ROW_LIMIT,
    sort_by: str = "self_cpu_time_total",
    time_unit: str | None = None,
    rounds: int | str | None = None,
    warmup: int | None = None,
    time_tolerance: float | str | None = None,
    memory_tolerance: float | str | None = None,
    flops_tolerance: float | str | None = None,
    max_memory: int | str | None = None,
    max_leaked: int | str | None = None,
    max_flops: int | str | None = None,
    max_time: str | None = None,
    group_by_input_shape: bool = False,
    top_level_events_only: bool = False,
) -> None:
    """Print this test's op table in the terminal summary (at most row_limit rows, sorted
    by sort_by, times in time_unit: s, ms or us); rounds (a number or 'auto'), warmup and
    the tolerances override the command line and ini for this test; the budgets fail it
    beyond a peak memory, leak, FLOP count or time ('2 MB', '0 B', '1 GFLOP', '5 ms')."""


@dataclass(frozen=True)
class TestSettings:
    """How one test is profiled and printed: its marker over the session options."""

    marked: bool
    row_limit: int
    sort_by: str
    time_unit: str | None
    rounds: int | None
    """None: auto (``options.AUTO_ROUNDS`` when the first round reaches the time floor)."""
    warmup: int
    time_tolerance: float | None
    memory_tolerance: float | None
    flops_tolerance: float | None
    max_memory: int | None
    """The budgets (bytes, bytes, FLOPs, ns); None: the session's (``GateOptions.budgets``)."""
    max_leaked: int | None
    max_flops: int | None
    max_time: int | None
    group_by_input_shape: bool
    top_level_events_only: bool


_KEYWORD_DEFAULTS = {p.name: p.default for p in inspect.signature(profile).parameters.values()}


def marker_help() -> str:
    """The ``markers`` ini line: signature with defaults, then the docstring."""
    params = ", ".join(
        f"{p.name}={p.default!r}" for p in inspect.signature(profile).parameters.values()
    )
    doc = " ".join((profile.__doc__ or "").split())
    return f"{MARKER_NAME}({params}): {doc}"


def settings_for(
    marker_args: tuple[object, ...] | None,
    marker_kwargs: Mapping[str, object] | None,
    options: OpprofOptions,
) -> TestSettings:
    """Settings of a test given its closest ``profile`` marker (None if unmarked).

    Raise :class:`MarkerUsageError` naming every unknown keyword, or the keyword
    whose value is wrong and the values it accepts.
    """
    if marker_args is None or marker_kwargs is None:
        # One frozen object for every unmarked test of the session: each item keeps its
        # settings in its stash, and 20,000 copies were 20,000 more objects for every
        # full garbage collection to walk (numpy's tests run tens of them).
        global _unmarked
        if _unmarked is None or _unmarked[0] is not options:
            _unmarked = (options, _defaults(options, marked=False))
        return _unmarked[1]
    # The keywords are named as TestSettings' fields; a keyword not given keeps the default.
    return dataclasses.replace(
        _defaults(options, marked=True), **marker_values(marker_args, marker_kwargs)
    )


def marker_values(
    marker_args: tuple[object, ...], marker_kwargs: Mapping[str, object]
) -> dict[str, Any]:
    """A ``profile`` marker's keywords, each parsed, by name: those given, less a None that
    keeps the session's value.  Needs no session (the plugin checks every marker at
    collection, with ``--opprof`` or without it) and loads neither numpy nor the native
    core.

    Raise :class:`MarkerUsageError` naming every unknown keyword, or the keyword
    whose value is wrong and the values it accepts.
    """
    accepted = list(_KEYWORD_DEFAULTS)
    if marker_args:
        raise MarkerUsageError(
            f"@pytest.mark.{MARKER_NAME} takes keyword arguments only, got positional "
            f"{', '.join(repr(a) for a in marker_args)}; accepted keywords: {', '.join(accepted)}"
        )
    unknown = sorted(k for k in marker_kwargs if k not in accepted)
    if unknown:
        raise MarkerUsageError(
            f"@pytest.mark.{MARKER_NAME} got unknown keyword(s) {', '.join(unknown)}; "
            f"accepted keywords: {', '.join(accepted)}"
        )
    return {
        name: _parsed(name, value)
        for name, value in marker_kwargs.items()
        if not (value is None and _KEYWORD_DEFAULTS[name] is None)
    }


_unmarked: tuple[OpprofOptions, TestSettings] | None = None
"""The last session's options and its unmarked tests' settings (one session at a time)."""


def _defaults(options: OpprofOptions, *, marked: bool) -> TestSettings:
    return TestSettings(
        marked=marked,
        row_limit=options.row_limit,
        sort_by="self_cpu_time_total",
        time_unit=None,
        rounds=options.rounds,
        warmup=options.warmup,
        time_tolerance=None,
        memory_tolerance=None,
        flops_tolerance=None,
        max_memory=None,
        max_leaked=None,
        max_flops=None,
        max_time=None,
        group_by_input_shape=False,
        top_level_events_only=False,
    )


def _parsed(name: str, value: object) -> object:
    """``value`` of the keyword ``name`` parsed: a keyword named like a setting as
    ``--opprof-<name>`` is, the others by their own parser."""
    try:
        return _PARSERS[name](value)
    except (OptionValueError, ValueError, TypeError) as exc:
        raise MarkerUsageError(f"@pytest.mark.{MARKER_NAME}({name}=...): {exc}") from None


def _parse_sort_by(value: object) -> str:
    # The table module imports tabulate: load it only when a marker asks for sorting.
    from pytest_opprof.render.table import sort_attribute

    if not isinstance(value, str):
        raise OptionValueError(
            f"expected the name of a column such as 'cpu_time_total', got {value!r}"
        )
    sort_attribute(value)
    return value


def _parse_time_unit(value: object) -> str | None:
    if value is not None and not isinstance(value, str):
        raise OptionValueError(f"expected None or a unit such as 'ms', got {value!r}")
    check_time_unit(value)
    return value


def _parse_bool(value: object) -> bool:
    if not isinstance(value, bool):
        raise OptionValueError(f"expected True or False, got {value!r}")
    return value


_PARSERS: dict[str, Callable[[object], object]] = {
    "row_limit": ROW_LIMIT.parse,
    "sort_by": _parse_sort_by,
    "time_unit": _parse_time_unit,
    "rounds": ROUNDS.parse,
    "warmup": WARMUP.parse,
    "time_tolerance": TIME_TOLERANCE.parse,
    "memory_tolerance": MEMORY_TOLERANCE.parse,
    "flops_tolerance": FLOPS_TOLERANCE.parse,
    "max_memory": MAX_MEMORY.parse,
    "max_leaked": MAX_LEAKED.parse,
    "max_flops": MAX_FLOPS.parse,
    "max_time": MAX_TIME.parse,
    "group_by_input_shape": _parse_bool,
    "top_level_events_only": _parse_bool,
}
assert set(_PARSERS) == set(_KEYWORD_DEFAULTS), "a keyword of profile() without its parser"
