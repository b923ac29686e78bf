"""``torch.cond`` and ``torch.while_loop``: control flow as functions, so traced programs keep both branches.

Eagerly each runs Python's ``if``/``while`` on the predicate's value. While :func:`ember.compile` traces, a
tensor predicate has no value yet, so ``cond`` evaluates both branches and selects with ``where`` (both must
give tensors of the same shapes, as PyTorch requires of ``cond``'s branches); ``while_loop`` on a traced
predicate is refused with a message (its trip count is data).

Example:
    >>> import ember as torch
    >>> x = torch.arange(3.0)
    >>> torch.cond(x.sum() > 1, lambda t: t + 1, lambda t: t - 1, (x,)).tolist()
    [1.0, 2.0, 3.0]
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

from ember import interpreters
from ember.func import pytree
from ember.ops.elementwise import where
from ember.tensor import Tensor

__all__ = ["cond", "while_loop"]


def _check_pred(pred: Any) -> None:
    if isinstance(pred, Tensor) and pred.numel() != 1:
        raise RuntimeError(f"cond: expected pred to be a bool or a single-element tensor, but got a tensor of shape "
                           f"{list(pred.shape)}.")
    if not isinstance(pred, (bool, int, Tensor)):
        raise RuntimeError(f"cond: expected pred to be a bool or a single-element tensor, got {type(pred).__name__}.")


def _operands(name: str, operands: Any) -> tuple:
    if operands is None:
        return ()
    if not isinstance(operands, (tuple, list)):
        raise RuntimeError(f"{name}: operands must be a tuple or list of tensors, got {type(operands).__name__}.")
    return tuple(operands)


def cond(pred: Any, true_fn: Callable[..., Any], false_fn: Callable[..., Any],
         operands: Sequence[Any] | None = ()) -> Any:
    """``true_fn(*operands)`` if ``pred`` else ``false_fn(*operands)``; in a trace, both and a ``where``."""
    _check_pred(pred)
    args = _operands("cond", operands)
    if isinstance(pred, Tensor) and interpreters.tracing():
        return _select_traced(pred, true_fn(*args), false_fn(*args))
    return true_fn(*args) if bool(pred) else false_fn(*args)


def _select_traced(pred: Tensor, on_true: Any, on_false: Any) -> Any:
    true_leaves, true_spec = pytree.tree_flatten(on_true)
    false_leaves, false_spec = pytree.tree_flatten(on_false)
    if true_spec != false_spec:
        raise RuntimeError("cond: true_fn and false_fn must return the same structure of outputs, got "
                           f"{true_spec} and {false_spec}.")
    picked = []
    for a, b in zip(true_leaves, false_leaves):
        if not (isinstance(a, Tensor) and isinstance(b, Tensor)):
            raise RuntimeError("cond: inside ember.compile both branches must return tensors, got "
                               f"{type(a).__name__} and {type(b).__name__}.")
        if tuple(a.shape) != tuple(b.shape) or a.dtype != b.dtype:
            raise RuntimeError(f"cond: both branches must return tensors of the same shape and dtype, got "
                               f"{list(a.shape)} {a.dtype} and {list(b.shape)} {b.dtype}.")
        picked.append(where(pred.reshape(()), a, b))
    return pytree.tree_unflatten(picked, true_spec)


def while_loop(cond_fn: Callable[..., Any], body_fn: Callable[..., Any], carried_inputs: Sequence[Any]) -> Any:
    """Run ``carried = body_fn(*carried)`` while ``cond_fn(*carried)``; returns the last ``carried`` (a tuple)."""
    carried = _operands("while_loop", carried_inputs)
    while True:
        keep_going = cond_fn(*carried)
        if isinstance(keep_going, Tensor):
            if keep_going.numel() != 1:
                raise RuntimeError("while_loop: cond_fn must return a bool or a single-element tensor, got a tensor "
                                   f"of shape {list(keep_going.shape)}.")
            if interpreters.tracing():
                raise RuntimeError("while_loop: the loop's condition depends on traced tensor values, so "
                                   "ember.compile cannot fix its trip count; call it outside the compiled function "
                                   "or loop a fixed number of times.")
        if not bool(keep_going):
            return carried
        result = body_fn(*carried)
        result = tuple(result) if isinstance(result, (tuple, list)) else (result,)
        if len(result) != len(carried):
            raise RuntimeError(f"while_loop: body_fn must return as many values as it takes ({len(carried)}), "
                               f"got {len(result)}.")
        carried = result
