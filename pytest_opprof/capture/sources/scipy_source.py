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

Cython functions of those modules (``scipy.linalg._decomp_lu_cython.lu_dispatcher``,
``scipy.signal._sosfilt._sosfilt``) are called through a per-object vectorcall
pointer, as numpy's dispatchers are, and are swapped the same way.  So are scipy's
plain C functions that take ``*args`` (``scipy.linalg._batched_linalg._solve``, behind
``scipy.linalg.solve``; ``scipy.sparse._sparsetools.csr_matvec``): CPython leaves their
pointer empty and calls them through their type's call slot, so a pointer set there
sees every call.  C functions of the fast kinds (METH_O, METH_FASTCALL) and pybind11
functions are not captured: specialised call sites call the former past any pointer.
``scipy.special``'s functions are numpy ufuncs and are captured by the numpy source.
"""

from __future__ import annotations

import sys
import types
import warnings
from collections.abc import Callable
from typing import Any

from pytest_opprof import _native
from pytest_opprof.capture.sources.pyfunctions import PythonApi
from pytest_opprof.flops import lapack

PUBLIC = ("scipy.linalg.lapack", "scipy.linalg.blas", "scipy.linalg.cython_lapack")
OTHER_NAME = "scipy.<f2py routine>"


def _is_routine(obj: object) -> bool:
    """An f2py routine: an object of a type named ``fortran`` (each f2py module has its own)."""
    return type(obj).__name__ == "fortran" and type(obj).__module__ == "builtins"


def _is_cython(obj: object) -> bool:
    """A compiled Cython function (``def`` in a .pyx): per-object vectorcall, as numpy's
    dispatchers have; fused ones dispatch to a specialisation of that type too."""
    return type(obj).__name__ in ("cython_function_or_method", "fused_cython_function")


def _is_compiled(obj: object) -> bool:
    """A Cython function, or a plain C function of a scipy extension module
    (``scipy.linalg._batched_linalg._solve``, ``scipy.sparse._sparsetools.csr_matvec``):
    those called the fast way carry a vectorcall pointer too.  Functions of other
    libraries that a scipy module imported (numpy's) are left to their own source."""
    if _is_cython(obj):
        return True
    if type(obj) is not types.BuiltinFunctionType:
        return False
    owner = getattr(obj, "__self__", None)
    return isinstance(owner, types.ModuleType) and owner.__name__.startswith("scipy.")


def routines(kind: Callable[[object], bool] = _is_routine) -> dict[int, tuple[str, Any]]:
    """id -> (name, object) of every object ``kind`` accepts in the imported scipy modules
    (by default the f2py routines), each named by its shortest public-first path."""
    found: dict[int, tuple[tuple[int, int, str], str, Any]] = {}
    for module_name, module in list(sys.modules.items()):
        if not (module_name == "scipy" or module_name.startswith("scipy.")):
            continue
        namespace = getattr(module, "__dict__", None)  # sys.modules may hold anything
        if not isinstance(namespace, dict):
            continue
        rank = PUBLIC.index(module_name) if module_name in PUBLIC else len(PUBLIC)
        for attr, obj in list(namespace.items()):
            if attr.startswith("__") or not kind(obj):
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
        self._cython: dict[int, tuple[str, Any]] | None = None
        self._types: list[type] | None = None
        self._params: dict[int, tuple[str, ...]] = {}  # alive while hooked
        self._kept: list[object] = []  # what a wrapped trampoline may still reach
        self._searched: dict[object, tuple[int, dict[int, tuple[str, Any]]]] = {}
        self._python = PythonApi(self.name, "scipy")  # scipy.linalg.solve, signal.lfilter

    def available(self) -> bool:
        """True when the suite has imported scipy (the plugin never imports it)."""
        return "scipy" in sys.modules

    def acquire(self) -> None:
        if self._refs == 0:
            held = self._routines(_is_routine)
            kinds = list({id(type(obj)): type(obj) for _name, obj in held.values()}.values())
            pairs = [(oid, _native.intern(name)) for oid, (name, _obj) in held.items()]
            # What the FLOP formulas read, keyword arguments included (compute_uv=...).
            params = {
                oid: names
                for oid, (name, _obj) in held.items()
                if (names := lapack.params(name)) is not None
            }
            _native.f2py_install([id(t) for t in kinds], pairs, _native.intern(OTHER_NAME), params)
            self._held, self._types, self._params = held, kinds, params
            cython = self._routines(_is_compiled)
            try:
                _native.vcall_install(
                    [(oid, _native.intern(name)) for oid, (name, _obj) in cython.items()]
                )
                try:
                    self._python.install(self.start_options())
                except BaseException:
                    _native.vcall_uninstall()
                    raise
            except BaseException:
                _native.f2py_uninstall()
                self._held = self._types = None
                raise
            self._cython = cython
        self._refs += 1

    def release(self) -> None:
        if self._refs == 0:
            return
        self._refs -= 1
        if self._refs == 0 and self._types is not None:
            self._python.remove()
            kept = not _native.vcall_uninstall()
            if not _native.f2py_uninstall() or kept:
                self._kept.append((self._held, self._cython, self._types, self._params))
                warnings.warn(
                    "pytest-opprof: scipy's f2py call slot was replaced by someone else while "
                    "hooked; left it in place",
                    RuntimeWarning,
                    stacklevel=2,
                )
            self._held = self._cython = self._types = None
            self._params = {}

    def _routines(self, kind: Callable[[object], bool]) -> dict[int, tuple[str, Any]]:
        """:func:`routines`, searched again only when ``sys.modules`` changed size (a
        profile per block of API code searched every scipy module each time)."""
        found = self._searched.get(kind)
        if found is None or found[0] != len(sys.modules):
            found = self._searched[kind] = (len(sys.modules), routines(kind))
        return found[1]

    @property
    def installed(self) -> bool:
        return self._types is not None

    def start_options(self) -> int:
        return int(_native.lib.OPPROF_OPT_CAPTURE_SCIPY)

    def collect(self) -> None:
        return None


SOURCE = ScipySource()
