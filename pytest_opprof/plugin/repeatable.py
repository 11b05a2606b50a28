"""Test items whose body runs again: warm-ups and rounds call ``item.runtest()`` more
than once in a test's call phase.

A doctest's runner empties the globals of the examples it ran when it finishes
(``doctest.DocTestRunner.run``'s ``clear_globs``), so the second run of a doctest found
none of its module's names: every doctest failed with ``NameError`` under a warm-up,
``--opprof-rounds`` or ``--opprof-against``.  :class:`Repeatable`, registered beside the
worker, gives each run of a doctest a fresh copy of the globals its call began with
(the module's names and ``doctest_namespace``, as pytest's setup left them).  Every
other item runs as it is.
"""

from __future__ import annotations

import doctest
from collections.abc import Callable, Generator

import pytest


class Repeatable:
    """Makes a doctest's body run alike each time it runs within one call phase."""

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_runtest_call(self, item: pytest.Item) -> Generator[None, object, object]:
        test = getattr(item, "dtest", None)
        runner = getattr(item, "runner", None)
        if not isinstance(test, doctest.DocTest) or not isinstance(runner, doctest.DocTestRunner):
            return (yield)
        first = dict(test.globs)
        original = runner.run  # one runner serves every doctest of a module

        def run(
            dtest: doctest.DocTest,
            compileflags: int | None = None,
            out: Callable[[str], object] | None = None,
            clear_globs: bool = True,
        ) -> doctest.TestResults:
            if dtest is test:
                dtest.globs.clear()
                dtest.globs.update(first)
            return original(dtest, compileflags, out, clear_globs)

        own = "run" in vars(runner)
        runner.run = run  # type: ignore[method-assign,assignment]
        try:
            return (yield)
        finally:
            if own:
                runner.run = original  # type: ignore[method-assign]
            else:
                del runner.run
