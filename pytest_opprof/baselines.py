"""One run's baseline work, for the plugin and any other driver: judge, stage, write.

The plugin holds one :class:`BaselineRun` (on the controller under xdist: workers
send ``TestSummary.to_json()`` back and the controller calls :meth:`judge`).
Each test is judged against its stored entry (files read once, lazily);
with ``update`` the tests that passed are staged with :meth:`stage` (pooled
with their stored rounds when their verdict passed, see ``pooling.py``) and
:meth:`write` merges them into their module files once, at the end.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from pytest_opprof.gate.machine import MachineInfo, machine_info
from pytest_opprof.gate.pooling import can_pool, pool
from pytest_opprof.gate.store import BaselineEntry, baseline_path, load, split_nodeid, update
from pytest_opprof.gate.summary import TestSummary
from pytest_opprof.gate.verdict import Tolerances, Verdict, compare
from pytest_opprof.render.report import TestResult


class BaselineRun:
    """Judges tests against ``baseline_dir`` and writes refreshed entries at the end."""

    def __init__(
        self,
        baseline_dir: Path,
        *,
        tolerances: Tolerances | None = None,
        force_time: bool = False,
        machine: MachineInfo | None = None,
    ) -> None:
        self.baseline_dir = Path(baseline_dir)
        self.tolerances = tolerances or Tolerances()
        self.force_time = force_time
        self.machine = machine or machine_info()
        self.results: list[TestResult] = []
        self._files: dict[Path, Mapping[str, BaselineEntry]] = {}
        self._staged: dict[Path, dict[str, BaselineEntry]] = {}
        self._verdicts: dict[str, Verdict] = {}
        self.pooled: list[str] = []
        """Node ids whose staged entry pools their rounds with the stored ones."""

    def path_of(self, nodeid: str) -> Path:
        """The baseline file of a test (raises ``BaselineError`` for an unsafe module path)."""
        return baseline_path(self.baseline_dir, split_nodeid(nodeid)[0])

    def stored(self, nodeid: str) -> BaselineEntry | None:
        """The test's stored entry, if any (raises ``BaselineError`` for an unusable file)."""
        path = self.path_of(nodeid)
        if path not in self._files:
            self._files[path] = load(path)
        return self._files[path].get(split_nodeid(nodeid)[1])

    def verdict(
        self, nodeid: str, summary: TestSummary, tolerances: Tolerances | None = None
    ) -> Verdict:
        """The verdict on ``summary`` against the stored entry, recorded nowhere."""
        return compare(
            summary,
            self.stored(nodeid),
            fingerprint=self.machine.fingerprint,
            tolerances=tolerances or self.tolerances,
            force_time=self.force_time,
        )

    def judge(
        self, nodeid: str, summary: TestSummary, tolerances: Tolerances | None = None
    ) -> TestResult:
        """Compare a test with its stored entry; ``tolerances`` override the run's (marker)."""
        path = self.path_of(nodeid)
        verdict = self.verdict(nodeid, summary, tolerances)
        try:
            shown = path.relative_to(self.baseline_dir.parent).as_posix()
        except ValueError:
            shown = str(path)
        self._verdicts[nodeid] = verdict
        result = TestResult(nodeid, summary, verdict, baseline_file=shown)
        self.results.append(result)
        return result

    def stage(self, nodeid: str, summary: TestSummary) -> None:
        """Record ``summary`` as the test's new baseline when :meth:`write` runs: pooled
        with the stored rounds when it was judged and passed, else replacing them."""
        stored = self.stored(nodeid)
        verdict = self._verdicts.get(nodeid)
        if stored is not None and verdict is not None:
            if can_pool(summary, stored, verdict, self.machine.fingerprint):
                summary = pool(summary, stored.summary)
                self.pooled.append(nodeid)
        entry = BaselineEntry.record(summary, self.machine)
        self._staged.setdefault(self.path_of(nodeid), {})[split_nodeid(nodeid)[1]] = entry

    def write(self) -> list[Path]:
        """Merge staged entries into their files (atomically); the files that changed."""
        changed = [path for path, entries in sorted(self._staged.items()) if update(path, entries)]
        self._staged.clear()
        return changed
