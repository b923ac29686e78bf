"""``format="safetensors"``: nested data as a standard safetensors file plus a JSON structure.

The tensors are stored under their path names (``fc.weight``), readable by any safetensors reader;
everything else (numbers, strings, nesting, optimizer hyper-parameters) is JSON in the header's
``__metadata__["ember.structure"]`` (see :mod:`ember.serialization.structure`). Reading checks the
header like the safetensors library (:mod:`ember.serialization.safetensors_header`) and the
structure against its schema, so loading never runs code and never returns another tensor's bytes.

Example:
    >>> import ember, io
    >>> buffer = io.BytesIO()
    >>> write(buffer, {"w": ember.ones(2), "step": 3})
    >>> read(buffer.getvalue(), "<buffer>", None)
    {'w': tensor([1., 1.]), 'step': 3}
"""
from __future__ import annotations

import json
import re
import struct
from typing import Any, BinaryIO, Iterable

import numpy as np

from ember.serialization import structure
from ember.serialization.errors import CheckpointError
from ember.serialization.safetensors_header import parse_json, read_header
from ember.serialization.torch_names import own
from ember import dtypes
from ember.creation import _wrap_array
from ember.device import to_device
from ember.storage import untyped_storage

FORMAT = "ember/1"
STRUCTURE_KEY = "ember.structure"
# safetensors dtype codes <-> NumPy dtypes (little-endian). BF16 comes from ml_dtypes when installed.
_CODES = {"BOOL": "|b1", "U8": "|u1", "I8": "|i1", "I16": "<i2", "U16": "<u2", "I32": "<i4", "U32": "<u4",
          "I64": "<i8", "U64": "<u8", "F16": "<f2", "F32": "<f4", "F64": "<f8", "C64": "<c8"}
# codes of the dtypes NumPy gets from ml_dtypes -> ember's dtype name (safetensors.torch's names for torch's dtypes)
_ML_CODES = {"BF16": "bfloat16", "F8_E4M3": "float8_e4m3fn", "F8_E5M2": "float8_e5m2",
             "F8_E4M3FNUZ": "float8_e4m3fnuz", "F8_E5M2FNUZ": "float8_e5m2fnuz"}


def np_dtype(code: str, where: Any = "ember.load", what: str | None = None) -> np.dtype:
    if code in _ML_CODES:
        found = dtypes.to_dtype(_ML_CODES[code]).np
        if found is None:
            raise CheckpointError(where, what, f"holds {_ML_CODES[code]} data; install ml_dtypes to read it "
                                  "(pip install 'ember[bf16]')")
        return found
    return np.dtype(_CODES[code])


def code_of(dtype: np.dtype) -> str:
    for code, name in _ML_CODES.items():
        if dtype.name == name:
            return code
    for code, name in _CODES.items():
        if np.dtype(name) == dtype.newbyteorder("<") or np.dtype(name) == dtype:
            return code
    raise TypeError(f"ember.save: tensors of dtype {dtype} cannot be stored in safetensors; convert them first")


def serialize(obj: Any) -> tuple[bytes, list[np.ndarray]]:
    """The header bytes (length prefix included) and the tensor buffers to write after it, in order."""
    encoder = structure.Encoder()
    tree = encoder.encode(obj)
    return layout(encoder.arrays, {"format": FORMAT, STRUCTURE_KEY: json.dumps(tree, allow_nan=False)})


def layout(arrays: dict[str, np.ndarray], metadata: dict[str, str]) -> tuple[bytes, list[np.ndarray]]:
    """Header bytes and buffers of a plain safetensors file holding ``arrays`` and ``metadata``."""
    # Larger items first keeps every tensor aligned to its item size without padding (safetensors
    # forbids holes between tensors), so loading can view the bytes in place.
    order = sorted(arrays, key=lambda n: (-arrays[n].dtype.itemsize, n))
    header: dict[str, Any] = {}
    buffers: list[np.ndarray] = []
    offset = 0
    for name in order:
        array = arrays[name]
        code = code_of(array.dtype)
        if array.dtype.byteorder == ">":
            array = array.astype(array.dtype.newbyteorder("<"))
        if not array.flags.c_contiguous:
            array = array.copy(order="C")  # (np.ascontiguousarray would turn 0-d arrays into 1-d)
        header[name] = {"dtype": code, "shape": list(array.shape), "data_offsets": [offset, offset + array.nbytes]}
        offset += array.nbytes
        buffers.append(array)
    header["__metadata__"] = metadata
    text = json.dumps(header, separators=(",", ":")).encode("utf-8")
    text += b" " * (-len(text) % 8)  # pad with spaces so the data starts 8-byte aligned
    return struct.pack("<Q", len(text)) + text, buffers


def write_all(f: BinaryIO, head: bytes, buffers: Iterable[np.ndarray]) -> None:
    f.write(head)
    for array in buffers:
        if array.nbytes:
            f.write(memoryview(array.reshape(-1).view(np.uint8)))


def write(f: BinaryIO, obj: Any) -> None:
    head, buffers = serialize(obj)
    write_all(f, head, buffers)


def _check_format(metadata: dict, where: Any) -> None:
    fmt = metadata.get("format")
    match = re.fullmatch(r"ember/(\d+)", fmt) if isinstance(fmt, str) else None
    if match and int(match.group(1)) > int(FORMAT.split("/")[1]):
        raise CheckpointError(where, "__metadata__ format", f"is {fmt!r}, written by a newer ember; this ember reads "
                              f"{FORMAT!r}. Upgrade ember to read it.")
    if fmt is not None and fmt.startswith("ember") and not match:
        raise CheckpointError(where, "__metadata__ format", f"is {fmt!r}, not a format ember knows")


def read_arrays(data: Any, where: Any) -> tuple[dict[str, np.ndarray], dict[str, str]]:
    """The checked arrays (views of ``data`` where aligned) and metadata of a safetensors file."""
    entries, metadata, start = read_header(data, where)
    _check_format(metadata, where)
    raw: dict[str, np.ndarray] = {}
    for e in entries:
        dtype = np_dtype(e.dtype, where, f"tensor {e.name!r}")
        count = (e.end - e.begin) // dtype.itemsize
        array = np.frombuffer(data, dtype=dtype, count=count, offset=start + e.begin).reshape(e.shape)
        if (start + e.begin) % dtype.itemsize:
            array = array.copy()  # unaligned (written by another tool): copy for fast kernels
        elif array.base is not None:  # its own storage (untyped_storage() is this tensor's bytes, not the file)
            array = own(array)
        if dtype.byteorder not in "=|":
            array = array.astype(dtype.newbyteorder("="))
        raw[e.name] = array
    return raw, metadata


def read(data: Any, where: Any, map_location: Any) -> Any:
    """Load a checked safetensors file: its ember structure, or a dict ``name -> tensor``."""
    raw, metadata = read_arrays(data, where)
    if STRUCTURE_KEY not in metadata:
        return {name: place(_wrap_array(array, _cpu()), "cpu", map_location) for name, array in raw.items()}
    tree = parse_json(metadata[STRUCTURE_KEY].encode("utf-8"), where, f"__metadata__ {STRUCTURE_KEY}")
    structure.validate(tree, set(raw), where)
    refs: dict[str, dict] = {}
    structure.collect_refs(tree, refs)
    tensors = {}
    for name, ref in refs.items():
        tensor = place(_wrap_array(raw[name], _cpu()), ref.get("device", "cpu"), map_location)
        if ref.get("parameter"):
            tensor = _as_parameter(tensor, ref.get("requires_grad", True))
        elif ref.get("requires_grad"):
            if not tensor.dtype.is_floating_point:
                raise CheckpointError(where, f"tensor {name!r}", f"is marked requires_grad but has dtype {tensor.dtype}")
            tensor.requires_grad_(True)
        tensors[name] = tensor
    return structure.decode(tree, tensors, raw, where)


def _cpu() -> Any:
    return to_device("cpu")


def target_device(saved: str, map_location: Any) -> str:
    if map_location is None:
        return saved
    if isinstance(map_location, dict):
        return str(map_location.get(saved, saved))
    if callable(map_location):
        return "cpu"  # torch's ``lambda storage, loc: storage`` idiom: storages stay on the CPU
    return str(map_location)


def place(tensor: Any, saved: str, map_location: Any) -> Any:
    if callable(map_location) and not isinstance(map_location, (dict, str)):
        target = _called_target(tensor, saved, map_location)
    else:
        target = target_device(saved, map_location)
    if target == "cpu":
        return tensor
    try:
        return tensor.to(target)
    except Exception as error:
        raise RuntimeError(f"ember.load: cannot place a tensor saved on {saved} onto {target} ({error}); pass "
                           "map_location='cpu' to load it on the CPU") from None


def _called_target(tensor: Any, saved: str, map_location: Any) -> str:
    """torch calls a callable map_location with each storage (on the CPU) and its saved location, and keeps the
    storage it returns: ember calls it the same way and puts the tensor on the returned storage's device
    (``lambda storage, loc: storage`` keeps the CPU, ``storage.cuda(0)`` asks for the GPU)."""
    result = map_location(untyped_storage(tensor), saved)
    if result is None:
        return "cpu"
    device = getattr(result, "device", None)
    if device is None:
        raise RuntimeError(f"ember.load: map_location returned {type(result).__name__}, not a storage (write it as torch "
                        "does: lambda storage, loc: storage, or storage.cuda(0))")
    return str(device)


def _as_parameter(tensor: Any, requires_grad: bool) -> Any:
    from ember.nn import Parameter

    return Parameter(tensor, requires_grad=requires_grad)
