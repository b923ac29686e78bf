"""``ember.save`` / ``ember.load``: state dicts and other nested data, never pickled.

The file is a standard safetensors file: an 8-byte little-endian header length, a JSON header naming
each tensor's dtype, shape and byte range, then the raw little-endian bytes. Everything that is not a
tensor (numbers, strings, the nesting of dicts/lists/tuples, optimizer hyper-parameters) is stored as
JSON in the header's ``__metadata__`` under ``ember.structure``. So any safetensors reader can load
the tensors (named by their path, e.g. ``fc.weight``), and loading can never run code.

Writes to a path are atomic: a temporary file in the same folder, ``fsync``, then ``os.replace``,
so a crash leaves either the old file or the new one, never half of one.

Example:
    >>> import ember, io
    >>> buffer = io.BytesIO()
    >>> ember.save({"w": ember.ones(2), "step": 3, "betas": (0.9, 0.999)}, buffer)
    >>> _ = buffer.seek(0)
    >>> ember.load(buffer)
    {'w': tensor([1., 1.]), 'step': 3, 'betas': (0.9, 0.999)}
"""
from __future__ import annotations

import base64
import json
import math
import os
import struct
import tempfile
from pathlib import Path
from typing import Any, BinaryIO, Iterable

import numpy as np

_FORMAT = "ember/1"
_STRUCTURE_KEY = "ember.structure"
# safetensors dtype codes <-> NumPy dtypes (little-endian). BF16 comes from ml_dtypes when installed.
_CODES = {"BOOL": "|b1", "U8": "|u1", "I8": "|i1", "I16": "<i2", "U16": "<u2", "I32": "<i4", "U32": "<u4",
          "I64": "<i8", "U64": "<u8", "F16": "<f2", "F32": "<f4", "F64": "<f8"}


def _np_dtype(code: str) -> np.dtype:
    if code == "BF16":
        from ember import dtypes

        if dtypes.bfloat16.np is None:
            raise RuntimeError("ember.load: the file holds bfloat16 tensors; install ml_dtypes to read them "
                               "(pip install ml_dtypes)")
        return dtypes.bfloat16.np
    if code not in _CODES:
        raise ValueError(f"ember.load: unsupported safetensors dtype {code!r}; supported: {sorted(_CODES)} and BF16")
    return np.dtype(_CODES[code])


def _code(dtype: np.dtype) -> str:
    if dtype.name == "bfloat16":
        return "BF16"
    for code, name in _CODES.items():
        if np.dtype(name) == dtype.newbyteorder("<") or np.dtype(name) == dtype:
            return code
    raise TypeError(f"ember.save: tensors of dtype {dtype} cannot be stored in safetensors; convert them first")


class _Encoder:
    """Walks an object, pulling tensors/arrays out into named buffers and the rest into JSON values."""

    def __init__(self) -> None:
        self.arrays: dict[str, np.ndarray] = {}
        self.seen: dict[int, dict] = {}  # id(tensor) -> placeholder, so a shared tensor is stored once
        self._keep: list = []  # keep encoded objects alive so ids stay unique during the walk

    def _name(self, path: str) -> str:
        name = path or "tensor"
        k = 1
        while name in self.arrays:
            name = f"{path or 'tensor'}#{k}"
            k += 1
        return name

    def encode(self, obj: Any, path: str = "") -> Any:
        from ember.device import device as Device
        from ember.dtypes import dtype as Dtype
        from ember.tensor import Size, Tensor

        if obj is None or isinstance(obj, (bool, str)):
            return obj
        if isinstance(obj, int):
            return obj
        if isinstance(obj, float):
            return obj if math.isfinite(obj) else {"__float__": repr(obj)}
        if isinstance(obj, Tensor):
            if id(obj) in self.seen:
                return self.seen[id(obj)]
            name = self._name(path)
            self.arrays[name] = np.asarray(obj.detach().__array__())
            ref: dict = {"__tensor__": name}
            if obj.requires_grad:
                ref["requires_grad"] = True
            if type(obj).__name__ == "Parameter":
                ref["parameter"] = True
            if obj.device.type != "cpu":
                ref["device"] = str(obj.device)
            self.seen[id(obj)] = ref
            self._keep.append(obj)
            return ref
        if isinstance(obj, np.ndarray):
            if id(obj) in self.seen:
                return self.seen[id(obj)]
            if obj.dtype.kind in "OSUV":
                raise TypeError(f"ember.save: NumPy array at {path or '<root>'} has dtype {obj.dtype}, which "
                                "is not numeric; only numeric arrays can be saved without pickle")
            name = self._name(path)
            self.arrays[name] = obj
            self.seen[id(obj)] = ref = {"__ndarray__": name}
            self._keep.append(obj)
            return ref
        if isinstance(obj, np.generic):
            return self.encode(obj.item(), path)
        if isinstance(obj, Size):
            return {"__tuple__": list(obj)}
        if isinstance(obj, Dtype):
            return {"__dtype__": obj.name}
        if isinstance(obj, Device):
            return {"__device__": str(obj)}
        if isinstance(obj, bytes):
            return {"__bytes__": base64.b64encode(obj).decode("ascii")}
        if isinstance(obj, dict):
            child = (lambda k: f"{path}.{k}" if path else str(k))
            if all(isinstance(k, str) and not k.startswith("__") for k in obj):
                return {k: self.encode(v, child(k)) for k, v in obj.items()}
            return {"__dict__": [[self.encode(k), self.encode(v, child(k))] for k, v in obj.items()]}
        if isinstance(obj, (list, tuple)):
            items = [self.encode(v, f"{path}.{i}" if path else str(i)) for i, v in enumerate(obj)]
            return items if isinstance(obj, list) else {"__tuple__": items}
        raise TypeError(f"ember.save: cannot store an object of type {type(obj).__name__} at "
                        f"{path or '<root>'} without pickle. Supported: tensors, NumPy arrays, numbers, strings, "
                        "bytes, None, dtypes, devices, and dicts/lists/tuples of those. Convert it first (for "
                        "example save obj.state_dict() instead of obj).")


def _decode(value: Any, tensors: dict[str, Any], arrays: dict[str, np.ndarray]) -> Any:
    if isinstance(value, list):
        return [_decode(v, tensors, arrays) for v in value]
    if not isinstance(value, dict):
        return value
    if "__tensor__" in value:
        return tensors[value["__tensor__"]]
    if "__ndarray__" in value:
        return arrays[value["__ndarray__"]]
    if "__tuple__" in value:
        return tuple(_decode(v, tensors, arrays) for v in value["__tuple__"])
    if "__dict__" in value:
        return {_decode(k, tensors, arrays): _decode(v, tensors, arrays) for k, v in value["__dict__"]}
    if "__float__" in value:
        return float(value["__float__"])
    if "__bytes__" in value:
        return base64.b64decode(value["__bytes__"])
    if "__dtype__" in value:
        from ember.dtypes import to_dtype

        return to_dtype(value["__dtype__"])
    if "__device__" in value:
        from ember.device import device

        return device(value["__device__"])
    return {k: _decode(v, tensors, arrays) for k, v in value.items()}


def _serialize(obj: Any) -> tuple[bytes, list[np.ndarray]]:
    """The header bytes (length prefix included) and the tensor buffers to write after it, in order."""
    encoder = _Encoder()
    structure = encoder.encode(obj)
    # Larger items first keeps every tensor aligned to its item size without padding (safetensors
    # forbids holes between tensors), so loading can view the bytes in place.
    order = sorted(encoder.arrays, key=lambda n: (-encoder.arrays[n].dtype.itemsize, n))
    header: dict[str, Any] = {}
    buffers: list[np.ndarray] = []
    offset = 0
    for name in order:
        array = encoder.arrays[name]
        code = _code(array.dtype)
        if array.dtype.byteorder == ">":
            array = array.astype(array.dtype.newbyteorder("<"))
        if not array.flags.c_contiguous:
            array = array.copy(order="C")  # (np.ascontiguousarray would turn 0-d arrays into 1-d)
        header[name] = {"dtype": code, "shape": list(array.shape), "data_offsets": [offset, offset + array.nbytes]}
        offset += array.nbytes
        buffers.append(array)
    header["__metadata__"] = {"format": _FORMAT, _STRUCTURE_KEY: json.dumps(structure, allow_nan=False)}
    text = json.dumps(header, separators=(",", ":")).encode("utf-8")
    text += b" " * (-len(text) % 8)  # pad with spaces so the data starts 8-byte aligned
    return struct.pack("<Q", len(text)) + text, buffers


def _write_all(f: BinaryIO, head: bytes, buffers: Iterable[np.ndarray]) -> None:
    f.write(head)
    for array in buffers:
        if array.nbytes:
            f.write(memoryview(array.reshape(-1).view(np.uint8)))


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def atomic_write(path: str | os.PathLike, write: Any) -> Path:
    """Call ``write(file)`` on a temp file next to ``path``, fsync it, then rename it over ``path``."""
    path = Path(path)
    folder = path.parent if str(path.parent) else Path(".")
    folder.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=folder)
    try:
        # mkstemp makes the file private (0600); give it the mode a plain open() would have.
        os.chmod(tmp, path.stat().st_mode & 0o777 if path.exists() else 0o666 & ~_umask())
        with os.fdopen(fd, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    try:  # make the rename itself durable (not possible on every OS/filesystem)
        dir_fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
    except OSError:
        pass
    return path


def save(obj: Any, f: str | os.PathLike | BinaryIO, pickle_module: Any = None, **kwargs: Any) -> None:
    """Save ``obj`` (a state dict or nested dicts/lists of tensors and plain values) to ``f``.

    ``f`` is a path (written atomically) or a binary file object. ``torch.save`` keyword arguments
    such as ``pickle_protocol`` are accepted and ignored; a ``pickle_module`` is refused.
    """
    if pickle_module is not None:
        raise ValueError("ember.save never pickles; drop pickle_module (files are safetensors + JSON)")
    head, buffers = _serialize(obj)
    if hasattr(f, "write"):
        _write_all(f, head, buffers)  # type: ignore[arg-type]
    else:
        atomic_write(f, lambda handle: _write_all(handle, head, buffers))


def _read_bytes(f: Any) -> bytearray:
    if hasattr(f, "read"):
        return bytearray(f.read())
    path = Path(f)
    if not path.is_file():
        raise FileNotFoundError(f"ember.load: no such file: {path}")
    size = path.stat().st_size
    data = bytearray(size)
    with open(path, "rb") as handle:
        handle.readinto(data)
    return data


def _target_device(saved: str, map_location: Any) -> str:
    if map_location is None:
        return saved
    if isinstance(map_location, dict):
        return str(map_location.get(saved, saved))
    if callable(map_location):
        raise TypeError("ember.load: a callable map_location is not supported; pass a device, a string or a dict")
    return str(map_location)


def load(f: str | os.PathLike | BinaryIO, map_location: Any = None, weights_only: Any = None, mmap: Any = None,
         **kwargs: Any) -> Any:
    """Load what :func:`save` wrote. A plain safetensors file loads as a dict ``name -> tensor``.

    ``map_location`` ('cpu', 'cuda:0', a device, or a dict from saved to target device) moves tensors.
    ``weights_only`` is accepted for torch compatibility: loading never runs code either way.
    """
    from ember.creation import _wrap_array

    data = _read_bytes(f)
    where = getattr(f, "name", f)
    if len(data) < 8:
        raise ValueError(f"ember.load: {where} is too short to be an ember/safetensors file")
    (length,) = struct.unpack_from("<Q", data, 0)
    if 8 + length > len(data):
        raise ValueError(f"ember.load: {where} is not an ember/safetensors file (header length {length} exceeds "
                         f"the file size {len(data)}); files from torch.save (pickle) cannot be read")
    try:
        header = json.loads(bytes(data[8:8 + length]).decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ValueError(f"ember.load: {where} has a corrupt header ({error})") from None
    metadata = header.pop("__metadata__", None) or {}
    start = 8 + length
    raw: dict[str, np.ndarray] = {}
    for name, info in sorted(header.items(), key=lambda item: item[1]["data_offsets"][0]):
        dtype = _np_dtype(info["dtype"])
        begin, end = info["data_offsets"]
        count = (end - begin) // dtype.itemsize if dtype.itemsize else 0
        if start + end > len(data) or count != int(np.prod(info["shape"], dtype=np.int64)):
            raise ValueError(f"ember.load: tensor {name!r} in {where} has an inconsistent size; the file is "
                             "truncated or corrupt")
        array = np.frombuffer(data, dtype=dtype, count=count, offset=start + begin).reshape(info["shape"])
        if (start + begin) % max(dtype.itemsize, 1):
            array = array.copy()  # unaligned (written by another tool): copy for fast kernels
        if dtype.byteorder not in "=|":
            array = array.astype(dtype.newbyteorder("="))
        raw[name] = array
    if _STRUCTURE_KEY not in metadata:
        return {name: _place(_wrap_array(array, _cpu()), "cpu", map_location) for name, array in raw.items()}
    structure = json.loads(metadata[_STRUCTURE_KEY])
    refs: dict[str, dict] = {}
    _collect_refs(structure, refs)
    tensors = {}
    for name, ref in refs.items():
        tensor = _place(_wrap_array(raw[name], _cpu()), ref.get("device", "cpu"), map_location)
        if ref.get("parameter"):
            tensor = _as_parameter(tensor, ref.get("requires_grad", True))
        elif ref.get("requires_grad"):
            tensor.requires_grad_(True)
        tensors[name] = tensor
    return _decode(structure, tensors, raw)


def _cpu() -> Any:
    from ember.device import to_device

    return to_device("cpu")


def _place(tensor: Any, saved: str, map_location: Any) -> Any:
    target = _target_device(saved, map_location)
    if target == "cpu":
        return tensor
    try:
        return tensor.to(target)
    except Exception as error:
        raise RuntimeError(f"ember.load: cannot place a tensor saved on {saved} onto {target} ({error}); pass "
                           "map_location='cpu' to load it on the CPU") from None


def _as_parameter(tensor: Any, requires_grad: bool) -> Any:
    try:
        from ember.nn import Parameter
    except ImportError:
        return tensor.requires_grad_(requires_grad)
    return Parameter(tensor, requires_grad=requires_grad)


def _collect_refs(value: Any, refs: dict[str, dict]) -> None:
    if isinstance(value, list):
        for v in value:
            _collect_refs(v, refs)
    elif isinstance(value, dict):
        if "__tensor__" in value:
            refs[value["__tensor__"]] = value
            return
        for v in value.values():
            _collect_refs(v, refs)
