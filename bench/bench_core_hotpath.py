"""Native hot path: ns per op_begin+op_end pair, measured in C.

Compiles ``bench_core_hotpath.c`` with the core's sources (``native/build_ffi.py:
SOURCES`` up to ``drain.c``; the hooks after it need numpy's C API at import)
against this Python, runs it, and prints a table of median ns per iteration
(median of 7 runs; 60,000 recorded events per session, or 1,000,000 for the
"fresh buffer pages" case, which includes the kernel's first-touch page faults).

    .venv/bin/python bench/bench_core_hotpath.py
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
import sysconfig
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
NATIVE = os.path.join(HERE, "..", "native")
LAST_CORE_SOURCE = "drain.c"


def core_sources() -> list[str]:
    """build_ffi.SOURCES up to drain.c: the core and what its hot path calls.

    SOURCES is in dependency order (each file calls only files above it), so the
    prefix links alone (base, strtab, cuda for the CUDA event hooks behind a
    session option, core, drain); the numpy and memory hooks below it need
    numpy's C API.  Read from the script's text: running it would build cffi's FFI.
    """
    with open(os.path.join(NATIVE, "build_ffi.py"), encoding="utf-8") as f:
        tree = ast.parse(f.read())
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "SOURCES" for t in node.targets
        ):
            sources: list[str] = ast.literal_eval(node.value)
            return sources[: sources.index(LAST_CORE_SOURCE) + 1]
    raise SystemExit("native/build_ffi.py has no SOURCES list")


LABELS = {
    "ticks": "clock read (opprof_ticks)",
    "begin_end_idle": "op_begin+op_end, not recording",
    "begin_end_recording": "op_begin+op_end, recording",
    "begin_end_2_shapes": "op_begin+2 shape args+op_end, recording",
    "begin_end_cold": "op_begin+op_end, recording, fresh buffer pages",
}


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        exe = os.path.join(tmp, "bench_core")
        cmd = [
            "gcc",
            "-o",
            exe,
            "-O2",
            "-std=gnu11",
            f"-I{NATIVE}",
            f"-I{sysconfig.get_paths()['include']}",
            os.path.join(HERE, "bench_core_hotpath.c"),
            *(os.path.join(NATIVE, s) for s in core_sources()),
            f"-L{sysconfig.get_config_var('LIBDIR')}",
            f"-Wl,-rpath,{sysconfig.get_config_var('LIBDIR')}",
            f"-lpython{sysconfig.get_config_var('LDVERSION')}",
            "-lpthread",
            "-ldl",
            "-lm",
        ]
        subprocess.run(cmd, check=True)
        out = subprocess.run([exe], check=True, capture_output=True, text=True).stdout
    rows = dict(line.split(" ", 1) for line in out.splitlines())
    print(f"clock source: {rows.pop('clock')}   (python {sys.version.split()[0]})")
    print(f"{'case':<44} {'ns':>7}")
    for key, value in rows.items():
        print(f"{LABELS[key]:<44} {float(value):>7.1f}")


if __name__ == "__main__":
    main()
