"""Host<->device traffic and synchronisations of one torch op, from its recorded arguments.

Like a FLOP formula, :func:`op_traffic` is exact and needs no device: it reads the op's
name and, per argument, the shape, dtype text and device the torch source recorded
(``devices``: ``"cpu"``, ``"cuda:0"``, ...; ``""`` where the argument is neither a
tensor on a device nor a ``Device``).  It is called once per distinct (op, arguments),
never per event.

Copies (``aten::copy_``, ``aten::_to_copy``, ``aten::to``; ``.cpu()``, ``.cuda()``,
``.to(device)``, ``.tolist()`` and a numpy array handed to ``torch.tensor(...,
device=...)`` all reach ``aten::to``) move ``numel * itemsize`` of the destination's
dtype (torch converts the dtype on the source's side first) from the source's device to
the destination's: host->device, device->host, or device->device between two devices.
A copy between host and device that is not ``non_blocking`` waits for the device: one
synchronisation.  ``aten::item``, ``aten::_local_scalar_dense``, ``aten::is_nonzero`` (a
tensor's ``__bool__``) and ``aten::nonzero`` (its output's size is on the device) of a
device tensor are one synchronisation each; the first three also copy one element of the
tensor's dtype to the host.  These ops nest (``aten::to`` calls
``aten::_to_copy``, which calls ``aten::copy_``): the model counts each copy once, at
the outermost op that carries it (``model/event_traffic.py``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

HOST = "cpu"
SCOPE_SEPARATOR = " in scope "
"""Between an op and its scope in a traffic site's key: ``aten::to in scope train_step``."""

COPY_OPS = frozenset({"aten::copy_", "aten::_to_copy", "aten::to"})
SYNC_OPS = frozenset(
    {"aten::item", "aten::_local_scalar_dense", "aten::is_nonzero", "aten::nonzero"}
)
TRAFFIC_OPS = COPY_OPS | SYNC_OPS
CONCRETE_TRAFFIC_OPS = COPY_OPS
"""Ops whose scalar arguments the torch source records as values (``"Scalar=6"``): the
destination's dtype and ``non_blocking``."""

SCALAR_TYPES = (
    "unsigned char",
    "signed char",
    "short int",
    "int",
    "long int",
    "c10::Half",
    "float",
    "double",
    "c10::complex<c10::Half>",
    "c10::complex<float>",
    "c10::complex<double>",
    "bool",
    "c10::qint8",
    "c10::quint8",
    "c10::qint32",
    "c10::BFloat16",
    "c10::quint4x2",
    "c10::quint2x4",
    "c10::bits1x8",
    "c10::bits2x4",
    "c10::bits4x2",
    "c10::bits8",
    "c10::bits16",
    "c10::Float8_e5m2",
    "c10::Float8_e4m3fn",
    "c10::Float8_e5m2fnuz",
    "c10::Float8_e4m3fnuz",
    "short unsigned int",
    "unsigned int",
    "long unsigned int",
    *(f"c10::dummy_uint1_7_t<{i}>" for i in range(1, 8)),
    *(f"c10::dummy_int1_7_t<{i}>" for i in range(1, 8)),
    "c10::Float8_e8m0fnu",
    "c10::Float4_e2m1fn_x2",
)
"""torch's dtype texts (``TypeMeta`` names) by ``c10::ScalarType`` number: a ``dtype``
argument is recorded as its number."""

_WIDE = {
    "short int": 2,
    "int": 4,
    "long int": 8,
    "c10::Half": 2,
    "float": 4,
    "double": 8,
    "c10::complex<c10::Half>": 4,
    "c10::complex<float>": 8,
    "c10::complex<double>": 16,
    "c10::qint32": 4,
    "c10::BFloat16": 2,
    "c10::bits16": 2,
    "short unsigned int": 2,
    "unsigned int": 4,
    "long unsigned int": 8,
}
ITEMSIZE = {name: _WIDE.get(name, 1) for name in SCALAR_TYPES}
"""Bytes per element of each dtype text."""


class Traffic(NamedTuple):
    """One op's bytes copied each way and its synchronisations with the device."""

    host_to_device_bytes: int = 0
    device_to_host_bytes: int = 0
    device_to_device_bytes: int = 0
    device_syncs: int = 0

    def __bool__(self) -> bool:
        return any(self)


NONE = Traffic()


def is_device(device: str) -> bool:
    """A device other than the host (``""``: not known, not a device)."""
    return device not in ("", HOST)


def _scalar(text: str) -> int | bool | None:
    """The value of a recorded ``"Scalar=6"`` / ``"Scalar=True"``; None for any other."""
    if not text.startswith("Scalar="):
        return None
    value = text[len("Scalar=") :]
    if value in ("True", "False"):
        return value == "True"
    try:
        return int(value)
    except ValueError:
        return None


def _is_tensor(dtype: str) -> bool:
    return dtype in ITEMSIZE


def _numel(shape: Sequence[int] | None) -> int:
    n = 1
    for d in shape or ():
        n *= d
    return n


class _Args(NamedTuple):
    shapes: Sequence[Sequence[int] | None]
    dtypes: Sequence[str]
    devices: Sequence[str]

    def device(self, i: int) -> str:
        return self.devices[i] if i < len(self.devices) else ""

    def dtype(self, i: int) -> str:
        return self.dtypes[i] if i < len(self.dtypes) else ""

    def device_argument(self) -> int | None:
        """The first ``Device`` argument given (not a tensor, a device recorded)."""
        for i in range(1, len(self.dtypes)):
            if not _is_tensor(self.dtypes[i]) and self.device(i):
                return i
        return None


# Per copy overload, by argument count: (dtype's index, non_blocking's index), the
# destination's device being the ``Device`` argument, else the source's.
_TO_COPY = (1, 5)  # _to_copy(self, dtype, layout, device, pin_memory, non_blocking, memory_format)
_TO = {
    8: (1, 5),  # to.dtype_layout(self, dtype, layout, device, pin_memory, non_blocking, copy, mf)
    6: (2, 3),  # to.device(self, device, dtype, non_blocking, copy, mf)
    5: (1, 2),  # to.dtype(self, dtype, non_blocking, copy, mf); to.other(self, other, ...)
}


def _copy(name: str, a: _Args) -> tuple[str, str, str, int, bool] | None:
    """(source device, destination device, destination dtype, numel, non_blocking)."""
    if not a.dtypes or not _is_tensor(a.dtype(0)):
        return None
    if name == "aten::copy_":
        # copy_(self, src, non_blocking): self is the destination.
        if len(a.dtypes) < 2 or not _is_tensor(a.dtype(1)):
            return None
        blocking = _scalar(a.dtype(2)) is not True
        return a.device(1), a.device(0), a.dtype(0), _numel(a.shapes[0]), not blocking
    layout = _TO_COPY if name == "aten::_to_copy" else _TO.get(len(a.dtypes))
    if layout is None:
        return None
    dtype_at, blocking_at = layout
    src, dst, dtype = a.device(0), a.device(0), a.dtype(0)
    if name == "aten::to" and _is_tensor(a.dtype(1)):  # to.other: like the other tensor
        dst, dtype = a.device(1), a.dtype(1)
    else:
        given = a.device_argument()
        if given is not None:
            dst = a.devices[given]
        number = _scalar(a.dtype(dtype_at))
        if type(number) is int and 0 <= number < len(SCALAR_TYPES):
            dtype = SCALAR_TYPES[number]
    return src, dst, dtype, _numel(a.shapes[0]), _scalar(a.dtype(blocking_at)) is True


def op_traffic(
    name: str,
    shapes: Sequence[Sequence[int] | None],
    dtypes: Sequence[str],
    devices: Sequence[str],
) -> Traffic:
    """The traffic of one call of ``name`` with these recorded arguments (see the module
    docstring); :data:`NONE` for any other op, or where a device is not known."""
    if name not in TRAFFIC_OPS:
        return NONE
    a = _Args(shapes, dtypes, devices)
    if name in SYNC_OPS:
        if not is_device(a.device(0)):
            return NONE
        if name == "aten::nonzero":  # its count's copy is the kernel's own, not sized here
            return Traffic(device_syncs=1)
        # One element of the tensor's own dtype comes to the host (4 bytes for a
        # float's .item(), 1 for a bool's if): CUDA's trace has that memcpy.
        return Traffic(device_to_host_bytes=ITEMSIZE.get(a.dtype(0), 0), device_syncs=1)
    copy = _copy(name, a)
    if copy is None:
        return NONE
    src, dst, dtype, numel, non_blocking = copy
    if src == dst or not src or not dst:
        return NONE
    nbytes = numel * ITEMSIZE.get(dtype, 0)
    sync = 0 if non_blocking else 1
    if src == HOST:
        return Traffic(host_to_device_bytes=nbytes, device_syncs=sync)
    if dst == HOST:
        return Traffic(device_to_host_bytes=nbytes, device_syncs=sync)
    return Traffic(device_to_device_bytes=nbytes)
