"""Under ``--opprof`` no test can see, or be measured with, what another test did.

What a test leaves behind must not reach the next: the plugin's ``gc.freeze()`` was
visible to tests, a thread a test left running was charged to the next test, and a
profile left recording or scopes left open broke every later test.  Each runs a real
pytest session in a subprocess with real numpy, and reads the per-test figures from the JSON report.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from run_helpers import PytestRunner


def report_tests(pytester: pytest.Pytester) -> dict[str, dict[str, Any]]:
    """Per node id, its entry in ``report.json``."""
    data = json.loads((pytester.path / "report.json").read_text(encoding="utf-8"))
    tests: dict[str, dict[str, Any]] = data["tests"]
    return tests


REPORT = ["--opprof-report", "report.json", "--opprof-report-details"]


GC_TESTS = """
import gc
import weakref

class Node:
    pass

def _cycle():
    a, b = Node(), Node()
    a.other, b.other = b, a
    return a

MARK = Node()
HOLDER = [_cycle()]
collected = []
_ref = weakref.ref(HOLDER[0], lambda r: collected.append("cycle"))

def test_gc_sees_an_import_time_object():
    assert any(o is MARK for o in gc.get_objects())

def test_an_import_time_cycle_is_collected():
    HOLDER.clear()
    gc.collect()
    assert collected == ["cycle"]

def test_nothing_is_frozen():
    assert gc.get_freeze_count() == 0
"""


def test_tests_that_observe_gc_pass_as_they_do_without_opprof(
    pytester: pytest.Pytester, run_pytest: PytestRunner
) -> None:
    # Item 5: the plugin froze every object alive at the first profiled test, so
    # gc.get_objects() missed them and an import-time cycle was never collected.
    pytester.makepyfile(test_gc=GC_TESTS)
    run_pytest("-p", "no:randomly").assert_outcomes(passed=3)
    run_pytest("--opprof", "-p", "no:randomly").assert_outcomes(passed=3)


MEMORY_TESTS = """
import numpy as np

KEEP = []

def test_cycle_dropped():
    a = [np.ones(1000)]
    a.append(a)

def test_kept():
    KEEP.append(np.ones(1000))
"""


def test_leaked_bytes_count_what_a_collection_cannot_free_only(
    pytester: pytest.Pytester, run_pytest: PytestRunner
) -> None:
    # Without the freeze the memory figures still collect garbage first: a dropped
    # cycle leaks nothing, an array kept in a module list leaks its 8000 bytes.
    pytester.makepyfile(test_mem=MEMORY_TESTS)
    run_pytest("--opprof", "-p", "no:randomly", *REPORT).assert_outcomes(passed=2)
    tests = report_tests(pytester)
    assert tests["test_mem.py::test_cycle_dropped"]["summary"]["memory"]["leaked_bytes"] == 0
    assert tests["test_mem.py::test_kept"]["summary"]["memory"]["leaked_bytes"] >= 8000


LEFT_PROFILE_TESTS = """
import numpy as np
import pytest_opprof

def test_a_leaves_a_profile_recording():
    pytest_opprof.profile().start()

def test_b():
    assert np.add(np.ones(3), 1).sum() == 6

def test_c():
    assert np.add(np.ones(3), 1).sum() == 6
"""

LEFT_SCOPES_TESTS = """
import numpy as np
import pytest_opprof

def test_a_leaves_scopes_open():
    for i in range(300):
        pytest_opprof.record_function(f"scope{i}").__enter__()

def test_b():
    assert np.add(np.ones(3), 1).sum() == 6
"""


def test_a_profile_or_scopes_left_open_are_reset_and_the_offender_is_named_once(
    pytester: pytest.Pytester, run_pytest: PytestRunner
) -> None:
    # Item 9: every test after one that left a profile recording failed with "already
    # recording"; after one that left 300 scopes open, every later test had 0 ops.
    pytester.makepyfile(test_left_profile=LEFT_PROFILE_TESTS, test_left_scopes=LEFT_SCOPES_TESTS)
    result = run_pytest("--opprof", "-p", "no:randomly", *REPORT)
    result.assert_outcomes(passed=5)
    tests = report_tests(pytester)
    for name in ("test_left_profile.py::test_b", "test_left_profile.py::test_c"):
        assert "numpy.add" in tests[name]["ops"], tests[name]["ops"]
    assert "numpy.add" in tests["test_left_scopes.py::test_b"]["ops"]
    lines = [line for line in result.stdout.lines if "left something behind" in line]
    assert len(lines) == 1, result.stdout.str()
    assert lines[0].startswith("opprof: 2 test(s) left something behind")
    assert (
        "test_left_profile.py::test_a_leaves_a_profile_recording: a profile recording" in lines[0]
    )


THREAD_TESTS = """
import threading
import time

import numpy as np

def test_a_leaves_a_thread_running():
    started = threading.Event()

    def work():
        a = np.ones((60, 60))
        started.set()
        while True:
            b = a @ a
            del b
            time.sleep(0.0002)

    threading.Thread(target=work, name="matmul-loop", daemon=True).start()
    started.wait()

def test_b():
    time.sleep(0.05)  # the thread runs about a hundred matmuls meanwhile
    assert np.add(np.ones(3), 1).sum() == 6
"""


def test_a_thread_a_test_left_running_is_kept_out_of_later_tests(
    pytester: pytest.Pytester, run_pytest: PytestRunner
) -> None:
    # Item 8: a daemon thread started by test A and still doing matmuls made test B
    # fail with MFLOPs of numpy.matmul it never ran.
    pytester.makepyfile(test_threads=THREAD_TESTS)
    result = run_pytest("--opprof", "-p", "no:randomly", *REPORT)
    result.assert_outcomes(passed=2)
    b = report_tests(pytester)["test_threads.py::test_b"]
    assert "numpy.matmul" not in b["ops"], sorted(b["ops"])
    assert b["summary"]["flops"] < 100  # its own add and sum; one 60x60 matmul is 432,000
    # Its allocations too: test_b allocates two 24-byte arrays (the counter rounds up).
    assert b["summary"]["memory"]["allocated_bytes"] < 1024, b["summary"]["memory"]
    result.stdout.fnmatch_lines(
        [
            "opprof: 1 test(s) left something behind (e.g. "
            "test_threads.py::test_a_leaves_a_thread_running: * thread(s) still running "
            "(matmul-loop*), whose ops are left out of later tests' figures)*"
        ]
    )
