"""ember's JSON description of a nested object whose tensors live in a safetensors file.

``encode`` turns dicts/lists/tuples of tensors, arrays and plain values into JSON with tags for what
JSON lacks (``{"__tensor__": name}``, ``{"__tuple__": [...]}``, ``{"__dict__": [[k, v], ...]}`` for
non-string keys, ``{"__float__": "nan"}``, ``{"__bytes__": base64}``, ``{"__dtype__": "float32"}``,
``{"__device__": "cpu"}``, ``{"__ndarray__": name}``). ``decode`` checks every value read back
against that schema (tags, their argument types, known tensor names, dtype and device names,
nesting depth) before building anything, so a hand-edited file fails with an error naming the path
inside the structure instead of building something unexpected.

Example:
    >>> enc = Encoder(); s = enc.encode({"lr": 0.1, "betas": (0.9, 0.99)})
    >>> decode(s, {}, {}, "f")
    {'lr': 0.1, 'betas': (0.9, 0.99)}
"""
from __future__ import annotations

import base64
import binascii
import math
import re
from typing import Any

import numpy as np

from ember.serialization.errors import CheckpointError
from ember.device import device, device as Device
from ember.dtypes import _BY_NAME, dtype as Dtype, to_dtype
from ember.tensor import Size, Tensor

MAX_DEPTH = 100  # nesting deeper than any state dict; bounds recursion on hostile files
_DEVICE = re.compile(r"^(cpu|cuda|meta)(:\d{1,4})?$")
_TAGS = {"__tensor__", "__ndarray__", "__tuple__", "__dict__", "__float__", "__bytes__", "__dtype__", "__device__"}


class Encoder:
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
            self.arrays[name] = np.asarray(obj.detach().cpu().numpy())
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
                        f"{path or '<root>'} in format='safetensors' (no pickle). Supported: tensors, NumPy arrays, "
                        "numbers, strings, bytes, None, dtypes, devices, and dicts/lists/tuples of those. Save "
                        "obj.state_dict() instead of obj.")


def collect_refs(value: Any, refs: dict[str, dict], depth: int = 0) -> None:
    """Gather the ``__tensor__`` records (name -> record) of an already validated structure."""
    if isinstance(value, list):
        for v in value:
            collect_refs(v, refs, depth + 1)
    elif isinstance(value, dict):
        if "__tensor__" in value:
            refs[value["__tensor__"]] = value
            return
        for v in value.values():
            collect_refs(v, refs, depth + 1)


def validate(value: Any, names: set[str], where: Any, path: str = "<root>", depth: int = 0) -> None:
    """Check ``value`` against the schema above; raise CheckpointError naming the structure path."""
    def fail(problem: str) -> None:
        raise CheckpointError(where, f"structure at {path}", problem)

    if depth > MAX_DEPTH:
        fail(f"is nested deeper than {MAX_DEPTH} levels")
    if value is None or isinstance(value, (bool, int, float, str)):
        return
    if isinstance(value, list):
        for k, v in enumerate(value):
            validate(v, names, where, f"{path}[{k}]", depth + 1)
        return
    if not isinstance(value, dict):
        fail(f"has JSON type {type(value).__name__}")
    tags = _TAGS.intersection(value)
    if not tags:
        for key, v in value.items():
            if key.startswith("__"):
                fail(f"has unknown tag {key!r}")
            validate(v, names, where, f"{path}.{key}", depth + 1)
        return
    tag = tags.pop()
    arg = value[tag]
    extra = set(value) - {tag} - ({"requires_grad", "parameter", "device"} if tag == "__tensor__" else set())
    if tags or extra:
        fail(f"tag {tag!r} has unexpected keys {sorted(tags | extra)}")
    if tag in ("__tensor__", "__ndarray__"):
        if not isinstance(arg, str) or arg not in names:
            fail(f"refers to tensor {arg!r}, which is not in the file")
        for flag in ("requires_grad", "parameter"):
            if flag in value and not isinstance(value[flag], bool):
                fail(f"flag {flag!r} is {value[flag]!r}, expected true/false")
        if "device" in value and not (isinstance(value["device"], str) and _DEVICE.match(value["device"])):
            fail(f"device {value['device']!r} is not a device name such as 'cpu' or 'cuda:0'")
    elif tag == "__tuple__":
        if not isinstance(arg, list):
            fail("__tuple__ holds no list")
        for k, v in enumerate(arg):
            validate(v, names, where, f"{path}[{k}]", depth + 1)
    elif tag == "__dict__":
        if not isinstance(arg, list) or not all(isinstance(p, list) and len(p) == 2 for p in arg):
            fail("__dict__ holds no list of [key, value] pairs")
        for k, (key, v) in enumerate(arg):
            if not _hashable_key(key):
                fail(f"dict key {key!r} cannot be a dict key (numbers, strings, None, tuples of those)")
            validate(key, names, where, f"{path}.<key {k}>", depth + 1)
            validate(v, names, where, f"{path}.<value {k}>", depth + 1)
    elif tag == "__float__":
        if arg not in ("inf", "-inf", "nan"):
            fail(f"__float__ is {arg!r}; only 'inf', '-inf' and 'nan' are stored as strings")
    elif tag == "__bytes__":
        if not isinstance(arg, str):
            fail("__bytes__ holds no base64 string")
        try:
            base64.b64decode(arg, validate=True)
        except (binascii.Error, ValueError):
            fail("__bytes__ is not valid base64")
    elif tag == "__dtype__":
        if not isinstance(arg, str) or arg not in _BY_NAME:
            fail(f"dtype {arg!r} is not an ember dtype")
    elif tag == "__device__":
        if not isinstance(arg, str) or not _DEVICE.match(arg):
            fail(f"device {arg!r} is not a device name such as 'cpu' or 'cuda:0'")


def _hashable_key(key: Any) -> bool:
    if key is None or isinstance(key, (bool, int, float, str)):
        return True
    if isinstance(key, dict) and set(key) == {"__tuple__"} and isinstance(key["__tuple__"], list):
        return all(_hashable_key(k) for k in key["__tuple__"])
    return isinstance(key, dict) and len(key) == 1 and next(iter(key)) in ("__float__", "__bytes__", "__dtype__",
                                                                            "__device__")


def decode(value: Any, tensors: dict[str, Any], arrays: dict[str, np.ndarray], where: Any) -> Any:
    """Build the object described by a structure that :func:`validate` accepted."""
    if isinstance(value, list):
        return [decode(v, tensors, arrays, where) for v in value]
    if not isinstance(value, dict):
        return value
    if "__tensor__" in value:
        return tensors[value["__tensor__"]]
    if "__ndarray__" in value:
        return arrays[value["__ndarray__"]]
    if "__tuple__" in value:
        return tuple(decode(v, tensors, arrays, where) for v in value["__tuple__"])
    if "__dict__" in value:
        return {decode(k, tensors, arrays, where): decode(v, tensors, arrays, where) for k, v in value["__dict__"]}
    if "__float__" in value:
        return float(value["__float__"])
    if "__bytes__" in value:
        return base64.b64decode(value["__bytes__"])
    if "__dtype__" in value:
        return to_dtype(value["__dtype__"])
    if "__device__" in value:
        return device(value["__device__"])
    return {k: decode(v, tensors, arrays, where) for k, v in value.items()}
