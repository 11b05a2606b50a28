"""The values the user gave the project's own command-line options, for the partners.

A project's conftest files, and plugin modules of its own tree, add options of their own
(``--runslow``, a problem size, a seed), and its tests read them at collection or run
time.  The partners start with the head's pytest arguments they know
(``run.partner_options``), not with every argument: one meant for the head alone
(``--pdb``, ``--basetemp``, a report's path) would act in four more processes.  So the
project's own options travel apart, as the values the head parsed (:func:`given`), and
each partner sets those its own plugins define (:func:`apply`) before its session
configures.  Without them a test skipped unless ``--runslow`` was "new" (skipped on the
base), and one sized by ``--size=3000`` would be measured at the conftest's default size
on both partners.

Only values that differ from the option's default travel: a default the change under
test moved is the base's own on the base side.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest

VARIABLE = "OPPROF_AB_PROJECT_OPTIONS"
"""The partner's environment variable holding the values (JSON: ``{dest: value}``)."""
_given_key = pytest.StashKey[dict[str, object]]()


class _Recorder:
    """Stands in for pytest's parser in a conftest's ``pytest_addoption``: it keeps each
    option's ``dest`` and default, and takes every other call (``addini``, groups)."""

    def __init__(self) -> None:
        self.defaults: dict[str, object] = {}

    def addoption(self, *names: str, **attrs: Any) -> None:
        longs = [n for n in names if n.startswith("--")]
        dest = attrs.get("dest") or (longs[0][2:] if longs else names[0].lstrip("-"))
        action = attrs.get("action")
        default = attrs.get("default", {"store_true": False, "store_false": True}.get(str(action)))
        self.defaults[str(dest).replace("-", "_")] = default

    _addoption = addoption

    def getgroup(self, *args: object, **kwargs: object) -> _Recorder:
        return self

    def __getattr__(self, name: str) -> Callable[..., None]:
        return lambda *args, **kwargs: None


def given(config: pytest.Config) -> dict[str, object]:
    """The values of the options the project's own plugins add (its conftest files, and
    modules of its tree loaded with ``-p`` or ``pytest_plugins``), where the user gave one
    other than its default and it is plain data (JSON).  Found once a session: every
    partner is launched with them."""
    if _given_key not in config.stash:
        config.stash[_given_key] = _find(config)
    return config.stash[_given_key]


def _find(config: pytest.Config) -> dict[str, object]:
    out: dict[str, object] = {}
    for plugin in config.pluginmanager.get_plugins():
        if not _projects(plugin, config.rootpath):
            continue
        hook = getattr(plugin, "pytest_addoption", None)
        if hook is None:
            continue
        recorder = _Recorder()
        offered = {"parser": recorder, "pluginmanager": config.pluginmanager}
        try:
            wanted = inspect.signature(hook).parameters
            hook(**{name: value for name, value in offered.items() if name in wanted})
        except Exception:  # a conftest this cannot read keeps its options
            continue
        for dest, default in recorder.defaults.items():
            value = getattr(config.option, dest, default)
            if value == default:
                continue
            try:
                json.dumps(value)
            except (TypeError, ValueError):
                continue
            out[dest] = value
    return out


def _projects(plugin: object, rootpath: Path) -> bool:
    """Whether ``plugin`` is the project's own: a conftest file, or a module of the
    rootdir's tree that no installed package holds (a virtual environment kept in the
    tree holds the third-party plugins)."""
    where = getattr(plugin, "__file__", None)
    if not where:
        return False
    path = Path(where)
    if path.name == "conftest.py":
        return True
    if "site-packages" in path.parts or "dist-packages" in path.parts:
        return False
    return path.resolve().is_relative_to(rootpath.resolve())


def apply(config: pytest.Config, values: Mapping[str, object]) -> None:
    """Set the head's values of the options this side's own plugins define too."""
    for dest, value in values.items():
        if hasattr(config.option, dest):
            setattr(config.option, dest, value)
