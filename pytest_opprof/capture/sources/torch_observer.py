"""The native torch op observer: build, load, and read it into a :class:`KinetoRead`.

``torch_observer.cpp`` is a RecordFunction callback compiled against the
installed torch (``torch.utils.cpp_extension``, once per torch version and
source; cached in torch's extension directory, ``TORCH_EXTENSIONS_DIR`` or
``~/.cache/torch_extensions``).  It records what the Kineto path reads from
Kineto (names, times, threads, input shapes and dtypes, the concrete inputs of
:data:`~pytest_opprof.flops.aten.CONCRETE_ARGUMENT_OPS`, memory instants) at a
fraction of Kineto's cost, and :func:`read` turns its buffers into the same
:class:`KinetoRead`, so the records downstream are built by the same code.

When it cannot be built or loaded (no compiler, a build error, a torch
without headers), :func:`load` says why and the torch source uses Kineto.
``OPPROF_TORCH_OBSERVER=0`` chooses Kineto without trying.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import os
import struct
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from pytest_opprof.capture.sources.kineto_read import KinetoRead
from pytest_opprof.flops.aten import CONCRETE_ARGUMENT_OPS
from pytest_opprof.flops.device_traffic import CONCRETE_TRAFFIC_OPS, HOST, is_device

CONCRETE_OPS = CONCRETE_ARGUMENT_OPS | CONCRETE_TRAFFIC_OPS

CPP = Path(__file__).with_name("torch_observer.cpp")
ENV = "OPPROF_TORCH_OBSERVER"

TAG_TENSOR, TAG_TENSOR_LIST, TAG_LIST_UNDEFINED = 1, 2, 3
TAG_SCALAR, TAG_SCALAR_LIST, TAG_OTHER = 4, 5, 6
TAG_TENSOR_ON, TAG_DEVICE = 7, 8
KIND_INT, KIND_BOOL, KIND_OTHER, KIND_DOUBLE = 0, 1, 2, 3


CFLAGS = ["-O2", "-DNDEBUG"]  # NDEBUG as torch is built: inputs() asserts otherwise


@functools.cache
def load() -> tuple[Any | None, str | None]:
    """``(module, None)`` or ``(None, why not)``; built on first use, cached after."""
    if os.environ.get(ENV, "1") == "0":
        return None, f"{ENV}=0"
    try:
        import torch

        source = CPP.read_bytes()
        stamp = source + torch.__version__.encode() + " ".join(CFLAGS).encode()
        name = f"opprof_torch_observer_{hashlib.sha256(stamp).hexdigest()[:12]}"
        build_dir = build_root() / name
        built = build_dir / f"{name}.so"
        began = time.perf_counter()
        # A build in progress (another xdist worker) holds the lock; load() waits on it.
        compiled = not built.exists() or (build_dir / "lock").exists()
        if not compiled:
            # The name stamps source, torch and flags: a built one is current, and
            # importing it skips cpp_extension's ninja check (0.13 s a process).
            module = _import(name, built)
        else:
            from torch.utils import cpp_extension  # 0.14 s to import: only to build

            build_dir.mkdir(parents=True, exist_ok=True)
            print(
                f"pytest-opprof: compiling the torch op observer once (about 15 s), "
                f"cached in {build_dir}",
                file=sys.stderr,
                flush=True,
            )
            module = cpp_extension.load(
                name=name,
                sources=[str(CPP)],
                build_directory=str(build_dir),
                extra_cflags=CFLAGS,
                verbose=False,
            )
        module.load_s = time.perf_counter() - began
        module.compiled = compiled
        module.build_dir = build_dir
        module.set_concrete_names(sorted(CONCRETE_OPS))
        module.dtypes = module.dtype_names()
        module.device_types = module.device_type_names()
        return module, None
    except Exception as exc:  # any failure means Kineto, never a failed session
        lines = [line for line in str(exc).strip().splitlines() if line.strip()]
        errors = [line for line in lines if "error" in line.lower()] or lines
        return None, f"{type(exc).__name__}: {errors[0] if errors else ''}"[:300]


def build_root() -> Path:
    """Where torch keeps its extensions (``TORCH_EXTENSIONS_DIR``, else the user's cache),
    one folder per Python version as torch does; the module name stamps the rest."""
    root = os.environ.get("TORCH_EXTENSIONS_DIR")
    if root:
        return Path(root)
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "torch_extensions" / f"py{sys.version_info[0]}{sys.version_info[1]}"


def _import(name: str, path: Path) -> Any:
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _scalar_text(kind: int, value: int) -> object:
    if kind == KIND_BOOL:
        return bool(value)
    if kind == KIND_INT:
        return value
    if kind == KIND_DOUBLE:
        return struct.unpack("<d", struct.pack("<q", value))[0]
    return None


def _device(types: Sequence[str], kind: int, index: int) -> str:
    name = types[kind] if 0 <= kind < len(types) else ""
    return f"{name}:{index}" if name and index >= 0 else name


def decode(
    sig: list[int], dtypes: list[str], device_types: Sequence[str] = ()
) -> tuple[list[list[int]], list[str], list[str]]:
    """One argument encoding (see torch_observer.cpp) as Kineto's shapes and dtype texts
    (with :func:`~pytest_opprof.capture.sources.torch_source._dtype_text`'s values), and
    each argument's device (``"cpu"``, ``"cuda:0"``; ``""``: neither a tensor nor a
    ``Device``: Kineto records none)."""
    shapes: list[list[int]] = []
    texts: list[str] = []
    devices: list[str] = []
    i = 0
    while i < len(sig):
        tag = sig[i]
        if tag in (TAG_TENSOR, TAG_TENSOR_ON):
            ndim = sig[i + 2]
            shapes.append(sig[i + 3 : i + 3 + ndim])
            texts.append(dtypes[sig[i + 1]])
            i += 3 + ndim
            if tag == TAG_TENSOR:
                devices.append(HOST)
            else:
                devices.append(_device(device_types, sig[i], sig[i + 1]))
                i += 2
            continue
        shapes.append([])
        devices.append("")
        if tag == TAG_TENSOR_LIST:
            texts.append("TensorList")
            i += 1
        elif tag == TAG_DEVICE:
            texts.append("")
            devices[-1] = _device(device_types, sig[i + 1], sig[i + 2])
            i += 3
        elif tag == TAG_SCALAR:
            kind, value = sig[i + 1], sig[i + 2]
            texts.append(f"Scalar={_scalar_text(kind, value)}" if kind in (0, 1) else "Scalar")
            i += 3
        elif tag == TAG_SCALAR_LIST:
            n = sig[i + 1]
            if n < 0:
                texts.append("ScalarList")
                i += 2
            else:
                pairs = sig[i + 2 : i + 2 + 2 * n]
                values = [_scalar_text(k, v) for k, v in zip(pairs[::2], pairs[1::2], strict=True)]
                texts.append(f"ScalarList={values}")
                i += 2 + 2 * n
        else:  # TAG_LIST_UNDEFINED, TAG_OTHER
            texts.append("")
            i += 1
    return shapes, texts, devices


def read(module: Any, marker: str) -> KinetoRead:
    """The observer's buffers as a :class:`KinetoRead` (no Python per event: numpy over
    the op rows, Python once per distinct name and argument signature)."""
    ops_b, mem_b, sigs_b, offsets_b, all_names = module.read()
    rows = np.frombuffer(ops_b, dtype=np.int64).reshape(-1, 6)
    mem = np.frombuffer(mem_b, dtype=np.int64).reshape(-1, 4).copy()
    sigs = np.frombuffer(sigs_b, dtype=np.int64).tolist()
    offsets = np.frombuffer(offsets_b, dtype=np.int64).tolist()

    marker_id = all_names.index(marker) if marker in all_names else -1
    is_marker = rows[:, 3] == marker_id
    marker_starts = rows[is_marker, 0].tolist()
    rows = rows[~is_marker]
    # names in order of first appearance, as the Kineto reader numbers them
    used, first = np.unique(rows[:, 3], return_index=True)
    used = used[np.argsort(first)]
    name_map = np.zeros(len(all_names) + 1, dtype=np.int64)
    name_map[used] = np.arange(len(used))
    names = [all_names[i] for i in used.tolist()]

    # signatures -> distinct (shapes, dtypes), numbered from 1 (0 is "none")
    sig_used, sig_first = np.unique(rows[:, 4], return_index=True)
    sig_used = sig_used[np.argsort(sig_first)]
    sig_map = np.zeros(len(offsets), dtype=np.int64)
    distinct: dict[tuple[object, ...], int] = {}
    shapes: list[list[list[int] | None]] = [[]]
    dtype_rows: list[list[str]] = [[]]
    device_rows: list[list[str]] = [[]]
    for s in sig_used.tolist():
        sh, dt, dv = decode(sigs[offsets[s] : offsets[s + 1]], module.dtypes, module.device_types)
        key = (tuple(map(tuple, sh)), tuple(dt), tuple(dv))
        if key not in distinct:
            distinct[key] = len(shapes)
            shapes.append(list(sh))
            dtype_rows.append(dt)
            device_rows.append(dv)
        sig_map[s] = distinct[key]
    # Devices only where one is off the host: a host-only profile has nothing to count.
    on_device = any(is_device(d) for row in device_rows for d in row)

    out = np.empty((len(rows), 6), dtype=np.int64)
    out[:, :3] = rows[:, :3]
    out[:, 3] = name_map[rows[:, 3]]
    out[:, 4] = sig_map[rows[:, 4]]
    out[:, 5] = rows[:, 5]
    return KinetoRead(
        out, mem, names, shapes, dtype_rows, marker_starts, device_rows if on_device else None
    )
