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
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import pytest

from pytest_opprof.errors import OptionValueError
from pytest_opprof.gate.session import GateOptions
from pytest_opprof.gate.tolerance import DURATION_FORMS, TOLERANCE_FORMS, parse_duration_ns
from pytest_opprof.gate.tolerance import parse_tolerance as _parse_tolerance

T = TypeVar("T")

DEFAULT_ROW_LIMIT = 20
DEFAULT_ROUNDS: int | None = None
"""``auto``: ``AUTO_ROUNDS`` rounds for a test whose first round takes at least the time
floor (``--opprof-min-time``) and whose times can be judged, one round otherwise; then
``CONFIRM_ROUNDS`` more when the verdict on them is ``time_undecided`` (a time beyond its
tolerance: verdict.py), and the verdict is on all of them."""
AUTO_ROUNDS = 5
CONFIRM_ROUNDS = 4
DEFAULT_WARMUP = 0
DEFAULT_MAX_EVENTS = 4 * 1024 * 1024
"""Events one round keeps (the native core's default capacity, 88 bytes each); later ones
are dropped and counted, and the verdict then judges no op figure of that test."""
DEFAULT_BASELINE_DIR = "baselines"
# The defaults of verdict.Tolerances (verdict.py imports numpy, which this module must not),
# chosen from bench/verdict_study.py (BENCHMARKS.md, "Verdict quality"): times scaled by the
# machine-speed references are judged by their median round, above 1 ms, at 15%, and only
# from 3 rounds on both sides.
DEFAULT_TIME_TOLERANCE = 0.15
DEFAULT_MEMORY_TOLERANCE = 0.1
DEFAULT_FLOPS_TOLERANCE = 0.0
DEFAULT_MIN_TIME_NS = 1_000_000
DEFAULT_TIME_STATISTIC = "median"
TIME_STATISTICS = ("min", "median")


def parse_positive_int(text: object) -> int:
    """An integer >= 1 from an int or its decimal text."""
    value = _parse_int(text)
    if value < 1:
        raise OptionValueError(f"expected a positive integer such as 20, got {text!r}")
    return value


def parse_rounds(text: object) -> int | None:
    """``auto`` (None) or an integer >= 1: the ``--opprof-rounds`` forms."""
    if isinstance(text, str) and text.strip().lower() == "auto":
        return None
    try:
        return parse_positive_int(text)
    except OptionValueError:
        raise OptionValueError(
            f"expected auto or a positive integer such as 5, got {text!r}"
        ) from None


def _checked_rounds_text(text: object) -> str:
    """The command-line form: validated, kept as text so that ``auto`` still overrides ini."""
    return rounds_text(parse_rounds(text))


def rounds_text(rounds: int | None) -> str:
    """How a rounds setting reads: ``auto`` or its number."""
    return "auto" if rounds is None else str(rounds)


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


def parse_tolerance(text: object) -> float:
    """A relative tolerance >= 0: ``0.2`` or ``20%``."""
    try:
        return _parse_tolerance(text)
    except ValueError as exc:
        raise OptionValueError(str(exc)) from None


def parse_min_time_ns(text: object) -> int:
    """A duration >= 0 in ns from ``50us``, ``0.5ms``, ``200ns``, ``1s`` (a bare number is us)."""
    try:
        return parse_duration_ns(text)
    except ValueError as exc:
        raise OptionValueError(str(exc)) from None


def parse_time_statistic(text: object) -> str:
    """``min`` (the fastest round) or ``median``: how a time's rounds are judged."""
    value = text.strip().lower() if isinstance(text, str) else text
    if value not in TIME_STATISTICS:
        raise OptionValueError(f"expected one of {', '.join(TIME_STATISTICS)}, got {text!r}")
    return str(value)


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
        type=_argparse_type(_checked_rounds_text),
        default=None,
        help=f"measured runs of each test body, or auto: {AUTO_ROUNDS} for a test whose "
        "first run takes at least --opprof-min-time and whose times can be judged, "
        f"{CONFIRM_ROUNDS} more to confirm a time beyond its tolerance, "
        "else 1; the median run is reported; "
        f"times are judged from 3 rounds on (default {rounds_text(DEFAULT_ROUNDS)})",
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
    group.addoption(
        "--opprof-max-events",
        metavar="N",
        type=_argparse_type(parse_positive_int),
        default=None,
        help="events one round of a test keeps (88 bytes each, allocated as recorded); a "
        "round that records more drops the rest, is flagged in the summary and has no op "
        f"figure judged (default {DEFAULT_MAX_EVENTS})",
    )
    _add_gate_options(group)
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
    parser.addini("opprof_max_events", "default for --opprof-max-events", type="string", default="")
    parser.addini(
        "opprof_python_memory", "default for --opprof-python-memory", type="bool", default=False
    )
    for name in ("baseline_dir", "time_tolerance", "memory_tolerance", "flops_tolerance"):
        parser.addini(f"opprof_{name}", f"default for --opprof-{_dashed(name)}", default="")
    parser.addini("opprof_min_time", "default for --opprof-min-time", default="")
    parser.addini("opprof_time_statistic", "default for --opprof-time-statistic", default="")
    for name in ("force_time", "raw_times", "warn_only", "require_baselines"):
        parser.addini(
            f"opprof_{name}", f"default for --opprof-{_dashed(name)}", type="bool", default=False
        )


def _dashed(name: str) -> str:
    return name.replace("_", "-")


# argparse %-formats help texts.
_HELP_TOLERANCE_FORMS = TOLERANCE_FORMS.replace("%", "%%")


def _add_gate_options(group: pytest.OptionGroup) -> None:
    """The baseline comparison: where baselines live, tolerances, reports."""
    group.addoption(
        "--opprof-update-baselines",
        action="store_true",
        default=False,
        help="write baselines for profiled tests that passed (implies --opprof); "
        "regressions are reported, not failed",
    )
    group.addoption(
        "--opprof-baseline-dir",
        metavar="DIR",
        default=None,
        help=f"where baselines live (default {DEFAULT_BASELINE_DIR}/ under the rootdir)",
    )
    for metric, default, what in (
        ("time", DEFAULT_TIME_TOLERANCE, "slowdown"),
        ("memory", DEFAULT_MEMORY_TOLERANCE, "growth of memory figures"),
        ("flops", DEFAULT_FLOPS_TOLERANCE, "growth of FLOPs"),
    ):
        group.addoption(
            f"--opprof-{metric}-tolerance",
            metavar="X",
            type=_argparse_type(parse_tolerance),
            default=None,
            help=f"allowed relative {what}: {_HELP_TOLERANCE_FORMS} (default {default:g})",
        )
    group.addoption(
        "--opprof-min-time",
        metavar="DURATION",
        type=_argparse_type(parse_min_time_ns),
        default=None,
        help=f"times under this on both sides are not judged: {DURATION_FORMS} "
        f"(default {DEFAULT_MIN_TIME_NS // 1000}us)",
    )
    group.addoption(
        "--opprof-time-statistic",
        metavar="STAT",
        type=_argparse_type(parse_time_statistic),
        default=None,
        help="how each time's rounds are judged, on both sides: median (with the speed "
        "references, the steadiest) or min (the fastest round; best for raw times) "
        f"(default {DEFAULT_TIME_STATISTIC})",
    )
    group.addoption(
        "--opprof-force-time",
        action="store_true",
        default=None,
        help="judge times even when the baseline was recorded on another machine "
        "or either side has fewer than 3 rounds",
    )
    group.addoption(
        "--opprof-raw-times",
        action="store_true",
        default=None,
        help="judge times as measured, not scaled to the baseline's machine speed "
        "(the speed reference run beside every round)",
    )
    group.addoption(
        "--opprof-warn-only",
        action="store_true",
        default=None,
        help="report regressions (and unusable baselines) without failing tests",
    )
    group.addoption(
        "--opprof-require-baselines",
        action="store_true",
        default=None,
        help="fail profiled tests that have no baseline yet",
    )
    group.addoption(
        "--opprof-report",
        metavar="PATH",
        default=None,
        help="write the run's comparison as JSON (schema in the README)",
    )
    group.addoption(
        "--opprof-markdown",
        metavar="PATH",
        default=None,
        help="write the run's comparison as Markdown (CI step summaries, PR comments)",
    )


@dataclass(frozen=True)
class OpprofOptions:
    """The session-wide settings, command line over ini over default."""

    capture: tuple[str, ...] | None
    row_limit: int
    trace_dir: Path | None
    rounds: int | None
    """None: auto (``AUTO_ROUNDS`` when the first round reaches the time floor, else 1)."""
    warmup: int
    python_memory: bool
    gate: GateOptions
    cuda_sample_rate: int = 1
    max_events: int = DEFAULT_MAX_EVENTS


def is_enabled(config: pytest.Config) -> bool:
    """Whether ``--opprof`` (or ``--opprof-update-baselines``, which implies it) was given."""
    return bool(config.getoption("opprof") or config.getoption("opprof_update_baselines"))


def read_options(config: pytest.Config) -> OpprofOptions:
    """Resolve every setting; raise ``pytest.UsageError`` naming a bad one."""
    return OpprofOptions(
        capture=_setting(config, "capture", parse_capture, None),
        row_limit=_setting(config, "row_limit", parse_positive_int, DEFAULT_ROW_LIMIT),
        trace_dir=_trace_dir(config),
        rounds=parse_rounds(
            _setting(config, "rounds", _checked_rounds_text, rounds_text(DEFAULT_ROUNDS))
        ),
        warmup=_setting(config, "warmup", parse_non_negative_int, DEFAULT_WARMUP),
        python_memory=_python_memory(config),
        cuda_sample_rate=_setting(config, "cuda_sample_rate", parse_positive_int, 1),
        max_events=_setting(config, "max_events", parse_positive_int, DEFAULT_MAX_EVENTS),
        gate=read_gate_options(config),
    )


def read_gate_options(config: pytest.Config) -> GateOptions:
    """The baseline comparison's settings, command line over ini over default."""
    return GateOptions(
        baseline_dir=_path_setting(config, "baseline_dir")
        or config.rootpath / DEFAULT_BASELINE_DIR,
        update=bool(config.getoption("opprof_update_baselines")),
        time_tolerance=_setting(config, "time_tolerance", parse_tolerance, DEFAULT_TIME_TOLERANCE),
        memory_tolerance=_setting(
            config, "memory_tolerance", parse_tolerance, DEFAULT_MEMORY_TOLERANCE
        ),
        flops_tolerance=_setting(
            config, "flops_tolerance", parse_tolerance, DEFAULT_FLOPS_TOLERANCE
        ),
        min_time_ns=_setting(config, "min_time", parse_min_time_ns, DEFAULT_MIN_TIME_NS),
        time_statistic=_setting(
            config, "time_statistic", parse_time_statistic, DEFAULT_TIME_STATISTIC
        ),
        force_time=_flag(config, "force_time"),
        raw_times=_flag(config, "raw_times"),
        warn_only=_flag(config, "warn_only"),
        require_baselines=_flag(config, "require_baselines"),
        report_path=_cli_path(config, "report"),
        markdown_path=_cli_path(config, "markdown"),
    )


def _cli_path(config: pytest.Config, name: str) -> Path | None:
    given = config.getoption(f"opprof_{name}")
    # Like --junitxml: relative to where pytest was invoked.  abspath, not resolve():
    # a report path that is a symlink is replaced when written, never followed.
    return Path(os.path.abspath(config.invocation_params.dir / str(given))) if given else None


def _path_setting(config: pytest.Config, name: str) -> Path | None:
    """A directory from the command line (relative to the invocation directory) or ini
    (relative to the ini file, so it means the same from any directory)."""
    given = _cli_path(config, name)
    if given is not None:
        return given
    text = str(config.getini(f"opprof_{name}")).strip()
    if not text:
        return None
    base = config.inipath.parent if config.inipath is not None else config.rootpath
    return Path(os.path.abspath(base / text))


def _flag(config: pytest.Config, name: str) -> bool:
    given = config.getoption(f"opprof_{name}")
    if given is not None:
        return bool(given)
    try:
        return bool(config.getini(f"opprof_{name}"))
    except (ValueError, pytest.UsageError) as exc:  # pytest 9 raises the latter
        raise pytest.UsageError(
            f"ini setting opprof_{name}: expected true or false ({exc})"
        ) from None


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
    return _path_setting(config, "trace_dir")


def _python_memory(config: pytest.Config) -> bool:
    return _flag(config, "python_memory")
