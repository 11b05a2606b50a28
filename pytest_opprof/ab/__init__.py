"""A/B against the base: the same tests run from a git revision and from the working tree,
round by round in alternation on this machine, and judged by their paired rounds."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from pytest_opprof.ab.channel import Channel as Channel

partner_key = pytest.StashKey["Channel"]()
"""Set (to its channel to the head) in a base-side process before the plugin configures:
the plugin then registers the partner's worker instead of its own worker and controller."""
unmeasured_key = pytest.StashKey[str | None]()
"""In the base side's config: why its FLOPs, op counts and op figures are not measured
(``Plan.unmeasured``), None when they are; its hello tells the head."""
