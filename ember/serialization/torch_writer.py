"""Write PyTorch's zip checkpoint format, which ``torch.load(weights_only=True)`` reads.

``data.pkl`` is a protocol-2 pickle naming exactly the globals torch writes: an ember tensor
becomes ``torch._utils._rebuild_tensor_v2(storage, offset, size, stride, requires_grad,
OrderedDict())`` over a persistent storage id ``('storage', torch.FloatStorage, key, 'cpu',
numel)``, a Parameter ``torch._utils._rebuild_parameter(...)``, a dtype ``torch.float32``, a device
``torch.device('cpu')``, a Size ``torch.Size(...)``. Tensors that view one NumPy buffer share one
storage (so views and tied weights stay shared, as with torch). Any other object pickles as Python
pickles it (a whole module names its ember class; loading it needs ``weights_only=False``).
Members are stored uncompressed at 64-byte aligned offsets, so loaders can view them in place.

Example:
    >>> import ember, io, zipfile
    >>> buffer = io.BytesIO(); write(buffer, {"w": ember.ones(2)})
    >>> sorted(zipfile.ZipFile(buffer).namelist())[:3]
    ['archive/.data/serialization_id', 'archive/.format_version', 'archive/.storage_alignment']
"""
from __future__ import annotations

import collections
import io
import pickle
import secrets
import struct
import zipfile
from typing import Any, BinaryIO

import numpy as np

from ember import return_types
from ember.serialization.torch_names import DTYPE_STORAGES, UNTYPED_DTYPES, TorchName
from ember.dtypes import dtype, from_numpy_dtype
from ember.tensor import Size, Tensor, user_attributes
from ember.sparse.coo import SparseTensor
from ember.ao.qdtypes import per_tensor_affine, qscheme
from ember.ao.qtensor import QuantizedTensor
from ember.sparse.compressed import SparseCompressedTensor
from ember.storage import TypedStorage, UntypedStorage
from ember.surface.constants import layout

ALIGNMENT = 64
_REBUILD_TENSOR = TorchName("torch._utils", "_rebuild_tensor_v2")
_REBUILD_TENSOR_V3 = TorchName("torch._utils", "_rebuild_tensor_v3")  # float8, uint16-64: bytes + the dtype, as torch
_UNTYPED_STORAGE = TorchName("torch.storage", "UntypedStorage")
_REBUILD_PARAMETER = TorchName("torch._utils", "_rebuild_parameter")
_SIZE = TorchName("torch", "Size")
_REBUILD_SPARSE = TorchName("torch._utils", "_rebuild_sparse_tensor")
_GET_LAYOUT = TorchName("torch.serialization", "_get_layout")
_DEVICE = TorchName("torch", "device")
_REBUILD_QTENSOR = TorchName("torch._utils", "_rebuild_qtensor")
_QSCHEMES = {name: TorchName("torch", name) for name in ("per_tensor_affine", "per_channel_affine")}
_REBUILD_META = TorchName("torch._utils", "_rebuild_meta_tensor_no_storage")
_REBUILD_FROM_TYPE = TorchName("torch._tensor", "_rebuild_from_type_v2")  # a tensor with Python attributes
_TENSOR = TorchName("torch", "Tensor")
_QUANTIZED_STORAGE = {"quint8": "QUInt8Storage", "qint8": "QInt8Storage", "qint32": "QInt32Storage"}


class _StorageRef:
    """A storage to write: pickled as a persistent id, its bytes written as ``data/<key>``."""

    __slots__ = ("key", "array", "kind", "location")

    def __init__(self, key: str, array: np.ndarray, location: str = "cpu") -> None:
        self.key, self.array, self.location = key, array, location
        name = _dtype_name(array.dtype)
        # torch keeps float8 and uint16-64 bytes in an UntypedStorage (numel = bytes), typed by _rebuild_tensor_v3
        self.kind = _UNTYPED_STORAGE if name in UNTYPED_DTYPES else TorchName("torch", DTYPE_STORAGES[name])

    @property
    def untyped(self) -> bool:
        return self.kind is _UNTYPED_STORAGE

    @property
    def numel(self) -> int:
        """The storage's size as the persistent id states it: bytes for an UntypedStorage, else elements."""
        return int(self.array.nbytes if self.untyped else self.array.size)


def _dtype_name(dtype: np.dtype) -> str:
    try:
        name = from_numpy_dtype(dtype).name
    except Exception:  # noqa: BLE001 - any dtype ember has no name for
        name = None
    if name not in DTYPE_STORAGES and name not in UNTYPED_DTYPES:
        raise TypeError(f"ember.save: arrays of dtype {dtype} have no PyTorch storage type; convert them first")
    return name


class _Pickler(pickle._Pickler):  # the pure-Python pickler: save_global is overridable
    def __init__(self, file: BinaryIO) -> None:
        super().__init__(file, protocol=2)
        self.storages: dict[int, _StorageRef] = {}  # id(root buffer) -> its storage
        self._roots: list = []  # keep roots alive so ids stay unique

    def persistent_id(self, obj: Any) -> Any:
        if isinstance(obj, _StorageRef):
            return ("storage", obj.kind, obj.key, obj.location, obj.numel)
        if isinstance(obj, (UntypedStorage, TypedStorage)):  # torch's forms: bytes, or elements of a storage class
            typed = isinstance(obj, TypedStorage)
            raw = np.array(obj.cpu()._untyped_storage._bytes if typed else obj.cpu()._bytes, np.uint8).reshape(-1)
            ref = _StorageRef(str(len(self.storages)), raw.view(obj.dtype.np) if typed else raw)
            if not typed:
                ref.kind = _UNTYPED_STORAGE
            self.storages[id(ref)] = ref
            self._roots.append(ref)
            return ("storage", ref.kind, ref.key, "cpu", ref.numel)
        return None

    def _storage_of(self, array: np.ndarray) -> tuple[_StorageRef, int, tuple]:
        """The storage holding ``array`` (its root buffer when that can be expressed), offset, strides."""
        root = array
        while isinstance(root.base, np.ndarray):
            root = root.base
        item = array.dtype.itemsize
        usable = (root.dtype == array.dtype and root.flags.c_contiguous and array.size > 0
                  and root.dtype.byteorder in "=|<" and all(s >= 0 and s % item == 0 for s in array.strides))
        if usable:
            start = array.__array_interface__["data"][0] - root.__array_interface__["data"][0]
            offset = start // item
            last = offset + sum((n - 1) * s // item for n, s in zip(array.shape, array.strides))
            usable = start % item == 0 and 0 <= offset and last < root.size
        if usable:
            if id(root) not in self.storages:
                self.storages[id(root)] = _StorageRef(str(len(self.storages)), root.reshape(-1))
                self._roots.append(root)
            return self.storages[id(root)], offset, tuple(s // item for s in array.strides)
        # Not expressible as a view of its buffer (negative strides, odd dtype views...): its own copy.
        own = np.ascontiguousarray(array).reshape(-1) if array.size else np.empty(0, array.dtype)
        if own.dtype.byteorder == ">":
            own = own.astype(own.dtype.newbyteorder("<"))
        ref = _StorageRef(str(len(self.storages)), own)
        self.storages[id(own)] = ref
        self._roots.append(own)
        strides = tuple(int(np.prod(array.shape[k + 1:], dtype=np.int64)) for k in range(array.ndim))
        return ref, 0, strides

    def reducer_override(self, obj: Any) -> Any:
        from ember.device import device

        if isinstance(obj, TorchName):
            return obj.name  # a str: pickle calls save_global, below
        if isinstance(obj, SparseTensor):  # torch's own form: the layout, then indices, values, size, coalesced
            data = (obj._indices(), obj._values().detach(), Size(obj.shape), obj.is_coalesced())
            return (_REBUILD_SPARSE, (_Rebuilt((_GET_LAYOUT, ("torch.sparse_coo",))), data))
        if isinstance(obj, SparseCompressedTensor):  # torch's form: layout, (compressed, plain, values, size)
            parts = (obj.crow_indices(), obj.col_indices()) if obj.layout.name == "sparse_csr" else \
                (obj.ccol_indices(), obj.row_indices())
            data = (*parts, obj.values().detach(), Size(obj.shape))
            return (_REBUILD_SPARSE, (_Rebuilt((_GET_LAYOUT, (f"torch.{obj.layout.name}",))), data))
        if isinstance(obj, QuantizedTensor):  # torch's _rebuild_qtensor over a Q(U)Int storage of the integers
            return self._reduce_quantized(obj)
        if isinstance(obj, Tensor) and obj.device.type == "meta":  # shape and dtype only, as torch writes them
            return (_REBUILD_META, (obj.dtype, tuple(obj.shape), tuple(obj.stride()), bool(obj.requires_grad)))
        if isinstance(obj, Tensor):
            from ember.nn import Buffer, Parameter

            if not isinstance(obj, Parameter) and user_attributes(obj):
                return self._reduce_with_attributes(obj, isinstance(obj, Buffer))

            device = obj.device
            array = obj.detach().cpu().numpy()  # a device tensor: a host copy, saved with its device (torch's "cuda:0")
            ref, offset, strides = self._storage_of(array)
            if device.type != "cpu":
                ref.location = f"{device.type}:{device.index or 0}"
            args = (ref, offset, tuple(array.shape), strides, bool(obj.requires_grad), collections.OrderedDict())
            if ref.untyped:
                return (_REBUILD_TENSOR_V3, args + (obj.dtype,))
            if isinstance(obj, Parameter):
                plain = (_REBUILD_TENSOR, args[:4] + (False, collections.OrderedDict()))
                return (_REBUILD_PARAMETER, (_Rebuilt(plain), bool(obj.requires_grad), collections.OrderedDict()))
            return (_REBUILD_TENSOR, args)
        if isinstance(obj, _Rebuilt):
            return obj.reduce
        if return_types.is_return_type(type(obj)):  # torch's name, so torch.load reads it (with safe_globals)
            return (TorchName("torch.return_types", type(obj).__name__), (tuple(obj), {}))
        if isinstance(obj, dtype):
            return obj.name
        if isinstance(obj, device):
            return (_DEVICE, (str(obj),))
        if isinstance(obj, Size):
            return (_SIZE, (tuple(obj),))
        if isinstance(obj, layout):  # torch pickles layouts by name through _get_layout
            return (_GET_LAYOUT, (f"torch.{obj.name}",))
        if isinstance(obj, qscheme):  # the global torch.per_tensor_symmetric, ... (save_global)
            return obj.name
        return NotImplemented

    def _reduce_with_attributes(self, obj: Tensor, buffer: bool) -> tuple:
        """A tensor carrying Python attributes (an ``nn.Buffer``, ``t.note = ...``): torch's
        ``_rebuild_from_type_v2(_rebuild_tensor_v2, torch.Tensor, args, state)``; a Buffer is torch's plain tensor
        marked ``_is_buffer``."""
        state = user_attributes(obj)
        if buffer:
            state["_is_buffer"] = True
        plain = obj.detach()
        plain.requires_grad_(bool(obj.requires_grad) and obj.dtype.is_floating_point)
        func, args = self.reducer_override(plain)
        return (_REBUILD_FROM_TYPE, (func, _TENSOR, args, state))

    def _reduce_quantized(self, q: QuantizedTensor) -> tuple:
        ints = q.int_repr().numpy()
        ref, offset, strides = self._storage_of(ints)
        ref.kind = TorchName("torch", _QUANTIZED_STORAGE[q.dtype.name])
        if q.qscheme() is per_tensor_affine:
            quantizer: tuple = (_QSCHEMES["per_tensor_affine"], float(q.q_scale()), int(q.q_zero_point()))
        else:
            quantizer = (_QSCHEMES["per_channel_affine"], q.q_per_channel_scales(), q.q_per_channel_zero_points(),
                         int(q.q_per_channel_axis()))
        return (_REBUILD_QTENSOR, (ref, offset, tuple(ints.shape), strides, quantizer, False,
                                   collections.OrderedDict()))

    def save_global(self, obj: Any, name: str | None = None) -> None:
        if isinstance(obj, TorchName):
            module, name = obj.module, obj.name
        elif isinstance(obj, dtype):
            module, name = "torch", obj.name if obj.name != "bool" else "bool"
        elif isinstance(obj, qscheme):
            module, name = "torch", obj.name
        else:
            return super().save_global(obj, name)
        self.write(pickle.GLOBAL + f"{module}\n{name}\n".encode("utf-8"))
        self.memoize(obj)


class _Rebuilt:
    """A nested reduce (the plain tensor inside a Parameter)."""

    __slots__ = ("reduce",)

    def __init__(self, reduce: tuple) -> None:
        self.reduce = reduce


def _padding(position: int, name: str, zip64: bool) -> bytes:
    """An extra field that makes the member's data start at a multiple of ALIGNMENT."""
    start = position + 30 + len(name.encode("utf-8")) + (20 if zip64 else 0) + 4
    pad = -start % ALIGNMENT
    return b"FB" + struct.pack("<H", pad) + b"Z" * pad


def _write_member(archive: zipfile.ZipFile, out: BinaryIO, name: str, payload: Any) -> None:
    view = memoryview(payload).cast("B") if not isinstance(payload, bytes) else memoryview(payload)
    info = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
    info.compress_type = zipfile.ZIP_STORED
    info.file_size = view.nbytes
    zip64 = view.nbytes > 0x7FFFFFFF  # zipfile's own threshold (ZIP64_LIMIT * 1.05 not used when forced)
    info.extra = _padding(out.tell(), name, zip64)
    with archive.open(info, "w", force_zip64=zip64) as member:
        for begin in range(0, view.nbytes, 1 << 26):
            member.write(view[begin:begin + (1 << 26)])


def write(f: BinaryIO, obj: Any) -> None:
    """Write ``obj`` to the binary file ``f`` in PyTorch's zip format."""
    text = io.BytesIO()
    pickler = _Pickler(text)
    pickler.dump(obj)
    out = f if _seekable(f) else io.BytesIO()
    prefix = "archive/"
    with zipfile.ZipFile(out, "w", compression=zipfile.ZIP_STORED, allowZip64=True) as archive:
        _write_member(archive, out, prefix + "data.pkl", text.getvalue())
        _write_member(archive, out, prefix + ".format_version", b"1")
        _write_member(archive, out, prefix + ".storage_alignment", str(ALIGNMENT).encode())
        _write_member(archive, out, prefix + "byteorder", b"little")
        for ref in sorted(pickler.storages.values(), key=lambda r: int(r.key)):
            array = ref.array if ref.array.flags.c_contiguous else np.ascontiguousarray(ref.array)
            if ref.untyped:  # (a memoryview cannot cast ml_dtypes' float8 buffers)
                array = array.view(np.uint8)
            _write_member(archive, out, f"{prefix}data/{ref.key}", array.reshape(-1).view(np.uint8))
        _write_member(archive, out, prefix + "version", b"3\n")
        _write_member(archive, out, prefix + ".data/serialization_id", str(secrets.randbits(128)).zfill(40).encode())
    if out is not f:
        f.write(out.getvalue())


def _seekable(f: Any) -> bool:
    try:
        return bool(f.seekable()) and f.tell() >= 0
    except (AttributeError, OSError, ValueError):
        return False
