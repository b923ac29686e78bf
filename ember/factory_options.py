"""PyTorch's keyword options shared by every tensor factory: ``layout``, ``pin_memory``, ``memory_format``,
``out``, ``requires_grad`` (one place, so ``zeros``, ``full_like``, ``arange``, ``new_full`` ... agree).

torchvision's ``MultiScaleRoIAlign`` calls ``torch.full_like(b, i, dtype=..., layout=torch.strided,
device=...)``; ember's factories refused ``layout`` (or, for ``zeros``/``ones``/``empty``, silently ignored
every unknown keyword, ``out=`` included). Now each factory takes the keywords PyTorch's takes and does
what PyTorch does with them:

- ``layout``: ``strided`` (the default) or a sparse layout (``sparse_coo``, ``sparse_csr``, ``sparse_csc``):
  the result is converted with ``to_sparse*``, as ``torch.zeros(2, 3, layout=torch.sparse_coo)`` is sparse;
- ``pin_memory``: accepted; ember's host arrays are ordinary memory (copies to a device are synchronous);
- ``memory_format``: ``*_like`` keep the input's strides under ``preserve_format`` (the default; a non-dense
  input's dimension order, ember/ops/layout.py), ``channels_last``/``contiguous_format`` lay the result out so;
- ``out``: the result is written into ``out`` (its dtype is the default dtype when none is given), which is
  returned, as PyTorch does (a size change must keep the element count: ember cannot resize storage);
- ``requires_grad``: set on the result.

Example:
    >>> import ember
    >>> x = ember.ones(2, 3)
    >>> ember.full_like(x, 7, layout=ember.strided, pin_memory=False).tolist()
    [[7.0, 7.0, 7.0], [7.0, 7.0, 7.0]]
    >>> buf = ember.empty(3)
    >>> ember.arange(3, out=buf) is buf
    True
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ember.ops import layout, views
from ember.tensor import Tensor

_SPARSE = {"sparse_coo": "to_sparse", "sparse_csr": "to_sparse_csr", "sparse_csc": "to_sparse_csc"}


def check_layout(op: str, layout: Any) -> str | None:
    """The conversion a ``layout`` asks for (None: strided), or a RuntimeError naming the layouts ember has."""
    name = None if layout is None else getattr(layout, "name", str(layout).split(".")[-1])
    if name in (None, "strided"):
        return None
    if name not in _SPARSE:
        raise RuntimeError(f"{op}(): layout {layout!r} is not supported; use torch.strided, torch.sparse_coo, "
                           "torch.sparse_csr or torch.sparse_csc")
    return _SPARSE[name]


def check_unexpected(op: str, keywords: dict, allowed: tuple = ("size",)) -> None:
    """PyTorch's TypeError for a keyword the factory does not take (no silent swallowing)."""
    for key in keywords:
        if key not in allowed:
            raise TypeError(f"{op}() got an unexpected keyword argument '{key}'")


def out_dtype(dtype: Any, out: Any) -> Any:
    """With ``out=`` and no ``dtype``, PyTorch makes the result in ``out``'s dtype."""
    return out.dtype if dtype is None and isinstance(out, Tensor) else dtype


def _preserve_layout(result: Tensor, like: Tensor) -> None:
    """``preserve_format``: give a fresh CPU ``result`` the strides ``like`` would give a copy (ember/ops/layout.py)."""
    data, source = result._data, like._data
    if type(data) is np.ndarray and type(source) is np.ndarray and not layout.plainly_contiguous(source) \
            and result._device.type == "cpu" and like._device.type == "cpu" and data.shape == source.shape:
        result._data = layout.with_strides(np, data, layout.preserve_strides(source.shape,
                                                                              layout.element_strides(source)))


def finish(op: str, result: Tensor, *, layout: Any = None, memory_format: Any = None, like: Tensor | None = None,
           requires_grad: bool = False, out: Any = None) -> Tensor:
    """Apply the shared options to a freshly made (row-major, strided) ``result``."""
    to_sparse = check_layout(op, layout)
    name = views.format_name(memory_format)
    if name in (None, "preserve_format") and like is not None:
        _preserve_layout(result, like)
    elif name not in (None, "preserve_format", "contiguous_format"):
        result = views.to_format(result, name, owned=True)
    if to_sparse is not None:
        result = getattr(result, to_sparse)()
    if requires_grad:
        result.requires_grad_(True)
    if out is not None:
        if not isinstance(out, Tensor):
            raise TypeError(f"{op}(): argument 'out' must be Tensor, not {type(out).__name__}")
        if tuple(out.shape) != tuple(result.shape):
            out.resize_(tuple(result.shape))
        if out.dtype != result.dtype:
            raise RuntimeError(f"{op}(): expected out tensor to have dtype {result.dtype}, but got {out.dtype} "
                               "instead")
        out.copy_(result)
        return out
    return result
