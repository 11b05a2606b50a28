"""The base side: a pytest session in the base revision's worktree, driven round by round.

The head side starts it (``base_side.py``) as its own process, with its own imports,
thread pools and caches, warm for the whole run.  It collects the same test paths, says
hello with the node ids it holds, then runs only what the head asks for:

* ``("test", nodeid, next_nodeid)``: run that test's protocol.  Setup runs; in the call
  phase it says ``("ready",)`` and measures one round per ``("round",)`` it is sent,
  answering each with ``("round", RoundFigures)`` (or ``("failed", why)``), until
  ``("done",)``; then teardown, and ``("finished", outcome, why)``.  ``next_nodeid`` is
  the head's next test, so module and class fixtures live as long as on the head side.
* ``("quit",)``: end the session.  Once pytest has torn its fixtures down, the process
  exits (:meth:`PartnerLoop.pytest_sessionfinish`): what a session does after that (other
  plugins' terminal summaries, the garbage collections of pytest's unconfigure, the
  interpreter's own teardown) only writes to a log that nobody reads, and took the
  partners 0.5-1.5 s at the end of every run, while the head waited for them.

Nothing is judged or written here: no baselines, no reports, not even the user's
``--junitxml`` or another plugin's report at the session's end (the head's partner runs
in the head's directory, so it would overwrite the head's).  Its terminal output goes to
a log file the head reads when something failed.
"""

from __future__ import annotations

import atexit
import json
import os
import sys
import traceback
from collections.abc import Generator, Mapping

import pytest

from pytest_opprof.ab import partner_key, project_options, unmeasured_key
from pytest_opprof.ab.channel import Channel, ChannelClosed, figures_to_json
from pytest_opprof.capture import threadpools
from pytest_opprof.plugin.measure import Rounds
from pytest_opprof.plugin.worker import Worker, settings_key

FDS_VARIABLE = "OPPROF_AB_FDS"
"""``read,write``: the partner's ends of the two pipes."""


def protocol_version() -> str:
    """What both sides must agree on: the plugin's version and this protocol's."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return f"{version('pytest-opprof')}/2"
    except PackageNotFoundError:
        return "unknown/2"


class PartnerWorker(Worker):
    """The base side's worker: rounds on the head's command, no verdict."""

    collector_paused = True
    channel: Channel

    @pytest.hookimpl(wrapper=True, trylast=True)
    def pytest_runtest_call(self, item: pytest.Item) -> Generator[None, object, object]:
        settings = item.stash[settings_key]
        self.sources.acquire()
        rounds = Rounds(references=False)
        pin = threadpools.pinned(self.options.blas_threads)
        pin.__enter__()
        measured = 0
        try:
            own_call_warms = settings.warmup > 0  # as on the head side (ab/head.py)
            for _ in range(settings.warmup - own_call_warms):
                item.runtest()
            result: object = None
            yielded = False
            if own_call_warms:
                result = yield
                yielded = True
            self.channel.send("ready")
            while True:
                command = self.channel.receive()[0]
                if command == "done":
                    break
                try:
                    if not yielded:  # the first round is pytest's own call
                        yielded = True
                        with self._round(item, rounds):
                            result = yield
                    else:
                        self.run_round(item, rounds)
                except BaseException as exc:
                    self.channel.send("failed", _why(exc))
                    raise
                figures = rounds.summarised(settings)
                if len(figures) > measured:
                    measured = len(figures)
                    self.channel.send("round", figures_to_json(figures[-1]))
                else:  # the test profiled itself: the plugin stepped aside
                    self.channel.send("failed", "the test started its own profile")
            if not yielded:  # pytest's call must run once: unmeasured
                result = yield
            return result
        finally:
            pin.__exit__(None, None, None)

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(
        self, item: pytest.Item, call: pytest.CallInfo[None]
    ) -> Generator[None, pytest.TestReport, pytest.TestReport]:
        report = yield
        if call.when == "teardown":
            self._left_behind(item)
        return report


class PartnerLoop:
    """Replaces pytest's run loop in the base process: hello, then the head's commands."""

    def __init__(self, channel: Channel, given: Mapping[str, object]) -> None:
        self.channel = channel
        self.given = given

    @pytest.hookimpl(tryfirst=True)
    def pytest_configure(self, config: pytest.Config) -> None:
        config.stash[partner_key] = self.channel
        # Before pytest's junitxml plugin reads it: the report is the head's alone.
        if getattr(config.option, "xmlpath", None):
            config.option.xmlpath = None

    @pytest.hookimpl(tryfirst=True)
    def pytest_cmdline_main(self, config: pytest.Config) -> None:
        # Before the session configures: a conftest's hooks read the project's options.
        project_options.apply(config, self.given)
        # One process: a project's addopts may ask pytest-xdist for workers.
        if getattr(config.option, "numprocesses", None):
            config.option.numprocesses = None
            config.option.dist = "no"

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        if report.failed:
            self._errors.append(f"{report.nodeid or '.'}: {_first_line(report.longreprtext)}")

    def pytest_sessionstart(self, session: pytest.Session) -> None:
        self._errors: list[str] = []

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtestloop(self, session: pytest.Session) -> bool:
        from _pytest.runner import runtestprotocol

        items = {item.nodeid: item for item in session.items}
        # Where the head goes on past modules that cannot be collected, so does this side:
        # their tests are missing here (new, where the head has them).
        errors = [] if session.config.option.continue_on_collection_errors else self._errors
        self.channel.send(
            "hello",
            protocol_version(),
            list(items),
            list(errors),
            {
                "python": sys.version.split()[0],
                "executable": sys.executable,
                "unmeasured": session.config.stash.get(unmeasured_key, None) or "",
            },
        )
        while True:
            try:
                message = self.channel.receive()
            except ChannelClosed:
                return True
            if message[0] != "test":
                return True
            _, nodeid, next_nodeid = message
            item = items[nodeid]
            try:
                # A process that joins a test at its second pair (``replicas.py``) did not
                # run the tests between: what the last one it ran kept for them goes now.
                session._setupstate.teardown_exact(item)
            except Exception as exc:
                self.channel.send("finished", "teardown failed", _why(exc))
                continue
            reports = runtestprotocol(item, nextitem=items.get(next_nodeid), log=True)
            outcome, why = "passed", ""
            for report in reports:
                if report.failed or (report.skipped and report.when != "teardown"):
                    outcome = f"{report.when} {report.outcome}"
                    why = _first_line(report.longreprtext)
                    break
            self.channel.send("finished", outcome, why)

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionfinish(
        self, session: pytest.Session, exitstatus: int | pytest.ExitCode
    ) -> None:
        """End the process here, with the session's status, once the fixtures still held
        are torn down (as pytest's runner does in its own ``pytest_sessionfinish``), and
        before any other plugin's: what they would write is the head's to write, and the
        head's partner runs in the head's directory, so a report plugin's file
        (``--html``, ``--json-report`` in the project's ``addopts``) or the cache's
        ``lastfailed`` written here would land over the head's (see the module
        docstring)."""
        try:
            session._setupstate.teardown_exact(None)
        finally:
            exit_now(int(exitstatus))


def exit_now(status: int) -> None:
    """Exit with ``status`` without the interpreter's teardown: the output written so far
    flushed, and the ``atexit`` handlers run (pytest's remove the locks of its temporary
    directories, which it would otherwise keep for days)."""
    for stream in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
        try:
            if stream is not None:
                stream.flush()
        except (OSError, ValueError):  # closed, or its pipe gone
            pass
    try:
        atexit._run_exitfuncs()
    finally:
        os._exit(status)


def _first_line(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    for line in reversed(lines):  # pytest's short summary: the exception's line
        if line.startswith("E "):
            return line[2:].strip()
    return lines[-1].strip() if lines else ""


def _why(exc: BaseException) -> str:
    return "".join(traceback.format_exception_only(type(exc), exc)).strip()


def main() -> int:
    """The partner process: ``python -m pytest_opprof.ab.partner PYTEST_ARGS...``."""
    read_fd, write_fd = (int(fd) for fd in os.environ.pop(FDS_VARIABLE).split(","))
    given = json.loads(os.environ.pop(project_options.VARIABLE, "{}"))
    channel = Channel(read_fd, write_fd)
    try:
        return int(pytest.main(sys.argv[1:], plugins=[(PartnerLoop(channel, given))]))
    finally:
        channel.close()


if __name__ == "__main__":
    sys.exit(main())
