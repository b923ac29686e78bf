"""PyTorch's symbolic-size helpers (``torch.SymInt``, ``torch.sym_int``, ``torch.sym_max``, ...) for eager code.

Libraries written for ``torch.compile``'s dynamic shapes call these in place of ``int()``, ``max()``, ``if``;
in eager PyTorch they act on plain numbers. ember traces with concrete shapes (a changed shape retraces),
so no symbolic number ever reaches them: ``SymInt``/``SymFloat``/``SymBool`` exist for ``isinstance`` checks
and have no instances, and each helper computes with Python numbers.

Example:
    >>> import ember as torch
    >>> torch.sym_int(3.7), torch.sym_max(2, 3.0), torch.sym_ite(False, 1, 2), isinstance(3, torch.SymInt)
    (3, 3.0, 2, False)
"""
from __future__ import annotations

import builtins
import math
from typing import Any, Iterable

__all__ = [
    "SymBool", "SymFloat", "SymInt", "sym_constrain_range", "sym_constrain_range_for_size", "sym_float",
    "sym_fresh_size", "sym_int", "sym_ite", "sym_max", "sym_min", "sym_not", "sym_sqrt", "sym_sum",
]


class _Symbolic:
    """A symbolic number of a dynamic-shape trace; ember's traces are concrete, so none is ever made."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise TypeError(f"{type(self).__name__} cannot be created directly: ember traces with concrete shapes, so "
                        "sizes are Python ints (use int/float/bool).")


class SymInt(_Symbolic):
    """``torch.SymInt``: for ``isinstance(n, (int, torch.SymInt))`` checks."""


class SymFloat(_Symbolic):
    """``torch.SymFloat``: for ``isinstance`` checks."""


class SymBool(_Symbolic):
    """``torch.SymBool``: for ``isinstance`` checks."""


def sym_int(a: Any) -> int:
    """``int(a)`` truncating toward zero, as ``torch.sym_int``."""
    return builtins.int(math.trunc(a)) if isinstance(a, builtins.float) else builtins.int(a)


def sym_float(a: Any) -> float:
    return builtins.float(a)


def sym_max(a: Any, b: Any) -> Any:
    """``max(a, b)``; a float and an int give a float, as ``torch.sym_max``."""
    result = builtins.max(a, b)
    return builtins.float(result) if isinstance(a, builtins.float) or isinstance(b, builtins.float) else result


def sym_min(a: Any, b: Any) -> Any:
    result = builtins.min(a, b)
    return builtins.float(result) if isinstance(a, builtins.float) or isinstance(b, builtins.float) else result


def sym_not(a: Any) -> bool:
    return not a


def sym_ite(b: Any, t: Any, f: Any) -> Any:
    """``t if b else f``; ``b`` must be a bool, as in PyTorch."""
    if not isinstance(b, (SymBool, builtins.bool)):
        raise AssertionError(f"expected SymBool or bool, got {type(b)}")
    return t if b else f


def sym_sqrt(a: Any) -> float:
    return math.sqrt(a)


def sym_sum(args: Iterable[Any]) -> Any:
    return builtins.sum(args)


def sym_fresh_size(expr: Any) -> Any:
    return expr


def sym_constrain_range(size: Any, *, min: int | None = None, max: int | None = None) -> None:  # noqa: A002
    """Check a size lies in ``[min, max]`` (PyTorch's eager check); raises ``RuntimeError`` when it does not."""
    low = -math.inf if min is None else min
    high = math.inf if max is None else max
    if isinstance(size, (builtins.int, builtins.float)) and not low <= size <= high:
        raise RuntimeError(f"Invalid value range for {size} between [{min}, {max}].")


def sym_constrain_range_for_size(size: Any, *, min: int | None = None, max: int | None = None) -> None:  # noqa: A002
    """A size hint for dynamic-shape compilers; nothing to check in eager (as PyTorch)."""
