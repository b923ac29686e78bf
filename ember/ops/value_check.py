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

from ember import dtypes

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


def checked_fill_value(value: Any, dt: Any, op: str, numel: int = 2) -> Any:
    """A Python/NumPy number as PyTorch's fill converts it into ``dt``: checked against the dtype's range
    (``full((2,), 1e10, dtype=int8)``, NaN into an integer dtype raise; -1 into uint8 is 255), a complex number with
    no imaginary part taken as real, past-int64 integers into half dtypes through float."""
    if not isinstance(value, (bool, int, float, complex, np.generic)):
        return value
    value = dtypes.python_scalar(value) if isinstance(value, np.generic) else value
    if type(value) is int and not -(1 << 63) <= value < (1 << (63 if op.startswith("index_put_") else 64)):
        raise OverflowError(f"{op}: int too big to convert: {value} does not fit a 64-bit integer")
    if isinstance(value, complex) and dt.category < 3:
        if value.imag != 0:
            raise RuntimeError(f"{op}: value {value!r} cannot be converted to type {dt} without overflow")
        value = value.real
    if dt.category == 1:
        value = dtypes.checked_scalar(value, dt, op)
    elif dt.category == 0 and not isinstance(value, complex):
        value = bool(value)
    elif dt.category == 2 and type(value) is int:
        value = float(value)  # ml_dtypes' bfloat16 refuses Python ints past int64
    if dt.category == 2 and dt.itemsize == 2 and numel > 1:  # torch's one-element fill skips its half range check
        value = dtypes.checked_scalar(value, dt, op)
    return value


def check_index_source(op: str, input: Any, dim: int, index: Any, source: Any) -> None:
    """PyTorch's shape rules for index_add/index_reduce (``index_func_meta_impl``) and index_copy: a vector index,
    one index per slice of ``source`` along ``dim``, and ``source`` shaped as ``input`` elsewhere. Without them
    index_put's broadcasting accepted ``x.index_add_(0, i, row)`` (a (3,) source for a (3, 3) input) and wrote the
    row into every selected slice."""
    if not hasattr(source, "_data") or not hasattr(index, "_data"):
        return
    if index.ndim > 1:
        raise IndexError(f"{op}_(): Index is supposed to be a vector, but got dim: {index.ndim} with size "
                         f"{list(index.shape)}; pass index.flatten()")
    wrapped = dim % input.ndim if input.ndim else 0
    numel = index.numel()
    if op == "index_copy":
        if source.ndim == 0 and numel != 1:
            raise IndexError(f"index_copy_(): When source is scalar, index should have one element (got {numel})")
        if source.ndim != input.ndim and source.ndim != 0 and input.ndim != 0:
            raise IndexError(f"index_copy_(): When source and destination are not scalars, their dimensionality must "
                             f"match. Source dimensionality ({source.ndim}), destination dimensionality ({input.ndim})")
    else:
        if wrapped != 0 and wrapped >= source.ndim:
            raise RuntimeError(f"{op}_(): Indexing dim {wrapped} is out of bounds of the source tensor with dim "
                               f"{source.ndim}")
        along = 1 if source.ndim == 0 else source.shape[wrapped]
        if numel != along:
            raise RuntimeError(f"{op}_(): Number of indices ({numel}) should be equal to source.size(dim): ({along}), "
                               f"for dim: {wrapped}")
    self_rest = [n for d, n in enumerate(input.shape) if d != wrapped]
    source_rest = [n for d, n in enumerate(source.shape) if d != wrapped]
    if source.ndim and self_rest != source_rest:
        raise RuntimeError(f"{op}_(): source tensor shape must match self tensor shape, excluding the specified "
                           f"dimension. Got self.shape = {list(input.shape)} source.shape = {list(source.shape)}")
    if op != "index_copy" and source.ndim == 0 and input.ndim > 1:
        raise RuntimeError(f"{op}_(): source tensor shape must match self tensor shape, excluding the specified "
                           f"dimension. Got self.shape = {list(input.shape)} source.shape = []")
    if op == "index_copy" and source.ndim == 0 and input.ndim > 1:
        raise RuntimeError(f"index_copy_(): Source/destination tensor must have same slice shapes (source is a "
                           f"scalar, destination shape {list(input.shape)})")
    if op == "index_copy" and source.ndim and numel != source.shape[wrapped]:
        raise IndexError(f"index_copy_(): Number of indices ({numel}) should be equal to source.size(dim) "
                         f"({source.shape[wrapped]})")
