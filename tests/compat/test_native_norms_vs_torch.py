"""torch.native_layer_norm / native_batch_norm / native_group_norm / native_dropout: outputs, the statistics,
running-stat updates and gradients equal to torch 2.13's (float64)."""
import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")

RNG = np.random.default_rng(3)


def _pair(a, grad=False):
    return ember.tensor(a, requires_grad=grad), torch.tensor(a, requires_grad=grad)


def _close(got, want):
    assert tuple(got.shape) == tuple(want.shape)
    np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("normalized", [[4], [3, 4]])
@pytest.mark.parametrize("affine", [False, True])
def test_native_layer_norm(normalized, affine):
    x, tx = _pair(RNG.standard_normal((2, 3, 4)), grad=True)
    w, tw = _pair(RNG.standard_normal(normalized), grad=True) if affine else (None, None)
    b, tb = _pair(RNG.standard_normal(normalized), grad=True) if affine else (None, None)
    got = ember.native_layer_norm(x, normalized, w, b, 1e-5)
    want = torch.native_layer_norm(tx, normalized, tw, tb, 1e-5)
    for g, t in zip(got, want):
        _close(g, t)
    g_out = RNG.standard_normal((2, 3, 4))
    (got[0] * ember.tensor(g_out)).sum().backward()
    (want[0] * torch.tensor(g_out)).sum().backward()
    _close(x.grad, tx.grad)
    if affine:
        _close(w.grad, tw.grad)
        _close(b.grad, tb.grad)


@pytest.mark.parametrize("training", [True, False])
def test_native_batch_norm(training):
    a = RNG.standard_normal((4, 3, 5))
    x, tx = _pair(a, grad=True)
    w, tw = _pair(RNG.standard_normal(3), grad=True)
    b, tb = _pair(RNG.standard_normal(3), grad=True)
    rm, trm = _pair(RNG.standard_normal(3))
    rv, trv = _pair(RNG.uniform(0.5, 2.0, 3))
    got = ember.native_batch_norm(x, w, b, rm, rv, training, 0.1, 1e-5)
    want = torch.native_batch_norm(tx, tw, tb, trm, trv, training, 0.1, 1e-5)
    for g, t in zip(got, want):
        _close(g, t)
    _close(rm, trm)
    _close(rv, trv)
    got[0].pow(2).sum().backward()
    want[0].pow(2).sum().backward()
    _close(x.grad, tx.grad)
    _close(w.grad, tw.grad)


def test_native_group_norm():
    x, tx = _pair(RNG.standard_normal((2, 6, 5)), grad=True)
    w, tw = _pair(RNG.standard_normal(6))
    b, tb = _pair(RNG.standard_normal(6))
    got = ember.native_group_norm(x, w, b, 2, 6, 5, 3, 1e-5)
    want = torch.native_group_norm(tx, tw, tb, 2, 6, 5, 3, 1e-5)
    for g, t in zip(got, want):
        _close(g, t)
    got[0].sum().backward()
    want[0].sum().backward()
    _close(x.grad, tx.grad)


def test_native_dropout_like_torch():
    x = ember.ones(1000, dtype=ember.float64)
    out, mask = ember.native_dropout(x, 0.25, True)
    assert mask.dtype == ember.bool and 0.65 < mask.float().mean().item() < 0.85
    np.testing.assert_allclose(out.numpy()[mask.numpy()], 1 / 0.75)
    assert (out.numpy()[~mask.numpy()] == 0).all()
    out, mask = ember.native_dropout(x, 0.5, False)
    t_out, t_mask = torch.native_dropout(torch.ones(1000, dtype=torch.float64), 0.5, False)
    assert mask.all().item() and t_mask.all().item() and out.tolist() == t_out.tolist()
    for lib in (ember, torch):  # train=None drops, in both
        assert not lib.native_dropout(lib.ones(1000), 0.5, None)[1].all().item()
