"""Dropout of a permuted tensor draws its mask in memory order, as PyTorch's ``empty_like(x).bernoulli_``.

udacity's character-level RNN applies ``nn.Dropout`` to the output of a ``batch_first`` LSTM, a transposed view in
both libraries: ember drew the mask in index order, so the same seed dropped other elements and the first training
loss already differed (4.0930 / 4.0908).
"""
import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")

LAYOUTS = {
    "transposed": lambda lib: lib.ones(10, 4, 16).transpose(0, 1),
    "row_major": lambda lib: lib.ones(4, 10, 16),
    "channels_last": lambda lib: lib.ones(2, 3, 4, 5).permute(0, 2, 3, 1),
    "strided_slice": lambda lib: lib.ones(8, 6)[:, ::2],    # not dense: torch's empty_like is row-major
    "size_one_dims": lambda lib: lib.ones(5, 1, 7).transpose(0, 2),
    "matrix_t": lambda lib: lib.ones(3, 4).t(),
    "needs_grad": lambda lib: lib.ones(30, 6, 8).transpose(0, 1).requires_grad_(),
}


@pytest.mark.parametrize("name", list(LAYOUTS))
def test_mask_equals_torchs(name):
    results = []
    for lib in (torch, ember):
        lib.manual_seed(1)
        results.append(lib.nn.functional.dropout(LAYOUTS[name](lib), 0.3).detach().numpy())
    np.testing.assert_array_equal(results[1], results[0])


def test_batch_first_lstm_then_dropout_equals_torch():
    outs = []
    for lib in (torch, ember):
        lib.manual_seed(0)
        lstm, drop = lib.nn.LSTM(5, 8, 2, dropout=0.5, batch_first=True), lib.nn.Dropout(0.5)
        out, _ = lstm(lib.ones(3, 7, 5))
        outs.append(drop(out).detach().numpy())
    np.testing.assert_allclose(outs[1], outs[0], rtol=1e-5, atol=1e-6)
