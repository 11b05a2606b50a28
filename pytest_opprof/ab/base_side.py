"""The head's handle on its base partner: start it, hand it each test, one round at a time.

One partner process per process that runs tests (a single process, or each
pytest-xdist worker), started once and kept warm for the whole run.  The head never
runs a round while the partner runs one: each command waits for its answer.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from pytest_opprof.ab import project_options
from pytest_opprof.ab.channel import Channel, ChannelClosed, figures_from_json
from pytest_opprof.ab.partner import FDS_VARIABLE, protocol_version
from pytest_opprof.ab.revision import BaseRevision
from pytest_opprof.errors import OpprofError
from pytest_opprof.gate.summary import RoundFigures

HELLO_TIMEOUT_S = 600
"""How long the partner may take to import and collect before the run gives up."""


class BaseSideError(OpprofError):
    """The base side cannot run: it did not start, collect or import."""


@dataclass
class BaseTest:
    """One test's base side as the head drives it."""

    nodeid: str
    present: bool
    """The base collected it and entered its call phase."""
    why: str = ""
    """Why it is not present, or why its rounds stopped (the base's own failure)."""
    rounds: list[RoundFigures] = field(default_factory=list)
    failed: bool = False
    finished: bool = False
    """Its protocol already ended on the base (it failed before its first round)."""


PAD_VARIABLE = "OPPROF_AB_PAD"
"""Filler that gives the partners of one run environments of one size: the environment
and arguments lie at the top of a process's stack, so their size sets where everything
on the stack lies (``docs/ab.md``, "Two partners")."""
MALLOC_FIXED = {
    "MALLOC_MMAP_THRESHOLD_": str(32 * 1024 * 1024),
    "MALLOC_TRIM_THRESHOLD_": str(128 * 1024 * 1024),
    "MALLOC_TOP_PAD_": str(16 * 1024 * 1024),
}
"""glibc's malloc settings both partners start with (where the user set none): set, they
turn off its thresholds' adjustment to what a process freed before, so whether a round's
arrays come from pages already mapped or fresh ones is not decided by each process's
history (``docs/ab.md``, "Two partners").  scipy.signal's ``TestSTFT``, A/A, two batches
of six runs interleaved: 18-20% of its op times' 90% intervals left out zero, and one test
in six runs failed and one was called improved (an ``ndarray.astype`` 12 times slower on
one side); with these, 9% both times and none.  Other C libraries ignore them."""
ADDR_NO_RANDOMIZE = 0x0040000
"""Linux's personality flag for a process whose addresses are not randomised
(``setarch -R``), inherited across exec."""
PR_SET_THP_DISABLE = 41
"""Linux's ``prctl`` that keeps a process off transparent huge pages, inherited across
fork and exec.  numpy asks for huge pages for its arrays of 4 MB or more (``madvise``), and
whether a process gets them depends on the machine's free memory at that moment: in one
recorded run of the generated suite both head partners summed its 8 MB arrays 18-28%
slower than the base's for all 40 tests, and ``numpy.add.reduce`` failed five unchanged
tests; without huge pages the same sum ran 8-12% slower (``bench/ab_hugepages.py``;
``docs/ab.md``, "Huge pages").  Off on both sides, neither gets them."""


@dataclass
class Launch:
    """How a partner process is started: its command, environment and directory."""

    command: list[str]
    env: dict[str, str]
    cwd: Path

    def size(self) -> int:
        """The bytes its arguments and environment take on its stack."""
        return sum(len(a.encode()) + 1 for a in self.command) + sum(
            len(k.encode()) + len(v.encode()) + 2 for k, v in self.env.items()
        )


def launch(
    revision: BaseRevision,
    rootdir: Path,
    invocation_dir: Path,
    args: Sequence[str],
    options: Sequence[str],
    python: str | None = None,
    given: Mapping[str, object] | None = None,
) -> Launch:
    """The partner's launch for ``revision``'s checkout (without its pipes); ``given``:
    the values of the project's own options (``project_options.py``)."""
    base_root = revision.base_path(rootdir)
    if not base_root.is_dir():
        raise BaseSideError(f"{revision.describe()} has no {rootdir.name}/ directory")
    paths = _base_args(revision, rootdir, invocation_dir, args)
    env = dict(os.environ)
    for name in ("PYTEST_XDIST_WORKER", "PYTEST_XDIST_WORKER_COUNT", PAD_VARIABLE):
        env.pop(name, None)
    env.pop("PYTEST_ADDOPTS", None)  # the head's, already in its own arguments
    # The base's own code first: a project imported from its rootdir or src/ is the
    # base's, not the head's (an installed or compiled project needs its own Python,
    # --opprof-against-python, where the base is installed).
    env["PYTHONPATH"] = os.pathsep.join(
        [str(p) for p in (base_root, base_root / "src") if p.is_dir()]
        + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else [])
    )
    for name, value in MALLOC_FIXED.items():
        env.setdefault(name, value)
    if given:
        env[project_options.VARIABLE] = json.dumps(given, sort_keys=True)
    # The pipes' numbers at a fixed width: the launch's size is known before they exist.
    env[FDS_VARIABLE] = "00000,00000"
    executable = python or sys.executable
    command = [executable, "-c", _BOOT, _plugin_parent() if python is None else ""]
    command += ["-p", "no:cacheprovider", "--opprof", *options, *paths]
    return Launch(command, env, _base_cwd(revision, invocation_dir, base_root))


def _base_cwd(revision: BaseRevision, invocation_dir: Path, base_root: Path) -> Path:
    """Where the partner runs: the directory pytest was started in, as the partner's tree
    has it, so a test that opens ``data.txt`` relative to it finds that side's copy
    (``base_root`` where the base lacks it); a directory outside the repository is the
    same for both sides."""
    try:
        mapped = revision.base_path(invocation_dir)
    except ValueError:
        return invocation_dir
    return mapped if mapped.is_dir() else base_root


class BaseSide:
    """The partner process of this process, started as ``how`` (:func:`launch`) says, and
    the node ids it collected.

    ``pad_to``: the size its arguments and environment are padded to (``PAD_VARIABLE``);
    ``fixed_addresses``: start it with address-space randomisation and transparent huge
    pages off, where Linux lets a process do that."""

    def __init__(
        self,
        revision: BaseRevision,
        how: Launch,
        pad_to: int = 0,
        fixed_addresses: bool = False,
    ) -> None:
        self.revision = revision
        self.python = how.command[0]
        self.log = Path(tempfile.mkstemp(prefix="opprof-base-", suffix=".log")[1])
        head_read, partner_write = os.pipe()
        partner_read, head_write = os.pipe()
        env = how.env
        env[FDS_VARIABLE] = f"{partner_read:05d},{partner_write:05d}"
        short = pad_to - how.size() - len(PAD_VARIABLE) - 2
        if short >= 0:
            env[PAD_VARIABLE] = "x" * short
        with open(self.log, "wb") as log:
            self.process = subprocess.Popen(
                how.command,
                cwd=how.cwd,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                pass_fds=(partner_read, partner_write),
                preexec_fn=_start_alike() if fixed_addresses else None,
            )
        os.close(partner_read)
        os.close(partner_write)
        self.channel = Channel(head_read, head_write)
        self.nodeids: frozenset[str] = frozenset()
        self.info: dict[str, str] = {}
        self.quitting = False
        self.closed = False

    def hello(self) -> None:
        """Wait for the partner's collection; raise ``BaseSideError`` saying why it failed."""
        try:
            message = self.channel.receive()
        except ChannelClosed:
            self.process.wait(timeout=HELLO_TIMEOUT_S)
            raise BaseSideError(self._died()) from None
        _, version, nodeids, errors, info = message
        if version != protocol_version():
            raise BaseSideError(
                f"its Python ({self.python}) has pytest-opprof {version.split('/')[0]}, "
                f"this one {protocol_version().split('/')[0]}: install the same on both"
            )
        if errors:
            more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
            raise BaseSideError(f"collecting its tests failed: {errors[0]}{more}")
        self.nodeids = frozenset(nodeids)
        self.info = dict(info)

    def begin(self, nodeid: str, next_nodeid: str | None) -> BaseTest:
        """Start ``nodeid`` on the base side: its setup runs, then it waits for rounds."""
        if nodeid not in self.nodeids:
            return BaseTest(nodeid, present=False, why="not in the base")
        self.channel.send("test", nodeid, next_nodeid)
        answer = self.channel.receive()
        if answer[0] == "ready":
            return BaseTest(nodeid, present=True)
        _, outcome, why = answer  # ("finished", ...): setup or the warm-up failed, or skipped
        said = f"{outcome} on the base: {why}".strip()
        if outcome.startswith("call"):  # there, but failed before a round: not compared
            return BaseTest(nodeid, present=True, failed=True, why=said, finished=True)
        return BaseTest(nodeid, present=False, why=said)

    def round(self, test: BaseTest) -> RoundFigures | None:
        """One measured round of ``test`` on the base side (None once it failed)."""
        if not test.present or test.failed:
            return None
        self.channel.send("round")
        answer = self.channel.receive()
        if answer[0] == "round":
            figures = figures_from_json(answer[1])
            test.rounds.append(figures)
            return figures
        test.failed = True
        test.why = f"failed on the base: {answer[1]}"
        return None

    def end(self, test: BaseTest) -> None:
        """End the base side's call phase; its teardown runs before the next test starts."""
        if not test.present or test.finished:
            return
        if not test.failed:
            self.channel.send("done")
        _, outcome, why = self.channel.receive()  # ("finished", outcome, why)
        if outcome != "passed" and not test.failed:
            test.failed = True
            test.why = f"{outcome} on the base: {why}".strip()

    def quit(self) -> None:
        """Tell the partner to end its session (teardown of the fixtures it holds) without
        waiting for it: it ends while the head writes its reports."""
        if self.quitting:
            return
        self.quitting = True
        try:
            self.channel.send("quit")
        except ChannelClosed:
            pass

    def close(self) -> None:
        """End the partner and wait for it (once: its pipes' numbers may be reused after)."""
        if self.closed:
            return
        self.closed = True
        self.quit()
        try:
            self.process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.channel.close()
        try:
            self.log.unlink()
        except OSError:
            pass

    def _died(self) -> str:
        try:
            lines = self.log.read_text(errors="replace").strip().splitlines()
        except OSError:
            lines = []
        said = [line for line in lines if line.startswith("E ") or "Error" in line]
        last = (said or lines or [f"exit status {self.process.returncode}"])[-1]
        return f"its pytest exited ({self.process.returncode}) before collecting: {last.strip()}"


_BOOT = (
    "import sys\n"
    "head = sys.argv.pop(1)\n"
    "if head: sys.path.insert(0, head)\n"
    "import pytest_opprof.ab.partner as partner\n"
    "if head: sys.path.remove(head)\n"
    "sys.exit(partner.main())\n"
)
"""The partner's entry: this plugin imported from where the head's is (the same code on
both sides of one interpreter), then the base's paths first for everything else."""


def _start_alike() -> Callable[[], None] | None:
    """What the child runs before exec for no address-space randomisation (as ``setarch
    -R``) and no transparent huge pages (``PR_SET_THP_DISABLE``), or None where the system
    has no ``personality`` (not Linux).  The functions are found here, in the parent: a
    child of a process with threads must not import.  A system that refuses a call (a
    seccomp filter) starts the partner without that setting."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        personality, prctl = libc.personality, libc.prctl
    except (OSError, AttributeError):
        return None

    def start_alike() -> None:
        current = personality(0xFFFFFFFF)  # reads the persona, changes nothing
        if current != -1:
            personality(current | ADDR_NO_RANDOMIZE)
        prctl(PR_SET_THP_DISABLE, 1, 0, 0, 0)

    return start_alike


def _plugin_parent() -> str:
    import pytest_opprof

    return str(Path(pytest_opprof.__file__).resolve().parent.parent)


def _base_args(
    revision: BaseRevision, rootdir: Path, invocation_dir: Path, args: Sequence[str]
) -> list[str]:
    """The head's test paths as the base has them: paths under the repository mapped into
    the worktree (a path the base lacks is left out: its tests are new), the rest kept."""
    out = []
    for arg in args:
        path_part, sep, rest = arg.partition("::")
        path = Path(path_part)
        if not path.is_absolute():
            path = invocation_dir / path
        if not path.exists():  # not a path here (a module name under --pyargs): as given
            out.append(arg)
            continue
        try:
            mapped = revision.base_path(path)
        except ValueError:  # outside the repository: the same on both sides
            out.append(arg)
            continue
        if mapped.exists():  # else the base lacks it: its tests are new
            out.append(str(mapped) + sep + rest)
    return out or [str(revision.base_path(rootdir))]
