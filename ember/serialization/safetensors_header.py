"""Read and check a safetensors header exactly as strictly as the safetensors library does.

Layout: an 8-byte little-endian header length ``N``, ``N`` bytes of UTF-8 JSON, then the tensor
bytes. The JSON is a dict ``name -> {"dtype", "shape", "data_offsets": [begin, end]}`` plus an
optional ``"__metadata__"`` dict of strings. Checked here, each failure naming the file and the
tensor: the header size (at most 100 MB, within the file), valid UTF-8 JSON starting with ``{``
without duplicate keys or NaN, dict entries of the right types, known dtypes, non-negative shape
entries, ``end - begin == prod(shape) * itemsize``, offsets sorted into one contiguous run from 0
(no overlap, no hole) that ends exactly at the end of the file, and string-only metadata.

Example:
    >>> import json, struct
    >>> head = json.dumps({"w": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}}).encode()
    >>> data = struct.pack("<Q", len(head)) + head + b"\\0" * 4
    >>> [(e.name, e.shape) for e in read_header(data, "x.safetensors")[0]]
    [('w', (1,))]
"""
from __future__ import annotations

import json
import struct
from dataclasses import dataclass
from typing import Any

from ember.serialization.errors import CheckpointError

MAX_HEADER_BYTES = 100_000_000  # the safetensors library's limit
ITEMSIZE = {"BOOL": 1, "U8": 1, "I8": 1, "I16": 2, "U16": 2, "I32": 4, "U32": 4, "I64": 8, "U64": 8,
            "F16": 2, "BF16": 2, "F32": 4, "F64": 8, "C64": 8,
            "F8_E4M3": 1, "F8_E5M2": 1, "F8_E4M3FNUZ": 1, "F8_E5M2FNUZ": 1}
# Types the format knows but ember cannot hold: named in the error instead of "unknown".
_KNOWN_UNSUPPORTED = {"F8_E8M0", "F4", "F6_E2M3", "F6_E3M2", "C128"}


@dataclass(frozen=True)
class Entry:
    """One tensor's record: ``begin``/``end`` are offsets into the data section (after the header)."""

    name: str
    dtype: str
    shape: tuple
    begin: int
    end: int


def _no_duplicates(pairs: list) -> dict:
    out: dict = {}
    for key, value in pairs:
        if key in out:
            raise ValueError(f"duplicate key {key!r}")
        out[key] = value
    return out


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def parse_json(text: bytes, where: Any, what: str) -> Any:
    """Strict JSON: valid UTF-8, no duplicate keys, no NaN/Infinity, nesting within Python's limit."""
    try:
        decoded = text.decode("utf-8")
    except UnicodeDecodeError as error:
        raise CheckpointError(where, what, f"is not valid UTF-8 ({error})") from None
    try:
        return json.loads(decoded, object_pairs_hook=_no_duplicates, parse_constant=_refuse_constant)
    except RecursionError:
        raise CheckpointError(where, what, "is nested too deeply") from None
    except ValueError as error:  # JSONDecodeError is a ValueError
        raise CheckpointError(where, what, f"is not valid JSON ({error})") from None


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def read_header(data: Any, where: Any) -> tuple[list[Entry], dict[str, str], int]:
    """Check the header of ``data`` (bytes-like); return entries sorted by offset, metadata, data start."""
    size = len(data)
    if size < 8:
        raise CheckpointError(where, None, f"is too short ({size} bytes) to be a safetensors file")
    (length,) = struct.unpack_from("<Q", data, 0)
    if length > MAX_HEADER_BYTES:
        raise CheckpointError(where, "header", f"length {length} exceeds the limit of {MAX_HEADER_BYTES} bytes; "
                              "the file is corrupt or not a safetensors file")
    if 8 + length > size:
        raise CheckpointError(where, "header", f"length {length} exceeds the file size {size}; the file is "
                              "truncated or not a safetensors file")
    text = bytes(data[8:8 + length])
    if not text.startswith(b"{"):
        raise CheckpointError(where, "header", "does not start with '{'; not a safetensors file")
    header = parse_json(text, where, "header")
    if not isinstance(header, dict):
        raise CheckpointError(where, "header", f"is a JSON {type(header).__name__}, expected an object")
    metadata = header.pop("__metadata__", None)
    if metadata is None:
        metadata = {}
    if not isinstance(metadata, dict):
        raise CheckpointError(where, "__metadata__", f"is a {type(metadata).__name__}, expected an object of strings")
    for key, value in metadata.items():
        if not isinstance(value, str):
            raise CheckpointError(where, f"__metadata__ entry {key!r}", f"is a {type(value).__name__}; "
                                  "metadata values must be strings")
    entries = [_entry(name, info, where) for name, info in header.items()]
    entries.sort(key=lambda e: (e.begin, e.end))
    expected = 0
    for entry in entries:
        if entry.begin != expected:
            kind = "overlaps the previous tensor" if entry.begin < expected else "leaves a hole before it"
            raise CheckpointError(where, f"tensor {entry.name!r}", f"data_offsets [{entry.begin}, {entry.end}] {kind} "
                                  f"(expected it to start at {expected})")
        expected = entry.end
    available = size - 8 - length
    if expected != available:
        problem = "the file is truncated" if expected > available else "the file has trailing bytes"
        last = f"tensor {entries[-1].name!r}" if entries else "tensors"
        raise CheckpointError(where, last, f"data ends at {expected} but the data section holds {available} bytes; "
                              f"{problem}")
    return entries, metadata, 8 + length


MAX_DIMS = 64


def _entry(name: str, info: Any, where: Any) -> Entry:
    what = f"tensor {name!r}"
    if not isinstance(info, dict):
        raise CheckpointError(where, what, f"entry is a {type(info).__name__}, expected an object with dtype, shape "
                              "and data_offsets")
    for key in ("dtype", "shape", "data_offsets"):
        if key not in info:
            raise CheckpointError(where, what, f"entry has no {key!r}")
    dtype, shape, offsets = info["dtype"], info["shape"], info["data_offsets"]
    if not isinstance(dtype, str) or dtype not in ITEMSIZE:
        if dtype in _KNOWN_UNSUPPORTED:
            raise CheckpointError(where, what, f"dtype {dtype} is not supported by ember; supported: {sorted(ITEMSIZE)}")
        raise CheckpointError(where, what, f"unknown dtype {dtype!r}; known: {sorted(ITEMSIZE)}")
    if not isinstance(shape, list) or not all(_is_int(s) for s in shape):
        raise CheckpointError(where, what, f"shape {shape!r} is not a list of integers")
    if any(s < 0 for s in shape):
        raise CheckpointError(where, what, f"shape {shape} has a negative entry")
    if len(shape) > MAX_DIMS:  # NumPy arrays stop at 64 dims (the library fails there too, with NumPy's error)
        raise CheckpointError(where, what, f"shape has {len(shape)} dimensions; at most {MAX_DIMS} are supported")
    if not (isinstance(offsets, list) and len(offsets) == 2 and all(_is_int(o) for o in offsets)):
        raise CheckpointError(where, what, f"data_offsets {offsets!r} is not a list of two integers")
    begin, end = offsets
    if begin < 0 or end < begin:
        raise CheckpointError(where, what, f"data_offsets [{begin}, {end}] are negative or reversed")
    count = 1
    for s in shape:
        count *= s
    if count * ITEMSIZE[dtype] != end - begin:
        raise CheckpointError(where, what, f"shape {shape} of {dtype} needs {count * ITEMSIZE[dtype]} bytes but "
                              f"data_offsets [{begin}, {end}] span {end - begin}")
    return Entry(name, dtype, tuple(shape), begin, end)
