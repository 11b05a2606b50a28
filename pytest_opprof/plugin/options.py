"""Command-line options and ini settings of the plugin, declared once and parsed once.

:data:`SETTINGS` declares each setting: its name, parser, default and help.  From it
:func:`add_options` adds the ``--opprof-*`` flags (group ``opprof``) and their
``opprof_*`` ini twins, :func:`read_options` resolves them (command line over ini
over default), and the ``profile`` marker parses its keywords of the same names with
the same parsers (``marker.py``).  Bad values are a ``pytest.UsageError`` naming the
option (or ini key) and the accepted forms.

This module imports neither numpy nor the native core: without ``--opprof`` the
plugin must cost nothing.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, Literal, TypeVar

import pytest

from pytest_opprof.errors import OptionValueError
from pytest_opprof.gate.budget_forms import (
    FLOPS_FORMS,
    SIZE_FORMS,
    TIME_FORMS,
    parse_bytes,
    parse_flops,
    parse_time_ns,
)
from pytest_opprof.gate.tolerance import (
    DEFAULT_AB_TIME_TOLERANCE,
    DEFAULT_COUNT_TOLERANCE,
    DEFAULT_FLOPS_TOLERANCE,
    DEFAULT_MAX_SPEED_CHANGE,
    DEFAULT_MAX_WAIT,
    DEFAULT_MEMORY_TOLERANCE,
    DEFAULT_MIN_TIME_NS,
    DEFAULT_ROW_LIMIT,
    DEFAULT_TIME_STATISTIC,
    DEFAULT_TIME_TOLERANCE,
    DURATION_FORMS,
    TOLERANCE_FORMS,
    argparse_type,
    parse_duration_ns,
    parse_non_negative_int,
    parse_positive_int,
    parse_time_statistic,
    parse_tolerance,
    parse_tolerance_or_off,
)
from pytest_opprof.plugin.blas_threads import BlasThreads, blas_threads_for
from pytest_opprof.plugin.output_paths import check_outputs
from pytest_opprof.plugin.traces import usable_trace_dir

if TYPE_CHECKING:
    # gate.session imports numpy (through the verdict): loaded by read_gate_options only.
    from pytest_opprof.gate.session import GateOptions

T = TypeVar("T")

DEFAULT_ROUNDS: int | None = None
"""``auto``: ``AUTO_ROUNDS`` rounds for a test whose first round takes at least the time
floor (``--opprof-min-time``) and whose times can be judged (a gate run stops from
``time_min_rounds`` on once the verdict is settled: ``rounds.settled``), one round
otherwise; then ``CONFIRM_ROUNDS`` more when the verdict on them is ``time_undecided`` (a
time beyond its tolerance: verdict.py), and the verdict is on all of them."""
AUTO_ROUNDS = 5
CONFIRM_ROUNDS = 4
DEFAULT_WARMUP = 0
DEFAULT_MAX_EVENTS = 4 * 1024 * 1024
"""Events one round keeps (the native core's default capacity); later ones are dropped
and counted, and the verdict then judges no op figure of that test."""
EVENT_PEAK_BYTES = 130
"""Peak memory per recorded event, measured (tests/test_event_memory.py: 143 at 2^19
events, 131 at 2^20, 123 at the default limit, ~520 MB): an event is 96 bytes in the
native buffer; the drain frees the buffer's chunks as it copies them, so the copy and
the model's working arrays mostly reuse their pages."""
DEFAULT_BASELINE_DIR = "baselines"


MAX_ROUNDS = 1000
"""More measured rounds than any verdict needs (its statistics settle within tens), and
each one runs the whole test body: a typo such as 99999999999 would never end."""
MAX_WARMUP = 1000
"""Unmeasured runs, bounded for the same reason as the rounds."""
MAX_EVENTS_LIMIT = 2**32
"""At about 176 bytes each in use (88 recorded, as many again drained), 2**32 events are
some 750 GB, more than any machine holds; and the native core counts in int64."""


def bounded_int(
    low: int, high: int, *, example: int, high_note: str = "", other_forms: str = ""
) -> Callable[[object], int]:
    """A parser of an integer from ``low`` (0 or 1) to ``high``, an int or its decimal
    text: the integer settings' one form.  Its message states the accepted forms: the
    ``other_forms`` a caller reads first (``auto``), an ``example`` and the bound, with
    ``high_note`` saying it another way (``2**32``)."""
    kind = "a positive integer" if low == 1 else f"an integer >= {low}"
    bound = f"{high}, {high_note}" if high_note else str(high)
    forms = f"{other_forms} or {kind}" if other_forms else kind

    def parse(text: object) -> int:
        try:
            number = parse_non_negative_int(text)
        except OptionValueError:
            number = low - 1
        if not low <= number <= high:
            raise OptionValueError(
                f"expected {forms} such as {example} (at most {bound}), got {text!r}"
            )
        return number

    return parse


_rounds_number = bounded_int(1, MAX_ROUNDS, example=5, other_forms="auto")


def parse_rounds(text: object) -> int | None:
    """``auto`` (None) or an integer from 1 to :data:`MAX_ROUNDS`: the ``--opprof-rounds``
    forms."""
    if isinstance(text, str) and text.strip().lower() == "auto":
        return None
    return _rounds_number(text)


parse_warmup = bounded_int(0, MAX_WARMUP, example=1)
"""An integer from 0 to :data:`MAX_WARMUP`: the ``--opprof-warmup`` forms."""
parse_max_events = bounded_int(1, MAX_EVENTS_LIMIT, example=DEFAULT_MAX_EVENTS, high_note="2**32")
"""An integer from 1 to :data:`MAX_EVENTS_LIMIT`: the ``--opprof-max-events`` forms."""

MAX_CUDA_SAMPLE_RATE = 2**31
"""The native core counts calls per name in int64; a rate beyond this samples nothing anyway."""
parse_cuda_sample_rate = bounded_int(1, MAX_CUDA_SAMPLE_RATE, example=10, high_note="2**31")
"""An integer from 1 to :data:`MAX_CUDA_SAMPLE_RATE`: the ``--opprof-cuda-sample-rate``
forms (2**63 overflowed the native int64 in every test)."""


def rounds_text(rounds: int | None) -> str:
    """How a rounds setting reads: ``auto`` or its number."""
    return "auto" if rounds is None else str(rounds)


SUMMARY_CHOICES = ("attention", "all")


def parse_summary(text: object) -> str:
    value = str(text).strip().lower() if isinstance(text, str) else ""
    if value not in SUMMARY_CHOICES:
        raise OptionValueError(f"expected attention or all, got {text!r}")
    return value


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


BLAS_THREADS_FORMS = "a positive integer such as 1, auto or keep"
DEFAULT_BLAS_THREADS: BlasThreads = 1
"""Measured on 2 cores (BENCHMARKS.md, "BLAS thread pools"): beside any other work,
another pytest-xdist worker included, a 2-thread pool made LAPACK calls 3-363x slower
and scattered their times tenfold, while one thread was steady everywhere and cost only
large matmuls (20-45%).  A fixed size rather than ``auto``: ``auto`` follows the
load at session start, so a baseline and a later run could measure with different pool
sizes, and their times would not be comparable."""


def parse_blas_threads(value: object) -> BlasThreads:
    """``keep``, ``auto`` or a pool size >= 1: the ``--opprof-blas-threads`` forms."""
    if isinstance(value, str) and value.strip().lower() in ("auto", "keep"):
        return "auto" if value.strip().lower() == "auto" else "keep"
    try:
        return parse_positive_int(value)
    except OptionValueError:
        raise OptionValueError(f"expected {BLAS_THREADS_FORMS}, got {value!r}") from None


def _parse_path(text: object) -> Path:
    if not isinstance(text, str) or not text.strip():
        raise OptionValueError(f"expected a path, got {text!r}")
    return Path(text.strip())


def _parse_flag(value: object) -> bool:
    if not isinstance(value, bool):
        raise OptionValueError(f"expected true or false, got {value!r}")
    return value


Kind = Literal["value", "flag", "path"]


@dataclass(frozen=True)
class Setting(Generic[T]):
    """One setting: ``--opprof-<name>``, its ini twin ``opprof_<name>`` and, with
    ``marker``, the ``profile`` marker's keyword ``<name>``, all parsed by ``parse``."""

    name: str
    parse: Callable[[object], T]
    default: T
    help: str
    metavar: str | None = None
    kind: Kind = "value"
    """``value``: parsed text; ``flag``: ``store_true`` (ini: true/false); ``path``:
    relative to the invocation directory, or in ini to the ini file's directory."""
    ini: bool = True
    marker: bool = False

    @property
    def option(self) -> str:
        """The command-line flag, ``--opprof-<name>``."""
        return f"--opprof-{self.name.replace('_', '-')}"

    @property
    def key(self) -> str:
        """The ini key and the option's dest, ``opprof_<name>``."""
        return f"opprof_{self.name}"

    def check(self, text: str) -> str:
        """The command-line text, validated; kept as text so that ``--opprof-rounds auto``
        (None when parsed) still reads as given, over the ini value."""
        self.parse(text)
        return text

    def read(self, config: pytest.Config) -> T:
        """The value: command line over ini over default; a bad ini value is a UsageError."""
        given = config.getoption(self.key)
        if given is not None and given != "":  # an empty path on the command line is none
            return self._resolve(config.invocation_params.dir, self.parse(given))
        if not self.ini:
            return self.default
        if self.kind == "flag":
            try:
                return self.parse(bool(config.getini(self.key)))
            except (ValueError, pytest.UsageError) as exc:  # pytest 9 raises the latter
                raise pytest.UsageError(
                    f"ini setting {self.key}: expected true or false ({exc})"
                ) from None
        text = str(config.getini(self.key)).strip()
        if not text:
            return self.default
        try:
            value = self.parse(text)
        except OptionValueError as exc:
            raise pytest.UsageError(f"ini setting {self.key} = {text!r}: {exc}") from None
        # A path in the ini file means the same from any directory.
        base = config.inipath.parent if config.inipath is not None else config.rootpath
        return self._resolve(base, value)

    def _resolve(self, base: Path, value: T) -> T:
        if self.kind != "path":
            return value
        # Like --junitxml.  abspath, not resolve(): the path is shown as given, and a
        # symlink there is followed only when written (gate/files.py).
        return Path(os.path.abspath(base / str(value)))  # type: ignore[return-value]


def _tolerance(metric: str, default: float, what: str, ab: float | None = None) -> Setting[float]:
    # argparse %-formats help texts.
    forms = TOLERANCE_FORMS.replace("%", "%%")
    in_ab = f"; {ab:g} in an A/B run, --opprof-against" if ab is not None else ""
    return Setting(
        f"{metric}_tolerance",
        parse_tolerance,
        default,
        f"allowed relative {what}: {forms} (default {default:g}{in_ab})",
        metavar="X",
        marker=True,
    )


CAPTURE: Setting[tuple[str, ...] | None] = Setting(
    "capture",
    parse_capture,
    None,
    "op sources to capture, comma-separated: numpy, scipy, sklearn, torch, or none "
    "(default: every source whose library is importable)",
    metavar="LIST",
)
ROW_LIMIT = Setting(
    "row_limit",
    parse_positive_int,
    DEFAULT_ROW_LIMIT,
    f"rows of each printed op table (default {DEFAULT_ROW_LIMIT})",
    metavar="N",
    marker=True,
)
TRACE_DIR: Setting[Path | None] = Setting(
    "trace_dir",
    _parse_path,
    None,
    "write a Chrome/Perfetto trace (JSON) per profiled test into DIR",
    metavar="DIR",
    kind="path",
)
TRACE_WHICH_CHOICES = ("all", "regressed")


def parse_trace_which(value: object) -> str:
    """``all`` or ``regressed``: which profiled tests get a trace in ``--opprof-trace-dir``."""
    name = value.strip().lower() if isinstance(value, str) else value
    if name not in TRACE_WHICH_CHOICES:
        raise OptionValueError(f"expected one of {', '.join(TRACE_WHICH_CHOICES)}, got {value!r}")
    return str(name)


TRACE_WHICH = Setting(
    "trace_which",
    parse_trace_which,
    "all",
    "which tests get a trace in --opprof-trace-dir: all profiled tests, or only those "
    "whose verdict regressed (a trace is 0.1-1 MB; default all: the directory is the ask)",
    metavar="WHICH",
)
ROUNDS = Setting(
    "rounds",
    parse_rounds,
    DEFAULT_ROUNDS,
    f"measured runs of each test body, or auto: {AUTO_ROUNDS} for a test whose "
    "first run takes at least --opprof-min-time and whose times can be judged (in a "
    "gate run, fewer once its time verdict is settled), "
    f"{CONFIRM_ROUNDS} more to confirm a time beyond its tolerance, "
    "else 1; the median run is reported; "
    f"times are judged from 3 rounds on (default {rounds_text(DEFAULT_ROUNDS)})",
    metavar="N",
    marker=True,
)
WARMUP = Setting(
    "warmup",
    parse_warmup,
    DEFAULT_WARMUP,
    f"unmeasured runs of each test body before the measured ones (default {DEFAULT_WARMUP})",
    metavar="N",
    marker=True,
)
PYTHON_MEMORY = Setting(
    "python_memory",
    _parse_flag,
    False,
    "also count Python object allocations (slower; numpy data is always counted)",
    kind="flag",
)
CUDA_SAMPLE_RATE = Setting(
    "cuda_sample_rate",
    parse_cuda_sample_rate,
    1,
    "time every Nth call of each op with CUDA events and extrapolate by the count "
    "(default 1: every call; only when the process uses CUDA)",
    metavar="N",
)
MAX_EVENTS = Setting(
    "max_events",
    parse_max_events,
    DEFAULT_MAX_EVENTS,
    f"events one round of a test keeps (about {EVENT_PEAK_BYTES} bytes each at the peak, "
    "allocated as recorded; a test holds one round's, whatever its rounds); a "
    "round that records more drops the rest, is flagged in the summary and has no op "
    f"figure judged (default {DEFAULT_MAX_EVENTS})",
    metavar="N",
)
BLAS_THREADS: Setting[BlasThreads] = Setting(
    "blas_threads",
    parse_blas_threads,
    DEFAULT_BLAS_THREADS,
    "size of the BLAS/OpenMP thread pools (OpenBLAS, MKL, OpenMP) in each test's "
    "rounds, restored after: N, keep (leave them), or auto (1 under pytest-xdist with "
    "several workers or when the load average is at least half the cores, else keep). "
    "1 by default: measured on 2 cores, a 2-thread pool beside other work (another "
    "xdist worker, a busy machine) made LAPACK calls 3-363x slower and scattered their "
    "times; one thread cost only large matmuls, 20-45%% (BENCHMARKS.md) "
    f"(default {DEFAULT_BLAS_THREADS})",
    metavar="N",
)
UPDATE_BASELINES = Setting(
    "update_baselines",
    _parse_flag,
    False,
    "write baselines for profiled tests that passed (implies --opprof); "
    "regressions are reported, not failed",
    kind="flag",
    ini=False,
)
BASELINE_DIR: Setting[Path | None] = Setting(
    "baseline_dir",
    _parse_path,
    None,
    f"where baselines live (default {DEFAULT_BASELINE_DIR}/ under the rootdir)",
    metavar="DIR",
    kind="path",
)
TIME_TOLERANCE = _tolerance("time", DEFAULT_TIME_TOLERANCE, "slowdown", DEFAULT_AB_TIME_TOLERANCE)
MEMORY_TOLERANCE = _tolerance("memory", DEFAULT_MEMORY_TOLERANCE, "growth of memory figures")
FLOPS_TOLERANCE = _tolerance("flops", DEFAULT_FLOPS_TOLERANCE, "growth of FLOPs")
COUNT_TOLERANCE: Setting[float | None] = Setting(
    "count_tolerance",
    parse_tolerance_or_off,
    DEFAULT_COUNT_TOLERANCE,
    "judge a test's op count, allowing this relative growth: "
    + TOLERANCE_FORMS.replace("%", "%%")
    + ", or off (the default: counts are reported, not judged; numpy and capture upgrades "
    "move them)",
    metavar="X",
)
MIN_TIME = Setting(
    "min_time",
    parse_duration_ns,
    DEFAULT_MIN_TIME_NS,
    f"times under this on both sides are not judged: {DURATION_FORMS} "
    f"(default {DEFAULT_MIN_TIME_NS // 1000}us)",
    metavar="DURATION",
)
MAX_WAIT = Setting(
    "max_wait",
    parse_tolerance,
    DEFAULT_MAX_WAIT,
    "judge times on rounds whose thread waited for a CPU at most this share of their "
    "wall time (a busy machine); rounds that waited more are replaced under auto rounds, "
    "and a test without enough clean rounds is judged on work time (wall time less the "
    "wait), or has its time not judged when its rounds waited too long: "
    + TOLERANCE_FORMS.replace("%", "%%")
    + f" (default {DEFAULT_MAX_WAIT * 100:g}%%; 100%% judges every round)",
    metavar="X",
)
MAX_SPEED_CHANGE: Setting[float | None] = Setting(
    "max_speed_change",
    parse_tolerance_or_off,
    DEFAULT_MAX_SPEED_CHANGE,
    "leave a test's time not judged when the machine-speed references ran more than this "
    "much slower or faster than when its baseline was recorded (scaling across a larger "
    "change is not accurate to the time tolerance): "
    + TOLERANCE_FORMS.replace("%", "%%")
    + f", or off (default {DEFAULT_MAX_SPEED_CHANGE * 100:g}%%)",
    metavar="X",
)
TIME_STATISTIC = Setting(
    "time_statistic",
    parse_time_statistic,
    DEFAULT_TIME_STATISTIC,
    "how each time's rounds are judged, on both sides: median (with the speed "
    "references, the steadiest) or min (the fastest round; best for raw times) "
    f"(default {DEFAULT_TIME_STATISTIC})",
    metavar="STAT",
)
FORCE_TIME = Setting(
    "force_time",
    _parse_flag,
    False,
    "judge times even when the baseline was recorded on another machine "
    "or either side has fewer than 3 rounds",
    kind="flag",
)
RAW_TIMES = Setting(
    "raw_times",
    _parse_flag,
    False,
    "judge times as measured, not scaled to the baseline's machine speed "
    "(the speed reference run beside every round)",
    kind="flag",
)
WARN_ONLY = Setting(
    "warn_only",
    _parse_flag,
    False,
    "report regressions (and unusable baselines) without failing tests",
    kind="flag",
)
REQUIRE_BASELINES = Setting(
    "require_baselines",
    _parse_flag,
    False,
    "fail profiled tests that have no baseline yet",
    kind="flag",
)
REPORT: Setting[Path | None] = Setting(
    "report",
    _parse_path,
    None,
    "write the run's comparison as JSON (schema in the README)",
    metavar="PATH",
    kind="path",
    ini=False,
)
REPORT_DETAILS = Setting(
    "report_details",
    _parse_flag,
    False,
    "write every op and each time's statistics in the JSON report (default: the compact "
    "form, a test's figures as its baseline keeps them, about 2 KB a test)",
    kind="flag",
)
MARKDOWN: Setting[Path | None] = Setting(
    "markdown",
    _parse_path,
    None,
    "write the run's comparison as Markdown (CI step summaries, PR comments)",
    metavar="PATH",
    kind="path",
    ini=False,
)
SUMMARY = Setting(
    "summary",
    parse_summary,
    "attention",
    "which profiled tests get a line in the terminal summary: attention (regressed, "
    "improved, the first new ones, not judged, marked, and the slowest; the default) or all "
    "(so does -v)",
    metavar="WHICH",
)
HTML: Setting[Path | None] = Setting(
    "html",
    _parse_path,
    None,
    "write the run as one self-contained HTML page (needs the html extra: Jinja2)",
    metavar="PATH",
    kind="path",
)
HISTORY: Setting[Path | None] = Setting(
    "history",
    _parse_path,
    None,
    "append this run's figures (per test and op, with the commit and machine) to the "
    "history in DIR, and fail a test whose figures crept beyond tolerance against it; "
    "pytest-opprof history DIR finds where they stepped",
    metavar="DIR",
    kind="path",
)


def _budget(
    name: str, parse: Callable[[object], int], what: str, forms: str
) -> Setting[int | None]:
    return Setting(
        f"max_{name}",
        parse,
        None,
        f"fail a profiled test whose {what} is beyond this, with or without a baseline "
        f"(the marker's max_{name} overrides it for its test): {forms}",
        metavar="LIMIT",
        marker=True,
    )


MAX_MEMORY = _budget("memory", parse_bytes, "peak memory", SIZE_FORMS)
MAX_LEAKED = _budget("leaked", parse_bytes, "memory still held at its end", SIZE_FORMS)
MAX_FLOPS = _budget("flops", parse_flops, "FLOP count", FLOPS_FORMS)
MAX_TIME = _budget(
    "time",
    parse_time_ns,
    "wall time (judged as times are: clean rounds or work time, else not judged)",
    TIME_FORMS,
)

SETTINGS: tuple[Setting[Any], ...] = (
    CAPTURE,
    ROW_LIMIT,
    SUMMARY,
    TRACE_DIR,
    TRACE_WHICH,
    ROUNDS,
    WARMUP,
    PYTHON_MEMORY,
    CUDA_SAMPLE_RATE,
    MAX_EVENTS,
    BLAS_THREADS,
    UPDATE_BASELINES,
    BASELINE_DIR,
    TIME_TOLERANCE,
    MEMORY_TOLERANCE,
    FLOPS_TOLERANCE,
    COUNT_TOLERANCE,
    MAX_MEMORY,
    MAX_LEAKED,
    MAX_FLOPS,
    MAX_TIME,
    MIN_TIME,
    MAX_WAIT,
    MAX_SPEED_CHANGE,
    TIME_STATISTIC,
    FORCE_TIME,
    RAW_TIMES,
    WARN_ONLY,
    REQUIRE_BASELINES,
    REPORT,
    REPORT_DETAILS,
    MARKDOWN,
    HTML,
    HISTORY,
)
"""Every setting, in the order ``pytest --help`` lists them."""


def add_options(parser: pytest.Parser) -> None:
    """Declare the ``opprof`` option group and its ini twins."""
    group = parser.getgroup("opprof", "op-level profiling (pytest-opprof)")
    group.addoption(
        "--opprof",
        action="store_true",
        default=False,
        help="profile the call phase of every test (nothing is installed without it)",
    )
    for setting in SETTINGS:
        if setting.kind == "flag":
            # None: not given, so the ini twin decides.
            default = None if setting.ini else False
            group.addoption(setting.option, action="store_true", default=default, help=setting.help)
        elif setting.kind == "path":
            group.addoption(
                setting.option, metavar=setting.metavar, default=None, help=setting.help
            )
        else:
            group.addoption(
                setting.option,
                metavar=setting.metavar,
                type=argparse_type(setting.check),
                default=None,
                help=setting.help,
            )
    for setting in SETTINGS:
        if not setting.ini:
            continue
        if setting.kind == "flag":
            parser.addini(setting.key, f"default for {setting.option}", type="bool", default=False)
        else:
            parser.addini(setting.key, f"default for {setting.option}", type="string", default="")


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
    cuda_sample_rate: int = CUDA_SAMPLE_RATE.default
    max_events: int = MAX_EVENTS.default
    blas_threads: int | None = None
    """The pools' size for the measured rounds (``auto`` resolved), None: left alone."""
    trace_which: str = TRACE_WHICH.default
    """``all`` or ``regressed``: which tests ``trace_dir`` gets a trace of."""
    summary: str = SUMMARY.default
    """Which tests get a line in the terminal summary (``attention`` or ``all``)."""
    history: Path | None = None
    """The history directory this run's figures are appended to (``history/store.py``)."""


def is_enabled(config: pytest.Config) -> bool:
    """Whether ``--opprof`` (or ``--opprof-update-baselines``, which implies it) was given."""
    return bool(config.getoption("opprof") or config.getoption(UPDATE_BASELINES.key))


def read_options(config: pytest.Config) -> OpprofOptions:
    """Resolve every setting; raise ``pytest.UsageError`` naming a bad one."""
    # Resolved once: auto reads the load average, which the gate's record must agree with.
    blas_threads = blas_threads_for(BLAS_THREADS.read(config), config)
    gate = read_gate_options(config, blas_threads=blas_threads)
    trace_dir = TRACE_DIR.read(config)
    # Before the trace directory is made: a refused one is not created either.
    check_outputs(
        [
            (_named(REPORT), gate.report_path),
            (_named(MARKDOWN), gate.markdown_path),
            (_named(HTML), gate.html_path),
            (_named(TRACE_DIR), trace_dir),
        ],
        (_named(BASELINE_DIR), gate.baseline_dir),
    )
    return OpprofOptions(
        capture=CAPTURE.read(config),
        row_limit=ROW_LIMIT.read(config),
        trace_dir=usable_trace_dir(trace_dir, _named(TRACE_DIR)),
        trace_which=TRACE_WHICH.read(config),
        rounds=ROUNDS.read(config),
        warmup=WARMUP.read(config),
        python_memory=PYTHON_MEMORY.read(config),
        cuda_sample_rate=CUDA_SAMPLE_RATE.read(config),
        max_events=MAX_EVENTS.read(config),
        blas_threads=blas_threads,
        gate=gate,
        summary=SUMMARY.read(config),
        history=HISTORY.read(config),
    )


def _named(setting: Setting[T]) -> str:
    """How a message names a setting: its option and its ini key."""
    return f"{setting.option} / {setting.key}"


def read_gate_options(config: pytest.Config, *, blas_threads: int | None = None) -> GateOptions:
    """The baseline comparison's settings, command line over ini over default;
    ``blas_threads`` as :func:`read_options` resolved it."""
    from pytest_opprof.gate.budgets import Budgets
    from pytest_opprof.gate.session import GateOptions

    return GateOptions(
        baseline_dir=BASELINE_DIR.read(config) or config.rootpath / DEFAULT_BASELINE_DIR,
        update=UPDATE_BASELINES.read(config),
        time_tolerance=TIME_TOLERANCE.read(config),
        memory_tolerance=MEMORY_TOLERANCE.read(config),
        flops_tolerance=FLOPS_TOLERANCE.read(config),
        count_tolerance=COUNT_TOLERANCE.read(config),
        min_time_ns=MIN_TIME.read(config),
        time_statistic=TIME_STATISTIC.read(config),
        force_time=FORCE_TIME.read(config),
        raw_times=RAW_TIMES.read(config),
        max_wait_share=MAX_WAIT.read(config),
        max_speed_change=MAX_SPEED_CHANGE.read(config),
        budgets=Budgets(
            max_memory=MAX_MEMORY.read(config),
            max_leaked=MAX_LEAKED.read(config),
            max_flops=MAX_FLOPS.read(config),
            max_time=MAX_TIME.read(config),
        ),
        warn_only=WARN_ONLY.read(config),
        require_baselines=REQUIRE_BASELINES.read(config),
        report_path=(report := REPORT.read(config)),
        report_details=REPORT_DETAILS.read(config),
        markdown_path=(markdown := MARKDOWN.read(config)),
        html_path=(html := HTML.read(config)),
        blas_threads=blas_threads,
        keep_results=any(path is not None for path in (report, markdown, html)),
    )
