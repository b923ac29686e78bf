"""The channels-last batch-wide im2col layout (ember/ops/conv_im2col.py) and the dense-layer case
(one output pixel whose window is the whole input, ``conv._whole_window``) against torch: forward,
input gradient, weight gradient and bias gradient, float64 and float32, odd geometries, and inf/NaN
propagated as torch propagates them."""
from __future__ import annotations

import numpy as np
import pytest

import ember
from ember.ops import conv

torch = pytest.importorskip("torch")

# (input, weight, geometry, which algorithm conv.py must pick)
CASES = [
    ((5, 6, 8, 8), (7, 6, 3, 3), dict(stride=2, padding=1), "im2col"),              # ResNet stride-2 3x3
    ((4, 5, 4, 4), (6, 5, 1, 1), dict(stride=2), "im2col"),                          # 1x1 downsample
    ((3, 4, 5, 7), (5, 4, 3, 2), dict(stride=(2, 1), padding=(1, 0)), "im2col"),     # non-square
    ((2, 3, 7, 6), (4, 3, 3, 3), dict(dilation=2, padding=2), "im2col"),             # dilation
    ((3, 4, 6, 6), (6, 2, 3, 3), dict(padding=1, groups=2), "grouped"),              # groups keep NCHW
    ((2, 4, 1, 3), (6, 2, 3, 3), dict(padding=1, groups=2), "grouped"),              # grouped, taps dropped
    ((4, 8, 2, 2), (9, 8, 3, 3), dict(stride=2, padding=1), "dense"),                # ResNet layer4.0
    ((3, 6, 1, 1), (5, 6, 3, 3), dict(padding=1), "dense"),                          # 3x3 on a 1x1 map
    ((3, 4, 3, 5), (2, 4, 3, 5), dict(), "dense"),                                   # kernel == input
    ((3, 4, 3, 3), (2, 4, 3, 3), dict(stride=3, padding=(0, 0)), "dense"),
    ((3, 4, 3, 3), (2, 4, 2, 2), dict(stride=2), "im2col"),                          # 2x2 outputs
]


def _torch_all(x, w, b, g, **geo):
    tx, tw, tb = (torch.tensor(a, requires_grad=True) for a in (x, w, b))
    ty = torch.nn.functional.conv2d(tx, tw, tb, **geo)
    ty.backward(torch.tensor(g))
    return [a.detach().numpy() for a in (ty, tx.grad, tw.grad, tb.grad)]


def _ember_all(x, w, b, g, **geo):
    ex, ew, eb = (ember.tensor(a, requires_grad=True) for a in (x, w, b))
    ey = ember.nn.functional.conv2d(ex, ew, eb, **geo)
    ey.backward(ember.tensor(g))
    return [a.detach().numpy() for a in (ey, ex.grad, ew.grad, eb.grad)]


def _picked(xs, ws, geo) -> str:
    stride = conv.pair(geo.get("stride", 1), 2, "stride", "t")
    dilation = conv.pair(geo.get("dilation", 1), 2, "dilation", "t")
    pads = conv._resolve_padding("t", geo.get("padding", 0), ws[2:], stride, dilation)
    if geo.get("groups", 1) != 1:
        return "grouped"
    trim = conv._trim(xs[2:], ws[2:], stride, pads, dilation)
    if trim is not None:
        ws = ws[:2] + (trim[0].stop - trim[0].start, trim[1].stop - trim[1].start)
        pads = trim[2]
    return "dense" if conv._whole_window(xs[2:], ws, stride, pads, dilation, 1) else "im2col"


@pytest.mark.parametrize("dtype, tol", [(np.float64, 1e-11), (np.float32, 2e-5)])
@pytest.mark.parametrize("xs, ws, geo, algorithm", CASES)
def test_matches_torch(xs, ws, geo, algorithm, dtype, tol) -> None:
    assert _picked(xs, ws, geo) == algorithm  # the case exercises the path it is meant to
    rng = np.random.default_rng(1)
    x, w, b = rng.standard_normal(xs).astype(dtype), rng.standard_normal(ws).astype(dtype), rng.standard_normal(ws[0]).astype(dtype)
    g = rng.standard_normal(tuple(torch.nn.functional.conv2d(torch.tensor(x), torch.tensor(w), **geo).shape)).astype(dtype)
    for name, got, want in zip(("forward", "input grad", "weight grad", "bias grad"),
                               _ember_all(x, w, b, g, **geo), _torch_all(x, w, b, g, **geo)):
        assert got.dtype == want.dtype, name
        scale = max(1.0, float(np.abs(want).max()))
        np.testing.assert_allclose(got, want, rtol=tol, atol=tol * scale, err_msg=name)


@pytest.mark.parametrize("xs, ws, geo, algorithm", CASES)
def test_inf_nan_propagate_as_torch(xs, ws, geo, algorithm) -> None:
    """inf and NaN in the input, the weights and the output gradient land where torch puts them
    (a GEMM, like torch's direct convolution, mixes only the windows that read them), also in
    kernel taps that read only padding and are dropped (``conv._trim``): torch's 0 * inf is NaN."""
    rng = np.random.default_rng(2)
    x, w = rng.standard_normal(xs), rng.standard_normal(ws)
    b = rng.standard_normal(ws[0])
    x.flat[3], x.flat[-2] = np.inf, np.nan
    w.flat[1] = -np.inf
    g = rng.standard_normal(tuple(torch.nn.functional.conv2d(torch.tensor(x), torch.tensor(w), **geo).shape))
    g.flat[0] = np.nan
    for name, got, want in zip(("forward", "input grad", "weight grad", "bias grad"),
                               _ember_all(x, w, b, g, **geo), _torch_all(x, w, b, g, **geo)):
        np.testing.assert_array_equal(np.isnan(got), np.isnan(want), err_msg=name)
        np.testing.assert_array_equal(np.isposinf(got), np.isposinf(want), err_msg=name)
        finite = np.isfinite(want)
        np.testing.assert_allclose(got[finite], want[finite], rtol=1e-10, atol=1e-10, err_msg=name)


def test_dense_case_builds_no_columns(monkeypatch) -> None:
    """The whole-window case is one GEMM on the arrays as they are: im2col is never called."""
    called = []
    monkeypatch.setattr(conv.im2col, "forward", lambda *a, **k: called.append(1))
    x, w = np.ones((2, 3, 2, 2)), np.ones((4, 3, 3, 3))
    y = ember.nn.functional.conv2d(ember.tensor(x), ember.tensor(w), stride=2, padding=1)
    assert not called and y.shape == (2, 4, 1, 1) and float(y[0, 0, 0, 0]) == 12.0
