"""Save a graph to disk and load it in a process that has none of the code that built it.

``save(graph, path)`` writes a directory with two files (never pickle):

* ``graph.json`` - the structure, schema below;
* ``weights.safetensors`` - every constant and state (parameter, optimizer buffer) array.

Schema (``"version": 1``)::

    {"format": "ember.graph", "version": 1, "name": str,
     "values":  [{"id": int, "kind": "input"|"state"|"const"|"node", "shape": [int], "dtype": "float32",
                  "device": "cpu", "name": str|null, "weight": str|null}],
     "inputs": [id], "states": [id], "consts": [id], "outputs": [id], "updates": [[state_id, value_id]],
     "nodes":  [{"op": str, "inputs": [{"value": id} | {"literal": <enc>}], "attrs": {str: <enc>},
                 "outputs": [id]}]}

A value record may carry ``"rank": int``, its placement (:func:`ember.graph.device`; absent when
unplaced). Per-rank subgraphs made by :mod:`ember.graph.partition` save like any graph: their
``send``/``recv`` nodes are ordinary op records.

A value record may carry ``"rng_seed": true`` (no weight): the per-run seed of the graph's random
nodes (:mod:`ember.graph.rng`). A loaded graph draws a fresh seed from ember's default generator at
every call (so ``ember.manual_seed`` makes its runs reproducible), or uses ``graph(x, seed=s)``.

``<enc>`` is JSON with tags for what JSON lacks: ``{"int": 3}``, ``{"float": 0.5}`` (or ``"inf"``,
``"-inf"``, ``"nan"``), ``{"bool": true}``, ``{"str": ...}``, ``{"tuple": [...]}``, ``{"list": [...]}``,
``{"slice": [start, stop, step]}``, ``{"ellipsis": true}``, ``{"dtype": "float32"}``, ``null``.
Ops are named by their registry name; loading looks them up in ``ember.ops.registry.OPS``.

Example:
    >>> import tempfile, ember
    >>> f = ember.compile(lambda x: x * 2 + 1, warmup=0)
    >>> _ = f(ember.ones(2))
    >>> d = tempfile.mkdtemp(); f.save(d)
    >>> load(d)(ember.ones(2))[0]
    tensor([3., 3.])
"""
from __future__ import annotations

import json
import math
import os
from typing import Any

import numpy as np

from ember import dtypes
from ember.graph.ir import Graph, Node, Value, on_device
from ember.graph.rng import SeedTensor, is_seed

FORMAT = "ember.graph"
VERSION = 1


def _enc(v: Any) -> Any:
    if v is None:
        return None
    if isinstance(v, bool):
        return {"bool": v}
    if isinstance(v, (int, np.integer)):
        return {"int": int(v)}
    if isinstance(v, (float, np.floating)):
        f = float(v)
        return {"float": f if math.isfinite(f) else repr(f)}
    if isinstance(v, str):
        return {"str": v}
    if isinstance(v, tuple):
        return {"tuple": [_enc(x) for x in v]}
    if isinstance(v, list):
        return {"list": [_enc(x) for x in v]}
    if isinstance(v, slice):
        return {"slice": [_enc(v.start), _enc(v.stop), _enc(v.step)]}
    if v is Ellipsis:
        return {"ellipsis": True}
    if isinstance(v, dtypes.dtype):
        return {"dtype": v.name}
    raise TypeError(f"graph save: attribute value {v!r} of type {type(v).__name__} has no JSON encoding; op "
                    "attributes must be plain values (numbers, strings, tuples, slices, ember dtypes)")


def _dec(v: Any) -> Any:
    if v is None:
        return None
    (tag, x), = v.items()
    if tag == "bool":
        return bool(x)
    if tag == "int":
        return int(x)
    if tag == "float":
        return float(x)
    if tag == "str":
        return x
    if tag == "tuple":
        return tuple(_dec(i) for i in x)
    if tag == "list":
        return [_dec(i) for i in x]
    if tag == "slice":
        return slice(*(_dec(i) for i in x))
    if tag == "ellipsis":
        return Ellipsis
    if tag == "dtype":
        return dtypes.to_dtype(x)
    raise ValueError(f"unknown tag {tag!r}")


def save(graph: Graph, path: str) -> None:
    """Write ``graph`` (structure + weights) into directory ``path``, atomically as a whole."""
    ids: dict[int, int] = {}
    records, weights = [], {}

    def add(v: Value) -> int:
        if v.id in ids:
            return ids[v.id]
        ids[v.id] = len(records)
        weight = None
        seed = is_seed(v)
        if v.kind in ("const", "state") and not seed:
            weight = f"{v.kind}{len(weights)}"
            array = v.data if v.kind == "const" else v.tensor._data
            array = np.ascontiguousarray(array.get() if hasattr(array, "get") else array)
            if array.shape != v.shape and array.size == math.prod(v.shape):
                array = array.reshape(v.shape)  # a one-element constant held as (1,) for a 0-d value: the value's shape
            weights[weight] = array
        records.append({"id": ids[v.id], "kind": v.kind, "shape": list(v.shape), "dtype": v.edtype.name,
                        "device": str(v.device) if v.device is not None else "cpu", "name": v.name, "weight": weight})
        if seed:
            records[-1]["rng_seed"] = True
        if v.rank is not None:
            records[-1]["rank"] = int(v.rank)
        return ids[v.id]

    for v in list(graph.inputs) + list(graph.states) + list(graph.consts):
        add(v)
    nodes = []
    for node in graph.nodes:
        if node.op.category == "fused":
            raise ValueError("graph save: save the graph before fusion (fused kernels are rebuilt on load)")
        nodes.append({
            "op": node.op.name,
            "inputs": [{"value": add(i)} if isinstance(i, Value) else {"literal": _enc(i)} for i in node.inputs],
            "attrs": {k: _enc(a) for k, a in node.attrs.items() if not k.startswith("_")},
            "outputs": [add(o) for o in node.outputs],
        })
    doc = {
        "format": FORMAT, "version": VERSION, "name": graph.name, "values": records,
        "inputs": [ids[v.id] for v in graph.inputs], "states": [ids[v.id] for v in graph.states],
        "consts": [ids[v.id] for v in graph.consts], "outputs": [ids[v.id] for v in graph.outputs],
        "updates": [[ids[s.id], ids[v.id]] for s, v in graph.updates], "nodes": nodes,
    }
    head, buffers = safetensors_format.layout(weights, {"format": "np"})

    def fill(folder: Any) -> None:
        with open(os.path.join(folder, "graph.json"), "w") as f:
            json.dump(doc, f, indent=1)
        with open(os.path.join(folder, "weights.safetensors"), "wb") as f:
            safetensors_format.write_all(f, head, buffers)

    atomic_directory(path, fill)


class LoadedGraph:
    """A graph read from disk: call it with the inputs; its states persist across calls."""

    def __init__(self, graph: Graph, passes: Any = None) -> None:
        from ember.graph.passes import ALL_PASSES

        passes = ALL_PASSES if passes is None else passes
        self.graph = graph
        self.executable = Executable(graph, graph.outputs, include_updates=True, fuse="fuse" in passes,
                                     memory="memory" in passes)
        self.states = {v.name or f"state{k}": v.tensor for k, v in enumerate(graph.states)}

    def __call__(self, *inputs: Any, seed: int | None = None) -> list:
        """Run on ``inputs``; random nodes use a fresh seed from ember's default generator, or ``seed``."""
        if len(inputs) != len(self.graph.inputs):
            raise TypeError(f"loaded graph {self.graph.name!r} takes {len(self.graph.inputs)} inputs "
                            f"({', '.join(v.type_str() for v in self.graph.inputs)}), got {len(inputs)}")
        arrays = []
        for v, x in zip(self.graph.inputs, inputs):
            source = x.detach().cpu().numpy() if isinstance(x, Tensor) else x
            if isinstance(source, np.ndarray) and source.dtype != v.dtype:
                # the graph was traced for one dtype (its promotions and casts are baked in): never cast silently
                raise TypeError(f"loaded graph input {v.label()} expects dtype {v.edtype.name}, got {source.dtype}; "
                                "convert it first (or save a graph traced with this dtype)")
            a = np.asarray(source, dtype=v.dtype)
            if a.shape != v.shape:
                raise ValueError(f"loaded graph input {v.label()} expects shape {v.shape}, got {a.shape}")
            if v.device is not None and v.device.type != "cpu":
                a = v.device.backend.asarray(a)
            arrays.append(a)
        results = self.executable.run(arrays, seed=seed)
        return [Tensor._make(on_device(r, v.device) if v.kind != "node" else r, v.device, False)
                for r, v in zip(results, self.graph.outputs)]


from ember.graph.executor import Executable  # noqa: E402
from ember.device import to_device
from ember.ops.registry import OPS
from ember.serialization import CheckpointError, atomic_directory, safetensors_format
from ember.serialization.safetensors_header import parse_json
from ember.tensor import Tensor


def load(path: str, passes: Any = None) -> LoadedGraph:
    """Read a graph saved by :func:`save`; raises ValueError naming the problem on a bad file."""
    from ember import graph as _graph_package  # noqa: F401  (registers the graph-only ops)

    from ember.graph.schema import check_attrs, check_document

    json_path = os.path.join(path, "graph.json")
    try:
        with open(json_path, "rb") as f:
            doc = parse_json(f.read(), json_path, "graph.json")
    except CheckpointError as error:
        raise CheckpointError(json_path, None, f"{error.problem}; the file is corrupted") from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise CheckpointError(json_path, None, "is not an ember graph (format field missing or wrong)")
    if doc.get("version") != VERSION:
        raise CheckpointError(json_path, None, f"has schema version {doc.get('version')!r:.40}; this ember reads "
                              f"version {VERSION}. Re-save the graph with a matching ember version.")
    check_document(doc, json_path)  # every field's type and range, before anything is built
    weights_path = os.path.join(path, "weights.safetensors")
    with open(weights_path, "rb") as f:
        weights, _ = safetensors_format.read_arrays(bytearray(f.read()), weights_path)
    try:
        graph = Graph(doc["name"])
        values: dict[int, Value] = {}
        for r in doc["values"]:
            v = Value(graph, tuple(r["shape"]), dtypes.to_dtype(r["dtype"]), to_device(r["device"]), r["kind"], r["name"])
            v.rank = r.get("rank")
            if r.get("rng_seed"):
                if r["kind"] != "state":
                    raise ValueError(f"value {r['id']} is marked rng_seed but is a {r['kind']!r}, not a state")
                v.tensor = SeedTensor.create(None, v.device)
            elif r["kind"] in ("const", "state"):
                if r["weight"] not in weights:
                    raise ValueError(f"value {r['id']} names weight {r['weight']!r}, which {weights_path} lacks")
                array = weights[r["weight"]]
                if tuple(array.shape) != v.shape or array.dtype != v.dtype:
                    raise ValueError(f"weight {r['weight']!r} is {array.dtype}{list(array.shape)}, expected "
                                     f"{v.dtype}{list(v.shape)}")
                if v.kind == "const":
                    v.data = array
                else:
                    v.tensor = Tensor._make(on_device(array, v.device), v.device, False)
            values[r["id"]] = v
        graph.inputs = [values[i] for i in doc["inputs"]]
        graph.states = [values[i] for i in doc["states"]]
        graph.consts = [values[i] for i in doc["consts"]]
        for k, n in enumerate(doc["nodes"]):
            op = OPS[n["op"]]
            ins = tuple(values[i["value"]] if "value" in i else _dec(i["literal"]) for i in n["inputs"])
            attrs = {name: _dec(a) for name, a in n["attrs"].items()}
            check_attrs(op, attrs, json_path, f"node {k} ({op.name})")
            outs = tuple(values[o] for o in n["outputs"])
            expected = op.num_outputs
            if len(outs) != expected:
                raise ValueError(f"node {k} ({op.name}) lists {len(outs)} outputs; the op has {expected}")
            if any(o.kind != "node" or o.node is not None for o in outs):
                raise ValueError(f"node {k} ({op.name}) outputs must be fresh values of kind 'node'")
            node = Node(op, ins, attrs, outs)
            for o in node.outputs:
                o.node = node
            graph.nodes.append(node)
        graph.outputs = [values[i] for i in doc["outputs"]]
        graph.updates = [(values[s], values[v]) for s, v in doc["updates"]]
        graph.validate()  # re-derives every node's output shape and dtype from its op's rule
    except CheckpointError:
        raise
    except (KeyError, TypeError, ValueError, AttributeError, IndexError, OverflowError, MemoryError) as error:
        raise CheckpointError(json_path, None, f"is corrupted or inconsistent: {error}") from None
    return LoadedGraph(graph, passes)
