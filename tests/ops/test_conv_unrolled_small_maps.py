"""Convolutions whose every output pixel's window covers the whole input (ember/ops/conv_unrolled.py: one GEMM with
the unrolled kernel per pass): forward and both gradients against torch in float64 and float32, the rule, the
inf/NaN cases where torch multiplies padding, and the threaded split."""
from __future__ import annotations

import numpy as np
import pytest

import ember
from ember.backends import cpu_threads
from ember.ops import conv, conv_im2col, conv_unrolled

torch = pytest.importorskip("torch")

CASES = [  # (input shape, weight shape, stride, padding): every window covers the input
    ((4, 8, 2, 2), (6, 8, 3, 3), 1, 1),          # ResNet-18's layer3 on 32x32 images, small
    ((3, 16, 2, 2), (16, 16, 3, 3), 1, 1),
    ((2, 3, 1, 2), (5, 3, 3, 3), 1, 1),          # a 1-row map: the padding-only taps are trimmed first
    ((2, 4, 3, 3), (3, 4, 5, 5), 1, 2),          # 5x5 on 3x3 maps: 9 output pixels
    ((2, 4, 3, 2), (3, 4, 5, 5), 2, 2),          # strided
    ((2, 4, 2, 2), (3, 4, 3, 4), 1, (1, 2)),     # non-square kernel and padding
    ((5, 7, 2, 1), (2, 7, 3, 1), 1, (1, 0)),     # 3x1 kernel on 2x1 maps: 2 output rows
]


def _both(xs, ws, stride, padding, dtype):
    rng = np.random.default_rng(0)
    x_np, w_np = rng.standard_normal(xs).astype(dtype), rng.standard_normal(ws).astype(dtype)
    tx, tw = torch.tensor(x_np, requires_grad=True), torch.tensor(w_np, requires_grad=True)
    ty = torch.nn.functional.conv2d(tx, tw, stride=stride, padding=padding)
    g_np = rng.standard_normal(tuple(ty.shape)).astype(dtype)
    ty.backward(torch.tensor(g_np))
    ex, ew = ember.tensor(x_np, requires_grad=True), ember.tensor(w_np, requires_grad=True)
    ey = ember.nn.functional.conv2d(ex, ew, stride=stride, padding=padding)
    ey.backward(ember.tensor(g_np))
    return [(e.detach().numpy(), t.detach().numpy()) for e, t in ((ey, ty), (ex.grad, tx.grad), (ew.grad, tw.grad))]


def _geometry(stride, padding) -> tuple:
    s = (stride, stride) if isinstance(stride, int) else stride
    p = (padding, padding) if isinstance(padding, int) else padding
    return s, (p[0], p[0], p[1], p[1])


@pytest.mark.parametrize("xs, ws, stride, padding", CASES)
def test_unrolled_matches_torch_float64(xs, ws, stride, padding) -> None:
    s, p = _geometry(stride, padding)
    assert conv.algorithm(np, xs, ws, s, p, (1, 1), 1, np.float64).endswith("unrolled")
    for mine, theirs in _both(xs, ws, stride, padding, np.float64):
        np.testing.assert_allclose(mine, theirs, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("xs, ws, stride, padding", CASES)
def test_unrolled_matches_torch_float32(xs, ws, stride, padding) -> None:
    for mine, theirs in _both(xs, ws, stride, padding, np.float32):
        scale = max(1.0, float(np.abs(theirs).max()))
        np.testing.assert_allclose(mine, theirs, rtol=0, atol=2e-6 * scale)


def test_unrolled_module_against_float64_reference() -> None:
    """The module's three functions called directly, float32 against torch's float64 result: direct sums, so
    im2col's accuracy (not Winograd's)."""
    rng = np.random.default_rng(3)
    x, w = rng.standard_normal((16, 64, 2, 2)).astype(np.float32), rng.standard_normal((32, 64, 3, 3)).astype(np.float32)
    g = rng.standard_normal((16, 32, 2, 2)).astype(np.float32)
    tx, tw, tg = (torch.tensor(a, dtype=torch.float64) for a in (x, w, g))
    ref = torch.nn.functional.conv2d(tx, tw, padding=1)
    gx, gw = torch.autograd.grad(torch.nn.functional.conv2d(tx.requires_grad_(), tw.requires_grad_(), padding=1),
                                 (tx, tw), tg)
    for mine, theirs in ((conv_unrolled.forward(np, x, w, (1, 1), (1,) * 4), ref),
                         (conv_unrolled.input_grad(np, g, w, x.shape, (1, 1), (1,) * 4), gx),
                         (conv_unrolled.weight_grad(np, x, g, w.shape, (1, 1), (1,) * 4), gw)):
        theirs = theirs.detach().numpy()
        assert mine.dtype == np.float32
        assert np.abs(mine - theirs).max() <= 1e-6 * np.abs(theirs).max()


def test_empty_batch() -> None:
    xs, ws = ((0, 16, 2, 2), (16, 16, 3, 3))
    x, w = ember.zeros(xs, requires_grad=True), ember.ones(ws, requires_grad=True)
    y = ember.nn.functional.conv2d(x, w, padding=1)
    y.sum().backward()
    assert tuple(y.shape) == (0, ws[0]) + xs[2:]
    assert tuple(x.grad.shape) == xs and float(w.grad.abs().sum()) == 0.0


def test_rule() -> None:
    f32, one = np.float32, (1, 1)
    assert conv.algorithm(np, (128, 256, 2, 2), (256, 256, 3, 3), one, (1,) * 4, one, 1, f32) == "unrolled"
    assert conv.algorithm(np, (128, 128, 4, 4), (128, 128, 3, 3), one, (1,) * 4, one, 1, f32) != "unrolled"
    assert conv.algorithm(np, (8, 16, 3, 3), (16, 16, 3, 3), one, (1,) * 4, one, 1, f32) != "unrolled"  # 3 > 3 - 1
    assert conv.algorithm(np, (8, 16, 2, 2), (16, 8, 3, 3), one, (1,) * 4, one, 2, f32) != "unrolled"  # groups
    assert conv.algorithm(np, (8, 16, 2, 2), (16, 16, 3, 3), one, (2,) * 4, (2, 2), 1, f32) != "unrolled"  # dilation
    assert conv.algorithm(np, (8, 16, 2, 2), (16, 16, 3, 3), one, (1,) * 4, one, 1, np.float16) != "unrolled"
    assert conv.algorithm(np, (8, 512, 1, 1), (512, 512, 3, 3), one, (1,) * 4, one, 1, f32) == "trim+dense"
    assert not conv_unrolled.applicable((2, 2), (4096, 4096, 3, 3), one, (1,) * 4, one, 1)  # too big to unroll


def test_im2col_setting_turns_it_off(monkeypatch) -> None:
    monkeypatch.setattr(ember._config, "CONV_ALGORITHM", "im2col")
    assert conv.algorithm(np, (8, 16, 2, 2), (16, 16, 3, 3), (1, 1), (1,) * 4, (1, 1), 1, np.float32) != "unrolled"


@pytest.mark.parametrize("where", ["corner weight", "x", "g"])
def test_inf_and_nan_as_torch(where) -> None:
    """A weight that reads padding for some outputs, inf: torch's float64 convolution makes 0 * inf = NaN there
    (and in the weight gradient when g holds inf), ember's rule for every dtype (oneDNN's float32 forward skips the
    padding instead); the unrolled product never multiplies padding, so such inputs take the other paths. The
    reference is torch in float64; float32 must show the same NaN and inf pattern."""
    rng = np.random.default_rng(1)
    x_np, w_np = rng.standard_normal((3, 16, 2, 2)), rng.standard_normal((16, 16, 3, 3))
    g_np = rng.standard_normal((3, 16, 2, 2))
    if where == "corner weight":
        w_np[2, 3, 0, 0] = np.inf
    elif where == "x":
        x_np[1, 4, 0, 1] = np.nan
    else:
        g_np[0, 5, 1, 1] = -np.inf
    tx, tw = torch.tensor(x_np, requires_grad=True), torch.tensor(w_np, requires_grad=True)
    ty = torch.nn.functional.conv2d(tx, tw, padding=1)
    ty.backward(torch.tensor(g_np))
    expected = [t.detach().numpy() for t in (ty, tx.grad, tw.grad)]
    assert any(np.isnan(e).any() for e in expected)
    for dtype in (np.float64, np.float32):
        ex = ember.tensor(x_np.astype(dtype), requires_grad=True)
        ew = ember.tensor(w_np.astype(dtype), requires_grad=True)
        ey = ember.nn.functional.conv2d(ex, ew, padding=1)
        ey.backward(ember.tensor(g_np.astype(dtype)))
        for mine, theirs in zip((ey, ex.grad, ew.grad), expected):
            mine = mine.detach().numpy()
            np.testing.assert_array_equal(np.isnan(mine), np.isnan(theirs))
            np.testing.assert_array_equal(np.isinf(mine), np.isinf(theirs))
            np.testing.assert_array_equal(np.sign(mine[np.isinf(mine)]), np.sign(theirs[np.isinf(theirs)]))
            finite = np.isfinite(theirs)
            np.testing.assert_allclose(mine[finite], theirs[finite], rtol=1e-4, atol=1e-4)


def test_threads_give_the_same_result(monkeypatch) -> None:
    """The unrolled kernel's copies and the fold split over output channels, the products over column panels:
    three threads with tiny chunks give the one-thread bits."""
    rng = np.random.default_rng(2)
    x = rng.standard_normal((40, 32, 2, 2)).astype(np.float32)
    w = rng.standard_normal((48, 32, 3, 3)).astype(np.float32)
    g = rng.standard_normal((40, 48, 2, 2)).astype(np.float32)

    def passes():
        return (conv_unrolled.forward(np, x, w, (1, 1), (1,) * 4),
                conv_unrolled.input_grad(np, g, w, x.shape, (1, 1), (1,) * 4),
                conv_unrolled.weight_grad(np, x, g, w.shape, (1, 1), (1,) * 4))

    monkeypatch.setattr(ember._config, "CPU_THREADS", 1)
    one = passes()
    monkeypatch.setattr(ember._config, "CPU_THREADS", 3)
    monkeypatch.setattr(conv_im2col, "MIN_COPY_ELEMENTS", 1)
    monkeypatch.setattr(conv_im2col, "MIN_CHUNK_FLOPS", 1.0)
    assert cpu_threads.num_threads() == 3
    three = passes()
    for a, b in zip(one, three):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-5)
