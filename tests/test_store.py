"""Baseline files: layout, stable text, strict reading, merging, atomic writes, path safety."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from baseline_helpers import Row, entry, machine, simple_summary, summary_of
from hypothesis import given
from hypothesis import strategies as st

from pytest_opprof.errors import BaselineError, OpprofError
from pytest_opprof.gate.jsonio import round_sig
from pytest_opprof.gate.store import (
    SCHEMA_VERSION,
    baseline_path,
    dumps,
    load,
    split_nodeid,
    update,
)
from pytest_opprof.gate.summary import OTHER_OPS

TESTS_DIR = Path(__file__).parent


def test_roundtrip_keeps_exact_figures_and_rounds_times(tmp_path: Path) -> None:
    rows = [
        Row(
            "numpy.matmul",
            7,
            self_cpu_time_total=1234.567,
            cpu_time_total=1234.567,
            flops=123_456_789,
            self_cpu_memory_usage=-4096,
        )
    ]
    summary = summary_of([(2345.678, rows)])
    path = tmp_path / "test_a.json"
    assert update(path, {"test_x": entry(summary)})

    back = load(path)["test_x"]
    op = back.summary.ops["numpy.matmul"]
    assert (op.count, op.flops, op.self_memory_bytes) == (7, 123_456_789, -4096)
    assert op.self_cpu_time.median_ns == 1_230_000  # 1,234,567 ns to 3 significant digits
    assert back.summary.wall_time.samples_ns == (2_350_000,)
    assert back.machine == machine()
    assert back.recorded_at == "2025-01-31T12:00:00Z"
    # Reading back and writing again gives the same bytes: the rounding is stable.
    assert dumps(load(path)) == path.read_text(encoding="utf-8")


def test_text_is_sorted_indented_and_readable(tmp_path: Path) -> None:
    path = tmp_path / "test_a.json"
    update(path, {"test_z": entry(simple_summary()), "test_a": entry(simple_summary())})
    text = path.read_text(encoding="utf-8")
    data = json.loads(text)
    assert data["schema"] == SCHEMA_VERSION and data["kind"] == "opprof-baseline"
    assert list(data["tests"]) == ["test_a", "test_z"]
    assert list(data["tests"]["test_a"]["ops"]) == sorted(data["tests"]["test_a"]["ops"])
    assert text.endswith("}\n") and "\n  " in text
    # Per-round samples stay on one line, so a refreshed figure is a one-line diff.
    assert '"wall_time": "1.5 ms"' in text
    # Every object's keys appear in sorted order in the text itself.
    orders: list[list[str]] = []
    json.loads(text, object_pairs_hook=lambda pairs: orders.append([k for k, _ in pairs]))
    assert orders and all(keys == sorted(keys) for keys in orders)


def test_update_twice_is_a_no_op(tmp_path: Path) -> None:
    path = tmp_path / "test_a.json"
    assert update(path, {"test_x": entry(simple_summary())})
    before = path.stat().st_mtime_ns
    assert not update(path, {"test_x": entry(simple_summary())})
    assert path.stat().st_mtime_ns == before


def test_merge_keeps_other_tests_and_replaces_changed(tmp_path: Path) -> None:
    path = tmp_path / "test_a.json"
    update(path, {"test_keep": entry(simple_summary()), "test_change": entry(simple_summary())})
    update(
        path,
        {
            "test_change": entry(simple_summary(matmul_flops=4_000_000)),
            "test_new": entry(simple_summary()),
        },
    )
    stored = load(path)
    assert sorted(stored) == ["test_change", "test_keep", "test_new"]
    assert stored["test_keep"].summary.flops == 2_005_000
    assert stored["test_change"].summary.flops == 4_005_000


def test_missing_file_loads_as_empty(tmp_path: Path) -> None:
    assert load(tmp_path / "nothing.json") == {}


@pytest.mark.parametrize(
    ("text", "field"),
    [
        ("{", None),  # truncated
        ("\x00\x01garbage", None),
        ("[]", None),
        ('{"kind": "opprof-baseline", "schema": 1, "tests": []}', "tests"),
        ('{"kind": "something-else", "schema": 1, "tests": {}}', "kind"),
        ('{"kind": "opprof-baseline", "schema": "1", "tests": {}}', "schema"),
        ('{"kind": "opprof-baseline", "schema": 1}', "tests"),
    ],
)
def test_malformed_files_name_the_file_and_field(
    tmp_path: Path, text: str, field: str | None
) -> None:
    path = tmp_path / "test_bad.json"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(BaselineError) as info:
        load(path)
    assert str(path) in str(info.value)
    assert isinstance(info.value, OpprofError)
    assert info.value.field == field
    assert path.read_text(encoding="utf-8") == text  # reading never modifies


def _valid(tmp_path: Path) -> tuple[Path, dict[str, object]]:
    path = tmp_path / "test_a.json"
    update(path, {"TestX::test_y[a-b]": entry(simple_summary())})
    return path, json.loads(path.read_text(encoding="utf-8"))


def test_wrong_type_deep_inside_names_the_field_path(tmp_path: Path) -> None:
    path, data = _valid(tmp_path)
    data["tests"]["TestX::test_y[a-b]"]["ops"]["numpy.add"]["count"] = "5"  # type: ignore[index]
    path.write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(BaselineError) as info:
        load(path)
    message = str(info.value)
    assert str(path) in message
    assert 'tests["TestX::test_y[a-b]"].ops["numpy.add"].count' in message
    assert "expected an integer" in message


def test_nan_is_refused(tmp_path: Path) -> None:
    path, data = _valid(tmp_path)
    data["tests"]["TestX::test_y[a-b]"]["summary"]["op_time_share"] = float("nan")  # type: ignore[index]
    path.write_text(json.dumps(data), encoding="utf-8")  # json writes a bare NaN
    assert "NaN" in path.read_text(encoding="utf-8")
    with pytest.raises(BaselineError, match=r"op_time_share: expected a finite number"):
        load(path)


def test_negative_count_and_truncation_are_refused(tmp_path: Path) -> None:
    path, data = _valid(tmp_path)
    text = path.read_text(encoding="utf-8")
    path.write_text(text[: len(text) // 2], encoding="utf-8")
    with pytest.raises(BaselineError, match="not valid JSON"):
        load(path)
    data["tests"]["TestX::test_y[a-b]"]["ops"]["numpy.add"]["flops"] = -1  # type: ignore[index]
    path.write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(BaselineError, match=r"flops: expected >= 0"):
        load(path)


@pytest.mark.parametrize("where", ["file", "entry"])
def test_newer_schema_is_a_clear_error(tmp_path: Path, where: str) -> None:
    path, data = _valid(tmp_path)
    if where == "file":
        data["schema"] = SCHEMA_VERSION + 1
    else:
        data["tests"]["TestX::test_y[a-b]"]["schema"] = SCHEMA_VERSION + 1  # type: ignore[index]
    path.write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(BaselineError, match="newer than this pytest-opprof reads"):
        load(path)


def test_update_refuses_to_overwrite_a_corrupted_file(tmp_path: Path) -> None:
    path = tmp_path / "test_a.json"
    path.write_text('{"kind": "opprof-baseline", "schema": 1, "tests": {"t": 1}}', encoding="utf-8")
    with pytest.raises(BaselineError, match=r"tests\.t: expected an object"):
        update(path, {"test_x": entry(simple_summary())})
    assert "test_x" not in path.read_text(encoding="utf-8")


_WRITER = textwrap.dedent(
    """
    import os, signal, sys
    sys.path.insert(0, sys.argv[2])
    from baseline_helpers import Row, entry, summary_of
    from pytest_opprof.gate import store

    if sys.argv[3] == "die-before-rename":
        def fsync(fd):
            print("writing", flush=True)
            os.kill(os.getpid(), signal.SIGKILL)
        os.fsync = fsync
    rows = [Row(f"op{i}", i, self_cpu_time_total=i, flops=i) for i in range(int(sys.argv[4]))]
    print("start", flush=True)
    store.update(sys.argv[1], {"test_huge": entry(summary_of([(1.0, rows)]))})
    print("done", flush=True)
    """
)


def _run_writer(path: Path, mode: str, ops: int) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(TESTS_DIR.parent)}
    return subprocess.Popen(
        [sys.executable, "-c", _WRITER, str(path), str(TESTS_DIR), mode, str(ops)],
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )


@pytest.mark.slow
def test_killed_writer_leaves_the_old_file_whole(tmp_path: Path) -> None:
    path = tmp_path / "test_a.json"
    update(path, {"test_keep": entry(simple_summary())})
    old = path.read_bytes()
    # The writer is SIGKILLed after writing its temporary file and before the rename.
    proc = _run_writer(path, "die-before-rename", 20_000)
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode == -signal.SIGKILL
    assert "writing" in out and "done" not in out
    assert path.read_bytes() == old
    assert list(load(path)) == ["test_keep"]
    leftovers = [p for p in tmp_path.iterdir() if p != path]
    assert leftovers and all(p.name.startswith(".test_a.json.") for p in leftovers)
    assert len(leftovers[0].read_text(encoding="utf-8")) > len(old)  # the new text was written


@pytest.mark.slow
def test_writer_killed_at_any_moment_leaves_a_parseable_file(tmp_path: Path) -> None:
    path = tmp_path / "test_a.json"
    update(path, {"test_keep": entry(simple_summary())})
    for delay in (0.05, 0.3, 0.8):
        proc = _run_writer(path, "normal", 50_000)
        assert proc.stdout is not None and proc.stdout.readline() == "start\n"
        time.sleep(delay)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=60)
        stored = load(path)  # old or new, never partial
        assert "test_keep" in stored
        if "test_huge" in stored:  # the new entry, whole: its kept ops and those folded
            huge = stored["test_huge"].summary
            assert huge.left_out is not None
            named = [key for key in huge.ops if key != OTHER_OPS]
            assert len(named) + huge.left_out.keys == 50_000


def test_split_nodeid() -> None:
    assert split_nodeid("tests/test_a.py::TestX::test_y[a/b-..]") == (
        "tests/test_a.py",
        "TestX::test_y[a/b-..]",
    )


def test_baseline_path_maps_module_to_json(tmp_path: Path) -> None:
    assert baseline_path(tmp_path, "tests/sub/test_a.py") == tmp_path / "tests/sub/test_a.json"
    assert baseline_path(tmp_path, "docs/guide.md") == tmp_path / "docs/guide.md.json"


@pytest.mark.parametrize(
    "module",
    [
        "../test_a.py",
        "tests/../../test_a.py",
        "/etc/test_a.py",
        "C:/x/test_a.py",
        "..\\test_a.py",
        "",
    ],
)
def test_module_paths_cannot_leave_the_baseline_dir(tmp_path: Path, module: str) -> None:
    with pytest.raises(BaselineError):
        baseline_path(tmp_path / "baselines", module)


def test_symlink_out_of_the_baseline_dir_is_refused(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    base = tmp_path / "baselines"
    base.mkdir()
    (base / "tests").symlink_to(outside, target_is_directory=True)
    with pytest.raises(BaselineError, match="outside the baseline directory"):
        baseline_path(base, "tests/test_a.py")


def test_parametrized_ids_are_keys_never_paths(tmp_path: Path) -> None:
    base = tmp_path / "baselines"
    nodeid = "tests/test_a.py::TestX::test_y[../../evil/x-/etc/passwd]"
    module, name = split_nodeid(nodeid)
    path = baseline_path(base, module)
    update(path, {name: entry(simple_summary())})
    assert sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*")) == [
        "baselines",
        "baselines/tests",
        "baselines/tests/test_a.json",
    ]
    assert list(load(path)) == [name]


@given(st.integers(min_value=0, max_value=10**15))
def test_round_sig_is_idempotent_and_close(value: int) -> None:
    once = round_sig(value)
    assert round_sig(once) == once
    assert abs(once - value) <= max(value, 1) * 0.005
