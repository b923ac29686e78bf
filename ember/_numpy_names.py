"""NumPy's argument names, accepted where PyTorch accepts them.

PyTorch's argument parser (every function and Tensor method written in C++) takes NumPy's names for four
arguments: ``axis`` for ``dim``, ``keepdims`` for ``keepdim``, ``x``/``a``/``x1`` for ``input`` and ``x2`` for
``other``. So ``x.sum(axis=0, keepdims=True)``, ``torch.cat(ts, axis=1)`` and ``x.argmax(axis=1)`` run in
PyTorch, and programs written by NumPy users rely on it (d2l's book code does throughout).

How ember pays nothing for it on ordinary calls:

* public functions (``ember.cat``, ``ember.gather``, ...) are already wrapped for ``__torch_function__``; a call
  that raised ``TypeError`` retries once with the names translated (:func:`renamed`), only when the function
  takes PyTorch's name and not NumPy's;
* Tensor methods are not wrapped, so the common ones (reductions, ``softmax``, ``squeeze``/``unsqueeze``,
  sorting, cumulative ops) take ``axis``/``keepdims`` as keyword-only arguments and translate them with
  :func:`dim_keepdim` / :func:`dim_only` behind one ``is not None`` test.

Example: ``ember.ones(2, 3).sum(axis=1, keepdims=True)`` is ``tensor([[3.], [3.]])``.
"""
from __future__ import annotations

import inspect
from typing import Any, Callable

# PyTorch's table (python_arg_parser.cpp, ``numpy_compatibility_arg_names``): NumPy's name -> torch's name
NUMPY_TO_TORCH = {"axis": "dim", "keepdims": "keepdim", "x": "input", "a": "input", "x1": "input", "x2": "other"}


class _Required:
    """The default of a ``dim`` that must be given (as ``dim`` or as ``axis``)."""

    def __repr__(self) -> str:
        return "<required>"


REQUIRED: Any = _Required()


def dim_only(op: str, dim: Any, axis: Any, unset: Any = None) -> Any:
    """``dim`` of ``op`` given as ``dim`` or as NumPy's ``axis`` (not both); ``unset``: ``dim``'s default."""
    if axis is None:
        if dim is REQUIRED:
            raise TypeError(f"{op}() missing required argument 'dim' (or NumPy's name 'axis')")
        return dim
    if dim is not unset:
        raise TypeError(f"{op}() got both 'dim' and NumPy's name for it, 'axis': give one")
    return axis


def dim_keepdim(op: str, dim: Any, keepdim: Any, axis: Any, keepdims: Any, unset: Any = None) -> tuple:
    """``(dim, keepdim)`` of ``op`` from PyTorch's or NumPy's names (``axis``, ``keepdims``)."""
    dim = dim_only(op, dim, axis, unset)
    if keepdims is not None:
        if keepdim:
            raise TypeError(f"{op}() got both 'keepdim' and NumPy's name for it, 'keepdims': give one")
        keepdim = bool(keepdims)
    return dim, keepdim


_PARAMETERS: dict[Any, frozenset | None] = {}


def _parameters(fn: Callable[..., Any]) -> frozenset | None:
    """The names ``fn`` takes by keyword (through ``__wrapped__``); None if it takes any (``**kwargs``)."""
    try:
        return _PARAMETERS[fn]
    except (KeyError, TypeError):
        pass
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        names = None
    else:
        names = None if any(p.kind is p.VAR_KEYWORD for p in params) else frozenset(
            p.name for p in params if p.kind is not p.POSITIONAL_ONLY and p.kind is not p.VAR_POSITIONAL)
    try:
        _PARAMETERS[fn] = names
    except TypeError:
        pass
    return names


def renamed(fn: Callable[..., Any], kwargs: dict) -> dict | None:
    """``kwargs`` with NumPy's names replaced by PyTorch's where ``fn`` takes PyTorch's name and not NumPy's;
    None when nothing applies (then the caller's own error stands)."""
    if not any(name in NUMPY_TO_TORCH for name in kwargs):
        return None
    names = _parameters(fn)
    if names is None:
        return None
    out, changed = {}, False
    for name, value in kwargs.items():
        torch_name = NUMPY_TO_TORCH.get(name)
        if torch_name is not None and name not in names and torch_name in names:
            if torch_name in kwargs or torch_name in out:
                return None  # both names given: leave the error to the call
            out[torch_name] = value
            changed = True
        else:
            out[name] = value
    return out if changed else None
