"""cffi build script: compiles native/*.c into ``pytest_opprof._opprof_native``.

``native/opprof.h`` is both the C header and the cffi cdef, so the Python
side and the C side can never disagree about a signature.
"""

from __future__ import annotations

import os
import re

import numpy
from cffi import FFI

HERE = os.path.dirname(os.path.abspath(__file__))

# In dependency order: each file calls only files listed above it (base.c
# calls none); the hot path inlines hotpath.h into core, numpy hooks and fastscope.
SOURCES = [
    "base.c",
    "strtab.c",
    "cuda.c",
    "core.c",
    "switches.c",
    "muted.c",
    "sched_probe.c",
    "drain.c",
    "drain_pool.c",
    "memory_count.c",
    "memory_pymem.c",
    "memory.c",
    "numpy_args.c",
    "numpy_hooks.c",
    "scipy_hooks.c",
    "pyfunc_hooks.c",
    "model_kernels.c",
    "one_round.c",
    "buffers.c",
    "fastscope.c",
    "fork.c",
]
# Each header is part of the cdef; each must stay free of preprocessor lines.
CDEF_HEADERS = [
    "opprof.h",
    "drain_pool.h",
    "memory.h",
    "numpy_hooks.h",
    "scipy_hooks.h",
    "pyfunc_hooks.h",
    "cuda.h",
    "model_kernels.h",
    "one_round.h",
    "buffers.h",
    "fastscope.h",
]


def _cdef_text() -> str:
    parts = []
    for name in CDEF_HEADERS:
        with open(os.path.join(HERE, name), encoding="utf-8") as f:
            text = f.read()
        # Comments are fine for cffi; preprocessor lines are not.
        if re.search(r"^\s*#", text, flags=re.MULTILINE):
            raise RuntimeError(
                f"native/{name} must stay free of preprocessor lines (it is the cdef)"
            )
        parts.append(text)
    return "\n".join(parts)


ffibuilder = FFI()
ffibuilder.cdef(_cdef_text())
ffibuilder.set_source(
    "pytest_opprof._opprof_native",
    "".join(f'#include "{h}"\n' for h in CDEF_HEADERS),
    sources=[os.path.relpath(os.path.join(HERE, s)) for s in SOURCES],
    # Rebuild when any header changes, not only a .c file (hotpath.h is all inline code).
    depends=sorted(
        os.path.relpath(os.path.join(HERE, name))
        for name in os.listdir(HERE)
        if name.endswith(".h")
    ),
    include_dirs=[HERE, numpy.get_include()],
    # cffi turns on the limited API by default, which hides the type structs
    # the numpy hooks need (docs/how-it-works.md: vectorcall offsets, PyMethodDef).
    define_macros=[("_CFFI_NO_LIMITED_API", None), ("NPY_TARGET_VERSION", "NPY_1_22_API_VERSION")],
    # Warnings show in every build; .ci/run holds our sources to them with
    # -Werror one file at a time, which leaves cffi's generated module and
    # users' compilers out of it (an install must not fail on a new warning).
    # Functions on cache-line boundaries: the trampolines' cost moved by 8 ns an op
    # (8 -> 16, bench/bench_numpy_capture.py) when an unrelated change in drain.c
    # shifted them by 16 bytes; aligned, it no longer depends on what comes before.
    extra_compile_args=["-O2", "-std=gnu11", "-Wall", "-Wextra", "-falign-functions=64"],
    libraries=["dl"],
)

if __name__ == "__main__":
    ffibuilder.compile(tmpdir=os.path.join(HERE, "..", "build", "cffi"), verbose=True)
