"""Scaled dot-product attention as one op record, with a fused backward.

Composed of primitives, attention was ~12 ops each way per layer: the scale, ``masked_fill`` over
a (T, T) mask, softmax and its backward, transposes and copies before each product. Here the forward
is two batched GEMMs around an in-place masked softmax, and the (plain) backward is four GEMMs and
one elementwise pass: dV = P^T dO, dP = dO V^T, dS = P (dP - rowsum(dO O)) scale, dQ = dS K,
dK = dS^T Q. The probabilities P are saved for the backward (as the composite saved them), so no
product is recomputed. Transposed operands go to the GEMMs as views (NumPy's matmul passes them to
BLAS as they are). A differentiable backward (``create_graph=True``) differentiates the composite.

Used by ``ember.nn.functional.scaled_dot_product_attention`` without dropout and with no mask or a
causal one, for float32/float64 inputs of one batch shape; everything else takes the composite.

Example:
    >>> import ember
    >>> q = ember.ones(1, 2, 3, 4)
    >>> tuple(attention(q, q, q, is_causal=True, scale=0.5).shape)
    (1, 2, 3, 4)
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ember.autograd import grad as autograd_grad, grad_mode
from ember.backends import cpu_blas
from ember.backends.cpu_mkl import xp_matmul
from ember.backends.cpu_threads import num_threads, parallel_for
from ember.ops import attention_kernels, dispatch, nn_ops
from ember.ops.registry import OpDef, Spec, register
from ember.onnx import emitters as to_onnx


def _hidden(xp: Any, rows: int, keys: int, first_row: int = 0) -> Any:
    """True where query ``first_row + i`` may not see key j (j > first_row + i): PyTorch's is_causal, where
    query i sees keys 0..i."""
    return ~xp.tril(xp.ones((rows, keys), dtype=bool), first_row)


def _blocks(length: int, source: int, is_causal: bool) -> list:
    """(first query, end query, keys seen) per block of queries. Causal attention with 128+ queries runs
    in 4 blocks, each block only against the keys its last query sees: 5/8 of the products and softmax
    work of the full square (the rest is masked anyway)."""
    if not is_causal or length < 128:
        return [(0, length, source)]
    bounds = [length * b // 4 for b in range(5)]
    return [(lo, hi, min(hi, source)) for lo, hi in zip(bounds, bounds[1:])]


def _attention_impl(xp: Any, q: Any, k: Any, v: Any, *, is_causal: bool, scale: float,
                    keep_weights: bool = True) -> tuple:
    if attention_kernels.takes(xp, q, k, v):
        return attention_kernels.forward(q, k, v, is_causal, scale, keep_weights)
    blocks = _blocks(q.shape[-2], k.shape[-2], is_causal)
    weights = xp.empty(q.shape[:-1] + (k.shape[-2],), q.dtype) if len(blocks) == 1 else \
        xp.zeros(q.shape[:-1] + (k.shape[-2],), q.dtype)  # keys a block never sees keep weight 0
    out = xp.empty(q.shape[:-1] + (v.shape[-1],), q.dtype)
    _by_batch(xp, weights.size, (q, k, v), (out, weights),
              lambda q, k, v, out, weights: _attention_into(xp, q, k, v, out, weights, blocks, is_causal, scale))
    return out, weights


def _attention_into(xp: Any, q: Any, k: Any, v: Any, out: Any, weights: Any, blocks: list, is_causal: bool,
                    scale: float) -> None:
    for lo, hi, seen in blocks:
        scores = xp_matmul(xp, q[..., lo:hi, :], k[..., :seen, :].swapaxes(-1, -2))
        scores *= scores.dtype.type(scale)
        if is_causal:  # set, not added: a NaN score (inf * 0 in Q K^T) of a hidden key is hidden too, as in torch
            xp.copyto(scores, scores.dtype.type(-xp.inf), where=_hidden(xp, hi - lo, seen, lo))
        scores -= scores.max(axis=-1, keepdims=True)
        probabilities = xp.exp(scores, out=scores)
        probabilities /= probabilities.sum(axis=-1, keepdims=True)
        weights[..., lo:hi, :seen] = probabilities
        out[..., lo:hi, :] = xp_matmul(xp, probabilities, v[..., :seen, :])


# Attention over a batch runs on ember's threads, a block of the batch per thread, each thread's products on
# one BLAS thread. Split that way, a GPT layer's ~100 small per-head products (64-256 rows) no longer each wake
# and synchronize OpenBLAS's threads, and the softmax passes (most of attention's time: ~45 of ~55 ms a GPT
# layer on one core) use both cores. Every slice is computed as it would be alone, so results do not depend on
# the split. Below this many score elements per thread a hand-off costs more than it saves.
_SPLIT_SCORES = 1 << 17


def _by_batch(xp: Any, scores: int, inputs: tuple, outputs: tuple, body: Any) -> None:
    """``body(*inputs, *outputs)``, or the same on blocks of the leading (batch) axis on ember's threads with
    NumPy's BLAS held to one thread, when that pays: NumPy arrays, several threads, a batch of 2+, ``scores``
    (score elements of the whole call) of ``2 * _SPLIT_SCORES`` or more, NumPy's BLAS thread count settable.
    Slices of the leading axis are views, so no operand is copied (head-split views included)."""
    batch = inputs[0].shape[0] if inputs[0].ndim >= 3 else 1
    if xp is not np or batch < 2 or num_threads() < 2 or scores < 2 * _SPLIT_SCORES:
        body(*inputs, *outputs)
        return
    with cpu_blas.single_threaded_blas() as limited:
        if not limited:  # BLAS's threads cannot be held: one call, BLAS threading the products as before
            body(*inputs, *outputs)
            return
        parallel_for(lambda start, stop: body(*[a[start:stop] for a in inputs + outputs]), batch,
                     max(1, -(-_SPLIT_SCORES * batch // scores)))


def _composite(q: Any, k: Any, v: Any, is_causal: bool, scale: float) -> Any:
    """The same attention in differentiable ember ops (for create_graph=True)."""
    scores = (q * scale).matmul(k.mT)
    if is_causal:
        hidden = _hidden(q.device.xp, q.shape[-2], k.shape[-2])
        scores = scores.masked_fill(dispatch.Tensor._make(hidden, q.device, False), float("-inf"))
    return nn_ops.softmax(scores, -1).matmul(v)


def _attention_vjp(ctx: Any, grads: Any) -> tuple:
    g = grads[0]
    q, k, v = ctx.inputs
    is_causal, scale = ctx.attrs["is_causal"], ctx.attrs["scale"]
    if not grad_mode.STATE.enabled:
        out, weights = ctx.out
        return dispatch.apply(ATTENTION_BACKWARD, (g, q, k, v, out, weights), {"is_causal": is_causal, "scale": scale})
    wanted = [t for t, need in zip((q, k, v), ctx.needs) if need]
    found = iter(autograd_grad([_composite(q, k, v, is_causal, scale)], wanted, [g], create_graph=True,
                               allow_unused=True))
    return tuple(next(found) if need else None for need in ctx.needs)


def _attention_rule(q: Spec, k: Spec, v: Spec, *, is_causal: bool, scale: float, keep_weights: bool = True) -> tuple:
    return (Spec(tuple(q.shape[:-1]) + (v.shape[-1],), q.dtype, q.device),
            Spec(tuple(q.shape[:-1]) + (k.shape[-2],), q.dtype, q.device))


def _attention_flops(inputs: tuple, outputs: tuple, attrs: dict) -> int:
    """The two products, and 6 per score: the scale and softmax's 5 (as ``cost.softmax_flops``)."""
    q, k, v = inputs
    scores = 1
    for n in tuple(q.shape[:-1]) + (k.shape[-2],):
        scores *= n
    return scores * (2 * (q.shape[-1] + v.shape[-1]) + 6)


ATTENTION = register(OpDef(
    name="scaled_dot_product_attention", batch="leading", category="nn", impl=_attention_impl, vjp=_attention_vjp, save="both",
    num_outputs=2, nondiff_outputs=(1,), shape_rule=_attention_rule, flops=_attention_flops,
    onnx=to_onnx.scaled_dot_product_attention,
))


def _attention_backward_impl(xp: Any, g: Any, q: Any, k: Any, v: Any, out: Any, weights: Any, *,
                             is_causal: bool, scale: float) -> tuple:
    if attention_kernels.takes(xp, q, k, v, g, out, weights):
        return attention_kernels.backward(g, q, k, v, out, weights, is_causal, scale)
    blocks = _blocks(q.shape[-2], k.shape[-2], is_causal)
    dq, dk, dv = xp.empty_like(q), xp.zeros_like(k), xp.zeros_like(v)
    _by_batch(xp, weights.size, (g, q, k, v, out, weights), (dq, dk, dv),
              lambda *arrays: _attention_backward_into(xp, *arrays, blocks=blocks, is_causal=is_causal, scale=scale))
    return dq, dk, dv


def _attention_backward_into(xp: Any, g: Any, q: Any, k: Any, v: Any, out: Any, weights: Any, dq: Any, dk: Any,
                             dv: Any, *, blocks: list, is_causal: bool, scale: float) -> None:
    for lo, hi, seen in blocks:
        p, g_rows = weights[..., lo:hi, :seen], g[..., lo:hi, :]
        dv[..., :seen, :] += xp_matmul(xp, p.swapaxes(-1, -2), g_rows)
        dp = xp_matmul(xp, g_rows, v[..., :seen, :].swapaxes(-1, -2))
        # softmax's backward: dS = P (dP - sum_j P dP) and sum_j P_j dP_j = sum_d dO_d O_d (T x D, not T x T)
        dp -= (g_rows * out[..., lo:hi, :]).sum(axis=-1, keepdims=True)
        dp *= p
        dp *= dp.dtype.type(scale)
        if is_causal:  # hidden keys get no gradient, also from rows that are NaN (masked_fill's backward)
            xp.copyto(dp, dp.dtype.type(0), where=_hidden(xp, hi - lo, seen, lo))
        dq[..., lo:hi, :] = xp_matmul(xp, dp, k[..., :seen, :])
        dk[..., :seen, :] += xp_matmul(xp, dp.swapaxes(-1, -2), q[..., lo:hi, :])


ATTENTION_BACKWARD = register(OpDef(
    name="scaled_dot_product_attention_backward", batch="leading", category="nn", impl=_attention_backward_impl, num_outputs=3,
    shape_rule=lambda g, q, k, v, out, weights, is_causal, scale: (q, k, v),
    flops=lambda inputs, outputs, attrs: 2 * _attention_flops(inputs[1:4], (), attrs),  # four products
))


def attention(query: Any, key: Any, value: Any, is_causal: bool, scale: float) -> Any:
    """softmax(Q K^T scale (+ causal mask)) V as one op (see the module docstring for when it applies). Where no
    gradient can be asked for, the native kernels skip writing the probabilities (``keep_weights=False``: the
    record's second output is then a broadcast zero, which nothing reads)."""
    keep = grad_mode.STATE.enabled and any(getattr(t, "requires_grad", False) for t in (query, key, value))
    attrs = {"is_causal": bool(is_causal), "scale": float(scale)}
    if not keep:
        attrs["keep_weights"] = False
    out, _ = dispatch.apply(ATTENTION, (query, key, value), attrs)
    return out


def fits(query: Any, key: Any, value: Any, attn_mask: Any, dropout_p: float) -> bool:
    """Whether :func:`attention` computes this call (else the composite does)."""
    dtype = query.dtype
    return (attn_mask is None and dropout_p == 0.0 and query.ndim >= 2 and dtype.is_floating_point
            and dtype.itemsize >= 4 and key.dtype is dtype and value.dtype is dtype
            and tuple(query.shape[:-2]) == tuple(key.shape[:-2]) == tuple(value.shape[:-2]))

