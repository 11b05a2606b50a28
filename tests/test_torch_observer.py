"""The native torch op observer: the same ops, shapes, nesting, FLOPs and bytes as Kineto,
and its callback gone after every exit path."""

from __future__ import annotations

import contextlib
from collections import Counter
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pytest

torch = pytest.importorskip("torch")  # the optional extra; .ci/run installs it

import torch.nn.functional as F  # noqa: E402
from torch import nn  # noqa: E402

import pytest_opprof as opprof  # noqa: E402
from pytest_opprof.capture.sources import torch_observer, torch_source  # noqa: E402
from pytest_opprof.capture.sources.kineto_read import KinetoRead  # noqa: E402

if TYPE_CHECKING:
    from run_helpers import PytestRunner


def _observer() -> Any:
    module, reason = torch_observer.load()
    assert module is not None, f"the observer did not build or load: {reason}"
    return module


@contextlib.contextmanager
def _collector(name: str) -> Iterator[None]:
    source = torch_source.SOURCE
    saved, source.collector = source.collector, name
    try:
        yield
    finally:
        source.collector = saved


def _workload() -> None:
    torch.manual_seed(0)
    model = nn.Sequential(
        nn.Conv2d(3, 4, 3, stride=2, padding=1), nn.ReLU(), nn.Flatten(), nn.Linear(100, 10)
    )
    loss = F.cross_entropy(model(torch.randn(2, 3, 9, 9)), torch.tensor([1, 2]))
    loss.backward()
    with torch.autograd.profiler.record_function("block"):
        torch.ones(3).repeat(2, 2)
        torch.ones(2, 3).sum(0)  # aten::sum calling aten::sum: merged
        torch.cat([torch.ones(2), torch.zeros(3)])  # a TensorList
        torch.ones(3).mul(2.5).add(1, alpha=2)  # Scalars
        F.conv_transpose2d(torch.randn(1, 2, 5, 5), torch.randn(2, 3, 3, 3), stride=2)


def _read(collector: str) -> KinetoRead:
    """What the source reads with this collector, before records are built."""
    source = torch_source.TorchSource(collector=collector)
    source.acquire()
    try:
        source.start_options()
        _workload()
        if collector == "kineto":
            result = source.stop_kineto()
            assert result is not None
            return torch_source.read_events(result.events())
        observer = source._observer
        assert observer is not None, source.collector_reason
        source._marker.emit(torch._C._profiler._RecordFunctionFast)
        source._observer = None
        observer.stop()
        return torch_observer.read(observer, torch_source.MARKER)
    finally:
        source.release()


def _ops(read: KinetoRead) -> Counter[tuple[str, str, str]]:
    return Counter(
        (read.names[row[3]], repr(read.shapes[row[4]]), repr(read.dtypes[row[4]]))
        for row in read.ops.tolist()
    )


def test_observer_reads_what_kineto_reads() -> None:
    _observer()
    _workload()  # warm: first calls may take other kernels
    kineto, native = _read("kineto"), _read("auto")
    assert _ops(native) == _ops(kineto)
    assert sorted(native.mem[:, 2].tolist()) == sorted(kineto.mem[:, 2].tolist())
    assert len(native.marker_starts) == len(kineto.marker_starts) == 10
    dtypes = {d for row in native.dtypes for d in row}
    # the workload reached every argument kind the encoding tells apart
    assert {"float", "long int", "Scalar", "TensorList"} <= dtypes
    assert any(d.startswith("ScalarList=") for d in dtypes)  # aten::convolution's
    assert "ScalarList" in dtypes  # other ops' lists, values not kept


def _profile_rows(collector: str) -> tuple[dict[object, tuple[int, ...]], Counter[object]]:
    with _collector(collector), opprof.profile(capture=["torch"]) as prof:
        _workload()
    rows = {
        (row.key, str(row.input_shapes)): (
            row.count,
            row.flops,
            row.self_cpu_memory_usage,
            row.cpu_memory_usage,
        )
        for row in prof.key_averages(group_by_input_shape=True)
    }
    nesting = Counter(
        (e.name, e.cpu_parent.name if e.cpu_parent is not None else None) for e in prof.events()
    )
    return rows, nesting


def test_profile_with_observer_equals_profile_with_kineto() -> None:
    """Names, shapes, counts, FLOPs, bytes and nesting of a model's forward + backward."""
    _observer()
    _workload()
    kineto_rows, kineto_nesting = _profile_rows("kineto")
    native_rows, native_nesting = _profile_rows("auto")
    assert torch_source.SOURCE.collector_reason is None
    assert native_rows == kineto_rows
    # Each op under the same parent, but for ties: Kineto's timestamps can tie for ops of a
    # few tens of ns, and its interval nesting then places one of them differently.  In
    # CI, on a host fast enough for such ops, one event of about 200 moved in 2 runs of 2
    # (an aten::resolve_conj into its neighbour, a detach out of its aten::detach) while the
    # observer's own clock nested them as torch calls them.
    agree = sum((native_nesting & kineto_nesting).values())
    assert agree >= 0.98 * sum(kineto_nesting.values()), native_nesting - kineto_nesting
    assert sum(flops for _, flops, _, _ in native_rows.values()) > 0
    assert ("aten::repeat", "block") in native_nesting
    # torch.profiler's _remove_dup_nodes merge: one aten::sum with dim, not two nested
    assert ("aten::sum", "aten::sum") not in native_nesting


def test_callback_removed_when_the_profiled_block_raises() -> None:
    observer = _observer()
    a = torch.randn(8, 8)
    with pytest.raises(KeyError), opprof.profile(capture=["torch"]):
        torch.mm(a, a)
        assert observer.recording() and torch.autograd._profiler_enabled()
        raise KeyError("inside")
    assert not observer.recording()
    assert not torch.autograd._profiler_enabled()
    with torch.profiler.profile() as other:  # another profiler starts: nothing left behind
        torch.mm(a, a)
    assert any(e.name == "aten::mm" for e in other.events())


def test_callback_removed_after_a_failing_profiled_test(
    pytester: pytest.Pytester, run_pytest: PytestRunner
) -> None:
    observer = _observer()
    pytester.makepyfile(
        """
        import torch

        def test_raises():
            a = torch.randn(8, 8)
            torch.mm(a, a)
            raise RuntimeError("inside the profiled test")

        def test_after():
            a = torch.randn(8, 8)
            torch.mm(a, a)
        """
    )
    result = run_pytest.inprocess("--opprof", "--opprof-capture", "torch", "-p", "no:randomly")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*aten::*test_after"])
    assert not observer.recording()
    assert not torch.autograd._profiler_enabled()


def _kineto_session(
    pytester: pytest.Pytester, run_pytest: PytestRunner, check: str, *extra: str
) -> pytest.RunResult:
    """A torch session of a few ``torch.mm`` whose second test asserts ``check`` about
    the collector the source chose; both must pass."""
    pytester.makepyfile(
        f"""
        import torch
        from pytest_opprof.capture.sources import torch_source

        def test_mm():
            a = torch.ones(128, 128)
            for _ in range(5):
                torch.mm(a, a)

        def test_collector_was_kineto():
            assert {check}
        """
    )
    result = run_pytest("--opprof", "--opprof-capture", "torch", "-p", "no:randomly", *extra)
    result.assert_outcomes(passed=2)
    return result


@pytest.mark.slow
def test_build_failure_falls_back_to_kineto_and_says_why(
    pytester: pytest.Pytester, run_pytest: PytestRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No working compiler: the session passes with Kineto's ops, and its end says why."""
    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", str(pytester.path / "extensions"))
    monkeypatch.setenv("CXX", "/bin/false")
    result = _kineto_session(pytester, run_pytest, "torch_source.SOURCE.collector_reason")
    # test_mm's row names an aten op as its top op: mm, or under load the first fill_.
    result.stdout.fnmatch_lines(
        ["*aten::*test_mm", "opprof: torch ops collected by Kineto (slower), not the observer: *"]
    )


@pytest.mark.slow
def test_under_xdist_the_controller_says_why(
    pytester: pytest.Pytester, run_pytest: PytestRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A pytest-xdist worker's terminal goes nowhere: the controller prints its notes."""
    pytest.importorskip("xdist")
    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", str(pytester.path / "extensions"))
    monkeypatch.setenv("CXX", "/bin/false")
    result = _kineto_session(
        pytester, run_pytest, "torch_source.SOURCE.collector_reason", "-n", "2"
    )
    line = "opprof: torch ops collected by Kineto (slower), not the observer: *"
    result.stdout.fnmatch_lines([line])
    # each reason once (the second worker may fail otherwise: it waits for the first's build)
    notes = [n for n in result.stdout.lines if n.startswith(line[:40])]
    assert len(notes) == len(set(notes)), notes


@pytest.mark.slow
def test_kineto_chosen_by_environment_is_not_reported(
    pytester: pytest.Pytester, run_pytest: PytestRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPPROF_TORCH_OBSERVER", "0")
    check = 'torch_source.SOURCE.collector_reason == "OPPROF_TORCH_OBSERVER=0"'
    result = _kineto_session(pytester, run_pytest, check)
    result.stdout.fnmatch_lines(["*aten::*test_mm"])
    assert "observer" not in result.stdout.str()
