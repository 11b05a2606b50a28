"""Where a test's host<->device traffic grew: the note of a verdict whose traffic rows
regressed, naming the op and scope (``DeviceTraffic.sites``) that copied or synced more.

The rows themselves (``rows.py``) judge the test's totals exactly; this names the place,
as ``reasons.leak_note`` names the ops that allocated a leak.
"""

from __future__ import annotations

from collections.abc import Sequence

from pytest_opprof.flops.device_traffic import SCOPE_SEPARATOR
from pytest_opprof.gate.round_figures import TRAFFIC_FIGURES
from pytest_opprof.gate.rows import RANGED_METRICS, TRAFFIC_METRICS, MetricRow
from pytest_opprof.gate.summary import TestSummary

SITES_NAMED = 3
"""The most sites a note names, those that grew most first."""


def _where(site: str) -> str:
    op, sep, scope = site.partition(SCOPE_SEPARATOR)
    return f"`{op}` in scope `{scope}`" if sep else f"`{op}`"


def _figure(name: str, value: int) -> str:
    return f"{value:,} bytes" if name.endswith("_bytes") else f"{value:,}"


def traffic_note(metrics: Sequence[MetricRow], base: TestSummary, now: TestSummary) -> str | None:
    """The sites whose traffic grew in a figure that regressed, most first, each with its
    figures that grew; or, where this run counted traffic and the baseline has none
    stored, that it was not judged.  None otherwise."""
    if now.device_traffic is None:
        return None
    if base.device_traffic is None:
        return (
            "host<->device traffic not judged: the baseline has none stored (recorded "
            "before it was counted, or without device tensors); update it to judge it"
        )
    regressed = [
        i
        for i, name in enumerate(TRAFFIC_FIGURES)
        if any(
            m.metric == RANGED_METRICS[name][0] and m.status == "regressed"
            for m in metrics
            if m.metric in TRAFFIC_METRICS
        )
    ]
    if not regressed:
        return None
    was, sites = base.device_traffic.sites, now.device_traffic.sites
    zero = (0,) * len(TRAFFIC_FIGURES)
    growth = {
        site: [sites.get(site, zero)[i] - was.get(site, zero)[i] for i in regressed]
        for site in {*was, *sites}
    }
    grown = sorted(
        (site for site, g in growth.items() if any(d > 0 for d in g)),
        key=lambda site: ([-d for d in growth[site]], site),
    )
    if not grown:
        return None
    parts = []
    for site in grown[:SITES_NAMED]:
        changes = ", ".join(
            f"{RANGED_METRICS[TRAFFIC_FIGURES[i]][0]} "
            f"{_figure(TRAFFIC_FIGURES[i], was.get(site, zero)[i])} -> "
            f"{_figure(TRAFFIC_FIGURES[i], sites.get(site, zero)[i])}"
            for i, d in zip(regressed, growth[site], strict=True)
            if d > 0
        )
        parts.append(f"at {_where(site)} ({changes})")
    more = f"; and {len(grown) - SITES_NAMED} more" if len(grown) > SITES_NAMED else ""
    return f"host<->device traffic grew {'; '.join(parts)}{more}"
