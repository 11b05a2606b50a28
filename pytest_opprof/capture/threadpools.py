"""The BLAS and OpenMP thread pools loaded in this process: find them, read and set their sizes.

A BLAS pool that spreads each LAPACK call over every core competes with whatever
else runs on them (pytest-xdist's other workers, a busy CI box); on 2 cores that
made single calls up to 100x slower (bench/bench_blas_threads.py).  The machine record therefore
stores the pools' sizes, and ``--opprof-blas-threads`` pins them for the measured
rounds.

The libraries are found the way threadpoolctl finds them, without depending on
it: the shared objects mapped into this process (``/proc/self/maps``) whose file
name is a known BLAS or OpenMP runtime are opened again with ``RTLD_NOLOAD`` (the
loaded copy, never a new one), and each pool is driven through its runtime's own
getter and setter, whichever of the known symbol spellings it exports (wheels
prefix and suffix OpenBLAS's: ``scipy_openblas_get_num_threads64_``).

This runs when the machine is described and around each test's rounds, never per
op.  On a platform without ``/proc/self/maps`` (macOS, Windows) no pool is found and
nothing is set: the record then says nothing, which is better than guessing.
"""

from __future__ import annotations

import ctypes
import os
import re
import sys
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass

_MAPS = "/proc/self/maps"

THREAD_ENV = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")
"""Environment variables that size the pools when a runtime starts."""


@dataclass(frozen=True)
class _Api:
    name: str
    """The pool's kind as the machine record names it: ``openblas``, ``openmp``, ``mkl``."""
    file_pattern: re.Pattern[str]
    getters: tuple[str, ...]
    setters: tuple[str, ...]


# Symbol spellings, newest wheels first: scipy-openblas (numpy >= 2, scipy) prefixes
# ``scipy_`` and suffixes ``64_`` for the ILP64 build; older numpy wheels exported
# ``openblas_*64_``; a system OpenBLAS exports the plain names.
_APIS = (
    _Api(
        "openblas",
        re.compile(r"^lib(scipy_)?openblas"),
        (
            "scipy_openblas_get_num_threads64_",
            "scipy_openblas_get_num_threads",
            "openblas_get_num_threads64_",
            "openblas_get_num_threads",
        ),
        (
            "scipy_openblas_set_num_threads64_",
            "scipy_openblas_set_num_threads",
            "openblas_set_num_threads64_",
            "openblas_set_num_threads",
        ),
    ),
    _Api(
        "mkl",
        re.compile(r"^libmkl_rt"),
        ("MKL_Get_Max_Threads", "mkl_get_max_threads"),
        ("MKL_Set_Num_Threads", "mkl_set_num_threads"),
    ),
    # GNU (libgomp, torch and gcc builds), Intel (libiomp5) and LLVM (libomp) runtimes.
    _Api(
        "openmp",
        re.compile(r"^lib(gomp|iomp5|omp)[.-]"),
        ("omp_get_max_threads",),
        ("omp_set_num_threads",),
    ),
)


@dataclass(frozen=True)
class ThreadPool:
    """One loaded runtime's pool: ``api`` (``openblas``, ``openmp``, ``mkl``) and its file."""

    api: str
    path: str
    _get: Callable[[], int]
    _set: Callable[[int], None]

    def get(self) -> int:
        """Threads the next parallel call may use."""
        return int(self._get())

    def set(self, threads: int) -> None:
        """Size the pool to ``threads`` (>= 1)."""
        self._set(threads)


def _mapped_libraries() -> list[str]:
    """Paths of the shared objects mapped into this process, in first-mapped order."""
    try:
        with open(_MAPS, encoding="utf-8", errors="replace") as f:
            lines = f.readlines()
    except OSError:
        return []
    paths: dict[str, None] = {}
    for line in lines:
        fields = line.split(maxsplit=5)
        if len(fields) == 6 and fields[5].startswith("/"):
            path = fields[5].strip()
            if ".so" in os.path.basename(path):
                paths[path] = None
    return list(paths)


def _symbol(lib: ctypes.CDLL, names: tuple[str, ...]) -> ctypes._NamedFuncPointer | None:
    for name in names:
        try:
            return lib[name]
        except AttributeError:
            continue
    return None


def _open(path: str, api: _Api) -> ThreadPool | None:
    try:
        # RTLD_NOLOAD: the copy already loaded, or nothing (a deleted or replaced file).
        lib = ctypes.CDLL(path, mode=os.RTLD_NOLOAD | os.RTLD_LOCAL)
    except (OSError, AttributeError):
        return None
    getter, setter = _symbol(lib, api.getters), _symbol(lib, api.setters)
    if getter is None or setter is None:
        return None
    getter.restype, getter.argtypes = ctypes.c_int, []
    # The setters take a C int (OpenBLAS's ILP64 build too: only its BLAS ints widen).
    setter.restype, setter.argtypes = None, [ctypes.c_int]
    return ThreadPool(api.name, path, getter, setter)


_found: tuple[int, list[ThreadPool]] | None = None


def thread_pools() -> list[ThreadPool]:
    """The BLAS and OpenMP pools loaded now (an empty list where they cannot be found).

    Reading ``/proc/self/maps`` costs about 2 ms with torch loaded, once per test when
    pinning; the libraries are found again only when ``sys.modules`` has grown, which
    is how a runtime comes into a test process (an import).
    """
    global _found
    modules = len(sys.modules)
    if _found is None or _found[0] != modules:
        _found = (modules, _find())
    return list(_found[1])


def _find() -> list[ThreadPool]:
    pools = []
    for path in _mapped_libraries():
        base = os.path.basename(path)
        for api in _APIS:
            if api.file_pattern.match(base):
                pool = _open(path, api)
                if pool is not None:
                    pools.append(pool)
                break
    return pools


def thread_counts(pools: list[ThreadPool] | None = None) -> dict[str, int]:
    """Pool sizes by kind, ``{"openblas": 2, "openmp": 2}``; where several libraries of a
    kind are loaded (numpy's and scipy's OpenBLAS), the largest, since it decides how
    many cores one call may claim."""
    counts: dict[str, int] = {}
    for pool in thread_pools() if pools is None else pools:
        counts[pool.api] = max(counts.get(pool.api, 0), pool.get())
    return counts


_CORENAMES = (
    "scipy_openblas_get_corename64_",
    "scipy_openblas_get_corename",
    "openblas_get_corename64_",
    "openblas_get_corename",
)


def blas_core() -> str | None:
    """The kernel set the first loaded OpenBLAS chose for this CPU (``Haswell``, ``Zen``,
    ``SkylakeX``): a build with every kernel picks one at load time, so one wheel runs
    different code on different CPUs.  None where no OpenBLAS is loaded or it cannot say."""
    for pool in thread_pools():
        if pool.api != "openblas":
            continue
        try:
            lib = ctypes.CDLL(pool.path, mode=os.RTLD_NOLOAD | os.RTLD_LOCAL)
        except (OSError, AttributeError):
            continue
        corename = _symbol(lib, _CORENAMES)
        if corename is None:
            continue
        corename.restype, corename.argtypes = ctypes.c_char_p, []
        name = corename()
        if isinstance(name, bytes) and name.strip():
            return name.decode("ascii", "replace").strip()
    return None


def thread_env(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The set ones of :data:`THREAD_ENV`, as given."""
    env = os.environ if environ is None else environ
    return {name: env[name] for name in THREAD_ENV if name in env}


@contextmanager
def pinned(threads: int | None) -> Iterator[list[ThreadPool]]:
    """Every loaded pool sized to ``threads`` inside, each restored to its own size on
    any way out; ``None`` leaves them alone.  Yields the pools it set."""
    if threads is None:
        yield []
        return
    pools = thread_pools()
    before = [(pool, pool.get()) for pool in pools]
    try:
        for pool, size in before:
            if size != threads:
                pool.set(threads)
        yield pools
    finally:
        for pool, size in before:
            if size != threads:
                pool.set(size)
