"""Autocast policies: how an op's floating inputs are cast inside an autocast region.

A policy is a property of an op, so it lives on the op's record (``OpDef.autocast``) and
:func:`ember.ops.dispatch.apply` applies it in one place. Composite functions that are not one
record (``conv2d`` = conv + bias add, ``cross_entropy``, ``addmm`` ...) declare the same policy
with :func:`autocast_policy` at their entry. The policies are PyTorch's (aten/src/ATen/autocast_mode.cpp):

* ``"lower"``   - cast floating inputs to the region's dtype (bfloat16/float16): matmul, linear, conv...
* ``"fp32"``    - cast floating inputs to float32: losses, prod, trace, cdist, linalg...
* ``"promote"`` - cast floating inputs to the widest floating input dtype: cat, stack, index_copy;
* ``"native"``  - a single op in PyTorch that is on no list: inputs untouched, and the ops it is built
  from in ember do not autocast either (``dot`` is not ``matmul`` in PyTorch's eyes).

float64 tensors are never cast (PyTorch leaves them alone too), nor integer/bool tensors. Inside a
decorated composite autocast is suspended, as PyTorch runs an autocast-wrapped op with the Autocast
dispatch key excluded: the ops it is made of see already-cast inputs and apply no policy again.

Example:
    >>> import ember
    >>> a = ember.ones(2, 2)
    >>> with ember.autocast("cpu"):
    ...     (a @ a).dtype, ember.nn.functional.mse_loss(a @ a, a).dtype
    (ember.bfloat16, ember.float32)
"""
from __future__ import annotations

import functools
from typing import Any, Callable
from weakref import ref as _weakref

from ember import dtypes
from ember.amp.state import STATE

POLICIES = ("lower", "fp32", "promote", "native")

_dispatch: Any = None  # ember.ops.dispatch, bound on first use (it imports this module)


def _bind() -> Any:
    global _dispatch
    from ember.ops import dispatch

    _dispatch = dispatch
    return dispatch


def _eligible(t: Any) -> bool:
    """A tensor autocast may cast: floating and not float64 (PyTorch's is_autocast_eligible)."""
    dt = t.dtype
    return dt.is_floating_point and dt is not dtypes.float64


def _target(policy: str, kind: str, tensors: list) -> Any:
    if policy == "lower":
        return STATE.dtype[kind]
    if policy == "fp32":
        return dtypes.float32
    # promote: start from the region's dtype, any float32 input wins (doubles are ignored).
    target = STATE.dtype[kind]
    for t in tensors:
        if _eligible(t) and t.dtype is not target:
            target = dtypes.promote_types(target, t.dtype)
    return target


def _cast(t: Any, target: Any, kind: str) -> Any:
    """Cast one eligible tensor, reusing the region's cast of the same float32 weight (PyTorch's cache)."""
    dispatch = _dispatch or _bind()
    if t.dtype is target:
        return t
    # Only leaf float32 weights that require grad, cast to the region's lower dtype, as PyTorch; never
    # while a graph is built (a cached cast would be a concrete tensor baked into the trace).
    if (STATE.cache_enabled and target is STATE.dtype[kind] and t._requires_grad and t.grad_fn is None
            and t._base is None and t.dtype is dtypes.float32 and not dispatch.is_symbolic(t)):
        grad_on = dispatch.grad_mode.STATE.enabled
        key = (id(t), target)
        hit = STATE.cache.get(key)
        if t._vc is None:  # give the weight a version counter, so an in-place update is seen
            t._vc = [0]
        version = t._vc[0]
        # Unlike PyTorch, a hit also needs the same version (an optimizer step inside the region
        # updates the weight in place) and grad mode (a cast made under no_grad has no history).
        if hit is not None and hit[0]() is t and hit[1] == version and hit[2] == grad_on:
            return hit[3]
        out = dispatch.cast(t, target)
        STATE.cache[key] = (_weakref(t), version, grad_on, out)
        return out
    return dispatch.cast(t, target)


def _device_kind(tensors: list) -> str | None:
    """The device type of the first tensor, when autocast is enabled for it."""
    kind = tensors[0]._device.type
    return kind if STATE.enabled.get(kind) else None


def cast_args(policy: str, args: tuple) -> tuple:
    """Apply ``policy`` to the tensors in ``args`` (a flat tuple, as :func:`dispatch.apply` gets)."""
    if policy == "native":
        return args
    tensor_cls = (_dispatch or _bind()).Tensor
    tensors = [a for a in args if isinstance(a, tensor_cls)]
    if not tensors:
        return args
    kind = _device_kind(tensors)
    if kind is None:
        return args
    target = _target(policy, kind, tensors)
    return tuple(_cast(a, target, kind) if isinstance(a, tensor_cls) and a._device.type == kind and _eligible(a)
                 else a for a in args)


def _cast_tree(value: Any, target: Any, kind: str, tensor_cls: type) -> Any:
    if isinstance(value, tensor_cls):
        return _cast(value, target, kind) if value._device.type == kind and _eligible(value) else value
    if isinstance(value, (list, tuple)) and value and any(isinstance(v, tensor_cls) for v in value):
        return type(value)(_cast_tree(v, target, kind, tensor_cls) for v in value)
    return value


def _tensors_in(args: tuple, kwargs: dict, tensor_cls: type) -> list:
    found = []
    for value in (*args, *kwargs.values()):
        if isinstance(value, tensor_cls):
            found.append(value)
        elif isinstance(value, (list, tuple)):
            found.extend(v for v in value if isinstance(v, tensor_cls))
    return found


def _run_with_policy(policy: str, fn: Callable, args: tuple, kwargs: dict) -> Any:
    tensor_cls = (_dispatch or _bind()).Tensor
    if policy != "native":
        tensors = _tensors_in(args, kwargs, tensor_cls)
        kind = _device_kind(tensors) if tensors else None
        if kind is not None:
            target = _target(policy, kind, tensors)
            args = tuple(_cast_tree(a, target, kind, tensor_cls) for a in args)
            kwargs = {k: _cast_tree(v, target, kind, tensor_cls) for k, v in kwargs.items()}
    STATE.suspended += 1
    STATE.active = False
    try:
        return fn(*args, **kwargs)
    finally:
        STATE.suspended -= 1
        STATE.refresh()


def autocast_policy(policy: str) -> Callable[[Callable], Callable]:
    """Declare the autocast policy of a composite function (one that is not a single op record).

    With autocast off the wrapper costs one thread-local flag check.

    Example:
        >>> @autocast_policy("fp32")  # doctest: +SKIP
        ... def mse_loss(input, target, reduction="mean"): ...
    """
    if policy not in POLICIES:
        raise ValueError(f"autocast_policy: unknown policy {policy!r}; expected one of {POLICIES}")

    def wrap(fn: Callable) -> Callable:
        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            if not STATE.active:
                return fn(*args, **kwargs)
            return _run_with_policy(policy, fn, args, kwargs)

        wrapper.autocast_policy = policy  # type: ignore[attr-defined]
        return wrapper

    return wrap
