"""``torch.hash_tensor``: an xor of every element's 64 bits, as torch 2.13 defines it (mode 0, the only one).

Each element is widened to its 64-bit equivalent (floats to float64, signed integers to int64, ``uint8``/``bool`` to
uint64 by zero extension) and its bits read as ``uint64``; the xor over the reduced dimensions is the hash, a
``uint64`` tensor. Not differentiable. Complex and uint16/32/64 inputs are refused, as torch has no kernel for them.
The reduction is a log-depth tree of ``bitwise_xor`` on the tensor's array namespace, so it runs on every device.

Example:
    >>> ember.hash_tensor(ember.tensor([1.0, 2.0]))  # 0x3FF0... ^ 0x4000... = 0x7FF0...
    tensor(9218868437227405312, dtype=ember.uint64)
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ember import dtypes
from ember.creation import _wrap_array
from ember.ops import unsigned_ops
from ember.tensor import Tensor

__all__ = ["hash_tensor"]


def hash_tensor(input: Tensor, dim: Any = None, *, keepdim: bool = False, mode: int = 0) -> Tensor:
    """The xor of ``input``'s elements as 64-bit words over ``dim`` (all dimensions when None or empty)."""
    if mode != 0:
        raise RuntimeError(f"Unknown hash_tensor mode: {mode}")
    data, xp = input._data, input._device.xp
    dims = _reduced_dims(input, dim)
    for d in dims:
        if data.shape[d] == 0:
            raise IndexError(f"hash_tensor: Expected reduction dim {d} to have non-zero size.")
    words = _as_words(xp, data, input.dtype)
    kept = [d for d in range(data.ndim) if d not in dims]
    out_shape = tuple(data.shape[d] for d in kept)
    moved = xp.transpose(words, kept + list(dims)).reshape(out_shape + (-1,)) if words.size else None
    result = _xor_last(xp, moved) if moved is not None else xp.zeros(out_shape, dtype=np.uint64)
    if keepdim:
        result = result.reshape(tuple(1 if d in dims else n for d, n in enumerate(data.shape)))
    return _wrap_array(xp.asarray(result), input._device)


def _reduced_dims(input: Tensor, dim: Any) -> tuple:
    if dim is None or (isinstance(dim, (list, tuple)) and len(dim) == 0):
        if input.numel() == 0:
            raise RuntimeError("hash_tensor: Expected reduction dim to be specified for input.numel() == 0. Specify "
                               "the reduction dim with the 'dim' argument.")
        return tuple(range(input.ndim))
    listed = [dim] if isinstance(dim, int) else list(dim)
    out = []
    for d in listed:
        d = input._dim(int(d), "hash_tensor") if input.ndim else _scalar_dim(int(d))
        if d in out:
            raise RuntimeError(f"dim {d} appears multiple times in the list of dims")
        out.append(d)
    return tuple(sorted(out))


def _scalar_dim(d: int) -> int:
    if d not in (0, -1):
        raise IndexError(f"Dimension out of range (expected to be in range of [-1, 0], but got {d})")
    return 0


def _as_words(xp: Any, data: Any, dt: dtypes.dtype) -> Any:
    """Each element's 64-bit equivalent, its bits as uint64."""
    if dt.is_complex or dt in dtypes.WIDE_UNSIGNED:
        name = unsigned_ops.torch_name(dt.np) if dt in dtypes.WIDE_UNSIGNED else (
            "ComplexFloat" if dt is dtypes.complex64 else "ComplexDouble")
        raise NotImplementedError(f'"xor_sum_cpu" not implemented for \'{name}\' (as in PyTorch 2.13); hash '
                                  "x.long() or torch.view_as_real(x) instead")
    if dt.is_floating_point:
        return data.astype(np.float64).view(np.uint64)
    if dt.is_signed:
        return data.astype(np.int64).view(np.uint64)
    return data.astype(np.uint64)  # bool, uint8: zero extension


def _xor_last(xp: Any, words: Any) -> Any:
    """xor over the last axis by halving (log2(n) vectorized steps, no ufunc.reduce needed)."""
    while words.shape[-1] > 1:
        n = words.shape[-1]
        half = n // 2
        paired = xp.bitwise_xor(words[..., :half], words[..., half:2 * half])
        words = paired if n % 2 == 0 else xp.concatenate([paired, words[..., 2 * half:]], axis=-1)
    return words[..., 0]
