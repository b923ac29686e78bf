"""Recurrent layers' dropout as torch: the inter-layer dropout of a PackedSequence input draws its mask on the packed
data (sgrvinod's hierarchical attention network: a 2-layer bidirectional GRU over packed sentences gave another loss
from the first batch), and a one-layer RNN with dropout warns with torch's words."""
from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch

import ember


def _outputs(lib, mode, bidirectional, packed):
    lib.manual_seed(0)
    rnn = getattr(lib.nn, mode)(3, 4, num_layers=3, dropout=0.5, bidirectional=bidirectional, batch_first=True)
    x = lib.linspace(-2, 2, 45).reshape(3, 5, 3)
    lib.manual_seed(1)
    if packed:
        p = lib.nn.utils.rnn.pack_padded_sequence(x, [2, 5, 3], batch_first=True, enforce_sorted=False)
        out = rnn(p)[0]
        out = lib.nn.utils.rnn.pad_packed_sequence(out, batch_first=True)[0]
    else:
        out = rnn(x)[0]
    return out.detach().numpy(), lib.rand(3).numpy()


@pytest.mark.parametrize("packed", [True, False])
@pytest.mark.parametrize("bidirectional", [False, True])
@pytest.mark.parametrize("mode", ["GRU", "LSTM", "RNN"])
def test_inter_layer_dropout_draws_like_torch(mode, bidirectional, packed):
    got, got_next = _outputs(ember, mode, bidirectional, packed)
    want, want_next = _outputs(torch, mode, bidirectional, packed)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(got_next, want_next)  # the same number of draws


@pytest.mark.parametrize("args", [dict(dropout=0.5), dict(dropout=1), dict(dropout=0.5, num_layers=2), dict()])
@pytest.mark.parametrize("mode", ["GRU", "LSTM", "RNN"])
def test_one_layer_dropout_warning_like_torch(mode, args):
    messages = []
    for lib in (ember, torch):
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            getattr(lib.nn, mode)(3, 4, **args)
        messages.append([str(x.message) for x in w])
    assert messages[0] == messages[1]
