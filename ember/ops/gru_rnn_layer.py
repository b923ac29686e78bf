"""GRU and Elman RNN layer directions over a whole sequence as one op each (see ember/ops/lstm_layer.py
for why: per-step ops make a small recurrent net all Python overhead).

* ``gru_layer(gates_x, h0, w_hh[, b_hh]) -> (out, h_n, acts)``: ``gates_x`` (T, B, 3H) is ``x @ W_ih^T +
  b_ih`` of every step, gate order r, z, n as PyTorch; ``acts`` (T, B, 4H) keeps r, z, n and the recurrent
  part of n's pre-activation (``h @ W_hn^T + b_hn``, which r scales) for the backward;
* ``rnn_layer(gates_x, h0, w_hh[, b_hh], nonlinearity) -> (out, h_n)``: ``h_t = tanh or relu(gates_x[t] +
  h_{t-1} @ W_hh^T + b_hh)``;
* their ``*_backward`` records: backpropagation through time, one op per sequence.

The forward steps make the NumPy calls ``ember/nn/modules/rnn.py``'s ``_cell_step`` makes (r and z's
sigmoids in one pass), so the outputs equal the composite's. ``create_graph=True`` differentiates the
composite.

Example:
    >>> import ember
    >>> out, h_n = rnn_layer(ember.zeros(3, 2, 4), ember.zeros(2, 4), ember.eye(4), None, "tanh")
    >>> tuple(out.shape)
    (3, 2, 4)
"""
from __future__ import annotations

from typing import Any

import numpy as np  # np.errstate (sigmoid's overflow to its limit)

from ember.autograd import grad as autograd_grad, grad_mode
from ember.ops import dispatch, elementwise as ew
from ember.ops.linalg import _matmul_impl, matmul
from ember.ops.registry import OpDef, Spec, register
from ember.ops.views import chunk, stack


# ---- GRU ------------------------------------------------------------------------------------------
def _gru_impl(xp: Any, gx: Any, h: Any, w_hh: Any, *b_hh: Any) -> tuple:
    steps, batch, three = gx.shape
    hidden = three // 3
    w_t = w_hh.T
    out = xp.empty((steps, batch, hidden), dtype=gx.dtype)
    acts = xp.empty((steps, batch, 4 * hidden), dtype=gx.dtype)
    with np.errstate(over="ignore"):
        for t in range(steps):
            gates_h = _matmul_impl(xp, h, w_t)
            if b_hh:
                gates_h = gates_h + b_hh[0]
            x_t = gx[t]
            rz = 1 / (1 + xp.exp(-(x_t[:, :2 * hidden] + gates_h[:, :2 * hidden])))
            r, z = rz[:, :hidden], rz[:, hidden:]
            h_n = gates_h[:, 2 * hidden:]
            n = xp.tanh(x_t[:, 2 * hidden:] + r * h_n)
            h = n + z * (h - n)
            out[t] = h
            a = acts[t]
            a[:, :2 * hidden] = rz
            a[:, 2 * hidden:3 * hidden] = n
            a[:, 3 * hidden:] = h_n
    return out, h.copy(), acts


def _gru_backward_impl(xp: Any, g_out: Any, g_hn: Any, acts: Any, out: Any, h0: Any, w_hh: Any) -> tuple:
    steps, batch, four = acts.shape
    hidden = four // 4
    g_out = xp.zeros(out.shape, dtype=out.dtype) if g_out is None else g_out
    dh_next = xp.zeros(h0.shape, dtype=h0.dtype) if g_hn is None else g_hn
    parts = acts.reshape(steps, batch, 4, hidden)
    r, z, n, h_n = parts[:, :, 0], parts[:, :, 1], parts[:, :, 2], parts[:, :, 3]
    h_prev = xp.concatenate([h0[None], out[:-1]], axis=0)
    # h = n + z (h_prev - n): d_n = d_h (1 - z), d_z = d_h (h_prev - n); n = tanh(a_n), a_n = x_n + r h_n
    coef_n = (1 - z) * (1 - n * n)
    coef_z = (h_prev - n) * (z * (1 - z))
    coef_r = h_n * (r * (1 - r))
    d_x = xp.empty((steps, batch, 3, hidden), dtype=acts.dtype)  # d(gates_x): r, z, n
    d_h = xp.empty((steps, batch, 3, hidden), dtype=acts.dtype)  # d(gates_h): r, z, n's h_n
    for t in range(steps - 1, -1, -1):
        dh = g_out[t] + dh_next
        da_n = dh * coef_n[t]
        dx = d_x[t]
        dx[:, 0] = da_n * coef_r[t]
        dx[:, 1] = dh * coef_z[t]
        dx[:, 2] = da_n
        dg = d_h[t]
        dg[:, :2] = dx[:, :2]
        dg[:, 2] = da_n * r[t]
        dh_next = dh * z[t] + _matmul_impl(xp, dg.reshape(batch, 3 * hidden), w_hh)
    flat = d_h.reshape(steps * batch, 3 * hidden)
    d_w = _matmul_impl(xp, flat.T, h_prev.reshape(steps * batch, hidden))
    return d_x.reshape(steps, batch, 3 * hidden), dh_next, d_w, flat.sum(axis=0)


def _gru_composite(gx: Any, h: Any, w_hh: Any, b_hh: Any) -> tuple:
    outs = []
    w_t = w_hh.t()
    for t in range(gx.shape[0]):
        gates_h = matmul(h, w_t)
        if b_hh is not None:
            gates_h = gates_h + b_hh
        x_r, x_z, x_n = chunk(gx[t], 3, -1)
        h_r, h_z, h_n = chunk(gates_h, 3, -1)
        r = ew.sigmoid(x_r + h_r)
        z = ew.sigmoid(x_z + h_z)
        n = ew.tanh(x_n + r * h_n)
        h = n + z * (h - n)
        outs.append(h)
    return stack(outs, 0), h


def _gru_vjp(ctx: Any, grads: Any) -> tuple:
    inputs = ctx.inputs
    if not grad_mode.STATE.enabled:  # plain backward: one op over the whole sequence
        out, _, acts = ctx.out
        result = dispatch.apply(GRU_LAYER_BACKWARD, (grads[0], grads[1], acts, out, inputs[1], inputs[2]))
        return result if len(inputs) == 4 else result[:3]
    outs = _gru_composite(*inputs[:3], inputs[3] if len(inputs) == 4 else None)
    return _composite_grads(ctx, outs, grads[:2])


# ---- Elman RNN ------------------------------------------------------------------------------------
def _rnn_impl(xp: Any, gx: Any, h: Any, w_hh: Any, *b_hh: Any, nonlinearity: str) -> tuple:
    steps, batch, hidden = gx.shape
    w_t = w_hh.T
    out = xp.empty((steps, batch, hidden), dtype=gx.dtype)
    for t in range(steps):
        gates_h = _matmul_impl(xp, h, w_t)
        if b_hh:
            gates_h = gates_h + b_hh[0]
        pre = gx[t] + gates_h
        h = xp.tanh(pre) if nonlinearity == "tanh" else xp.maximum(0, pre)  # (-0.0 kept, as torch's relu)
        out[t] = h
    return out, h.copy()


def _rnn_backward_impl(xp: Any, g_out: Any, g_hn: Any, out: Any, h0: Any, w_hh: Any, nonlinearity: str) -> tuple:
    steps, batch, hidden = out.shape
    g_out = xp.zeros(out.shape, dtype=out.dtype) if g_out is None else g_out
    dh_next = xp.zeros(h0.shape, dtype=h0.dtype) if g_hn is None else g_hn
    slope = 1 - out * out if nonlinearity == "tanh" else None
    d_pre = xp.empty(out.shape, dtype=out.dtype)
    for t in range(steps - 1, -1, -1):
        dh = g_out[t] + dh_next
        # relu: 0 where the output is <= 0 (NaN gradients too), the gradient elsewhere (NaN outputs pass it), as
        # relu's rule and PyTorch's threshold_backward
        d = dh * slope[t] if slope is not None else xp.where(out[t] <= 0, 0, dh)
        d_pre[t] = d
        dh_next = _matmul_impl(xp, d, w_hh)
    flat = d_pre.reshape(steps * batch, hidden)
    h_prev = xp.concatenate([h0[None], out[:-1]], axis=0).reshape(steps * batch, hidden)
    d_w = _matmul_impl(xp, flat.T, h_prev)
    return d_pre, dh_next, d_w, flat.sum(axis=0)


def _rnn_composite(gx: Any, h: Any, w_hh: Any, b_hh: Any, nonlinearity: str) -> tuple:
    outs = []
    w_t = w_hh.t()
    for t in range(gx.shape[0]):
        gates_h = matmul(h, w_t)
        if b_hh is not None:
            gates_h = gates_h + b_hh
        pre = gx[t] + gates_h
        h = ew.tanh(pre) if nonlinearity == "tanh" else ew.relu(pre)
        outs.append(h)
    return stack(outs, 0), h


def _rnn_vjp(ctx: Any, grads: Any) -> tuple:
    inputs = ctx.inputs
    nonlinearity = ctx.attrs["nonlinearity"]
    if not grad_mode.STATE.enabled:
        out, _ = ctx.out
        result = dispatch.apply(RNN_LAYER_BACKWARD, (grads[0], grads[1], out, inputs[1], inputs[2]),
                                {"nonlinearity": nonlinearity})
        return result if len(inputs) == 4 else result[:3]
    outs = _rnn_composite(*inputs[:3], inputs[3] if len(inputs) == 4 else None, nonlinearity)
    return _composite_grads(ctx, outs, grads[:2])


def _composite_grads(ctx: Any, outs: tuple, grads: tuple) -> tuple:
    """create_graph=True: the gradients of the per-step composite, a graph that can be differentiated again."""
    inputs = ctx.inputs
    pairs = [(o, g) for o, g in zip(outs, grads) if g is not None]
    wrt = [i for i, need in enumerate(ctx.needs) if need]
    found = autograd_grad([o for o, _ in pairs], [inputs[i] for i in wrt], [g for _, g in pairs],
                          create_graph=True, allow_unused=True)
    result = [None] * len(inputs)
    for i, g in zip(wrt, found):
        result[i] = g
    return tuple(result)


# ---- records ---------------------------------------------------------------------------------------
def _spec(shape: tuple, like: Spec) -> Spec:
    return Spec(tuple(shape), like.dtype, like.device)


def _flops(gates: int) -> Any:
    def count(inputs: tuple, outputs: tuple, attrs: dict) -> int:
        steps, batch, width = inputs[0].shape
        return steps * batch * (2 * width * (width // gates) + 8 * width)
    return count


GRU_LAYER = register(OpDef(
    name="gru_layer", category="nn", impl=_gru_impl, vjp=_gru_vjp, save="both", num_outputs=3, nondiff_outputs=(2,),
    materialize_grads=False, flops=_flops(3), batch="loop",
    shape_rule=lambda gx, h, w, *b: (_spec(gx.shape[:2] + (gx.shape[2] // 3,), gx), _spec(h.shape, gx),
                                     _spec(gx.shape[:2] + (gx.shape[2] // 3 * 4,), gx)),
    doc="One GRU layer direction over a sequence (see ember/ops/gru_rnn_layer.py).",
))
GRU_LAYER_BACKWARD = register(OpDef(
    name="gru_layer_backward", category="nn", impl=_gru_backward_impl, num_outputs=4, batch="loop",
    shape_rule=lambda g, gh, acts, out, h0, w: (_spec(out.shape[:2] + (w.shape[0],), acts), _spec(h0.shape, acts),
                                                _spec(w.shape, acts), _spec((w.shape[0],), acts)),
))
RNN_LAYER = register(OpDef(
    name="rnn_layer", category="nn", impl=_rnn_impl, vjp=_rnn_vjp, save="both", num_outputs=2,
    materialize_grads=False, flops=_flops(1), batch="loop",
    shape_rule=lambda gx, h, w, *b, nonlinearity: (_spec(gx.shape, gx), _spec(h.shape, gx)),
    doc="One Elman RNN layer direction over a sequence (see ember/ops/gru_rnn_layer.py).",
))
RNN_LAYER_BACKWARD = register(OpDef(
    name="rnn_layer_backward", category="nn", impl=_rnn_backward_impl, num_outputs=4, batch="loop",
    shape_rule=lambda g, gh, out, h0, w, nonlinearity: (_spec(out.shape, out), _spec(h0.shape, out),
                                                        _spec(w.shape, out), _spec((w.shape[0],), out)),
))


def gru_layer(gates_x: Any, h0: Any, w_hh: Any, b_hh: Any = None) -> tuple:
    """``(out, h_n)`` of one GRU direction over time-major ``gates_x`` (T, B, 3H) from ``h0``."""
    out, h_n, _ = dispatch.apply(GRU_LAYER, (gates_x, h0, w_hh) if b_hh is None else (gates_x, h0, w_hh, b_hh))
    return out, h_n


def rnn_layer(gates_x: Any, h0: Any, w_hh: Any, b_hh: Any = None, nonlinearity: str = "tanh") -> tuple:
    """``(out, h_n)`` of one Elman RNN direction (``nonlinearity`` "tanh" or "relu") over ``gates_x`` (T, B, H)."""
    args = (gates_x, h0, w_hh) if b_hh is None else (gates_x, h0, w_hh, b_hh)
    return dispatch.apply(RNN_LAYER, args, {"nonlinearity": nonlinearity})
