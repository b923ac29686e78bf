"""``torch.fx.Proxy``: the stand-in value symbolic tracing passes through a program; every operator,
method call and attribute read on it records a Node instead of computing.

Example:
    >>> import ember.fx as fx
    >>> gm = fx.symbolic_trace(lambda x: (x * 2).relu())
    >>> [n.op for n in gm.graph.nodes]
    ['placeholder', 'call_function', 'call_method', 'output']
"""
from __future__ import annotations

import dis
import inspect
import operator
from typing import Any

from ember import _torch_function
from ember.fx.node import Node, map_aggregate
from ember.overrides import is_tensor_method_or_property


class TraceError(ValueError):
    """A program did something symbolic tracing cannot record (control flow on a traced value...)."""


class Proxy:
    """A traced value: ``proxy.node`` is the Node that computes it. ``Proxy(node)`` without a tracer appends to
    ``node.graph`` (a ``GraphAppendingTracer``), as torch.fx's: ember functions called on it record nodes there
    through ``__torch_function__``."""

    def __init__(self, node: Node, tracer: Any = None) -> None:
        if tracer is None:
            from ember.fx.tracer import GraphAppendingTracer
            tracer = GraphAppendingTracer(node.graph)
        self.node = node
        self.tracer = tracer
        _torch_function.tracer_alive(tracer)

    @classmethod
    def __torch_function__(cls, orig_method: Any, types: Any, args: Any = (), kwargs: Any = None) -> "Proxy":
        """An ember function or Tensor method given a Proxy records one node, as torch.fx's Proxy does."""
        kwargs = kwargs or {}
        tracers: dict[int, Any] = {}

        def find(a: Any) -> None:
            if isinstance(a, Proxy):
                tracers.setdefault(id(a.tracer), a.tracer)
        map_aggregate((args, kwargs), find)
        if len(tracers) > 1:
            raise RuntimeError(f"Found multiple different tracers {list(tracers.values())} while trying to trace "
                               f"operations {orig_method}")
        tracer = next(iter(tracers.values()))
        if is_tensor_method_or_property(orig_method):
            return tracer.create_proxy("call_method", orig_method.__name__, args, kwargs)
        return tracer.create_proxy("call_function", orig_method, args, kwargs)

    def __repr__(self) -> str:
        return f"Proxy({self.node.name})"

    def __getattr__(self, name: str) -> "Attribute":
        if name.startswith("__") and name.endswith("__"):  # copy/pickle protocol probes: not traced
            raise AttributeError(name)
        return Attribute(self, name)

    def __call__(self, *args: Any, **kwargs: Any) -> "Proxy":
        return self.tracer.create_proxy("call_method", "__call__", (self,) + args, kwargs)

    def __iter__(self) -> Any:
        frame = inspect.currentframe().f_back
        for instruction in dis.get_instructions(frame.f_code):
            if instruction.offset == frame.f_lasti and instruction.opname == "UNPACK_SEQUENCE":
                return (self[i] for i in range(instruction.argval))  # ``a, b = proxy``: the count is known
        raise TraceError("Proxy object cannot be iterated. This can be attempted when the Proxy is used in a loop or "
                         "as a *args or **kwargs function argument. See the torch.fx docs on pytorch.org for a more "
                         "detailed explanation of what types of control flow can be traced, and check out the Proxy "
                         "docstring for help troubleshooting Proxy iteration errors")

    def __bool__(self) -> bool:
        raise TraceError("symbolically traced variables cannot be used as inputs to control flow")

    def __len__(self) -> int:
        raise RuntimeError("'len' is not supported in symbolic tracing by default. If you want this call to be "
                           "recorded, please call torch.fx.wrap('len') at module scope")

    def keys(self) -> Any:
        return self.tracer.create_proxy("call_method", "keys", (self,), {})

    __hash__ = object.__hash__


class Attribute(Proxy):
    """``proxy.name``: a method call when called, else a ``getattr`` node made on first use."""

    def __init__(self, root: Proxy, attr: str) -> None:
        self.root = root
        self.attr = attr
        self.tracer = root.tracer
        self._node: Node | None = None

    @property
    def node(self) -> Node:  # type: ignore[override]
        if self._node is None:
            self._node = self.tracer.create_proxy("call_function", getattr, (self.root, self.attr), {}).node
        return self._node

    def __call__(self, *args: Any, **kwargs: Any) -> Proxy:
        return self.tracer.create_proxy("call_method", self.attr, (self.root,) + args, kwargs)


def _binary(op: Any, reflected: bool) -> Any:
    def method(self: Proxy, other: Any) -> Proxy:
        args = (other, self) if reflected else (self, other)
        return self.tracer.create_proxy("call_function", op, args, {})
    return method


def _unary(op: Any) -> Any:
    def method(self: Proxy) -> Proxy:
        return self.tracer.create_proxy("call_function", op, (self,), {})
    return method


for _name, _op in (("add", operator.add), ("sub", operator.sub), ("mul", operator.mul), ("truediv", operator.truediv),
                   ("floordiv", operator.floordiv), ("mod", operator.mod), ("pow", operator.pow),
                   ("matmul", operator.matmul), ("and", operator.and_), ("or", operator.or_), ("xor", operator.xor),
                   ("lshift", operator.lshift), ("rshift", operator.rshift)):
    setattr(Proxy, f"__{_name}__", _binary(_op, False))
    setattr(Proxy, f"__r{_name}__", _binary(_op, True))
for _name, _op in (("eq", operator.eq), ("ne", operator.ne), ("lt", operator.lt), ("le", operator.le),
                   ("gt", operator.gt), ("ge", operator.ge), ("getitem", operator.getitem)):
    setattr(Proxy, f"__{_name}__", _binary(_op, False))
for _name, _op in (("neg", operator.neg), ("pos", operator.pos), ("invert", operator.invert), ("abs", operator.abs)):
    setattr(Proxy, f"__{_name}__", _unary(_op))
