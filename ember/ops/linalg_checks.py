"""Argument checks and the one hand-written factorization kernel shared by ember's linear-algebra records.

PyTorch's messages are kept word for word (``linalg.inv: A must be batches of square matrices, but they are
2 by 3 matrices``) so code that matches on them keeps working. :func:`lu_xp` is LU with partial pivoting
written against an array namespace (NumPy has no LU; CuPy's is not batched), one Python step per column,
vectorized over the batch; it also locates the zero pivot PyTorch names when a matrix is singular.

Example:
    >>> import numpy as np
    >>> lu, piv = lu_xp(np, np.array([[1.0, 2.0], [3.0, 4.0]]))
    >>> piv.tolist(), lu.round(3).tolist()
    ([2, 2], [[3.0, 4.0], [0.333, 0.667]])
"""
from __future__ import annotations

import math

from typing import Any

import numpy as np

from ember import dtypes


class LinAlgError(RuntimeError):
    """``torch.linalg.LinAlgError``: a matrix was singular or not positive-definite (a RuntimeError)."""


def matrix(A: Any, op: str, name: str = "A", complex_ok: bool = False) -> None:
    """``A`` is a (batch of) matrix of a floating dtype LAPACK accepts (complex ones where ``complex_ok``)."""
    if A.ndim < 2:
        raise RuntimeError(f"{op}: The input tensor {name} must have at least 2 dimensions.")
    dt = A.dtype
    if dt.is_complex and not complex_ok:
        raise RuntimeError(f"{op}: complex inputs are not supported by ember's {op} yet (got {dt}); ember.linalg.eig, "
                           "eigvals, solve, inv and det take them")
    if not dt.is_floating_point and not (dt.is_complex and complex_ok):
        raise RuntimeError(f"{op}: Expected a floating point or complex tensor as input. Got "
                           f"{_torch_name(dt)}")
    if dt in (dtypes.float16, dtypes.bfloat16):
        raise RuntimeError(f"{op}: Low precision dtypes not supported. Got {_torch_name(dt)}")


def square(A: Any, op: str, name: str = "A", complex_ok: bool = False) -> None:
    matrix(A, op, name, complex_ok)
    if A.shape[-1] != A.shape[-2]:
        raise RuntimeError(f"{op}: {name} must be batches of square matrices, but they are {A.shape[-2]} by "
                           f"{A.shape[-1]} matrices")


def same_dtype(A: Any, B: Any, op: str) -> None:
    if A.dtype is not B.dtype:
        raise RuntimeError(f"{op}: Expected A and B to have the same dtype, but found A of type "
                           f"{_torch_name(A.dtype)} and B of type {_torch_name(B.dtype)} instead; convert one "
                           "with .to(...)")


def _torch_name(dt: Any) -> str:
    return {"float16": "Half", "bfloat16": "BFloat16", "float32": "Float", "float64": "Double", "int64": "Long",
            "int32": "Int", "int16": "Short", "int8": "Char", "uint8": "Byte", "bool": "Bool"}.get(dt.name, dt.name)


# ---- LU with partial pivoting ----------------------------------------------------------------------------
def lu_xp(xp: Any, a: Any) -> tuple:
    """``(LU, pivots)`` of ``a`` (..., m, n) as LAPACK's getrf: unit-lower L below the diagonal, U on and
    above it, 1-based int32 row swaps. A zero column is skipped (no division), as LAPACK does."""
    lu = xp.array(a, copy=True)
    m, n = lu.shape[-2], lu.shape[-1]
    k = min(m, n)
    batch = lu.shape[:-2]
    piv = xp.zeros(batch + (k,), dtype=xp.int32)
    flat = lu.reshape((math.prod(lu.shape[:-2]), m, n))
    rows = xp.arange(flat.shape[0])
    flat_piv = piv.reshape((math.prod(piv.shape[:-1]), k))
    complex_ = lu.dtype.kind == "c"
    for j in range(k):
        column = flat[:, j:, j]
        # LAPACK's pivot search (i?amax) compares |re| + |im| for complex numbers, not the modulus
        size = xp.abs(column.real) + xp.abs(column.imag) if complex_ else xp.abs(column)
        p = xp.argmax(size, axis=-1) + j
        flat_piv[:, j] = p + 1
        swap = flat[rows, p].copy()
        flat[rows, p] = flat[:, j]
        flat[:, j] = swap
        pivot = flat[:, j, j]
        safe = xp.where(pivot == 0, xp.ones_like(pivot), pivot)
        flat[:, j + 1:, j] = xp.where((pivot == 0)[:, None], flat[:, j + 1:, j], flat[:, j + 1:, j] / safe[:, None])
        flat[:, j + 1:, j + 1:] -= flat[:, j + 1:, j:j + 1] * flat[:, j:j + 1, j + 1:]
    return flat.reshape(lu.shape), flat_piv.reshape(piv.shape)


def first_zero_pivot(xp: Any, a: Any) -> list:
    """For each matrix of the batch, the 1-based index of the first zero diagonal element of U (0 if none)."""
    lu, _ = lu_xp(xp, a)
    diag = xp.diagonal(lu, 0, -2, -1).reshape((math.prod(lu.shape[:-2]), min(lu.shape[-2:])))
    out = []
    for row in (diag == 0).tolist():
        out.append(row.index(True) + 1 if True in row else 0)
    return out


def singular_error(xp: Any, a: Any, op: str, what: str) -> LinAlgError:
    """PyTorch's error for a singular input, naming the batch element and the zero diagonal element."""
    zeros = first_zero_pivot(xp, a)
    batched = a.ndim > 2
    for index, z in enumerate(zeros):
        if z:
            where = f"(Batch element {index}): " if batched else ""
            return LinAlgError(f"{op}: {where}The diagonal element {z} is zero, {what}")
    where = "(Batch element 0): " if batched else ""
    return LinAlgError(f"{op}: {where}The matrix is numerically singular, {what}")


def not_pd_order(M: Any) -> int:
    """The order of the first leading minor of one host matrix that is not positive-definite (0 if none)."""
    a = np.asarray(M.numpy() if hasattr(M, "numpy") else M)
    for k in range(1, a.shape[-1] + 1):
        try:
            np.linalg.cholesky(a[:k, :k])
        except np.linalg.LinAlgError:
            return k
    return 0
