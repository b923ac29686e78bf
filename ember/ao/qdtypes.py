"""Quantized dtypes (``torch.qint8``, ``torch.quint8``, ``torch.qint32``) and quantization schemes.

A quantized dtype names the integer type of a quantized tensor's values; its storage is the plain integer
NumPy dtype (``int_repr()`` returns it as ``uint8``/``int8``/``int32``).

Example:
    >>> import ember
    >>> ember.quint8, ember.quint8.is_floating_point, ember.per_tensor_affine
    (ember.quint8, False, ember.per_tensor_affine)
"""
from __future__ import annotations

import numpy as np

from ember import dtypes


class QuantizedDtype(dtypes.dtype):
    """A quantized element type: ``qmin``/``qmax`` bound its integers, ``storage`` is their plain dtype."""

    __slots__ = ("qmin", "qmax", "storage")

    def __init__(self, name: str, storage: dtypes.dtype) -> None:
        super().__init__(name, storage.np, 1, 0)
        self.is_signed = storage.is_signed
        info = np.iinfo(storage.np)
        self.qmin, self.qmax, self.storage = int(info.min), int(info.max), storage

    def __reduce__(self):  # singletons, as the other dtypes
        return (_lookup, (self.name,))


def _lookup(name: str) -> QuantizedDtype:
    return QUANTIZED_DTYPES[name]


qint8 = QuantizedDtype("qint8", dtypes.int8)
quint8 = QuantizedDtype("quint8", dtypes.uint8)
qint32 = QuantizedDtype("qint32", dtypes.int32)
QUANTIZED_DTYPES = {d.name: d for d in (qint8, quint8, qint32)}


class qscheme:
    """A quantization scheme (``ember.per_tensor_affine``, ...); compare with ``is`` or ``==``."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return f"{dtypes.PUBLIC_NAME[0]}.{self.name}"

    def __reduce__(self):
        return (_lookup_scheme, (self.name,))


def _lookup_scheme(name: str) -> qscheme:
    return QSCHEMES[name]


per_tensor_affine = qscheme("per_tensor_affine")
per_channel_affine = qscheme("per_channel_affine")
per_tensor_symmetric = qscheme("per_tensor_symmetric")
per_channel_symmetric = qscheme("per_channel_symmetric")
per_channel_affine_float_qparams = qscheme("per_channel_affine_float_qparams")
QSCHEMES = {s.name: s for s in (per_tensor_affine, per_channel_affine, per_tensor_symmetric, per_channel_symmetric,
                                 per_channel_affine_float_qparams)}


def quantized_dtype(value: object, op: str) -> QuantizedDtype:
    """``value`` as a quantized dtype, or a TypeError naming ``op`` and the choices."""
    if isinstance(value, QuantizedDtype):
        return value
    raise TypeError(f"{op}: dtype must be ember.quint8, ember.qint8 or ember.qint32, got {value!r} "
                    "(quint4x2/quint2x4 are not supported by ember)")
