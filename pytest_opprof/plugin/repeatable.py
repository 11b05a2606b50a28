"""Test bodies that run again: warm-ups and rounds call ``item.runtest()`` more than once
in a test's call phase, and some items keep state from one run to the next.

* A doctest's runner empties the globals of the examples it ran when it finishes
  (``doctest.DocTestRunner.run``'s ``clear_globs``), so the second run of a doctest found
  none of its module's names: every doctest failed with ``NameError`` under a warm-up,
  ``--opprof-rounds`` or ``--opprof-against``.  Each run now starts from a fresh copy of
  the globals the call began with (the module's names and ``doctest_namespace``, as
  pytest's setup left them).
* pytest-benchmark's ``benchmark`` fixture may be called once a test
  (``FixtureAlreadyUsed``): each run may call it once again.  Its timing loops are off
  under ``--opprof`` (``benchmark_loops_off``), so a call runs the function once.
* A test that cannot run twice (it consumes a fixture, or creates a file that must not
  exist: numpy's ``test_CachedHTTPFile``) fails in its second run; the failure says so
  and what to mark (``RERUN_ADVICE``), where it read as the test's own error before.

:class:`Repeatable`, registered beside the worker, wraps each item's ``runtest`` for its
call phase (one Python call a run, never per op).
"""

from __future__ import annotations

import doctest
from collections.abc import Callable, Generator

import pytest

BENCHMARK_PLUGIN = "benchmark"
"""pytest-benchmark's plugin name (its ``pytest11`` entry point)."""


RERUN_ADVICE = (
    "opprof: this came from run {run} of the test's body in one call (warm-ups and rounds "
    "run it again with the same fixture values), after a run that passed. A test that "
    "cannot run twice (it consumes a fixture, or creates a file that must not exist) "
    "needs @pytest.mark.profile(rounds=1, warmup=0)."
)


class Repeatable:
    """Makes an item's body run alike each time it runs within one call phase, and says
    so where a run after the first fails."""

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_runtest_call(self, item: pytest.Item) -> Generator[None, object, object]:
        reset = _reset_for(item)
        body = item.runtest
        runs = 0

        def runtest() -> None:
            nonlocal runs
            runs += 1
            if reset is not None:
                reset()
            try:
                body()
            except Exception as exc:  # a skip or xfail is no Exception: left alone
                if runs > 1:
                    _said_again(item, exc, runs)
                raise

        own = "runtest" in vars(item)  # another plugin's wrapper, kept for after
        item.runtest = runtest  # type: ignore[method-assign]
        try:
            return (yield)
        finally:
            if own:
                item.runtest = body  # type: ignore[method-assign]
            else:
                del item.runtest


def _said_again(item: pytest.Item, exc: Exception, run: int) -> None:
    """Tell the failure of a run after the first for what it is: the test passes without
    the plugin, and fails here because its body ran twice."""
    text = RERUN_ADVICE.format(run=run)
    if hasattr(exc, "add_note"):  # Python 3.11: pytest prints it under the error
        exc.add_note(text)
    else:
        item.add_report_section("call", "opprof", text)


def _reset_for(item: pytest.Item) -> Callable[[], None] | None:
    """What must be put back before each run of ``item``'s body; None: nothing."""
    test = getattr(item, "dtest", None)
    if isinstance(test, doctest.DocTest):
        first = dict(test.globs)

        def fresh_globals() -> None:
            test.globs.clear()
            test.globs.update(first)

        return fresh_globals
    funcargs = getattr(item, "funcargs", None) or {}
    fixture = funcargs.get("benchmark")
    if fixture is not None and hasattr(fixture, "_mode"):

        def unused() -> None:
            fixture._mode = None  # what FixtureAlreadyUsed looks at

        return unused
    return None


def benchmark_loops_off(config: pytest.Config) -> None:
    """Turn pytest-benchmark's timing loops off for a profiled session, as its
    ``--benchmark-disable`` does (and as it does itself under pytest-xdist): its times
    would include the capture's cost, and a test's op counts and FLOPs would follow the
    loop count it calibrates anew each run.  With
    ``--benchmark-enable`` the session cannot run: both plugins time the same body."""
    if not config.pluginmanager.hasplugin(BENCHMARK_PLUGIN):
        return
    if getattr(config.option, "benchmark_enable", False):
        raise pytest.UsageError(
            "--benchmark-enable cannot be used with --opprof: pytest-benchmark's timing "
            "loops would time the capture's cost with the test's; run the benchmarks "
            "without --opprof"
        )
    config.option.benchmark_disable = True
