"""``torch.func.functionalize``: a function computing the same values with in-place operations replaced by
out-of-place ones. PyTorch needs it to hand mutation-free graphs to its compilers and transforms; ember's
transforms (grad, vmap, ember.compile) handle in-place operations themselves, and in torch.func the input
mutations are still applied to the inputs at the end, so the returned function keeps ``func``'s semantics
exactly by calling it.

Example:
    >>> import ember
    >>> def f(x):
    ...     y = x.clone()
    ...     y.add_(1)
    ...     return y
    >>> ember.func.functionalize(f)(ember.zeros(2))
    tensor([1., 1.])
"""
from __future__ import annotations

import functools
from typing import Any, Callable


def functionalize(func: Callable[..., Any], *, remove: str = "mutations") -> Callable[..., Any]:
    """``func`` with PyTorch's ``functionalize`` contract (same values, inputs' mutations still applied)."""
    if remove not in ("mutations", "mutations_and_views"):
        raise RuntimeError(f"functionalize(f, remove='mutations'): received invalid argument for remove={remove}. "
                           "Valid options are:\n     remove='mutations': all inplace and out= operators will be "
                           "removed from the program, and replaced with their out-of-place equivalents.\n     "
                           "remove='mutations_and_views': In addition to the above, all aliasing operators {view} "
                           "will be replaced with their non-aliasing counterparts, {view}_copy.\n")

    @functools.wraps(func)
    def functionalized(*args: Any, **kwargs: Any) -> Any:
        return func(*args, **kwargs)
    return functionalized
