"""``torch.func.functionalize`` and ``torch.func.debug_unwrap``.

``functionalize(func)`` returns a function with ``func``'s semantics whose outputs never alias its inputs.
PyTorch's transform rewrites in-place and ``out=`` ops as out-of-place ones while the function runs, then writes
the final values back into mutated inputs: what a caller observes is ``func``'s result, with every input mutation
applied and outputs that are fresh tensors. That is what ember's version gives: the function runs eagerly (its
mutations land in the inputs as it goes), and an output that shares memory with an input is returned as a copy
(with ``remove="mutations_and_views"`` as PyTorch's ``{view}_copy`` ops give, and with ``"mutations"`` too, where
PyTorch's outputs are likewise new tensors). Graph capture does not need the rewrite: ``ember.compile``,
``ember.export`` and ONNX export already record in-place ops as functional graph values.

``debug_unwrap(t)`` returns the tensor a vmap-batched ``t`` wraps (the whole batch, one level down; all levels
with ``recurse=True``), and ``t`` itself otherwise.

Example:
    >>> import ember
    >>> from ember.func import functionalize
    >>> x = ember.zeros(3)
    >>> def f(t):
    ...     t.add_(1)
    ...     return t.view(3)
    >>> y = functionalize(f)(x)
    >>> x.tolist(), y.tolist(), y.data_ptr() == x.data_ptr()
    ([1.0, 1.0, 1.0], [1.0, 1.0, 1.0], False)
"""
from __future__ import annotations

import functools
from typing import Any, Callable

from ember.func.batched import BatchedValue
from ember.func.pytree import tree_flatten, tree_unflatten
from ember.ops import dispatch

__all__ = ["functionalize", "debug_unwrap"]

_REMOVE = ("mutations", "mutations_and_views")


def functionalize(func: Callable, *, remove: str = "mutations") -> Callable:
    """``func`` with PyTorch's functionalize semantics: input mutations applied, outputs never aliasing inputs.

    Example:
        >>> import ember
        >>> functionalize(lambda t: t * 2)(ember.ones(2)).tolist()
        [2.0, 2.0]
    """
    if remove not in _REMOVE:
        raise RuntimeError(
            f"functionalize(f, remove='mutations'): received invalid argument for remove={remove}. Valid options "
            "are:\n     remove='mutations': all inplace and out= operators will be removed from the program, and "
            "replaced with their out-of-place equivalents.\n     remove='mutations_and_views': In addition to the "
            "above, all aliasing operators {view} will be replaced with their non-aliasing counterparts, "
            "{view}_copy.\n")

    @functools.wraps(func)
    def wrapped(*args: Any, **kwargs: Any) -> Any:
        out = func(*args, **kwargs)
        inputs, _ = tree_flatten((args, kwargs))  # a view shares its base's version counter (made on first view)
        counters = {id(t._vc) for t in inputs if isinstance(t, dispatch.Tensor) and getattr(t, "_vc", None) is not None}
        leaves, spec = tree_flatten(out)
        fresh = [t.clone() if isinstance(t, dispatch.Tensor) and id(getattr(t, "_vc", None)) in counters else t
                 for t in leaves]
        return tree_unflatten(fresh, spec)

    return wrapped


def debug_unwrap(tensor: Any, *, recurse: bool = True) -> Any:
    """The tensor a vmap-batched ``tensor`` wraps (one level, or every level with ``recurse``); else ``tensor``.

    Example:
        >>> import ember
        >>> from ember.func import vmap
        >>> vmap(lambda t: debug_unwrap(t).sum() * 0 + t)(ember.ones(2, 3)).shape
        ember.Size([2, 3])
    """
    while isinstance(tensor, dispatch.Tensor) and type(tensor._data) is BatchedValue:
        tensor = tensor._data.value
        if not recurse:
            break
    return tensor
