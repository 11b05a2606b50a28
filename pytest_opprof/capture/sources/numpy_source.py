"""numpy capture source: names numpy's C entry points and installs the native hooks.

What is hooked (``native/numpy_hooks.c`` does the per-call work):

- every ``numpy.ufunc`` and ``numpy._ArrayFunctionDispatcher`` reachable from the
  public namespaces in ``NAMESPACES``, through its per-object vectorcall pointer
  (this also catches operators: ``a + b`` is ``numpy.add``, ``a @ b`` ``numpy.matmul``);
- ndarray methods (``numpy.ndarray.sum``), ufunc methods (``numpy.add.reduce``) and
  numpy's C module functions (``numpy.empty``, ``numpy.array``), through ``ml_meth``
  in their ``PyMethodDef`` tables, which CPython's specialised call sites still call;
- indexing, ``a[key]`` and ``a[key] = value`` on an ndarray, through ndarray's
  mapping slots: ``numpy.ndarray.__getitem__`` and ``numpy.ndarray.__setitem__``;
- ``numpy.random``: its methods and functions are Cython functions, called through
  a per-object vectorcall pointer like the dispatchers.  ``Generator`` and
  ``RandomState`` methods (and the bit generators') are named by their class,
  ``numpy.random.Generator.normal``, ``numpy.random.RandomState.rand``; the legacy
  module functions are ``RandomState`` methods bound to numpy's global instance, and a
  call on that instance is named as users write it, ``numpy.random.rand``.

Each object gets one name: its public path, preferring the first namespace in
``NAMESPACES``, then the attribute spelled like the object's ``__name__``
(``numpy.absolute``, not the alias ``numpy.abs``), then the shortest.
The numpy ufuncs of other libraries (``scipy.special.gamma``) are hooked the same way,
under their own names, when the suite imported them (``FOREIGN_UFUNC_NAMESPACES``).
Not captured: numpy scalar arithmetic; Python-level numpy functions that are not
dispatchers (``numpy.ones``, ``numpy.full``, ``numpy.eye``, ``numpy.identity``: CPython
3.11 runs a Python function called from Python inline, without reading the function's
vectorcall pointer, so only their C callees show, ``numpy.empty`` and ``numpy.copyto``);
dunder methods besides indexing; indexing of ndarray subclasses (``np.matrix``, masked
arrays, ``memmap``: their classes copied numpy's original slot); iterating an array
(``for row in a`` goes through ``sq_item``, left alone).
Supported: CPython with the GIL and numpy >= 2.0; elsewhere the source warns once
and profiles record scopes only.
"""

from __future__ import annotations

import importlib
import inspect
import sys
import types
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from pytest_opprof import _native
from pytest_opprof.capture.sources.pyfunctions import PythonApi
from pytest_opprof.flops import has_formula

NAMESPACES = (
    "numpy",
    "numpy.linalg",
    "numpy.fft",
    "numpy.emath",
    "numpy.strings",
    "numpy.char",
    "numpy.lib.stride_tricks",
    "numpy.lib.array_utils",
)
FOREIGN_UFUNC_NAMESPACES = ("scipy.special",)
"""Other libraries' namespaces whose numpy ufuncs are hooked too, when the suite has
imported them by the first profiled test (the plugin never imports them)."""
UFUNC_METHODS = ("reduce", "accumulate", "reduceat", "outer", "at")
SELF_NONE, SELF_ARRAY, SELF_UFUNC, SELF_INSTANCE = 0, 1, 2, 3
# Calls whose str arguments are recorded with the shapes: einsum's subscripts
# and convolve's mode decide their FLOPs (pytest_opprof.flops.numpy_ops).
STRING_ARGUMENT_CALLS = frozenset({"numpy.einsum", "numpy.convolve", "numpy.correlate"})
# Calls that record up to 8 arguments: einsum(a, [0, 1], b, [1, 2], [0, 2]).
MANY_ARGUMENT_CALLS = frozenset({"numpy.einsum"})
# Keyword parameters of the ufunc methods, in positional order (numpy's C
# signatures, which inspect cannot read): np.add.reduce(array=x) counts.
UFUNC_METHOD_PARAMS = {
    "reduce": ("array", "axis", "dtype", "out", "keepdims", "initial", "where"),
    "accumulate": ("array", "axis", "dtype", "out"),
    "reduceat": ("array", "indices", "axis", "dtype", "out"),
}
_C_MODULE = "numpy._core._multiarray_umath"
SLOT_NAMES = ("numpy.ndarray.__getitem__", "numpy.ndarray.__setitem__")
"""Names of ndarray's hooked type slots, in ``OPPROF_NP_SLOT_*`` order."""
RANDOM_CLASSES = (
    "Generator",
    "RandomState",
    "BitGenerator",
    "SeedSequence",
    "MT19937",
    "PCG64",
    "PCG64DXSM",
    "Philox",
    "SFC64",
)


@dataclass
class HookTable:
    """What to hook and under which names; holds a reference to every object."""

    calls: list[tuple[Any, str]] = field(default_factory=list)
    """(ufunc or dispatcher, name)"""
    methods: list[tuple[Any, str, int, int]] = field(default_factory=list)
    """(method descriptor or builtin, name, SELF_* kind, ufunc method index)"""
    unbound: list[tuple[Any, Any, str | None]] = field(default_factory=list)
    """(call object among ``calls`` that is a method called with its instance first,
    an instance whose calls get their own name or None, that name)"""
    slots: tuple[str, ...] = SLOT_NAMES
    """names of ndarray's type slots, ``OPPROF_NP_SLOT_*`` order ("" leaves one alone)"""


def _public_objects(np: types.ModuleType) -> Iterator[tuple[int, str, str, Any]]:
    """(namespace rank, namespace, attribute, object) for every public attribute.

    Reads module dicts, not ``getattr``, so numpy's lazily loaded submodules
    (``numpy.testing``, ``numpy.ma``) are not imported as a side effect."""
    for rank, ns in enumerate(NAMESPACES):
        try:
            mod = np.emath if ns == "numpy.emath" else importlib.import_module(ns)
        except ImportError:
            continue
        for attr, obj in vars(mod).items():
            if not attr.startswith("_"):
                yield rank, ns, attr, obj


def _random_calls(
    np: types.ModuleType,
) -> Iterator[tuple[str, Any, bool, str | None]]:
    """(name, Cython function, called with its instance first, name of calls on numpy's
    global RandomState) for numpy.random's public functions and methods."""
    random = sys.modules.get("numpy.random") or importlib.import_module("numpy.random")
    cyfunction = type(random.Generator.normal)
    if cyfunction.__name__ != "cython_function_or_method":
        return
    legacy = getattr(getattr(random, "mtrand", None), "_rand", None)
    module_names: dict[int, str] = {}
    for attr, obj in vars(random).items():
        if attr.startswith("_"):
            continue
        if isinstance(obj, cyfunction):
            yield f"numpy.random.{attr}", obj, False, None
        elif isinstance(obj, types.MethodType) and obj.__self__ is legacy:
            func = obj.__func__
            # np.random.random_sample and an alias share one function: its own name wins.
            if id(func) not in module_names or attr == func.__name__:
                module_names[id(func)] = f"numpy.random.{attr}"
    for cls_name in RANDOM_CLASSES:
        cls = vars(random).get(cls_name)
        if not isinstance(cls, type):
            continue
        for attr, obj in vars(cls).items():
            if not attr.startswith("_") and isinstance(obj, cyfunction):
                yield f"numpy.random.{cls_name}.{attr}", obj, True, module_names.get(id(obj))


def _has_vectorcall(cyfunction: Any) -> bool:
    """Whether a Cython function has a vectorcall pointer (Cython exposes the pointer as
    the ``__vectorcalloffset__`` member); True when that cannot be read."""
    member = vars(type(cyfunction)).get("__vectorcalloffset__")
    try:
        return bool(member.__get__(cyfunction)) if member is not None else True
    except (AttributeError, TypeError):
        return True


def build_hook_table() -> HookTable:
    """Walk numpy's public namespaces and name every hookable object once."""
    import numpy as np

    dispatcher_type = type(np.dot)
    best: dict[int, tuple[tuple[int, bool, int, str], str, Any]] = {}
    for rank, ns, attr, obj in _public_objects(np):
        is_call = isinstance(obj, (np.ufunc, dispatcher_type))
        is_c_function = (
            isinstance(obj, types.BuiltinFunctionType)
            and isinstance(obj.__self__, types.ModuleType)
            and obj.__self__.__name__ == _C_MODULE
        )
        if not (is_call or is_c_function):
            continue
        key = (rank, attr != getattr(obj, "__name__", attr), len(attr), attr)
        seen = best.get(id(obj))
        if seen is None or key < seen[0]:
            best[id(obj)] = (key, f"{ns}.{attr}", obj)
    for ns in FOREIGN_UFUNC_NAMESPACES:
        module = sys.modules.get(ns)
        if module is None:
            continue
        for attr, obj in list(vars(module).items()):
            if not attr.startswith("_") and isinstance(obj, np.ufunc) and id(obj) not in best:
                best[id(obj)] = ((len(NAMESPACES), False, len(attr), attr), f"{ns}.{attr}", obj)
    table = HookTable()
    for _key, name, obj in sorted(best.values(), key=lambda v: v[1]):
        if isinstance(obj, types.BuiltinFunctionType):
            table.methods.append((obj, name, SELF_NONE, 0))
        else:
            table.calls.append((obj, name))
    named = {id(obj) for obj, _name in table.calls}
    for name, obj, unbound, instance_name in _random_calls(np):
        if id(obj) in named:
            continue
        named.add(id(obj))
        if _has_vectorcall(obj):
            table.calls.append((obj, name))
            if not unbound:
                continue
        else:
            # Cython gives *args functions (RandomState.rand, randn) no vectorcall
            # pointer: their calls reach the PyMethodDef's ml_meth, hooked instead.
            table.methods.append((obj, name, SELF_INSTANCE, 0))
        instance = np.random.mtrand._rand if instance_name is not None else None
        table.unbound.append((obj, instance, instance_name))
    for attr, obj in sorted(vars(np.ndarray).items()):
        if not attr.startswith("_") and type(obj).__name__ == "method_descriptor":
            table.methods.append((obj, f"numpy.ndarray.{attr}", SELF_ARRAY, 0))
    for index, attr in enumerate(UFUNC_METHODS):
        table.methods.append((vars(np.ufunc)[attr], f"numpy.ufunc.{attr}", SELF_UFUNC, index))
    return table


@dataclass
class PreparedHooks:
    """A table resolved for the native install: its C arrays and, per object id
    whose hook records more than positional arguments, (keyword parameter
    names, record strings).

    Interning and array building happen once per process: numpy's objects
    (and so their ids) live as long as the process, and ``table`` keeps them
    (``params`` keeps the name tuples the hooks read)."""

    table: HookTable
    args: _native.NumpyHookArgs
    params: dict[int, CallParams]
    unbound: list[tuple[int, int, int]]
    """(call id, instance id or 0, name id): the methods of :func:`_native.numpy_set_args`"""
    set_args: _native.NumpySetArgs
    """``params`` and ``unbound`` as the arrays of one native call"""


def _positional_params(obj: Any) -> tuple[str, ...] | None:
    """Names of ``obj``'s parameters that a caller can pass by keyword, in order."""
    try:
        sig = inspect.signature(obj)
    except (TypeError, ValueError):
        return None
    names = []
    for p in sig.parameters.values():
        if p.kind not in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
            break
        names.append(p.name)
    return tuple(names) or None


class CallParams(NamedTuple):
    """What one hook records besides its first positional arguments."""

    names: tuple[str, ...] | None  # keyword parameters, in positional order
    strings: bool  # str arguments (einsum subscripts, convolve's mode)
    max_args: int  # arguments recorded at most


def _call_params(table: HookTable) -> dict[int, CallParams]:
    """Keyword recording for the calls with a FLOP formula: only they read options.

    Hooks record 4 arguments by default (what numpy's operands need: a call
    like ``umr_sum(a, axis, dtype, out, keepdims, initial, where)`` would
    otherwise pay for options no formula reads); einsum's sublist form
    (``a, [0, 1], b, [1, 2], [0, 2]``) and calls whose options lie further
    are given more."""
    import numpy as np

    params: dict[int, CallParams] = {}
    for obj, name in table.calls:
        strings = name in STRING_ARGUMENT_CALLS
        if name in MANY_ARGUMENT_CALLS:
            params[id(obj)] = CallParams(None, strings, _native.NUMPY_MAX_ARGS)
        elif not isinstance(obj, np.ufunc) and has_formula(name):
            names = _positional_params(obj)
            if names is not None or strings:
                wanted = len(names) if names else 0
                params[id(obj)] = CallParams(
                    names,
                    strings,
                    min(max(_native.NUMPY_DEFAULT_ARGS, wanted), _native.NUMPY_MAX_ARGS),
                )
        elif strings:
            params[id(obj)] = CallParams(None, True, _native.NUMPY_DEFAULT_ARGS)
    for obj, _name, kind, index in table.methods:
        if kind == SELF_UFUNC and UFUNC_METHODS[index] in UFUNC_METHOD_PARAMS:
            names = UFUNC_METHOD_PARAMS[UFUNC_METHODS[index]]
            params[id(obj)] = CallParams(names, False, _native.NUMPY_DEFAULT_ARGS)
    return params


def prepare(table: HookTable) -> PreparedHooks:
    """Intern the table's names and build the arrays :func:`install` hands to C."""
    import numpy as np

    calls = []
    for obj, name in table.calls:
        per = (
            [_native.intern(f"{name}.{m}") for m in UFUNC_METHODS]
            if isinstance(obj, np.ufunc)
            else []
        )
        calls.append((id(obj), _native.intern(name), per))
    methods = [(id(o), _native.intern(n), kind, i) for o, n, kind, i in table.methods]
    slots = [_native.intern(n) if n else 0 for n in table.slots]
    unbound = [
        (id(obj), id(instance) if instance is not None else 0, _native.intern(name or ""))
        for obj, instance, name in table.unbound
    ]
    params = _call_params(table)
    set_args = _native.numpy_set_args(
        [(obj, p.names, p.strings, p.max_args) for obj, p in params.items()], unbound
    )
    return PreparedHooks(
        table, _native.numpy_hook_args(calls, methods, slots), params, unbound, set_args
    )


def install(prepared: PreparedHooks) -> None:
    """Install the prepared hooks: one native call for the hooks, one for the calls that
    record options or are methods; a failure after the first restores numpy before it
    raises."""
    _native.numpy_install(prepared.args)
    try:
        _native.numpy_set_all(prepared.set_args)
    except BaseException:
        _native.numpy_uninstall()
        raise


NOT_INSTALLED = "numpy is not installed"


def unsupported_reason() -> str | None:
    """Why numpy capture cannot run here, or None when it can."""
    try:
        import numpy as np
    except ImportError:
        return NOT_INSTALLED
    major = int(np.__version__.split(".")[0])
    if major < 2:
        return f"numpy {np.__version__} is older than 2.0"
    if type(np.dot).__name__ != "_ArrayFunctionDispatcher":
        return "this numpy has no C array-function dispatchers"
    return _native.numpy_unsupported_reason()


class NumpySource:
    """The "numpy" capture source (see the module docstring)."""

    name = "numpy"

    def __init__(self) -> None:
        self._refs = 0
        self._walked: HookTable | None = None  # the walk is done once per process
        self._prepared: PreparedHooks | None = None  # and its native form built once
        self._table: HookTable | None = None
        self._available: bool | None = None
        self.reason: str | None = None
        """Why numpy cannot be hooked here (set by :meth:`available`), None when it can."""
        self._foreign: list[HookTable] = []
        # np.ones, np.eye, np.testing.assert_allclose: Python functions, not dispatchers.
        self._python = PythonApi(self.name, "numpy", ("numpy", "numpy.testing"))

    def available(self) -> bool:
        """True when numpy can be hooked here; warns once when it cannot."""
        if self._available is None:
            reason = self.reason = unsupported_reason()
            if reason is not None:
                warnings.warn(
                    f"pytest-opprof: numpy capture off ({reason}); profiles record scopes only",
                    RuntimeWarning,
                    stacklevel=2,
                )
            self._available = reason is None
        return self._available

    def unmeasured(self) -> str | None:
        """Why the numpy ops of the tests go unmeasured here although numpy is installed
        (an older numpy, a free-threaded Python), else None: a test's FLOPs and op counts
        are then no measurement, and 0 in them means nothing."""
        if self.available() or self.reason == NOT_INSTALLED:
            return None
        return f"numpy capture off ({self.reason})"

    def acquire(self) -> None:
        """Install the hooks on the first acquire; later ones only count."""
        if self._refs == 0:
            if self._walked is None:
                self._walked = build_hook_table()
            if self._prepared is None or self._prepared.table is not self._walked:
                self._prepared = prepare(self._walked)
            install(self._prepared)
            self._table = self._walked
            # numpy loads numpy.testing on first use, often inside a test: imported here,
            # its assertions are ops in every test, not only in those after that one.
            importlib.import_module("numpy.testing")
            try:
                self._python.install(self.start_options())
            except BaseException:
                _native.numpy_uninstall()
                self._table = None
                raise
        self._refs += 1

    def release(self) -> None:
        """Restore numpy on the last release."""
        if self._refs == 0:
            return
        self._refs -= 1
        if self._refs == 0 and self._table is not None:
            self._python.remove()
            foreign = _native.numpy_uninstall()
            if foreign:
                # Someone wrapped our trampolines: they stay callable, so the
                # objects they route to must stay alive.
                self._foreign.append(self._table)
                warnings.warn(
                    f"pytest-opprof: {foreign} numpy entry points were replaced by someone "
                    "else while hooked; left them in place",
                    RuntimeWarning,
                    stacklevel=2,
                )
            self._table = None

    @property
    def installed(self) -> bool:
        """True while the hooks are in place."""
        return self._table is not None

    def start_options(self) -> int:
        """OPPROF_OPT_* bits that make the installed hooks record."""
        return int(_native.lib.OPPROF_OPT_CAPTURE_NUMPY)

    def collect(self) -> None:
        """numpy events come out of the native drain."""
        return None


SOURCE = NumpySource()
