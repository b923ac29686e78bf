"""One LSTM layer direction over a whole sequence as one op, and its backward through time as one op.

Composed from ops, each time step of an LSTM costs ~16 dispatches forward and as many autograd nodes
backward (the recurrent product, the bias, the gate slices, three sigmoids, two tanhs, four products),
so a small LSTM's training step is all Python overhead: graykode's Bi-LSTM (27 steps, hidden 5) took
18x PyTorch's time. Here the time loop runs inside one op on arrays:

* ``lstm_layer(gates_x, h0, c0, w_hh[, b_hh]) -> (out, h_n, c_n, acts, cells)``: ``gates_x`` (T, B, 4H)
  is the input projection ``x @ W_ih^T + b_ih`` of every step (one GEMM, made outside), gate order i, f, g,
  o as PyTorch; ``acts`` (the gates after their nonlinearities) and ``cells`` (every c_t) are kept for the
  backward (non-differentiable outputs);
* ``lstm_layer_backward(g_out, g_hn, g_cn, acts, cells, out, h0, c0, w_hh) -> (d_gates_x, d_h0, d_c0, d_w_hh,
  d_b_hh)``: backpropagation through time (an output gradient may be None: zeros).

Each step computes what the composite (``ember/nn/modules/rnn.py``'s ``_cell_step``) computes, with the
same NumPy operations in the same order (the sigmoid of all four gates in one pass), so outputs equal the
composite's (bit for bit here: NumPy's exp/tanh give the same values on strided and contiguous runs). The
backward computes every factor that does not depend on the recurrence for all steps at once, so each step is
seven small array operations and one GEMM. With ``create_graph=True`` the vjp differentiates the
composite, so higher derivatives work.

Example:
    >>> import ember
    >>> gx, h, c, w = ember.zeros(3, 2, 8), ember.zeros(2, 2), ember.zeros(2, 2), ember.zeros(8, 2)
    >>> out, h_n, c_n = lstm_layer(gx, h, c, w, None)
    >>> tuple(out.shape), round(float(c_n[0, 0]), 4)  # c = f*c + i*g with g = tanh(0) = 0
    ((3, 2, 2), 0.0)
"""
from __future__ import annotations

from typing import Any

import numpy as np  # np.errstate (sigmoid's overflow to its limit)

from ember.autograd import grad as autograd_grad, grad_mode
from ember.ops import dispatch, elementwise as ew
from ember.ops.linalg import _matmul_impl, matmul
from ember.ops.registry import OpDef, Spec, register
from ember.ops.views import chunk, stack


def _forward_impl(xp: Any, gx: Any, h: Any, c: Any, w_hh: Any, *b_hh: Any) -> tuple:
    steps, batch, four = gx.shape
    hidden = four // 4
    w_t = w_hh.T
    out = xp.empty((steps, batch, hidden), dtype=gx.dtype)
    acts = xp.empty(gx.shape, dtype=gx.dtype)
    cells = xp.empty((steps, batch, hidden), dtype=gx.dtype)
    with np.errstate(over="ignore"):  # sigmoid's exp(-x) overflows to inf below -88 (float32): the limit 0
        for t in range(steps):
            gates_h = _matmul_impl(xp, h, w_t)
            if b_hh:
                gates_h = gates_h + b_hh[0]
            gates = gx[t] + gates_h
            # sigmoid (PyTorch's formula, as _sigmoid_impl) of all four gates in one pass, tanh of g: elementwise,
            # so each gate gets the values the composite's per-gate calls give
            a = 1 / (1 + xp.exp(-gates))
            g = xp.tanh(gates[:, 2 * hidden:3 * hidden])
            i, f, o = a[:, :hidden], a[:, hidden:2 * hidden], a[:, 3 * hidden:]
            c = f * c + i * g
            h = o * xp.tanh(c)
            a[:, 2 * hidden:3 * hidden] = g
            acts[t] = a
            out[t] = h
            cells[t] = c
    return out, h.copy(), c.copy(), acts, cells


def _backward_impl(xp: Any, g_out: Any, g_hn: Any, g_cn: Any, acts: Any, cells: Any, out: Any, h0: Any, c0: Any,
                   w_hh: Any) -> tuple:
    steps, batch, four = acts.shape
    hidden = four // 4
    # outputs that received no gradient (materialize_grads=False) count as zeros
    g_out = xp.zeros(out.shape, dtype=out.dtype) if g_out is None else g_out
    dh_next = xp.zeros(h0.shape, dtype=h0.dtype) if g_hn is None else g_hn
    dc_next = xp.zeros(c0.shape, dtype=c0.dtype) if g_cn is None else g_cn
    # Everything that does not depend on the recurrence, for all steps at once (whole-array passes):
    # d_c = d_h * o * (1 - tanh(c)^2) + d_c_next; d_i, d_f, d_g = d_c * (g i (1 - i), c_prev f (1 - f),
    # i (1 - g^2)); d_o = d_h * tanh(c) o (1 - o).
    gates = acts.reshape(steps, batch, 4, hidden)
    i, f, g, o = gates[:, :, 0], gates[:, :, 1], gates[:, :, 2], gates[:, :, 3]
    tanh_c = xp.tanh(cells)
    c_prev = xp.concatenate([c0[None], cells[:-1]], axis=0)
    through_c = o * (1 - tanh_c * tanh_c)
    coef = xp.empty((steps, batch, 3, hidden), dtype=acts.dtype)
    coef[:, :, 0] = g * (i * (1 - i))
    coef[:, :, 1] = c_prev * (f * (1 - f))
    coef[:, :, 2] = i * (1 - g * g)
    coef_o = tanh_c * (o * (1 - o))
    d_gates = xp.empty((steps, batch, 4, hidden), dtype=acts.dtype)
    for t in range(steps - 1, -1, -1):
        dh = g_out[t] + dh_next
        dc = dh * through_c[t] + dc_next
        d = d_gates[t]
        d[:, :3] = dc[:, None, :] * coef[t]
        d[:, 3] = dh * coef_o[t]
        dc_next = dc * f[t]
        dh_next = _matmul_impl(xp, d.reshape(batch, four), w_hh)
    flat = d_gates.reshape(steps * batch, four)
    h_prev = xp.concatenate([h0[None], out[:-1]], axis=0).reshape(steps * batch, hidden)
    d_w = _matmul_impl(xp, flat.T, h_prev)
    return d_gates.reshape(steps, batch, four), dh_next, dc_next, d_w, flat.sum(axis=0)


def _composite(gx: Any, h: Any, c: Any, w_hh: Any, b_hh: Any) -> tuple:
    """The layer in ember ops, as ``ember/nn/modules/rnn.py`` composes it (create_graph=True differentiates this)."""
    outs = []
    w_t = w_hh.t()
    for t in range(gx.shape[0]):
        gates_h = matmul(h, w_t)
        if b_hh is not None:
            gates_h = gates_h + b_hh
        i, f, g, o = chunk(gx[t] + gates_h, 4, -1)
        c = ew.sigmoid(f) * c + ew.sigmoid(i) * ew.tanh(g)
        h = ew.sigmoid(o) * ew.tanh(c)
        outs.append(h)
    return stack(outs, 0), h, c


def _vjp(ctx: Any, grads: Any) -> tuple:
    g_out, g_hn, g_cn = grads[0], grads[1], grads[2]
    inputs = ctx.inputs
    has_bias = len(inputs) == 5
    if not grad_mode.STATE.enabled:  # plain backward: one op over the whole sequence
        out, _, _, acts, cells = ctx.out
        result = dispatch.apply(LSTM_LAYER_BACKWARD, (g_out, g_hn, g_cn, acts, cells, out, *inputs[1:4]))
        return result if has_bias else result[:4]
    outs = _composite(*inputs[:4], inputs[4] if has_bias else None)
    pairs = [(o, g) for o, g in zip(outs, (g_out, g_hn, g_cn)) if g is not None]
    wrt = [i for i, need in enumerate(ctx.needs) if need]
    found = autograd_grad([o for o, _ in pairs], [inputs[i] for i in wrt], [g for _, g in pairs],
                          create_graph=True, allow_unused=True)
    result = [None] * len(inputs)
    for i, g in zip(wrt, found):
        result[i] = g
    return tuple(result)


def _rule(gx: Spec, h: Spec, c: Spec, w_hh: Spec, *b_hh: Spec) -> tuple:
    steps, batch, four = gx.shape
    state = Spec((batch, four // 4), gx.dtype, gx.device)
    return (Spec((steps, batch, four // 4), gx.dtype, gx.device), state, state, Spec(gx.shape, gx.dtype, gx.device),
            Spec((steps, batch, four // 4), gx.dtype, gx.device))


def _backward_rule(g_out: Any, g_hn: Any, g_cn: Any, acts: Spec, cells: Spec, out: Spec, h0: Spec, c0: Spec,
                   w_hh: Spec) -> tuple:
    bias = Spec((acts.shape[-1],), acts.dtype, acts.device)
    return (Spec(acts.shape, acts.dtype, acts.device), Spec(h0.shape, h0.dtype, h0.device),
            Spec(c0.shape, c0.dtype, c0.device), Spec(w_hh.shape, w_hh.dtype, w_hh.device), bias)


def _flops(inputs: tuple, outputs: tuple, attrs: dict) -> int:
    steps, batch, four = inputs[0].shape
    return steps * batch * (2 * four * (four // 4) + 12 * four)


LSTM_LAYER = register(OpDef(
    name="lstm_layer", category="nn", impl=_forward_impl, vjp=_vjp, save="both", num_outputs=5,
    nondiff_outputs=(3, 4), materialize_grads=False, shape_rule=_rule, flops=_flops, batch="loop",
    doc="One LSTM layer direction over a sequence (see ember/ops/lstm_layer.py).",
))
LSTM_LAYER_BACKWARD = register(OpDef(
    name="lstm_layer_backward", category="nn", impl=_backward_impl, num_outputs=5, shape_rule=_backward_rule,
    flops=lambda inputs, outputs, attrs: 2 * _flops((inputs[3],), outputs, attrs), batch="loop",
))


def lstm_layer(gates_x: Any, h0: Any, c0: Any, w_hh: Any, b_hh: Any = None) -> tuple:
    """``(out, h_n, c_n)`` of one LSTM direction over time-major ``gates_x`` (T, B, 4H) from ``(h0, c0)``."""
    args = (gates_x, h0, c0, w_hh) if b_hh is None else (gates_x, h0, c0, w_hh, b_hh)
    out, h_n, c_n, _, _ = dispatch.apply(LSTM_LAYER, args)
    return out, h_n, c_n
