"""Stride-1 convolutions with few output channels (a GAN generator's output layer): the column-free NumPy path
(ember/ops/conv_tap_sum.py) and, from 8 output channels, the indirect kernels at stride 1. Forward and both
gradients against torch in float64 and float32, the rule, inf/NaN as torch's float64 convolution, threads."""
from __future__ import annotations

import numpy as np
import pytest

import ember
from ember.ops import conv, conv_im2col, conv_indirect, conv_tap_sum

torch = pytest.importorskip("torch")

CASES = [  # (input shape, weight shape, padding, dilation)
    ((3, 64, 12, 13), (1, 64, 3, 3), 1, 1),          # a generator's one-channel output layer, small
    ((2, 16, 9, 20), (3, 16, 3, 3), 1, 1),
    ((2, 6, 7, 8), (2, 6, 5, 3), (2, 0), 1),          # taller kernel, padding in one dimension
    ((2, 6, 9, 9), (3, 6, 3, 3), 2, 2),               # dilation
    ((2, 5, 6, 6), (5, 5, 2, 2), 0, 1),               # even kernel, no padding, as many outputs as inputs
    ((2, 4, 5, 7), (3, 4, 3, 3), 3, 1),               # taps that read only padding (trimmed first)
    ((2, 20, 17, 18), (12, 20, 3, 3), (1, 2), 1),     # 12 outputs: the indirect kernels where they exist
    ((1, 40, 16, 16), (15, 40, 3, 3), 1, 1),
]


def _run(xs, ws, padding, dilation, dtype):
    rng = np.random.default_rng(0)
    x_np, w_np = rng.standard_normal(xs).astype(dtype), rng.standard_normal(ws).astype(dtype)
    kwargs = dict(padding=padding, dilation=dilation)
    tx, tw = torch.tensor(x_np, requires_grad=True), torch.tensor(w_np, requires_grad=True)
    ty = torch.nn.functional.conv2d(tx, tw, **kwargs)
    g_np = rng.standard_normal(tuple(ty.shape)).astype(dtype)
    ty.backward(torch.tensor(g_np))
    ex, ew = ember.tensor(x_np, requires_grad=True), ember.tensor(w_np, requires_grad=True)
    ey = ember.nn.functional.conv2d(ex, ew, **kwargs)
    ey.backward(ember.tensor(g_np))
    return [(e.detach().numpy(), t.detach().numpy()) for e, t in ((ey, ty), (ex.grad, tx.grad), (ew.grad, tw.grad))]


def _pads(padding) -> tuple:
    p = (padding, padding) if isinstance(padding, int) else padding
    return (p[0], p[0], p[1], p[1])


@pytest.mark.parametrize("xs, ws, padding, dilation", CASES)
def test_few_outputs_match_torch_float64(xs, ws, padding, dilation) -> None:
    algorithm = conv.algorithm(np, xs, ws, (1, 1), _pads(padding), (dilation, dilation), 1, np.float64)
    assert algorithm.endswith("tap-sum"), algorithm
    for mine, theirs in _run(xs, ws, padding, dilation, np.float64):
        np.testing.assert_allclose(mine, theirs, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("xs, ws, padding, dilation", CASES)
def test_few_outputs_match_torch_float32(xs, ws, padding, dilation) -> None:
    for mine, theirs in _run(xs, ws, padding, dilation, np.float32):
        scale = max(1.0, float(np.abs(theirs).max()))
        np.testing.assert_allclose(mine, theirs, rtol=0, atol=3e-6 * scale)


@pytest.mark.parametrize("o", [1, 3])
def test_module_against_float64_reference(o) -> None:
    """The module's functions called directly (what the NumPy-only install runs), float32 against torch's
    float64: direct sums, im2col's accuracy."""
    rng = np.random.default_rng(3)
    x = rng.standard_normal((6, 32, 10, 11)).astype(np.float32)
    w = rng.standard_normal((o, 32, 3, 3)).astype(np.float32)
    g = rng.standard_normal((6, o, 10, 11)).astype(np.float32)
    tx, tw, tg = (torch.tensor(a, dtype=torch.float64, requires_grad=True) for a in (x, w, g))
    ref = torch.nn.functional.conv2d(tx, tw, padding=1)
    gx, gw = torch.autograd.grad(ref, (tx, tw), tg)
    pads, dil = (1,) * 4, (1, 1)
    for mine, theirs in ((conv_tap_sum.forward(np, x, w, pads, dil), ref),
                         (conv_tap_sum.input_grad(np, g, w, x.shape, pads, dil), gx),
                         (conv_tap_sum.weight_grad(np, x, g, w.shape, pads, dil), gw)):
        theirs = theirs.detach().numpy()
        assert mine.dtype == np.float32 and mine.shape == theirs.shape
        assert np.abs(mine - theirs).max() <= 1e-6 * np.abs(theirs).max()


def test_empty_batch() -> None:
    xs, ws = ((0, 64, 8, 8), (1, 64, 3, 3))
    x, w = ember.zeros(xs, requires_grad=True), ember.ones(ws, requires_grad=True)
    y = ember.nn.functional.conv2d(x, w, padding=1)
    y.sum().backward()
    assert tuple(y.shape) == (0, ws[0]) + xs[2:]
    assert tuple(x.grad.shape) == xs and float(w.grad.abs().sum()) == 0.0


def test_rule() -> None:
    f32, one, pads = np.float32, (1, 1), (1,) * 4
    assert conv.algorithm(np, (64, 64, 32, 32), (1, 64, 3, 3), one, pads, one, 1, f32) == "tap-sum"
    assert conv.algorithm(np, (64, 64, 32, 32), (3, 64, 3, 3), one, pads, one, 1, np.float64) == "tap-sum"
    assert conv.algorithm(np, (64, 1, 28, 28), (32, 1, 3, 3), one, pads, one, 1, f32) != "tap-sum"  # more outputs
    assert conv.algorithm(np, (64, 2, 28, 28), (3, 2, 3, 3), one, pads, one, 1, f32) != "tap-sum"  # than inputs
    assert conv.algorithm(np, (64, 64, 32, 32), (1, 64, 3, 3), (2, 2), pads, one, 1, f32) != "tap-sum"  # stride
    assert conv.algorithm(np, (64, 64, 32, 32), (2, 32, 3, 3), one, pads, one, 2, f32) != "tap-sum"  # groups
    assert conv.algorithm(np, (64, 64, 32, 32), (3, 64, 1, 1), one, (0,) * 4, one, 1, f32) != "tap-sum"  # 1x1
    assert conv.algorithm(np, (64, 64, 32, 32), (3, 64, 3, 3), one, pads, one, 1, np.float16) != "tap-sum"
    eight = conv.algorithm(np, (64, 32, 28, 28), (8, 32, 3, 3), one, pads, one, 1, f32)
    assert eight == ("indirect" if conv_indirect.available(np) else "tap-sum")
    assert conv._indirect_input(np, (64, 32, 28, 28), (8, 32, 3, 3), one, pads, one, 1, f32) == \
        conv_indirect.available(np)
    assert not conv._indirect_input(np, (64, 32, 28, 28), (3, 32, 3, 3), one, pads, one, 1, f32)


@pytest.mark.parametrize("where", ["corner weight", "x", "g"])
def test_inf_and_nan_as_torch_float64(where) -> None:
    """torch's float64 convolution multiplies padding (0 * inf = NaN where an inf weight's tap reads padding, and in
    the weight gradient when g holds inf), ember's rule in every dtype; tap_sum skips padding, so such inputs take
    the other paths. float32 must show torch float64's NaN and inf pattern."""
    rng = np.random.default_rng(1)
    x_np, w_np = rng.standard_normal((3, 16, 6, 7)), rng.standard_normal((2, 16, 3, 3))
    g_np = rng.standard_normal((3, 2, 6, 7))
    if where == "corner weight":
        w_np[1, 3, 0, 0] = np.inf
    elif where == "x":
        x_np[1, 4, 0, 1] = np.nan
    else:
        g_np[0, 1, 5, 6] = -np.inf
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
            finite = np.isfinite(theirs)
            np.testing.assert_allclose(mine[finite], theirs[finite], rtol=1e-4, atol=1e-4)


def test_threads_give_the_same_result(monkeypatch) -> None:
    """Images shared out over three threads (tiny chunks forced) give one thread's results; the weight gradient's
    per-thread sums are added in a fixed order."""
    rng = np.random.default_rng(2)
    x = rng.standard_normal((7, 24, 9, 10)).astype(np.float32)
    w = rng.standard_normal((3, 24, 3, 3)).astype(np.float32)
    g = rng.standard_normal((7, 3, 9, 10)).astype(np.float32)
    pads, dil = (1,) * 4, (1, 1)

    def passes():
        return (conv_tap_sum.forward(np, x, w, pads, dil), conv_tap_sum.input_grad(np, g, w, x.shape, pads, dil),
                conv_tap_sum.weight_grad(np, x, g, w.shape, pads, dil))

    monkeypatch.setattr(ember._config, "CPU_THREADS", 1)
    one = passes()
    monkeypatch.setattr(ember._config, "CPU_THREADS", 3)
    monkeypatch.setattr(conv_im2col, "MIN_CHUNK_FLOPS", 1.0)
    three = passes()
    again = passes()
    for a, b, c in zip(one, three, again):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-5)
        np.testing.assert_array_equal(b, c)
