"""The tree's arithmetic after the profiler's overhead is subtracted.

torch keeps ``total = self + sum(children's totals)`` for every event, so a table's
``CPU total %`` of a root is at most 100% of the self time it sums.  Subtracting the
profiler's cost from self times alone broke both (a scope at 101.69%, each total
off by the cost subtracted below it).  Real profiles of random nestings of scopes
and numpy ops, with and without overhead subtraction, on both record paths.
"""

from __future__ import annotations

from typing import TypeAlias

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import pytest_opprof as opprof
from pytest_opprof.model.averages import average_records

Node: TypeAlias = "int | list[Node]"
"""An int is that many numpy ops; a list is a scope around its items."""

nestings: st.SearchStrategy[list[Node]] = st.lists(
    st.recursive(
        st.integers(min_value=0, max_value=30),
        lambda inner: st.lists(inner, min_size=0, max_size=4),
        max_leaves=12,
    ),
    min_size=1,
    max_size=4,
)

EPS_US = 1e-6


def _run(items: list[Node], x: np.ndarray, depth: int = 0) -> None:
    for item in items:
        if isinstance(item, int):
            for _ in range(item):
                np.add(x, x)
        else:
            with opprof.record_function(f"scope{depth}"):
                _run(item, x, depth + 1)


def _profile(nesting: list[Node], subtract: bool) -> opprof.profile:
    x = np.ones(8)
    with opprof.profile(capture=["numpy"], subtract_overhead=subtract) as prof:
        with opprof.record_function("root"):
            _run(nesting, x)
    return prof


@settings(max_examples=25, deadline=None)
@given(nestings, st.booleans())
def test_every_total_is_its_self_time_plus_its_childrens_totals(
    nesting: list[Node], subtract: bool
) -> None:
    prof = _profile(nesting, subtract)
    events = prof.events()
    for e in events:
        children = sum(c.cpu_time_total for c in e.cpu_children)
        assert abs(e.cpu_time_total - e.self_cpu_time_total - children) < EPS_US, e
        assert 0 <= e.self_cpu_time_total <= e.self_cpu_time_total_raw + EPS_US
        assert e.cpu_time_total <= e.cpu_time_total_raw + EPS_US
    (root,) = [e for e in events if e.name == "root"]
    # The root's total is every self time of the profile: its CPU total % is 100%.
    self_sum = sum(e.self_cpu_time_total for e in events)
    assert abs(root.cpu_time_total - self_sum) < 1e-3, (root.cpu_time_total, self_sum)
    assert abs(root.cpu_time_total_raw - root.time_range.elapsed_us()) < 1e-3


@settings(max_examples=25, deadline=None)
@given(nestings)
def test_no_row_of_the_table_exceeds_the_self_time_it_sums(nesting: list[Node]) -> None:
    prof = _profile(nesting, subtract=True)
    assert prof.overhead is not None
    rows = prof.key_averages()
    events = prof.events()
    total = sum(r.self_cpu_time_total for r in rows)
    for row in rows:
        same = [e for e in events if e.name == row.key]
        # A group's totals are its events' (torch's key_averages), raw ones kept beside.
        assert abs(row.cpu_time_total - sum(e.cpu_time_total for e in same)) < 1e-3
        assert abs(row.cpu_time_total_raw - sum(e.cpu_time_total_raw for e in same)) < 1e-3
        assert abs(row.self_cpu_time_total - sum(e.self_cpu_time_total for e in same)) < 1e-3
    (root,) = [r for r in rows if r.key == "root"]
    assert root.cpu_time_total <= total + 1e-3
    assert "100.00%" in rows.table().splitlines()[3]  # the root's row, sorted first
    numpy_rows, _ = average_records(prof.records(), native=False, overhead=prof.overhead)
    by_key = {r.key: r for r in numpy_rows}
    for row in rows:
        assert abs(by_key[row.key].cpu_time_total - row.cpu_time_total) < 1e-3
        assert abs(by_key[row.key].self_cpu_time_total - row.self_cpu_time_total) < 1e-3
