"""``torch.ops.aten.<op>.<overload>``: one object per ATen overload, as ``__torch_dispatch__`` receives it.

Each :class:`AtenOverload` is made once (``torch.ops.aten.add.Tensor is torch.ops.aten.add.Tensor``, usable as a
dict key), knows its packet (``func.overloadpacket is torch.ops.aten.add``) and its schema (``func._schema.name ==
"aten::add"``, ``overload_name == "Tensor"``). Calling one runs ember's implementation of it; while a dispatch mode is
active or a dispatch subclass takes part, the call goes to that level first (:mod:`ember._dispatch_levels`), with
autograd recorded above it where the overload is one of ember's op records (:data:`RECORDS`), so a mode sees the very
call made.

Example:
    >>> import ember as torch
    >>> f = torch.ops.aten.mul.Tensor
    >>> f is torch.ops.aten.mul.Tensor, f.overloadpacket is torch.ops.aten.mul, f._schema.overload_name
    (True, True, 'Tensor')
    >>> f(torch.ones(2), 3).tolist()
    [3.0, 3.0]
"""
from __future__ import annotations

from typing import Any, Callable

from ember import _dispatch_levels as levels
from ember.autograd import grad_mode


class Argument:
    """One argument of a schema (``torch._C.Argument``'s common fields)."""

    def __init__(self, name: str, type: str, kwarg_only: bool = False, default_value: Any = None,
                 has_default: bool = False) -> None:
        self.name, self.type, self.kwarg_only = name, type, kwarg_only
        self.default_value, self.has_default_value = default_value, has_default
        self.alias_info = _AliasInfo(type) if "(" in type and "!" in type else None

    def __repr__(self) -> str:
        return f"{self.type} {self.name}"


class _AliasInfo:
    def __init__(self, type: str) -> None:
        self.is_write = True


class FunctionSchema:
    """``func._schema``: name, overload name, arguments and returns; ``str()`` is the schema text."""

    def __init__(self, name: str, overload_name: str, text: str = "") -> None:
        self.name, self.overload_name = name, overload_name
        self._text = text
        self.arguments: list = []
        self.returns: list = []
        if text:
            self._parse(text)

    def _parse(self, text: str) -> None:
        inner = text[text.index("(") + 1:text.rindex(")", 0, text.index("->"))]
        kwarg_only = False
        for part in _split(inner):
            part = part.strip()
            if part == "*":
                kwarg_only = True
                continue
            if not part:
                continue
            decl, _, default = part.partition("=")
            kind, _, name = decl.strip().rpartition(" ")
            self.arguments.append(Argument(name, kind, kwarg_only, default or None, bool(default)))
        self.returns = [Argument("", r.strip()) for r in _split(text.split("->", 1)[1].strip().strip("()")) if r]

    @property
    def is_mutable(self) -> bool:
        return any(a.alias_info is not None for a in self.arguments)

    def __str__(self) -> str:
        if self._text:
            return self._text
        return f"{self.name}{'.' + self.overload_name if self.overload_name else ''}(...) -> ..."

    def __repr__(self) -> str:
        return str(self)


def _split(text: str) -> list:
    """Split at top-level commas (not inside brackets)."""
    out, depth, current = [], 0, []
    for ch in text:
        if ch in "([":
            depth += 1
        elif ch in ")]":
            depth -= 1
        if ch == "," and depth == 0:
            out.append("".join(current))
            current = []
        else:
            current.append(ch)
    out.append("".join(current))
    return out


# Schema texts of the overloads ember presents most (torch 2.13's); others report ``(...) -> ...``.
SCHEMAS: dict[str, str] = {
    "add.Tensor": "(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor",
    "sub.Tensor": "(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor",
    "mul.Tensor": "(Tensor self, Tensor other) -> Tensor",
    "div.Tensor": "(Tensor self, Tensor other) -> Tensor",
    "mm.default": "(Tensor self, Tensor mat2) -> Tensor",
    "bmm.default": "(Tensor self, Tensor mat2) -> Tensor",
    "addmm.default": "(Tensor self, Tensor mat1, Tensor mat2, *, Scalar beta=1, Scalar alpha=1) -> Tensor",
    "t.default": "(Tensor(a) self) -> Tensor(a)",
    "view.default": "(Tensor(a) self, SymInt[] size) -> Tensor(a)",
    "_unsafe_view.default": "(Tensor self, SymInt[] size) -> Tensor",
    "permute.default": "(Tensor(a) self, int[] dims) -> Tensor(a)",
    "expand.default": "(Tensor(a) self, SymInt[] size, *, bool implicit=False) -> Tensor(a)",
    "relu.default": "(Tensor self) -> Tensor",
    "threshold_backward.default": "(Tensor grad_output, Tensor self, Scalar threshold) -> Tensor",
    "sum.default": "(Tensor self, *, ScalarType? dtype=None) -> Tensor",
    "sum.dim_IntList": "(Tensor self, int[1]? dim, bool keepdim=False, *, ScalarType? dtype=None) -> Tensor",
    "mean.default": "(Tensor self, *, ScalarType? dtype=None) -> Tensor",
    "mean.dim": "(Tensor self, int[1]? dim, bool keepdim=False, *, ScalarType? dtype=None) -> Tensor",
    "_softmax.default": "(Tensor self, int dim, bool half_to_float) -> Tensor",
    "_log_softmax.default": "(Tensor self, int dim, bool half_to_float) -> Tensor",
    "_log_softmax_backward_data.default":
        "(Tensor grad_output, Tensor output, int dim, ScalarType input_dtype) -> Tensor",
    "_softmax_backward_data.default":
        "(Tensor grad_output, Tensor output, int dim, ScalarType input_dtype) -> Tensor",
    "nll_loss_forward.default": "(Tensor self, Tensor target, Tensor? weight, int reduction, SymInt ignore_index)"
                                " -> (Tensor output, Tensor total_weight)",
    "nll_loss_backward.default": "(Tensor grad_output, Tensor self, Tensor target, Tensor? weight, int reduction, "
                                 "SymInt ignore_index, Tensor total_weight) -> Tensor",
    "convolution.default": "(Tensor input, Tensor weight, Tensor? bias, SymInt[] stride, SymInt[] padding, "
                           "SymInt[] dilation, bool transposed, SymInt[] output_padding, SymInt groups) -> Tensor",
    "exp.default": "(Tensor self) -> Tensor",
    "tanh.default": "(Tensor self) -> Tensor",
    "sigmoid.default": "(Tensor self) -> Tensor",
    "neg.default": "(Tensor self) -> Tensor",
    "clone.default": "(Tensor self, *, MemoryFormat? memory_format=None) -> Tensor",
    "detach.default": "(Tensor(a) self) -> Tensor(a)",
    "add_.Tensor": "(Tensor(a!) self, Tensor other, *, Scalar alpha=1) -> Tensor(a!)",
    "copy_.default": "(Tensor(a!) self, Tensor src, bool non_blocking=False) -> Tensor(a!)",
}


class AtenOverload:
    """``torch.ops.aten.<op>.<overload>`` (``torch._ops.OpOverload``)."""

    def __init__(self, packet: "AtenPacket", overload: str) -> None:
        self._packet = packet
        self._overloadname = overload
        self._opname = packet.__name__
        self.__name__ = f"{packet.__name__}.{overload}"
        self.__qualname__ = self.__name__
        self.namespace = packet.namespace
        self._impl: Callable = IMPLS.get(self.__name__) or packet._impl
        self._schema = FunctionSchema(packet._qualified_op_name, "" if overload == "default" else overload,
                                      f"{packet._qualified_op_name}{'' if overload == 'default' else '.' + overload}"
                                      + SCHEMAS[self.__name__] if self.__name__ in SCHEMAS else "")
        self.tags: list = []
        self._fx_side_effect = self._opname.endswith("_")  # an in-place op: fx's dead-code pass keeps it

    @property
    def overloadpacket(self) -> "AtenPacket":
        return self._packet

    @property
    def op(self) -> "AtenOverload":
        return self

    def name(self) -> str:
        return self._packet._qualified_op_name + ("" if self._overloadname == "default" else f".{self._overloadname}")

    @property
    def _public_path(self) -> str:
        """How generated fx code names it (ember/fx/node.py checks the path resolves to this object)."""
        return f"ember.ops.{self.namespace}.{self._opname}.{self._overloadname}"

    @property
    def is_view(self) -> bool:
        return "Tensor(a)" in str(self._schema)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if not levels.active(args, kwargs):
            return self._impl(*args, **kwargs)
        to_record = RECORDS.get(self.__name__)
        record = to_record(*args, **kwargs) if to_record is not None else None
        if record is not None:
            op, eargs, attrs = record
            return levels.run(op, eargs, attrs, lambda call: call(self, args, kwargs))
        if grad_mode.STATE.enabled and any(getattr(a, "_requires_grad", False) for a in levels._flat(args, kwargs)):
            return self._impl(*args, **kwargs)  # no record of its own: its ember ops are seen, autograd kept
        return levels.present(self, args, kwargs)

    def _bottom(self, args: tuple, kwargs: dict) -> Any:
        """Below every level: ember's implementation."""
        return self._impl(*args, **kwargs)

    def decompose(self, *args: Any, **kwargs: Any) -> Any:
        return self._impl(*args, **kwargs)

    def redispatch(self, keyset: Any, *args: Any, **kwargs: Any) -> Any:
        return self(*args, **kwargs)

    def __repr__(self) -> str:
        return f"<OpOverload(op='{self._packet._repr_name}', overload='{self._overloadname}')>"

    def __str__(self) -> str:
        return f"{self._packet._repr_name}.{self._overloadname}"

    def __reduce__(self) -> Any:
        return (_overload, (self.namespace, self._opname, self._overloadname))


def _overload(namespace: str, name: str, overload: str) -> AtenOverload:
    return getattr(packet(namespace, name), overload)


class AtenPacket:
    """``torch.ops.aten.<op>`` (``torch._ops.OpOverloadPacket``): its overloads as attributes; calling it picks
    one from the arguments (``.Tensor``/``.Scalar`` for binary ops, else ``.default``)."""

    def __init__(self, namespace: str, name: str, impl: Callable) -> None:
        self.namespace = namespace
        self.__name__ = name
        self._qualified_op_name = f"{namespace}::{name}"
        self._repr_name = f"{namespace}.{name}"
        self._impl = impl
        self._overloads: dict = {}

    def __getattr__(self, overload: str) -> AtenOverload:
        if overload.startswith("__"):
            raise AttributeError(overload)
        found = self._overloads.get(overload)
        if found is None:
            found = self._overloads[overload] = AtenOverload(self, overload)
        return found

    @property
    def _fn(self) -> Callable:
        return self._impl

    def overloads(self) -> list:
        return list(self._overloads) or ["default"]

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        overload = "Tensor" if self.__name__ in _TENSOR_SCALAR else "default"  # (numbers wrap, as in torch)
        return getattr(self, overload)(*args, **kwargs)

    def __repr__(self) -> str:
        return f"<OpOverloadPacket(op='{self._repr_name}')>"

    def __str__(self) -> str:
        return self._repr_name

    def __reduce__(self) -> Any:
        return (packet, (self.namespace, self.__name__))


_TENSOR_SCALAR = frozenset({"add", "sub", "mul", "div", "eq", "ne", "lt", "le", "gt", "ge", "remainder", "fmod",
                            "bitwise_and", "bitwise_or", "bitwise_xor"})
_PACKETS: dict = {}
IMPLS: dict[str, Callable] = {}  # "op.overload" -> ember's implementation where it differs from the packet's
RECORDS: dict[str, Callable] = {}  # "op.overload" -> fn(*args, **kwargs) -> (op record, args, attrs) or None
RESOLVE: dict[str, Callable] = {}  # namespace -> fn(name) -> the packet's implementation (namespaces.py sets aten's)


def packet(namespace: str, name: str) -> AtenPacket:
    """The one packet ``torch.ops.<namespace>.<name>`` (made on first use)."""
    key = (namespace, name)
    found = _PACKETS.get(key)
    if found is None:
        found = _PACKETS[key] = AtenPacket(namespace, name, RESOLVE[namespace](name))
    return found


def aten(name: str, overload: str = "default") -> AtenOverload:
    """``torch.ops.aten.<name>.<overload>``."""
    return getattr(packet("aten", name), overload)
