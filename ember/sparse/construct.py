"""Making sparse COO tensors: ``ember.sparse_coo_tensor`` (with PyTorch's checks) and ``dense.to_sparse()``.

Example:
    >>> import ember
    >>> ember.tensor([[0.0, 2.0], [3.0, 0.0]]).to_sparse()._indices().tolist()
    [[0, 1], [1, 0]]
"""
from __future__ import annotations

from typing import Any

from ember import dtypes
from ember.creation import as_tensor
from ember.device import to_device
from ember.interpreters import TracingError
from ember.ops import dispatch
from ember.sparse import _index
from ember.sparse.coo import SparseTensor, _tensor_like
from ember.surface.constants import sparse_coo, sparse_csc, sparse_csr
from ember.tensor import Tensor


class check_sparse_tensor_invariants:  # noqa: N801 - PyTorch's name
    """``torch.sparse.check_sparse_tensor_invariants``: whether ``sparse_coo_tensor`` checks indices when its
    ``check_invariants`` is None. ember's default is on (PyTorch's is off); a context manager, or
    ``enable()``/``disable()`` for the process.

    Example:
        >>> import ember
        >>> with ember.sparse.check_sparse_tensor_invariants(False):
        ...     ember.sparse.check_sparse_tensor_invariants.is_enabled()
        False
    """

    _enabled = True

    def __init__(self, enable: bool = True) -> None:
        self.state = bool(enable)
        self.saved: bool | None = None

    @staticmethod
    def is_enabled() -> bool:
        return check_sparse_tensor_invariants._enabled

    @staticmethod
    def enable() -> None:
        check_sparse_tensor_invariants._enabled = True

    @staticmethod
    def disable() -> None:
        check_sparse_tensor_invariants._enabled = False

    def __enter__(self) -> "check_sparse_tensor_invariants":
        self.saved = check_sparse_tensor_invariants._enabled
        check_sparse_tensor_invariants._enabled = self.state
        return self

    def __exit__(self, *exc: Any) -> None:
        check_sparse_tensor_invariants._enabled = bool(self.saved)


def sparse_coo_tensor(indices: Any, values: Any, size: Any = None, *, dtype: Any = None, device: Any = None,
                      pin_memory: bool = False, requires_grad: bool = False, check_invariants: bool | None = None,
                      is_coalesced: bool | None = None) -> SparseTensor:
    """A COO tensor from ``indices`` (sparse_dim x nnz) and ``values`` (nnz x dense dims).

    ``size`` defaults to the smallest that holds the indices. Gradients flow to ``values``. Indices are
    checked against ``size`` (negative or out-of-range entries raise PyTorch's errors) unless
    ``check_invariants=False`` (or :class:`check_sparse_tensor_invariants` is disabled); PyTorch checks only
    when asked, ember by default, since the check costs one pass over the indices and a wrong index would
    otherwise fail far from its cause.

    Example:
        >>> import ember
        >>> ember.sparse_coo_tensor([[0, 1], [1, 0]], [2.0, 3.0], (2, 2)).to_dense().tolist()
        [[0.0, 2.0], [3.0, 0.0]]
    """
    target = None if device is None else to_device(device)
    vals = values if isinstance(values, Tensor) else as_tensor(values, dtype=dtype, device=target)
    if dtype is not None and vals.dtype is not dtypes.to_dtype(dtype):
        vals = vals.to(dtypes.to_dtype(dtype))
    if target is not None:
        vals = vals.to(target)
    idx = indices if isinstance(indices, Tensor) else as_tensor(indices, device=vals.device)
    if idx.device != vals.device:
        if target is None:
            raise RuntimeError(f"sparse_coo_tensor: device of indices ({idx.device}) must match device of values "
                               f"({vals.device}); pass device= or move one with .to()")
        idx = idx.to(target)
    idx = idx.detach().long() if idx.dtype is not dtypes.int64 else idx.detach()
    if idx.ndim != 2:
        raise RuntimeError(f"sparse_coo_tensor: indices must be sparse_dim x nnz, but got: {list(idx.shape)}")
    if vals.ndim == 0:
        raise RuntimeError("sparse_coo_tensor: values must have at least one dimension (nnz x dense dims), got a 0-d "
                           "tensor")
    sparse_dim, nnz = int(idx.shape[0]), int(idx.shape[1])
    if nnz != vals.shape[0]:
        raise RuntimeError(f"sparse_coo_tensor: indices and values must have same nnz, but got nnz from indices: {nnz}, "
                           f"nnz from values: {vals.shape[0]}")
    dense_shape = tuple(vals.shape[1:])
    xp = idx.device.xp
    traced = dispatch.is_symbolic(idx)  # inside ember.compile: the products check their entries when they run
    if traced and size is None:
        raise TracingError("sparse_coo_tensor: inside a compiled function the size must be given (inferring it reads "
                           "the indices' values); pass size=")
    if size is None:
        if nnz and int(idx._data.min()) < 0:
            low = idx._data.min(axis=1)
            d = next(k for k in range(sparse_dim) if int(low[k]) < 0)
            raise RuntimeError(f"sparse_coo_tensor: found negative index {int(low[d])} for dim {d}")
        high = idx._data.max(axis=1).tolist() if nnz else [-1] * sparse_dim
        size = tuple(int(m) + 1 for m in high) + dense_shape
    else:
        size = tuple(int(s) for s in (size.tolist() if isinstance(size, Tensor) else size))
        if len(size) != sparse_dim + len(dense_shape):
            raise RuntimeError(f"sparse_coo_tensor: 'len(size) == sparse_dim + dense_dim' is not satisfied: len(size) = "
                               f"{len(size)}, sparse_dim = {sparse_dim}, dense_dim = {len(dense_shape)}")
        if tuple(size[sparse_dim:]) != dense_shape:
            raise RuntimeError(f"sparse_coo_tensor: values has incorrect size, expected {[nnz, *size[sparse_dim:]]}, "
                               f"got {list(vals.shape)}")
        if any(s < 0 for s in size):
            raise RuntimeError(f"sparse_coo_tensor: size must be non-negative, got {list(size)}")
        if check_invariants is None:
            check_invariants = check_sparse_tensor_invariants.is_enabled()
        if check_invariants and not traced:
            _index.check_bounds(xp, idx._data, size[:sparse_dim])
    if requires_grad:
        vals = vals.detach().requires_grad_(True)
    return SparseTensor._from_parts(idx, vals, size, bool(is_coalesced))


def dense_to_sparse(self: Tensor, sparse_dim: int | None = None, *, layout: Any = None, blocksize: Any = None,
                    dense_dim: int | None = None) -> SparseTensor:
    """``Tensor.to_sparse()``: the nonzero entries (or, with ``sparse_dim`` < ndim, the nonzero slices)
    as a coalesced COO tensor; differentiable (the values are read from ``self`` by indexing)."""
    if layout in (sparse_csr, sparse_csc):  # Tensor.to_sparse_csr/csc: ember/sparse/compressed.py
        return self.to_sparse_csr() if layout is sparse_csr else self.to_sparse_csc()
    if layout not in (None, sparse_coo):
        raise NotImplementedError(f"to_sparse: ember has the sparse_coo, sparse_csr and sparse_csc layouts, got {layout}")
    if blocksize is not None:
        raise NotImplementedError("to_sparse: blocksize is for the blocked layouts (bsr/bsc), which ember has not")
    ndim = self.ndim
    if sparse_dim is None:
        sparse_dim = ndim - (dense_dim or 0)
    if not 0 <= sparse_dim <= ndim:
        raise RuntimeError(f"to_sparse: sparse_dim {sparse_dim} is out of range for a {ndim}-D tensor (0..{ndim})")
    xp = self.device.xp
    data = self._data
    if sparse_dim == 0:  # PyTorch: one entry holding the whole tensor
        indices = xp.zeros((0, 1), dtype=xp.int64)
        return SparseTensor._from_parts(_tensor_like(indices, self), self.unsqueeze(0), tuple(self.shape), True)
    mask = data != 0
    if sparse_dim < ndim:
        mask = mask.any(axis=tuple(range(sparse_dim, ndim)))
    found = xp.nonzero(mask)  # row-major order: already coalesced
    indices = xp.stack([f.astype(xp.int64, copy=False) for f in found]) if found else xp.zeros((0, 0), xp.int64)
    index = tuple(_tensor_like(f.astype(xp.int64, copy=False), self) for f in found)
    values = self[index]
    return SparseTensor._from_parts(_tensor_like(indices, self), values, tuple(self.shape), True)
