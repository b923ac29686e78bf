"""Custom operators: one :class:`OpDef` per ``"namespace::name"``, holding its schema and what runs it -- a
kernel per device type, a composite implementation (recorded by autograd like any Python code), a fake
(meta) implementation, an autograd formula (``backward`` + ``setup_context``) and an autocast rule -- and the
objects PyTorch programs hold: ``torch.ops.<ns>.<name>`` (an :class:`OpOverloadPacket`) and its ``.default``
(an :class:`OpOverload`).

A kernel runs below autograd, as in PyTorch: its own operations are not recorded. With inputs that require
grad, the output is attached to the registered formula, or to a node that refuses to differentiate (naming
``register_autograd``) when there is none. Inputs the schema marks as written (``Tensor(a!)``) have their
version counters bumped after the kernel, so autograd notices the change.

Example:
    >>> import ember
    >>> op = define("demo_doc::twice", "(Tensor x) -> Tensor")
    >>> op.kernels[None] = lambda x: x * 2
    >>> ember.ops.demo_doc.twice(ember.ones(2)).tolist()
    [2.0, 2.0]
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

from ember import _torch_function as _tf
from ember.amp.autocast_mode import is_autocast_enabled
from ember.autograd.function import Function
from ember.custom_ops.schema import Schema, mutated_names, parse_schema
from ember.ops import dispatch
from ember.tensor import Tensor

OPS: dict[str, "OpDef"] = {}


def _tensors(value: Any) -> list:
    if isinstance(value, Tensor):
        return [value]
    if isinstance(value, (list, tuple)):
        return [v for v in value if isinstance(v, Tensor)]
    return []


class OpDef:
    """Everything registered for one custom operator."""

    def __init__(self, qualname: str, schema: Schema, schema_text: str) -> None:
        self.qualname = qualname
        self.namespace, self.name = qualname.split("::")
        self.schema, self.schema_text = schema, schema_text
        self.kernels: dict[str | None, Callable] = {}  # device type ('cpu', 'cuda') or None for every device
        self.composite: Callable | None = None         # CompositeImplicitAutograd: autograd records it
        self.autograd_kernel: Callable | None = None   # an Autograd-key kernel: it handles gradients itself
        self.fake: Callable | None = None
        self.backward: Callable | None = None
        self.setup_context: Callable | None = None
        self.vmap: Callable | None = None
        self.autocast: dict[str, Any] = {}

    @property
    def label(self) -> str:
        return f"{self.namespace}.{self.name}.default"

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        bound = self.schema.bind(self.qualname, args, kwargs)
        inputs = [bound[a.name] for a in self.schema.arguments]
        tensors = [t for value in inputs for t in _tensors(value)]
        device = tensors[0].device.type if tensors else "cpu"
        inputs = self._autocast(inputs, device)
        positional, keywords = self._split(inputs)
        if device == "meta":
            if self.fake is None:
                raise RuntimeError(f"{self.qualname}: no fake (meta) implementation registered; add one with "
                                   f"ember.library.register_fake('{self.qualname}')")
            return self.fake(*positional, **keywords)
        if self.autograd_kernel is not None:
            return self.autograd_kernel(*positional, **keywords)
        if self.composite is not None and device not in self.kernels and None not in self.kernels:
            return self.composite(*positional, **keywords)
        kernel = self.kernels.get(device, self.kernels.get(None))
        if kernel is None:
            raise NotImplementedError(f"{self.qualname}: no kernel for device type {device!r} (registered: "
                                      f"{sorted(k or 'every device' for k in self.kernels) or 'none'}); add one with "
                                      f"ember.library.register_kernel('{self.qualname}', '{device}')")
        wants_grad = dispatch.grad_mode.STATE.enabled and any(
            t.requires_grad and (t.is_floating_point() or t.is_complex()) for t in tensors)
        if not wants_grad:
            return self._run(kernel, inputs)
        flat, spec = _flatten(inputs)
        return _CustomOpFunction.apply(_Call(self, kernel, spec), *flat)

    def _split(self, inputs: list) -> tuple:
        positional = [v for a, v in zip(self.schema.arguments, inputs) if not a.keyword_only]
        keywords = {a.name: v for a, v in zip(self.schema.arguments, inputs) if a.keyword_only}
        return positional, keywords

    def _autocast(self, inputs: list, device: str) -> list:
        dtype = self.autocast.get(device)
        if dtype is None or not _autocast_enabled(device):
            return inputs
        return [v.to(dtype) if isinstance(v, Tensor) and v.is_floating_point() else v for v in inputs]

    def _run(self, kernel: Callable, inputs: list) -> Any:
        """The kernel below autograd, then the schema's promises checked: written inputs get a new version,
        outputs are new tensors (never an input or a view of one)."""
        positional, keywords = self._split(inputs)
        with dispatch.grad_mode.no_grad():
            output = kernel(*positional, **keywords)
        for name in mutated_names(self.schema):
            for t in _tensors(inputs[[a.name for a in self.schema.arguments].index(name)]):
                t._bump()
        _check_no_alias(self.qualname, inputs, output)
        return output


def _autocast_enabled(device: str) -> bool:
    return bool(is_autocast_enabled(device))


def _check_no_alias(qualname: str, inputs: list, output: Any) -> None:
    outs = _tensors(output) if isinstance(output, (list, tuple)) else ([output] if isinstance(output, Tensor) else [])
    ins = [t for value in inputs for t in _tensors(value)]
    for out in outs:
        for t in ins:
            same = out is t
            if not same and isinstance(out._data, np.ndarray) and isinstance(t._data, np.ndarray):
                same = out._data.size > 0 and np.may_share_memory(out._data, t._data)
            if same:
                raise RuntimeError(f"{qualname}: the output of a custom operator must not be an input or a view of "
                                   "one (return x.clone() instead of x)")


def _flatten(inputs: list) -> tuple:
    """Top-level values for Function.apply (a Tensor[] argument spread out) and how to rebuild the arguments."""
    flat, spec = [], []
    for value in inputs:
        if isinstance(value, (list, tuple)) and value and all(isinstance(v, Tensor) for v in value):
            spec.append(("list", len(value), type(value)))
            flat.extend(value)
        else:
            spec.append(("one", 1, None))
            flat.append(value)
    return flat, spec


def _unflatten(flat: list, spec: list) -> list:
    out, i = [], 0
    for kind, count, kind_type in spec:
        out.append(kind_type(flat[i:i + count]) if kind == "list" else flat[i])
        i += count
    return out


class _Call:
    """What one custom-op call carries into its autograd node."""

    def __init__(self, op: OpDef, kernel: Callable, spec: list) -> None:
        self.op, self.kernel, self.spec = op, kernel, spec


class _CustomOpFunction(Function):
    @staticmethod
    def forward(ctx: Any, call: _Call, *flat: Any) -> Any:
        inputs = _unflatten(list(flat), call.spec)
        output = call.op._run(call.kernel, inputs)
        ctx.call = call
        if call.op.setup_context is not None:
            call.op.setup_context(ctx, tuple(inputs), output)
        return output

    @staticmethod
    def backward(ctx: Any, *grads: Any) -> tuple:
        op = ctx.call.op
        if op.backward is None:
            raise RuntimeError(f"Trying to backward through {op.label} but no autograd formula was registered. "
                               "Please use register_autograd to add one.")
        flat_needs = ctx.needs_input_grad[1:]
        per_arg, i = [], 0
        for _, count, _ in ctx.call.spec:
            per_arg.append(any(flat_needs[i:i + count]))
            i += count
        saved = ctx.needs_input_grad
        ctx.needs_input_grad = tuple(per_arg)  # the formula sees one flag per operator argument, as in PyTorch
        try:
            result = op.backward(ctx, *grads)
        finally:
            ctx.needs_input_grad = saved
        result = tuple(result) if isinstance(result, (tuple, list)) else (result,)
        if len(result) != len(ctx.call.spec):
            raise RuntimeError(f"{op.qualname}: the registered backward returned {len(result)} gradients; expected "
                               f"one per operator argument ({len(ctx.call.spec)}), None for non-Tensor arguments")
        flat_grads: list = []
        for (kind, count, _), grad in zip(ctx.call.spec, result):
            if kind == "list":
                flat_grads.extend(list(grad) if grad is not None else [None] * count)
            else:
                flat_grads.append(grad)
        return (None, *flat_grads)


class OpOverload:
    """``torch.ops.<ns>.<name>.<overload>``: a callable operator with its schema."""

    def __init__(self, packet: "OpOverloadPacket", overload: str) -> None:
        self._packet, self._overloadname = packet, overload

    @property
    def _schema(self) -> str:
        return self._packet._schema_text

    def name(self) -> str:
        return self._packet._qualified_op_name + ("" if self._overloadname == "default" else f".{self._overloadname}")

    @property
    def overloadpacket(self) -> "OpOverloadPacket":
        return self._packet

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if _tf.SWITCH.on:  # a Proxy or overriding argument sees the operator (torch.fx records it)
            return _tf.dispatch(self, self._packet._fn, args, kwargs)
        return self._packet._fn(*args, **kwargs)

    def __repr__(self) -> str:
        return f"<OpOverload(op='{self._packet._repr_name}', overload='{self._overloadname}')>"

    def __str__(self) -> str:
        return f"{self._packet._repr_name}.{self._overloadname}"


class OpOverloadPacket:
    """``torch.ops.<ns>.<name>``: calls its default overload; any overload name gives an :class:`OpOverload`."""

    def __init__(self, qualified_name: str, fn: Callable, schema_text: str = "", overloads: tuple = ("default",)) -> None:
        self._qualified_op_name, self._fn, self._schema_text = qualified_name, fn, schema_text
        self._overload_names = overloads
        self._repr_name = qualified_name.replace("::", ".")

    def __getattr__(self, overload: str) -> OpOverload:
        if overload.startswith("__"):
            raise AttributeError(overload)
        return OpOverload(self, overload)

    def overloads(self) -> list:
        return list(self._overload_names)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if _tf.SWITCH.on:
            return _tf.dispatch(self, self._fn, args, kwargs)
        return self._fn(*args, **kwargs)

    def __repr__(self) -> str:
        return f"<OpOverloadPacket(op='{self._repr_name}')>"

    def __str__(self) -> str:
        return self._repr_name


def define(qualname: str, schema: str) -> OpDef:
    """Register ``qualname`` (``"ns::name"``) with ``schema`` (``"(Tensor x) -> Tensor"``, or with the name)."""
    if "::" not in qualname:
        raise ValueError(f"define: expected a qualified name 'namespace::name', got {qualname!r}")
    namespace = qualname.split("::")[0]
    if namespace in ("aten", "prim", "prims"):
        raise RuntimeError(f"define: cannot define {qualname!r}: the '{namespace}' namespace holds ember's built-in "
                           "operators; use a namespace of your own")
    if qualname in OPS:
        raise RuntimeError(f"define: operator {qualname!r} is already defined (each name is defined once; use "
                           "ember.library.register_kernel/impl to add kernels)")
    text = schema.strip()
    parsed = parse_schema(text)
    if parsed.name and parsed.name != qualname.split("::")[1].split(".")[0]:
        raise ValueError(f"define: schema names {parsed.name!r} but the operator is {qualname!r}")
    body = text[text.index("("):]
    op = OpDef(qualname, parsed, f"{qualname}{body}")
    OPS[qualname] = op
    return op


def lookup(op: Any) -> OpDef:
    """The OpDef of a qualified name, an OpOverload(Packet) or a CustomOpDef."""
    if isinstance(op, OpDef):
        return op
    if hasattr(op, "_opdef"):
        return op._opdef
    if isinstance(op, OpOverload):
        op = op._packet
    if isinstance(op, OpOverloadPacket):
        op = op._qualified_op_name
    if isinstance(op, str):
        name = op.split(".")[0] if "::" in op else op
        if name in OPS:
            return OPS[name]
        raise RuntimeError(f"operator {op!r} is not defined; define it with ember.library.custom_op or "
                           "ember.library.define first")
    raise TypeError(f"expected an operator name 'ns::name', an OpOverload or a custom op, got {type(op).__name__}")


def packet(op: OpDef) -> OpOverloadPacket:
    return OpOverloadPacket(op.qualname, op, op.schema_text)


def undefine(qualname: str) -> None:
    OPS.pop(qualname, None)
