"""record_function names are forgotten between sessions, so memory stays bounded.

Every distinct scope name used to stay interned for the process (native table and
Python caches: ~430 bytes a name retained, 1M names -> GBs with the rows they give).
Now the scope names of a session are dropped when the next session starts; op names
(the numpy hooks hold their ids) stay.
"""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest
from run_helpers import REPO_ROOT

import pytest_opprof as opprof

GROWTH = """
import gc, json, os
import pytest_opprof as opprof

def rss():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")

after = []
for session in range(6):
    with opprof.profile(capture=["none"], profile_memory=False) as prof:
        for i in range(50_000):
            with opprof.record_function(f"session {session} step {i}"):
                pass
    assert len(prof.records().events) == 50_000
    del prof
    gc.collect()
    after.append(rss())
print(json.dumps(after))
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/statm")
def test_rss_stays_flat_over_sessions_of_new_scope_names() -> None:
    done = subprocess.run(
        [sys.executable, "-c", GROWTH],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=REPO_ROOT,
        check=True,
    )
    after = json.loads(done.stdout)
    growth = after[-1] - after[1]  # sessions 3-6: 200,000 new names
    print(f"RSS after each session (MiB): {[round(a / 2**20) for a in after]}")
    # Before: +430 bytes a name, 82 MiB here.  Allow malloc's slack, far below that.
    assert growth < 16 * 2**20


def test_names_stay_right_when_ids_are_reused_across_sessions() -> None:
    @opprof.record_function("decorated")  # one object, its id cached across sessions
    def work() -> None:
        np.add(np.ones(2), 1.0)

    seen = []
    for session in range(3):
        with opprof.profile(capture=["numpy"], profile_memory=False) as prof:
            with opprof.record_function(f"only in session {session}"):
                work()
        rows = {e.key: e.count for e in prof.key_averages()}
        seen.append(rows)
    for session, rows in enumerate(seen):
        scopes = {k: n for k, n in rows.items() if not k.startswith("numpy.")}
        assert scopes == {f"only in session {session}": 1, "decorated": 1}
        assert rows["numpy.add"] == 1  # an op name, kept while scope names come and go


def test_drains_share_the_name_list_until_a_name_comes_or_goes() -> None:
    # Each drain's records hold the name table; while no name is added or forgotten
    # it is one list, and each session still names its own scopes right.
    def session(scope: str) -> list[str]:
        with opprof.profile(capture=["none"], profile_memory=False) as prof:
            with opprof.record_function(scope):
                pass
        records = prof.records()
        assert [records.names[int(n)] for n in records.events["name"]] == [scope]
        return records.names

    first = session("shared scope a")
    again = session("shared scope a")
    assert again is not first  # forgotten at the second start, interned again
    assert again == first
    with opprof.profile(capture=["none"], profile_memory=False) as prof:
        pass
    assert prof.records().names is not again  # the scope name went: a new list
    with opprof.profile(capture=["none"], profile_memory=False) as prof2:
        pass
    assert prof2.records().names is prof.records().names  # nothing came or went
    other = session("shared scope b")
    assert "shared scope b" in other and "shared scope a" not in other
