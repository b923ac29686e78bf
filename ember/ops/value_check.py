"""Fill values must be numbers: ``x[0] = None`` and ``x.fill_(None)`` are TypeErrors in PyTorch.

NumPy reads ``None`` as NaN when it converts to a float array (``np.full(3, None, np.float32)`` is ``[nan, nan,
nan]``) and builds an object array for an integer one, so ember once filled NaN, or returned a tensor of Python
objects, where PyTorch refuses the call. Every op that takes a fill value (setitem, ``fill_``, ``masked_fill``,
``index_fill``, ``full``, ``where``) asks :func:`require_number` first.

Example:
    >>> require_number(None, "fill_", "value")
    Traceback (most recent call last):
    TypeError: fill_(): argument 'value' must be a number or a 0-d tensor, not NoneType
"""
from __future__ import annotations

from typing import Any

import numpy as np

_NUMBERS = (bool, int, float, complex, np.number, np.bool_)


def require_number(value: Any, op: str, arg: str = "value") -> None:
    """Raise PyTorch's TypeError unless ``value`` is a Python/NumPy number or a tensor."""
    if isinstance(value, _NUMBERS) or hasattr(value, "_data"):
        return
    raise TypeError(f"{op}(): argument '{arg}' must be a number or a 0-d tensor, not {type(value).__name__}")


def require_assignable(value: Any, dtype: Any) -> None:
    """``t[key] = value``: a number, a tensor, or (ember's leniency) a nested sequence / array of numbers; ``None``,
    strings and sequences holding them raise PyTorch's ``can't assign a NoneType to a torch.FloatTensor``."""
    if isinstance(value, _NUMBERS) or hasattr(value, "_data"):
        return
    kind = "O"
    if value is not None and not isinstance(value, (str, bytes)):
        try:
            kind = np.asarray(value).dtype.kind
        except (ValueError, TypeError):  # ragged nesting
            kind = "O"
    if kind in "biufc":
        return
    raise TypeError(f"index_put_ (setitem): can't assign a {type(value).__name__} to a {dtype} tensor (only numbers, "
                    f"tensors and sequences of numbers can be assigned)")
