"""conv3d / Conv3d, max_pool3d / avg_pool3d against torch 2.13 in float64 (forward, input and weight
grads), second order by ember's gradgradcheck, and the error messages."""
from __future__ import annotations

import numpy as np
import pytest

import ember
import ember.nn as enn
import ember.nn.functional as F
from ember.autograd.gradcheck import gradcheck, gradgradcheck

torch = pytest.importorskip("torch")
TF = torch.nn.functional


def _pair(a: np.ndarray):
    return ember.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)


def _close(a, b, tol=1e-10):
    np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=tol, atol=tol)


@pytest.mark.filterwarnings("ignore:Using padding='same'")
@pytest.mark.parametrize("kwargs", [
    {},
    {"stride": 2, "padding": 1},
    {"stride": (2, 1, 2), "padding": (1, 0, 1), "dilation": (1, 2, 1), "groups": 2},
    {"padding": "same", "dilation": (2, 1, 1)},
    {"padding": "valid", "groups": 4},
])
def test_conv3d_matches_torch(kwargs):
    rng = np.random.default_rng(0)
    groups = kwargs.get("groups", 1)
    x = rng.standard_normal((2, 4, 5, 6, 7))
    w = rng.standard_normal((4, 4 // groups, 3, 2, 3))
    b = rng.standard_normal(4)
    (ex, tx), (ew, tw), (eb, tb) = _pair(x), _pair(w), _pair(b)
    eo, to = F.conv3d(ex, ew, eb, **kwargs), TF.conv3d(tx, tw, tb, **kwargs)
    assert tuple(eo.shape) == tuple(to.shape)
    _close(eo, to)
    g = rng.standard_normal(tuple(to.shape))
    (eo * ember.tensor(g)).sum().backward()
    (to * torch.tensor(g)).sum().backward()
    for a, c in ((ex, tx), (ew, tw), (eb, tb)):
        _close(a.grad, c.grad)


def test_conv3d_unbatched_and_second_order():
    rng = np.random.default_rng(1)
    x = ember.tensor(rng.standard_normal((2, 3, 4, 3)), requires_grad=True)
    w = ember.tensor(rng.standard_normal((2, 2, 2, 2, 2)), requires_grad=True)
    out = F.conv3d(x, w, stride=(1, 2, 1), padding=1)
    ref = TF.conv3d(torch.tensor(x.detach().numpy()), torch.tensor(w.detach().numpy()), stride=(1, 2, 1), padding=1)
    _close(out, ref)
    assert gradcheck(lambda a, b: F.conv3d(a, b, stride=(2, 1, 1), padding=(1, 0, 1)), (x, w))
    assert gradgradcheck(lambda a, b: F.conv3d(a, b, dilation=(1, 1, 2)), (x, w))


@pytest.mark.parametrize("padding_mode", ["zeros", "reflect", "replicate", "circular"])
def test_conv3d_module_matches_torch(padding_mode):
    rng = np.random.default_rng(2)
    tm = torch.nn.Conv3d(3, 6, (3, 2, 3), stride=(1, 2, 1), padding=(1, 1, 2), groups=3,
                         padding_mode=padding_mode).double()
    em = enn.Conv3d(3, 6, (3, 2, 3), stride=(1, 2, 1), padding=(1, 1, 2), groups=3, padding_mode=padding_mode).double()
    assert tuple(em.weight.shape) == tuple(tm.weight.shape) == (6, 1, 3, 2, 3)
    em.load_state_dict({k: v.detach().numpy() for k, v in tm.state_dict().items()})
    ex, tx = _pair(rng.standard_normal((2, 3, 4, 5, 6)))
    eo, to = em(ex), tm(tx)
    _close(eo, to)
    eo.pow(2).sum().backward()
    to.pow(2).sum().backward()
    _close(ex.grad, tx.grad)
    _close(em.weight.grad, tm.weight.grad)
    _close(em.bias.grad, tm.bias.grad)
    assert "Conv3d(3, 6, kernel_size=(3, 2, 3)" in repr(em)


def test_conv3d_default_init_statistics():
    m = enn.Conv3d(4, 8, 3)
    bound = 1 / np.sqrt(4 * 27)  # kaiming_uniform(a=sqrt(5)) gives U(-1/sqrt(fan_in), 1/sqrt(fan_in))
    weights = m.weight.detach().numpy()
    assert np.abs(weights).max() <= bound and np.abs(weights).max() > 0.8 * bound


def test_conv3d_errors():
    x = ember.randn(1, 4, 5, 5, 5)
    with pytest.raises(RuntimeError, match="expects 6 input channels"):
        F.conv3d(x, ember.randn(2, 3, 3, 3, 3), groups=2)
    with pytest.raises(RuntimeError, match="5-D weight"):
        F.conv3d(x, ember.randn(2, 4, 3, 3))
    with pytest.raises(RuntimeError, match="smaller than the"):
        F.conv3d(ember.randn(1, 4, 2, 5, 5), ember.randn(2, 4, 3, 3, 3))
    with pytest.raises(RuntimeError, match="same dtype"):
        F.conv3d(x.double(), ember.randn(2, 4, 3, 3, 3))
    with pytest.raises(ValueError, match="strided"):
        F.conv3d(x, ember.randn(2, 4, 3, 3, 3), stride=2, padding="same")


@pytest.mark.parametrize("kwargs", [
    {"kernel_size": 2},
    {"kernel_size": 3, "stride": 2, "padding": 1},
    {"kernel_size": (2, 3, 2), "stride": (1, 2, 2), "padding": (1, 1, 0), "dilation": (2, 1, 1)},
    {"kernel_size": 3, "stride": 2, "padding": 1, "ceil_mode": True},
])
def test_max_pool3d_matches_torch(kwargs):
    rng = np.random.default_rng(3)
    ex, tx = _pair(rng.standard_normal((2, 3, 6, 7, 5)))
    ev, ei = F.max_pool3d(ex, return_indices=True, **kwargs)
    tv, ti = TF.max_pool3d(tx, return_indices=True, **kwargs)
    _close(ev, tv)
    np.testing.assert_array_equal(ei.numpy(), ti.numpy())
    g = rng.standard_normal(tuple(tv.shape))
    (ev * ember.tensor(g)).sum().backward()
    (tv * torch.tensor(g)).sum().backward()
    _close(ex.grad, tx.grad)


@pytest.mark.parametrize("kwargs", [
    {"kernel_size": 2},
    {"kernel_size": 3, "stride": 2, "padding": 1},
    {"kernel_size": 3, "stride": 2, "padding": 1, "count_include_pad": False},
    {"kernel_size": (3, 2, 3), "stride": (2, 1, 2), "padding": (1, 1, 1), "ceil_mode": True},
    {"kernel_size": (3, 2, 3), "stride": 2, "padding": 1, "ceil_mode": True, "count_include_pad": False},
    {"kernel_size": 2, "padding": 1, "divisor_override": 3},
])
def test_avg_pool3d_matches_torch(kwargs):
    rng = np.random.default_rng(4)
    ex, tx = _pair(rng.standard_normal((2, 3, 6, 7, 5)))
    eo, to = F.avg_pool3d(ex, **kwargs), TF.avg_pool3d(tx, **kwargs)
    _close(eo, to)
    g = rng.standard_normal(tuple(to.shape))
    (eo * ember.tensor(g)).sum().backward()
    (to * torch.tensor(g)).sum().backward()
    _close(ex.grad, tx.grad)


def test_pool3d_modules_unbatched_and_second_order():
    rng = np.random.default_rng(5)
    x = rng.standard_normal((3, 4, 5, 6))
    _close(enn.MaxPool3d(2, stride=1)(ember.tensor(x)), torch.nn.MaxPool3d(2, stride=1)(torch.tensor(x)))
    _close(enn.AvgPool3d(3, 2, 1, count_include_pad=False)(ember.tensor(x)),
           torch.nn.AvgPool3d(3, 2, 1, count_include_pad=False)(torch.tensor(x)))
    xe = ember.tensor(x[:, :3, :3, :3], requires_grad=True)
    assert gradgradcheck(lambda a: F.avg_pool3d(a, 2, 1, ceil_mode=True), (xe,))
    assert gradgradcheck(lambda a: F.max_pool3d(a, 2, 1), (xe,))
    with pytest.raises(RuntimeError, match="pad should be at most half"):
        F.max_pool3d(ember.tensor(x), 2, padding=2)
    with pytest.raises(RuntimeError, match="4-D .* or 5-D"):
        F.avg_pool3d(ember.randn(4, 4, 4), 2)
