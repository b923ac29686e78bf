"""``torch.fx.experimental.proxy_tensor.make_fx``: trace a function into an fx graph of ATen calls.

``make_fx(f)(*args)`` runs ``f`` once under a dispatch mode (:mod:`ember.utils._python_dispatch`) that computes each
ATen call and records it as a ``call_function`` node whose target is the overload (``ember.ops.aten.mm.default``):
forward, backward and ``autograd.grad`` alike, since a mode sees the backward's ops. Tensors the function reads but
did not get as arguments (parameters, closures) become ``_tensor_constant<i>`` attributes of the GraphModule, as in
torch. The result runs without ember's modes (each target calls ember's implementation).

``tracing_mode``: ``"real"`` traces on the arguments themselves; ``"fake"`` and ``"symbolic"`` trace on zero-filled
stand-ins of the same shapes and dtypes (ember has no fake tensors: values are computed, on zeros, and a function
whose control flow reads values traces the zeros' branch). Sizes are baked into the graph as integers in every
mode (no symbolic shapes). Factory calls (``ember.ones``) are not dispatched ops in ember: their results enter
the graph as constants.

Example:
    >>> import ember
    >>> from ember.fx.experimental.proxy_tensor import make_fx
    >>> gm = make_fx(lambda x, y: (x * y).sum())(ember.ones(3), ember.ones(3))
    >>> [str(n.target) for n in gm.graph.nodes if n.op == "call_function"]
    ['aten.mul.Tensor', 'aten.sum.default']
"""
from __future__ import annotations

import inspect
import operator
from typing import Any, Callable

from ember._aten_overloads import AtenOverload
from ember.creation import zeros
from ember.fx.graph import Graph
from ember.fx.graph_module import GraphModule
from ember.tensor import Tensor
from ember.utils import _pytree as pytree
from ember.utils._python_dispatch import TorchDispatchMode

_MODES = ("real", "fake", "symbolic")


class _Recorder(TorchDispatchMode):
    """Computes each call and records it into ``graph``; tensors map to the nodes that made them."""

    def __init__(self, graph: Graph, constants: dict) -> None:
        super().__init__()
        self.graph = graph
        self.constants = constants
        # id(tensor's array) -> node: by the array, since autograd hands saved tensors back as new Tensor objects
        # over the same array (ember's SavedTensor), where torch keeps the proxy on the tensor itself
        self.nodes: dict[int, Any] = {}
        self.alive: list = []  # the arrays of ``nodes`` (ids stay unique while they live)

    def bind(self, tensor: Any, node: Any) -> None:
        self.nodes[id(tensor._data)] = node
        self.alive.append(tensor._data)

    def node_of(self, value: Any) -> Any:
        if not isinstance(value, Tensor):
            return value
        node = self.nodes.get(id(value._data))
        if node is None:  # a tensor from outside the traced calls: a constant attribute, as torch's
            name = f"_tensor_constant{len(self.constants)}"
            self.constants[name] = value.detach()
            node = self.graph.get_attr(name)
            self.bind(value, node)
        return node

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        node_args = pytree.tree_map(self.node_of, tuple(args))
        node_kwargs = pytree.tree_map(self.node_of, dict(kwargs))
        name = func.overloadpacket.__name__ if isinstance(func, AtenOverload) else None
        node = self.graph.create_node("call_function", func, node_args, node_kwargs, name=name)
        if isinstance(out, (tuple, list)):
            for i, item in enumerate(out):
                if isinstance(item, Tensor):
                    self.bind(item, self.graph.call_function(operator.getitem, (node, i)))
        elif isinstance(out, Tensor):
            self.bind(out, node)
        return out


def _arg_names(f: Callable, count: int) -> list[str]:
    """torch's placeholder names: ``<parameter>_1`` for named parameters, ``arg<i>_1`` for ``*args``."""
    try:
        params = list(inspect.signature(f).parameters.values())
    except (TypeError, ValueError):
        params = []
    names = []
    for p in params:
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and len(names) < count:
            names.append(f"{p.name}_1")
    return names + [f"arg{i}_1" for i in range(len(names), count)]


def _stand_in(value: Any) -> Any:
    """A zero-filled tensor of ``value``'s shape, dtype, device and requires_grad (the "fake" modes' inputs)."""
    if not isinstance(value, Tensor):
        return value
    return zeros(tuple(value.shape), dtype=value.dtype, device=value.device).requires_grad_(value.requires_grad)


def make_fx(f: Callable, decomposition_table: Any = None, tracing_mode: str = "real",
            _allow_non_fake_inputs: bool = False, *, pre_dispatch: bool = False, record_module_stack: bool = False,
            _allow_fake_constant: bool = False, _error_on_data_dependent_ops: bool = True) -> Callable:
    """``make_fx(f)(*args)``: a GraphModule of the ATen calls ``f(*args)`` makes (see the module docstring)."""
    if tracing_mode not in _MODES:
        raise AssertionError(f"make_fx: tracing_mode must be one of {_MODES}, got {tracing_mode!r}")
    if decomposition_table:
        raise NotImplementedError("make_fx: decomposition_table is not supported (ember presents its own "
                                  "decompositions, docs/pytorch-compat.md)")

    def wrapped(*args: Any) -> GraphModule:
        flat, spec = pytree.tree_flatten(args)
        if tracing_mode != "real":
            flat = [_stand_in(v) for v in flat]
        graph = Graph()
        constants: dict = {}
        recorder = _Recorder(graph, constants)
        names = _arg_names(f, len(flat)) if len(flat) == len(args) else [f"arg{i}_1" for i in range(len(flat))]
        for value, name in zip(flat, names):
            node = graph.placeholder(name)
            if isinstance(value, Tensor):
                recorder.bind(value, node)
        with recorder:
            out = f(*pytree.tree_unflatten(flat, spec))
        graph.output(pytree.tree_map(recorder.node_of, out))
        graph.eliminate_dead_code()
        return GraphModule(constants, graph)

    return wrapped


__all__ = ["make_fx"]
