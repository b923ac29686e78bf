"""PyTorch's deprecated positional overloads, still accepted by torch 2.x with a warning: ``x.add_(alpha, other)``,
``x.sub(alpha, other)``, ``x.addcmul_(value, t1, t2)``, ``x.addcdiv_(value, t1, t2)`` and ``torch.add(x, alpha, y)``
/ ``sub`` / ``addcmul`` / ``addcdiv``. Older optimizers and tutorials are full of them
(``exp_avg.mul_(beta1).add_(1 - beta1, grad)``, ``p.data.addcdiv_(-step_size, exp_avg, denom)``).

>>> import ember
>>> ember.ones(2).add_(0.5, ember.ones(2))  # tensor([1.5, 1.5]), warning once per process, as torch
"""
from __future__ import annotations

import functools
import numbers
import warnings
from typing import Any, Callable

from ember.tensor import Tensor

_WARNED = [False]  # torch warns once per process for all of these (one TORCH_WARN_ONCE in its argument parser)


def _is_number(value: Any) -> bool:
    return isinstance(value, numbers.Number) and not isinstance(value, bool)


def _warn(old: str, new: str) -> None:
    if _WARNED[0]:
        return
    _WARNED[0] = True
    warnings.warn(f"This overload of {old.split('(')[0]} is deprecated:\n\t{old}\nConsider using one of the following "
                  f"signatures instead:\n\t{new}", UserWarning, stacklevel=3)


def _alpha_form(fn: Callable, name: str, method: bool, keyword: str, tensors: int) -> Callable:
    """Wrap ``fn`` so that ``(self, Number, Tensor...)`` means ``(self, Tensor..., keyword=Number)``."""
    if keyword == "alpha":
        old_args, new_args = "Number alpha, Tensor other", "Tensor other, *, Number alpha = 1"
    else:
        old_args = "Number value, Tensor tensor1, Tensor tensor2"
        new_args = "Tensor tensor1, Tensor tensor2, *, Number value = 1"
    if method:
        old, new = f"{name}({old_args})", f"{name}({new_args})"
    else:
        old = f"{name}(Tensor input, {old_args}, *, Tensor out = None)"
        new = f"{name}(Tensor input, {new_args.replace('= 1', '= 1, Tensor out = None')})"

    @functools.wraps(fn)
    def wrapper(input: Any, *args: Any, **kwargs: Any) -> Any:
        if (len(args) == tensors + 1 and _is_number(args[0]) and keyword not in kwargs
                and all(isinstance(a, Tensor) for a in args[1:])):
            _warn(old, new)
            return fn(input, *args[1:], **{keyword: args[0]}, **kwargs)
        return fn(input, *args, **kwargs)

    return wrapper


def install(namespace: Any) -> None:
    """Wrap the Tensor methods and ``namespace``'s (ember's top level) functions of the deprecated overloads."""
    for name, keyword, tensors in (("add", "alpha", 1), ("sub", "alpha", 1), ("addcmul", "value", 2),
                                   ("addcdiv", "value", 2)):
        for method_name in (name, name + "_"):
            setattr(Tensor, method_name, _alpha_form(getattr(Tensor, method_name), method_name, True, keyword, tensors))
        setattr(namespace, name, _alpha_form(getattr(namespace, name), name, False, keyword, tensors))
