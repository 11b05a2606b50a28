"""Tests whose files lie outside the rootdir (``--pyargs``, a path beside the rootdir) run under
the gate without failing for want of a baseline path: they are not judged, nothing is written
for them, and the summary says so once.  Real pytest sessions (``pytester`` subprocesses).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from run_helpers import PytestRunner

# Times are kept out of the verdict (shared machine); FLOPs decide.
NO_TIMES = ["--opprof-min-time", "1000s", "--opprof-warmup", "1"]

MATMUL = """
import os
import numpy as np

def test_{name}():
    n = int(os.environ.get("{env}", "32"))
    a = np.ones((n, n))
    assert (a @ a)[0, 0] == n
"""


@pytest.fixture
def layout(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, run_pytest: PytestRunner
) -> Path:
    """``root/`` (the rootdir, with a test) and ``ext/pkg/`` beside it (an importable package)."""
    root = pytester.path / "root"
    pkg = pytester.path / "ext" / "pkg"
    pkg.mkdir(parents=True)
    root.mkdir()
    (root / "pytest.ini").write_text("[pytest]\n")
    (root / "test_in.py").write_text(MATMUL.format(name="in", env="IN_N"))
    (pkg / "__init__.py").write_text("")
    (pkg / "test_ext.py").write_text(MATMUL.format(name="ext", env="EXT_N"))
    # run_pytest has put the package on PYTHONPATH; the external package goes before it.
    parts = [str(pytester.path / "ext"), os.environ.get("PYTHONPATH", "")]
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(p for p in parts if p))
    for name in ("IN_N", "EXT_N"):
        monkeypatch.delenv(name, raising=False)
    return root


def run(run_pytest: PytestRunner, root: Path, *args: str) -> pytest.RunResult:
    return run_pytest(
        f"--rootdir={root}",
        "--opprof",
        *NO_TIMES,
        *args,
    )


@pytest.mark.slow
@pytest.mark.parametrize(
    "target",
    [["--pyargs", "pkg.test_ext"], ["ext/pkg/test_ext.py"]],
    ids=["pyargs", "sibling-path"],
)
def test_outside_rootdir_is_not_judged_and_never_fails_for_its_path(
    pytester: pytest.Pytester,
    layout: Path,
    monkeypatch: pytest.MonkeyPatch,
    target: list[str],
    run_pytest: PytestRunner,
) -> None:
    tests = [*target, str(layout / "test_in.py")]
    first = run(run_pytest, layout, "--opprof-update-baselines", *tests)
    assert first.ret == 0, first.stdout.str()
    first.assert_outcomes(passed=2)
    text = first.stdout.str()
    assert "unusable baseline" not in text
    assert text.count("not compared: 1 test(s) outside the rootdir") == 1, text
    written = sorted(p.relative_to(pytester.path).as_posix() for p in pytester.path.rglob("*.json"))
    assert written == ["root/baselines/test_in.json"]

    # The external test changes its FLOPs: not judged, so it passes; the rootdir's test
    # with the same change is judged and fails, so the gate did run.
    monkeypatch.setenv("EXT_N", "48")
    monkeypatch.setenv("IN_N", "48")
    second = run(run_pytest, layout, *tests)
    second.assert_outcomes(passed=1, failed=1)
    second.stdout.fnmatch_lines(
        [
            "*1 regressed, 1 outside the rootdir*",
            "FAILED *test_in.py::test_in - opprof REGRESSED*",
        ]
    )
    assert "unusable baseline" not in second.stdout.str()
    assert "test_ext" not in "\n".join(
        line for line in second.stdout.lines if line.startswith("FAILED")
    )
