"""Read ``.pt2`` files written by ``torch.export.save`` and run their ATen graphs with ember's operators.

A ``.pt2`` archive holds ``<name>/models/model.json`` (the ExportedProgram serialized as JSON: graph nodes whose
targets are ATen operators such as ``torch.ops.aten.linear.default``, typed arguments, the graph signature that
lifts parameters, buffers and constants to inputs, the output tree spec), ``data/weights/model_weights_config.json``
and ``data/constants/model_constants_config.json`` (each entry: a raw-bytes member and its dtype, sizes, strides,
offset) and ``archive_format`` (``pt2``). Nothing is unpickled and nothing is executed: the JSON is checked as it is
read, every node's target must be ``torch.ops.aten.<op>.<overload>`` with ``<op>`` on the allow-list that
``ember.jit.load`` uses for TorchScript (:mod:`ember.jit.torchscript.builtins`, which maps ``torch.ops.aten`` onto
ember's functions), or one of a few ``_operator`` functions on sizes; members are read by the names the configs
give after checking them; weights entries stored with pickle are refused.

:func:`load` returns an :class:`ember.export.ExportedProgram` whose ``module()`` is a :class:`Pt2Module`: the
parameters and buffers under their dotted names (``fc.weight``), ``forward`` running the nodes in order on ember
tensors (autograd records them), buffer mutations written back, outputs rebuilt from the saved tree spec.

Example:
    >>> is_pt2_members(["m/archive_format", "m/models/model.json"])
    True
"""
from __future__ import annotations

import json
import operator
import re
import zipfile
import zlib
from typing import Any, Callable

import numpy as np

from ember import dtypes
from ember.autograd import no_grad
from ember.creation import _wrap_array
from ember.device import device as make_device
from ember.jit.torchscript import builtins
from ember.nn.modules.module import Module
from ember.nn.parameter import Parameter
from ember.tensor import Tensor

_JSON_LIMIT = 64 << 20
_TARGET = re.compile(r"torch\.ops\.aten\.([A-Za-z_][A-Za-z0-9_]*)\.([A-Za-z_][A-Za-z0-9_]*)")
_MEMBER = re.compile(r"[A-Za-z0-9_.\-]{1,200}")
# torch._export.serde.schema.ScalarType (not c10's numbering)
SCALAR_TYPES = {1: "uint8", 2: "int8", 3: "int16", 4: "int32", 5: "int64", 6: "float16", 7: "float32",
                8: "float64", 10: "complex64", 11: "complex128", 12: "bool", 13: "bfloat16", 29: "float8_e4m3fn",
                30: "float8_e5m2", 31: "float8_e4m3fnuz", 32: "float8_e5m2fnuz"}
# calls on symbolic sizes that export writes with Python's operator module
_OPERATORS: dict[str, Callable] = {
    "_operator.getitem": operator.getitem, "_operator.add": operator.add, "_operator.sub": operator.sub,
    "_operator.mul": operator.mul, "_operator.floordiv": operator.floordiv, "_operator.truediv": operator.truediv,
    "_operator.mod": operator.mod, "_operator.neg": operator.neg, "_operator.eq": operator.eq,
    "_operator.ne": operator.ne, "_operator.lt": operator.lt, "_operator.le": operator.le,
    "_operator.gt": operator.gt, "_operator.ge": operator.ge}
# ATen operators that only check metadata in a compiled program: nothing to compute
_CHECKS = {"_assert_tensor_metadata", "_assert_scalar", "sym_constrain_range_for_size", "sym_constrain_range",
           "_assert_async", "_functional_assert_async"}


class Pt2Error(ValueError):
    """A ``.pt2`` file ember refuses or cannot run; names the file, the entry and the problem."""

    def __init__(self, where: str, what: str, problem: str) -> None:
        super().__init__(f"{where}: {what}: {problem}")


def is_pt2_members(names: list[str]) -> bool:
    return any(n.endswith("/archive_format") or n == "archive_format" for n in names) and any(
        n.endswith("models/model.json") for n in names)


def _dtype(code: Any, where: str, what: str) -> Any:
    if not isinstance(code, int) or isinstance(code, bool) or code not in SCALAR_TYPES:
        raise Pt2Error(where, what, f"dtype code {code!r:.40} is not one ember reads ({sorted(SCALAR_TYPES)})")
    return dtypes.to_dtype(SCALAR_TYPES[code])


def _ints(value: Any, where: str, what: str) -> list[int]:
    """A list of ``{"as_int": n}`` records (sizes and strides); symbolic sizes are refused for weights."""
    if not isinstance(value, list) or len(value) > 64:
        raise Pt2Error(where, what, "must be a list of at most 64 sizes")
    out = []
    for item in value:
        n = item.get("as_int") if isinstance(item, dict) else None
        if not isinstance(n, int) or isinstance(n, bool) or n < 0:
            raise Pt2Error(where, what, f"entry {item!r:.60} is not a non-negative integer")
        out.append(n)
    return out


class _Reader:
    def __init__(self, archive: zipfile.ZipFile, prefix: str, where: str) -> None:
        self.archive, self.prefix, self.where = archive, prefix, where
        self.names = set(archive.namelist())

    def member(self, name: str, limit: int | None) -> bytes:
        full = self.prefix + name
        if full not in self.names:
            raise Pt2Error(self.where, f"member {full!r}", "is missing")
        info = self.archive.getinfo(full)
        if limit is not None and info.file_size > limit:
            raise Pt2Error(self.where, f"member {full!r}", f"declares {info.file_size} bytes, over {limit}")
        try:
            return self.archive.read(info)
        except (zipfile.BadZipFile, zlib.error, EOFError, NotImplementedError) as error:
            raise Pt2Error(self.where, f"member {full!r}", f"is damaged ({error})") from None

    def json(self, name: str) -> Any:
        try:
            return json.loads(self.member(name, _JSON_LIMIT).decode("utf-8"))
        except (UnicodeDecodeError, ValueError) as error:
            raise Pt2Error(self.where, name, f"is not valid JSON ({error})") from None

    def tensors(self, folder: str, config_name: str) -> dict[str, tuple[Tensor, bool]]:
        """name -> (tensor, is_param) from a weights/constants config and its raw members."""
        path = f"data/{folder}/{config_name}"
        if self.prefix + path not in self.names:
            return {}
        config = self.json(path)
        entries = config.get("config") if isinstance(config, dict) else None
        if not isinstance(entries, dict):
            raise Pt2Error(self.where, path, "must be an object with a 'config' object")
        out = {}
        for name, entry in entries.items():
            what = f"{folder} entry {name!r:.80}"
            if not isinstance(entry, dict) or not isinstance(entry.get("tensor_meta"), dict):
                raise Pt2Error(self.where, what, "must be an object with tensor_meta")
            if entry.get("use_pickle"):
                raise Pt2Error(self.where, what, "is stored with pickle; ember reads only raw tensor members")
            member = entry.get("path_name")
            if not isinstance(member, str) or not _MEMBER.fullmatch(member) or member in (".", ".."):
                raise Pt2Error(self.where, what, f"path_name {member!r:.60} is not a plain member name")
            out[name] = (self._tensor(self.member(f"data/{folder}/{member}", None), entry["tensor_meta"], what),
                         bool(entry.get("is_param")))
        return out

    def _tensor(self, raw: bytes, meta: dict, what: str) -> Tensor:
        dtype = _dtype(meta.get("dtype"), self.where, what)
        sizes = _ints(meta.get("sizes"), self.where, what + " sizes")
        strides = _ints(meta.get("strides"), self.where, what + " strides")
        offset = _ints([meta.get("storage_offset", {"as_int": 0})], self.where, what + " offset")[0]
        if len(strides) != len(sizes):
            raise Pt2Error(self.where, what, f"has {len(strides)} strides for {len(sizes)} sizes")
        np_dtype = dtype.np
        count = len(raw) // np_dtype.itemsize
        if any(n == 0 for n in sizes):
            needed = 0
        else:
            needed = offset + sum((n - 1) * s for n, s in zip(sizes, strides)) + 1
        if needed > count or len(raw) % np_dtype.itemsize:
            raise Pt2Error(self.where, what, f"needs {needed} elements of {dtype}; its member holds {len(raw)} bytes")
        flat = np.frombuffer(bytearray(raw), dtype=np_dtype)
        array = np.lib.stride_tricks.as_strided(flat[offset:] if needed else flat, shape=sizes,
                                                strides=[s * np_dtype.itemsize for s in strides])
        tensor = _wrap_array(np.ascontiguousarray(array), make_device("cpu"))
        return tensor


class Pt2Module(Module):
    """An exported program's graph run by ember (see the module docstring); parameters under their dotted names."""

    def __init__(self, program: dict, tensors: dict[str, tuple[Tensor, bool]], where: str) -> None:
        super().__init__()
        self.__dict__["_pt2"] = _Graph(program, where)
        for name, (tensor, is_param) in tensors.items():
            owner, leaf = self._owner(name)
            if is_param:
                owner.register_parameter(leaf, Parameter(tensor))
            else:
                owner.register_buffer(leaf, tensor)

    def _owner(self, dotted: str) -> tuple[Module, str]:
        parts = dotted.split(".")
        owner: Module = self
        for part in parts[:-1]:
            if part not in owner._modules:
                owner.add_module(part, Module())
            owner = owner._modules[part]
        return owner, parts[-1]

    def _lookup(self, dotted: str) -> Tensor:
        owner, leaf = self._owner(dotted)
        if leaf in owner._parameters:
            return owner._parameters[leaf]
        return owner._buffers[leaf]

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        return self.__dict__["_pt2"].run(self, list(args), kwargs)


class _Graph:
    """The checked graph of a program: its signature, nodes and output tree spec."""

    def __init__(self, program: dict, where: str) -> None:
        self.where = where
        gm = program.get("graph_module") if isinstance(program, dict) else None
        graph = gm.get("graph") if isinstance(gm, dict) else None
        signature = gm.get("signature") if isinstance(gm, dict) else None
        if not isinstance(graph, dict) or not isinstance(signature, dict):
            raise Pt2Error(where, "models/model.json", "has no graph_module.graph and signature objects")
        self.nodes = graph.get("nodes")
        self.outputs = graph.get("outputs")
        self.input_specs = signature.get("input_specs")
        self.output_specs = signature.get("output_specs")
        for key in ("nodes", "outputs", "input_specs", "output_specs"):
            if not isinstance(getattr(self, key), list):
                raise Pt2Error(where, f"graph {key}", "must be a list")
        self.out_spec = None
        calls = gm.get("module_call_graph")
        if isinstance(calls, list) and calls and isinstance(calls[0], dict) and isinstance(
                calls[0].get("signature"), dict):
            spec = calls[0]["signature"].get("out_spec")
            self.out_spec = json.loads(spec)[1] if isinstance(spec, str) else None
        self.calls = [self._target(node) for node in self.nodes]

    def _target(self, node: Any) -> Callable | None:
        if not isinstance(node, dict) or not isinstance(node.get("target"), str):
            raise Pt2Error(self.where, "node", f"{node!r:.80} has no target")
        target = node["target"]
        if target in _OPERATORS:
            return _OPERATORS[target]
        match = _TARGET.fullmatch(target)
        if match is None:
            raise Pt2Error(self.where, f"node {node.get('name')!r:.60}", f"target {target!r:.80} is not an ATen "
                           "operator (torch.ops.aten.<op>.<overload>); ember runs only those")
        if match.group(1) in _CHECKS:
            return None
        fn = builtins.resolve("ops.aten." + match.group(1))
        if fn is None:
            raise Pt2Error(self.where, f"node {node.get('name')!r:.60}", f"ATen operator aten::{match.group(1)} has no "
                           "ember counterpart on the allow-list (ember.jit.torchscript.builtins.known_names())")
        return fn

    def _arg(self, arg: Any, env: dict) -> Any:
        if not isinstance(arg, dict) or len(arg) != 1:
            raise Pt2Error(self.where, "argument", f"{arg!r:.80} is not a one-key record")
        (kind, value), = arg.items()
        if kind == "as_none":
            return None
        if kind in ("as_tensor", "as_sym_int", "as_sym_float", "as_sym_bool", "as_optional_tensor"):
            if isinstance(value, dict) and "as_name" in value:
                value = {"name": value["as_name"]}
            if isinstance(value, dict) and "as_int" in value:
                return value["as_int"]
            if isinstance(value, dict) and "as_float" in value:
                return value["as_float"]
            if isinstance(value, dict) and "as_none" in value:
                return None
            if isinstance(value, dict) and "as_tensor" in value:
                value = value["as_tensor"]
            name = value.get("name") if isinstance(value, dict) else None
            if name not in env:
                raise Pt2Error(self.where, "argument", f"refers to {name!r:.60}, which no earlier node or input made")
            return env[name]
        if kind in ("as_tensors", "as_sym_ints", "as_optional_tensors", "as_sym_floats", "as_sym_bools"):
            if not isinstance(value, list):
                raise Pt2Error(self.where, "argument", f"{kind} must be a list")
            single = {"as_tensors": "as_tensor", "as_sym_ints": "as_sym_int", "as_sym_floats": "as_sym_float",
                      "as_sym_bools": "as_sym_bool"}
            if kind == "as_optional_tensors":
                return [self._arg(v, env) for v in value]
            return [self._arg({single[kind]: v}, env) for v in value]
        if kind in ("as_int", "as_float", "as_bool", "as_string", "as_ints", "as_floats", "as_bools", "as_strings"):
            return list(value) if isinstance(value, list) else value
        if kind == "as_scalar_type":
            return _dtype(value, self.where, "argument")
        if kind == "as_device":
            return make_device(value["type"] if value.get("index") is None else f"{value['type']}:{value['index']}")
        if kind in ("as_memory_format", "as_layout"):
            return None
        raise Pt2Error(self.where, "argument", f"kind {kind!r:.40} is not supported by ember")

    def run(self, module: Pt2Module, args: list, kwargs: dict) -> Any:
        env: dict[str, Any] = {}
        user = iter(list(args) + list(kwargs.values()))
        for spec in self.input_specs:
            (kind, body), = spec.items()
            if kind == "user_input":
                arg = body["arg"]
                name = next(iter(arg.values())).get("name") if isinstance(arg, dict) and arg else None
                try:
                    value = next(user)
                except StopIteration:
                    raise TypeError("exported program: too few inputs") from None
                if name is not None:
                    env[name] = value
            elif kind in ("parameter", "buffer", "tensor_constant"):
                target = body.get({"parameter": "parameter_name", "buffer": "buffer_name",
                                   "tensor_constant": "tensor_constant_name"}[kind])
                env[body["arg"]["name"]] = module._lookup(target)
            elif kind == "constant_input":
                env[body["name"]] = self._arg(body["value"], env)
            else:
                raise Pt2Error(self.where, "input spec", f"kind {kind!r:.40} is not supported by ember")
        for node, call in zip(self.nodes, self.calls):
            positional, keywords = [], {}
            for item in node.get("inputs", []):
                value = self._arg(item.get("arg"), env)
                if item.get("kind") == 2:
                    keywords[item["name"]] = value
                else:
                    positional.append(value)
            result = None if call is None else call(*positional, **keywords)
            outputs = node.get("outputs", [])
            if len(outputs) == 1:
                self._bind(outputs[0], result, env)
            else:
                for out, value in zip(outputs, result):
                    self._bind(out, value, env)
        values = [self._arg(o, env) for o in self.outputs]
        user_outputs = []
        for spec, value in zip(self.output_specs, values):
            (kind, body), = spec.items()
            if kind == "buffer_mutation":
                with no_grad():
                    module._lookup(body["buffer_name"]).copy_(value)
            elif kind == "user_output":
                user_outputs.append(value)
            else:
                raise Pt2Error(self.where, "output spec", f"kind {kind!r:.40} is not supported by ember")
        return _unflatten(self.out_spec, iter(user_outputs))

    def _bind(self, out: Any, value: Any, env: dict) -> None:
        (kind, body), = out.items()
        if kind in ("as_tensor", "as_sym_int", "as_sym_float", "as_sym_bool"):
            name = body.get("name", body.get("as_name")) if isinstance(body, dict) else None
            if name is not None:
                env[name] = value
        elif kind in ("as_tensors", "as_sym_ints"):
            for item, v in zip(body, value):
                self._bind({"as_tensor": item}, v, env)
        elif kind != "as_none":
            raise Pt2Error(self.where, "node output", f"kind {kind!r:.40} is not supported")


def _unflatten(spec: Any, leaves: Any) -> Any:
    """Rebuild outputs from torch's pytree spec (leaf, tuple, list, dict); without one, a tuple or the one leaf."""
    if spec is None:
        values = list(leaves)
        return values[0] if len(values) == 1 else tuple(values)
    kind = spec.get("type")
    children = [_unflatten(child, leaves) if child.get("type") else next(leaves) for child in spec.get(
        "children_spec", [])]
    if kind is None:
        return next(leaves)
    if kind == "builtins.tuple":
        return tuple(children)
    if kind == "builtins.list":
        return children
    if kind == "builtins.dict":
        return dict(zip(json.loads(spec.get("context") or "[]"), children))
    return tuple(children)


def load(archive: zipfile.ZipFile, where: str) -> tuple[Pt2Module, dict]:
    """The module and the JSON program of the ``.pt2`` archive ``archive``."""
    prefixes = [n[: -len("archive_format")] for n in archive.namelist() if n.endswith("archive_format")]
    if len(prefixes) != 1:
        raise Pt2Error(where, "archive_format", "must appear once")
    reader = _Reader(archive, prefixes[0], where)
    if reader.member("archive_format", 64).strip() != b"pt2":
        raise Pt2Error(where, "archive_format", "is not 'pt2'")
    models = sorted(n for n in reader.names if n.startswith(reader.prefix + "models/") and n.endswith(".json"))
    if len(models) != 1:
        raise Pt2Error(where, "models/", f"holds {len(models)} programs; ember reads archives of one")
    program = reader.json(models[0][len(reader.prefix):])
    tensors = reader.tensors("weights", "model_weights_config.json")
    tensors.update(reader.tensors("constants", "model_constants_config.json"))
    return Pt2Module(program, tensors, where), program
