"""Set an A/B run up and take it down: the base worktree, the partner, the session.

Where each part lives:

* the process that reports (a single process, or the pytest-xdist controller) checks
  REF out once, and starts a partner to see the base collect before any test runs, so a
  base that does not build, collect or import stops the run with one line;
* each process that runs tests (the single process, or every xdist worker) has a
  partner of its own, in the same worktree: a worker's tests pair with its partner's
  rounds, never with another worker's, so two pairs never run at once on one side;
* the worktree goes when the reporting process ends.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import time
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from pytest_opprof.ab import project_options
from pytest_opprof.ab.base_side import BaseSide, BaseSideError, Launch, launch
from pytest_opprof.ab.options import AB_ADDRESSES, AB_LAYOUT, AGAINST, AgainstOptions
from pytest_opprof.ab.replicas import Replicas
from pytest_opprof.ab.revision import BaseRevision, RevisionError, check_out, remove, toplevel
from pytest_opprof.gate.tolerance import DEFAULT_AB_TIME_TOLERANCE
from pytest_opprof.plugin.layout import Layout
from pytest_opprof.plugin.options import OpprofOptions
from pytest_opprof.plugin.payload import attached

if TYPE_CHECKING:
    from pytest_opprof.ab.session import ABSession
    from pytest_opprof.capture.plan import Plan
    from pytest_opprof.plugin.controller import Controller
    from pytest_opprof.plugin.worker import Worker

WORKERINPUT_KEY = "opprof_ab_revision"


def revision_for(config: pytest.Config, against: AgainstOptions) -> tuple[BaseRevision, bool]:
    """The base's checkout, and whether this process made it (and removes it)."""
    given = getattr(config, "workerinput", {}).get(WORKERINPUT_KEY)
    if given is not None:  # a pytest-xdist worker: the controller checked it out
        revision = BaseRevision(
            ref=str(given["ref"]),
            sha=str(given["sha"]),
            repo=Path(given["repo"]),
            worktree=Path(given["worktree"]),
        )
        return revision, False
    try:
        return check_out(against.ref, config.rootpath), True
    except RevisionError as exc:
        said = f"{AGAINST.option}={against.ref}: {exc}"
        repo = toplevel(config.invocation_params.dir)
        if repo is not None and not config.rootpath.resolve().is_relative_to(repo):
            said += (
                f"; the tests lie in the git repository at {repo}, but pytest's rootdir "
                f"{config.rootpath} (where it found {config.inipath or 'no ini file'}) lies "
                "above it: run with --rootdir inside the repository"
            )
        raise pytest.UsageError(said) from None


def partner_options(
    config: pytest.Config, options: OpprofOptions, against: AgainstOptions, where: BaseRevision
) -> list[str]:
    """What the base side must measure as the head does: the same capture, rounds and
    layout, and the same selection (so that what it lacks is what the head added).

    The head's ``-p`` plugins, ``-o`` ini overrides, ``-W`` warning filters and import mode
    too (from its arguments, ``PYTEST_ADDOPTS`` or ini): a plugin the head blocks must not
    run on the base side alone (pytest-randomly would reseed numpy's generator there
    before every test), and ``-o python_files=...`` or ``--import-mode=importlib`` must
    collect the same tests on both sides.  Options naming paths (``--ignore``, ``-c``,
    ``--confcutdir`` ...) name them in ``where``'s tree (:func:`path_options`)."""
    out = [f"-k={config.option.keyword}"] if config.option.keyword else []
    out += path_options(config, where)
    for plugin in config.option.plugins or ():
        out += ["-p", plugin]  # pytest reads -p as two words before it parses the rest
    out += [f"--override-ini={ini}" for ini in config.option.override_ini or ()]
    out += [f"--pythonwarnings={rule}" for rule in config.option.pythonwarnings or ()]
    out.append(f"--import-mode={config.option.importmode}")
    out.append(f"{AB_LAYOUT.option}={against.layout}")
    out.append(f"{AB_ADDRESSES.option}={against.addresses}")
    if config.option.markexpr:
        out.append(f"-m={config.option.markexpr}")
    if config.option.pyargs:
        out.append("--pyargs")
    if config.option.continue_on_collection_errors:
        out.append("--continue-on-collection-errors")
    out += _collection_options(config.option)
    out += [f"--opprof-warmup={options.warmup}", f"--opprof-max-events={options.max_events}"]
    if options.capture is not None:
        out.append(f"--opprof-capture={','.join(options.capture) or 'none'}")
    if options.python_memory:
        out.append("--opprof-python-memory")
    out.append(
        f"--opprof-blas-threads={options.blas_threads}"
        if options.blas_threads is not None
        else "--opprof-blas-threads=keep"
    )
    return out


def _collection_options(option: argparse.Namespace) -> list[str]:
    """pytest's own options for which tests exist and how they run: doctests collected
    (else every one is new), xfail marks ignored, assertions rewritten or not."""
    out = []
    if option.doctestmodules:
        out.append("--doctest-modules")
    out += [f"--doctest-glob={glob}" for glob in option.doctestglob or ()]
    if option.doctest_ignore_import_errors:
        out.append("--doctest-ignore-import-errors")
    if option.runxfail:
        out.append("--runxfail")
    out.append(f"--assert={option.assertmode}")
    return out


def path_options(config: pytest.Config, where: BaseRevision) -> list[str]:
    """The head's options that name paths or what conftest files load, as ``where``'s tree
    has them: a directory the head ignores (a module that cannot import there) is ignored
    on both sides, both read the ini file the head was given (the base's own copy where it
    has one) from the same rootdir, and conftest files load alike.  A path outside the
    repository is the same for both."""
    here = config.invocation_params.dir
    option = config.option
    out = [f"--ignore={_in_tree(where, here, path)}" for path in option.ignore or ()]
    out += [f"--ignore-glob={_in_tree(where, here, glob)}" for glob in option.ignore_glob or ()]
    if option.confcutdir:
        out.append(f"--confcutdir={_in_tree(where, here, option.confcutdir)}")
    if option.noconftest:
        out.append("--noconftest")
    if option.inifilename:
        ini = Path(_in_tree(where, here, option.inifilename))
        out.append(f"--config-file={ini if ini.exists() else here / option.inifilename}")
    if option.inifilename or option.rootdir:
        # A given ini file would otherwise make its own directory the base's rootdir.
        out.append(f"--rootdir={_in_tree(where, here, str(config.rootpath))}")
    return out


def _in_tree(where: BaseRevision, here: Path, path: str) -> str:
    """``path`` (relative to ``here``, a glob allowed) where ``where``'s tree has it."""
    try:
        return str(where.base_path(here / path))
    except ValueError:  # outside the repository
        return os.path.realpath(here / path)


def start_partner(
    config: pytest.Config, options: OpprofOptions, against: AgainstOptions, revision: BaseRevision
) -> BaseSide:
    """A partner in ``revision``'s worktree that has collected; a ``UsageError`` naming REF
    and the reason when it cannot."""
    where, how = partner_launch(config, options, against, revision)
    return hello_partner(spawn_partner(where, how, against), against, where)


def partner_launch(
    config: pytest.Config,
    options: OpprofOptions,
    against: AgainstOptions,
    revision: BaseRevision,
    head: bool = False,
) -> tuple[BaseRevision, Launch]:
    """Where a partner runs (the base's worktree, or ``head``: this tree, under this
    Python) and how it is started; a ``UsageError`` naming REF when it cannot be."""
    where = head_tree(revision) if head else revision
    try:
        return where, launch(
            where,
            config.rootpath,
            config.invocation_params.dir,
            config.args,
            partner_options(config, options, against, where),
            python=None if head or against.python is None else str(against.python),
            given=project_options.given(config),
        )
    except (BaseSideError, OSError) as exc:
        raise pytest.UsageError(
            f"{AGAINST.option}={against.ref}: {_side(where, head)} cannot start: {exc}"
        ) from None


def head_tree(revision: BaseRevision) -> BaseRevision:
    """The working tree as a partner's checkout: every path maps to itself."""
    return dataclasses.replace(revision, ref="the working tree", worktree=revision.repo)


def spawn_partner(
    where: BaseRevision,
    how: Launch,
    against: AgainstOptions,
    head: bool = False,
    pad_to: int = 0,
) -> BaseSide:
    """The partner process started (it imports and collects while the caller goes on),
    its environment padded to ``pad_to`` bytes with its arguments."""
    try:
        return BaseSide(where, how, pad_to=pad_to, fixed_addresses=against.addresses == "fixed")
    except OSError as exc:
        raise pytest.UsageError(
            f"{AGAINST.option}={against.ref}: {_side(where, head)} cannot start: {exc}"
        ) from None


def hello_partner(
    side: BaseSide, against: AgainstOptions, where: BaseRevision, head: bool = False
) -> BaseSide:
    """``side`` once it has collected; a ``UsageError`` naming REF and the reason."""
    try:
        side.hello()
    except BaseSideError as exc:
        side.close()
        raise pytest.UsageError(
            f"{AGAINST.option}={against.ref}: {_side(where, head)} {exc}"
        ) from None
    return side


def _side(where: BaseRevision, head: bool) -> str:
    if head:
        return "the head's partner (the working tree)"
    return f"the base side ({where.describe()})"


def time_tolerance(against: AgainstOptions) -> float:
    return (
        against.time_tolerance if against.time_tolerance is not None else DEFAULT_AB_TIME_TOLERANCE
    )


class ABController:
    """The reporting process's part: the worktree's lifetime and the xdist workers' input."""

    def __init__(self, revision: BaseRevision, owned: bool) -> None:
        self.revision = revision
        self.owned = owned
        self.session: ABSession | None = None
        self.unpinned: list[int] | None = None
        """The CPUs this process could run on before :meth:`pin` (restored at close)."""

    @pytest.hookimpl(optionalhook=True)
    def pytest_configure_node(self, node: object) -> None:
        workerinput = getattr(node, "workerinput", None)
        if workerinput is not None:
            workerinput[WORKERINPUT_KEY] = {k: str(v) for k, v in asdict(self.revision).items()}

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_node_collection_finished(self, node: object, ids: list[str]) -> None:
        if self.session is not None:
            self.session.head_nodeids.update(ids)

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        """A pytest-xdist worker's A/B verdict, for the controller's judge (before the
        controller reads the report's figures)."""
        if self.session is None:
            return
        data = attached(report)
        if data is not None and "ab_verdict" in data:
            self.session.shipped[report.nodeid] = data["ab_verdict"]

    def pin(self, config: pytest.Config) -> None:
        """Run this process's tests, and its partners' (:meth:`pin_process`), on one CPU:
        the sides never run at once, and the two CPUs of a virtual machine ran the same
        rounds up to 20% apart for seconds at a time (docs/ab.md).  A pytest-xdist worker
        takes the CPU of its own number, so workers' pairs run side by side."""
        if not hasattr(os, "sched_setaffinity"):
            return
        allowed = sorted(os.sched_getaffinity(0))
        worker = str(getattr(config, "workerinput", {}).get("workerid", "gw0"))
        index = int(worker[2:]) if worker[2:].isdigit() else 0
        os.sched_setaffinity(0, {allowed[index % len(allowed)]})
        self.unpinned = allowed

    def pin_process(self, pid: int) -> None:
        """Pin every thread of the partner ``pid`` to this process's CPU (a thread it starts
        later inherits it).  The partners start unpinned, so their imports and collection
        run on every CPU at once: 1.0 s to ready on one CPU, about half on two."""
        if self.unpinned is None or not hasattr(os, "sched_setaffinity"):
            return
        cpus = os.sched_getaffinity(0)
        try:
            tasks = [int(t) for t in os.listdir(f"/proc/{pid}/task")]
        except OSError:
            tasks = [pid]
        for task in tasks:
            try:
                os.sched_setaffinity(task, cpus)
            except OSError:  # a thread that ended meanwhile
                pass

    def close(self) -> None:
        if self.unpinned is not None and hasattr(os, "sched_setaffinity"):
            os.sched_setaffinity(0, self.unpinned)
            self.unpinned = None
        if self.owned:
            remove(self.revision)


def configure(
    config: pytest.Config, options: OpprofOptions, against: AgainstOptions, chosen: Plan
) -> tuple[Worker | None, Controller | None, ABController]:
    """The worker (None on an xdist controller), the controller (None on an xdist
    worker) and the A/B part of the reporting process, for ``--opprof-against``."""
    import dataclasses

    from pytest_opprof.ab.head import ABWorker
    from pytest_opprof.ab.session import ABSession
    from pytest_opprof.plugin.controller import Controller

    if options.gate.update:
        raise pytest.UsageError(
            f"{AGAINST.option} judges against the base revision and records no baseline: "
            "run --opprof-update-baselines without it"
        )
    started = time.perf_counter()
    revision, owned = revision_for(config, against)
    worktree_s = time.perf_counter() - started
    ab = ABController(revision, owned)
    try:
        gate_options = dataclasses.replace(options.gate, time_tolerance=time_tolerance(against))
        gate = ABSession(
            gate_options,
            revision,
            tests=0,
            max_pairs=against.max_pairs,
            min_pairs=against.min_pairs,
            unmeasured=chosen.unmeasured,
            processes=against.processes,
        )
        ab.session = gate
        if owned:
            gate.start_s["worktree"] = worktree_s
        is_worker = hasattr(config, "workerinput")
        xdist_controller = not is_worker and bool(getattr(config.option, "numprocesses", None))
        controller = None
        if not is_worker:
            controller = Controller(options, gate, chosen)
        if xdist_controller:
            # The workers start their own partners: this one only shows the base collects.
            started = time.perf_counter()
            validation = start_partner(config, options, against, revision)
            gate.start_s["base side checked"] = time.perf_counter() - started
            gate.base_nodeids = validation.nodeids
            gate.base_unmeasured(validation.info.get("unmeasured"))
            validation.close()
            return None, controller, ab
        worker = ABWorker(
            config,
            options,
            gate,
            chosen,
            deliver=controller.take if controller is not None else None,
            not_measured=controller.not_measured if controller is not None else None,
        )
        worker.layout = Layout() if against.layout == "shuffled" else None
        worker.abba = against.order == "abba"
        started = time.perf_counter()
        # Both partners import and collect at once, on every CPU, while this process
        # pins itself; each joins this process's CPU once it has collected.
        where_base, how_base = partner_launch(config, options, against, revision)
        head_launch = None
        if against.head == "partner":
            head_launch = partner_launch(config, options, against, revision, head=True)
        # Both partners' stacks start alike: environments of one size.
        pad = 0
        if against.addresses == "fixed" and head_launch is not None:
            pad = max(how_base.size(), head_launch[1].size()) + 64
        bases: list[BaseSide] = []
        heads: list[BaseSide] = []
        try:
            for _ in range(against.processes):
                bases.append(spawn_partner(where_base, how_base, against, pad_to=pad))
                if head_launch is not None:
                    heads.append(spawn_partner(*head_launch, against, head=True, pad_to=pad))
            ab.pin(config)
            for side in bases:
                hello_partner(side, against, where_base)
                ab.pin_process(side.process.pid)
            for side in heads:
                hello_partner(side, against, head_tree(revision), True)
                ab.pin_process(side.process.pid)
        except BaseException:
            for side in bases + heads:
                side.close()
            raise
        worker.base = Replicas(bases)
        if heads:
            worker.head_partner = Replicas(heads)
        gate.start_s["base side ready"] = time.perf_counter() - started
        gate.base_nodeids = worker.base.nodeids
        gate.base_unmeasured(worker.base.info.get("unmeasured"))
        if against.python is not None:
            info = worker.base.info
            gate.base_python = f"{against.python} (Python {info.get('python', '?')})"
        return worker, controller, ab
    except BaseException:
        ab.close()
        raise
