"""A history of runs across commits (``store.py``) and where its figures stepped
(``changes.py``, ``series.py``), printed by ``pytest-opprof history`` (``cli.py``).

Knows nothing of pytest: the plugin appends a run (``plugin/history.py``), the
command reads them.
"""
