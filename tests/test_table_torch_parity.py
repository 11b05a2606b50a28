"""The op table against torch.profiler's, rendered from the same torch workload.

Both profilers record the same small model (real torch, CPU); both tables are
rendered with the same arguments and compared column for column: the layout
(column widths, from the separator line), the headers, the unit of every cell
and the rows (op names and call counts).  Times differ between two runs and
are not compared.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pytest

torch = pytest.importorskip("torch")  # the optional extra; .ci/run installs it

from torch.profiler import ProfilerActivity  # noqa: E402
from torch.profiler import profile as torch_profile  # noqa: E402
from torch.profiler import record_function as torch_record_function  # noqa: E402

import pytest_opprof as opprof  # noqa: E402

# What each column's cells look like, in torch's table and in ours.
TIME = r"-?\d+\.\d{3}(s|ms|us)"
SHARE = r"(-?\d+\.\d{2}%|NaN)"
MEMORY = r"-?(\d+ B|\d+\.\d{2} (KB|MB|GB))"
CELL = {
    "Self CPU %": SHARE,
    "CPU total %": SHARE,
    "Self CPU": TIME,
    "CPU total": TIME,
    "CPU time avg": TIME,
    "CPU Mem": MEMORY,
    "Self CPU Mem": MEMORY,
    "# of Calls": r"\d+",
    "Input Shapes": r"\[.*",
    "Total KFLOPs": r"(\d+\.\d{3}|--)",
    "Total FLOPs": r"(\d+\.\d{3}|--)",
}
# torch nests an op that calls itself (aten::sum -> aten::sum) and counts it once;
# ours may count both, so either count passes.
DUPLICATED_BY_NESTING = {"aten::sum"}


def workload(scope: Callable[[str], Any]) -> None:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 32), torch.nn.ReLU(), torch.nn.Linear(32, 8))
    x = torch.randn(16, 64)
    for _ in range(3):
        with scope("forward"):
            y = model(x)
        y.sum()


@pytest.fixture(scope="module")
def profiles() -> tuple[Any, opprof.profile]:
    flags = {"record_shapes": True, "profile_memory": True, "with_flops": True}
    with torch_profile(activities=[ProfilerActivity.CPU], **flags) as theirs:
        workload(torch_record_function)
    with opprof.profile(capture=["torch"], **flags) as ours:
        workload(opprof.record_function)
    return theirs, ours


def parse(text: str) -> tuple[str, list[str], list[list[str]], str]:
    """(separator line, headers, data rows as cells, footer) of a torch-layout table."""
    lines = text.rstrip("\n").splitlines()
    seps = [i for i, line in enumerate(lines) if re.fullmatch(r"(-+  )+", line)]
    assert len(seps) == 3, text
    first, second, last = seps
    headers = re.split(r"\s{2,}", lines[first + 1].strip())
    rows = [re.split(r"\s{2,}", line.strip()) for line in lines[second + 1 : last]]
    return lines[first], headers, [r for r in rows if r != [""]], lines[last + 1]


def both(profiles: tuple[Any, opprof.profile], group_by_input_shape: bool, **kw: Any) -> Any:
    theirs, ours = profiles
    return (
        parse(theirs.key_averages(group_by_input_shape=group_by_input_shape).table(**kw)),
        parse(ours.key_averages(group_by_input_shape=group_by_input_shape).table(**kw)),
    )


def check_cells(headers: list[str], rows: list[list[str]]) -> None:
    for row in rows:
        assert len(row) == len(headers), (headers, row)
        for header, cell in zip(headers[1:], row[1:], strict=True):
            assert re.fullmatch(CELL[header], cell), (header, cell)


def calls(headers: list[str], rows: list[list[str]]) -> dict[str, int]:
    at = headers.index("# of Calls")
    out: dict[str, int] = {}
    for row in rows:
        if row[0] != "[memory]":  # torch and we attribute allocations differently
            out[row[0]] = out.get(row[0], 0) + int(row[at])
    return out


@pytest.mark.parametrize("group_by_input_shape", [False, True])
def test_same_columns_units_and_rows_as_torch(
    profiles: tuple[Any, opprof.profile], group_by_input_shape: bool
) -> None:
    (t_sep, t_head, t_rows, _), (o_sep, o_head, o_rows, o_foot) = both(
        profiles, group_by_input_shape, sort_by="cpu_time_total", row_limit=-1
    )
    assert o_head == t_head
    assert "Total KFLOPs" in o_head and ("Input Shapes" in o_head) == group_by_input_shape
    check_cells(t_head, t_rows)
    check_cells(o_head, o_rows)
    theirs, ours = calls(t_head, t_rows), calls(o_head, o_rows)
    assert set(ours) == set(theirs)
    for name, count in theirs.items():
        doubled = name in DUPLICATED_BY_NESTING and ours[name] == 2 * count
        assert ours[name] == count or doubled, (name, ours[name], count)
    if group_by_input_shape:
        shapes = o_head.index("Input Shapes")
        assert {r[shapes] for r in o_rows} >= {r[shapes] for r in t_rows if r[0] != "[memory]"}
    # Same names and shapes, so the same widths: the separator lines are equal.
    assert o_sep == t_sep
    assert re.fullmatch(rf"Self CPU time total: {TIME}", o_foot)


@pytest.mark.parametrize("unit", ["s", "ms", "us"])
def test_time_unit_and_row_limit_as_torch(profiles: tuple[Any, opprof.profile], unit: str) -> None:
    (t_sep, t_head, t_rows, t_foot), (o_sep, o_head, o_rows, o_foot) = both(
        profiles, False, sort_by="self_cpu_time_total", row_limit=3, time_unit=unit
    )
    assert (o_sep, o_head) == (t_sep, t_head)
    assert len(o_rows) == len(t_rows) == 3
    for rows in (o_rows, t_rows):
        assert all(r[o_head.index("CPU total")].endswith(unit) for r in rows)
    assert o_foot.endswith(unit) and t_foot.endswith(unit)


def test_row_limit_zero_prints_the_frame_without_rows(
    profiles: tuple[Any, opprof.profile],
) -> None:
    (t_sep, t_head, t_rows, _), (o_sep, o_head, o_rows, o_foot) = both(profiles, False, row_limit=0)
    assert t_rows == [] and o_rows == []
    assert (o_sep, o_head) == (t_sep, t_head)
    assert o_foot.startswith("Self CPU time total: ")


def test_column_limits_cut_as_torch_cuts(profiles: tuple[Any, opprof.profile]) -> None:
    kw = {"max_name_column_width": 12, "max_shapes_column_width": 14, "row_limit": -1}
    (t_sep, t_head, t_rows, _), (o_sep, o_head, o_rows, _) = both(profiles, True, **kw)
    assert (o_sep, o_head) == (t_sep, t_head)
    widths = [len(dashes) for dashes in o_sep.split()]
    assert widths[0] == 12 and widths[o_head.index("Input Shapes")] == 14
    for rows in (o_rows, t_rows):
        assert all(len(r[0]) <= 12 for r in rows)
        assert all(len(r[o_head.index("Input Shapes")]) <= 14 for r in rows)
    assert {r[0] for r in o_rows} == {r[0] for r in t_rows}


def test_top_level_only_says_what_torch_says(profiles: tuple[Any, opprof.profile]) -> None:
    theirs, ours = profiles
    t_text = theirs.key_averages().table(top_level_events_only=True)
    o_text = ours.key_averages().table(top_level_events_only=True)
    assert t_text.splitlines()[1] == o_text.splitlines()[1]
    assert "top-level" in o_text


def test_source_column_is_cut_to_max_src_column_width() -> None:
    def deep_function_name_so_the_frame_is_long() -> None:
        with opprof.record_function("scope"):
            pass

    with opprof.profile(capture=["none"], with_stack=True) as prof:
        deep_function_name_so_the_frame_is_long()
    events = prof.events()
    frame = events[0].stack[0]
    assert len(frame) > 30
    text = events.table(max_src_column_width=30)
    lines = [line for line in text.splitlines() if "..." in line]
    assert lines, text
    cut = lines[0].rstrip().split("  ")[-1]
    assert cut.startswith("...") and len(cut) == 30 and frame.endswith(cut[3:])
    full = events.table(max_src_column_width=None)
    assert frame in full
