"""Command-line options and ini settings of the plugin, parsed and validated once.

Every flag lives in the ``opprof`` group and is spelled ``--opprof-*``; settings a
project would fix have an ``opprof_*`` ini twin.  A value given on the command line
wins over the ini value, which wins over the default.  Bad values are a
``pytest.UsageError`` naming the option (or ini key) and the accepted forms.

This module imports neither numpy nor the native core: without ``--opprof`` the
plugin must cost nothing.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import pytest

from pytest_opprof.errors import OpprofError

T = TypeVar("T")

DEFAULT_ROW_LIMIT = 20
DEFAULT_ROUNDS = 1
DEFAULT_WARMUP = 0


class OptionValueError(OpprofError, ValueError):
    """A value does not parse; the message states the accepted forms."""


def parse_positive_int(text: object) -> int:
    """An integer >= 1 from an int or its decimal text."""
    value = _parse_int(text)
    if value < 1:
        raise OptionValueError(f"expected a positive integer such as 20, got {text!r}")
    return value


def parse_non_negative_int(text: object) -> int:
    """An integer >= 0 from an int or its decimal text."""
    value = _parse_int(text)
    if value < 0:
        raise OptionValueError(f"expected an integer >= 0 such as 1, got {text!r}")
    return value


def _parse_int(text: object) -> int:
    if isinstance(text, bool):
        raise OptionValueError(f"expected an integer, got {text!r}")
    if isinstance(text, int):
        return text
    if isinstance(text, str):
        try:
            return int(text.strip())
        except ValueError:
            pass
    raise OptionValueError(f"expected an integer, got {text!r}")


def parse_capture(text: object) -> tuple[str, ...]:
    """Source names from ``"numpy,torch"``; ``"none"`` stands alone.

    Whether each name is a known source is checked when the sources are resolved
    (that needs the sources registry, which imports numpy).
    """
    if not isinstance(text, str):
        raise OptionValueError(f"expected a comma-separated list such as numpy,torch; got {text!r}")
    names = tuple(part.strip() for part in text.split(",") if part.strip())
    if not names:
        raise OptionValueError(
            f"expected a comma-separated list such as numpy,torch or none, got {text!r}"
        )
    if "none" in names and len(names) > 1:
        raise OptionValueError(f"'none' cannot be combined with other sources, got {text!r}")
    return names


def _argparse_type(parse: Callable[[object], T]) -> Callable[[str], T]:
    """Wrap a parser so argparse reports its message next to the option's name."""

    def convert(text: str) -> T:
        try:
            return parse(text)
        except OptionValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    convert.__name__ = parse.__name__
    return convert


def add_options(parser: pytest.Parser) -> None:
    """Declare the ``opprof`` option group and its ini twins."""
    group = parser.getgroup("opprof", "op-level profiling (pytest-opprof)")
    group.addoption(
        "--opprof",
        action="store_true",
        default=False,
        help="profile the call phase of every test (nothing is installed without it)",
    )
    group.addoption(
        "--opprof-capture",
        metavar="LIST",
        type=_argparse_type(parse_capture),
        default=None,
        help="op sources to capture, comma-separated: numpy, torch, or none "
        "(default: every source whose library is importable)",
    )
    group.addoption(
        "--opprof-row-limit",
        metavar="N",
        type=_argparse_type(parse_positive_int),
        default=None,
        help=f"rows of each printed op table (default {DEFAULT_ROW_LIMIT})",
    )
    group.addoption(
        "--opprof-trace-dir",
        metavar="DIR",
        default=None,
        help="write a Chrome/Perfetto trace (JSON) per profiled test into DIR",
    )
    group.addoption(
        "--opprof-rounds",
        metavar="N",
        type=_argparse_type(parse_positive_int),
        default=None,
        help=f"measured runs of each test body; the median run is reported "
        f"(default {DEFAULT_ROUNDS})",
    )
    group.addoption(
        "--opprof-warmup",
        metavar="N",
        type=_argparse_type(parse_non_negative_int),
        default=None,
        help=f"unmeasured runs of each test body before the measured ones "
        f"(default {DEFAULT_WARMUP})",
    )
    group.addoption(
        "--opprof-python-memory",
        action="store_true",
        default=None,
        help="also count Python object allocations (slower; numpy data is always counted)",
    )
    group.addoption(
        "--opprof-cuda-sample-rate",
        metavar="N",
        type=_argparse_type(parse_positive_int),
        default=None,
        help="time every Nth call of each op with CUDA events and extrapolate by the count "
        "(default 1: every call; only when the process uses CUDA)",
    )
    parser.addini("opprof_capture", "default for --opprof-capture", type="string", default="")
    parser.addini(
        "opprof_cuda_sample_rate",
        "default for --opprof-cuda-sample-rate",
        type="string",
        default="",
    )
    parser.addini("opprof_row_limit", "default for --opprof-row-limit", type="string", default="")
    parser.addini("opprof_trace_dir", "default for --opprof-trace-dir", type="string", default="")
    parser.addini("opprof_rounds", "default for --opprof-rounds", type="string", default="")
    parser.addini("opprof_warmup", "default for --opprof-warmup", type="string", default="")
    parser.addini(
        "opprof_python_memory", "default for --opprof-python-memory", type="bool", default=False
    )


@dataclass(frozen=True)
class OpprofOptions:
    """The session-wide settings, command line over ini over default."""

    capture: tuple[str, ...] | None
    row_limit: int
    trace_dir: Path | None
    rounds: int
    warmup: int
    python_memory: bool
    cuda_sample_rate: int = 1


def is_enabled(config: pytest.Config) -> bool:
    """Whether ``--opprof`` was given."""
    return bool(config.getoption("opprof"))


def read_options(config: pytest.Config) -> OpprofOptions:
    """Resolve every setting; raise ``pytest.UsageError`` naming a bad one."""
    return OpprofOptions(
        capture=_setting(config, "capture", parse_capture, None),
        row_limit=_setting(config, "row_limit", parse_positive_int, DEFAULT_ROW_LIMIT),
        trace_dir=_trace_dir(config),
        rounds=_setting(config, "rounds", parse_positive_int, DEFAULT_ROUNDS),
        warmup=_setting(config, "warmup", parse_non_negative_int, DEFAULT_WARMUP),
        python_memory=_python_memory(config),
        cuda_sample_rate=_setting(config, "cuda_sample_rate", parse_positive_int, 1),
    )


def _setting(config: pytest.Config, name: str, parse: Callable[[object], T], default: T) -> T:
    # argparse already validated a command-line value.
    given = config.getoption(f"opprof_{name}")
    if given is not None:
        return given  # type: ignore[no-any-return]
    text = str(config.getini(f"opprof_{name}")).strip()
    if not text:
        return default
    try:
        return parse(text)
    except OptionValueError as exc:
        raise pytest.UsageError(f"ini setting opprof_{name} = {text!r}: {exc}") from None


def _trace_dir(config: pytest.Config) -> Path | None:
    given = config.getoption("opprof_trace_dir")
    if given:
        # Like --junitxml: relative to where pytest was invoked.
        return (config.invocation_params.dir / str(given)).resolve()
    text = str(config.getini("opprof_trace_dir")).strip()
    if not text:
        return None
    # An ini path is relative to the ini file, so it means the same from any directory.
    base = config.inipath.parent if config.inipath is not None else config.rootpath
    return (base / text).resolve()


def _python_memory(config: pytest.Config) -> bool:
    given = config.getoption("opprof_python_memory")
    if given is not None:
        return bool(given)
    try:
        return bool(config.getini("opprof_python_memory"))
    except ValueError as exc:
        raise pytest.UsageError(
            f"ini setting opprof_python_memory: expected true or false ({exc})"
        ) from None
