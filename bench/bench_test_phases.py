"""Where a trivial test's added time goes, by phase, in one pytest session.

Runs ``--tests`` trivial tests in this process (``pytest.main``, speed references
stubbed, ``--opprof --opprof-rounds 1`` unless other pytest arguments follow ``--``) and
times with ``perf_counter_ns``: each test's whole protocol, the plugin's own hook
implementations (a wrapper's time before and after its ``yield``, not the hooks it
encloses), and the functions named in :data:`TIMED` (nested: a function's time is
also in its caller's).  Prints us per test, largest first.  The timers add about 0.3 us
a call; the pytest run without ``--opprof`` gives the protocol's plain time.

    python bench/bench_test_phases.py [--tests 1000] [-- PYTEST ARGS]

With ``--tests 0`` the pytest arguments name what runs, e.g. numpy's own tests (from
a directory outside the repository, ``PYTHONPATH`` naming the checkout; ``--refs`` runs
the real speed references):
``--tests 0 -- --opprof --opprof-rounds 1 --pyargs numpy._core.tests.test_umath``.
"""

from __future__ import annotations

import argparse
import functools
import importlib
import inspect
import os
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable, Generator
from pathlib import Path
from typing import Any

import pytest

TIMED = (
    ("pytest_opprof.plugin.worker", "Worker._acquire"),
    ("pytest_opprof.plugin.worker", "Worker._finish"),
    ("pytest_opprof.plugin.worker", "Worker._left_behind"),
    ("pytest_opprof.plugin.worker", "Worker._mute"),
    ("pytest_opprof.plugin.worker", "junit_properties"),
    # The same parts in their own modules; a checkout times the rows it has.
    ("pytest_opprof.plugin.sources_held", "HeldSources.acquire"),
    ("pytest_opprof.plugin.muted_threads", "MutedThreads._mute"),
    ("pytest_opprof.plugin.measure", "Rounds.summarised"),
    ("pytest_opprof.model.averages", "op_sums"),
    ("pytest_opprof.model.tree", "library_self_ns"),
    ("pytest_opprof.gate.round_figures", "RoundFigures.from_events"),
    ("pytest_opprof.gate.round_figures", "RoundFigures.from_sums"),
    ("pytest_opprof.plugin.kept", "Payloads.append"),
    ("pytest_opprof.plugin.kept", "Lines.append"),
    ("pytest_opprof.gate.spool", "Spool._load"),
    ("pytest_opprof.plugin.payload", "ProfiledTest.as_stored"),
    ("pytest_opprof.gate.summary", "summarize_rounds"),
    ("pytest_opprof.gate.session", "BaselineSession.judge"),
    ("pytest_opprof.gate.session", "BaselineSession.verdict"),
    ("pytest_opprof.gate.spool", "Spool.append"),
    ("pytest_opprof.capture.recorder", "Recorder.start"),
    ("pytest_opprof.capture.recorder", "Recorder.stop"),
    ("pytest_opprof._native", "drain"),
    ("pytest_opprof.capture.sources.memory_source", "memory_stats"),
    ("pytest_opprof.profiler", "profile.key_averages"),
    ("pytest_opprof.capture.speed_probe", "references_ns"),
    ("pytest_opprof.capture.contention", "ContentionProbe.start"),
    ("pytest_opprof.capture.contention", "ContentionProbe.stop"),
)

NO_REFS = (
    "from pytest_opprof.capture import speed_probe\n\nspeed_probe.references_ns = lambda: (1, 1)\n"
)

_totals: defaultdict[str, list[int]] = defaultdict(lambda: [0, 0])  # name -> [ns, calls]


def _add(name: str, ns: int) -> None:
    entry = _totals[name]
    entry[0] += ns
    entry[1] += 1


def _timed(fn: Callable[..., Any], name: str) -> Callable[..., Any]:
    @functools.wraps(fn)
    def timed(*args: Any, **kwargs: Any) -> Any:
        t0 = time.perf_counter_ns()
        try:
            return fn(*args, **kwargs)
        finally:
            # A spool append is named by what it stores (the gate's or the collector's).
            what = f":{type(args[1]).__name__}" if name.endswith("append") else ""
            _add(name + what, time.perf_counter_ns() - t0)

    return timed


def _timed_wrapper(fn: Callable[..., Generator[Any, Any, Any]], name: str) -> Callable[..., Any]:
    """A hook wrapper's own time: before its yield and after it, not what it encloses."""

    @functools.wraps(fn)
    def timed(*args: Any, **kwargs: Any) -> Generator[Any, Any, Any]:
        own = 0
        t0 = time.perf_counter_ns()
        inner = fn(*args, **kwargs)
        try:
            value = next(inner)
            own += time.perf_counter_ns() - t0
            while True:
                # An exception pluggy throws in (a test that fails or skips) goes on to the
                # wrapped hook: left suspended, its generator would be closed by the garbage
                # collector at any later point (inside a profile's start, holding its lock).
                try:
                    sent = yield value
                except BaseException as exc:
                    t0 = time.perf_counter_ns()
                    value = inner.throw(exc)
                else:
                    t0 = time.perf_counter_ns()
                    value = inner.send(sent)
                own += time.perf_counter_ns() - t0
        except StopIteration as stop:
            own += time.perf_counter_ns() - t0
            return stop.value
        finally:
            _add(name, own)

    return timed


def _time_functions() -> None:
    for module_name, qualname in TIMED:
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError:  # an older or newer checkout's layout
            continue
        *path, attr = qualname.split(".")
        owner: Any = module
        for part in path:
            owner = getattr(owner, part, None)
        original = getattr(owner, attr, None)
        if original is None:  # an older checkout's plugin (side-by-side runs)
            continue
        if isinstance(inspect.getattr_static(owner, attr), classmethod):
            original = original.__func__
            wrapped_method = _timed(original, f"{module_name.rsplit('.', 1)[-1]}.{qualname}")
            setattr(owner, attr, classmethod(wrapped_method))
            continue
        wrapped = _timed(original, f"{module_name.rsplit('.', 1)[-1]}.{qualname}")
        setattr(owner, attr, wrapped)
        if not path:  # a module-level function: also where it was imported by name
            for other in list(sys.modules.values()):
                name = getattr(other, "__name__", "") or ""
                if name.startswith("pytest_opprof") and getattr(other, attr, None) is original:
                    setattr(other, attr, wrapped)


class _Timers:
    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_runtest_protocol(self, item: pytest.Item) -> Generator[None, object, object]:
        t0 = time.perf_counter_ns()
        try:
            return (yield)
        finally:
            _add("the test's whole protocol", time.perf_counter_ns() - t0)

    @pytest.hookimpl(trylast=True)
    def pytest_sessionstart(self, session: pytest.Session) -> None:
        # After every pytest_configure: the plugin's objects are registered by now.
        _time_functions()
        hooks = session.config.pluginmanager.hook
        for hook_name in dir(hooks):
            caller = getattr(hooks, hook_name)
            if not hasattr(caller, "get_hookimpls"):
                continue
            for impl in caller.get_hookimpls():
                if not (getattr(impl.function, "__module__", "") or "").startswith("pytest_opprof"):
                    continue
                name = f"hook {type(impl.plugin).__name__}.{hook_name}"
                if inspect.isgeneratorfunction(impl.function):
                    impl.function = _timed_wrapper(impl.function, name)
                else:
                    impl.function = _timed(impl.function, name)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tests", type=int, default=1000)
    parser.add_argument(
        "--refs", action="store_true", help="run the real speed references (stubbed otherwise)"
    )
    parser.add_argument("pytest_args", nargs="*", help="after --: pytest arguments")
    args = parser.parse_args()
    extra = args.pytest_args or ["--opprof", "--opprof-rounds", "1"]
    with tempfile.TemporaryDirectory() as tmp:
        if args.tests:
            body = "".join(f"def test_{i}():\n    assert {i} >= 0\n\n" for i in range(args.tests))
            Path(tmp, "test_trivial.py").write_text(body)
        Path(tmp, "pytest.ini").write_text("[pytest]\n")
        Path(tmp, "conftest.py").write_text("" if args.refs else NO_REFS)
        os.chdir(tmp)
        t0 = time.perf_counter()
        pytest.main(["-q", "-p", "no:cacheprovider", "-p", "no:randomly", *extra], [_Timers()])
        wall = time.perf_counter() - t0
    n = _totals["the test's whole protocol"][1] or 1
    print(f"\n{' '.join(extra)}: session {wall:.2f} s; us per test ({n} tests), largest first")
    for name, (ns, calls) in sorted(_totals.items(), key=lambda kv: -kv[1][0]):
        print(f"{ns / n / 1000:9.1f}  {name} (x{calls})")


if __name__ == "__main__":
    main()
