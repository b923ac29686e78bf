"""``torch.library``: custom operators defined in Python, PyTorch's way.

``custom_op`` turns a typed function into an operator (``torch.ops.<ns>.<name>``) that autograd treats as one
opaque step: give it a formula with ``register_autograd``, a meta implementation with ``register_fake``,
kernels per device with ``register_kernel``. The lower-level ``Library(ns, "DEF"/"FRAGMENT").define(schema)``
plus ``impl(name, fn, dispatch_key)`` works too (dispatch keys ``CPU``, ``CUDA``, ``Meta``,
``CompositeExplicitAutograd``, ``CompositeImplicitAutograd``, ``Autograd``). ``opcheck`` runs PyTorch's checks
that a registration is consistent.

Decisions: ember has no C++ dispatcher, so keys map onto the :class:`ember.custom_ops.registry.OpDef` slots;
ATen's own kernels cannot be replaced (``Library("aten", "IMPL")`` is refused); ``triton_op``/``wrap_triton``
and ``register_torch_dispatch`` are refused by name; ``register_vmap`` rules are stored but ``ember.func.vmap``
runs a custom op per sample (it does not call them yet).

Example:
    >>> import ember, numpy as np
    >>> @custom_op("demo_lib::numpy_sin", mutates_args=())
    ... def numpy_sin(x: ember.Tensor) -> ember.Tensor:
    ...     return ember.from_numpy(np.sin(x.numpy()))
    >>> def backward(ctx, grad):
    ...     (x,) = ctx.saved_tensors
    ...     return grad * x.cos()
    >>> numpy_sin.register_autograd(backward, setup_context=lambda ctx, inputs, output: ctx.save_for_backward(*inputs))
    >>> x = ember.zeros(2, requires_grad=True)
    >>> ember.ops.demo_lib.numpy_sin(x).sum().backward()
    >>> x.grad.tolist()
    [1.0, 1.0]
"""
from __future__ import annotations

import copy
from typing import Any, Callable

from ember.custom_ops import registry
from ember.custom_ops.registry import OpDef, OpOverload, lookup
from ember.custom_ops.schema import infer_schema
from ember.tensor import Tensor

__all__ = ["Library", "impl", "define", "fallthrough_kernel", "impl_abstract", "register_autocast", "register_fake",
           "register_torch_dispatch", "register_vmap", "get_ctx", "get_kernel", "custom_op", "triton_op",
           "wrap_triton", "infer_schema", "opcheck", "register_autograd", "register_kernel", "CustomOpDef"]


def fallthrough_kernel() -> None:
    """A kernel that does nothing (PyTorch uses it to skip a dispatch key); registering it changes nothing."""


def _device_types(types: Any) -> list:
    if types is None:
        return [None]
    types = [types] if isinstance(types, str) else list(types)
    return [str(t).split(":")[0].lower() for t in types]


def _register_key(op: OpDef, key: str, fn: Callable) -> None:
    if fn is fallthrough_kernel:
        return
    slots = {"CPU": "cpu", "CUDA": "cuda"}
    if key in slots:
        op.kernels[slots[key]] = fn
    elif key in ("CompositeExplicitAutograd", "Default"):
        op.kernels[None] = fn
    elif key in ("", "CompositeImplicitAutograd"):
        op.composite = fn
    elif key in ("Meta", "Fake"):
        op.fake = fn
    elif key.startswith("Autograd"):
        op.autograd_kernel = fn
    else:
        raise ValueError(f"impl: unsupported dispatch key {key!r} for {op.qualname}; use one of CPU, CUDA, Meta, "
                         "CompositeExplicitAutograd, CompositeImplicitAutograd, Autograd")


class Library:
    """``torch.library.Library(ns, kind)``: ``kind`` is ``"DEF"`` (the namespace's one definer), ``"FRAGMENT"``
    (more definitions) or ``"IMPL"`` (kernels for operators defined elsewhere)."""

    def __init__(self, ns: str, kind: str, dispatch_key: str = "") -> None:
        if kind not in ("DEF", "IMPL", "FRAGMENT"):
            raise ValueError(f"Library: unsupported kind {kind!r}; use 'DEF', 'IMPL' or 'FRAGMENT'")
        if ns in ("aten", "prim", "prims"):
            raise RuntimeError(f"Library({ns!r}, {kind!r}): ember's built-in operators cannot be redefined or given "
                               "new kernels; define your own namespace")
        self.ns, self.kind, self.dispatch_key = ns, kind, dispatch_key
        self._defined: list = []

    def define(self, schema: str, alias_analysis: str = "", *, tags: Any = ()) -> str:
        if self.kind == "IMPL":
            raise RuntimeError(f"Library({self.ns!r}, 'IMPL').define: an IMPL library cannot define operators; use "
                               "'DEF' or 'FRAGMENT'")
        name = schema.split("(", 1)[0].strip()
        op = registry.define(f"{self.ns}::{name.split('.')[0]}", schema)
        self._defined.append(op.qualname)
        return name

    def impl(self, op_name: Any, fn: Callable, dispatch_key: str = "", *, with_keyset: bool = False,
             allow_override: bool = True) -> None:
        if with_keyset:
            raise NotImplementedError("Library.impl(with_keyset=True): ember has no dispatch key sets")
        name = op_name if not isinstance(op_name, str) or "::" in op_name else f"{self.ns}::{op_name.split('.')[0]}"
        _register_key(lookup(name), dispatch_key or self.dispatch_key, fn)

    def fallback(self, fn: Callable, dispatch_key: str = "", *, with_keyset: bool = False) -> None:
        raise NotImplementedError("Library.fallback: ember has no boxed fallback kernels")

    def _destroy(self) -> None:
        for qualname in self._defined:
            registry.undefine(qualname)
        self._defined.clear()


def define(qualname: str, schema: str, *, lib: Library | None = None, tags: Any = ()) -> None:
    """``torch.library.define("ns::name", "(Tensor x) -> Tensor")``."""
    registry.define(qualname, schema)


def impl(qualname: str, types: Any, func: Callable | None = None, *, lib: Library | None = None) -> Any:
    """Register ``func`` for device types (``"cpu"``, ``"cuda"``) or a dispatch key; a decorator without ``func``."""
    def register(fn: Callable) -> Callable:
        op = lookup(qualname)
        for t in ([types] if isinstance(types, str) else list(types)):
            if t.lower() in ("cpu", "cuda"):
                op.kernels[t.lower()] = fn
            else:
                _register_key(op, t, fn)
        return fn

    return register if func is None else register(func)


def register_kernel(op: Any, device_types: Any, func: Callable | None = None, /, *,
                    lib: Library | None = None) -> Any:
    """A kernel for ``device_types`` (``None``: every device); a decorator without ``func``."""
    def register(fn: Callable) -> Callable:
        target = lookup(op)
        for device in _device_types(device_types):
            target.kernels[device] = fn
        return fn

    return register if func is None else register(func)


def register_fake(op: Any, func: Callable | None = None, /, *, lib: Library | None = None, _stacklevel: int = 1,
                  allow_override: bool = True) -> Any:
    """The meta implementation: given meta tensors, it returns empty meta tensors of the output's shape/dtype."""
    def register(fn: Callable) -> Callable:
        lookup(op).fake = fn
        return fn

    return register if func is None else register(func)


impl_abstract = register_fake


def register_autograd(op: Any, backward: Callable, /, *, setup_context: Callable | None = None,
                      lib: Library | None = None) -> None:
    """``backward(ctx, *grads)`` returns one gradient per operator argument (None for non-Tensors);
    ``setup_context(ctx, inputs, output)`` saves what it needs."""
    target = lookup(op)
    target.backward, target.setup_context = backward, setup_context


def register_autocast(op: Any, device_type: str, cast_inputs: Any, /, *, lib: Library | None = None) -> None:
    """Under autocast on ``device_type``, floating-point Tensor inputs are cast to ``cast_inputs`` first."""
    lookup(op).autocast[device_type] = cast_inputs


def register_vmap(op: Any, func: Callable | None = None, /, *, lib: Library | None = None) -> Any:
    """Stores a vmap rule (see the module's decisions: ember's vmap runs custom ops per sample today)."""
    def register(fn: Callable) -> Callable:
        lookup(op).vmap = fn
        return fn

    return register if func is None else register(func)


def register_torch_dispatch(op: Any, torch_dispatch_class: Any, func: Callable | None = None, /, *,
                            lib: Library | None = None) -> Any:
    raise NotImplementedError("register_torch_dispatch: ember has no __torch_dispatch__ subclasses")


def get_kernel(op: Any, dispatch_key: Any) -> Callable:
    """The kernel registered for a device type or dispatch key."""
    target, key = lookup(op), str(dispatch_key)
    table = {"CPU": target.kernels.get("cpu"), "CUDA": target.kernels.get("cuda"),
             "CompositeExplicitAutograd": target.kernels.get(None), "CompositeImplicitAutograd": target.composite,
             "Meta": target.fake}
    kernel = table.get(key) or target.kernels.get(key.lower())
    if kernel is None:
        raise RuntimeError(f"get_kernel: {target.qualname} has no kernel for {key!r}")
    return kernel


class _FakeImplCtx:
    def new_dynamic_size(self, *, min: int = 0, max: int | None = None) -> int:
        raise RuntimeError("get_ctx().new_dynamic_size: ember's meta tensors have concrete shapes; a data-dependent "
                           "output size needs the real kernel")


def get_ctx() -> _FakeImplCtx:
    """The context of a fake implementation (PyTorch's FakeImplCtx)."""
    return _FakeImplCtx()


def triton_op(name: str, fn: Callable | None = None, /, *, mutates_args: Any = None, schema: str | None = None) -> Any:
    raise NotImplementedError("triton_op: ember does not run Triton kernels; write the operator with custom_op")


def wrap_triton(triton_kernel: Any, /) -> Any:
    raise NotImplementedError("wrap_triton: ember does not run Triton kernels")


class CustomOpDef:
    """What ``@custom_op`` returns: calling it runs the operator; ``register_*`` add to it."""

    def __init__(self, opdef: OpDef, fn: Callable) -> None:
        self._opdef, self._init_fn = opdef, fn
        self._namespace, self._name = opdef.namespace, opdef.name
        self.__name__ = getattr(fn, "__name__", opdef.name)
        self.__doc__ = getattr(fn, "__doc__", None)

    @property
    def _opoverload(self) -> OpOverload:
        return registry.packet(self._opdef).default

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._opdef(*args, **kwargs)

    def register_kernel(self, device_types: Any, fn: Callable | None = None, /) -> Any:
        return register_kernel(self._opdef, device_types, fn)

    def register_fake(self, fn: Callable, /) -> Callable:
        return register_fake(self._opdef, fn)

    def register_autograd(self, backward: Callable, /, *, setup_context: Callable | None = None) -> None:
        register_autograd(self._opdef, backward, setup_context=setup_context)

    def register_vmap(self, func: Callable | None = None) -> Any:
        return register_vmap(self._opdef, func)

    def register_autocast(self, device_type: str, cast_inputs: Any) -> None:
        register_autocast(self._opdef, device_type, cast_inputs)

    def register_torch_dispatch(self, torch_dispatch_class: Any, fn: Callable | None = None, /) -> Any:
        return register_torch_dispatch(self._opdef, torch_dispatch_class, fn)

    def __repr__(self) -> str:
        return f"<CustomOpDef({self._opdef.qualname})>"


def custom_op(name: str, fn: Callable | None = None, /, *, mutates_args: Any, device_types: Any = None,
              schema: str | None = None, tags: Any = None) -> Any:
    """Make ``fn`` (typed; its annotations give the schema unless ``schema=`` is given) the operator ``name``
    (``"ns::name"``); a decorator without ``fn``. ``mutates_args`` names the arguments it writes (``()``: none)."""
    def make(function: Callable) -> CustomOpDef:
        text = schema if schema is not None else infer_schema(function, mutates_args=mutates_args)
        op = registry.define(name, text)
        for device in _device_types(device_types):
            op.kernels[device] = function
        return CustomOpDef(op, function)

    return make if fn is None else make(fn)


def opcheck(op: Any, args: tuple, kwargs: dict | None = None, *,
            test_utils: Any = ("test_schema", "test_autograd_registration", "test_faketensor",
                               "test_aot_dispatch_dynamic"), raise_exception: bool = True, atol: Any = None,
            rtol: Any = None) -> dict:
    """PyTorch's registration checks on one call: the schema's mutation promises hold (inputs it does not mark as
    written are unchanged), an operator called with inputs that require grad has an autograd formula, the fake
    implementation agrees with the kernel on shapes and dtypes, and a second call gives the same result.
    Returns ``{test: "SUCCESS" | "SKIPPED" | error}``; raises ``OpCheckError`` on a failure unless told not to."""
    target, kwargs = lookup(op), dict(kwargs or {})
    tests = [test_utils] if isinstance(test_utils, str) else list(test_utils)
    results: dict = {}
    for test in tests:
        try:
            results[test] = _OPCHECKS[test](target, args, kwargs)
        except Exception as error:  # noqa: BLE001  (reported per test, as PyTorch does)
            if raise_exception:
                raise OpCheckError(f"opcheck(op, ...): {test} failed with {error}") from error
            results[test] = error
    return results


class OpCheckError(Exception):
    """A registration check of :func:`opcheck` failed."""


def _clone_args(args: tuple, kwargs: dict) -> tuple:
    def clone(value: Any) -> Any:
        if isinstance(value, Tensor):
            return value.detach().clone().requires_grad_(value.requires_grad)
        if isinstance(value, (list, tuple)):
            return type(value)(clone(v) for v in value)
        return copy.copy(value)

    return tuple(clone(a) for a in args), {k: clone(v) for k, v in kwargs.items()}


def _check_schema(op: OpDef, args: tuple, kwargs: dict) -> str:
    before, _ = _clone_args(args, kwargs)
    a, k = _clone_args(args, kwargs)
    op(*a, **k)
    written = set(registry.mutated_names(op.schema))
    names = [arg.name for arg in op.schema.arguments]
    for name, old, new in zip(names, before, a):
        if isinstance(old, Tensor) and name not in written and not bool((old.detach() == new.detach()).all()):
            raise RuntimeError(f"argument {name} was changed by the operator but its schema does not mark it as "
                               f"written (add it to mutates_args)")
    return "SUCCESS"


def _check_autograd(op: OpDef, args: tuple, kwargs: dict) -> str:
    needs = any(isinstance(t, Tensor) and t.requires_grad for t in list(args) + list(kwargs.values()))
    if not needs:
        return "SUCCESS"
    if op.backward is None and op.composite is None and op.autograd_kernel is None:
        raise RuntimeError(f"{op.qualname} is called with inputs that require grad but has no autograd formula; "
                           "register one with register_autograd")
    return "SUCCESS"


def _check_fake(op: OpDef, args: tuple, kwargs: dict) -> str:
    if op.fake is None:
        return "SKIPPED"
    a, k = _clone_args(args, kwargs)
    real = op(*a, **k)
    meta = lambda v: v.detach().to("meta") if isinstance(v, Tensor) else v  # noqa: E731
    fake = op.fake(*[meta(v) for v in a], **{key: meta(v) for key, v in k.items()})
    reals = real if isinstance(real, (tuple, list)) else (real,)
    fakes = fake if isinstance(fake, (tuple, list)) else (fake,)
    for r, f in zip(reals, fakes):
        if isinstance(r, Tensor) and (tuple(r.shape) != tuple(f.shape) or r.dtype != f.dtype):
            raise RuntimeError(f"the fake implementation returned shape {tuple(f.shape)} {f.dtype}; the kernel "
                               f"returned {tuple(r.shape)} {r.dtype}")
    return "SUCCESS"


def _check_repeatable(op: OpDef, args: tuple, kwargs: dict) -> str:
    first = op(*_clone_args(args, kwargs)[0], **_clone_args(args, kwargs)[1])
    second = op(*_clone_args(args, kwargs)[0], **_clone_args(args, kwargs)[1])
    for x, y in zip(first if isinstance(first, (tuple, list)) else (first,),
                    second if isinstance(second, (tuple, list)) else (second,)):
        if isinstance(x, Tensor) and not bool(x.detach().eq(y.detach()).logical_or(x.isnan() & y.isnan()).all()):
            raise RuntimeError("two calls with the same inputs gave different results")
    return "SUCCESS"


_OPCHECKS: dict[str, Callable] = {"test_schema": _check_schema, "test_autograd_registration": _check_autograd,
                                  "test_faketensor": _check_fake, "test_aot_dispatch_dynamic": _check_repeatable}
