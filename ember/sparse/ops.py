"""Sparse COO arithmetic and products: the functions behind ``ember.sparse.*`` and SparseTensor's operators.

Every function is written as ember ops on the values (differentiable) plus integer work on the
indices; the products run the two sparse kernels of ``ember/ops/sparse_ops.py``.

Example:
    >>> import ember
    >>> a = ember.tensor([[0.0, 2.0], [3.0, 0.0]]).to_sparse()
    >>> (a @ ember.ones(2, 1)).tolist(), ember.sparse.sum(a).item()
    ([[2.0], [3.0]], 5.0)
"""
from __future__ import annotations

import numbers
from typing import Any, Sequence

from ember import dtypes
from ember.creation import zeros
from ember.ops import nn_ops
from ember.ops.sparse_ops import coo_mm
from ember.ops.views import cat
from ember.sparse import _index
from ember.sparse.coo import SparseTensor, _tensor_like
from ember.tensor import Tensor


def _is_sparse(x: Any) -> bool:
    return isinstance(x, SparseTensor)


def _promote_values(a: SparseTensor, b: SparseTensor) -> tuple[Tensor, Tensor]:
    target = dtypes.promote_types(a.dtype, b.dtype)
    return a._sp_values.to(target), b._sp_values.to(target)


# ---- elementwise --------------------------------------------------------------------------------------
def add(input: Any, other: Any, *, alpha: Any = 1) -> Any:
    """sparse + sparse -> sparse (coalesced when both are); dense + sparse -> dense; sparse + dense refuses
    (PyTorch's rule: write dense + sparse)."""
    if _is_sparse(input) and _is_sparse(other):
        if input.shape != other.shape or input.sparse_dim() != other.sparse_dim():
            raise RuntimeError(f"add: expected sparse tensors of one size and sparse_dim, got {list(input.shape)} "
                               f"(sparse_dim {input.sparse_dim()}) and {list(other.shape)} (sparse_dim "
                               f"{other.sparse_dim()})")
        a, b = _promote_values(input, other)
        if alpha != 1:
            b = b * alpha
        joined = SparseTensor._from_parts(cat([input._sp_indices, other._sp_indices.to(input.device)], dim=1),
                                          cat([a, b], dim=0), input._sp_size, False)
        return joined.coalesce() if input.is_coalesced() and other.is_coalesced() else joined
    if _is_sparse(other):  # dense + sparse
        return input + other.to_dense() * alpha if alpha != 1 else input + other.to_dense()
    if isinstance(other, Tensor) and other.ndim:
        raise RuntimeError("add(sparse, dense) is not supported. Use add(dense, sparse) instead.")
    raise RuntimeError("add: adding a number to a sparse tensor would fill every unstored entry; use "
                       "s.to_dense() + number")


def sub(input: Any, other: Any, *, alpha: Any = 1) -> Any:
    if _is_sparse(other):
        return add(input, neg(other), alpha=alpha)
    return add(input, other, alpha=-alpha)


def neg(input: SparseTensor) -> SparseTensor:
    return input._with_values(-input._sp_values)


def mul(input: Any, other: Any) -> SparseTensor:
    """sparse * number, sparse * dense (the dense tensor read at the stored entries) -> sparse."""
    sparse, scale = (input, other) if _is_sparse(input) else (other, input)
    if _is_sparse(scale):
        return _mul_sparse(sparse, scale)
    if isinstance(scale, (numbers.Number, bool)) or (isinstance(scale, Tensor) and scale.ndim == 0):
        return sparse._with_values(sparse._sp_values * scale)
    if isinstance(scale, Tensor):
        if tuple(scale.shape) != tuple(sparse.shape):
            raise RuntimeError(f"mul: a sparse tensor of size {list(sparse.shape)} times a dense tensor needs the same "
                               f"size, got {list(scale.shape)}")
        rows = tuple(sparse._sp_indices[d] for d in range(sparse.sparse_dim()))
        return sparse._with_values(sparse._sp_values * scale[rows])
    raise TypeError(f"mul: unsupported operand {type(scale).__name__} for a sparse tensor")


def _mul_sparse(a: SparseTensor, b: SparseTensor) -> SparseTensor:
    """sparse * sparse: the entries stored in both (coalesced), as PyTorch."""
    if a.shape != b.shape or a.sparse_dim() != b.sparse_dim():
        raise RuntimeError(f"mul: expected sparse tensors of one size and sparse_dim, got {list(a.shape)} and "
                           f"{list(b.shape)}")
    a, b = a.coalesce(), b.coalesce()
    xp = a.device.xp
    sizes = a._sp_size[:a.sparse_dim()]
    ka = _index.linear_keys(xp, a._sp_indices._data, sizes)
    kb = _index.linear_keys(xp, b._sp_indices._data, sizes)
    pos = xp.minimum(xp.searchsorted(kb, ka), max(int(kb.shape[0]) - 1, 0))
    hit = (kb[pos] == ka) if kb.shape[0] else xp.zeros(ka.shape, dtype=bool)
    ia = xp.nonzero(hit)[0].astype(xp.int64)
    ib = pos[ia].astype(xp.int64)
    av, bv = _promote_values(a, b)
    values = av[_tensor_like(ia, av)] * bv[_tensor_like(ib, bv)]
    indices = _tensor_like(xp.ascontiguousarray(a._sp_indices._data[:, ia]), a._sp_indices)
    return SparseTensor._from_parts(indices, values, a._sp_size, True)


def div(input: SparseTensor, other: Any, *, rounding_mode: str | None = None) -> SparseTensor:
    if not _is_sparse(input) or _is_sparse(other) or (isinstance(other, Tensor) and other.ndim):
        raise RuntimeError("div: a sparse tensor can only be divided by a number or a 0-d tensor (dividing by a "
                           "sparse or dense tensor would divide by its zeros)")
    values = input._sp_values
    out = values / other if rounding_mode is None else values.div(other, rounding_mode=rounding_mode)
    return input._with_values(out)


def transpose(input: SparseTensor, dim0: int, dim1: int) -> SparseTensor:
    """Swap two sparse dimensions (the entries keep their order, so the result is uncoalesced)."""
    d0, d1 = input._dim(dim0, "transpose"), input._dim(dim1, "transpose")
    if d0 == d1:
        return input
    sd = input.sparse_dim()
    if d0 >= sd or d1 >= sd:
        raise RuntimeError(f"transpose: ember transposes the sparse dimensions of a sparse tensor only (sparse_dim "
                           f"{sd}, got dims {d0} and {d1})")
    order = list(range(sd))
    order[d0], order[d1] = order[d1], order[d0]
    size = list(input._sp_size)
    size[d0], size[d1] = size[d1], size[d0]
    indices = input._sp_indices[_tensor_like(input.device.xp.asarray(order, dtype=input.device.xp.int64),
                                             input._sp_indices)]
    return SparseTensor._from_parts(indices, input._sp_values, size, False)


def t(input: SparseTensor) -> SparseTensor:
    if input.ndim > 2:
        raise RuntimeError(f"t() expects a tensor with <= 2 dimensions, but self is {input.ndim}D")
    return transpose(input, 0, 1) if input.ndim == 2 else input


# ---- products -------------------------------------------------------------------------------------------
def _check_matrix(s: SparseTensor, op: str) -> None:
    if s.ndim != 2 or s.sparse_dim() != 2:
        raise RuntimeError(f"{op}: expected a 2-D sparse matrix (sparse_dim 2, dense_dim 0), got size {list(s.shape)} "
                           f"with sparse_dim {s.sparse_dim()} and dense_dim {s.dense_dim()}")


def dense_operand(s: Tensor, d: Tensor, op: str) -> tuple[Tensor, bool]:
    """The dense operand of ``s @ d`` (any sparse layout) as a matrix, and whether it was a vector; raises
    PyTorch's errors for sizes, devices and dtypes that do not fit."""
    if d.ndim not in (1, 2):
        raise RuntimeError(f"{op}: expected a 1-D or 2-D dense operand, got size {list(d.shape)}")
    vector = d.ndim == 1
    dense = d.unsqueeze(1) if vector else d
    if s.shape[1] != dense.shape[0]:
        raise RuntimeError(f"{op}: mat1 and mat2 shapes cannot be multiplied ({s.shape[0]}x{s.shape[1]} and "
                           f"{dense.shape[0]}x{dense.shape[1]})")
    if d.device != s.device:
        raise RuntimeError(f"{op}: expected all tensors to be on the same device, but found {s.device} and {d.device}")
    if s.dtype is not d.dtype:
        raise RuntimeError(f"{op}: expected the sparse and dense operands to have the same dtype, got {s.dtype} and "
                           f"{d.dtype}; convert one with .to()")
    return dense, vector


def _sparse_dense(s: SparseTensor, d: Tensor, op: str) -> Tensor:
    _check_matrix(s, op)
    dense, vector = dense_operand(s, d, op)
    out = coo_mm(s._sp_indices[0], s._sp_indices[1], s._sp_values, dense, rows=s.shape[0])
    return out.squeeze(1) if vector else out


def _sparse_sparse(a: SparseTensor, b: SparseTensor, op: str) -> SparseTensor:
    """Sparse @ sparse -> sparse (coalesced): each entry (i, k) of ``a`` meets the entries (k, j) of ``b``."""
    _check_matrix(a, op)
    _check_matrix(b, op)
    if a.shape[1] != b.shape[0]:
        raise RuntimeError(f"{op}: mat1 and mat2 shapes cannot be multiplied ({a.shape[0]}x{a.shape[1]} and "
                           f"{b.shape[0]}x{b.shape[1]})")
    xp = a.device.xp
    av, bv = _promote_values(a, b)
    a_rows, a_cols = a._sp_indices._data[0], a._sp_indices._data[1]
    b_rows, b_cols = b._sp_indices._data[0], b._sp_indices._data[1]
    order = xp.argsort(b_rows, kind="stable")
    counts = xp.bincount(b_rows, minlength=b.shape[0])
    starts = xp.cumsum(counts) - counts
    per_a = counts[a_cols]  # how many entries of b each entry of a meets
    total = int(per_a.sum())
    a_pick = xp.repeat(xp.arange(a_cols.shape[0], dtype=xp.int64), per_a)
    offset = xp.arange(total, dtype=xp.int64) - xp.repeat(xp.cumsum(per_a) - per_a, per_a)
    b_pick = order[starts[a_cols][a_pick] + offset]
    indices = xp.stack([a_rows[a_pick], b_cols[b_pick]])
    values = av[_tensor_like(a_pick, av)] * bv[_tensor_like(b_pick, bv)]
    product = SparseTensor._from_parts(_tensor_like(indices, a._sp_indices), values, (a.shape[0], b.shape[1]), False)
    return product.coalesce()


def matmul(input: Any, other: Any) -> Any:
    """``@`` / ``ember.mm`` / ``ember.matmul`` with a sparse operand: sparse @ dense and dense @ sparse give dense
    tensors, sparse @ sparse a sparse one (PyTorch's layouts)."""
    if _is_sparse(input) and _is_sparse(other):
        return _sparse_sparse(input, other, "mm")
    if _is_sparse(input):
        return _sparse_dense(input, other, "mm")
    if other.ndim != 2:
        raise RuntimeError(f"mm: dense @ sparse needs a 2-D sparse matrix, got size {list(other.shape)}")
    if input.ndim == 1:
        return _sparse_dense(t(other), input, "mm")
    return _sparse_dense(t(other), input.t(), "mm").t()


def mm(mat1: Any, mat2: Any, reduce: str = "sum") -> Any:
    """``torch.sparse.mm``: sparse @ dense -> dense, sparse @ sparse -> sparse. The gradient of a sparse
    leaf is sparse with its own pattern."""
    if reduce != "sum":
        raise NotImplementedError(f"sparse.mm: reduce={reduce!r} is not supported by ember; use 'sum'")
    if not (_is_sparse(mat1) or _is_sparse(mat2)):
        return mat1 @ mat2
    for operand in (mat1, mat2):
        if _is_sparse(operand):
            _check_matrix(operand, "sparse.mm")
    if mat1.ndim != 2 or mat2.ndim != 2:
        raise RuntimeError(f"sparse.mm: expected 2-D operands, got sizes {list(mat1.shape)} and {list(mat2.shape)}")
    return matmul(mat1, mat2)


def spmm(input: Any, mat2: Any) -> Any:
    """``torch.spmm``: sparse @ dense -> dense (a dense ``input`` works too)."""
    return matmul(input, mat2) if _is_sparse(input) or _is_sparse(mat2) else input @ mat2


def addmm(mat: Tensor, mat1: Any, mat2: Any, *, beta: Any = 1, alpha: Any = 1) -> Any:
    """``torch.sparse.addmm``: ``beta * mat + alpha * (mat1 @ mat2)`` with a sparse ``mat1``."""
    product = matmul(mat1, mat2) if _is_sparse(mat1) or _is_sparse(mat2) else mat1 @ mat2
    if alpha != 1:
        product = product * alpha
    return product if beta == 0 else (mat * beta if beta != 1 else mat) + product


# ---- reductions ---------------------------------------------------------------------------------------
def _dims(input: SparseTensor, dim: Any) -> list[int]:
    dims = [dim] if isinstance(dim, int) else list(dim)
    out = sorted({input._dim(d, "sparse.sum") for d in dims})
    if len(out) != len(dims):
        raise RuntimeError(f"sparse.sum: dim {list(dims)} names a dimension twice")
    return out


def sum(input: Any, dim: Any = None, dtype: Any = None) -> Tensor:  # noqa: A001 - torch.sparse.sum
    """``torch.sparse.sum``: all entries -> a 0-d dense tensor; over ``dim`` -> a sparse tensor of the
    remaining dims, or a dense one when every sparse dim is summed."""
    if not _is_sparse(input):
        out = input.sum() if dim is None else input.sum(dim=dim)
        return out if dtype is None else out.to(dtype)
    values = input._sp_values if dtype is None else input._sp_values.to(dtype)
    if dim is None:
        return values.sum()
    dims = _dims(input, dim)
    sd = input.sparse_dim()
    dense_dims = [1 + d - sd for d in dims if d >= sd]
    if dense_dims:
        values = values.sum(dim=dense_dims)
    kept = [d for d in range(sd) if d not in dims]
    if len(kept) == sd:  # dense dimensions only; PyTorch coalesces the result
        size = [s for d, s in enumerate(input._sp_size) if d not in dims]
        return SparseTensor._from_parts(input._sp_indices, values, size, input.is_coalesced()).coalesce()
    if not kept:
        return values.sum(dim=0)
    xp = input.device.xp
    indices = input._sp_indices._data[kept]
    size = [s for d, s in enumerate(input._sp_size) if d not in dims]
    partial = SparseTensor._from_parts(_tensor_like(xp.ascontiguousarray(indices), input._sp_indices), values, size,
                                       False)
    return partial.coalesce()


def tensor_sum(input: SparseTensor, dim: Any = None, keepdim: bool = False, *, dtype: Any = None) -> Tensor:
    """``s.sum()`` on a sparse tensor (``keepdim`` is not supported for sparse tensors, as in PyTorch)."""
    if keepdim:
        raise RuntimeError("sum: keepdim=True is not supported for sparse tensors")
    return sum(input, dim, dtype)


# ---- softmax over the stored entries -----------------------------------------------------------------------
def _softmax(input: SparseTensor, dim: int, dtype: Any, log: bool) -> SparseTensor:
    name = "sparse.log_softmax" if log else "sparse.softmax"
    if not _is_sparse(input):
        raise RuntimeError(f"{name}: expected a sparse tensor, got a strided one (use ember.softmax for dense ones)")
    s = input.coalesce()
    values = s._sp_values if dtype is None else s._sp_values.to(dtype)
    if not values.is_floating_point():
        raise RuntimeError(f"{name}: expected a floating point tensor, got {values.dtype}")
    d = s._dim(dim, name)
    sd = s.sparse_dim()
    if d >= sd:  # a dense dimension: an ordinary softmax inside each entry
        fn = nn_ops.log_softmax if log else nn_ops.softmax
        return s._with_values(fn(values, dim=1 + d - sd))
    if not s._nnz():
        return s._with_values(values)
    xp = s.device.xp
    groups, count = _index.group_ids(xp, s._sp_indices._data, s._sp_size[:sd], [k for k in range(sd) if k != d])
    # Shift by each group's maximum (a constant: softmax does not depend on it, so no gradient is lost).
    raw = values.detach()._data
    peak = xp.full((count,) + tuple(raw.shape[1:]), -xp.inf, dtype=raw.dtype)
    xp.maximum.at(peak, groups, raw)
    peak = xp.where(xp.isfinite(peak), peak, xp.zeros_like(peak))
    group_index = _tensor_like(groups, s._sp_indices)
    shifted = values - _tensor_like(peak, values)[group_index]
    exp = shifted.exp()
    total = zeros((count,) + tuple(values.shape[1:]), dtype=values.dtype, device=values.device)
    total = total.index_put_((group_index,), exp, accumulate=True)
    out = shifted - total.log()[group_index] if log else exp / total[group_index]
    return s._with_values(out)


def softmax(input: SparseTensor, dim: int, *, dtype: Any = None) -> SparseTensor:
    """``torch.sparse.softmax``: softmax over the stored entries along ``dim``; unstored entries count as
    -inf (they stay unstored). Uncoalesced inputs are coalesced first."""
    return _softmax(input, dim, dtype, log=False)


def log_softmax(input: SparseTensor, dim: int, *, dtype: Any = None) -> SparseTensor:
    """``torch.sparse.log_softmax``: as :func:`softmax`, in log space."""
    return _softmax(input, dim, dtype, log=True)


def spdiags(diagonals: Tensor, offsets: Tensor, shape: Sequence[int], layout: Any = None) -> SparseTensor:
    """``torch.sparse.spdiags``: row ``k`` of ``diagonals`` on diagonal ``offsets[k]``; element ``c`` of a row
    goes to column ``c`` (SciPy's dia convention)."""
    rows, cols = (int(s) for s in shape)
    xp = diagonals.device.xp
    entries_r, entries_c, picks = [], [], []
    width = diagonals.shape[1]
    for k, off in enumerate(int(o) for o in offsets.tolist()):
        c = xp.arange(max(0, off), min(cols, rows + off, width), dtype=xp.int64)
        entries_r.append(c - off)
        entries_c.append(c)
        picks.append(k * width + c)
    indices = xp.stack([xp.concatenate(entries_r), xp.concatenate(entries_c)]) if picks else xp.zeros((2, 0), xp.int64)
    flat_pick = xp.concatenate(picks) if picks else xp.zeros((0,), xp.int64)
    values = diagonals.reshape(-1)[_tensor_like(flat_pick, diagonals)]
    return SparseTensor._from_parts(_tensor_like(indices, diagonals), values, (rows, cols), False).coalesce()
