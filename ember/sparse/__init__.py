"""``torch.sparse`` in ember: sparse COO tensors with real sparse storage, and their products.

A sparse COO tensor (``layout == ember.sparse_coo``) stores only its entries: ``indices`` (int64,
sparse_dim x nnz) and ``values`` (nnz x dense dims) plus a size (:mod:`ember.sparse.coo`). Products run
two sparse kernels (``ember/ops/sparse_ops.py``: sparse @ dense and its gradient, the sampled product),
numba-compiled on CPU when available, NumPy otherwise, on any backend's ``xp`` (the stand-in CUDA device
included). Gradients reach the dense operand and the values; the gradient of a sparse leaf is sparse with
its pattern. See docs/sparse.md.

Example:
    >>> import ember
    >>> a = ember.sparse_coo_tensor([[0, 1], [1, 0]], [2.0, 3.0], (2, 2))
    >>> a.is_sparse, a.to_dense().tolist(), a._nnz()
    (True, [[0.0, 2.0], [3.0, 0.0]], 2)
    >>> ember.sparse.mm(a, ember.ones(2, 1)).tolist()
    [[2.0], [3.0]]
"""
from __future__ import annotations

from typing import Any

from ember.sparse import compressed, ops as _ops
from ember.sparse.construct import check_sparse_tensor_invariants, dense_to_sparse, sparse_coo_tensor
from ember.sparse.coo import SparseTensor, map_values
from ember.sparse.ops import addmm, log_softmax, mm, softmax, spdiags, spmm, sum  # noqa: A004 - torch.sparse.sum
from ember.sparse.compressed import SparseCompressedTensor
from ember.sparse.legacy import legacy_sparse_types, sparse_type_name
from ember.sparse.sampled_solve import sampled_addmm, spsolve
from ember.surface.constants import sparse_coo, sparse_csc, sparse_csr, strided
from ember.tensor import Tensor

__all__ = ["mm", "addmm", "sum", "softmax", "log_softmax", "spdiags", "sampled_addmm", "spsolve", "as_sparse_gradcheck",
           "check_sparse_tensor_invariants", "SparseTensor", "SparseCompressedTensor"]

# Zero-preserving elementwise ops PyTorch runs on sparse COO tensors: applied to the stored values.
VALUE_OPS = ("neg", "abs", "relu", "sqrt", "square", "sin", "sinh", "tan", "tanh", "asin", "asinh", "atan", "atanh",
             "sign", "sgn", "ceil", "floor", "round", "trunc", "expm1", "log1p", "deg2rad", "rad2deg", "erf", "frac")


def as_sparse_gradcheck(gradcheck: Any) -> Any:
    """``torch.sparse.as_sparse_gradcheck``: ember's gradcheck already differentiates through the values of
    sparse inputs built inside the checked function, so the wrapper returns it unchanged."""
    return gradcheck


def _dense_to_dense(self: Tensor, dtype: Any = None, *, masked_grad: bool | None = None) -> Tensor:
    """``to_dense()`` of a strided tensor: itself (PyTorch), or a cast."""
    return self if dtype is None else self.to(dtype)


def _pow(self: SparseTensor, exponent: Any) -> SparseTensor:
    """``s ** p`` for a number ``p > 0`` (zero-preserving), on the coalesced values."""
    if not isinstance(exponent, (int, float)) or exponent <= 0:
        raise RuntimeError(f"pow: a sparse tensor can be raised to a positive number only (0 ** {exponent!r} would "
                           f"fill the unstored entries), got {exponent!r}")
    coalesced = self.coalesce()
    return coalesced._with_values(coalesced._sp_values ** exponent)


def install() -> None:
    """The sparse parts of Tensor's API: conversions on dense tensors, operators and methods of sparse ones."""
    Tensor.is_sparse = False
    Tensor._sparse_layout = False  # a class attribute, read by ember.ops.linalg.matmul on every product
    SparseTensor._sparse_layout = True
    Tensor.layout = property(lambda self: strided)
    Tensor.to_sparse = dense_to_sparse
    Tensor.to_sparse_coo = dense_to_sparse
    Tensor.to_sparse_csr = compressed.dense_to_csr
    Tensor.to_sparse_csc = compressed.dense_to_csc
    SparseTensor.to_sparse_csr = compressed.dense_to_csr
    SparseTensor.to_sparse_csc = compressed.dense_to_csc
    Tensor.to_dense = _dense_to_dense
    methods = {
        "__add__": _ops.add, "add": _ops.add, "__sub__": _ops.sub, "sub": _ops.sub,
        "__radd__": lambda self, other: _ops.add(other, self), "__rsub__": lambda self, other: _ops.sub(other, self),
        "__mul__": _ops.mul, "__rmul__": _ops.mul, "mul": _ops.mul, "__truediv__": _ops.div, "div": _ops.div,
        "__neg__": _ops.neg, "__matmul__": _ops.matmul, "__rmatmul__": lambda self, other: _ops.matmul(other, self),
        "mm": _ops.mm, "matmul": _ops.matmul, "smm": _ops.mm, "sum": _ops.tensor_sum, "t": _ops.t,
        "transpose": _ops.transpose, "_sparse_matmul": staticmethod(_ops.matmul),
        "pow": _pow, "__pow__": _pow,
    }
    for name, fn in methods.items():
        setattr(SparseTensor, name, fn)
    for name in VALUE_OPS:
        setattr(SparseTensor, name, map_values(lambda v, _n=name: getattr(v, _n)(), name))
    SparseTensor.T = property(_ops.t)
    SparseTensor.mT = property(lambda self: _ops.transpose(self, -2, -1))  # a batch of sparse matrices' transposes
    SparseTensor.type = _sparse_type


def _sparse_type(self: SparseTensor, dtype: Any = None, non_blocking: bool = False, **kwargs: Any) -> Any:
    """``x.type()`` names the sparse legacy type ('torch.sparse.FloatTensor'); with an argument, as dense tensors."""
    if dtype is None:
        return sparse_type_name(self)
    return Tensor.type(self, getattr(dtype, "_dtype", dtype), non_blocking, **kwargs)


globals().update(legacy_sparse_types("cpu"))  # torch.sparse.FloatTensor, DoubleTensor, LongTensor, ...
