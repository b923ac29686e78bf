"""PyTorch's functional recurrent kernels: ``rnn_tanh_cell``, ``rnn_relu_cell``, ``lstm_cell``, ``gru_cell``
and the whole-sequence ``rnn_tanh``, ``rnn_relu``, ``lstm``, ``gru`` (``params`` flat per layer and direction:
``w_ih, w_hh[, b_ih, b_hh]``, as ``nn.LSTM._flat_weights``), written in ember ops with PyTorch's gate order
(LSTM: input, forget, cell, output; GRU: reset, update, new), so autograd comes for free.

Example:
    >>> import ember
    >>> x, h = ember.ones(2, 3), ember.zeros(2, 4)
    >>> ember.rnn_tanh_cell(x, h, ember.zeros(4, 3), ember.zeros(4, 4)).shape
    ember.Size([2, 4])
"""
from __future__ import annotations

from typing import Any, Sequence

from ember.ops import elementwise as ew, nn_ops
from ember.ops.linalg import matmul
from ember.ops.views import cat, stack
from ember.tensor import Tensor

__all__ = ["rnn_tanh_cell", "rnn_relu_cell", "lstm_cell", "gru_cell", "rnn_tanh", "rnn_relu", "lstm", "gru"]


def _linear(x: Tensor, w: Tensor, b: Tensor | None) -> Tensor:
    out = matmul(x, w.transpose(-2, -1))
    return out + b if b is not None else out


def rnn_tanh_cell(input: Tensor, hx: Tensor, w_ih: Tensor, w_hh: Tensor, b_ih: Tensor | None = None,
                  b_hh: Tensor | None = None) -> Tensor:
    return ew.tanh(_linear(input, w_ih, b_ih) + _linear(hx, w_hh, b_hh))


def rnn_relu_cell(input: Tensor, hx: Tensor, w_ih: Tensor, w_hh: Tensor, b_ih: Tensor | None = None,
                  b_hh: Tensor | None = None) -> Tensor:
    return (_linear(input, w_ih, b_ih) + _linear(hx, w_hh, b_hh)).relu()


def lstm_cell(input: Tensor, hx: Sequence[Tensor], w_ih: Tensor, w_hh: Tensor, b_ih: Tensor | None = None,
              b_hh: Tensor | None = None) -> tuple:
    """``(h', c')`` from ``hx = (h, c)``; gates i, f, g, o."""
    if len(hx) != 2:
        raise RuntimeError(f"lstm_cell: expected hx to be a tuple of 2 tensors (h, c), got {len(hx)}")
    h, c = hx
    gates = _linear(input, w_ih, b_ih) + _linear(h, w_hh, b_hh)
    i, f, g, o = gates.chunk(4, -1)
    c_next = f.sigmoid() * c + i.sigmoid() * ew.tanh(g)
    return o.sigmoid() * ew.tanh(c_next), c_next


def gru_cell(input: Tensor, hx: Tensor, w_ih: Tensor, w_hh: Tensor, b_ih: Tensor | None = None,
             b_hh: Tensor | None = None) -> Tensor:
    """``h' = (1 - z) n + z h`` with ``n = tanh(W_in x + b_in + r (W_hn h + b_hn))``."""
    gi_r, gi_z, gi_n = _linear(input, w_ih, b_ih).chunk(3, -1)
    gh_r, gh_z, gh_n = _linear(hx, w_hh, b_hh).chunk(3, -1)
    r, z = (gi_r + gh_r).sigmoid(), (gi_z + gh_z).sigmoid()
    n = ew.tanh(gi_n + r * gh_n)
    return (1 - z) * n + z * hx


def _run(cell: Any, input: Tensor, hx: Any, params: Sequence[Tensor], has_biases: bool, num_layers: int,
         dropout: float, train: bool, bidirectional: bool, batch_first: bool, is_lstm: bool) -> tuple:
    """Layers x directions of ``cell`` over time; hx stacked as (layers * directions, batch, hidden)."""
    x = input.transpose(0, 1) if batch_first else input
    dirs = 2 if bidirectional else 1
    per = 4 if has_biases else 2
    h0, c0 = (hx[0], hx[1]) if is_lstm else (hx, None)
    h_out, c_out = [], []
    for layer in range(num_layers):
        outs = []
        for d in range(dirs):
            k = layer * dirs + d
            w = params[k * per:(k + 1) * per]
            w_ih, w_hh = w[0], w[1]
            b_ih, b_hh = (w[2], w[3]) if has_biases else (None, None)
            state = (h0[k], c0[k]) if is_lstm else h0[k]
            steps = range(x.shape[0] - 1, -1, -1) if d == 1 else range(x.shape[0])
            seq = [None] * x.shape[0]
            for t in steps:
                state = cell(x[t], state, w_ih, w_hh, b_ih, b_hh)
                seq[t] = state[0] if is_lstm else state
            outs.append(stack(seq))
            h_out.append(state[0] if is_lstm else state)
            if is_lstm:
                c_out.append(state[1])
        x = cat(outs, dim=-1) if dirs == 2 else outs[0]
        if dropout and train and layer < num_layers - 1:
            x = nn_ops.dropout(x, dropout, True)
    out = x.transpose(0, 1) if batch_first else x
    return (out, stack(h_out), stack(c_out)) if is_lstm else (out, stack(h_out))


def rnn_tanh(input: Tensor, hx: Tensor, params: Sequence[Tensor], has_biases: bool, num_layers: int,
             dropout: float, train: bool, bidirectional: bool, batch_first: bool) -> tuple:
    return _run(rnn_tanh_cell, input, hx, params, has_biases, num_layers, dropout, train, bidirectional,
                batch_first, False)


def rnn_relu(input: Tensor, hx: Tensor, params: Sequence[Tensor], has_biases: bool, num_layers: int,
             dropout: float, train: bool, bidirectional: bool, batch_first: bool) -> tuple:
    return _run(rnn_relu_cell, input, hx, params, has_biases, num_layers, dropout, train, bidirectional,
                batch_first, False)


def gru(input: Tensor, hx: Tensor, params: Sequence[Tensor], has_biases: bool, num_layers: int, dropout: float,
        train: bool, bidirectional: bool, batch_first: bool) -> tuple:
    return _run(gru_cell, input, hx, params, has_biases, num_layers, dropout, train, bidirectional, batch_first,
                False)


def lstm(input: Tensor, hx: Sequence[Tensor], params: Sequence[Tensor], has_biases: bool, num_layers: int,
         dropout: float, train: bool, bidirectional: bool, batch_first: bool) -> tuple:
    """``(output, h_n, c_n)`` (projections, ``proj_size``, are not supported: 4 parameters per layer)."""
    return _run(lstm_cell, input, hx, params, has_biases, num_layers, dropout, train, bidirectional, batch_first,
                True)
