"""The machine a run measured on, and a fingerprint of what affects its timings.

Time verdicts are only fair between runs on like machines, so every baseline
stores a :class:`MachineInfo`.  The fingerprint hashes the parts that change
op timings: CPU model and core count, the CPU's identity (``cpu_id``: x86 family,
model, stepping and widest vector unit; an ARM core's implementer and part),
architecture, OS family, Python implementation and minor version, numpy version
and BLAS, the kernel set OpenBLAS chose at load (``blas_core``), torch version.
The host name and kernel release are left out: CI runners differ in both while
timing alike.

``cpu_id`` and ``blas_core`` are there because a virtual machine's model name is
often masked: two hosts both read ``AMD EPYC`` here, and on one of them BLAS calls
ran 40-45% slower while both speed references ran within 9% of the other's.  A
name alone let those times be compared.

torch's version comes from package metadata, so describing the machine never
imports torch (seconds) when the test run did not.

The BLAS and OpenMP thread pools' sizes (``threads``) and the environment variables
that set them (``thread_env``) are recorded beside, outside the fingerprint: they
are a setting of the run, not of the machine, and a baseline recorded with other
sizes is still comparable; the verdict says when they differ.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import platform
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from importlib import metadata

from pytest_opprof.capture.threadpools import blas_core, thread_counts, thread_env
from pytest_opprof.gate.jsonio import Fields


@dataclass(frozen=True)
class MachineInfo:
    """Description of a machine and Python environment; ``fingerprint`` is 16 hex digits."""

    cpu_model: str
    cpu_count: int
    arch: str
    system: str
    platform: str
    python: str
    numpy: str | None
    blas: str | None
    torch: str | None
    fingerprint: str
    threads: Mapping[str, int] | None = None
    """Pool sizes the measured rounds ran with, ``{"openblas": 1, "openmp": 1}``; None
    when not recorded (baselines from before the pools were recorded)."""
    thread_env: Mapping[str, str] = field(default_factory=dict)
    """``OMP_NUM_THREADS``, ``OPENBLAS_NUM_THREADS``, ``MKL_NUM_THREADS`` where set."""
    cpu_id: str | None = None
    """``family 25 model 1 stepping 1, avx2``; None where the OS does not say (and in
    records from before it was kept)."""
    blas_core: str | None = None
    """OpenBLAS's kernel set, ``Haswell``; None without OpenBLAS (and in older records)."""

    def to_json(self) -> dict[str, object]:
        return {
            "threads": dict(self.threads) if self.threads is not None else None,
            "thread_env": dict(self.thread_env),
            "cpu_model": self.cpu_model,
            "cpu_count": self.cpu_count,
            "arch": self.arch,
            "system": self.system,
            "platform": self.platform,
            "python": self.python,
            "numpy": self.numpy,
            "blas": self.blas,
            "torch": self.torch,
            "cpu_id": self.cpu_id,
            "blas_core": self.blas_core,
            "fingerprint": self.fingerprint,
        }

    @classmethod
    def from_json(cls, f: Fields) -> MachineInfo:
        """Read back :meth:`to_json`; the stored fingerprint is kept, not recomputed."""
        return cls(
            cpu_model=f.text("cpu_model"),
            cpu_count=f.integer("cpu_count"),
            arch=f.text("arch"),
            system=f.text("system"),
            platform=f.text("platform"),
            python=f.text("python"),
            numpy=f.opt_text("numpy"),
            blas=f.opt_text("blas"),
            torch=f.opt_text("torch"),
            fingerprint=f.text("fingerprint"),
            threads=_read_threads(f),
            thread_env=_read_thread_env(f),
            cpu_id=f.opt_text("cpu_id"),
            blas_core=f.opt_text("blas_core"),
        )

    def pinned(self, threads: int | None) -> MachineInfo:
        """This record with every pool at ``threads`` (``--opprof-blas-threads N``); itself
        for None."""
        if threads is None or self.threads is None:
            return self
        return replace(self, threads=dict.fromkeys(self.threads, threads))

    def threads_differ(self, other: MachineInfo) -> str | None:
        """Why the pool sizes of ``other`` (the baseline) and of this record differ, in
        words; None when they agree or either side did not record them."""
        if self.threads is None or other.threads is None:
            return None
        # Only pools both sides found: a runtime loaded on one side only (a test run that
        # imported torch, one that did not) is no difference in size.
        if all(other.threads[k] == v for k, v in self.threads.items() if k in other.threads):
            return None
        return (
            f"BLAS/OpenMP thread pools differ from the baseline's "
            f"({_threads_text(other)}, now {_threads_text(self)}); a pool competing for "
            "cores can slow BLAS/LAPACK calls many times over (--opprof-blas-threads pins them)"
        )

    def ops_unmeasured(self) -> str | None:
        """Why figures recorded here hold no measured FLOPs, op counts or op figures, else
        None: numpy capture needs numpy 2 (``numpy_source.unsupported_reason``), so a
        baseline recorded with numpy 1.x (before such updates were refused) read them as 0."""
        major = (self.numpy or "").split(".")[0]
        if major.isdigit() and int(major) < 2:
            return f"the baseline was recorded with numpy {self.numpy}, whose ops are not captured"
        return None

    def describe(self) -> str:
        """One line for people: ``AMD EPYC x2, Linux x86_64, CPython 3.11, numpy 2.4.0``."""
        libs = [
            f"numpy {self.numpy}" if self.numpy else "",
            f"torch {self.torch}" if self.torch else "",
        ]
        identity = "; ".join(
            part
            for part in (self.cpu_id, f"OpenBLAS {self.blas_core}" if self.blas_core else "")
            if part
        )
        cpu = f"{self.cpu_model} x{self.cpu_count}" + (f" ({identity})" if identity else "")
        parts = [cpu, f"{self.system} {self.arch}", self.python]
        return ", ".join(parts + [lib for lib in libs if lib])


def _read_threads(f: Fields) -> dict[str, int] | None:
    threads = f.opt_obj("threads")
    if threads is None:
        return None
    return {name: threads.integer(name, minimum=1) for name in sorted(threads.data)}


def _read_thread_env(f: Fields) -> dict[str, str]:
    env = f.opt_obj("thread_env")
    if env is None:
        return {}
    return {name: env.text(name) for name in sorted(env.data)}


def _threads_text(info: MachineInfo) -> str:
    pools = ", ".join(f"{k} {v}" for k, v in sorted((info.threads or {}).items()))
    env = ", ".join(f"{k}={v}" for k, v in sorted(info.thread_env.items()))
    return "; ".join(part for part in (pools or "no pool found", env) if part)


def fingerprint(
    *,
    cpu_model: str,
    cpu_count: int,
    arch: str,
    system: str,
    python: str,
    numpy: str | None,
    blas: str | None,
    torch: str | None,
    cpu_id: str | None = None,
    blas_core: str | None = None,
) -> str:
    """16 hex digits of SHA-256 over the timing-relevant parts."""
    parts = {
        "cpu_id": cpu_id,
        "blas_core": blas_core,
        "cpu_model": cpu_model,
        "cpu_count": cpu_count,
        "arch": arch,
        "system": system,
        "python": python,
        "numpy": numpy,
        "blas": blas,
        "torch": torch,
    }
    digest = hashlib.sha256(json.dumps(parts, sort_keys=True).encode("utf-8"))
    return digest.hexdigest()[:16]


def machine_info(blas_threads: int | None = None) -> MachineInfo:
    """This machine; its pool sizes are ``blas_threads`` for every pool found where the
    rounds are pinned (``--opprof-blas-threads N``), else the sizes they have now."""
    return _described().pinned(blas_threads)


@functools.cache
def _described() -> MachineInfo:
    """This machine, described once per process: at the first verdict, so that the
    pools of the libraries the tests imported are loaded by then."""
    cpu_model = _cpu_model()
    cpu_count = os.cpu_count() or 1
    arch = platform.machine() or "unknown"
    system = platform.system() or "unknown"
    python = f"{platform.python_implementation()} {sys.version_info[0]}.{sys.version_info[1]}"
    numpy_version = _version("numpy")
    blas = _numpy_blas()
    torch_version = _version("torch")
    cpu_id = _cpu_id()
    core = blas_core()
    return MachineInfo(
        cpu_model=cpu_model,
        cpu_count=cpu_count,
        arch=arch,
        system=system,
        platform=platform.platform(),
        python=python,
        numpy=numpy_version,
        blas=blas,
        torch=torch_version,
        threads=thread_counts(),
        thread_env=thread_env(),
        cpu_id=cpu_id,
        blas_core=core,
        fingerprint=fingerprint(
            cpu_model=cpu_model,
            cpu_count=cpu_count,
            arch=arch,
            system=system,
            python=python,
            numpy=numpy_version,
            blas=blas,
            torch=torch_version,
            cpu_id=cpu_id,
            blas_core=core,
        ),
    )


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                name, _, value = line.partition(":")
                if name.strip() in ("model name", "Hardware", "cpu model") and value.strip():
                    return value.strip()
    except OSError:
        pass
    if sys.platform == "darwin":
        try:
            out = subprocess.run(
                ["sysctl", "-n", "machdep.cpu.brand_string"],
                capture_output=True,
                text=True,
                timeout=5,
                check=True,
            ).stdout.strip()
            if out:
                return out
        except (OSError, subprocess.SubprocessError):
            pass
    return platform.processor() or "unknown"


_CPU_FIELDS = {
    # x86: the model name may be masked, these are not (CPUID).
    "cpu family": "family",
    "model": "model",
    "stepping": "stepping",
    # ARM: the core's designer and part number.
    "CPU implementer": "implementer",
    "CPU part": "part",
    "CPU variant": "variant",
}
_VECTOR_UNITS = ("avx512f", "avx2", "avx", "sse4_2")
"""Widest first: a host that hides AVX-512 from its guests runs other BLAS kernels."""


def _cpu_id() -> str | None:
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            return cpu_identity(f.read())
    except OSError:
        return None


def cpu_identity(cpuinfo: str) -> str | None:
    """The first processor's identity from the text of ``/proc/cpuinfo``:
    ``family 25 model 1 stepping 1, avx2``; None where it names none."""
    first = cpuinfo.split("\n\n", 1)[0]
    found: dict[str, str] = {}
    flags: set[str] = set()
    for line in first.splitlines():
        name, _, value = line.partition(":")
        name, value = name.strip(), value.strip()
        if name in _CPU_FIELDS and value:
            found.setdefault(_CPU_FIELDS[name], value)
        elif name in ("flags", "Features"):
            flags = set(value.split())
    if not found:
        return None
    parts = [f"{label} {found[label]}" for label in _CPU_FIELDS.values() if label in found]
    unit = next((u for u in _VECTOR_UNITS if u in flags), None)
    return " ".join(parts) + (f", {unit}" if unit else "")


def _version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        module = sys.modules.get(dist)
        version = getattr(module, "__version__", None)
        return str(version) if version is not None else None


def _numpy_blas() -> str | None:
    try:
        import numpy

        config = numpy.show_config(mode="dicts")
        blas = config["Build Dependencies"]["blas"]
        return f"{blas['name']} {blas.get('version', '')}".strip()
    except Exception:  # older numpy, or a build without this section
        return None
