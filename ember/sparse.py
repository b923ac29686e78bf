"""``torch.sparse`` on dense storage: COO tensors keep PyTorch's API, not its memory layout.

Decision: ember has no sparse kernels. ``sparse_coo_tensor``/``to_sparse`` build an ordinary (dense) tensor
marked with ``layout == ember.sparse_coo``; ``indices()``, ``values()``, ``_nnz()``, ``coalesce()`` read
the nonzeros back from it, and ``spmm``/``sparse.mm`` are dense products. Results are PyTorch's; memory
is O(numel), so this suits graphs of thousands of nodes (the GCN examples), not millions.

Example:
    >>> import ember
    >>> a = ember.sparse_coo_tensor([[0, 1], [1, 0]], [2.0, 3.0], (2, 2))
    >>> a.is_sparse, a.to_dense().tolist(), a._nnz()
    (True, [[0.0, 2.0], [3.0, 0.0]], 2)
"""
from __future__ import annotations

from typing import Any

from ember.creation import full_like, tensor, zeros, zeros_like
from ember.ops import nn_ops
from ember.ops.elementwise import where
from ember.ops.extra_math import nan_to_num
from ember.surface.constants import sparse_coo, strided
from ember.tensor import Tensor

__all__ = ["mm", "addmm", "sum", "softmax", "log_softmax", "spdiags", "as_sparse_gradcheck"]

SPARSE_COO = "sparse_coo"


def mark_sparse(t: Tensor) -> Tensor:
    t._layout = SPARSE_COO
    return t


def is_sparse(t: Tensor) -> bool:
    return getattr(t, "_layout", None) == SPARSE_COO


def sparse_coo_tensor(indices: Any, values: Any, size: Any = None, *, dtype: Any = None, device: Any = None,
                      requires_grad: bool = False, check_invariants: bool | None = None,
                      is_coalesced: bool | None = None) -> Tensor:
    """A COO tensor from ``indices`` (ndim, nnz) and ``values`` (nnz, ...); duplicates are summed."""
    idx = indices if isinstance(indices, Tensor) else tensor(indices)
    idx = idx.long()
    vals = values if isinstance(values, Tensor) else tensor(values)
    if dtype is not None:
        vals = vals.to(dtype)
    if idx.ndim != 2:
        raise RuntimeError(f"sparse_coo_tensor: indices must be sparse_dim x nnz, but got: {list(idx.shape)}")
    if idx.shape[1] != vals.shape[0]:
        raise RuntimeError(f"sparse_coo_tensor: number of dimensions of indices ({idx.shape[1]}) must match the "
                           f"first dimension of values ({vals.shape[0]})")
    sparse_dims = idx.shape[0]
    if size is None:
        size = tuple(int(m) + 1 for m in idx.max(dim=1).values.tolist()) + tuple(vals.shape[1:])
    size = tuple(int(s) for s in size)
    if idx.shape[1] and any(int(m) >= s for m, s in zip(idx.max(dim=1).values.tolist(), size[:sparse_dims])):
        raise RuntimeError(f"sparse_coo_tensor: an index is out of bounds for size {list(size)}")
    dense = zeros(size, dtype=vals.dtype, device=device)
    if idx.shape[1]:
        dense.index_put_(tuple(idx[d] for d in range(sparse_dims)), vals, accumulate=True)
    if requires_grad:
        dense.requires_grad_(True)
    return mark_sparse(dense)


def to_sparse(self: Tensor, sparse_dim: int | None = None, *, layout: Any = None, blocksize: Any = None,
              dense_dim: Any = None) -> Tensor:
    out = self.clone() if not is_sparse(self) else self
    return mark_sparse(out)


def to_dense(self: Tensor, dtype: Any = None, *, masked_grad: bool | None = None) -> Tensor:
    out = self.clone() if is_sparse(self) else self
    if "_layout" in out.__dict__:
        del out.__dict__["_layout"]
    return out if dtype is None else out.to(dtype)


def _require_sparse(self: Tensor, what: str) -> None:
    if not is_sparse(self):
        raise RuntimeError(f"{what}: expected a sparse tensor (call .to_sparse() first), got a strided tensor")


def indices(self: Tensor) -> Tensor:
    _require_sparse(self, "indices")
    return self.nonzero().t()


def values(self: Tensor) -> Tensor:
    _require_sparse(self, "values")
    return self[tuple(self.nonzero().t())]


def nnz(self: Tensor) -> int:
    _require_sparse(self, "_nnz")
    return int((self != 0).sum())


def coalesce(self: Tensor) -> Tensor:
    _require_sparse(self, "coalesce")
    return self


def is_coalesced(self: Tensor) -> bool:
    _require_sparse(self, "is_coalesced")
    return True


def sparse_dim(self: Tensor) -> int:
    return self.ndim if is_sparse(self) else 0


def dense_dim(self: Tensor) -> int:
    return 0


def mm(mat1: Tensor, mat2: Tensor, reduce: str = "sum") -> Tensor:
    if reduce != "sum":
        raise NotImplementedError(f"sparse.mm: reduce={reduce!r} is not supported by ember; use 'sum'")
    out = mat1 @ mat2
    return mark_sparse(out) if is_sparse(mat1) and is_sparse(mat2) else out


def spmm(input: Tensor, mat2: Tensor) -> Tensor:
    return input @ mat2


def addmm(mat: Tensor, mat1: Tensor, mat2: Tensor, *, beta: float = 1, alpha: float = 1) -> Tensor:
    return mat * beta + (mat1 @ mat2) * alpha


def sum(input: Tensor, dim: Any = None, dtype: Any = None) -> Tensor:  # noqa: A001 - torch.sparse.sum
    out = input.sum() if dim is None else input.sum(dim=dim)
    return out if dtype is None else out.to(dtype)


def softmax(input: Tensor, dim: int, *, dtype: Any = None) -> Tensor:
    """Softmax over the specified (nonzero) entries; unspecified entries stay zero (as torch.sparse)."""
    mask = input != 0
    shifted = where(mask, input, full_like(input, -float("inf")))
    out = nn_ops.softmax(shifted, dim=dim)
    out = where(mask, out, zeros_like(out))
    out = nan_to_num(out, nan=0.0)
    return mark_sparse(out if dtype is None else out.to(dtype))


def log_softmax(input: Tensor, dim: int, *, dtype: Any = None) -> Tensor:
    mask = input != 0
    shifted = where(mask, input, full_like(input, -float("inf")))
    out = nn_ops.log_softmax(shifted, dim=dim)
    out = where(mask, out, zeros_like(out))
    return mark_sparse(out if dtype is None else out.to(dtype))


def spdiags(diagonals: Tensor, offsets: Tensor, shape: tuple, layout: Any = None) -> Tensor:
    rows, cols = shape
    out = zeros(rows, cols, dtype=diagonals.dtype)
    for k, off in enumerate(offsets.tolist()):
        for r in range(rows):
            c = r + off
            if 0 <= c < cols and c < diagonals.shape[1]:
                out[r, c] = diagonals[k, c]
    return mark_sparse(out)


def as_sparse_gradcheck(gradcheck: Any) -> Any:
    return gradcheck


def install() -> None:
    """Tensor methods and properties of the sparse API."""
    Tensor.to_sparse = to_sparse
    Tensor.to_sparse_coo = to_sparse
    Tensor.to_dense = to_dense
    Tensor.is_sparse = property(is_sparse)
    Tensor.indices = indices
    Tensor.values = values
    Tensor._nnz = nnz
    Tensor.coalesce = coalesce
    Tensor.is_coalesced = is_coalesced
    Tensor.sparse_dim = sparse_dim
    Tensor.dense_dim = dense_dim
    Tensor.layout = property(lambda self: sparse_coo if is_sparse(self) else strided)
