"""pytorch/tutorials' LSTM part-of-speech tagger (``sequence_models_tutorial``): ``self.hidden = self.lstm(...)[1]``
reassigns a tuple of tensors on the module every forward, and ``F.log_softmax(x)`` leaves ``dim`` implicit.
ember's module-attribute change tracking compared the old and new tuples with ``==`` (elementwise on tensors:
"Boolean value of Tensor ... is ambiguous"), and the implicit ``dim`` gave no warning where torch warns."""
from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch

import ember


def _tagger_scores(lib):
    lib.manual_seed(1)

    class Tagger(lib.nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = lib.nn.Embedding(5, 4)
            self.lstm = lib.nn.LSTM(4, 3)
            self.out = lib.nn.Linear(3, 2)
            self.hidden = (lib.zeros(1, 1, 3), lib.zeros(1, 1, 3))

        def forward(self, words):
            out, self.hidden = self.lstm(self.emb(words).view(len(words), 1, -1), self.hidden)
            return lib.nn.functional.log_softmax(self.out(out.view(len(words), -1)), dim=1)

    model = Tagger()
    opt = lib.optim.SGD(model.parameters(), lr=0.1)
    words = lib.tensor([0, 3, 1, 4])
    for _ in range(3):
        model.zero_grad()
        model.hidden = (lib.zeros(1, 1, 3), lib.zeros(1, 1, 3))
        lib.nn.functional.nll_loss(model(words), lib.tensor([0, 1, 1, 0])).backward()
        opt.step()
    model.hidden = tuple(h + 1 for h in model.hidden)  # same shapes, new values: still fine
    return model(words).detach().numpy()


def test_module_attribute_tuple_of_tensors_reassigned_like_torch():
    np.testing.assert_allclose(_tagger_scores(ember), _tagger_scores(torch), rtol=1e-5, atol=1e-6)


def test_plain_tuple_attribute_change_still_tracked():
    m = ember.nn.Module()
    m.size = (2, 3)
    m.size = (2, 3)
    assert m.config_key == ()
    m.size = (2, 4)
    assert m.config_key == (("size", (tuple, "(2, 4)")),)


@pytest.mark.parametrize("fn", ["softmax", "log_softmax", "softmin"])
@pytest.mark.parametrize("ndim", [0, 1, 2, 3, 4])
def test_implicit_softmax_dim_warns_like_torch(fn, ndim):
    results = []
    for lib in (ember, torch):
        x = lib.linspace(-1, 2, 2 ** ndim).reshape((2,) * ndim)
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            y = getattr(lib.nn.functional, fn)(x)
        results.append((y.numpy(), [(str(m.message), m.filename) for m in w]))
    np.testing.assert_allclose(results[0][0], results[1][0], rtol=1e-6)
    assert results[0][1] == results[1][1] and len(results[1][1]) == 1  # torch's words, at this file's line
