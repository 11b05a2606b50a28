"""Which ops a baseline keeps: the ones a verdict can name, the rest folded into one.

A test runs dozens of ops (numpy's assert helpers alone call 20-30 of them), and a
baseline that stored every op's per-round times took 18-28 KB a test.  The verdict
reads ops only to explain the test-level figures, which a baseline always stores
whole (wall, CPU and device time per round, FLOPs, op count, memory).  So a baseline
keeps the ops by impact (:func:`kept_keys`):

* time: every op whose median self time is at least ``KEEP_TIME_SHARE`` of the test's
  median wall time (``reasons.EXPLAINS_SHARE``: an op that moved by less than that
  share explains nothing, and an op under it must grow by more than its own size to
  be named), and at least the top op;
* FLOPs: every op holding at least ``KEEP_FLOPS_SHARE`` of the test's FLOPs;
* memory: every op whose net self bytes are at least ``KEEP_MEMORY_SHARE`` of the
  test's allocated bytes and beyond the verdict's memory floor, and every op whose net
  device bytes are that share of the test's device memory peak;

at most ``MAX_KEPT_OPS``, by their largest share.  The others are folded into one op,
:data:`~pytest_opprof.gate.summary.OTHER_OPS`: per round, the sum of their self times;
the sums of their counts, FLOPs and self bytes; the sums of their ranges.  What a
left-out op costs: it cannot be named as a reason.  A change in it shows as a change
of ``[other ops]``, which can be named (its time judged like an op's; its FLOPs and
bytes explain the test's totals), and the test-level figures judge it in full.

When one side of a comparison was trimmed, :func:`align` folds the other side's ops
that the trimmed side did not keep, so both have the same keys; ``left_out`` (how many
op keys were folded, and an order-free digest of them) tells whether the folded ops
are the same ones, which pooling needs (``pooling.replace_reason``).
"""

from __future__ import annotations

import functools
import hashlib
import itertools
import math
import operator
from collections.abc import Collection
from dataclasses import replace

from pytest_opprof.gate.summary import OTHER_OPS, LeftOut, OpSummary, TestSummary, TimeStats

KEEP_TIME_SHARE = 0.02
"""``reasons.EXPLAINS_SHARE`` (the verdict imports this module, so not from there)."""
MEMORY_FLOOR_BYTES = 4096
"""``Tolerances.memory_floor_bytes``' default: an op's memory change within it
is ignored, so an op whose self bytes are within it has nothing to explain."""
KEEP_FLOPS_SHARE = 0.05
KEEP_MEMORY_SHARE = 0.1
MAX_KEPT_OPS = 6
"""Ops kept beside ``[other ops]``: a cap so that a test with a flat profile (many ops
each just over a threshold) stays small."""


def kept_keys(summary: TestSummary) -> list[str]:
    """The op keys a baseline of ``summary`` keeps, by impact (module docstring)."""
    wall = max(summary.wall_time.median_ns, 1)
    flops = max(summary.flops, 1)
    allocated = max(summary.memory.allocated_bytes if summary.memory else 0, 1)
    device_peak = max(summary.device_memory_bytes or 0, 1)
    floor = MEMORY_FLOOR_BYTES
    impact: dict[str, float] = {}
    for key, op in summary.ops.items():
        if key == OTHER_OPS:
            continue
        shares = []
        time_share = op.self_cpu_time.median_ns / wall
        if time_share >= KEEP_TIME_SHARE:
            shares.append(time_share)
        if op.flops / flops >= KEEP_FLOPS_SHARE:
            shares.append(op.flops / flops)
        memory = abs(op.self_memory_bytes)
        if memory > floor and memory / allocated >= KEEP_MEMORY_SHARE:
            shares.append(memory / allocated)
        device = abs(op.self_device_memory_bytes)
        if device > floor and device / device_peak >= KEEP_MEMORY_SHARE:
            shares.append(device / device_peak)
        if shares:
            impact[key] = max(shares)
    ranked = sorted(impact, key=lambda k: (-impact[k], k))[:MAX_KEPT_OPS]
    if not ranked:
        top = max(
            (k for k in summary.ops if k != OTHER_OPS),
            key=lambda k: (summary.ops[k].self_cpu_time.median_ns, k),
            default=None,
        )
        ranked = [top] if top is not None else []
    return sorted(ranked)


def trim(summary: TestSummary) -> TestSummary:
    """``summary`` with only the ops :func:`kept_keys` chooses and the rest folded into
    ``[other ops]``.  A summary that was trimmed already (it has ``[other ops]``: read
    from a baseline, or pooled with one) keeps its ops: the ones a baseline keeps are
    chosen when it is replaced, and stay while it pools."""
    if OTHER_OPS in summary.ops:
        return summary
    return fold(summary, kept_keys(summary))


def fold(summary: TestSummary, keep: Collection[str]) -> TestSummary:
    """``summary`` with every op not in ``keep`` folded into ``[other ops]`` (with those
    it holds already); itself when there is nothing to fold."""
    folded = [key for key in summary.ops if key not in keep and key != OTHER_OPS]
    if not folded:
        return summary
    parts = [summary.ops[key] for key in folded]
    if OTHER_OPS in summary.ops:
        parts.append(summary.ops[OTHER_OPS])
    before = summary.left_out or LeftOut(0, 0)
    left_out = LeftOut(before.keys + len(folded), before.digest ^ keys_digest(folded))
    ops = {key: op for key, op in summary.ops.items() if key in keep}
    ops[OTHER_OPS] = _sum_ops(parts)
    return replace(summary, ops=ops, left_out=left_out)


def align(now: TestSummary, base: TestSummary) -> tuple[TestSummary, TestSummary]:
    """Both sides with the same op keys where either was trimmed: the ops a trimmed side
    kept (both sides' when both were), the rest folded.  Untouched when neither was."""
    now_trimmed, base_trimmed = OTHER_OPS in now.ops, OTHER_OPS in base.ops
    if not now_trimmed and not base_trimmed:
        return now, base
    if now_trimmed and base_trimmed:
        keep = set(now.ops) & set(base.ops)
    elif base_trimmed:
        # A new op that allocates or computes is named: folded, its bytes (a leak) or
        # FLOPs would be blamed on [other ops].  One that only takes time stays folded: a
        # capture that names more ops (a plugin upgrade) explains, and fails no test alone.
        keep = set(base.ops) | {
            key
            for key in new_ops(now, base)
            if now.ops[key].flops
            or abs(now.ops[key].self_memory_bytes) > MEMORY_FLOOR_BYTES
            or abs(now.ops[key].self_device_memory_bytes) > MEMORY_FLOOR_BYTES
        }
    else:
        keep = set(now.ops)
    return fold(now, keep), fold(base, keep)


def new_ops(now: TestSummary, base: TestSummary) -> set[str]:
    """The ops of untrimmed ``now`` that trimmed ``base`` provably never ran: without them,
    the ops ``base`` does not name are exactly the ones it folded (the same count and
    ``left_out`` digest, an XOR of the keys' hashes, so the ops to take out are those
    whose hashes XOR to what the two digests differ by).  Folded, a new op that leaks or
    slows the test would be blamed on ``[other ops]``; kept, the verdict names it.  Empty
    where no such set is found among :data:`NEW_OPS_SEARCH` candidate sets."""
    left = base.left_out
    if left is None:
        return set()
    unnamed = sorted(key for key in now.ops if key not in base.ops)
    extra = len(unnamed) - left.keys
    if extra <= 0 or math.comb(len(unnamed), extra) > NEW_OPS_SEARCH:
        return set()
    hashes = {key: keys_digest([key]) for key in unnamed}
    target = keys_digest(unnamed) ^ left.digest
    for new in itertools.combinations(unnamed, extra):
        if functools.reduce(operator.xor, (hashes[key] for key in new), 0) == target:
            return set(new)
    return set()


NEW_OPS_SEARCH = 20_000
"""Candidate sets :func:`new_ops` tries at most (each a few XORs)."""


def keys_digest(keys: Collection[str]) -> int:
    """An order-free 32-bit digest of op keys: the XOR of each key's hash, so folding more
    keys into a digest needs only their names."""
    out = 0
    for key in keys:
        out ^= int.from_bytes(hashlib.sha256(key.encode("utf-8")).digest()[:4], "big")
    return out


def _sum_ops(parts: list[OpSummary]) -> OpSummary:
    """One op holding the sums of ``parts`` (round by round for times)."""

    def summed(series: list[TimeStats | None]) -> TimeStats | None:
        present = [s for s in series if s is not None]
        if not present:
            return None
        rounds = zip(*(s.samples_ns for s in present), strict=True)
        return TimeStats.from_samples([sum(r) for r in rounds])

    self_cpu = summed([p.self_cpu_time for p in parts])
    assert self_cpu is not None
    ranges = {}
    for name in ("count", "flops", "self_memory_bytes", "self_device_memory_bytes"):
        spans = [p.span(name) for p in parts]
        lo, hi = sum(s[0] for s in spans), sum(s[1] for s in spans)
        if lo != hi:
            ranges[name] = (lo, hi)
    self_device = summed([p.self_device_time for p in parts])
    return OpSummary(
        key=OTHER_OPS,
        count=sum(p.count for p in parts),
        self_cpu_time=self_cpu,
        # Totals of folded ops overlap (an op's total holds the ops it called): the
        # aggregate has none.
        cpu_time=None,
        self_memory_bytes=sum(p.self_memory_bytes for p in parts),
        memory_bytes=None,
        flops=sum(p.flops for p in parts),
        self_device_time=self_device,
        device_time=None,
        ranges=ranges,
        self_device_memory_bytes=sum(p.self_device_memory_bytes for p in parts),
    )
