"""The static-graph IR shared by define-then-run, ``ember.compile``, the passes, the executor, the
serializer and the ONNX exporter.

A :class:`Graph` is a flat, typed SSA graph:

* :class:`Value` - one immutable tensor value with ``shape``, ``dtype`` (ember dtype in ``edtype``,
  NumPy dtype in ``dtype`` so a Value can stand in for an array as a symbolic tensor's ``_data``),
  ``device`` and a ``kind``:
  ``input`` (a placeholder / traced argument, fed each run), ``state`` (a tensor that persists
  across runs: a Variable, a parameter, an optimizer buffer; read at run start from ``value.tensor``),
  ``const`` (an array owned by the graph, in ``value.data``) or ``node`` (an op's output).
* :class:`Node` - one application of an op record (``node.op`` is the :class:`~ember.ops.registry.OpDef`,
  so an exporter finds ``node.op.onnx``) with its attributes; ``inputs`` are Values or Python
  scalars (literals, passed to the op's ``impl`` as they were in eager mode).
* ``graph.nodes`` is kept in topological order; ``graph.outputs`` are the fetched values of a
  compiled function; ``graph.updates`` are ``(state, new_value)`` pairs written back at the end of
  a run (the state writes of a traced training step).

Writes to state use SSA too: reading a variable gives its value at the start of the run; an
``assign`` node computes the new value and the executor copies it into the variable's buffer after
every node has run, so no reader ever sees a half-updated weight.

Example:
    >>> import ember, ember.graph as G
    >>> g = G.Graph()
    >>> x = g.add_input((2, 3), ember.float32, name="x")
    >>> from ember.ops.registry import OPS
    >>> (y,) = g.add_node(OPS["exp"], (x,), {})
    >>> print(g)  # doctest: +NORMALIZE_WHITESPACE
    graph(%x: float32[2, 3]) {
      %0: float32[2, 3] = exp(%x)
    }
"""
from __future__ import annotations

import itertools
from typing import Any, Iterable, Sequence

import numpy as np

from ember import dtypes
from ember.graph.placement import current_rank
from ember.interpreters import Interpreter, SymbolicValue, TracingError  # noqa: F401  (TracingError: re-exported)
from ember.device import to_device
from ember.ops.registry import OPS, Spec, abstract_eval

_IDS = itertools.count()


def data_dependent_error(what: str) -> TracingError:
    return TracingError(
        f"{what} needs the data of a symbolic (traced) tensor, but while building a graph tensors have only "
        "shapes and dtypes. This is data-dependent Python control flow or conversion (x.item(), bool(x), "
        "float(x), x.numpy(), `if x > 0:`). Fix: keep it in tensor ops (ember.where, masks), move it out of the "
        "compiled function (return the tensor and call .item() on the result), or let ember.compile fall back "
        "to eager mode (fallback='eager', the default)."
    )


class _Flags:
    c_contiguous = True
    f_contiguous = False
    writeable = False
    owndata = False


_FLAGS = _Flags()


class _StridedFlags(_Flags):
    c_contiguous = False  # a value whose memory layout is not known to be C-contiguous (ember/graph/layout.py)


_STRIDED_FLAGS = _StridedFlags()


class Value(SymbolicValue):
    """An SSA value. Also usable as the ``_data`` of a symbolic Tensor (it mimics an array's metadata)."""

    __slots__ = ("id", "shape", "dtype", "edtype", "device", "kind", "node", "index", "name", "data", "tensor",
                 "graph", "rank")

    def __init__(self, graph: "Graph | None", shape: tuple, edtype: dtypes.dtype, device: Any, kind: str,
                 name: str | None = None) -> None:
        self.id = next(_IDS)
        self.shape = tuple(int(s) for s in shape)
        self.edtype = edtype
        self.dtype = edtype.np
        self.device = device
        self.kind = kind
        self.node: Node | None = None
        self.index = 0
        self.name = name
        self.data: Any = None  # const: the array
        self.tensor: Any = None  # state: the Tensor whose buffer persists across runs
        self.graph = graph
        self.rank: int | None = None  # the process that computes/holds it (ember/graph/placement.py)

    # ---- array-like metadata so Tensor methods work on symbolic tensors -----------------------
    @property
    def itemsize(self) -> int:  # ndim/size/nbytes/strides follow from it and shape (SymbolicValue)
        return self.edtype.itemsize

    @property
    def flags(self) -> _Flags:
        layout = getattr(getattr(self.graph, "builder", None), "layout", None)  # ember/graph/layout.py
        return _STRIDED_FLAGS if layout and self.id in layout else _FLAGS

    base = None

    def copy(self) -> "Value":
        return self  # values are immutable: a copy is the same value

    def __getattr__(self, name: str) -> Any:
        raise data_dependent_error(f"array attribute {name!r}")

    def __array__(self, *args: Any, **kwargs: Any) -> Any:
        raise data_dependent_error("converting to a NumPy array")

    def __getitem__(self, key: Any) -> Any:
        raise data_dependent_error("raw array indexing")

    def __setitem__(self, key: Any, value: Any) -> None:
        raise data_dependent_error("raw array assignment")

    def __bool__(self) -> bool:
        raise data_dependent_error("bool()")

    @property
    def spec(self) -> Any:
        return Spec(self.shape, self.edtype, self.device)

    @property
    def interpreter(self) -> Interpreter:
        """The builder of this value's graph: ops on a tensor holding this value go there."""
        return self.graph.builder

    def label(self) -> str:
        return f"%{self.name}" if self.name else f"%{self.id}"

    def type_str(self) -> str:
        dev = "" if self.device is None or str(self.device) == "cpu" else f" @{self.device}"
        rank = "" if self.rank is None else f" @rank:{self.rank}"
        return f"{self.edtype.name}[{', '.join(map(str, self.shape))}]{dev}{rank}"

    def __repr__(self) -> str:
        return f"{self.label()}: {self.type_str()} ({self.kind})"


class Node:
    """One op application: ``outputs = op(*inputs, **attrs)``."""

    __slots__ = ("op", "inputs", "attrs", "outputs")

    def __init__(self, op: Any, inputs: tuple, attrs: dict, outputs: tuple = ()) -> None:
        self.op = op
        self.inputs = tuple(inputs)
        self.attrs = dict(attrs)
        self.outputs = tuple(outputs)

    def value_inputs(self) -> list:
        return [i for i in self.inputs if isinstance(i, Value)]

    def __repr__(self) -> str:
        return format_node(self)


def _fmt_attr(v: Any) -> str:
    if isinstance(v, dtypes.dtype):
        return v.name
    if isinstance(v, float):
        return repr(v)
    if isinstance(v, slice):
        return f"{'' if v.start is None else v.start}:{'' if v.stop is None else v.stop}" + (
            f":{v.step}" if v.step is not None else "")
    if isinstance(v, tuple):
        return "(" + ", ".join(_fmt_attr(x) for x in v) + ("," if len(v) == 1 else "") + ")"
    if v is Ellipsis:
        return "..."
    return repr(v) if isinstance(v, str) else str(v)


def format_node(node: Node, names: dict | None = None) -> str:
    def label(v: Value) -> str:
        if names is None or v.name:
            return v.label()
        return "%" + str(names.setdefault(v.id, len(names)))

    outs = ", ".join(f"{label(o)}: {o.type_str()}" for o in node.outputs)
    args = ", ".join(label(i) if isinstance(i, Value) else repr(i) for i in node.inputs)
    attrs = ", ".join(f"{k}={_fmt_attr(v)}" for k, v in node.attrs.items() if not k.startswith("_"))
    call = f"{node.op.name}({args}{', ' if args and attrs else ''}{attrs})"
    return f"{outs} = {call}" if outs else call


class Graph:
    """A flat typed graph. Build with ``add_input``/``add_state``/``add_const``/``add_node``."""

    def __init__(self, name: str = "graph") -> None:
        self.name = name
        self.inputs: list[Value] = []
        self.states: list[Value] = []
        self.consts: list[Value] = []
        self.nodes: list[Node] = []
        self.outputs: list[Value] = []
        self.updates: list[tuple[Value, Value]] = []
        # ids of states made for tensors the trace created and let escape (``p.grad`` set by backward):
        # nothing reads their old value, so a run may hand them its new array instead of copying it
        self.escaped: set[int] = set()
        # state id -> how many in-place writes the traced code made to that tensor (torch bumps a tensor's
        # version once per in-place op; a run bumps the state's tensor as often). Absent: once.
        self.update_bumps: dict[int, int] = {}
        self.builder: Any = None  # the Builder adding nodes, while one is

    # ---- building --------------------------------------------------------------------------
    def add_input(self, shape: Sequence[int], dtype: dtypes.dtype, device: Any = None, name: str | None = None) -> Value:
        v = Value(self, tuple(shape), dtype, _dev(device), "input", name)
        v.rank = current_rank()
        self.inputs.append(v)
        return v

    def add_state(self, tensor: Any, name: str | None = None) -> Value:
        data = tensor._data
        v = Value(self, tuple(data.shape), tensor.dtype, tensor._device, "state", name)
        v.tensor = tensor
        v.rank = current_rank()
        self.states.append(v)
        return v

    def add_const(self, array: Any, device: Any = None, name: str | None = None) -> Value:
        """A constant held by the graph (``array`` lives on ``device``; NumPy when None)."""
        array = np.asarray(array) if not hasattr(array, "shape") else array
        v = Value(self, tuple(array.shape), dtypes.from_numpy_dtype(array.dtype), _dev(device), "const", name)
        v.data = array
        self.consts.append(v)
        return v

    def add_node(self, op: Any, inputs: Sequence[Any], attrs: dict, specs: Any = None) -> tuple:
        """Append ``op(*inputs, **attrs)``; output specs come from the op's shape rule unless given."""
        if specs is None:
            specs = abstract_eval(op, tuple(i.spec if isinstance(i, Value) else i for i in inputs), attrs)

        if isinstance(specs, Spec):
            specs = (specs,)
        device = next((i.device for i in inputs if isinstance(i, Value)), None)
        outs = []
        rank = current_rank()
        for k, spec in enumerate(specs):
            v = Value(self, spec.shape, spec.dtype, spec.device if spec.device is not None else _dev(device), "node")
            v.index = k
            v.rank = rank
            outs.append(v)
        node = Node(op, tuple(inputs), attrs, tuple(outs))
        for v in outs:
            v.node = node
        self.nodes.append(node)
        return tuple(outs)

    # ---- queries ---------------------------------------------------------------------------
    def values(self) -> Iterable[Value]:
        yield from self.inputs
        yield from self.states
        yield from self.consts
        for n in self.nodes:
            yield from n.outputs

    def users(self) -> dict:
        """Map value id -> list of nodes reading it."""
        out: dict[int, list] = {}
        for n in self.nodes:
            for i in n.inputs:
                if isinstance(i, Value):
                    out.setdefault(i.id, []).append(n)
        return out

    def copy_structure(self) -> "Graph":
        """A new Graph sharing Values and Nodes' contents (passes rebuild node lists)."""
        g = Graph(self.name)
        g.inputs, g.states, g.consts = list(self.inputs), list(self.states), list(self.consts)
        g.nodes, g.outputs, g.updates = list(self.nodes), list(self.outputs), list(self.updates)
        g.escaped = set(self.escaped)
        g.update_bumps = dict(self.update_bumps)
        return g

    # ---- checking and printing -------------------------------------------------------------
    def validate(self) -> "Graph":
        """Check SSA form, topological order, known ops and shape/dtype consistency; raise on error."""
        defined = {v.id for v in itertools.chain(self.inputs, self.states, self.consts)}
        for k, node in enumerate(self.nodes):
            where = f"graph {self.name!r} node {k} ({format_node(node)})"
            if node.op.category != "fused" and OPS.get(node.op.name) is not node.op:
                raise ValueError(f"{where}: op {node.op.name!r} is not a registered op record")
            for i in node.inputs:
                if isinstance(i, Value) and i.id not in defined:
                    raise ValueError(f"{where}: input {i.label()} is used before it is defined (or not in the graph)")
                if not isinstance(i, (Value, int, float, bool, complex, type(None))):
                    raise ValueError(f"{where}: input {i!r} is neither a Value nor a Python scalar")
            if node.op.category != "fused":
                specs = abstract_eval(node.op, tuple(i.spec if isinstance(i, Value) else i for i in node.inputs),
                                      node.attrs)
                specs = (specs,) if isinstance(specs, Spec) else specs
                for out, spec in zip(node.outputs, specs):
                    if tuple(spec.shape) != out.shape or spec.dtype is not out.edtype:
                        raise ValueError(f"{where}: output {out.label()} is declared {out.type_str()} but the op's "
                                         f"shape rule gives {spec.dtype.name}{list(spec.shape)}")
            for out in node.outputs:
                if out.id in defined:
                    raise ValueError(f"{where}: value {out.label()} is defined twice")
                defined.add(out.id)
        for v in self.outputs:
            if v.id not in defined:
                raise ValueError(f"graph {self.name!r}: output {v.label()} is not defined in the graph")
        for state, new in self.updates:
            if state.kind != "state" or new.id not in defined:
                raise ValueError(f"graph {self.name!r}: bad update {state.label()} <- {new.label()}")
            if state.shape != new.shape:
                raise ValueError(f"graph {self.name!r}: update of {state.label()} {state.type_str()} with "
                                 f"{new.type_str()} changes its shape")
        return self

    def __str__(self) -> str:
        names: dict = {}

        def label(v: Value) -> str:
            return v.label() if v.name else "%" + str(names.setdefault(v.id, len(names)))

        head = ", ".join(f"{label(v)}: {v.type_str()}" for v in self.inputs)
        lines = [f"{self.name}({head}) {{"]
        for v in self.states:
            lines.append(f"  state {label(v)}: {v.type_str()}")
        for v in self.consts:
            lines.append(f"  const {label(v)}: {v.type_str()}")
        for n in self.nodes:
            lines.append("  " + format_node(n, names))
        if self.updates:
            lines.append("  updates " + ", ".join(f"{label(s)} <- {label(v)}" for s, v in self.updates))
        if self.outputs:
            lines.append("  return " + ", ".join(label(v) for v in self.outputs))
        lines.append("}")
        return "\n".join(lines)

    __repr__ = __str__

    def summary(self) -> str:
        counts: dict[str, int] = {}
        for n in self.nodes:
            counts[n.op.name] = counts.get(n.op.name, 0) + 1
        return f"{len(self.nodes)} nodes: " + ", ".join(f"{k} x{v}" for k, v in sorted(counts.items()))


def device_xp(node: Node, default: Any) -> Any:
    """The array namespace a node runs with: its output's device's (a compiled step may keep some
    values on the CPU, like optimizer step counters, while the rest live on a GPU)."""
    device = node.outputs[0].device if node.outputs else None
    return default if device is None else device.xp


def host_array(value: Value) -> np.ndarray:
    """A constant's data on the host (an explicit device -> host copy for device constants)."""
    return to_host(value.data, value.device)


def to_host(array: Any, device: Any) -> np.ndarray:
    """``array`` (of ``device``, or host data) as a NumPy array: an explicit copy for device arrays."""
    if device is not None and device.backend.is_array(array):
        return device.backend.to_numpy(array)
    return np.asarray(array)


def on_device(array: Any, device: Any) -> Any:
    """A new copy of ``array`` (host data or ``device``'s) on ``device`` (the CPU when None)."""
    if device is None or device.type == "cpu":
        return np.array(array)
    return device.backend.asarray(array)


def _dev(device: Any) -> Any:
    return to_device(device)
