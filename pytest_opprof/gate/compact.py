"""The compact form of a test's figures in a baseline file (schema 2).

Schema 1 stored every op, and every time as its samples plus six statistics of
them: 18-28 KB a test.  Schema 2 keeps what judging reads, about 1-2 KB a test:

* times are the per-round samples only, one string per series at three
  significant digits in one unit (``"1.91 1.37 1.31 ms"``): the median, MAD and
  the rest are recomputed on load (:meth:`TimeStats.from_samples`), so they can
  never disagree with the samples;
* ops are the ones :mod:`~pytest_opprof.gate.trim` keeps, plus ``[other ops]``;
* an op's totals (time, device time and bytes of itself and the ops it called) are
  left out: no verdict reads them; so are its FLOPs and self bytes when 0;
* the machine is stored once per file (``store.py``), not once per test.

An entry (beside ``recorded_at`` and ``machine``, see ``store.py``)::

    "rounds": 15, "sessions": [5, 5, 5],            # sessions: as in schema 1
    "summary": {
      "wall_time": TIMES, "cpu_time": TIMES,
      "speed_ref": TIMES, "native_ref": TIMES, "wait_time": TIMES,  # when measured
      "device_time": TIMES, "device_memory_bytes": int,            # when measured
      "op_count": int, "flops": int, "op_time_share": float,
      "memory": {peak_bytes, allocated_bytes, allocations, leaked_bytes} | null,
      "dropped_events": int, "ranges": {...}                       # when not 0 / empty
    },
    "ops": {"<op key>": {"count": int, "self_cpu_time": TIMES,
                         "flops": int, "self_memory_bytes": int,  # when not 0
                         "self_device_memory_bytes": int,        # when not 0
                         "self_device_time": TIMES,              # when measured
                         "ranges": {...}}},
    "left_out": {"ops": int, "digest": "8 hex digits"}  # when ops hold "[other ops]"

    TIMES = "v1 v2 ... unit": one value per round, unit ns, us, ms or s; one value
            alone when every round had it ("0 ns": a thread that never waited)
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from pytest_opprof.errors import FieldError
from pytest_opprof.gate import summary_codec
from pytest_opprof.gate.jsonio import Fields, field_path, round_sig
from pytest_opprof.gate.summary import TestSummary, TimeStats
from pytest_opprof.gate.summary_codec import Form
from pytest_opprof.gate.trim import trim

UNITS = (("ns", 1), ("us", 1_000), ("ms", 1_000_000), ("s", 1_000_000_000))
_NS = dict(UNITS)
TIMES_FORM = 'per-round times such as "1.2 1.5 1.3 ms" (numbers, then ns, us, ms or s)'


def encode_times(samples_ns: Sequence[int]) -> str:
    """Per-round times (ns) as ``"v1 v2 ... unit"``: each at three significant digits, in
    the largest unit that keeps the median round at 1 or more (``s`` at most), so that an
    outlier (a round that waited for a CPU) does not turn every other value into
    ``0.0284``; one value when all rounds had it."""
    values = [round_sig(s) for s in samples_ns]
    middle = sorted(values)[len(values) // 2] if values else 0
    name, size = next(((n, s) for n, s in reversed(UNITS) if middle >= s), UNITS[0])
    if len(set(values)) == 1:
        values = values[:1]
    return " ".join([*(_number(v, size) for v in values), name])


def _number(value_ns: int, size: int) -> str:
    """``value_ns`` (3 significant digits) in units of ``size``: 1000 units and more are a
    whole number of them (exact, as the value has 3 significant digits), less as ``.3g``."""
    return str(value_ns // size) if value_ns >= 1000 * size else f"{value_ns / size:.3g}"


def decode_times(f: Fields, key: str, rounds: int) -> TimeStats:
    """A ``TIMES`` string of ``rounds`` values back as statistics (raises ``FieldError``)."""
    text = f.text(key)
    *numbers, unit = text.split() or [""]
    try:
        values = [float(n) for n in numbers]
    except ValueError:
        values = []
    if unit not in _NS or not values or not all(math.isfinite(v) and v >= 0 for v in values):
        raise FieldError(field_path(f.path, key), f"expected {TIMES_FORM}, got {text!r}")
    if len(values) == 1:  # every round had it (one round: most tests)
        return TimeStats.from_samples([round(values[0] * _NS[unit])] * rounds)
    if len(values) != rounds:
        raise FieldError(
            field_path(f.path, key), f"expected one time per round ({rounds}), got {len(values)}"
        )
    return TimeStats.from_samples([round(v * _NS[unit]) for v in values])


def median_ns(text: str) -> float | None:
    """The median of a ``TIMES`` string's values, in ns; None for text of another form
    (for readers of a report that name no round count, as the HTML page)."""
    *numbers, unit = text.split() or [""]
    try:
        values = sorted(float(n) for n in numbers)
    except ValueError:
        return None
    if unit not in _NS or not values or not all(math.isfinite(v) for v in values):
        return None
    middle = len(values) // 2
    median = values[middle] if len(values) % 2 else (values[middle - 1] + values[middle]) / 2
    return median * _NS[unit]


def _write_times(stats: TimeStats) -> object:
    return encode_times(stats.samples_ns)


def _read_times(of: type, f: Fields, key: str, rounds: int | None, per_round: bool) -> Any:
    # One value per round whatever the time (a reference's too): the form has no other.
    assert rounds is not None
    return decode_times(f, key, rounds)


COMPACT = Form(True, _write_times, _read_times)
"""Times as per-round strings; the fields whose rule says ``compact=False`` left out."""


def summary_to_json(summary: TestSummary) -> dict[str, object]:
    """``{"rounds", "summary", "ops", ...}`` of a baseline entry in the compact form, the
    ops trimmed (``trim.trim``)."""
    return summary_codec.to_json(trim(summary), COMPACT)


def summary_from_json(f: Fields) -> TestSummary:
    """Read back :func:`summary_to_json` (raises ``FieldError``)."""
    summary: TestSummary = summary_codec.from_json(TestSummary, f, form=COMPACT)
    return summary
