"""The op table: columns, sorting, limits, units and their errors."""

from __future__ import annotations

import re

import pytest
from synthetic_records import Ev, records_from

from pytest_opprof.model import EventList, build_events, key_averages
from pytest_opprof.native_layout.records import Records
from pytest_opprof.render.table import SORT_KEYS
from pytest_opprof.render.units import flops_scale, format_memory, format_time, format_time_share


def _records() -> Records:
    return records_from(
        [
            Ev(
                "forward",
                0,
                2_000_000,
                kind=0,
                alloc=3 * 1024 * 1024,
                children=[
                    Ev("numpy.matmul", 10_000, 1_510_000, shape=[[64, 32], [32, 16]], alloc=2048),
                    Ev("numpy.add", 1_600_000, 1_650_000, shape=[[4], [4]], free=512),
                ],
            ),
            Ev("numpy.add", 3_000_000, 3_000_700, shape=[[4], [4]], stack=["t.py(3): test"]),
        ]
    )


def _rows(text: str) -> dict[str, list[str]]:
    """Data rows of a table, keyed by name, cells split on runs of 2+ spaces."""
    lines = text.splitlines()
    header_at = next(i for i, line in enumerate(lines) if line.strip().startswith("Name"))
    out = {}
    for line in lines[header_at + 2 :]:
        if line.startswith("---"):
            break
        cells = re.split(r"\s{2,}", line.strip())
        if len(cells) < 3:
            continue  # further frames of a source location, or the blank line after them
        out[cells[0]] = cells
    return out


def _headers(text: str) -> list[str]:
    line = next(line for line in text.splitlines() if line.strip().startswith("Name"))
    return re.split(r"\s{2,}", line.strip())


@pytest.mark.parametrize(("unit", "divisor"), [("s", 1_000_000.0), ("ms", 1_000.0), ("us", 1.0)])
def test_every_time_unit(unit: str, divisor: float) -> None:
    events = key_averages(_records())
    text = events.table(time_unit=unit)
    forward = _rows(text)["forward"]
    headers = _headers(text)
    cpu_total_us = next(e for e in events if e.key == "forward").cpu_time_total
    assert forward[headers.index("CPU total")] == f"{cpu_total_us / divisor:.3f}{unit}"
    times = re.findall(r"\d+\.\d{3}(s|ms|us)\b", text)
    assert times and set(times) == {unit}
    footer = text.strip().splitlines()[-1]
    assert footer.startswith("Self CPU time total: ") and footer.endswith(unit)


def test_automatic_units() -> None:
    assert format_time(999.0) == "999.000us"
    assert format_time(1500.0) == "1.500ms"
    assert format_time(2_500_000.0) == "2.500s"
    assert format_time(1500.0, "us") == "1500.000us"
    assert format_time_share(1.0, 4.0) == "25.00%"
    assert format_time_share(0.0, 0.0) == "NaN"


def test_bad_time_unit_names_the_units() -> None:
    with pytest.raises(ValueError, match=r"'min'.*s, ms, us"):
        key_averages(_records()).table(time_unit="min")
    with pytest.raises(ValueError, match="time_unit"):
        format_time(1.0, "ns")


def test_sort_keys_and_cuda_alias() -> None:
    events = key_averages(_records())
    for key in SORT_KEYS:
        assert events.table(sort_by=key)
    text = events.table(sort_by="cpu_time_total")
    assert list(_rows(text)) == ["forward", "numpy.matmul", "numpy.add"]
    assert events.table(sort_by="cuda_time_total") == events.table(sort_by="device_time_total")
    with pytest.raises(ValueError, match=r"'wall_time'.*self_cpu_time_total"):
        events.table(sort_by="wall_time")


def test_row_limit_and_top_level_only() -> None:
    events = build_events(_records())
    assert len(_rows(events.table(row_limit=2))) == 2
    assert len(_rows(events.table(row_limit=-1))) == 3  # 4 rows, numpy.add twice
    assert events.table(row_limit=-1).count("numpy.add ") == 2
    top = events.table(top_level_events_only=True)
    assert "top-level" in top
    # The scope and the second numpy.add (a root); the scope's children are left out.
    assert "numpy.matmul" not in top
    assert set(_rows(top)) == {"forward", "numpy.add"}
    averaged = key_averages(_records()).table(top_level_events_only=True)
    assert set(_rows(averaged)) == {"forward"}


def test_percentages_share_self_cpu_total() -> None:
    events = key_averages(_records())
    text = events.table()
    headers = _headers(text)
    total = events.self_cpu_time_total
    for evt in events:
        cells = _rows(text)[evt.key]
        assert cells[headers.index("Self CPU %")] == f"{evt.self_cpu_time_total * 100 / total:.2f}%"
    assert text.strip().endswith(f"Self CPU time total: {format_time(total)}")


def test_memory_columns_only_with_profile_memory() -> None:
    records = _records()
    assert "CPU Mem" not in key_averages(records).table()
    text = key_averages(records, profile_memory=True).table()
    headers = _headers(text)
    forward = _rows(text)["forward"]
    assert forward[headers.index("CPU Mem")] == format_memory(3 * 1024 * 1024 + 2048 - 512)
    assert forward[headers.index("Self CPU Mem")] == "3.00 MB"


def test_memory_format() -> None:
    assert format_memory(512) == "512 B"
    assert format_memory(-2048) == "-2.00 KB"
    assert format_memory(5 * 1024**3) == "5.00 GB"


def test_flops_column_scaled() -> None:
    groups = key_averages(_records(), with_flops=True)
    text = groups.table()
    matmul = next(g for g in groups if g.key == "numpy.matmul")
    assert matmul.flops == 2 * 64 * 32 * 16
    scale, header = flops_scale(min(g.flops for g in groups if g.flops > 0))
    column = _headers(text).index(f"Total {header}")
    expected = f"{matmul.flops * scale:.3f}"
    assert _rows(text)["numpy.matmul"][column] == expected
    assert _rows(text)["forward"][column] == "--"  # a scope does no arithmetic itself
    assert flops_scale(5) == (1.0, "FLOPs")
    assert flops_scale(32_768)[1] == "KFLOPs"
    assert flops_scale(7 * 10**9)[1] == "GFLOPs"
    assert "FLOPs" not in key_averages(_records(), with_flops=False).table()


def test_shapes_stacks_and_device_columns() -> None:
    records = _records()
    plain = key_averages(records).table()
    assert "Input Shapes" not in plain and "Source Location" not in plain and "CUDA" not in plain
    by_shape = key_averages(records, group_by_input_shape=True).table()
    assert "Input Shapes" in _headers(by_shape) and "[[64, 32], [32, 16]]" in by_shape
    objects = build_events(records).table()
    assert "Source Location" in _headers(objects) and "t.py(3): test" in objects
    records.events["device_ns"][1] = 400_000
    text = key_averages(records).table()
    assert "Self CUDA" in _headers(text)
    assert "Self CUDA time total: 400.000us" in text


def test_header_and_name_truncation() -> None:
    records = records_from([Ev("x" * 80, 0, 10)])
    text = key_averages(records).table(header="my run", max_name_column_width=20)
    assert "my run" in text.splitlines()[1]
    assert "x" * 17 + "..." in text and "x" * 18 not in text


def test_empty_list_renders_nothing() -> None:
    assert EventList().table() == ""
    with pytest.raises(ValueError, match="sort_by"):
        EventList().table(sort_by="nope")
