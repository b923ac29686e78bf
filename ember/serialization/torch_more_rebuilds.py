"""The rarer rebuild functions torch 2.13's ``weights_only`` loader allows, and the dtypes ember lacks.

* ``torch._tensor._rebuild_from_type_v2(func, type, args, state)``: a tensor with Python attributes, such as the
  plain tensor torch makes of an ``nn.Buffer`` (``{'persistent': True, '_is_buffer': True}``) or ``t.note = 1``;
* ``torch._utils._rebuild_meta_tensor_no_storage(dtype, size, stride, requires_grad)``: a meta tensor;
* the CSR/CSC layouts of ``torch._utils._rebuild_sparse_tensor`` (compressed, plain indices, values, size).

Each checks what it is given (only ember's own rebuild functions may be called, attribute names may not shadow the
tensor's own attributes, sizes are bounded), since every argument comes from the file. Torch dtypes ember has no
counterpart for are refused by name with a reason instead of "not allowed" (:data:`MISSING_DTYPES`).

Example:
    >>> from ember.serialization.torch_names import rebuild_tensor, Storage
    >>> import numpy as np
    >>> s = Storage("0", np.arange(3, dtype=np.float32), np.dtype(np.float32))
    >>> t = rebuild_from_type_v2(rebuild_tensor, _tensor_class(), (s, 0, (3,), (1,)), {"note": "x"})
    >>> t.note, t.tolist()
    ('x', [0.0, 1.0, 2.0])
"""
from __future__ import annotations

import keyword
import sys
from typing import Any

from ember import dtypes
from ember.serialization.errors import CheckpointError
from ember.sparse.compressed import sparse_compressed_tensor
from ember.tensor import Tensor

# Filled by torch_names when it builds the allow-list (ember.nn imports this package, so not imported here):
TENSOR_REBUILDS: set = set()  # ember's rebuild functions for torch's _rebuild_* names
NN_CLASSES: dict = {}  # "Parameter", "Buffer" -> ember.nn's classes

# torch 2.13 dtypes with no ember counterpart (sub-byte, packed, complex32, e8m0): refused with this reason
MISSING_DTYPES: tuple = ("complex32", "float4_e2m1fn_x2", "float8_e8m0fnu", "quint4x2", "quint2x4", "bits1x8", "bits2x4",
                  "bits4x2", "bits8", "bits16", *(f"uint{n}" for n in range(1, 8)), *(f"int{n}" for n in range(1, 8)))


def missing_dtype_reasons() -> dict[str, str]:
    return {f"torch.{name}": f"ember has no dtype torch.{name}; convert such tensors in torch before saving (for "
            "example .to(torch.float32) or .view(torch.uint8))" for name in MISSING_DTYPES}


def _int(value: Any, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise CheckpointError("pickle", what, f"is {value!r:.60}, expected an integer")
    return value


def _int_tuple(value: Any, what: str) -> tuple:
    if not isinstance(value, (tuple, list)) or len(value) > 64:
        raise CheckpointError("pickle", what, f"is {value!r:.60}, expected a tuple of at most 64 integers")
    return tuple(_int(v, what) for v in value)


def make_bytearray(data: Any = b"", *rest: Any) -> bytearray:
    """``builtins.bytearray`` as pickles rebuild it (from bytes, or a str and its encoding): never from a size, so a
    file cannot ask for a huge zero-filled buffer."""
    if not isinstance(data, (bytes, bytearray, str)) or len(rest) > 2 or (rest and not isinstance(data, str)):
        raise CheckpointError("pickle", "builtins.bytearray", "is rebuilt only from bytes or (str, encoding)")
    return bytearray(data, *rest) if rest else bytearray(data)


class TensorType:
    """What the global ``torch.Tensor`` unpickles to: only a type argument of ``_rebuild_from_type_v2``. It is not
    the class itself, so a crafted ``REDUCE`` cannot call ``Tensor(10**12)`` to allocate memory."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise CheckpointError("pickle", "torch.Tensor", "is only allowed as the type of _rebuild_from_type_v2, not "
                              "called")

    def __repr__(self) -> str:
        return "torch.Tensor"


TENSOR_TYPE = TensorType()


def _tensor_class() -> Any:
    return TENSOR_TYPE


def rebuild_from_type_v2(func: Any, new_type: Any, args: Any, state: Any) -> Any:
    """``torch._tensor._rebuild_from_type_v2``: ``func(*args)`` (one of ember's tensor rebuilds) with the saved
    Python attributes set; torch's buffer marker makes an ``ember.nn.Buffer``."""
    Parameter, Buffer = NN_CLASSES["Parameter"], NN_CLASSES["Buffer"]
    if func not in TENSOR_REBUILDS:
        raise CheckpointError("pickle", "_rebuild_from_type_v2", f"calls {func!r:.60}, which is not a tensor rebuild "
                              "function")
    if new_type is not TENSOR_TYPE and new_type is not Parameter:
        raise CheckpointError("pickle", "_rebuild_from_type_v2", f"type {new_type!r:.60} is not torch.Tensor or "
                              "torch.nn.Parameter (tensor subclasses are not supported by ember)")
    if not isinstance(args, tuple):
        raise CheckpointError("pickle", "_rebuild_from_type_v2", "arguments are not a tuple")
    tensor = func(*args)
    if tensor is None:  # the legacy format's first pass
        return None
    if not isinstance(tensor, Tensor):
        raise CheckpointError("pickle", "_rebuild_from_type_v2", "the rebuild did not give a tensor")
    if new_type is Parameter and not isinstance(tensor, Parameter):
        tensor = Parameter(tensor.detach(), requires_grad=tensor.requires_grad)
    attributes = _attributes(state)
    if attributes.pop("_is_buffer", False) is True and not isinstance(tensor, Parameter):
        persistent = attributes.pop("persistent", True)
        tensor = Buffer(tensor.detach(), persistent=bool(persistent))
    for key, value in attributes.items():
        setattr(tensor, key, value)
    return tensor


def _attributes(state: Any) -> dict:
    """torch's ``_set_obj_state`` input: a dict, or (dict, slots dict); names checked before anything is set."""
    if isinstance(state, tuple):
        if len(state) != 2:
            raise CheckpointError("pickle", "_rebuild_from_type_v2", "state tuple must be (dict, slots)")
        merged: dict = {}
        for part in state:
            if part is not None and not isinstance(part, dict):
                raise CheckpointError("pickle", "_rebuild_from_type_v2", "state parts must be dicts")
            merged.update(part or {})
        state = merged
    if state is None:
        return {}
    if not isinstance(state, dict):
        raise CheckpointError("pickle", "_rebuild_from_type_v2", f"state is a {type(state).__name__}, not a dict")
    for key in state:
        if not isinstance(key, str) or not key.isidentifier() or keyword.iskeyword(key) or key.startswith("__") \
                or (key not in ("_is_buffer", "persistent") and hasattr(Tensor, key)):
            raise CheckpointError("pickle", "_rebuild_from_type_v2", f"refuses to set attribute {key!r:.40} (not a "
                                  "plain name, or one of the tensor's own attributes)")
    return dict(state)


def apply_tensor_metadata(data: Any, metadata: Any, key: str) -> Any:
    """``_rebuild_tensor_v2``'s last argument, torch's ``_get_tensor_metadata``: ``{'conj': True}`` (a lazily
    conjugated view, ``x.conj()``) and ``{'neg': True}`` (its imaginary part): ember has no such bits, so the values are
    resolved here, in a copy (as ``resolve_conj()`` would)."""
    if not isinstance(metadata, dict) or not all(isinstance(k, str) and isinstance(v, bool) for k, v in
                                                  metadata.items()):
        raise CheckpointError("pickle", f"tensor in storage {key!r}", f"metadata {metadata!r:.60} is not a dict of "
                              "flags")
    unknown = [k for k, v in metadata.items() if v and k not in ("conj", "neg")]
    if unknown:
        raise CheckpointError("pickle", f"tensor in storage {key!r}", f"has metadata flags {unknown} ember does not "
                              "know (it knows conj and neg)")
    if metadata.get("conj"):
        data = data.conj()
    if metadata.get("neg"):
        data = -data
    return data


def rebuild_meta_tensor(dtype: Any, size: Any, stride: Any, requires_grad: Any = False) -> Any:
    """``torch._utils._rebuild_meta_tensor_no_storage``: a meta tensor (shape and dtype, no data)."""
    if not isinstance(dtype, dtypes.dtype) or not isinstance(requires_grad, bool):
        raise CheckpointError("pickle", "_rebuild_meta_tensor_no_storage", "expects a dtype, sizes, strides and a bool")
    size, stride = _int_tuple(size, "meta tensor size"), _int_tuple(stride, "meta tensor stride")
    if len(size) != len(stride) or any(v < 0 for v in size + stride):
        raise CheckpointError("pickle", "_rebuild_meta_tensor_no_storage", f"size {size} and stride {stride} do not "
                              "match or are negative")
    # ember.empty_strided's module imports ember.nn, which imports this package: reached through the loaded package
    return sys.modules["ember"].empty_strided(size, stride, dtype=dtype, device="meta", requires_grad=requires_grad)


def rebuild_compressed(layout: Any, data: Any) -> Any:
    """The CSR/CSC case of ``_rebuild_sparse_tensor``: invariants are always checked (torch validates too)."""
    if not isinstance(data, tuple) or len(data) != 4:
        raise CheckpointError("pickle", "_rebuild_sparse_tensor", f"{layout} expects (compressed indices, plain "
                              "indices, values, size)")
    compressed, plain, values, size = data
    if compressed is None or plain is None or values is None:  # first pass over a legacy file
        return None
    if not all(isinstance(t, Tensor) for t in (compressed, plain, values)) \
            or compressed.dtype not in (dtypes.int32, dtypes.int64):
        raise CheckpointError("pickle", "_rebuild_sparse_tensor", f"{layout} expects integer index tensors and a "
                              "values tensor")
    try:
        return sparse_compressed_tensor(compressed, plain, values, _int_tuple(size, "sparse size"), layout=layout,
                                        check_invariants=True)
    except (RuntimeError, NotImplementedError, ValueError, IndexError) as error:
        raise CheckpointError("pickle", "_rebuild_sparse_tensor", str(error)) from None
