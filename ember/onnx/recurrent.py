"""ONNX export of ``nn.LSTM`` / ``nn.GRU`` / ``nn.RNN`` as ONNX's own ``LSTM`` / ``GRU`` / ``RNN`` nodes.

Eagerly (and under ``ember.compile``) a recurrent module runs its time loop in Python or in one fused op per
direction, so a trace holds one set of nodes per time step (or a reversed-time index whose values follow the
sequence length): the sequence length is baked in and a dynamic sequence axis cannot be exported. While
:func:`ember.onnx.export` traces, :func:`recurrent_as_onnx_nodes` has each recurrent module emit one node per
layer (both directions) of :data:`RECURRENT_LAYER`, an op record that is not registered with ``OPS`` (it
exists only in export traces) and whose emitter writes one ONNX node, as ``torch.onnx.export`` does:

* weights: ``W`` (directions, gates*H, I), ``R`` (directions, gates*H, H), ``B`` (directions, 2*gates*H) built
  from the module's own parameters (initializers) with ``Gather`` on the gate axis: PyTorch's LSTM gates
  i, f, g, o become ONNX's i, o, f, c; GRU's r, z, n become z, r, h (and ``linear_before_reset=1``, PyTorch's
  GRU formula); the RNN's nonlinearity becomes ``activations``;
* states: ``initial_h`` / ``initial_c`` are the given ``hx`` rows of that layer, or empty (ONNX's zeros);
* output: ONNX's ``Y`` (T, directions, B, H) is transposed and reshaped to PyTorch's (T, B, directions*H).

Left to the traced composite (static sequence length only): ``proj_size`` (ONNX's LSTM has no projection),
``lengths=`` and ``PackedSequence`` inputs.

Example:
    >>> import ember, ember.nn as nn, tempfile, os
    >>> path = os.path.join(tempfile.mkdtemp(), "lstm.onnx")
    >>> lstm = nn.LSTM(4, 5, batch_first=True)
    >>> _ = ember.onnx.export(lstm, (ember.randn(2, 6, 4),), path, input_names=["x"],
    ...                       dynamic_axes={"x": {0: "batch", 1: "seq"}})  # doctest: +SKIP
"""
from __future__ import annotations

import contextlib
import sys
import threading
from typing import Any, Iterator

import numpy as np

from ember.ops import dispatch
from ember.ops.registry import OpDef, Spec

_GATES = {"LSTM": 4, "GRU": 3, "RNN_TANH": 1, "RNN_RELU": 1}
# ONNX's gate blocks as indices of PyTorch's: LSTM i f g o -> i o f c; GRU r z n -> z r h
_ONNX_ORDER = {"LSTM": [0, 3, 1, 2], "GRU": [1, 0, 2], "RNN_TANH": [0], "RNN_RELU": [0]}


def _layout(attrs: dict) -> tuple:
    """(directions, has_bias, has_h0, has_c0) from a node's attrs."""
    return attrs["directions"], attrs["has_bias"], attrs["has_h0"], attrs["has_c0"]


def _split_args(args: tuple, attrs: dict) -> tuple:
    """(x, h0 | None, c0 | None, [(w_ih, w_hh, b_ih | None, b_hh | None) per direction])."""
    directions, has_bias, has_h0, has_c0 = _layout(attrs)
    x, rest = args[0], list(args[1:])
    h0 = rest.pop(0) if has_h0 else None
    c0 = rest.pop(0) if has_c0 else None
    per = 4 if has_bias else 2
    weights = []
    for d in range(directions):
        w = rest[d * per:(d + 1) * per]
        weights.append((w[0], w[1], w[2], w[3]) if has_bias else (w[0], w[1], None, None))
    return x, h0, c0, weights


def _impl(xp: Any, *args: Any, mode: str, hidden: int, directions: int, has_bias: bool, has_h0: bool,
          has_c0: bool) -> tuple:
    """The layer on arrays with the fused eager kernels (ember/ops/lstm_layer.py, gru_rnn_layer.py)."""
    # in the function: ember.onnx loads while ember.ops.views initializes (movement's emitters), before these can
    from ember.ops import gru_rnn_layer, lstm_layer

    _gru_impl, _rnn_impl, _lstm_impl = gru_rnn_layer._gru_impl, gru_rnn_layer._rnn_impl, lstm_layer._forward_impl
    attrs = {"directions": directions, "has_bias": has_bias, "has_h0": has_h0, "has_c0": has_c0}
    x, h0, c0, weights = _split_args(args, attrs)
    steps, batch, _ = x.shape
    zeros = xp.zeros((directions, batch, hidden), dtype=x.dtype)
    h0 = zeros if h0 is None else h0
    c0 = zeros if c0 is None else c0
    outs, hs, cs = [], [], []
    for d, (w_ih, w_hh, b_ih, b_hh) in enumerate(weights):
        seq = x if d == 0 else x[::-1]
        gx = seq @ w_ih.T + (b_ih if b_ih is not None else 0)
        bias = () if b_hh is None else (b_hh,)
        if mode == "LSTM":
            out, h, c = _lstm_impl(xp, gx, h0[d], c0[d], w_hh, *bias)[:3]
            cs.append(c)
        elif mode == "GRU":
            out, h = _gru_impl(xp, gx, h0[d], w_hh, *bias)[:2]
        else:
            out, h = _rnn_impl(xp, gx, h0[d], w_hh, *bias, nonlinearity="tanh" if mode == "RNN_TANH" else "relu")
        outs.append(out if d == 0 else out[::-1])
        hs.append(h)
    result = (xp.concatenate(outs, axis=-1), xp.stack(hs))
    return result + (xp.stack(cs),) if mode == "LSTM" else result


def _rule(*specs: Spec, mode: str, hidden: int, directions: int, **flags: Any) -> tuple:
    x = specs[0]
    steps, batch = x.shape[0], x.shape[1]
    out = Spec((steps, batch, directions * hidden), x.dtype, x.device)
    state = Spec((directions, batch, hidden), x.dtype, x.device)
    return (out, state, state) if mode == "LSTM" else (out, state)


def _emit(b: Any, n: Any) -> list:
    """One ONNX LSTM/GRU/RNN node (see the module docstring for the layouts)."""
    attrs = n.attrs
    mode, hidden = attrs["mode"], attrs["hidden"]
    x, h0, c0, weights = _split_args(tuple(n.inputs), attrs)
    directions = attrs["directions"]
    index = b.const(np.concatenate([np.arange(g * hidden, (g + 1) * hidden) for g in _ONNX_ORDER[mode]])
                    .astype(np.int64))
    axis0 = b.ints([0])

    def stacked(names: list) -> str:  # per-direction (rows, k) -> (directions, rows, k) in ONNX gate order
        parts = [b.node("Unsqueeze", [b.node("Gather", [w, index], axis=0), axis0]) for w in names]
        return parts[0] if len(parts) == 1 else b.node("Concat", parts, axis=0)

    w = stacked([ws[0] for ws in weights])
    r = stacked([ws[1] for ws in weights])
    bias = ""
    if attrs["has_bias"]:
        per_direction = [b.node("Concat", [b.node("Gather", [ws[2], index], axis=0),
                                           b.node("Gather", [ws[3], index], axis=0)], axis=0) for ws in weights]
        parts = [b.node("Unsqueeze", [p, axis0]) for p in per_direction]
        bias = parts[0] if len(parts) == 1 else b.node("Concat", parts, axis=0)
    direction = "bidirectional" if directions == 2 else "forward"
    inputs = [x, w, r, bias, "", h0 or ""]
    extra: dict = {}
    if mode == "LSTM":
        inputs.append(c0 or "")
        op_type, outputs = "LSTM", 3
    elif mode == "GRU":
        op_type, outputs, extra = "GRU", 2, {"linear_before_reset": 1}
    else:
        op_type, outputs = "RNN", 2
        extra = {"activations": ["Tanh" if mode == "RNN_TANH" else "Relu"] * directions}
    while inputs and inputs[-1] == "":  # trailing optional inputs are left out
        inputs.pop()
    outs = b.node(op_type, inputs, outputs=outputs, hidden_size=hidden, direction=direction, **extra)
    # Y (T, directions, B, H) -> PyTorch's (T, B, directions * H)
    y = b.node("Transpose", [outs[0]], perm=[0, 2, 1, 3])
    y = b.node("Reshape", [y, b.const(np.array([0, 0, directions * hidden], dtype=np.int64))])
    return [y] + list(outs[1:])


# Not registered with OPS: it appears only in ONNX export traces (recurrent_as_onnx_nodes), so ember.compile,
# vmap and the op-record coverage tests never meet it.
RECURRENT_LAYER = OpDef(name="onnx_recurrent_layer", category="nn", impl=_impl, shape_rule=_rule, num_outputs=3,
                        onnx=_emit, doc="One nn.LSTM/GRU/RNN layer for ONNX export (ember/onnx/recurrent.py).")
_TWO_OUTPUTS = OpDef(name="onnx_recurrent_layer", category="nn", impl=_impl, shape_rule=_rule, num_outputs=2,
                     onnx=_emit, doc=RECURRENT_LAYER.doc)


def _export_forward(self: Any, input: Any, hx: Any = None, lengths: Any = None) -> Any:
    """``RNNBase.forward`` while exporting: one :data:`RECURRENT_LAYER` node per layer."""
    from ember.ops.views import cat  # in the function: see _impl

    original = _ORIGINAL["forward"]
    if (_ORIGINAL.get("thread") != threading.get_ident() or not dispatch.is_symbolic(input) or lengths is not None
            or getattr(self, "proj_size", 0) or not hasattr(input, "dim") or input.dim() not in (2, 3)):
        return original(self, input, hx, lengths)  # PackedSequence, lengths=, proj_size: the traced composite
    batched = input.dim() == 3
    x = input if not batched else (input.transpose(0, 1) if self.batch_first else input)
    x = x if batched else x.unsqueeze(1)
    if x.shape[-1] != self.input_size:
        return original(self, input, hx, lengths)  # its error message
    is_lstm = self.mode == "LSTM"
    directions = 2 if self.bidirectional else 1
    h0 = c0 = None
    if hx is not None:
        batch = x.shape[1]
        state_shape = (self.num_layers * directions, batch, self.hidden_size)
        h0, c0 = self._initial_state(hx, batched, state_shape, x, is_lstm)
    h_n, c_n = [], []
    layer_input = x
    for layer in range(self.num_layers):
        rows = slice(layer * directions, (layer + 1) * directions)
        args = [layer_input]
        if h0 is not None:
            args.append(h0[rows])
        if c0 is not None:
            args.append(c0[rows])
        has_bias = bool(self.bias)
        for direction in range(directions):
            w_ih, w_hh, b_ih, b_hh = self._weights(layer, direction)[:4]
            args += [w_ih, w_hh] + ([b_ih, b_hh] if has_bias else [])
        attrs = {"mode": self.mode, "hidden": self.hidden_size, "directions": directions, "has_bias": has_bias,
                 "has_h0": h0 is not None, "has_c0": c0 is not None}
        outs = dispatch.apply(RECURRENT_LAYER if is_lstm else _TWO_OUTPUTS, tuple(args), attrs)
        layer_input = outs[0]
        h_n.append(outs[1])
        if is_lstm:
            c_n.append(outs[2])
    output = layer_input
    h_out = h_n[0] if len(h_n) == 1 else cat(h_n, 0)
    c_out = (c_n[0] if len(c_n) == 1 else cat(c_n, 0)) if is_lstm else None
    if not batched:
        output, h_out = output.squeeze(1), h_out.squeeze(1)
        c_out = c_out.squeeze(1) if is_lstm else None
    elif self.batch_first:
        output = output.transpose(0, 1)
    return output, ((h_out, c_out) if is_lstm else h_out)


_ORIGINAL: dict = {}


@contextlib.contextmanager
def recurrent_as_onnx_nodes() -> Iterator[None]:
    """While exporting, recurrent modules fed traced (symbolic) inputs emit :data:`RECURRENT_LAYER` nodes; eager
    calls (other threads) keep the original forward. A no-op until ember.nn's recurrent modules are loaded (exporting
    a function never imports ember.nn)."""
    rnn = sys.modules.get("ember.nn.modules.rnn")
    if rnn is None or _ORIGINAL:  # no recurrent modules, or a nested export (already patched)
        yield
        return
    _ORIGINAL["forward"] = rnn.RNNBase.forward
    _ORIGINAL["thread"] = threading.get_ident()  # another thread's traces (ember.compile, jit) keep the original
    rnn.RNNBase.forward = _export_forward
    try:
        yield
    finally:
        rnn.RNNBase.forward = _ORIGINAL.pop("forward")
        _ORIGINAL.pop("thread")
