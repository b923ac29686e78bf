"""Scaled-dot-product attention through cuDNN's fused kernels on a CUDA device (``F.scaled_dot_product_attention``
calls :func:`cudnn_sdpa` first there).

cuDNN's fused attention takes float16/bfloat16 (B, H, S, D) inputs and saves, for its backward, the output and
one float32 statistic per row (the softmax's log-sum-exp), not the (S, S) weights ember's composite keeps: so it
is a custom autograd ``Function`` here rather than a change to the composite. It applies when every condition
PyTorch's cuDNN backend also needs holds: a CUDA tensor, 16-bit q/k/v of one dtype, 4-D, no ``attn_mask``, no
dropout, the cuDNN frontend loaded (``ember.backends.cudnn.enabled`` and ``torch.backends.cuda.
enable_cudnn_sdp``), not inside a trace (``ember.compile`` records the composite), and cuDNN accepting the
signature; anything else returns None and the composite runs. A backward cuDNN refuses is computed from the
saved statistics with array formulas (FlashAttention's: P = exp(S - lse), dV = P^T dO, dS = P * (dO V^T -
rowsum(dO * O)), dQ = dS K scale, dK = dS^T Q scale), in float32.

Example (with a GPU and the frontend; else the composite runs):
    >>> import ember
    >>> q = k = v = ember.randn(2, 4, 128, 64, device="cuda", dtype=ember.bfloat16)   # doctest: +SKIP
    >>> ember.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)      # doctest: +SKIP
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from ember import interpreters
from ember.autograd.function import Function
from ember.backends import cuda_flags, native_kernel
from ember.tensor import Tensor

_HALVES = ("float16", "bfloat16")


def cudnn_sdpa(query: Tensor, key: Tensor, value: Tensor, is_causal: bool, scale: float | None) -> Tensor | None:
    """softmax(q k^T * scale [causal]) v by cuDNN, differentiable; None where cuDNN does not apply."""
    if not (query.device.type == "cuda" and query.ndim == key.ndim == value.ndim == 4
            and query.dtype.name in _HALVES and key.dtype is query.dtype and value.dtype is query.dtype
            and key.device == query.device and value.device == query.device
            and query.shape[-1] == key.shape[-1] and query.shape[:2] == key.shape[:2] == value.shape[:2]
            and cuda_flags.cudnn_sdp_enabled() and not interpreters.tracing()):
        return None
    xp = query.device.backend.xp
    if xp is np:
        return None
    kernel = native_kernel(xp, "cudnn_sdpa_train")
    if kernel is None:
        return None
    scale = 1.0 / math.sqrt(query.shape[-1]) if scale is None else float(scale)
    result = kernel(query.detach()._data, key.detach()._data, value.detach()._data, bool(is_causal), scale)
    if result is None:
        return None
    out, stats = result
    return _CudnnAttention.apply(query, key, value, (out, stats, bool(is_causal), scale))


class _CudnnAttention(Function):
    @staticmethod
    def forward(ctx: Any, query: Tensor, key: Tensor, value: Tensor, computed: tuple) -> Tensor:
        out, stats, is_causal, scale = computed
        ctx.save_for_backward(query, key, value)
        ctx.attention = (out, stats, is_causal, scale)
        return Tensor._make(out, query.device, False)

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> tuple:
        query, key, value = ctx.saved_tensors
        out, stats, is_causal, scale = ctx.attention
        q, k, v, g = (t.detach()._data for t in (query, key, value, grad))
        xp = query.device.backend.xp
        if g.dtype != q.dtype:
            g = g.astype(q.dtype)
        kernel = native_kernel(xp, "cudnn_sdpa_backward")
        grads = None if kernel is None else kernel(q, k, v, out, g, stats, is_causal, scale)
        if grads is None:
            grads = attention_backward(xp, q, k, v, out, g, stats, is_causal, scale)
        return tuple(Tensor._make(a, query.device, False) for a in grads) + (None,)


def attention_backward(xp: Any, q: Any, k: Any, v: Any, out: Any, g: Any, stats: Any, is_causal: bool,
                       scale: float) -> tuple:
    """dq, dk, dv from the forward's output and log-sum-exp statistics (B, H, S, 1), in float32, cast back."""
    f32 = np.float32
    qf, kf, vf, of, gf = (a.astype(f32) for a in (q, k, v, out, g))
    scores = xp.matmul(qf, xp.swapaxes(kf, -1, -2)) * f32(scale)
    if is_causal:
        keep = xp.tril(xp.ones(scores.shape[-2:], dtype=bool))  # top-left aligned, as PyTorch and cuDNN
        scores = xp.where(keep, scores, f32(-np.inf))
    p = xp.exp(scores - stats.astype(f32))
    dv = xp.matmul(xp.swapaxes(p, -1, -2), gf)
    dp = xp.matmul(gf, xp.swapaxes(vf, -1, -2))
    ds = p * (dp - (gf * of).sum(axis=-1, keepdims=True))
    dq = xp.matmul(ds, kf) * f32(scale)
    dk = xp.matmul(xp.swapaxes(ds, -1, -2), qf) * f32(scale)
    return dq.astype(q.dtype), dk.astype(k.dtype), dv.astype(v.dtype)
