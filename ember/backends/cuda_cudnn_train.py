"""cuDNN graphs for training: layer norm and batch norm forward (with statistics) and backward, attention
forward with softmax statistics and its backward; the plumbing of :mod:`ember.backends.cuda_cudnn`
(one graph per signature, built with the frontend's ``pygraph``, refused signatures cached as None so
the caller's CuPy path runs).

Frontend calls (``nvidia-cudnn-frontend`` 1.32's keywords, the same as the C++ bindings'):

* ``layernorm(norm_forward_phase=TRAINING, input, scale, bias, epsilon)`` -> ``(Y, mean, inv_var)``,
  ``layernorm_backward(grad, input, scale, mean, inv_variance)`` -> ``(DX, DScale, DBias)``; rows are
  ``(rows, features, 1, 1)`` views of C-contiguous inputs, statistics ``(rows, 1, 1, 1)`` float32;
* ``batchnorm(input, scale, bias, in_running_mean, in_running_var, epsilon, momentum)`` -> ``(Y, mean,
  inv_var, next_running_mean, next_running_var)`` (ember updates its running statistics itself, from
  the batch variance, as PyTorch: the running outputs go to scratch), ``batchnorm_backward(grad, input,
  scale, mean, inv_variance)``; ``(N, C, H, W)`` views, statistics ``(1, C, 1, 1)`` float32. ember's op
  saves the biased variance: ``var = 1 / inv_var**2 - eps`` (its backward turns it back into ``inv_var``);
* ``sdpa(q, k, v, generate_stats=True, attn_scale, use_causal_mask)`` -> ``(O, Stats)``,
  ``sdpa_backward(q, k, v, o, dO, stats, attn_scale, use_causal_mask)`` -> ``(dQ, dK, dV)``
  (half/bfloat16 only, as cuDNN's fused attention).

Which ops call them: layer norm (float32, weight and bias given) and batch norm (float32 or 16-bit
input) through hooks at the top of their impls in ember/ops/nn_ops.py and ember/ops/normalization.py,
only on a non-NumPy namespace. Attention's training kernels are built and tested but not wired: ember's
attention op saves its softmax weights for backward, not cuDNN's statistics. Pooling has no cuDNN node
in the frontend's Python API (no resample binding, 1.32) and CuPy 14 dropped its own cuDNN module: max/avg
pooling run CuPy's path.

Example (with a GPU and the frontend):
    >>> ops = CudnnOps(cudnn, cupy)                                     # doctest: +SKIP
    >>> y, mean, rstd = kernels(ops)["cudnn_layer_norm_train"](x, (w, b), 1, 1e-5, True)  # doctest: +SKIP
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ember.backends.cuda_cudnn import CudnnOps, _Built

_F32 = np.dtype(np.float32)
_HALVES = ("float16", "bfloat16")


def _device(ops: CudnnOps) -> int:
    return int(ops.cupy.cuda.runtime.getDevice())


def _by_value(graph: Any, fe: Any, name: str) -> Any:
    """A 1x1x1x1 float32 scalar passed by value (epsilon, momentum): a host array at execute time."""
    return graph.tensor(name=name, dim=[1, 1, 1, 1], stride=[1, 1, 1, 1], data_type=fe.data_type.FLOAT,
                        is_pass_by_value=True)


def _scalar(value: float) -> np.ndarray:
    return np.full((1, 1, 1, 1), value, dtype=np.float32)


def _float_stats(ops: CudnnOps, tensor: Any, shape: tuple) -> None:
    ops._output(tensor, shape, _F32)


# ---- layer norm ------------------------------------------------------------------------------------------
def layer_norm_train(ops: CudnnOps, x: Any, affine: tuple, count: int, eps: float, has_weight: bool) -> Any:
    """``(y, mean, rstd)`` as ember's ``layer_norm`` op returns them (statistics shaped ``x.shape[:-count] +
    (1,) * count``), or None: float32 only, weight and bias both given, C-contiguous, one dtype."""
    if not has_weight or len(affine) != 2 or x.dtype != _F32 or x.ndim < 2 or not x.flags.c_contiguous:
        return None
    w, b = affine
    if not ops._usable(x, w, b) or not (w.flags.c_contiguous and b.flags.c_contiguous):
        return None
    features = int(np.prod(x.shape[x.ndim - count:]))
    rows = x.size // features
    x4, w4, b4 = x.reshape(rows, features, 1, 1), w.reshape(1, features, 1, 1), b.reshape(1, features, 1, 1)
    key = ("layernorm_train", x4.shape, float(eps), _device(ops))

    def make() -> _Built:
        fe = ops.fe
        graph = ops._new_graph(x.dtype)
        tx, tw, tb = (ops._tensor(graph, n, a) for n, a in (("x", x4), ("scale", w4), ("bias", b4)))
        teps = _by_value(graph, fe, "epsilon")
        y, mean, inv_var = graph.layernorm(norm_forward_phase=fe.norm_forward_phase.TRAINING, input=tx, scale=tw,
                                           bias=tb, epsilon=teps, compute_data_type=fe.data_type.FLOAT,
                                           name="layernorm")
        ops._output(y, x4.shape, x.dtype)
        _float_stats(ops, mean, (rows, 1, 1, 1))
        _float_stats(ops, inv_var, (rows, 1, 1, 1))
        ops._finish(graph, False)
        return _Built(graph, [tx, tw, tb, teps], [y, mean, inv_var])

    built = ops._build(key, make)
    if built is None:
        return None
    y, mean, rstd = ops._run(built, [x4, w4, b4, _scalar(eps)], [x4.shape, (rows, 1, 1, 1), (rows, 1, 1, 1)],
                             [x.dtype, _F32, _F32])
    stats = x.shape[:x.ndim - count] + (1,) * count
    return y.reshape(x.shape), mean.reshape(stats), rstd.reshape(stats)


def layer_norm_backward(ops: CudnnOps, g: Any, x: Any, mean: Any, rstd: Any, weight: tuple, count: int) -> Any:
    """``(gx, gweight, gbias)`` as ember's ``layer_norm_backward`` op, or None (float32, a weight, contiguous)."""
    if len(weight) != 1 or x.ndim < 2 or any(a.dtype != _F32 or not a.flags.c_contiguous
                                             for a in (g, x, mean, rstd, weight[0])):
        return None
    features = int(np.prod(x.shape[x.ndim - count:]))
    rows = x.size // features
    g4, x4 = g.reshape(rows, features, 1, 1), x.reshape(rows, features, 1, 1)
    w4 = weight[0].reshape(1, features, 1, 1)
    m4, r4 = mean.reshape(rows, 1, 1, 1), rstd.reshape(rows, 1, 1, 1)
    key = ("layernorm_backward", x4.shape, _device(ops))

    def make() -> _Built:
        fe = ops.fe
        graph = ops._new_graph(x.dtype)
        tg, tx, tw, tm, tr = (ops._tensor(graph, n, a) for n, a in
                              (("dy", g4), ("x", x4), ("scale", w4), ("mean", m4), ("inv_variance", r4)))
        dx, dscale, dbias = graph.layernorm_backward(grad=tg, input=tx, scale=tw, mean=tm, inv_variance=tr,
                                                     compute_data_type=fe.data_type.FLOAT, name="layernorm_backward")
        ops._output(dx, x4.shape, x.dtype)
        ops._output(dscale, w4.shape, x.dtype)
        ops._output(dbias, w4.shape, x.dtype)
        ops._finish(graph, False)
        return _Built(graph, [tg, tx, tw, tm, tr], [dx, dscale, dbias])

    built = ops._build(key, make)
    if built is None:
        return None
    gx, gw, gb = ops._run(built, [g4, x4, w4, m4, r4], [x4.shape, w4.shape, w4.shape], x.dtype)
    shape = x.shape[x.ndim - count:]
    return gx.reshape(x.shape), gw.reshape(shape), gb.reshape(shape)


# ---- batch norm ------------------------------------------------------------------------------------------
def _nchw(a: Any) -> Any:
    """(N, C, ...) -> (N, C, L, 1): cuDNN's 4-D view (a C-contiguous input: no copy)."""
    return a.reshape(a.shape[0], a.shape[1], -1, 1)


def _bn_usable(x: Any) -> bool:
    return (x.ndim >= 2 and x.flags.c_contiguous and x.size > 0 and x.shape[0] * int(np.prod(x.shape[2:])) > 1
            and (x.dtype == _F32 or np.dtype(x.dtype).name in _HALVES))


def _channel_params(ops: CudnnOps, c: int, weight: Any, bias: Any) -> tuple:
    """Scale and bias as (1, C, 1, 1) float32 (ones and zeros where absent: cuDNN's node takes both)."""
    cp = ops.cupy
    w = cp.ones(c, dtype=_F32) if weight is None else weight.astype(_F32, copy=False)
    b = cp.zeros(c, dtype=_F32) if bias is None else bias.astype(_F32, copy=False)
    return cp.ascontiguousarray(w).reshape(1, c, 1, 1), cp.ascontiguousarray(b).reshape(1, c, 1, 1)


def batch_norm_train(ops: CudnnOps, x: Any, affine: tuple, eps: float, has_weight: bool) -> Any:
    """``(y, mean, var)`` as ember's ``batch_norm`` op (per-channel batch mean and biased variance, in
    ``x``'s dtype), or None."""
    if not _bn_usable(x):
        return None
    weight = affine[0] if has_weight else None
    bias = affine[-1] if len(affine) > int(has_weight) else None
    x4 = _nchw(x)
    c = x.shape[1]
    w4, b4 = _channel_params(ops, c, weight, bias)
    stat = (1, c, 1, 1)
    key = ("batchnorm_train", x4.shape, str(x.dtype), float(eps), _device(ops))

    def make() -> _Built:
        fe = ops.fe
        graph = ops._new_graph(x.dtype)
        tx = ops._tensor(graph, "x", x4)
        tw, tb, trm, trv = (ops._tensor(graph, n, w4) for n in ("scale", "bias", "in_running_mean", "in_running_var"))
        teps, tmom = _by_value(graph, fe, "epsilon"), _by_value(graph, fe, "momentum")
        outs = graph.batchnorm(input=tx, scale=tw, bias=tb, in_running_mean=trm, in_running_var=trv, epsilon=teps,
                               momentum=tmom, compute_data_type=fe.data_type.FLOAT, name="batchnorm")
        y, mean, inv_var, next_mean, next_var = outs
        ops._output(y, x4.shape, x.dtype)
        for t in (mean, inv_var, next_mean, next_var):
            _float_stats(ops, t, stat)
        ops._finish(graph, False)
        return _Built(graph, [tx, tw, tb, trm, trv, teps, tmom], [y, mean, inv_var, next_mean, next_var])

    built = ops._build(key, make)
    if built is None:
        return None
    scratch = ops.cupy.zeros(stat, dtype=_F32)  # running statistics: ember updates its own from (mean, var)
    y, mean, inv_var, _, _ = ops._run(built, [x4, w4, b4, scratch, scratch, _scalar(eps), _scalar(0.0)],
                                      [x4.shape] + [stat] * 4, [x.dtype] + [_F32] * 4)
    var = 1.0 / (inv_var * inv_var) - np.float32(eps)
    return (y.reshape(x.shape), mean.reshape(c).astype(x.dtype, copy=False),
            ops.cupy.maximum(var, 0).reshape(c).astype(x.dtype, copy=False))


def batch_norm_backward(ops: CudnnOps, g: Any, x: Any, mean: Any, var: Any, weight: tuple, eps: float) -> Any:
    """``(gx, gweight, gbias)`` as ember's ``batch_norm_backward`` op (parameter gradients in the weight's dtype,
    or the input's without one), or None."""
    if not _bn_usable(x) or g.shape != x.shape or g.dtype != x.dtype or not g.flags.c_contiguous:
        return None
    cp, c = ops.cupy, x.shape[1]
    x4, g4 = _nchw(x), _nchw(g)
    w4, _ = _channel_params(ops, c, weight[0] if weight else None, None)
    m4 = cp.ascontiguousarray(mean.astype(_F32, copy=False)).reshape(1, c, 1, 1)
    r4 = (1.0 / cp.sqrt(var.astype(_F32, copy=False) + np.float32(eps))).reshape(1, c, 1, 1)
    key = ("batchnorm_backward", x4.shape, str(x.dtype), _device(ops))

    def make() -> _Built:
        fe = ops.fe
        graph = ops._new_graph(x.dtype)
        tg, tx = ops._tensor(graph, "dy", g4), ops._tensor(graph, "x", x4)
        tw, tm, tr = (ops._tensor(graph, n, a) for n, a in (("scale", w4), ("mean", m4), ("inv_variance", r4)))
        dx, dscale, dbias = graph.batchnorm_backward(grad=tg, input=tx, scale=tw, mean=tm, inv_variance=tr,
                                                     compute_data_type=fe.data_type.FLOAT, name="batchnorm_backward")
        ops._output(dx, x4.shape, x.dtype)
        _float_stats(ops, dscale, (1, c, 1, 1))
        _float_stats(ops, dbias, (1, c, 1, 1))
        ops._finish(graph, False)
        return _Built(graph, [tg, tx, tw, tm, tr], [dx, dscale, dbias])

    built = ops._build(key, make)
    if built is None:
        return None
    gx, gw, gb = ops._run(built, [g4, x4, w4, m4, r4], [x4.shape, (1, c, 1, 1), (1, c, 1, 1)],
                          [x.dtype, _F32, _F32])
    param = weight[0].dtype if weight else x.dtype
    return gx.reshape(x.shape), gw.reshape(c).astype(param, copy=False), gb.reshape(c).astype(param, copy=False)


# ---- attention (built, not wired: see the module docstring) ----------------------------------------------
def sdpa_train(ops: CudnnOps, q: Any, k: Any, v: Any, is_causal: bool, scale: float) -> Any:
    """``(out, stats)``: attention and the softmax statistics (B, H, S, 1) float32 its backward reads, or None
    (16-bit (B, H, S, D) inputs only)."""
    if q.ndim != 4 or np.dtype(q.dtype).name not in _HALVES or not ops._usable(q, k, v):
        return None
    shape, stats = q.shape[:-1] + (v.shape[-1],), q.shape[:-1] + (1,)
    key = ("sdpa_train", q.shape, q.strides, k.shape, k.strides, v.shape, v.strides, str(q.dtype), bool(is_causal),
           float(scale), _device(ops))

    def make() -> _Built:
        graph = ops._new_graph(q.dtype)
        tq, tk, tv = (ops._tensor(graph, n, a) for n, a in (("q", q), ("k", k), ("v", v)))
        out, tstats = graph.sdpa(q=tq, k=tk, v=tv, generate_stats=True, attn_scale=float(scale),
                                 use_causal_mask=bool(is_causal), name="sdpa")
        ops._output(out, shape, q.dtype)
        _float_stats(ops, tstats, stats)
        ops._finish(graph, False)
        return _Built(graph, [tq, tk, tv], [out, tstats])

    built = ops._build(key, make)
    return None if built is None else tuple(ops._run(built, [q, k, v], [shape, stats], [q.dtype, _F32]))


def sdpa_backward(ops: CudnnOps, q: Any, k: Any, v: Any, out: Any, grad: Any, stats: Any, is_causal: bool,
                  scale: float) -> Any:
    """``(dq, dk, dv)`` from the forward's output and statistics, or None."""
    if q.ndim != 4 or np.dtype(q.dtype).name not in _HALVES or not ops._usable(q, k, v, out, grad):
        return None
    key = ("sdpa_backward", q.shape, q.strides, k.shape, k.strides, v.shape, v.strides, out.strides, grad.strides,
           str(q.dtype), bool(is_causal), float(scale), _device(ops))

    def make() -> _Built:
        graph = ops._new_graph(q.dtype)
        named = (("q", q), ("k", k), ("v", v), ("o", out), ("dO", grad))
        tq, tk, tv, to, tdo = (ops._tensor(graph, n, a) for n, a in named)
        tstats = graph.tensor(name="stats", dim=list(stats.shape), stride=[s // stats.itemsize for s in stats.strides],
                              data_type=ops.fe.data_type.FLOAT)
        dq, dk, dv = graph.sdpa_backward(q=tq, k=tk, v=tv, o=to, dO=tdo, stats=tstats, attn_scale=float(scale),
                                         use_causal_mask=bool(is_causal), name="sdpa_backward")
        for t, a in ((dq, q), (dk, k), (dv, v)):
            ops._output(t, a.shape, q.dtype)
        ops._finish(graph, False)
        return _Built(graph, [tq, tk, tv, to, tdo, tstats], [dq, dk, dv])

    built = ops._build(key, make)
    if built is None:
        return None
    return tuple(ops._run(built, [q, k, v, out, grad, stats], [q.shape, k.shape, v.shape], q.dtype))


def kernels(ops: CudnnOps) -> dict:
    """The ``native_kernel`` names of this module's graphs, bound to ``ops``."""
    def bind(fn: Any) -> Any:
        return lambda *args: fn(ops, *args)

    return {"cudnn_layer_norm_train": bind(layer_norm_train), "cudnn_layer_norm_backward": bind(layer_norm_backward),
            "cudnn_batch_norm_train": bind(batch_norm_train), "cudnn_batch_norm_backward": bind(batch_norm_backward),
            "cudnn_sdpa_train": bind(sdpa_train), "cudnn_sdpa_backward": bind(sdpa_backward)}


__all__ = ["batch_norm_backward", "batch_norm_train", "kernels", "layer_norm_backward", "layer_norm_train",
           "sdpa_backward", "sdpa_train"]
