"""``torch.sparse.sampled_addmm`` and ``torch.sparse.spsolve``: the two products/solves with a sparse CSR matrix
that ``torch.sparse`` names beside ``mm``/``addmm``.

``sampled_addmm(input, mat1, mat2, beta=, alpha=)`` is ``alpha * (mat1 @ mat2) * spy(input) + beta * input`` for a
CSR ``input``: the product is read at ``input``'s entries only (the ``sparse_sddmm`` record, never the dense
``m x n`` product) and the result is CSR with ``input``'s pattern. Gradients as PyTorch's: to ``mat1``
``alpha * G @ mat2^H`` and to ``mat2`` ``alpha * mat1^H @ G`` with ``G`` the result's gradient on the pattern (the
records' own rules), to ``input``'s values ``beta * G``.

``spsolve(input, other)`` solves ``input @ x = other`` for a square CSR ``input`` (``left=True`` only, as PyTorch).
It factors the dense form of ``input`` (LU with partial pivoting through ``ember.linalg.solve``): exact, with
O(n^2) memory, meant for the moderate systems a NumPy framework solves; gradients flow to ``other``
(``A^-H g``) and to ``input``'s stored values (``-(A^-H g) x^H`` read at the pattern: a gradient with the input's
layout and pattern, as PyTorch's sparse gradients). PyTorch 2.13 implements it on CUDA only (cuDSS); its CPU build
raises NotImplementedError.

Example:
    >>> import ember
    >>> a = ember.eye(2).to_sparse_csr()
    >>> ember.sparse.sampled_addmm(a, ember.ones(2, 3), ember.ones(3, 2)).to_dense().tolist()
    [[4.0, 0.0], [0.0, 4.0]]
    >>> ember.sparse.spsolve(a * 2.0, ember.tensor([2.0, 4.0])).tolist()
    [1.0, 2.0]
"""
from __future__ import annotations

from typing import Any

from ember.linalg import solve
from ember.ops.sparse_ops import sddmm
from ember.sparse.compressed import SparseCompressedTensor
from ember.sparse.coo import SparseTensor
from ember.surface.constants import sparse_csr
from ember.tensor import Tensor

_LAYOUT_NAMES = {"sparse_csr": "SparseCsr", "sparse_csc": "SparseCsc", "sparse_coo": "Sparse", "strided": "Strided"}


def _layout_name(t: Any) -> str:
    return _LAYOUT_NAMES.get(str(t.layout).rpartition(".")[2], str(t.layout))


def _dtype_name(t: Any) -> str:
    """PyTorch's scalar type name (Float, Double, ComplexFloat, ...) in its messages."""
    return {"float32": "Float", "float64": "Double", "float16": "Half", "bfloat16": "BFloat16", "int64": "Long",
            "int32": "Int", "int16": "Short", "int8": "Char", "uint8": "Byte", "bool": "Bool",
            "complex64": "ComplexFloat", "complex128": "ComplexDouble"}.get(str(t.dtype).rpartition(".")[2],
                                                                            str(t.dtype))


def _check_sampled_addmm(input: Any, mat1: Any, mat2: Any) -> None:
    """PyTorch's checks and messages, in its order."""
    if not isinstance(input, SparseCompressedTensor) or input.layout is not sparse_csr:
        layout = _layout_name(input) if isinstance(input, Tensor) else type(input).__name__
        raise RuntimeError(f"sampled_addmm: Expected result to have sparse csr layout, but got {layout}; convert the "
                           "input with .to_sparse_csr() first")
    for name, m in (("mat1", mat1), ("mat2", mat2)):
        if not isinstance(m, Tensor):
            raise TypeError(f"sampled_addmm: expected {name} to be a Tensor, got {type(m).__name__}")
        if isinstance(m, (SparseCompressedTensor, SparseTensor)):
            raise RuntimeError(f"sampled_addmm: Expected {name} to have strided layout, but got {_layout_name(m)}")
    if not (input.dtype.is_floating_point or input.dtype.is_complex):
        raise RuntimeError(f"sparse_sampled_addmm: Expected self to be a floating-point or complex tensor, but got "
                           f"{_dtype_name(input)}")
    if mat1.dtype is not mat2.dtype:
        raise RuntimeError(f"sampled_addmm: Expected mat1 and mat2 to have the same dtype, but got "
                           f"{_dtype_name(mat1)} and {_dtype_name(mat2)}")
    if mat1.dtype is not input.dtype:
        raise RuntimeError(f"sampled_addmm: Expected mat1 and self to have the same dtype, but got "
                           f"{_dtype_name(mat1)} and {_dtype_name(input)}")
    for name, m in (("mat1", mat1), ("mat2", mat2)):
        if m.ndim != 2:
            raise RuntimeError(f"sampled_addmm: Expected {name} to be a matrix, got {m.ndim}-D tensor")
    if mat1.shape[1] != mat2.shape[0]:
        raise RuntimeError(f"sampled_addmm: mat1 and mat2 shapes cannot be multiplied ({mat1.shape[0]}x"
                           f"{mat1.shape[1]} and {mat2.shape[0]}x{mat2.shape[1]})")
    if input.shape[0] != mat1.shape[0]:
        raise RuntimeError(f"sampled_addmm: self.shape[-2] must match mat1.shape[-2] (got {input.shape[0]} and "
                           f"{mat1.shape[0]})")
    if input.shape[1] != mat2.shape[1]:
        raise RuntimeError(f"sampled_addmm: self.shape[-1] must match mat2.shape[-1] (got {input.shape[1]} and "
                           f"{mat2.shape[1]})")
    if input.device != mat1.device or input.device != mat2.device:
        raise RuntimeError(f"sampled_addmm: expected all operands on one device, got {input.device}, "
                           f"{mat1.device} and {mat2.device}")


def sampled_addmm(input: Any, mat1: Any, mat2: Any, *, beta: Any = 1.0, alpha: Any = 1.0,
                  out: Any = None) -> SparseCompressedTensor:
    """``alpha * (mat1 @ mat2) * spy(input) + beta * input`` for a sparse CSR ``input`` (``torch.sparse.sampled_addmm``):
    a CSR result with ``input``'s pattern; the product is computed at the stored entries only.

    Example:
        >>> a = ember.sparse_csr_tensor([0, 1, 2], [1, 0], [1.0, 1.0], (2, 2))
        >>> sampled_addmm(a, ember.ones(2, 2), ember.ones(2, 2), beta=0.5).values().tolist()
        [2.5, 2.5]
    """
    if out is not None:
        raise NotImplementedError("sampled_addmm: out= is not supported in ember (a CSR result cannot be written in "
                                  "place); use the returned tensor")
    _check_sampled_addmm(input, mat1, mat2)
    rows, cols = input._entries()
    product = sddmm(rows, cols, mat1, mat2.t())  # (mat1 @ mat2)[row, col]: mat2's columns are mat2.t()'s rows
    values = input._sp_values
    if alpha != 1:
        product = product * alpha
    values = values * beta + product if beta != 1 else values + product
    return input._with_values(values)


def spsolve(input: Any, other: Any, *, left: bool = True) -> Tensor:
    """The solution ``x`` of ``input @ x = other`` for a square sparse CSR ``input`` (``torch.sparse.spsolve``);
    ``other`` is a vector ``(n,)`` (or a matrix ``(n, k)`` of right-hand sides).

    Example:
        >>> a = ember.sparse_csr_tensor([0, 1, 2], [0, 1], [2.0, 4.0], (2, 2))
        >>> spsolve(a, ember.tensor([2.0, 2.0])).tolist()
        [1.0, 0.5]
    """
    if not left:
        raise NotImplementedError("spsolve: only left=True (solve input @ out = other) is supported, as in PyTorch; "
                                  "for out @ input = other solve input.t() @ out.t() = other.t()")
    if not isinstance(input, SparseCompressedTensor) or input.layout is not sparse_csr:
        layout = _layout_name(input) if isinstance(input, Tensor) else type(input).__name__
        raise RuntimeError(f"spsolve: expected input to be a sparse CSR matrix, got layout {layout}; convert it with "
                           ".to_sparse_csr() first")
    if not isinstance(other, Tensor) or isinstance(other, (SparseCompressedTensor, SparseTensor)):
        raise RuntimeError(f"spsolve: expected other to be a dense (strided) tensor, got "
                           f"{_layout_name(other) if isinstance(other, Tensor) else type(other).__name__}")
    n, m = input.shape
    if n != m:
        raise RuntimeError(f"spsolve: expected a square input matrix, got size ({n}, {m})")
    if other.ndim not in (1, 2) or other.shape[0] != n:
        raise RuntimeError(f"spsolve: expected other of size ({n},) or ({n}, k) for an input of size ({n}, {n}), "
                           f"got {tuple(other.shape)}")
    if other.dtype is not input.dtype:
        raise RuntimeError(f"spsolve: expected input and other to have the same dtype, got {input.dtype} and "
                           f"{other.dtype}")
    return solve(input.to_dense(), other)
