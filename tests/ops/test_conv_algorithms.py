"""The convolution algorithms ember picks per layer (ember/ops/conv.py, conv_winograd.py) against
torch: padding-only taps dropped, Winograd F(2x2, 3x3) and F(4x4, 3x3) in all three passes, with
NumPy transforms and with the native (numba) ones, the choice rule, and inf/NaN inputs."""
from __future__ import annotations

import numpy as np
import pytest

import ember
from ember import _config
from ember.ops import conv, conv_winograd

torch = pytest.importorskip("torch")


def _torch_all(x, w, g, **geo):
    tx = torch.tensor(x, dtype=torch.float64, requires_grad=True)
    tw = torch.tensor(w, dtype=torch.float64, requires_grad=True)
    ty = torch.nn.functional.conv2d(tx, tw, **geo)
    ty.backward(torch.tensor(g, dtype=torch.float64))
    return ty.detach().numpy(), tx.grad.numpy(), tw.grad.numpy()


def _ember_all(x, w, g, **geo):
    ex, ew = ember.tensor(x, requires_grad=True), ember.tensor(w, requires_grad=True)
    ey = ember.nn.functional.conv2d(ex, ew, **geo)
    ey.backward(ember.tensor(g))
    return ey.detach().numpy(), ex.grad.numpy(), ew.grad.numpy()


def _out_shape(x, w, **geo):
    return tuple(torch.nn.functional.conv2d(torch.tensor(x), torch.tensor(w), **geo).shape)


TRIM_CASES = [  # (input, weight, stride, padding, dilation): some kernel rows/cols read only padding
    ((2, 3, 1, 1), (4, 3, 3, 3), 1, 1, 1),          # ResNet-18 layer 4 on 32x32: a 1x1 convolution
    ((2, 3, 2, 2), (4, 3, 3, 3), 2, 1, 1),          # stride 2 on a 2x2 map: 4 of 9 taps
    ((1, 2, 1, 5), (3, 2, 3, 3), 1, 1, 1),          # rows trimmed, columns kept
    ((1, 2, 2, 2), (3, 2, 3, 3), 1, 2, 2),          # dilation: the trimmed padding comes out negative
    ((2, 2, 3, 3), (2, 2, 5, 5), 3, 2, 1),
]


@pytest.mark.parametrize("xs, ws, stride, padding, dilation", TRIM_CASES)
def test_trimmed_taps_match_torch(xs, ws, stride, padding, dilation) -> None:
    geo = dict(stride=stride, padding=padding, dilation=dilation)
    pads = (padding,) * 4
    assert conv._trim(xs[2:], ws[2:], (stride,) * 2, pads, (dilation,) * 2) is not None  # the path runs
    rng = np.random.default_rng(0)
    x, w = rng.standard_normal(xs), rng.standard_normal(ws)
    g = rng.standard_normal(_out_shape(x, w, **geo))
    for got, want in zip(_ember_all(x, w, g, **geo), _torch_all(x, w, g, **geo)):
        np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)


@pytest.fixture(params=["native", "numpy"])
def transforms(request, monkeypatch):
    """Run the Winograd transforms with the numba kernels (when installed) and without."""
    if request.param == "numpy":
        monkeypatch.setattr(conv_winograd, "native_kernel", lambda xp, name: None)
    elif conv_winograd.native_kernel(np, "winograd_input") is None:
        pytest.skip("numba not installed")
    return request.param


WINOGRAD_CASES = [  # (input shape, out channels, padding (top, bottom, left, right))
    ((2, 3, 8, 8), 4, (1, 1, 1, 1)),
    ((2, 3, 7, 9), 5, (1, 1, 1, 1)),   # odd sizes: the last tiles hang past the output
    ((1, 2, 5, 6), 3, (0, 0, 0, 0)),
    ((1, 2, 6, 5), 3, (2, 2, 2, 2)),
    ((2, 2, 4, 7), 3, (0, 2, 1, 0)),   # asymmetric ("same"-style) padding
    ((3, 4, 1, 3), 2, (1, 1, 1, 1)),
]


@pytest.mark.parametrize("m", [2, 4])
@pytest.mark.parametrize("xs, o, pads", WINOGRAD_CASES)
def test_winograd_three_passes_match_torch_float64(xs, o, pads, m, transforms) -> None:
    rng = np.random.default_rng(1)
    x, w = rng.standard_normal(xs), rng.standard_normal((o, xs[1], 3, 3))
    tx = torch.nn.functional.pad(torch.tensor(x), (pads[2], pads[3], pads[0], pads[1]))
    g = rng.standard_normal(tuple(torch.nn.functional.conv2d(tx, torch.tensor(w)).shape))
    y, gx_pad, gw = _torch_all(tx.numpy(), w, g)
    gx = gx_pad[:, :, pads[0]:pads[0] + xs[2], pads[2]:pads[2] + xs[3]]
    tol = dict(rtol=1e-11, atol=1e-11)
    np.testing.assert_allclose(conv_winograd.conv2d(np, x, w, pads, m), y, **tol)
    np.testing.assert_allclose(conv_winograd.input_grad(np, g, w, pads, m), gx, **tol)
    np.testing.assert_allclose(conv_winograd.weight_grad(np, x, g, pads, m), gw, **tol)


def test_winograd_transforms_native_equal_numpy(monkeypatch) -> None:
    """The numba kernels compute the same sums as the NumPy transforms."""
    if conv_winograd.native_kernel(np, "winograd_input") is None:
        pytest.skip("numba not installed")
    rng = np.random.default_rng(2)
    x, g = rng.standard_normal((2, 5, 7, 6)).astype(np.float32), rng.standard_normal((2, 4, 7, 6)).astype(np.float32)
    mt = rng.standard_normal((36, 2 * 2 * 2, 4)).astype(np.float32)
    native = (conv_winograd.input_transform(np, x, (1, 1, 1, 1), 4),
              conv_winograd.output_transform(np, mt, 2, 7, 6, 4),
              conv_winograd.weight_grad(np, x, g, (1, 1, 1, 1), 4))
    monkeypatch.setattr(conv_winograd, "native_kernel", lambda xp, name: None)
    plain = (conv_winograd.input_transform(np, x, (1, 1, 1, 1), 4),
             conv_winograd.output_transform(np, mt, 2, 7, 6, 4),
             conv_winograd.weight_grad(np, x, g, (1, 1, 1, 1), 4))
    for a, b in zip(native, plain):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("algorithm, size, expected", [
    ("auto", 8, {4, 2}), ("auto", 2, {2}), ("winograd2", 8, {2}), ("im2col", 8, {0}),
])
def test_choice_rule(monkeypatch, algorithm, size, expected) -> None:
    monkeypatch.setattr(_config, "CONV_ALGORITHM", algorithm)
    monkeypatch.setattr(conv, "_numpy_winograd_pays", lambda channels, side: True)  # without numba: as with it
    geo = ((1, 1), (1, 1, 1, 1), (1, 1), 1)
    assert conv.winograd_tile(np, (8, 32, size, size), (32, 32, 3, 3), *geo, np.float32) in expected
    # never: float64, few channels, stride 2, 5x5 kernels
    assert conv.winograd_tile(np, (8, 32, size, size), (32, 32, 3, 3), *geo, np.float64) == 0
    assert conv.winograd_tile(np, (8, 3, size, size), (32, 3, 3, 3), *geo, np.float32) == 0
    assert conv.winograd_tile(np, (8, 32, size, size), (32, 32, 3, 3), (2, 2), *geo[1:], np.float32) == 0
    assert conv.winograd_tile(np, (8, 32, size, size), (32, 32, 5, 5), *geo, np.float32) == 0


@pytest.mark.parametrize("algorithm", ["auto", "winograd2"])
def test_numpy_only_rule_takes_winograd_for_wide_layers(monkeypatch, algorithm) -> None:
    """Without numba's transforms, F(2x2) only on layers of 64+ channels each way (narrower ones measured 1.4-2.4x
    faster by im2col); narrower layers take im2col (0)."""
    monkeypatch.setattr(_config, "CONV_ALGORITHM", algorithm)
    monkeypatch.setattr(conv, "native_kernel", lambda xp, name: None)
    geo = ((1, 1), (1, 1, 1, 1), (1, 1), 1)
    for c, o, side, want in [(16, 64, 16, 0), (32, 64, 14, 0), (64, 64, 8, 2), (64, 64, 32, 2), (128, 128, 16, 2),
                             (256, 256, 8, 2), (128, 256, 4, 2), (64, 64, 56, 2), (64, 32, 56, 0), (32, 128, 56, 0)]:
        assert conv.winograd_tile(np, (8, c, side, side), (o, c, 3, 3), *geo, np.float32) == want, (c, o, side)


@pytest.mark.parametrize("algorithm", ["auto", "winograd2"])
@pytest.mark.parametrize("size", [8, 14, 3])
def test_float32_layers_match_torch(monkeypatch, algorithm, size) -> None:
    """Through the public API, float32, as in a ResNet layer: each pass within 5e-5 of the largest
    value of a float64 reference (F(4x4)'s rounding is ~1e-5 of it; im2col's ~5e-7)."""
    monkeypatch.setattr(_config, "CONV_ALGORITHM", algorithm)
    rng = np.random.default_rng(3)
    x = rng.standard_normal((4, 32, size, size)).astype(np.float32)
    w = (rng.standard_normal((24, 32, 3, 3)) * 0.1).astype(np.float32)
    g = rng.standard_normal((4, 24, size, size)).astype(np.float32)
    assert conv.winograd_tile(np, x.shape, w.shape, (1, 1), (1, 1, 1, 1), (1, 1), 1, np.float32) > 0
    bound = 5e-5 if algorithm == "auto" else 5e-6
    for got, want in zip(_ember_all(x, w, g, padding=1), _torch_all(x, w, g, padding=1)):
        assert got.dtype == np.float32
        assert np.abs(got - want).max() <= bound * np.abs(want).max()


def test_nonfinite_inputs_take_the_direct_path() -> None:
    """inf and NaN propagate as in PyTorch's direct convolution (only to the windows that read them)."""
    rng = np.random.default_rng(4)
    x = rng.standard_normal((2, 16, 8, 8)).astype(np.float32)
    w = np.abs(rng.standard_normal((16, 16, 3, 3))).astype(np.float32)
    g = rng.standard_normal((2, 16, 8, 8)).astype(np.float32)
    x[0, 3, 2, 2], x[1, 0, 5, 6] = np.inf, np.nan
    got = _ember_all(x, w, g, padding=1)
    tx, tw = torch.tensor(x, requires_grad=True), torch.tensor(w, requires_grad=True)
    ty = torch.nn.functional.conv2d(tx, tw, padding=1)
    ty.backward(torch.tensor(g))
    for a, b in zip(got, (ty.detach().numpy(), tx.grad.numpy(), tw.grad.numpy())):
        np.testing.assert_array_equal(np.isfinite(a), np.isfinite(b))
        finite = np.isfinite(b)
        np.testing.assert_allclose(a[finite], b[finite], rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("threads", [1, 3])
def test_numpy_only_winograd_by_image_chunks(threads, monkeypatch) -> None:
    """Without the numba kernels the Winograd passes run by image chunks (one image each here, over 1 or 3 of
    ember's threads) and keep no V for the weight gradient: every pass against torch in float64, float32 bounds."""
    monkeypatch.setattr(conv_winograd, "native_kernel", lambda xp, name: None)
    monkeypatch.setattr(conv, "native_kernel", lambda xp, name: None)
    monkeypatch.setattr(conv, "_numpy_winograd_pays", lambda channels, side: True)  # (16 channels: im2col by default)
    monkeypatch.setattr(conv_winograd, "CHUNK_BYTES", 1)
    monkeypatch.setattr(_config, "CPU_THREADS", threads)
    rng = np.random.default_rng(7)
    x = rng.standard_normal((5, 16, 7, 9)).astype(np.float32)
    w = (rng.standard_normal((20, 16, 3, 3)) / 12).astype(np.float32)
    g = rng.standard_normal((5, 20, 7, 9)).astype(np.float32)
    assert conv.winograd_tile(np, x.shape, w.shape, (1, 1), (1,) * 4, (1, 1), 1, np.float32) == 2
    for got, want in zip(_ember_all(x, w, g, padding=1), _torch_all(x, w, g, padding=1)):
        assert got.dtype == np.float32
        assert np.abs(got - want).max() <= 2e-6 * np.abs(want).max()
