"""F.interpolate / nn.Upsample for every mode against torch 2.13 in float64: forward and input grads,
sizes from ``size``, ``scale_factor`` and ``recompute_scale_factor``, second order, and errors."""
from __future__ import annotations

import numpy as np
import pytest

import ember
import ember.nn as enn
import ember.nn.functional as F
from ember.autograd.gradcheck import gradgradcheck

torch = pytest.importorskip("torch")
TF = torch.nn.functional


def _check(shape: tuple, seed: int = 0, **kwargs) -> None:
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape)
    ex, tx = ember.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    eo, to = F.interpolate(ex, **kwargs), TF.interpolate(tx, **kwargs)
    assert tuple(eo.shape) == tuple(to.shape), kwargs
    np.testing.assert_allclose(eo.detach().numpy(), to.detach().numpy(), rtol=1e-12, atol=1e-12)
    g = rng.standard_normal(tuple(to.shape))
    (eo * ember.tensor(g)).sum().backward()
    (to * torch.tensor(g)).sum().backward()
    np.testing.assert_allclose(ex.grad.numpy(), tx.grad.numpy(), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("align_corners", [False, True])
@pytest.mark.parametrize("mode,shape,resize", [
    ("linear", (2, 3, 5), {"size": 9}),
    ("linear", (2, 3, 7), {"scale_factor": 0.6}),
    ("linear", (1, 2, 4), {"size": 1}),
    ("bilinear", (2, 3, 5, 6), {"scale_factor": 1.7}),
    ("bilinear", (2, 3, 5, 6), {"size": (3, 11)}),
    ("bilinear", (1, 1, 8, 8), {"scale_factor": (0.5, 2.0)}),
    ("bicubic", (2, 3, 5, 6), {"size": (3, 11)}),
    ("bicubic", (2, 2, 4, 5), {"scale_factor": 2.3}),
    ("trilinear", (1, 2, 3, 4, 5), {"scale_factor": (2, 0.5, 1.5)}),
    ("trilinear", (1, 2, 3, 4, 5), {"size": (5, 3, 6)}),
])
def test_interpolating_modes_match_torch(mode, shape, resize, align_corners):
    _check(shape, mode=mode, align_corners=align_corners, **resize)


@pytest.mark.parametrize("mode,shape,resize", [
    ("nearest", (2, 3, 9, 11), {"scale_factor": 1.37}),
    ("nearest", (2, 3, 9, 11), {"size": (4, 20)}),
    ("nearest", (2, 3, 5), {"scale_factor": 2}),
    ("nearest", (1, 2, 3, 4, 5), {"size": (6, 2, 7)}),
    ("nearest-exact", (2, 3, 9, 11), {"scale_factor": 0.37}),
    ("nearest-exact", (2, 3, 9, 11), {"size": (13, 7)}),
    ("area", (2, 3, 9, 11), {"size": (4, 5)}),
    ("area", (2, 3, 10), {"scale_factor": 0.5}),
    ("area", (1, 2, 9, 11, 4), {"size": (4, 5, 3)}),
])
def test_nearest_and_area_match_torch(mode, shape, resize):
    _check(shape, mode=mode, **resize)


@pytest.mark.parametrize("mode", ["bilinear", "bicubic"])
@pytest.mark.parametrize("resize", [{"size": (4, 5)}, {"size": (14, 5)}, {"scale_factor": 0.37}])
def test_antialias_matches_torch(mode, resize):
    _check((2, 3, 9, 11), mode=mode, antialias=True, **resize)


def test_recompute_scale_factor_matches_torch():
    _check((2, 3, 5, 7), mode="bilinear", scale_factor=2.5, recompute_scale_factor=True)
    _check((2, 3, 5, 7), mode="nearest", scale_factor=1.3, recompute_scale_factor=True)


def test_float32_close_to_torch_and_second_order():
    x = np.random.default_rng(1).standard_normal((1, 2, 5, 6)).astype(np.float32)
    eo = F.interpolate(ember.tensor(x), scale_factor=1.5, mode="bicubic")
    to = TF.interpolate(torch.tensor(x), scale_factor=1.5, mode="bicubic")
    assert eo.dtype is ember.float32
    np.testing.assert_allclose(eo.numpy(), to.numpy(), rtol=1e-5, atol=1e-5)
    xe = ember.tensor(x[:, :1, :3, :4].astype(np.float64), requires_grad=True)
    assert gradgradcheck(lambda a: F.interpolate(a, size=(5, 3), mode="bilinear", align_corners=True) ** 2, (xe,))


def test_upsample_modules_match_torch():
    x = np.random.default_rng(2).standard_normal((2, 3, 4, 5))
    pairs = [
        (enn.Upsample(scale_factor=2, mode="bilinear"), torch.nn.Upsample(scale_factor=2, mode="bilinear")),
        (enn.Upsample(size=(7, 3), mode="bicubic", align_corners=True),
         torch.nn.Upsample(size=(7, 3), mode="bicubic", align_corners=True)),
        (enn.UpsamplingBilinear2d(scale_factor=2), torch.nn.UpsamplingBilinear2d(scale_factor=2)),
        (enn.UpsamplingNearest2d(size=(6, 9)), torch.nn.UpsamplingNearest2d(size=(6, 9))),
    ]
    for em, tm in pairs:
        np.testing.assert_allclose(em(ember.tensor(x)).numpy(), tm(torch.tensor(x)).numpy(), rtol=1e-12, atol=1e-12)
        assert repr(em) == repr(tm)
    np.testing.assert_allclose(F.upsample_bilinear(ember.tensor(x), scale_factor=2).numpy(),
                               TF.interpolate(torch.tensor(x), scale_factor=2, mode="bilinear",
                                              align_corners=True).numpy(), rtol=1e-12, atol=1e-12)


def test_interpolate_errors():
    x = ember.randn(1, 2, 4, 4)
    with pytest.raises(ValueError, match="only one of size or scale_factor"):
        F.interpolate(x, size=3, scale_factor=2)
    with pytest.raises(ValueError, match="either size or scale_factor"):
        F.interpolate(x)
    with pytest.raises(ValueError, match="align_corners option can only be set"):
        F.interpolate(x, size=3, align_corners=True)
    with pytest.raises(NotImplementedError, match="trilinear mode needs 5D input"):
        F.interpolate(x, size=3, mode="trilinear")
    with pytest.raises(NotImplementedError, match="anti-alias"):
        F.interpolate(ember.randn(1, 2, 4), size=3, mode="linear", antialias=True)
    with pytest.raises(ValueError, match="same number of spatial dimensions"):
        F.interpolate(x, size=(3, 3, 3), mode="bilinear")
    with pytest.raises(NotImplementedError, match="not supported"):
        F.interpolate(x, size=3, mode="lanczos")
    out = F.interpolate(x, size=(4, 4), mode="bilinear")  # same size: still a new tensor
    assert out is not x
    np.testing.assert_array_equal(out.numpy(), x.numpy())
