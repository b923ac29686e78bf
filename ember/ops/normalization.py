"""Batch normalization in training mode as one fused op and one fused backward.

Composed from primitives (mean, subtract, square, mean, rsqrt, two products, a sum), a training
batch norm made ~9 full passes over the activation forward and ~20 backward, with as many
temporaries: a quarter of a ResNet-18 step here. These make 5 each way, on blocks of channels
split over the cores (``ember.backends.cpu_threads``: NumPy releases the GIL in these loops). Sums of products run as
``einsum`` contractions (no temporary product array), and the gradient is formed from the
centered input, ``dx = a * (g - mean(g) - xhat * mean(g * xhat))``, which keeps its precision when
a channel's mean is large against its spread.

* ``batch_norm_train(x, [weight], [bias]) -> (y, mean, var)``: batch statistics over every dim
  but dim 1 (``var`` biased; the caller updates running statistics from them);
* ``batch_norm_train_backward(g, x, mean, var, [weight]) -> (gx, gweight, gbias)``.

With ``create_graph=True`` the vjp differentiates the composite instead (as layer_norm does), so
second derivatives see the statistics move.

Example:
    >>> import ember
    >>> x = ember.tensor([[1.0, 2.0], [3.0, 6.0]])
    >>> y, mean, var = batch_norm_train(x, None, None, 1e-5)
    >>> mean.tolist(), var.tolist()
    ([2.0, 4.0], [1.0, 4.0])
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from ember.autograd import grad_mode
from ember.backends import native_kernel
from ember.backends.cpu_threads import split_channels
from ember.ops import batching, dispatch, elementwise as ew, reductions as red
from ember.ops.cost import numel
from ember.ops.registry import OpDef, Spec, register
from ember.onnx import emitters as to_onnx


def _as3(xp: Any, a: Any) -> Any:
    """(N, C, ...) -> (N, C, L) without a copy where possible; float16/bfloat16 in float32."""
    a = a.reshape(a.shape[0], a.shape[1], -1)
    return a.astype(xp.float32) if a.dtype.itemsize == 2 else a


def _native(xp: Any, name: str, *arrays: Any) -> Any:
    """The native kernel ``name`` (``cpu_norm_kernels``) when it takes these arrays: NumPy, C-contiguous
    float32 or float64 of one dtype; else None (the NumPy code below)."""
    if xp is not np or arrays[0].dtype not in (np.float32, np.float64):
        return None
    if any(a.dtype != arrays[0].dtype or not a.flags.c_contiguous for a in arrays):
        return None
    return native_kernel(xp, name)


def _per_channel(v: Any) -> Any:
    return v[None, :, None]


def _half_train_output(xp: Any, x3: Any, mean: Any, var: Any, weight: Any, bias: Any, eps: float, low: Any) -> Any:
    """PyTorch's CPU batch norm for float16/bfloat16 inputs: the statistics are computed in float32 and stored in
    the input's dtype (save_mean, save_invstd), then ``x * alpha + beta`` in float32 with ``alpha = invstd *
    weight`` and ``beta = bias - mean * alpha``, rounded once. Bit for bit torch's on random inputs (normalizing
    with the float32 statistics differs in a third of the elements by a half-precision ulp)."""
    mean_h = mean.astype(low).astype(xp.float32)
    invstd_h = (1.0 / xp.sqrt(var + xp.float32(eps))).astype(low).astype(xp.float32)
    alpha = invstd_h if weight is None else invstd_h * weight.astype(xp.float32)
    beta = -mean_h * alpha if bias is None else bias.astype(xp.float32) - mean_h * alpha
    # torch's vectorized loop fuses x * alpha + beta (one rounding): exact in float64, then rounded to float32
    wide = x3.astype(xp.float64) * _per_channel(alpha).astype(xp.float64) + _per_channel(beta).astype(xp.float64)
    return wide.astype(xp.float32)


def _cudnn(xp: Any, name: str, *args: Any) -> Any:
    """A GPU's cuDNN kernel's result (ember/backends/cuda_cudnn_train.py), or None: NumPy, no such kernel, or
    cuDNN refused the signature (the code below runs)."""
    if xp is np:
        return None
    kernel = native_kernel(xp, name)
    return None if kernel is None else kernel(*args)


def _train_impl(xp: Any, x: Any, *affine: Any, eps: float, has_weight: bool) -> tuple:
    if xp is not np:  # a GPU: cuDNN unless it refuses this signature (gpu22's hook)
        out = _cudnn(xp, "cudnn_batch_norm_train", x, affine, eps, has_weight)
        if out is not None:
            return out
    y, mean, var = _train_stats_impl(xp, x, *affine, eps=eps, has_weight=has_weight)
    if x.dtype.itemsize == 2:  # the statistics are still float32 here
        weight = affine[0] if has_weight else None
        bias = affine[-1] if len(affine) > int(has_weight) else None
        y = _half_train_output(xp, _as3(xp, x), mean, var, weight, bias, eps, x.dtype).reshape(x.shape)
    return y.astype(x.dtype, copy=False), mean.astype(x.dtype, copy=False), var.astype(x.dtype, copy=False)


def _train_stats_impl(xp: Any, x: Any, *affine: Any, eps: float, has_weight: bool) -> tuple:
    x3 = _as3(xp, x)
    n, c, length = x3.shape
    count = n * length
    weight = affine[0] if has_weight else None
    bias = affine[-1] if len(affine) > int(has_weight) else None
    y = xp.empty(x3.shape, dtype=x3.dtype)
    mean = xp.empty(c, dtype=x3.dtype)
    var = xp.empty(c, dtype=x3.dtype)

    kernel = _native(xp, "batch_norm_train", x3)
    if kernel is not None:  # two passes per channel, no GIL: the blocks run on both cores
        ones = xp.ones(c, dtype=x3.dtype)
        w_arr = ones if weight is None else xp.ascontiguousarray(weight, dtype=x3.dtype)
        b_arr = xp.zeros(c, dtype=x3.dtype) if bias is None else xp.ascontiguousarray(bias, dtype=x3.dtype)
        split_channels(xp, lambda c0, c1: kernel(x3, w_arr, b_arr, float(eps), c0, c1, y, mean, var), c, count)
        return y.reshape(x.shape), mean, var

    def channels(c0: int, c1: int) -> None:  # channel blocks are independent: one per core
        xs, ys = x3[:, c0:c1], y[:, c0:c1]
        mean[c0:c1] = xp.einsum("ncl->c", xs) / count
        xp.subtract(xs, _per_channel(mean[c0:c1]), out=ys)  # becomes the output in place
        var[c0:c1] = xp.einsum("ncl,ncl->c", ys, ys) / count
        scale = 1.0 / xp.sqrt(var[c0:c1] + eps)
        if weight is not None:
            scale = scale * weight[c0:c1].astype(scale.dtype, copy=False)
        ys *= _per_channel(scale.astype(ys.dtype, copy=False))
        if bias is not None:
            ys += _per_channel(bias[c0:c1].astype(ys.dtype, copy=False))

    split_channels(xp, channels, c, count)
    return y.reshape(x.shape), mean, var


def _composite(x: Any, eps: float) -> Any:
    """The normalization in ember ops (for create_graph=True backward graphs)."""
    dims = (0,) + tuple(range(2, x.ndim))
    centered = x - red.mean(x, dims, keepdim=True)
    return centered * ew.rsqrt(red.mean(centered * centered, dims, keepdim=True) + eps)


def _train_vjp(ctx: Any, grads: Any) -> tuple:
    g = grads[0]
    inputs = ctx.inputs
    x = inputs[0]
    eps, has_weight = ctx.attrs["eps"], ctx.attrs["has_weight"]
    w = inputs[1] if has_weight else None
    has_bias = len(inputs) > 1 + int(has_weight)
    if not grad_mode.STATE.enabled:  # plain backward: one fused pass with the saved statistics
        _, mean, var = ctx.out
        gx, gw, gb = dispatch.apply(BATCH_NORM_TRAIN_BACKWARD, (g, x, mean, var) + ((w,) if has_weight else ()),
                                    {"eps": eps})
    else:
        from ember.autograd import grad as autograd_grad  # noqa: PLC0415 - ember.autograd imports the ops

        wanted = [t for t, need in zip([x] + ([w] if has_weight else []), ctx.needs) if need]
        xhat = _composite(x, eps)
        view = (1, x.shape[1]) + (1,) * (x.ndim - 2)
        out = xhat * w.reshape(view) if has_weight else xhat
        found = iter(autograd_grad([out], wanted, [g], create_graph=True, allow_unused=True) if wanted else ())
        gx = next(found) if ctx.needs[0] else None
        gw = next(found) if has_weight and ctx.needs[1] else None
        gb = red.sum(g, (0,) + tuple(range(2, g.ndim))) if has_bias else None
    result = [gx if ctx.needs[0] else None]
    if has_weight:
        result.append(gw if ctx.needs[1] else None)
    if has_bias:
        result.append(gb if ctx.needs[-1] else None)
    return tuple(r if r is None or r.dtype is t.dtype else r.to(t.dtype) for r, t in zip(result, inputs))


def _train_rule(x: Spec, *affine: Spec, eps: float, has_weight: bool) -> tuple:
    stat = Spec((x.shape[1],), x.dtype, x.device)
    return Spec(x.shape, x.dtype, x.device), stat, stat


def _train_flops(inputs: Sequence[Any], outputs: Sequence[Any], attrs: dict) -> int:
    """7 per element: sum, subtract, square-and-add, scale, shift (and the statistics' few)."""
    return 7 * numel(outputs[0])


def _backward_impl(xp: Any, g: Any, x: Any, mean: Any, var: Any, *weight: Any, eps: float) -> tuple:
    if xp is not np:  # a GPU: cuDNN unless it refuses this signature (gpu22's hook)
        out = _cudnn(xp, "cudnn_batch_norm_backward", g, x, mean, var, weight, eps)
        if out is not None:
            return out
    g3, x3 = _as3(xp, g), _as3(xp, x)
    n, c, length = x3.shape
    count = n * length
    mean, var = mean.astype(x3.dtype, copy=False), var.astype(x3.dtype, copy=False)
    invstd = 1.0 / xp.sqrt(var + eps)
    a = invstd * weight[0].astype(invstd.dtype, copy=False) if weight else invstd
    gx = xp.empty(x3.shape, dtype=x3.dtype)
    gw = xp.empty(c, dtype=x3.dtype)
    gb = xp.empty(c, dtype=x3.dtype)
    kernel = _native(xp, "batch_norm_backward", g3, x3)
    if kernel is not None:  # one pass for the sums, one for gx, per channel; no GIL: both cores
        a_w = xp.ascontiguousarray(weight[0], dtype=x3.dtype) if weight else xp.ones(c, dtype=x3.dtype)
        invstd = xp.ascontiguousarray(invstd, dtype=x3.dtype)
        mean = xp.ascontiguousarray(mean)
        split_channels(xp, lambda c0, c1: kernel(g3, x3, mean, invstd, a_w, c0, c1, gx, gw, gb), c, count)
        param = weight[0].dtype if weight else x.dtype
        return (gx.reshape(x.shape).astype(x.dtype, copy=False), gw.astype(param, copy=False),
                gb.astype(param, copy=False))

    def channels(c0: int, c1: int) -> None:
        gs, gxs = g3[:, c0:c1], gx[:, c0:c1]
        gb[c0:c1] = xp.einsum("ncl->c", gs)
        centered = x3[:, c0:c1] - _per_channel(mean[c0:c1])
        gw[c0:c1] = xp.einsum("ncl,ncl->c", gs, centered) * invstd[c0:c1]  # sum(g * xhat)
        # dx = a * (g - gb / count - xhat * gw / count), with xhat = centered * invstd
        ac = a[c0:c1]
        centered *= _per_channel(-(ac * invstd[c0:c1] * gw[c0:c1] / count))
        xp.multiply(gs, _per_channel(ac), out=gxs)
        gxs += centered
        gxs += _per_channel(-(ac * gb[c0:c1] / count))

    split_channels(xp, channels, c, count)
    param = weight[0].dtype if weight else x.dtype
    return (gx.reshape(x.shape).astype(x.dtype, copy=False), gw.astype(param, copy=False),
            gb.astype(param, copy=False))


# ---- vmap: samples become channel groups ---------------------------------------------------------------
# A sample of shape (N, C, ...) normalizes each channel over N and the spatial dims. A batch of B samples,
# laid out as (N, B, C, ...) and read as (N, B*C, ...), is one call of the op: each of the B*C channels is
# one sample's channel, so its statistics are that sample's (a reshape, no Python loop).
def _channels_of(x: Any, bdim: int | None, size: int) -> Any:
    """A batched (N, C, ...) input as (N, B*C, ...): the batch dim moved next to the channels and merged."""
    if bdim is not None:
        x = batching.move(x, bdim, 1)
    else:  # shared by every sample (a batched weight against a shared input): one copy per sample
        shape = tuple(x.shape)
        x = batching._apply("expand", batching._apply("reshape", x, shape=shape[:1] + (1,) + shape[1:]),
                            shape=shape[:1] + (size,) + shape[1:])
    shape = tuple(x.shape)
    return batching._apply("reshape", x, shape=(shape[0], shape[1] * shape[2]) + shape[3:])


def _per_sample_channels(v: Any, bdim: int | None, size: int) -> Any:
    """A per-channel vector (C,) of every sample, as (B*C,): batched ones in order, shared ones repeated."""
    v = batching.with_batch(v, bdim, size)
    return batching._apply("reshape", v, shape=(-1,))


def _split_channels(y: Any, size: int) -> Any:
    """(N, B*C, ...) back to (N, B, C, ...): the batch at dim 1 (a view, no copy)."""
    shape = tuple(y.shape)
    return batching._apply("reshape", y, shape=(shape[0], size, shape[1] // size) + shape[2:])


def _batch_train(op: OpDef, args: tuple, bdims: tuple, attrs: dict, size: int) -> tuple:
    x = _channels_of(args[0], bdims[0], size)
    affine = tuple(_per_sample_channels(a, d, size) for a, d in zip(args[1:], bdims[1:]))
    y, mean, var = dispatch.apply(op, (x,) + affine, attrs)
    stats = (size, -1)
    return ((_split_channels(y, size), batching._apply("reshape", mean, shape=stats),
             batching._apply("reshape", var, shape=stats)), (1, 0, 0))


def _batch_train_backward(op: OpDef, args: tuple, bdims: tuple, attrs: dict, size: int) -> tuple:
    g, x = (_channels_of(a, d, size) for a, d in zip(args[:2], bdims[:2]))
    rest = tuple(_per_sample_channels(a, d, size) for a, d in zip(args[2:], bdims[2:]))
    gx, gw, gb = dispatch.apply(op, (g, x) + rest, attrs)
    stats = (size, -1)
    return ((_split_channels(gx, size), batching._apply("reshape", gw, shape=stats),
             batching._apply("reshape", gb, shape=stats)), (1, 0, 0))


BATCH_NORM_TRAIN = register(OpDef(
    name="batch_norm", batch=_batch_train, category="nn", impl=_train_impl, vjp=_train_vjp, save="both", saved_outputs=(1, 2), num_outputs=3,
    nondiff_outputs=(1, 2), shape_rule=_train_rule, flops=_train_flops, onnx=to_onnx.batch_norm,
))
BATCH_NORM_TRAIN_BACKWARD = register(OpDef(
    name="batch_norm_backward", batch=_batch_train_backward, category="nn", impl=_backward_impl, num_outputs=3,
    flops=lambda inputs, outputs, attrs: 8 * numel(inputs[1]),
    shape_rule=lambda g, x, mean, var, *w, eps: (
        Spec(x.shape, x.dtype, x.device), Spec((x.shape[1],), (w or (x,))[0].dtype, x.device),
        Spec((x.shape[1],), (w or (x,))[0].dtype, x.device)),
))


def batch_norm_train(x: Any, weight: Any, bias: Any, eps: float) -> tuple:
    """``(y, mean, var)`` of a training-mode batch norm; ``var`` is the biased batch variance."""
    args = (x,) + tuple(t for t in (weight, bias) if t is not None)
    return dispatch.apply(BATCH_NORM_TRAIN, args, {"eps": float(eps), "has_weight": weight is not None})
