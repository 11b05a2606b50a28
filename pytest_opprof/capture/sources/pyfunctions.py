"""A library's public Python functions, found in its imported modules, by their public names.

Much of scipy's public API is Python: ``scipy.linalg.solve`` checks its arguments, picks a
LAPACK driver and calls it; ``scipy.signal.lfilter`` is Python over numpy and a Cython kernel.
Recorded as ops (``native/pyfunc_hooks.c``: a frame evaluator that looks each frame's code
object up while a profile records), a test's time in them is named as users call it, and the
compiled ops they call nest inside.

The table is keyed by code object, so each entry needs a code of its own:
- decorated functions whose wrappers share one code object (``functools.wraps`` closures)
  are recorded by the code of the function they wrap;
- generators and coroutines are left out (their frame runs again at each resume);
- a code still shared by two public functions after that is left out.
"""

from __future__ import annotations

import inspect
import sys
import types
import warnings

# Frames that run again on each resume: an op per resume would misname the call.
_RESUMABLE = (
    inspect.CO_GENERATOR | inspect.CO_COROUTINE | inspect.CO_ITERABLE_COROUTINE
) | inspect.CO_ASYNC_GENERATOR


def public_module(name: str, package: str) -> bool:
    """``scipy.linalg`` is public; ``scipy.linalg._basic`` and ``scipy.linalg.tests`` are not."""
    if name != package and not name.startswith(package + "."):
        return False
    return not any(
        part.startswith("_") or part == "tests" or part.startswith("test_")
        for part in name.split(".")
    )


def _defined_in(obj: object, package: str) -> str | None:
    """The module that defines ``obj`` where it lies in ``package``, else None."""
    defined_in = getattr(obj, "__module__", None)
    if not isinstance(defined_in, str):
        return None
    if defined_in == package or defined_in.startswith(package + "."):
        return defined_in
    return None


def _exports(module_name: str, module: object, attr: str, defined_in: str, facade: bool) -> bool:
    """Whether ``module`` publishes its ``attr`` (defined in ``defined_in``): it defines it,
    or is a package above the module that does (``scipy.linalg`` for ``scipy.linalg._basic``),
    or lists it in its ``__all__``, or, without one, it is a ``facade`` that defines nothing
    itself (``sklearn.utils.metadata_routing``).  A module that only imported the name for
    its own use (``sklearn.utils.extmath`` imports ``Interval``) does not publish it."""
    if defined_in == module_name or defined_in.startswith(module_name + "."):
        return True
    listed = getattr(module, "__all__", None)
    if isinstance(listed, list | tuple):
        return attr in listed
    return facade


def _facade(module_name: str, namespace: dict[str, object]) -> bool:
    """Whether a module defines no function or class of its own: it only gathers names."""
    return not any(
        (isinstance(obj, type) or type(obj) is types.FunctionType)
        and getattr(obj, "__module__", None) == module_name
        for obj in list(namespace.values())
    )


def _callables(name: str, obj: object) -> list[tuple[str, types.FunctionType]]:
    """A function by its name; a class's own public methods (static and class methods
    included) and ``__call__``, as ``Class.method``; nothing for anything else."""
    if type(obj) is types.FunctionType:
        return [(name, obj)]
    if not isinstance(obj, type):
        return []
    methods = []
    for attr, member in list(vars(obj).items()):
        if attr.startswith("_") and attr != "__call__":
            continue
        if isinstance(member, (staticmethod, classmethod)):
            member = member.__func__
        if type(member) is types.FunctionType:
            methods.append((f"{name}.{attr}", member))
    return methods


def public_functions(
    package: str, modules: tuple[str, ...] | None = None
) -> dict[int, tuple[str, types.CodeType]]:
    """id(function) -> (public name, code recorded) of the Python functions defined in
    ``package`` that its imported public modules hold, and of the methods its classes
    there define, each named by its shortest public path (``scipy.linalg.solve``, not
    ``scipy.linalg.basic.solve``: :func:`_exports`), or where it has none by where it is
    defined (``sklearn.utils._param_validation.Interval.is_satisfied_by``), never by a
    module that merely imported it; ``modules``, when given, limits the search to those
    public modules."""
    found: dict[int, tuple[tuple[int, int, str], str, types.FunctionType]] = {}
    for module_name, module in list(sys.modules.items()):
        if not public_module(module_name, package):
            continue
        if modules is not None and module_name not in modules:
            continue
        namespace = getattr(module, "__dict__", None)  # sys.modules may hold anything
        if not isinstance(namespace, dict):
            continue
        facade = _facade(module_name, namespace)
        for attr, obj in list(namespace.items()):
            defined_in = _defined_in(obj, package) if not attr.startswith("_") else None
            if defined_in is None:
                continue  # private, or another library's object re-exported
            if _exports(module_name, module, attr, defined_in, facade):
                rank, path = (0, len(module_name), module_name), f"{module_name}.{attr}"
            else:
                qualname = getattr(obj, "__qualname__", attr)
                rank, path = (1, len(defined_in), defined_in), f"{defined_in}.{qualname}"
            for name, fn in _callables(path, obj):
                seen = found.get(id(fn))
                if seen is None or rank < seen[0]:
                    found[id(fn)] = (rank, name, fn)
    by_code: dict[types.CodeType, list[int]] = {}
    for key, (_rank, _name, fn) in found.items():
        by_code.setdefault(fn.__code__, []).append(key)
    chosen: dict[int, tuple[str, types.CodeType]] = {}
    for code, keys in by_code.items():
        for key in keys:
            _rank, name, fn = found[key]
            if len(keys) > 1:  # a shared wrapper: record the function it wraps
                inner = inspect.unwrap(fn)
                if type(inner) is not types.FunctionType or inner.__code__ is code:
                    continue
                chosen[key] = (name, inner.__code__)
            else:
                chosen[key] = (name, code)
    counts: dict[types.CodeType, int] = {}
    for _name, code in chosen.values():
        counts[code] = counts.get(code, 0) + 1
    return {
        key: (name, code)
        for key, (name, code) in chosen.items()
        if counts[code] == 1 and not code.co_flags & _RESUMABLE
    }


class PythonApi:
    """One library's public Python functions in the native table while its source holds
    them (``install``/``remove``), recorded under the source's option bit."""

    def __init__(self, owner: str, package: str, modules: tuple[str, ...] | None = None):
        self.owner = owner
        self.package = package
        self.modules = modules
        self._found: dict[int, tuple[str, types.CodeType]] | None = None  # codes kept alive
        self._warned = False
        # The last search, kept while sys.modules keeps its size: a profile per block of
        # API code would otherwise search scipy's modules each time (15 ms here).
        self._searched: tuple[int, dict[int, tuple[str, types.CodeType]]] | None = None
        # Its native entries, kept with it (one object: the native side reuses its arrays).
        self._entries: tuple[object, int, tuple[tuple[int, int, int], ...]] | None = None

    def install(self, option: int) -> None:
        """Find the functions now and record them; where this Python's frames cannot be
        read, warn once and record none (the library's compiled ops are unaffected)."""
        from pytest_opprof import _native

        reason = _native.pyfunc_unsupported()
        if reason is not None:
            if not self._warned:
                self._warned = True
                warnings.warn(
                    f"pytest-opprof: {self.package}'s Python functions are not captured ({reason})",
                    RuntimeWarning,
                    stacklevel=3,
                )
            return
        if self._searched is None or self._searched[0] != len(sys.modules):
            self._searched = (len(sys.modules), public_functions(self.package, self.modules))
        found = self._searched[1]
        if self._entries is None or self._entries[0] is not found or self._entries[1] != option:
            entries = tuple(
                (id(code), _native.intern(name), option) for name, code in found.values()
            )
            self._entries = (found, option, entries)
        _native.pyfunc_set(self.owner, self._entries[2])
        self._found = found

    def remove(self) -> None:
        if self._found is not None:
            from pytest_opprof import _native

            _native.pyfunc_set(self.owner, [])
            self._found = None
