"""torch.rnn_tanh_cell / rnn_relu_cell / lstm_cell / gru_cell and the sequence kernels rnn_tanh / rnn_relu /
lstm / gru against torch 2.13 from one table: outputs and gradients (float64) for every input and weight."""
from __future__ import annotations

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")

B, I, H, T = 3, 4, 5, 6
R = np.random.default_rng(7)


def _w(*shape: int) -> np.ndarray:
    return R.standard_normal(shape) * 0.4


def _layer_params(gates: int, layers: int, dirs: int, biases: bool) -> list:
    out = []
    for layer in range(layers):
        for _ in range(dirs):
            in_size = I if layer == 0 else H * dirs
            out += [_w(gates * H, in_size), _w(gates * H, H)]
            out += [_w(gates * H), _w(gates * H)] if biases else []
    return out


CELLS = [  # name, gates, hx is a pair
    ("rnn_tanh_cell", 1, False), ("rnn_relu_cell", 1, False), ("lstm_cell", 4, True), ("gru_cell", 3, False),
]
SEQUENCES = [  # name, gates, layers, bidirectional, biases, batch_first
    ("rnn_tanh", 1, 2, False, True, False), ("rnn_relu", 1, 1, True, True, True), ("gru", 3, 2, True, False, False),
    ("lstm", 4, 2, False, True, True), ("lstm", 4, 1, True, False, False), ("gru", 3, 1, False, True, True),
]


def _compare(e_out: list, t_out: list, e_leaves: list, t_leaves: list) -> None:
    for e, t in zip(e_out, t_out):
        np.testing.assert_allclose(e.detach().numpy(), t.detach().numpy(), rtol=1e-10, atol=1e-12)
    rng = np.random.default_rng(1)
    ws = [rng.standard_normal(tuple(t.shape)) for t in t_out]
    sum((e * ember.tensor(w)).sum() for e, w in zip(e_out, ws)).backward()
    sum((t * torch.tensor(w)).sum() for t, w in zip(t_out, ws)).backward()
    for e, t in zip(e_leaves, t_leaves):
        np.testing.assert_allclose(e.grad.numpy(), t.grad.numpy(), rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("name,gates,pair", CELLS, ids=[c[0] for c in CELLS])
@pytest.mark.parametrize("biases", [True, False])
def test_cells_match_torch(name: str, gates: int, pair: bool, biases: bool) -> None:
    arrays = [_w(B, I), _w(B, H)] + ([_w(B, H)] if pair else []) + [_w(gates * H, I), _w(gates * H, H)]
    arrays += [_w(gates * H), _w(gates * H)] if biases else []
    results = {}
    for lib in (torch, ember):
        leaves = [lib.tensor(a, requires_grad=True) for a in arrays]
        x, h = leaves[0], leaves[1]
        hx = (h, leaves[2]) if pair else h
        weights = leaves[3:] if pair else leaves[2:]
        out = getattr(lib, name)(x, hx, *weights)
        results[lib] = (list(out) if isinstance(out, tuple) else [out], leaves)
    _compare(results[ember][0], results[torch][0], results[ember][1], results[torch][1])


@pytest.mark.parametrize("name,gates,layers,bidir,biases,batch_first", SEQUENCES,
                         ids=[f"{s[0]}-{k}" for k, s in enumerate(SEQUENCES)])
def test_sequences_match_torch(name: str, gates: int, layers: int, bidir: bool, biases: bool,
                               batch_first: bool) -> None:
    dirs = 2 if bidir else 1
    x = _w(B, T, I) if batch_first else _w(T, B, I)
    states = [_w(layers * dirs, B, H)] + ([_w(layers * dirs, B, H)] if name == "lstm" else [])
    params = _layer_params(gates, layers, dirs, biases)
    results = {}
    for lib in (torch, ember):
        leaves = [lib.tensor(a, requires_grad=True) for a in [x, *states, *params]]
        hx = tuple(leaves[1:1 + len(states)]) if name == "lstm" else leaves[1]
        out = getattr(lib, name)(leaves[0], hx, leaves[1 + len(states):], biases, layers, 0.0, False, bidir,
                                 batch_first)
        results[lib] = (list(out), leaves)
    _compare(results[ember][0], results[torch][0], results[ember][1], results[torch][1])
