"""sklearn capture source: scikit-learn's public Python API, as users call it.

scikit-learn is Python around numpy, scipy and its own Cython kernels, so a test's time in
``Ridge.fit`` was its own as far as the op tables could tell. Each public function and each
method a public class defines itself (``sklearn.linear_model.Ridge.fit``,
``sklearn.metrics.r2_score``) is an op, with the numpy and scipy ops it calls inside
(``pyfunctions``; ``native/pyfunc_hooks.c``). Available when the suite has imported
scikit-learn by its first profiled test: the plugin never imports it.
"""

from __future__ import annotations

import sys

from pytest_opprof import _native
from pytest_opprof.capture.sources.pyfunctions import PythonApi


class SklearnSource:
    """The "sklearn" capture source (see the module docstring)."""

    name = "sklearn"

    def __init__(self) -> None:
        self._refs = 0
        self._python = PythonApi(self.name, "sklearn")

    def available(self) -> bool:
        return "sklearn" in sys.modules

    def acquire(self) -> None:
        if self._refs == 0:
            self._python.install(self.start_options())
        self._refs += 1

    def release(self) -> None:
        if self._refs == 0:
            return
        self._refs -= 1
        if self._refs == 0:
            self._python.remove()

    def start_options(self) -> int:
        return int(_native.lib.OPPROF_OPT_CAPTURE_SKLEARN)

    def collect(self) -> None:
        return None


SOURCE = SklearnSource()
