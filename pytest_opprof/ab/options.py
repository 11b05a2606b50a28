"""The A/B settings: ``--opprof-against`` and its companions, with their ini twins.

Declared with the plugin's own :class:`~pytest_opprof.plugin.options.Setting`, so they
read and fail as every other setting does.  No numpy, no native core: loaded by every
pytest run through the plugin.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from pytest_opprof.errors import OptionValueError
from pytest_opprof.gate.tolerance import argparse_type, parse_positive_int
from pytest_opprof.plugin.options import TIME_TOLERANCE, Setting

DEFAULT_MAX_PAIRS = 12
MAX_PAIRS_LIMIT = 1000
DEFAULT_PROCESSES = 2
MAX_PROCESSES = 8


def _parse_ref(text: object) -> str:
    if not isinstance(text, str) or not text.strip() or text.strip().startswith("-"):
        raise OptionValueError(f"expected a git revision (a branch, tag or commit), got {text!r}")
    return text.strip()


def _parse_python(text: object) -> Path:
    if not isinstance(text, str) or not text.strip():
        raise OptionValueError(f"expected the path of a Python interpreter, got {text!r}")
    return Path(text.strip())


LAYOUTS = ("shuffled", "fixed")


def _parse_layout(text: object) -> str:
    if not isinstance(text, str) or text.strip() not in LAYOUTS:
        raise OptionValueError(f"expected one of {', '.join(LAYOUTS)}, got {text!r}")
    return text.strip()


ORDERS = ("alternate", "abba")


def _parse_order(text: object) -> str:
    if not isinstance(text, str) or text.strip() not in ORDERS:
        raise OptionValueError(f"expected one of {', '.join(ORDERS)}, got {text!r}")
    return text.strip()


def _parse_max_pairs(text: object) -> int:
    value = parse_positive_int(text)
    if value > MAX_PAIRS_LIMIT:
        raise OptionValueError(f"expected an integer from 1 to {MAX_PAIRS_LIMIT}, got {text!r}")
    return value


def _parse_processes(text: object) -> int:
    value = parse_positive_int(text)
    if value > MAX_PROCESSES:
        raise OptionValueError(f"expected an integer from 1 to {MAX_PROCESSES}, got {text!r}")
    return value


AGAINST: Setting[str | None] = Setting(
    "against",
    _parse_ref,
    None,
    "A/B: judge times against the git revision REF (origin/main, a merge-base, a tag), "
    "its tests run from a worktree in a second process, round by round in alternation "
    "with this tree's on this machine; no baselines needed",
    metavar="REF",
)
AGAINST_PYTHON: Setting[Path | None] = Setting(
    "against_python",
    _parse_python,
    None,
    "A/B: run the base side under this Python (a virtual environment where the base, or "
    "another version of a dependency, is installed; default: this one)",
    metavar="PATH",
    kind="path",
)
AB_MAX_PAIRS = Setting(
    "ab_max_pairs",
    _parse_max_pairs,
    DEFAULT_MAX_PAIRS,
    f"A/B: most base/head round pairs for a test whose time is still undecided "
    f"(default {DEFAULT_MAX_PAIRS})",
    metavar="N",
)
AB_MIN_PAIRS = Setting(
    "ab_min_pairs",
    _parse_max_pairs,
    1,
    "A/B: pairs every test runs before the adaptive rule decides whether to run more (default 1)",
    metavar="N",
)
AB_LAYOUT = Setting(
    "ab_layout",
    _parse_layout,
    "shuffled",
    "A/B: shuffled (default) draws a fresh memory layout before each round on both sides, "
    "so the layout a process happened to get is scatter the pairs measure, not a bias; "
    "fixed runs rounds where pytest puts them (docs/ab.md, 'Memory layout')",
    metavar="shuffled|fixed",
)
AB_ORDER = Setting(
    "ab_order",
    _parse_order,
    "alternate",
    "A/B: alternate (default) runs B H B H ..., so every round follows a round of the other "
    "side, as the first does; abba runs B H, H B, B H, ..., where the first round of each "
    "pair follows its own side's (docs/ab.md, 'Order of rounds')",
    metavar="alternate|abba",
)
HEADS = ("partner", "inline")


def _parse_head(text: object) -> str:
    if not isinstance(text, str) or text.strip() not in HEADS:
        raise OptionValueError(f"expected one of {', '.join(HEADS)}, got {text!r}")
    return text.strip()


AB_HEAD = Setting(
    "ab_head",
    _parse_head,
    "partner",
    "A/B: partner (default) measures the head's rounds in a second partner process that "
    "runs your tree as the base's runs its revision, so both sides are measured by the "
    "same kind of process; inline measures them in this pytest process "
    "(docs/ab.md, 'Two partners')",
    metavar="partner|inline",
)
ADDRESSES = ("fixed", "random")


def _parse_addresses(text: object) -> str:
    if not isinstance(text, str) or text.strip() not in ADDRESSES:
        raise OptionValueError(f"expected one of {', '.join(ADDRESSES)}, got {text!r}")
    return text.strip()


AB_ADDRESSES = Setting(
    "ab_addresses",
    _parse_addresses,
    "fixed",
    "A/B: fixed (default) starts both partners with address-space randomisation and "
    "transparent huge pages off and environments of one size, and starts numpy's blocks "
    "at a cache line, so the two processes' memory is laid out alike; random leaves each "
    "process and block where the system puts it (docs/ab.md, 'Two partners')",
    metavar="fixed|random",
)
AB_PROCESSES = Setting(
    "ab_processes",
    _parse_processes,
    DEFAULT_PROCESSES,
    f"A/B: partner processes a side, taking the pairs in turn; a time fails only where the "
    f"pairs of each process agree, so one process that runs the same code slower cannot "
    f"fail a test (default {DEFAULT_PROCESSES}; docs/ab.md, 'Two processes a side')",
    metavar="N",
)
SETTINGS = (
    AGAINST,
    AGAINST_PYTHON,
    AB_MAX_PAIRS,
    AB_MIN_PAIRS,
    AB_LAYOUT,
    AB_ORDER,
    AB_HEAD,
    AB_ADDRESSES,
    AB_PROCESSES,
)


@dataclass(frozen=True)
class AgainstOptions:
    ref: str
    python: Path | None
    max_pairs: int
    min_pairs: int
    layout: str
    order: str
    head: str
    addresses: str
    processes: int
    """Partner processes a side (``--opprof-ab-processes``)."""
    time_tolerance: float | None
    """``--opprof-time-tolerance`` when set; None: :data:`DEFAULT_AB_TIME_TOLERANCE`."""


def read_against(config: pytest.Config) -> AgainstOptions | None:
    """The A/B settings, or None when ``--opprof-against`` is not set."""
    ref = AGAINST.read(config)
    if ref is None:
        return None
    python = AGAINST_PYTHON.read(config)
    if python is not None and not python.exists():
        raise pytest.UsageError(f"{AGAINST_PYTHON.option}: {python} does not exist")
    given = config.getoption(TIME_TOLERANCE.key) is not None or bool(
        str(config.getini(TIME_TOLERANCE.key)).strip()
    )
    max_pairs, min_pairs = AB_MAX_PAIRS.read(config), AB_MIN_PAIRS.read(config)
    if min_pairs > max_pairs:
        raise pytest.UsageError(
            f"{AB_MIN_PAIRS.option}={min_pairs} is more than {AB_MAX_PAIRS.option}={max_pairs}: "
            "a test runs at least the first and at most the second"
        )
    return AgainstOptions(
        ref=ref,
        python=python,
        max_pairs=max_pairs,
        min_pairs=min_pairs,
        layout=AB_LAYOUT.read(config),
        order=AB_ORDER.read(config),
        head=AB_HEAD.read(config),
        addresses=AB_ADDRESSES.read(config),
        processes=AB_PROCESSES.read(config),
        time_tolerance=TIME_TOLERANCE.read(config) if given else None,
    )


def add_ab_options(parser: pytest.Parser) -> None:
    """Declare the A/B settings in the ``opprof`` group, each with its ini twin."""
    group = parser.getgroup("opprof")
    for setting in SETTINGS:
        group.addoption(
            setting.option,
            metavar=setting.metavar,
            type=None if setting.kind == "path" else argparse_type(setting.check),
            default=None,
            help=setting.help,
        )
        parser.addini(setting.key, f"default for {setting.option}", type="string", default="")
