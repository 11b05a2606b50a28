"""The machine a run measured on, and a fingerprint of what affects its timings.

Time verdicts are only fair between runs on like machines, so every baseline
stores a :class:`MachineInfo`.  The fingerprint hashes the parts that change
op timings: CPU model and core count, architecture, OS family, Python
implementation and minor version, numpy version and BLAS, torch version.  The
host name and kernel release are left out: CI runners differ in both while
timing alike.

torch's version comes from package metadata, so describing the machine never
imports torch (seconds) when the test run did not.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import platform
import subprocess
import sys
from dataclasses import dataclass
from importlib import metadata

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

    def to_json(self) -> dict[str, object]:
        return {
            "cpu_model": self.cpu_model,
            "cpu_count": self.cpu_count,
            "arch": self.arch,
            "system": self.system,
            "platform": self.platform,
            "python": self.python,
            "numpy": self.numpy,
            "blas": self.blas,
            "torch": self.torch,
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
        )

    def describe(self) -> str:
        """One line for people: ``AMD EPYC x2, Linux x86_64, CPython 3.11, numpy 2.4.0``."""
        libs = [
            f"numpy {self.numpy}" if self.numpy else "",
            f"torch {self.torch}" if self.torch else "",
        ]
        parts = [f"{self.cpu_model} x{self.cpu_count}", f"{self.system} {self.arch}", self.python]
        return ", ".join(parts + [lib for lib in libs if lib])


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
) -> str:
    """16 hex digits of SHA-256 over the timing-relevant parts."""
    parts = {
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


@functools.cache
def machine_info() -> MachineInfo:
    """This machine, described once per process."""
    cpu_model = _cpu_model()
    cpu_count = os.cpu_count() or 1
    arch = platform.machine() or "unknown"
    system = platform.system() or "unknown"
    python = f"{platform.python_implementation()} {sys.version_info[0]}.{sys.version_info[1]}"
    numpy_version = _version("numpy")
    blas = _numpy_blas()
    torch_version = _version("torch")
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
        fingerprint=fingerprint(
            cpu_model=cpu_model,
            cpu_count=cpu_count,
            arch=arch,
            system=system,
            python=python,
            numpy=numpy_version,
            blas=blas,
            torch=torch_version,
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
