"""``torch.autograd.function.NestedIOFunction`` (kept by PyTorch for old code) and
``torch.autograd.enforce_grad_layout_policy``.

A NestedIOFunction is an *instance* with ``forward_extended`` / ``backward_extended`` whose inputs and
outputs may be nested tuples/lists of tensors; calling it runs an autograd Function over the flattened
tensors. The layout policy is recorded per thread; ember's accumulated gradients are always fresh row-major
arrays, so neither setting changes a gradient here (in PyTorch ``False`` only lets the engine keep a
mismatched layout it could steal).

Example:
    >>> import ember
    >>> class Mul(NestedIOFunction):
    ...     def forward_extended(self, a, b):
    ...         self.save_for_backward(a, b)
    ...         return a * b
    ...     def backward_extended(self, g):
    ...         a, b = self.saved_tensors
    ...         return g * b, g * a
    >>> x = ember.tensor(3.0, requires_grad=True)
    >>> Mul()(x, ember.tensor(2.0)).backward(); x.grad.item()
    2.0
"""
from __future__ import annotations

import threading
from typing import Any, Iterator

from ember.autograd.function import Function
from ember.tensor import Tensor

__all__ = ["NestedIOFunction", "enforce_grad_layout_policy"]


def _iter_tensors(obj: Any) -> Iterator[Any]:
    if isinstance(obj, Tensor):
        yield obj
    elif isinstance(obj, (list, tuple)):
        for item in obj:
            yield from _iter_tensors(item)


def _iter_none_tensors(obj: Any) -> Iterator[Any]:
    if obj is None or isinstance(obj, Tensor):
        yield obj
    elif isinstance(obj, (list, tuple)):
        for item in obj:
            yield from _iter_none_tensors(item)


def _unflatten(flat: Any, structure: Any) -> Any:
    it = iter(flat)

    def build(s: Any) -> Any:
        if isinstance(s, (list, tuple)):
            return type(s)(build(item) for item in s)
        return next(it) if isinstance(s, Tensor) or s is None else s
    return build(structure)


class _Bridge(Function):
    @staticmethod
    def forward(ctx: Any, fn: "NestedIOFunction", *flat: Tensor) -> Any:
        ctx.fn = fn
        nested = _unflatten([t.detach() for t in flat], fn._nested_input)
        fn._nested_output = fn.forward_extended(*nested)
        outs = tuple(_iter_tensors(fn._nested_output))
        if getattr(fn, "non_differentiable", None):
            ctx.mark_non_differentiable(*fn.non_differentiable)
        return outs if len(outs) != 1 else outs[0]

    @staticmethod
    def backward(ctx: Any, *grads: Any) -> tuple:
        fn = ctx.fn
        nested = _unflatten(list(grads), fn._nested_output)
        result = fn.backward_extended(*(nested if isinstance(fn._nested_output, (list, tuple)) else (nested,)))
        result = result if isinstance(result, tuple) else (result,)
        return (None, *_iter_none_tensors(result))


class NestedIOFunction:
    """Subclass and define ``forward_extended(self, *inputs)`` and ``backward_extended(self, *grads)``."""

    def __call__(self, *inputs: Any) -> Any:
        self._nested_input = inputs
        outs = _Bridge.apply(self, *_iter_tensors(inputs))
        flat = outs if isinstance(outs, tuple) else (outs,)
        return _unflatten(list(flat), self._nested_output)

    def save_for_backward(self, *args: Any) -> None:
        self._to_save_nested = args

    @property
    def saved_tensors(self) -> Any:
        return self._to_save_nested

    def mark_dirty(self, *args: Any, **kwargs: Any) -> None:
        self.dirty_tensors = tuple(_iter_tensors((args, tuple(kwargs.values()))))

    def mark_non_differentiable(self, *args: Any, **kwargs: Any) -> None:
        self.non_differentiable = tuple(_iter_tensors((args, tuple(kwargs.values()))))

    def forward_extended(self, *input: Any) -> Any:
        raise NotImplementedError

    def backward_extended(self, *grad_output: Any) -> Any:
        raise NotImplementedError


class _LayoutState(threading.local):
    enforce: bool = True


_LAYOUT = _LayoutState()


class enforce_grad_layout_policy:
    """``with enforce_grad_layout_policy(False): ...`` or a plain call (switches at once, like
    ``set_grad_enabled``); thread-local."""

    def __init__(self, enable: bool = True) -> None:
        self._previous = _LAYOUT.enforce
        _LAYOUT.enforce = bool(enable)

    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: Any) -> None:
        _LAYOUT.enforce = self._previous

    @staticmethod
    def is_enabled() -> bool:
        return _LAYOUT.enforce
