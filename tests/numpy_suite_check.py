"""CI check: numpy's own tests give the same outcomes with numpy capture recording.

Runs a slice of numpy's shipped test modules twice in subprocesses: once plainly,
once with the numpy hooks installed for the session and a profile recording
around every test.  Prints both outcome counts and exits non-zero unless they
are equal (or when the hooked run recorded no numpy events).

    python tests/numpy_suite_check.py [numpy test modules...]
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import textwrap

DEFAULT_MODULES = [
    "numpy.linalg.tests.test_linalg",
    "numpy._core.tests.test_einsum",
    "numpy._core.tests.test_ufunc",
]
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

PLUGIN = textwrap.dedent(
    '''
    """Counts outcomes; with OPPROF_SUITE_CAPTURE=1 profiles every test's call phase."""
    import json
    import os

    import pytest

    CAPTURE = os.environ.get("OPPROF_SUITE_CAPTURE") == "1"
    STATS = {"events": 0, "tests_profiled": 0}


    def pytest_sessionstart(session):
        if CAPTURE:
            from pytest_opprof.sources.numpy_source import SOURCE

            SOURCE.acquire()  # installed once, as the opprof plugin does


    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_call(item):
        if not CAPTURE:
            return (yield)
        import pytest_opprof as opprof

        prof = opprof.profile(capture=["numpy"], profile_memory=False)
        prof.start()
        try:
            return (yield)
        finally:
            prof.stop()
            STATS["events"] += len(prof.records())
            STATS["tests_profiled"] += 1


    def pytest_terminal_summary(terminalreporter):
        outcomes = {
            key: len(terminalreporter.stats.get(key, []))
            for key in ("passed", "failed", "skipped", "xfailed", "xpassed", "error")
        }
        if CAPTURE:
            from pytest_opprof import _native
            from pytest_opprof.sources.numpy_source import SOURCE

            SOURCE.release()
            STATS["misses"] = _native.numpy_hook_counts().misses
            STATS["installed_after"] = _native.numpy_hook_counts().installed
        with open(os.environ["OPPROF_SUITE_OUT"], "w") as f:
            json.dump({"outcomes": outcomes, **STATS}, f)
    '''
)


def run(modules: list[str], capture: bool, workdir: str) -> dict[str, object]:
    out = os.path.join(workdir, f"result-{int(capture)}.json")
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([workdir, REPO, env.get("PYTHONPATH", "")])
    env["OPPROF_SUITE_CAPTURE"] = "1" if capture else "0"
    env["OPPROF_SUITE_OUT"] = out
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"]
    cmd += ["-p", "opprof_suite_plugin", "--pyargs", *modules]
    proc = subprocess.run(cmd, cwd=workdir, env=env, capture_output=True, text=True)
    tail = proc.stdout.strip().splitlines()[-1:] if proc.stdout.strip() else []
    print(f"{'hooked' if capture else 'plain '}: {' '.join(tail)}")
    if not os.path.exists(out):
        print(proc.stdout[-4000:], proc.stderr[-4000:], sep="\n")
        raise SystemExit(f"pytest wrote no result ({'hooked' if capture else 'plain'} run)")
    with open(out) as f:
        result: dict[str, object] = json.load(f)
    return result


def main(argv: list[str]) -> int:
    modules = argv or DEFAULT_MODULES
    with tempfile.TemporaryDirectory() as workdir:
        with open(os.path.join(workdir, "opprof_suite_plugin.py"), "w") as f:
            f.write(PLUGIN)
        plain = run(modules, False, workdir)
        hooked = run(modules, True, workdir)
    print(f"plain outcomes:  {plain['outcomes']}")
    print(f"hooked outcomes: {hooked['outcomes']}")
    print(
        f"hooked run: {hooked['events']} events over {hooked['tests_profiled']} tests, "
        f"{hooked['misses']} hook misses, installed after: {hooked['installed_after']}"
    )
    ok = (
        plain["outcomes"] == hooked["outcomes"]
        and hooked["events"] != 0
        and hooked["misses"] == 0
        and not hooked["installed_after"]
    )
    print("OK: identical outcomes" if ok else "FAIL: outcomes differ or capture misbehaved")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
