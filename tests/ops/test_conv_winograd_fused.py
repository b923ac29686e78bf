"""The fused Winograd passes (ember/ops/conv_winograd.py ``fused_*``, kernels in
ember/backends/cpu_winograd_kernels.py): forward, input and weight gradients of F(2x2) and F(4x4) against torch in
float64 (float32 rounding bounds), odd sizes, asymmetric padding 0-2, channel counts that fill no 16-lane vector or
12 x 32 tile, tile blocks that cross images; float32 error of the default F(2x2) within torch's own (oneDNN) error
against a float64 reference; the rule; inf/NaN as ember's im2col path; thread counts. Skipped where the kernels
are not built (no numba, or a CPU without AVX-512F)."""
from __future__ import annotations

import numpy as np
import pytest

import ember
from ember import _config
from ember.ops import conv, conv_winograd as wg

torch = pytest.importorskip("torch")

pytestmark = pytest.mark.skipif(not wg.fused_available(np), reason="no fused Winograd kernels")

# (x shape, output channels, padding (top, bottom, left, right))
CASES = [
    ((3, 32, 8, 8), 32, (1, 1, 1, 1)),  # ResNet-18's layer1 shape, smaller
    ((2, 20, 7, 9), 33, (0, 2, 1, 0)),  # odd sizes, asymmetric padding, channels filling no vector or tile
    ((2, 17, 5, 6), 40, (2, 2, 2, 2)),  # padding 2 (the input gradient's padding 0)
    ((3, 32, 14, 14), 64, (1, 1, 1, 1)),  # MNIST's conv2
    ((1, 48, 4, 4), 16, (0, 0, 0, 0)),  # no padding
]


def _reference(x, w, g, padding):
    tx = torch.tensor(x, dtype=torch.float64, requires_grad=True)
    tw = torch.tensor(w, dtype=torch.float64, requires_grad=True)
    ty = torch.nn.functional.conv2d(torch.nn.functional.pad(tx, (padding[2], padding[3], padding[0], padding[1])), tw)
    ty.backward(torch.tensor(g, dtype=torch.float64))
    return ty.detach().numpy(), tx.grad.numpy(), tw.grad.numpy()


def _data(xs, o, padding, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(xs).astype(np.float32)
    w = (rng.standard_normal((o, xs[1], 3, 3)) / np.sqrt(9 * xs[1])).astype(np.float32)
    oh, ow = xs[2] + padding[0] + padding[1] - 2, xs[3] + padding[2] + padding[3] - 2
    g = rng.standard_normal((xs[0], o, oh, ow)).astype(np.float32)
    return x, w, g


def _relative(got, want):
    return float(np.abs(got - want).max() / np.abs(want).max())


@pytest.mark.parametrize("m, bound", [(2, 2e-6), (4, 5e-5)])
@pytest.mark.parametrize("xs, o, padding", CASES)
def test_passes_match_torch_float64(xs, o, padding, m, bound, monkeypatch) -> None:
    monkeypatch.setattr(wg, "FUSED_BLOCK_BYTES", 1)  # blocks of 12 tiles: several blocks, crossing images
    x, w, g = _data(xs, o, padding)
    got = (wg.fused_forward(x, w, padding, m), wg.fused_input_grad(g, w, padding, m),
           wg.fused_weight_grad(x, g, padding, m))
    for mine, want in zip(got, _reference(x, w, g, padding)):
        assert mine.dtype == np.float32 and mine.shape == want.shape
        assert _relative(mine, want) < bound


def test_f2_error_is_torchs_order() -> None:
    """The default tile's float32 error against float64 stays within 2x of torch's own float32 convolution's
    (oneDNN's direct kernel here), pass by pass, on a ResNet-layer1-like layer with post-relu inputs."""
    x, w, g = _data((16, 64, 8, 8), 64, (1, 1, 1, 1), seed=1)
    x = np.maximum(x, 0)
    want = _reference(x, w, g, (1, 1, 1, 1))
    tx, tw, tg = torch.tensor(x), torch.tensor(w), torch.tensor(g)
    theirs = (torch.nn.functional.conv2d(tx, tw, padding=1).numpy(),
              torch.nn.grad.conv2d_input(tx.shape, tw, tg, padding=1).numpy(),
              torch.nn.grad.conv2d_weight(tx, tw.shape, tg, padding=1).numpy())
    mine = (wg.fused_forward(x, w, (1,) * 4, 2), wg.fused_input_grad(g, w, (1,) * 4, 2),
            wg.fused_weight_grad(x, g, (1,) * 4, 2))
    for ours, torchs, exact in zip(mine, theirs, want):
        assert _relative(ours, exact) <= 2 * _relative(torchs, exact) + 1e-7


def test_the_rule(monkeypatch) -> None:
    f32, one, pad = np.float32, (1, 1), (1, 1, 1, 1)
    assert conv.fused_winograd_tile(np, (8, 64, 8, 8), (64, 64, 3, 3), one, pad, one, 1, f32) == 2
    assert conv.algorithm(np, (8, 64, 8, 8), (64, 64, 3, 3), one, pad, one, 1, f32) == "winograd F2 fused"
    assert conv.fused_winograd_tile(np, (8, 16, 14, 14), (64, 16, 3, 3), one, pad, one, 1, f32) == 0  # 16 channels
    assert conv.fused_winograd_tile(np, (8, 64, 8, 8), (64, 64, 3, 3), one, pad, one, 1, np.float64) == 0
    assert conv.fused_winograd_tile(np, (8, 64, 8, 8), (64, 64, 3, 3), (2, 2), pad, one, 1, f32) == 0
    assert conv.fused_winograd_tile(np, (8, 64, 8, 8), (64, 32, 3, 3), one, pad, one, 2, f32) == 0  # groups
    assert conv.fused_winograd_tile(np, (8, 64, 8, 8), (64, 64, 3, 3), one, (3, 3, 3, 3), one, 1, f32) == 0
    monkeypatch.setattr(_config, "CONV_ALGORITHM", "winograd4")
    assert conv.fused_winograd_tile(np, (8, 64, 8, 8), (64, 64, 3, 3), one, pad, one, 1, f32) == 4
    monkeypatch.setattr(_config, "CONV_ALGORITHM", "im2col")
    assert conv.fused_winograd_tile(np, (8, 64, 8, 8), (64, 64, 3, 3), one, pad, one, 1, f32) == 0


def _ember_all(x, w, g):
    ex, ew = ember.tensor(x, requires_grad=True), ember.tensor(w, requires_grad=True)
    b = ember.zeros(w.shape[0], requires_grad=True)
    ey = ember.nn.functional.conv2d(ex, ew, b, padding=1)
    ey.backward(ember.tensor(g))
    return ey.detach().numpy(), ex.grad.numpy(), ew.grad.numpy()


def test_through_conv2d_with_bias() -> None:
    x, w, g = _data((4, 32, 9, 9), 48, (1, 1, 1, 1), seed=2)
    for mine, want in zip(_ember_all(x, w, g), _reference(x, w, g, (1, 1, 1, 1))):
        assert _relative(mine, want) < 2e-6


@pytest.mark.parametrize("where", ["x", "w", "g"])
@pytest.mark.parametrize("value", [np.inf, -np.inf, np.nan])
def test_inf_nan_as_im2col(where, value, monkeypatch) -> None:
    """A Winograd tile mixes an inf into its neighbours' outputs: such inputs take the other paths, so the
    non-finite positions are those of ember's im2col path, the finite values torch's."""
    x, w, g = _data((2, 32, 8, 8), 32, (1, 1, 1, 1), seed=3)
    target = {"x": x, "w": w, "g": g}[where]
    target[(1, 3, 0, 2) if where == "w" else (1, 4, 2, 5)] = value
    mine = _ember_all(x, w, g)
    monkeypatch.setattr(_config, "CONV_ALGORITHM", "im2col")
    reference = _ember_all(x, w, g)
    for ours, theirs in zip(mine, reference):
        for test in (np.isnan, np.isposinf, np.isneginf):
            assert np.array_equal(test(ours), test(theirs))
        finite = np.isfinite(ours)
        np.testing.assert_allclose(ours[finite], theirs[finite], rtol=1e-4, atol=1e-4)


def test_thread_counts(monkeypatch) -> None:
    """Images are shared out over ember's threads: the forward and input gradient come out bit for bit the same,
    the weight gradient to rounding (per-thread sums added in image order)."""
    x, w, g = _data((6, 32, 8, 8), 32, (1, 1, 1, 1), seed=4)
    monkeypatch.setattr(wg, "_MIN_IMAGE_FLOPS", 1.0)
    results = {}
    for threads in (1, 2, 3):
        monkeypatch.setattr(_config, "CPU_THREADS", threads)
        results[threads] = (wg.fused_forward(x, w, (1,) * 4, 2), wg.fused_input_grad(g, w, (1,) * 4, 2),
                            wg.fused_weight_grad(x, g, (1,) * 4, 2))
    for threads in (2, 3):
        assert np.array_equal(results[threads][0], results[1][0])
        assert np.array_equal(results[threads][1], results[1][1])
        assert _relative(results[threads][2], results[1][2]) < 1e-5
