"""Where a time step is placed, and whether a misplaced one says so.

Series of 44 runs with lognormal run-to-run noise and one step at run 10 (the history
study's first injected commit), 2,000 series per case: of the steps the detector finds
within 3 runs of it, how many are placed at run 10, how many of those say "or the next
commit" (``Step.first``/``Step.last``, ``pytest_opprof/history/changes.py``), how many are
placed one run off and how many of them say so (their window holds run 10), and how
many are placed 2-3 runs off (no window reaches them).

    python bench/history_placement.py [--series 2000] [--tie-ratio 20]

A few seconds; no timing involved.
"""

from __future__ import annotations

import argparse

import numpy as np
from _common import REPO  # noqa: F401  (the checkout importable)

from pytest_opprof.history import changes
from pytest_opprof.history.changes import find_time_changes, time_steps

CASES = ((0.02, 0.05), (0.02, 0.08), (0.02, 0.12), (0.03, 0.08), (0.03, 0.12))
"""(run-to-run noise, step): the study's steps at the noise seen between runs here."""
AT = 10
RUNS = 44


def main() -> None:
    p = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    p.add_argument("--series", type=int, default=2000)
    p.add_argument("--tie-ratio", type=float, default=changes.TIE_RATIO)
    args = p.parse_args()
    changes.TIE_RATIO = args.tie_ratio
    print(f"tie ratio {args.tie_ratio:g}, {args.series} series of {RUNS} runs, step at run {AT}")
    for noise, step in CASES:
        rng = np.random.default_rng(0)
        x = 1e6 * rng.lognormal(0, noise, size=(args.series, RUNS))
        x[:, AT:] *= 1 + step
        at = at_said = off = off_said = far = 0
        for row, cuts in find_time_changes(x).items():
            for s in time_steps(x[row], cuts):
                distance = abs(s.at - AT)
                said = s.first is not None and s.last is not None and s.first <= AT <= s.last
                if distance == 0:
                    at += 1
                    at_said += s.first is not None
                elif distance == 1:
                    off += 1
                    off_said += said
                elif distance <= 3:
                    far += 1
        print(
            f"noise {noise:.0%}, step {step:+.0%}: found {at + off + far}; at its run {at} "
            f"({at_said} of them say 'or the next'); one run off {off} ({off_said} say so, "
            f"{off - off_said} do not); 2-3 runs off {far}"
        )


if __name__ == "__main__":
    main()
