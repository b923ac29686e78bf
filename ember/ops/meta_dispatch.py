"""Ops on meta tensors by shape inference: no data is allocated and nothing is computed.

A meta tensor (``torch.empty(..., device="meta")``) has a shape and a dtype only. Elementwise ops, casts and views
already cost one element there (ember/backends/meta.py: a meta array is a zero-stride view of one element and
NumPy's ufuncs are answered for that element). Every other op (convolutions, products, reductions, norms,
attention, sorting, gathers, FFTs, factorizations) ran its kernel over zero-stride views of the full shapes:
``conv2d`` of a meta (8, 3, 1024, 1024) input took 3-9 s and the full-size temporaries' memory. Dispatch now
answers those from the op record's ``shape_rule`` (the rule tracers and ``ember.compile`` use): the outputs are
one-element shells of the inferred shapes and dtypes. Inputs were checked (shapes, dtypes, devices) by the
public functions before dispatch, so errors are the same as on the CPU.

Example:
    >>> import ember
    >>> x = ember.empty(8, 3, 1024, 1024, device="meta")
    >>> ember.nn.functional.conv2d(x, ember.empty(16, 3, 3, 3, device="meta")).shape   # instant
    ember.Size([8, 16, 1022, 1022])
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ember.backends.meta import BACKEND as _META, data_dependent_error, shell
from ember.ops.registry import OPS, OpDef, Spec

META_XP = _META.xp

# Records with no shape rule meaning for eager meta tensors (graph-only, view replay): their kernels run as they are.
_DATA_DEPENDENT = ("view_replay", "assign", "group", "send", "recv")


_ELEMENTWISE = ("unary", "binary", "ternary", "cast")


def by_rule(op: OpDef) -> bool:
    """Whether ``op`` on meta tensors is answered without running its kernel (cached on the record): elementwise
    ops by :func:`elementwise`, the rest by their shape rule, but views (NumPy's views of one-element shells are free
    and keep their strides) and data-dependent ops; ``getitem`` by index tensors is not a view (:func:`outputs`)."""
    known = op.__dict__.get("_meta_by_rule")
    if known is None:
        known = op.category in _ELEMENTWISE or op.name == "unique" or (op.shape_rule is not None and (not op.view or op.name == "getitem")
                                                and op.name not in _DATA_DEPENDENT)
        op.__dict__["_meta_by_rule"] = known
    return known


def elementwise(op: OpDef, impl: Any, arrays: tuple, attrs: dict) -> Any:
    """An elementwise op on meta arrays: its kernel runs on one element of each input (so the dtype, the type checks
    and errors are the kernel's own) and the result is a shell of the broadcast shape."""
    shapes = [np.shape(a) for a in arrays if isinstance(a, np.ndarray)]
    shape = np.broadcast_shapes(*shapes)  # (a ValueError, as NumPy's: binary() names the op and the shapes)
    small = tuple(_one(a) if isinstance(a, np.ndarray) else a for a in arrays)
    with np.errstate(all="ignore"):
        out = impl(np, *small, **attrs)
    if isinstance(out, tuple):
        return tuple(shell(shape, np.asarray(o).dtype) for o in out)
    return shell(shape, np.asarray(out).dtype)


def _one(a: np.ndarray) -> np.ndarray:
    """A one of ``a``'s dtype with ``a``'s number of dims: a meta tensor has no values, so none may raise (an integer
    division by a meta zero would)."""
    return np.ones((1,) * a.ndim, dtype=a.dtype)


def outputs(op: OpDef, args: tuple, attrs: dict, tensor_type: type) -> Any:
    """The op's outputs as shells of the shapes and dtypes its shape rule gives, or None when the rule cannot
    answer (the caller then runs the kernel on the shells)."""
    if op.name == "unique":
        raise data_dependent_error("unique")
    if op.category in _ELEMENTWISE:
        arrays = tuple(a._data if isinstance(a, tensor_type) else a for a in args)
        return elementwise(op, getattr(op, "impl_no_half", None) or op.impl, arrays, attrs)
    if op.name == "getitem":
        return _advanced_index(op, args, attrs, tensor_type)
    specs = tuple(Spec(tuple(a._data.shape), a.dtype, a._device) if isinstance(a, tensor_type) else a for a in args)
    try:
        result = op.shape_rule(*specs, **attrs)
    except Exception:  # noqa: BLE001 (a rule written for traced values only: compute on the shells instead)
        return None
    if isinstance(result, Spec):
        return shell(tuple(int(s) for s in result.shape), np.dtype(result.dtype.np))
    if isinstance(result, (tuple, list)) and all(isinstance(r, Spec) for r in result):
        return tuple(shell(tuple(int(s) for s in r.shape), np.dtype(r.dtype.np)) for r in result)
    return None


_NO_BYTES = np.dtype([])  # a zero-size item: NumPy's own indexing gives the shape and allocates nothing


def _advanced_index(op: OpDef, args: tuple, attrs: dict, tensor_type: type) -> Any:
    """``x[index]`` by index tensors: NumPy indexes a zero-stride array of zero-size items (so every bounds and
    broadcast check is NumPy's and the result costs no memory), then a shell of ``x``'s dtype takes its shape.
    Basic indexing (a NumPy view of the shell) and boolean masks (a shape from the values) return None."""
    indices = args[1:]
    if any(isinstance(a, tensor_type) and a._data.dtype == np.bool_ for a in indices):
        raise data_dependent_error("index by a boolean mask")  # (masked_select too: its size is the mask's count)
    if not any(isinstance(a, tensor_type) for a in indices):
        return None
    x = args[0]
    stand_ins = [np.broadcast_to(np.zeros((), dtype=a._data.dtype), a._data.shape) if isinstance(a, tensor_type)
                 else a for a in indices]
    empty = np.broadcast_to(np.zeros((), dtype=_NO_BYTES), x._data.shape)
    out = (getattr(op, "impl_no_half", None) or op.impl)(np, empty, *stand_ins, **attrs)
    return shell(tuple(out.shape), x._data.dtype)


__all__ = ["META_XP", "by_rule", "outputs", "OPS"]
