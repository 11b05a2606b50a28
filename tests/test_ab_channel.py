"""The A/B hand-off carries a round's figures unchanged: what the head's judge reads of a
base round is what the partner measured, to the last field, through a real pipe."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterator

import numpy as np
import pytest

from pytest_opprof.ab.channel import Channel, figures_from_json, figures_to_json
from pytest_opprof.gate.round_figures import EXACT, DeviceTraffic, SummedOps
from pytest_opprof.gate.summary import RoundFigures, summarize_rounds
from pytest_opprof.model.averages import op_sums
from pytest_opprof.model.event_traffic import site_key
from pytest_opprof.plugin.measure import _less_waits
from pytest_opprof.profiler import profile


@pytest.fixture
def channel() -> Iterator[Channel]:
    """Both ends of one real pipe: what is sent is what the other end receives."""
    read_fd, write_fd = os.pipe()
    end = Channel(read_fd, write_fd)
    yield end
    end.close()


def _round(by_input_shape: bool, n: int) -> RoundFigures:
    """A real round's figures, made as ``plugin/measure.py`` makes them."""
    with profile(record_shapes=True, profile_memory=True, with_flops=True) as prof:
        kept = []
        for i in range(n):
            a = np.ones((8 + i, 8 + i))
            kept.append(np.add(a, a) @ a)
    sums = op_sums(prof.records(), by_input_shape=by_input_shape, with_flops=True)
    assert sums is not None
    return RoundFigures.from_sums(
        sums.keys,
        sums.sums,
        wall_time_ns=prof.wall_time_ns,
        cpu_time_ns=prof.wall_time_ns - 1,
        memory=prof.memory,
        wait_ns=1234,
        library_self_ns=sums.library_self_ns,
    )


def _rounds() -> list[RoundFigures]:
    plain = _round(False, 6)
    shaped = _round(True, 6)
    assert type(shaped.ops) is SummedOps and not shaped.ops.is_made
    made = _round(True, 3)
    dict(made.ops)  # read already, as a judge or a summary would
    assert type(made.ops) is SummedOps and made.ops.is_made
    key = next(k for k in shaped.ops if k.startswith("numpy.add"))
    # An op's wait taken out: the ops are made, and the waits' keys travel too.
    waited = _less_waits(shaped, {key: (10, 20)})
    assert waited.switched == frozenset([key])
    # Sums past 2**50 take the rows' float arithmetic on both ends alike.
    huge = RoundFigures.from_sums(
        ["numpy.matmul", "[memory]"],
        [[3, EXACT * 3 + 7, EXACT + 1, 0, 0, 5, 5, EXACT * 5 + 3, EXACT * 5 + 3], [2] + [0] * 8],
        wall_time_ns=EXACT * 4,
        cpu_time_ns=1,
        speed_ref_ns=10,
        native_ref_ns=11,
        device_memory_bytes=12,
        dropped_events=13,
    )
    leaked = RoundFigures(
        wall_time_ns=5, cpu_time_ns=4, ops={}, leaked_ops=(("numpy.ones", 800), ("x", 1))
    )
    # A round whose ops copied between host and device: its traffic, by site too.
    copied = dataclasses.replace(
        plain,
        traffic=DeviceTraffic.of(
            (0, 4_000_000, 0, 1), {site_key("aten::to", "train_step"): (0, 4_000_000, 0, 1)}
        ),
    )
    return [plain, shaped, made, waited, huge, leaked, copied]


def test_every_round_arrives_as_it_was_measured(channel: Channel) -> None:
    for sent in _rounds():
        channel.send("round", figures_to_json(sent))
        command, data = channel.receive()
        got = figures_from_json(data)
        assert command == "round"
        assert dict(got.ops) == dict(sent.ops)
        assert len(got.ops) == len(sent.ops) > 0 or not sent.ops
        for name in RoundFigures.__dataclass_fields__:
            if name != "ops":
                assert getattr(got, name) == getattr(sent, name), name
        assert got == sent


def test_the_summaries_the_judge_reads_are_the_same(channel: Channel) -> None:
    """One round (summarised natively from its sums) and many (from the made ops)."""
    sent = _rounds()
    got = []
    for figures in sent:
        channel.send("round", figures_to_json(figures))
        got.append(figures_from_json(channel.receive()[1]))
    for i in range(len(sent)):
        assert summarize_rounds([got[i]]) == summarize_rounds([sent[i]]), i
    assert summarize_rounds(got[:4]) == summarize_rounds(sent[:4])


def test_a_round_of_sums_stays_sums_until_read(channel: Channel) -> None:
    """The head makes the ``OpFigures`` itself, only where it reads them."""
    sent = _round(True, 4)
    channel.send("round", figures_to_json(sent))
    got = figures_from_json(channel.receive()[1])
    assert type(got.ops) is SummedOps and not got.ops.is_made
