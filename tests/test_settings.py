"""The settings table: the ``profile`` marker and ``--opprof-*`` / ``opprof_*`` accept the
same values, parsed alike, for every setting they share; the gate's defaults are one."""

from __future__ import annotations

import importlib.metadata
import inspect
from pathlib import Path

import pytest

from pytest_opprof.errors import MarkerUsageError
from pytest_opprof.gate.session import GateOptions
from pytest_opprof.gate.verdict import Tolerances
from pytest_opprof.plugin.marker import profile, settings_for
from pytest_opprof.plugin.options import SETTINGS, OpprofOptions, Setting, read_options

INSTALLED = any(
    ep.value == "pytest_opprof.plugin" for ep in importlib.metadata.entry_points(group="pytest11")
)
PLUGIN = [] if INSTALLED else ["-p", "pytest_opprof.plugin"]

SHARED = {s.name: s for s in SETTINGS if s.marker}

# Command-line forms of each shared setting: (accepted, rejected).
FORMS: dict[str, tuple[list[str], list[str]]] = {
    "row_limit": (["1", "20", " 7 "], ["0", "-3", "many", "", "2.5", "1e3"]),
    "rounds": (["auto", "AUTO", " auto ", "1", "9"], ["0", "often", "", "-2", "1.5"]),
    "warmup": (["0", "3"], ["-1", "x", "", "0.5"]),
    "time_tolerance": (["0.2", "20%", "0", "1e-1", " 5 % "], ["-0.1", "lots", "", "nan", "inf"]),
    "memory_tolerance": (["0.1", "150%"], ["-1%", "10 percent", ""]),
    "flops_tolerance": (["0", "-0", "0%", "2.5"], ["x%", "%", ""]),
    "max_memory": (["2 MB", "0 B", "512KiB", " 1.5 GiB ", "100"], ["2 MBs", "-1 B", "", "MB"]),
    "max_leaked": (["0 B", "1 kB", "3 mib"], ["1 KFLOP", "nan B", "x"]),
    "max_flops": (["1 GFLOP", "250 MFLOPs", "0", "2e3 kFLOP"], ["1 GB", "-1 FLOP", ""]),
    "max_time": (["5 ms", "200us", "1s", "0.5 ms"], ["5 minutes", "-1ms", "", "ms"]),
}

CASES = [
    pytest.param(name, text, accepted, id=f"{name}={text!r}")
    for name, (good, bad) in FORMS.items()
    for accepted, texts in ((True, good), (False, bad))
    for text in texts
]


def test_every_shared_setting_is_a_marker_keyword_and_has_forms() -> None:
    keywords = set(inspect.signature(profile).parameters)
    assert {s.name for s in SETTINGS} & keywords == set(SHARED) == set(FORMS)


def _session(pytester: pytest.Pytester, *args: str) -> OpprofOptions:
    return read_options(pytester.parseconfig(*PLUGIN, *args))


def _value(options: OpprofOptions, name: str) -> object:
    # The tolerances live in the gate's options, the budgets in theirs; the rest under the
    # same name.
    if hasattr(options, name):
        return getattr(options, name)
    if name.startswith("max_"):
        return getattr(options.gate.budgets, name)
    return getattr(options.gate, name)


def _from_option(pytester: pytest.Pytester, setting: Setting[object], text: str) -> object:
    return _value(_session(pytester, f"{setting.option}={text}"), setting.name)


def _from_marker(pytester: pytest.Pytester, setting: Setting[object], value: object) -> object:
    return getattr(settings_for((), {setting.name: value}, _session(pytester)), setting.name)


@pytest.mark.parametrize(("name", "text", "accepted"), CASES)
def test_marker_and_option_accept_the_same_forms(
    pytester: pytest.Pytester, name: str, text: str, accepted: bool
) -> None:
    setting = SHARED[name]
    if accepted:
        from_option = _from_option(pytester, setting, text)
        assert _from_marker(pytester, setting, text) == from_option
        if text.strip():  # an empty ini value means "not set"
            pytester.makeini(f"[pytest]\n{setting.key} = {text}\n")
            assert _value(_session(pytester), name) == from_option
    else:
        with pytest.raises(pytest.UsageError, match=f"argument {setting.option}: expected"):
            _from_option(pytester, setting, text)
        with pytest.raises(MarkerUsageError, match=rf"profile\({name}=\.\.\.\): expected"):
            _from_marker(pytester, setting, text)
        if text.strip():
            pytester.makeini(f"[pytest]\n{setting.key} = {text}\n")
            with pytest.raises(pytest.UsageError, match=f"ini setting {setting.key} = "):
                _session(pytester)


@pytest.mark.parametrize(
    ("name", "value", "text"),
    [
        ("row_limit", 7, "7"),
        ("rounds", 3, "3"),
        ("warmup", 0, "0"),
        ("time_tolerance", 0.2, "20%"),
        ("memory_tolerance", 1, "1"),
        ("flops_tolerance", 0.0, "0"),
    ],
)
def test_a_marker_number_means_what_its_text_means(
    pytester: pytest.Pytester, name: str, value: object, text: str
) -> None:
    setting = SHARED[name]
    assert _from_marker(pytester, setting, value) == _from_option(pytester, setting, text)


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("row_limit", True),
        ("row_limit", 2.0),
        ("row_limit", None),
        ("warmup", -1),
        ("rounds", False),
        ("time_tolerance", True),
        ("time_tolerance", -0.5),
    ],
)
def test_a_marker_rejects_values_no_option_text_gives(
    pytester: pytest.Pytester, name: str, value: object
) -> None:
    with pytest.raises(MarkerUsageError, match=rf"profile\({name}=\.\.\.\): expected"):
        _from_marker(pytester, SHARED[name], value)


@pytest.mark.parametrize("name", ["rounds", "warmup", "time_tolerance"])
def test_a_marker_none_keeps_the_session_value(pytester: pytest.Pytester, name: str) -> None:
    options = _session(pytester)
    assert getattr(settings_for((), {name: None}, options), name) == getattr(
        settings_for((), {}, options), name
    )


def test_gate_defaults_are_the_verdicts() -> None:
    defaults = Tolerances()
    by_name = {s.name: s.default for s in SETTINGS}
    assert by_name["time_tolerance"] == defaults.time == GateOptions(Path()).time_tolerance
    assert by_name["memory_tolerance"] == defaults.memory
    assert by_name["flops_tolerance"] == defaults.flops
    assert by_name["min_time"] == defaults.min_time_ns
    assert by_name["time_statistic"] == defaults.statistic
    assert by_name["row_limit"] == inspect.signature(profile).parameters["row_limit"].default
