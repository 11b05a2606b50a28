"""Re-installing the numpy hooks from the source's cached native arrays
(sources/numpy_source.py: prepare once, install many times) gives the same
hooks every time: same counts, same names, einsum's subscripts still recorded,
and numpy restored after each release."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import pytest_opprof as opprof
from pytest_opprof import _native
from pytest_opprof.capture.sources import numpy_source
from pytest_opprof.capture.sources.numpy_source import SOURCE
from pytest_opprof.errors import OpprofError
from pytest_opprof.flops import flops_for


def _session() -> tuple[list[str], int]:
    a, b = np.ones((6, 7)), np.ones((7, 9))
    with opprof.profile(capture=["numpy"], profile_memory=False, record_shapes=True) as prof:
        np.add(a, a)
        a.sum()
        np.einsum("ij,jk->ik", a, b)
    recs = prof.records()
    ev = recs.events
    names = sorted(recs.names[int(n)] for n in ev["name"])
    (einsum,) = ev[ev["name"] == recs.names.index("numpy.einsum")]
    sid = int(einsum["shape"])
    return names, flops_for("numpy.einsum", recs.shapes[sid], recs.dtypes[sid])


def test_every_reinstall_hooks_the_same_and_restores() -> None:
    assert not _native.numpy_hook_counts().installed
    seen = []
    for _ in range(4):
        SOURCE.acquire()
        try:
            counts = _native.numpy_hook_counts()
            seen.append((counts.calls, counts.methods, _session()))
        finally:
            SOURCE.release()
        assert not _native.numpy_hook_counts().installed
    calls, methods, (names, flops) = seen[0]
    assert calls > 300 and methods > 10
    assert "numpy.add" in names and "numpy.ndarray.sum" in names
    assert flops == 2 * 6 * 7 * 9  # the subscripts were recorded: strings hooked again
    assert all(s == seen[0] for s in seen)


def test_a_failing_set_all_names_the_object_and_restores_numpy() -> None:
    """The install's second native call (every hook's options and methods at once) fails
    on an object that is not hooked: the error names it, and numpy is restored."""
    SOURCE.acquire()
    SOURCE.release()
    prepared = SOURCE._prepared
    assert prepared is not None and prepared.set_args.n_params > 0
    stranger = object()
    bad = dataclasses.replace(
        prepared,
        set_args=_native.numpy_set_args(
            [(id(np.add), None, False, 4), (id(stranger), None, False, 4)], []
        ),
    )
    with pytest.raises(OpprofError, match=f"object {hex(id(stranger))} is not hooked"):
        numpy_source.install(bad)
    assert not _native.numpy_hook_counts().installed
    too_many = dataclasses.replace(
        prepared, set_args=_native.numpy_set_args([(id(np.add), None, False, 9)], [])
    )
    with pytest.raises(OpprofError, match=r"max_args 9 is not in 1\.\.8"):
        numpy_source.install(too_many)
    assert not _native.numpy_hook_counts().installed
    numpy_source.install(prepared)  # the real arrays still install
    try:
        assert _native.numpy_hook_counts().installed
    finally:
        _native.numpy_uninstall()
