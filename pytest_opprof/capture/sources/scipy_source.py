"""scipy capture source: scipy's compiled LAPACK and BLAS wrappers, named as users call them.

scipy.linalg spends most of its time in f2py routines (``scipy.linalg.lapack.dgesv``,
``scipy.linalg.blas.dgemm``, about 1,400 of them) that numpy capture never sees: they are
objects of f2py's ``fortran`` type, called through that type's one call slot, which
``native/scipy_hooks.c`` swaps for a trampoline (the same per-op cost as a numpy op).
Each routine is named by its public path: ``scipy.linalg.lapack`` and
``scipy.linalg.blas`` first, then the module that holds it (``scipy.sparse.linalg``'s
ARPACK wrappers are ``scipy.sparse.linalg._eigen.arpack._arpack.dnaupd``).

The source is available when scipy has been imported by the time the first profiled
test runs (the suite's imports did it): scipy is never imported by the plugin itself.
Routines of f2py modules imported later record as ``scipy.<f2py routine>``.

``scipy.special``'s functions are numpy ufuncs and are captured by the numpy source.
Cython functions (``scipy.signal``, ``scipy.sparse``) are not captured.
"""

from __future__ import annotations

import sys
import warnings
from typing import Any

from pytest_opprof import _native

PUBLIC = ("scipy.linalg.lapack", "scipy.linalg.blas", "scipy.linalg.cython_lapack")
OTHER_NAME = "scipy.<f2py routine>"


def _is_routine(obj: object) -> bool:
    """An f2py routine: an object of a type named ``fortran`` (each f2py module has its own)."""
    return type(obj).__name__ == "fortran" and type(obj).__module__ == "builtins"


def routines() -> dict[int, tuple[str, Any]]:
    """id -> (name, routine) of every f2py routine of the imported scipy modules."""
    found: dict[int, tuple[tuple[int, int, str], str, Any]] = {}
    for module_name, module in list(sys.modules.items()):
        if not (module_name == "scipy" or module_name.startswith("scipy.")):
            continue
        namespace = getattr(module, "__dict__", None)  # sys.modules may hold anything
        if not isinstance(namespace, dict):
            continue
        rank = PUBLIC.index(module_name) if module_name in PUBLIC else len(PUBLIC)
        for attr, obj in list(namespace.items()):
            if attr.startswith("__") or not _is_routine(obj):
                continue
            key = (rank, len(module_name), module_name)
            seen = found.get(id(obj))
            if seen is None or key < seen[0]:
                found[id(obj)] = (key, f"{module_name}.{attr}", obj)
    return {k: (name, obj) for k, (_key, name, obj) in found.items()}


class ScipySource:
    """The "scipy" capture source (see the module docstring)."""

    name = "scipy"

    def __init__(self) -> None:
        self._refs = 0
        self._held: dict[int, tuple[str, Any]] | None = None
        self._types: list[type] | None = None
        self._kept: list[object] = []  # what a wrapped trampoline may still reach

    def available(self) -> bool:
        """True when the suite has imported scipy (the plugin never imports it)."""
        return "scipy" in sys.modules

    def acquire(self) -> None:
        if self._refs == 0:
            held = routines()
            kinds = list({id(type(obj)): type(obj) for _name, obj in held.values()}.values())
            pairs = [(oid, _native.intern(name)) for oid, (name, _obj) in held.items()]
            _native.f2py_install([id(t) for t in kinds], pairs, _native.intern(OTHER_NAME))
            self._held, self._types = held, kinds
        self._refs += 1

    def release(self) -> None:
        if self._refs == 0:
            return
        self._refs -= 1
        if self._refs == 0 and self._types is not None:
            if not _native.f2py_uninstall():
                self._kept.append((self._held, self._types))
                warnings.warn(
                    "pytest-opprof: scipy's f2py call slot was replaced by someone else while "
                    "hooked; left it in place",
                    RuntimeWarning,
                    stacklevel=2,
                )
            self._held = self._types = None

    @property
    def installed(self) -> bool:
        return self._types is not None

    def start_options(self) -> int:
        return int(_native.lib.OPPROF_OPT_CAPTURE_SCIPY)

    def collect(self) -> None:
        return None


SOURCE = ScipySource()
