"""What the installed scipy runs under ``scipy.linalg.solve`` and ``inv``.

scipy 1.16 and newer solve and invert through plain C functions of
``scipy.linalg._batched_linalg`` (batched: ``inv`` of a stack of matrices); before, through
LAPACK's f2py wrappers (``getrf`` then ``getrs`` or ``getri``).  Python 3.10's newest scipy
is 1.15, so the suite meets both.
"""

from __future__ import annotations

import importlib.util

BATCHED = importlib.util.find_spec("scipy.linalg._batched_linalg") is not None
