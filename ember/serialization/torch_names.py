"""The globals a PyTorch checkpoint names, and what ember builds for each.

A ``torch.save`` file's pickle names functions and classes by module path (``torch._utils
_rebuild_tensor_v2``, ``torch FloatStorage``, ``collections OrderedDict``...). Loading maps each
allowed name to ember's own implementation here (so no torch is needed and nothing is imported by
name); writing uses :class:`TorchName` stand-ins so ember's files name exactly what torch expects.
Every rebuild function checks its arguments (types, non-negative sizes, strides and offsets within
the storage) before making a view.

Example:
    >>> STORAGE_DTYPES["FloatStorage"]
    'float32'
"""
from __future__ import annotations

import collections
import math
import re
import threading
from typing import Any

import numpy as np

from ember.serialization import torch_more_rebuilds as more
from ember.serialization.errors import CheckpointError
from ember.serialization.torch_more_rebuilds import _int, _int_tuple
from ember import dtypes
from ember.creation import _wrap_array
from ember.device import device, to_device
from ember.tensor import Size, Tensor
from ember.ao import qdtypes
from ember.ao.qdtypes import per_channel_affine, per_tensor_affine, qint8, qint32, quint8
from ember.ao.qtensor import from_ints, from_ints_per_channel
from ember.sparse.construct import sparse_coo_tensor
from ember.sparse._index import is_sorted_unique, linear_keys
from ember.surface.constants import jagged, sparse_coo, sparse_csc, sparse_csr, strided

# torch storage class name -> ember dtype name
STORAGE_DTYPES = {"FloatStorage": "float32", "DoubleStorage": "float64", "HalfStorage": "float16",
                  "BFloat16Storage": "bfloat16", "LongStorage": "int64", "IntStorage": "int32",
                  "ShortStorage": "int16", "CharStorage": "int8", "ByteStorage": "uint8", "BoolStorage": "bool",
                  "ComplexFloatStorage": "complex64", "ComplexDoubleStorage": "complex128"}
DTYPE_STORAGES = {v: k for k, v in STORAGE_DTYPES.items()}
# torch saves float8 tensors (and any dtype without a typed storage class) on an UntypedStorage of bytes, rebuilt by
# _rebuild_tensor_v3 with the dtype as an argument
UNTYPED_STORAGE = "UntypedStorage"
STORAGE_DTYPES[UNTYPED_STORAGE] = "uint8"
# torch dtype attribute names -> ember dtype name
TORCH_DTYPES = {"float32": "float32", "float": "float32", "float64": "float64", "double": "float64",
                "float16": "float16", "half": "float16", "bfloat16": "bfloat16", "int64": "int64", "long": "int64",
                "int32": "int32", "int": "int32", "int16": "int16", "short": "int16", "int8": "int8",
                "uint8": "uint8", "bool": "bool", "complex64": "complex64", "cfloat": "complex64",
                "complex128": "complex128", "cdouble": "complex128", "float8_e4m3fn": "float8_e4m3fn",
                "float8_e5m2": "float8_e5m2", "float8_e4m3fnuz": "float8_e4m3fnuz", "float8_e5m2fnuz": "float8_e5m2fnuz",
                "uint16": "uint16", "uint32": "uint32", "uint64": "uint64"}
# dtypes torch writes on an UntypedStorage of bytes with _rebuild_tensor_v3 (they have no typed storage class)
UNTYPED_DTYPES = frozenset(name for name in TORCH_DTYPES.values() if name not in STORAGE_DTYPES.values())


# PyTorch's storages of quantized tensors (their integers) -> ember dtype name; kept out of DTYPE_STORAGES, so plain
# uint8/int8/int32 tensors are still written as Byte/Char/IntStorage
QUANTIZED_STORAGES = {"QUInt8Storage": "uint8", "QInt8Storage": "int8", "QInt32Storage": "int32"}


class StorageType:
    """What ``torch FloatStorage`` (etc.) unpickles to: only its dtype matters."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.dtype_name = STORAGE_DTYPES.get(name) or QUANTIZED_STORAGES[name]

    def numpy_dtype(self, where: Any) -> np.dtype:
        dt = dtypes.to_dtype(self.dtype_name)
        if dt.np is None:
            raise CheckpointError(where, f"storage type torch.{self.name}", "holds bfloat16 data; install ml_dtypes "
                                  "to read it (pip install 'ember[bf16]')")
        return dt.np

    def __repr__(self) -> str:
        return f"torch.{self.name}"


class Storage:
    """A loaded storage: a 1-D NumPy array (``None`` during the legacy format's first pass); see :func:`own`."""

    __slots__ = ("key", "array", "dtype", "location")

    def __init__(self, key: str, array: np.ndarray | None, dtype: np.dtype, location: str = "cpu") -> None:
        self.key, self.array, self.dtype = key, array, dtype
        self.location = check_location(location, key)


def own(array: np.ndarray) -> np.ndarray:
    """``array`` (a slice of the file's bytes) as the root of its own views: ``as_strided`` does not chain ``.base``
    to the file buffer, so a loaded tensor's ``untyped_storage()`` is its storage's bytes, not the whole file."""
    if array.dtype in dtypes.FLOAT8_NP:  # ('<f1' has no array interface: cut the bytes, then view them)
        return own(array.view(np.uint8)).view(array.dtype)
    return np.lib.stride_tricks.as_strided(array, writeable=array.flags.writeable)


_LOCATION = re.compile(r"(cpu|cuda(:[0-9]{1,3})?)")


def check_location(location: Any, key: str) -> str:
    """A storage's saved device (``cpu``, ``cuda``, ``cuda:0`` ...): read from the file, so checked."""
    if not isinstance(location, str) or not _LOCATION.fullmatch(location):
        raise CheckpointError("pickle", f"storage {key!r}", f"has location {location!r:.40}; expected 'cpu' or 'cuda[:N]'")
    return location


class Placement(threading.local):
    """``map_location`` of the load in progress in this thread: rebuilt tensors go where it says."""

    map_location: Any = None


PLACEMENT = Placement()


def rebuild_tensor(storage: Any, storage_offset: Any, size: Any, stride: Any, requires_grad: Any = False,
                   backward_hooks: Any = None, metadata: Any = None) -> Any:
    """``torch._utils._rebuild_tensor_v2``: an ember tensor viewing ``storage`` (no copy)."""

    if not isinstance(storage, Storage):
        raise CheckpointError("pickle", "_rebuild_tensor_v2", f"got {type(storage).__name__} instead of a storage")
    offset = _int(storage_offset, "storage_offset")
    size = _int_tuple(size, "tensor size")
    stride = _int_tuple(stride, "tensor stride")
    if len(size) != len(stride):
        raise CheckpointError("pickle", f"tensor in storage {storage.key!r}", f"size {size} and stride {stride} differ "
                              "in length")
    if offset < 0 or any(s < 0 for s in size) or any(s < 0 for s in stride):
        raise CheckpointError("pickle", f"tensor in storage {storage.key!r}", f"negative offset, size or stride "
                              f"(offset {offset}, size {size}, stride {stride})")
    if not isinstance(requires_grad, bool):
        raise CheckpointError("pickle", "requires_grad", f"is {requires_grad!r:.40}, expected a bool")
    if storage.array is None:  # first pass over a legacy file: only the storages' dtypes are being collected
        return None
    array = storage.array
    if math.prod(size) == 0:
        data = np.empty(size, dtype=array.dtype)
    else:
        last = offset + sum((n - 1) * s for n, s in zip(size, stride))
        if last >= array.shape[0]:
            raise CheckpointError("pickle", f"tensor in storage {storage.key!r}", f"size {size}, stride {stride} and "
                                  f"offset {offset} reach element {last}, past the storage's {array.shape[0]} elements")
        item = array.dtype.itemsize
        raw = array.view(np.uint8) if array.dtype in dtypes.FLOAT8_NP else array  # ('<f1' has no array interface)
        # a view whose .base is the storage's array, so tensors on one storage report one untyped_storage()
        data = np.ndarray(size, dtype=raw.dtype, buffer=raw, offset=offset * item, strides=tuple(s * item for s in stride))
        if raw is not array:
            data = data.view(array.dtype)
    if metadata:  # torch's lazy conjugate/negative bits ({'conj': True}): ember applies them (a copy)
        data = more.apply_tensor_metadata(data, metadata, storage.key)
    tensor = _wrap_array(data, to_device("cpu"))
    if storage.location != "cpu" or PLACEMENT.map_location is not None:  # saved on a GPU, or map_location
        from ember.serialization.safetensors_format import place

        tensor = place(tensor, storage.location, PLACEMENT.map_location)
    if requires_grad:
        if not tensor.dtype.is_floating_point:
            raise CheckpointError("pickle", f"tensor in storage {storage.key!r}", f"requires grad but has dtype "
                                  f"{tensor.dtype}")
        tensor.requires_grad_(True)
    return tensor


def rebuild_tensor_v3(storage: Any, storage_offset: Any, size: Any, stride: Any, requires_grad: Any = False,
                      backward_hooks: Any = None, dtype: Any = None, metadata: Any = None) -> Any:
    """``torch._utils._rebuild_tensor_v3``: a tensor of ``dtype`` on an UntypedStorage of bytes (torch's form for
    float8 tensors); offset, size and stride count elements of ``dtype``."""
    if not isinstance(dtype, dtypes.dtype):
        raise CheckpointError("pickle", "_rebuild_tensor_v3", f"got dtype {dtype!r:.60}, expected a torch dtype")
    if not isinstance(storage, Storage):
        raise CheckpointError("pickle", "_rebuild_tensor_v3", f"got {type(storage).__name__} instead of a storage")
    if storage.array is not None and storage.array.dtype != dtype.np:
        raw = storage.array
        if raw.dtype != np.uint8 or raw.size % dtype.itemsize:
            raise CheckpointError("pickle", f"tensor in storage {storage.key!r}", f"a {raw.dtype} storage of {raw.size} "
                                  f"elements cannot hold {dtype} elements")
        storage = Storage(storage.key, raw.view(dtype.np), dtype.np, storage.location)
    return rebuild_tensor(storage, storage_offset, size, stride, requires_grad, backward_hooks, metadata)


def rebuild_tensor_v1(storage: Any, storage_offset: Any, size: Any, stride: Any) -> Any:
    """``torch._utils._rebuild_tensor`` (older files)."""
    return rebuild_tensor(storage, storage_offset, size, stride)


def rebuild_parameter(data: Any, requires_grad: Any, backward_hooks: Any = None, state: Any = None) -> Any:
    """``torch._utils._rebuild_parameter`` / ``_rebuild_parameter_with_state``: an ember Parameter."""
    from ember.nn import Parameter

    if data is None:  # legacy first pass
        return None
    if not isinstance(data, Tensor) or not isinstance(requires_grad, bool):
        raise CheckpointError("pickle", "_rebuild_parameter", "expects a tensor and a bool")
    param = Parameter(data.detach(), requires_grad=requires_grad)
    if isinstance(state, dict):
        for key, value in state.items():
            if not isinstance(key, str) or key.startswith("_"):
                raise CheckpointError("pickle", "_rebuild_parameter_with_state", f"refuses to set attribute {key!r:.40}")
            setattr(param, key, value)
    return param


def rebuild_parameter_with_state(data: Any, requires_grad: Any, backward_hooks: Any, state: Any) -> Any:
    return rebuild_parameter(data, requires_grad, backward_hooks, state)


def rebuild_sparse_tensor(layout: Any, data: Any) -> Any:
    """``torch._utils._rebuild_sparse_tensor``: a sparse COO tensor from (indices, values, size[, is_coalesced]).
    The indices are checked against the size; a coalesced flag is kept only when the entries really are
    sorted and distinct (a file cannot make ``indices()`` hand out a wrong order)."""
    if layout is sparse_csr or layout is sparse_csc:
        return more.rebuild_compressed(layout, data)
    if layout is not sparse_coo:
        raise CheckpointError("pickle", "_rebuild_sparse_tensor", f"layout {layout!r:.40} is not supported by ember "
                              "(sparse_coo, sparse_csr, sparse_csc)")
    if not isinstance(data, tuple) or len(data) not in (3, 4):
        raise CheckpointError("pickle", "_rebuild_sparse_tensor", "expects (indices, values, size[, is_coalesced])")
    indices, values, size = data[:3]
    if indices is None or values is None:  # first pass over a legacy file
        return None
    claimed = data[3] if len(data) == 4 else None
    if not isinstance(indices, Tensor) or not isinstance(values, Tensor) or indices.dtype is not dtypes.int64:
        raise CheckpointError("pickle", "_rebuild_sparse_tensor", "expects an int64 indices tensor and a values tensor")
    if claimed is not None and not isinstance(claimed, bool):
        raise CheckpointError("pickle", "_rebuild_sparse_tensor", f"is_coalesced is {claimed!r:.40}, expected a bool")
    try:
        out = sparse_coo_tensor(indices, values, _int_tuple(size, "sparse size"), check_invariants=True)
    except RuntimeError as error:
        raise CheckpointError("pickle", "_rebuild_sparse_tensor", str(error)) from None
    if claimed and out._nnz() > 1:
        keys = linear_keys(out.device.xp, out._indices()._data, out.shape[:out.sparse_dim()])
        claimed = is_sorted_unique(out.device.xp, keys)
    out._sp_coalesced = bool(claimed) or out._nnz() <= 1
    return out


def get_layout(name: Any) -> Any:
    """``torch.serialization._get_layout('torch.sparse_coo')``: ember's layout object."""
    layouts = {"torch.sparse_coo": sparse_coo, "torch.strided": strided, "torch.sparse_csr": sparse_csr,
               "torch.sparse_csc": sparse_csc, "torch.jagged": jagged}
    if name not in layouts:
        raise CheckpointError("pickle", "_get_layout", f"layout {name!r:.40} is not supported by ember (sparse_coo, "
                              "sparse_csr, sparse_csc; convert block-sparse tensors with .to_sparse_csr() in torch)")
    return layouts[name]


def rebuild_qtensor(storage: Any, storage_offset: Any, size: Any, stride: Any, quantizer_params: Any,
                    requires_grad: Any = False, backward_hooks: Any = None) -> Any:
    """``torch._utils._rebuild_qtensor``: a quantized tensor from its integers and checked quantizer."""
    ints = rebuild_tensor(storage, storage_offset, size, stride, False)
    if ints is None:  # legacy format's first pass
        return None
    what = f"quantized tensor in storage {storage.key!r}"
    if requires_grad is not False:
        raise CheckpointError("pickle", what, "requires_grad must be False for a quantized tensor")
    if not isinstance(quantizer_params, tuple) or not quantizer_params:
        raise CheckpointError("pickle", what, f"quantizer {quantizer_params!r:.60} is not a tuple")
    qdtype = {"uint8": quint8, "int8": qint8, "int32": qint32}.get(ints.dtype.name)
    if qdtype is None:
        raise CheckpointError("pickle", what, f"integers of dtype {ints.dtype.name} are no quantized storage")
    scheme, *params = quantizer_params
    if scheme is per_tensor_affine and len(params) == 2:
        scale, zero_point = params
        if not isinstance(scale, float) or not math.isfinite(scale) or isinstance(zero_point, bool) \
                or not isinstance(zero_point, int) or not qdtype.qmin <= zero_point <= qdtype.qmax:
            raise CheckpointError("pickle", what, f"per-tensor quantizer (scale {scale!r:.30}, zero_point "
                                  f"{zero_point!r:.30}) is not a finite float and an integer in {qdtype}'s range")
        return from_ints(ints.numpy(), qdtype, scale, zero_point)
    if scheme is per_channel_affine and len(params) == 3:
        scales, zero_points, axis = params
        axis = _int(axis, "quantization axis")
        if not (isinstance(scales, Tensor) and isinstance(zero_points, Tensor)) or axis >= max(len(ints.shape), 1) \
                or scales.ndim != 1 or scales.shape != zero_points.shape \
                or (len(ints.shape) and scales.shape[0] != ints.shape[axis]):
            raise CheckpointError("pickle", what, f"per-channel quantizer (axis {axis}) does not match the shape "
                                  f"{tuple(ints.shape)}")
        scale_values = np.asarray(scales.numpy(), np.float64)
        zp_values = np.asarray(zero_points.numpy()).astype(np.int64)
        if not np.all(np.isfinite(scale_values)) or np.any(zp_values < qdtype.qmin) or np.any(zp_values > qdtype.qmax):
            raise CheckpointError("pickle", what, "per-channel scales must be finite and zero points in the dtype's "
                                  "range")
        return from_ints_per_channel(ints.numpy(), qdtype, scale_values, zp_values, axis)
    raise CheckpointError("pickle", what, f"quantization scheme {scheme!r:.40} with {len(params)} parameters is not "
                          "supported (per_tensor_affine, per_channel_affine)")


def make_size(dims: Any = ()) -> Any:
    """``torch.Size((2, 3))``."""
    return Size(_int_tuple(dims, "torch.Size"))


def make_device(kind: Any, index: Any = None) -> Any:
    """``torch.device('cpu')`` / ``torch.device('cuda', 0)``."""
    if not isinstance(kind, str) or len(kind) > 32 or (index is not None and not isinstance(index, int)):
        raise CheckpointError("pickle", "torch.device", f"bad arguments {kind!r:.40}, {index!r:.20}")
    return device(kind, index)


def codecs_encode(text: Any, encoding: Any = "utf-8", errors: str = "strict") -> bytes:
    """``_codecs.encode``, which protocol-2 pickles use for bytes: only ``(str, 'latin1')``."""
    if not isinstance(text, str) or encoding not in ("latin1", "latin-1") or errors != "strict":
        raise CheckpointError("pickle", "_codecs.encode", "only encodes a str with 'latin1' (pickled bytes)")
    return text.encode("latin1")


def ordered_dict(*args: Any) -> collections.OrderedDict:
    """``collections.OrderedDict`` (from pairs, as pickles rebuild it)."""
    return collections.OrderedDict(*args)


def _allowed() -> dict[str, Any]:
    table: dict[str, Any] = {
        "torch._utils._rebuild_tensor_v2": rebuild_tensor,
        "torch._utils._rebuild_tensor_v3": rebuild_tensor_v3,
        "torch._utils._rebuild_tensor": rebuild_tensor_v1,
        "torch._utils._rebuild_parameter": rebuild_parameter,
        "torch._utils._rebuild_parameter_with_state": rebuild_parameter_with_state,
        "torch.Size": make_size, "torch.device": make_device,
        "torch._utils._rebuild_sparse_tensor": rebuild_sparse_tensor,
        "torch._utils._rebuild_qtensor": rebuild_qtensor,
        "torch.per_tensor_affine": per_tensor_affine, "torch.per_channel_affine": per_channel_affine,
        "torch.qint8": qint8, "torch.quint8": quint8, "torch.qint32": qint32, "torch.serialization._get_layout": get_layout,
        "torch.sparse_coo": sparse_coo,
        "collections.OrderedDict": collections.OrderedDict, "collections.Counter": collections.Counter,
        "builtins.bytearray": more.make_bytearray,
        "_codecs.encode": codecs_encode,
        "builtins.set": set, "builtins.frozenset": frozenset, "builtins.slice": slice, "builtins.complex": complex,
        "torch.nn.parameter.Parameter": None,  # resolved below (import cycle)
        "torch.Tensor": more.TENSOR_TYPE, "torch._tensor._rebuild_from_type_v2": more.rebuild_from_type_v2,
        "torch._utils._rebuild_meta_tensor_no_storage": more.rebuild_meta_tensor,
    }
    for name in ("per_tensor_symmetric", "per_channel_symmetric", "per_channel_affine_float_qparams"):
        table[f"torch.{name}"] = getattr(qdtypes, name)
    more.TENSOR_REBUILDS.update(v for k, v in table.items() if k.startswith("torch._utils._rebuild_"))
    for name in (*STORAGE_DTYPES, *QUANTIZED_STORAGES):
        table[f"torch.{name}"] = StorageType(name)
    table["torch.storage.UntypedStorage"] = StorageType(UNTYPED_STORAGE)
    for name, ember_name in TORCH_DTYPES.items():
        table[f"torch.{name}"] = dtypes.to_dtype(ember_name)
    from ember.nn import Buffer, Parameter

    table["torch.nn.parameter.Parameter"] = Parameter
    more.NN_CLASSES.update(Parameter=Parameter, Buffer=Buffer)
    return table


_TABLE: dict[str, Any] | None = None


def allowed() -> dict[str, Any]:
    """Global name -> the ember object built for it (the weights-only allow-list)."""
    global _TABLE
    if _TABLE is None:
        _TABLE = _allowed()
    return _TABLE


# Names refused with a specific reason instead of "not allowed".
UNSUPPORTED = {
    "torch._utils._rebuild_wrapper_subclass": "tensor subclasses are not supported by ember",
    "torch._utils._rebuild_nested_tensor": "nested tensors are not supported by ember's loader; save "
                                           "t.unbind() (a list of tensors) instead",
    "torch._utils._rebuild_device_tensor_from_numpy": "tensors of devices without storages (XLA, ...) are not "
                                                      "supported; move them to the CPU before saving",
    "torch._utils._rebuild_device_tensor_from_cpu_tensor": "tensors of devices without storages (XLA, ...) are not "
                                                           "supported; move them to the CPU before saving",
}


UNSUPPORTED.update(more.missing_dtype_reasons())


class TorchName:
    """A stand-in that pickles as the global ``module name`` (so files name torch's objects)."""

    _made: dict[str, "TorchName"] = {}

    def __new__(cls, module: str, name: str) -> "TorchName":
        key = f"{module} {name}"
        if key not in cls._made:
            obj = super().__new__(cls)
            obj.module, obj.name = module, name
            cls._made[key] = obj
        return cls._made[key]

    def __repr__(self) -> str:
        return f"{self.module}.{self.name}"

    def __call__(self, *args: Any) -> Any:  # pickle requires reducers to be callable; never called
        raise TypeError(f"{self!r} is a name written into PyTorch files, not a function")
