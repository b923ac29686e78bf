"""PyTorch's memory-overlap checks for writes: an in-place op or an ``out=`` may not read memory it writes elsewhere.

PyTorch refuses ``x[1:].add_(x[:-1])``, ``x.t().copy_(x)``, ``torch.exp(x, out=x.t())`` and ``x.index_copy_(0, i, x)``
with "unsupported operation: some elements of the input tensor and the written-to tensor refer to a single memory
location": the result would depend on the order the kernel visits the elements. NumPy buffers such operands, so
ember used to return a result (as if the input were cloned) where PyTorch raises; code written against ember then
failed under PyTorch. The rules (ATen's ``MemoryOverlap.cpp``), read from torch 2.13 op by op
(``tests/trust/test_trust_overlap_vs_torch.py``):

* :func:`status` of a written tensor ``a`` and a read tensor ``b``: ``"full"`` when they are the same tensor object,
  or both dense (their elements fill one range of memory without gaps) over the same range with the same strides;
  ``"partial"`` when both are dense and their ranges intersect otherwise (``x`` and ``x.t()``, ``x[1:]`` and
  ``x[:-1]``, ``x`` and ``x[0]``); ``"too_hard"`` when either is not dense (``x[:, ::2]``, a diagonal: PyTorch does
  not look further, and neither does ember); ``"no"`` otherwise.
* Elementwise ops, their in-place forms, ``copy_``, scans and ``sort`` (PyTorch's TensorIterator) refuse a
  ``"partial"`` pair (:func:`check_partial`); ``x.add_(x)`` is fine.
* Gathers and scatters (``index_select``, ``index_copy_``, ``scatter_``, ``take``, ``cat``, ``stack``, ``topk``, ...)
  refuse ``"full"`` too (:func:`check_none`): ``x.index_copy_(0, i, x)`` raises.
* Matrix products, reductions, ``softmax``, ``tril`` and torch.linalg do not check (PyTorch then computes from
  memory it is overwriting; ember computes from the inputs as they were).

Example:
    >>> x = ember.arange(6.)
    >>> x[1:].add_(x[:-1])
    Traceback (most recent call last):
    RuntimeError: add_: unsupported operation: some elements of the input tensor and the written-to tensor ...
"""
from __future__ import annotations

from typing import Any, Iterable

import numpy as np

MESSAGE = ("unsupported operation: some elements of the input tensor and the written-to tensor refer to a single "
           "memory location. Please clone() the tensor before performing the operation.")


def _dense(arr: np.ndarray) -> bool:
    """PyTorch's ``is_non_overlapping_and_dense``: sorted by stride, each stride is the size of the dims below it."""
    expected = arr.itemsize
    for stride, n in sorted((abs(s), n) for s, n in zip(arr.strides, arr.shape) if n > 1):
        if stride != expected:
            return False
        expected *= n
    return True


def _bounds(arr: np.ndarray) -> tuple[int, int]:
    lo = hi = arr.__array_interface__["data"][0]
    for s, n in zip(arr.strides, arr.shape):
        if s < 0:
            lo += s * (n - 1)
        else:
            hi += s * (n - 1)
    return lo, hi + arr.itemsize


def _same_layout(a: np.ndarray, b: np.ndarray) -> bool:
    """Equal strides (size-1 dims aside: NumPy gives them stride 0 where PyTorch keeps a computed one)."""
    if a.ndim != b.ndim:
        return False
    return all(sa == sb or n == 1 for sa, sb, n in zip(a.strides, b.strides, a.shape))


def _owner(a: np.ndarray) -> Any:
    """The object whose memory ``a`` views (the last ndarray of its ``base`` chain, or the buffer under it)."""
    b = a.base
    while b is not None:
        if not isinstance(b, np.ndarray):
            return b
        a, b = b, b.base
    return a


def status_arrays(a: Any, b: Any) -> str:
    """:func:`status` of two raw arrays (``"no"`` for anything that is not a NumPy array)."""
    if type(a) is not np.ndarray or type(b) is not np.ndarray:
        if not (isinstance(a, np.ndarray) and isinstance(b, np.ndarray)):
            return "no"
    if (a.base is None and b.base is None and a is not b) or _owner(a) is not _owner(b):
        return "no"  # different memory: the common answer, two attribute reads for fresh tensors
    if a.size == 0 or b.size == 0 or not np.may_share_memory(a, b):
        return "no"
    if not (_dense(a) and _dense(b)):
        return "too_hard"
    (alo, ahi), (blo, bhi) = _bounds(a), _bounds(b)
    if alo == blo and ahi == bhi:
        return "full" if _same_layout(a, b) else "partial"
    return "partial" if alo < bhi and blo < ahi else "no"


def status(a: Any, b: Any) -> str:
    """How the tensors ``a`` (written) and ``b`` (read) share memory: ``"full"``, ``"partial"``, ``"too_hard"`` or
    ``"no"`` (see the module docstring); ``b`` may be anything (numbers share nothing)."""
    if a is b:
        return "full"
    data_b = getattr(b, "_data", None)
    if data_b is None:
        return "no"
    return status_arrays(a._data, data_b)


def _tensors(values: Iterable[Any]) -> Iterable[Any]:
    for v in values:
        if isinstance(v, (list, tuple)):
            yield from _tensors(v)
        elif hasattr(v, "_data"):
            yield v


def check_partial(op_name: str, written: Any, reads: Iterable[Any]) -> None:
    """Raise PyTorch's error when ``written`` partially overlaps one of ``reads`` (elementwise ops, ``copy_``)."""
    if hasattr(reads, "_data"):  # one tensor
        reads = (reads,)
    for r in _tensors(reads):
        if status(written, r) == "partial":
            raise RuntimeError(f"{op_name}: {MESSAGE}")


def check_none(op_name: str, written: Any, reads: Iterable[Any]) -> None:
    """Raise PyTorch's error when ``written`` shares any element with one of ``reads`` (gathers and scatters)."""
    for r in _tensors(reads):
        if status(written, r) in ("full", "partial"):
            raise RuntimeError(f"{op_name}: {MESSAGE}")
