"""Direct stride-1 convolutions (ember/ops/conv_direct.py on ember's AVX-512 micro-kernel): forward, input
gradient and weight gradient against PyTorch in float64 (float32 accuracy), the layers conv.py sends there
(asserted per case), odd sizes, asymmetric and large padding, dilation, non-square kernels, channel counts
that fill no tile exactly; inf/NaN as torch; the choice rule. Skipped where the kernels are not built
(no numba, or a CPU without AVX-512F)."""
from __future__ import annotations

import numpy as np
import pytest

import ember
import ember.nn.functional as F
from ember import _config
from ember.ops import conv_winograd
from ember.ops import conv, conv_direct, conv_indirect

torch = pytest.importorskip("torch")

pytestmark = pytest.mark.skipif(not conv_direct.available(np), reason="no native direct-convolution kernels")

# (x shape, w shape, padding (top, bottom, left, right), dilation)
CASES = [
    ((3, 32, 14, 14), (64, 32, 3, 3), (1, 1, 1, 1), (1, 1)),  # MNIST's conv2
    ((2, 17, 11, 13), (19, 17, 3, 3), (1, 1, 1, 1), (1, 1)),  # channels filling no 12 x 32 tile
    ((2, 16, 9, 12), (33, 16, 2, 3), (0, 1, 2, 0), (1, 1)),  # asymmetric padding, 2x3 kernel
    ((2, 20, 10, 14), (16, 20, 3, 3), (2, 2, 2, 2), (2, 1)),  # dilation
    ((2, 16, 12, 12), (16, 16, 5, 5), (2, 2, 2, 2), (1, 1)),  # 5x5
    ((2, 16, 12, 14), (24, 16, 3, 3), (0, 0, 0, 0), (1, 1)),  # no padding
    ((1, 16, 10, 15), (16, 16, 3, 3), (3, 0, 4, 1), (1, 1)),  # padding beyond k - 1 on some sides
]


def _torch_reference(x: np.ndarray, w: np.ndarray, g: np.ndarray, padding: tuple, dilation: tuple) -> tuple:
    tx = torch.tensor(x, dtype=torch.float64, requires_grad=True)
    tw = torch.tensor(w, dtype=torch.float64, requires_grad=True)
    padded = torch.nn.functional.pad(tx, (padding[2], padding[3], padding[0], padding[1]))
    y = torch.nn.functional.conv2d(padded, tw, dilation=dilation)
    y.backward(torch.tensor(g, dtype=torch.float64))
    return y.detach().numpy(), tx.grad.numpy(), tw.grad.numpy()


def _close(actual: np.ndarray, expected: np.ndarray, tol: float = 2e-6) -> None:
    assert actual.shape == expected.shape
    scale = np.abs(expected).max()
    assert np.abs(actual - expected).max() <= tol * scale, np.abs(actual - expected).max() / scale


@pytest.mark.parametrize("xs, ws, padding, dilation", CASES)
def test_direct_kernels_match_torch(xs: tuple, ws: tuple, padding: tuple, dilation: tuple) -> None:
    rng = np.random.default_rng(sum(xs) + sum(ws))
    x = rng.standard_normal(xs).astype(np.float32)
    w = rng.standard_normal(ws).astype(np.float32)
    y = conv_direct.forward(np, x, w, padding, dilation)
    g = rng.standard_normal(y.shape).astype(np.float32)
    y_ref, gx_ref, gw_ref = _torch_reference(x, w, g, padding, dilation)
    _close(y, y_ref)
    _close(conv_direct.input_grad(np, g, w, xs, padding, dilation), gx_ref)
    # the weight gradient of these layers runs indirect (conv_indirect at stride 1)
    _close(conv_indirect.weight_grad(np, x, g, ws, (1, 1), padding, dilation), gw_ref)


@pytest.mark.parametrize("xs, ws, padding", [((3, 16, 14, 14), (64, 16, 3, 3), 1), ((2, 16, 11, 13), (20, 16, 3, 3), 2),
                                             ((2, 24, 12, 10), (16, 24, 1, 3), (0, 1))])
def test_conv2d_takes_the_direct_path_and_matches_torch(xs: tuple, ws: tuple, padding) -> None:
    """Through F.conv2d (bias included): conv.py runs the input gradient ``direct`` (the forward ``indirect`` where
    the output rows are 12+ wide, conv15) and every gradient agrees with torch."""
    pad = (padding, padding) if isinstance(padding, int) else padding
    padding4 = (pad[0], pad[0], pad[1], pad[1])
    assert conv.algorithm(np, xs, ws, (1, 1), padding4, (1, 1), 1, np.float32) in ("direct", "indirect")
    assert conv._direct(np, conv._padded_shape(xs, padding4), ws, (1, 1), (1, 1), 1, np.float32)
    rng = np.random.default_rng(1)
    x, w, b = (rng.standard_normal(s).astype(np.float32) for s in (xs, ws, ws[:1]))
    ex, ew, eb = (ember.tensor(a, requires_grad=True) for a in (x, w, b))
    tx, tw, tb = (torch.tensor(a, dtype=torch.float64, requires_grad=True) for a in (x, w, b))
    ey = F.conv2d(ex, ew, eb, padding=padding)
    ty = torch.nn.functional.conv2d(tx, tw, tb, padding=padding)
    g = rng.standard_normal(tuple(ty.shape)).astype(np.float32)
    ey.backward(ember.tensor(g))
    ty.backward(torch.tensor(g, dtype=torch.float64))
    _close(ey.detach().numpy(), ty.detach().numpy())
    _close(ex.grad.numpy(), tx.grad.numpy())
    _close(eb.grad.numpy(), tb.grad.numpy())
    _close(ew.grad.numpy(), tw.grad.numpy(), 2e-5)  # the weight gradient runs Winograd F(4x4) below 32 outputs


def test_the_choice_rule() -> None:
    f32 = np.float32
    assert conv.algorithm(np, (64, 16, 10, 10), (64, 16, 3, 3), (1, 1), (1,) * 4, (1, 1), 1, f32) == "direct"
    # output rows of 12+ run the indirect forward (faster: conv15), the direct input gradient
    assert conv.algorithm(np, (64, 16, 14, 14), (64, 16, 3, 3), (1, 1), (1,) * 4, (1, 1), 1, f32) == "indirect"
    # 3x3 layers with 32+ channels each way run the fused Winograd kernels (MNIST's conv2: conv15)
    if conv_winograd.fused_available(np):
        choice = conv.algorithm(np, (64, 32, 14, 14), (64, 32, 3, 3), (1, 1), (1,) * 4, (1, 1), 1, f32)
        assert choice == "winograd F2 fused"
    # ResNet's 8x8 and smaller maps keep Winograd (measured faster there); strides, groups, float64, few
    # channels and 1x1 kernels keep their paths
    assert conv.algorithm(np, (128, 64, 8, 8), (64, 64, 3, 3), (1, 1), (1,) * 4, (1, 1), 1, f32).startswith("winograd")
    assert conv.algorithm(np, (64, 32, 14, 14), (64, 32, 3, 3), (2, 2), (1,) * 4, (1, 1), 1, f32) != "direct"
    assert conv.algorithm(np, (64, 32, 14, 14), (64, 16, 3, 3), (1, 1), (1,) * 4, (1, 1), 2, f32) != "direct"
    assert conv.algorithm(np, (64, 32, 14, 14), (64, 32, 3, 3), (1, 1), (1,) * 4, (1, 1), 1, np.float64) != "direct"
    assert conv.algorithm(np, (64, 1, 28, 28), (32, 1, 3, 3), (1, 1), (1,) * 4, (1, 1), 1, f32) != "direct"
    assert conv.algorithm(np, (64, 32, 14, 14), (64, 32, 1, 1), (1, 1), (0,) * 4, (1, 1), 1, f32) != "direct"


def test_im2col_setting_turns_it_off(monkeypatch) -> None:
    monkeypatch.setattr(_config, "CONV_ALGORITHM", "im2col")
    assert conv.algorithm(np, (64, 32, 14, 14), (64, 32, 3, 3), (1, 1), (1,) * 4, (1, 1), 1, np.float32) != "direct"


def _conv_and_grads(x: np.ndarray, w: np.ndarray, g: np.ndarray) -> list:
    ex, ew = ember.tensor(x, requires_grad=True), ember.tensor(w, requires_grad=True)
    ey = F.conv2d(ex, ew, padding=1)
    ey.backward(ember.tensor(g))
    return [ey.detach().numpy(), ex.grad.numpy(), ew.grad.numpy()]


def _same_non_finite(mine: np.ndarray, reference: np.ndarray) -> None:
    assert np.array_equal(np.isnan(mine), np.isnan(reference))
    assert np.array_equal(np.isposinf(mine), np.isposinf(reference))
    assert np.array_equal(np.isneginf(mine), np.isneginf(reference))


@pytest.mark.parametrize("where", ["x", "w", "g"])
@pytest.mark.parametrize("value", [np.inf, -np.inf, np.nan])
def test_inf_nan(where: str, value: float, monkeypatch) -> None:
    """The columns past the output width are computed and dropped; an inf there must not leak into the
    results. Non-finite positions equal those of ember's im2col path (which this work does not change),
    finite values torch's; with inf/NaN in ``x`` all positions equal torch's too. (Where a weight is inf,
    ember's im2col and direct paths multiply it by the padding's zeros (NaN), as torch's own im2col-based
    CPU paths do, while oneDNN's direct kernel skips the padding; likewise an inf in ``g`` meets the zero
    columns of the padding in the weight gradient.)"""
    rng = np.random.default_rng(2)
    x, w = rng.standard_normal((2, 16, 10, 12)).astype(np.float32), rng.standard_normal((16, 16, 3, 3)).astype(np.float32)
    g = rng.standard_normal((2, 16, 10, 12)).astype(np.float32)
    target = {"x": x, "w": w, "g": g}[where]
    for position in ([(3, 5, 0, 2), (7, 2, 1, 1)] if where == "w" else [(0, 0, 0, 11), (1, 3, 5, 6)]):
        target[position] = value  # x, g: one on the last column (next to the dropped ones), one inside
    assert conv._direct(np, conv._padded_shape(x.shape, (1,) * 4), w.shape, (1, 1), (1, 1), 1, np.float32)
    mine = _conv_and_grads(x, w, g)
    monkeypatch.setattr(_config, "CONV_ALGORITHM", "im2col")
    reference = _conv_and_grads(x, w, g)
    tx, tw = torch.tensor(x, requires_grad=True), torch.tensor(w, requires_grad=True)
    ty = torch.nn.functional.conv2d(tx, tw, padding=1)
    ty.backward(torch.tensor(g))
    for result, ours, theirs in zip(mine, reference, (ty.detach().numpy(), tx.grad.numpy(), tw.grad.numpy())):
        _same_non_finite(result, ours)
        if where == "x":
            _same_non_finite(result, theirs)
        finite = np.isfinite(theirs) & np.isfinite(result)
        assert np.allclose(result[finite], theirs[finite], rtol=1e-4, atol=1e-4)


def test_thread_counts_give_the_same_values(monkeypatch) -> None:
    """Images are split over ember's threads; the forward and input gradient do not depend on the split,
    the weight gradient only through the order its per-thread sums are added (float32 rounding)."""
    rng = np.random.default_rng(3)
    x = rng.standard_normal((6, 32, 14, 14)).astype(np.float32)
    w = rng.standard_normal((64, 32, 3, 3)).astype(np.float32)
    g = rng.standard_normal((6, 64, 14, 14)).astype(np.float32)
    results = {}
    for threads in (1, 2, 3):
        monkeypatch.setattr(_config, "CPU_THREADS", threads)
        monkeypatch.setattr(conv_direct, "MIN_FLOPS_PER_THREAD", 1.0)
        monkeypatch.setattr(conv_indirect, "MIN_FLOPS_PER_THREAD", 1.0)
        results[threads] = (conv_direct.forward(np, x, w, (1,) * 4, (1, 1)),
                            conv_direct.input_grad(np, g, w, x.shape, (1,) * 4, (1, 1)),
                            conv_indirect.weight_grad(np, x, g, w.shape, (1, 1), (1,) * 4, (1, 1)))
    for threads in (2, 3):
        assert np.array_equal(results[threads][0], results[1][0])
        assert np.array_equal(results[threads][1], results[1][1])
        _close(results[threads][2], results[1][2], 1e-6)
