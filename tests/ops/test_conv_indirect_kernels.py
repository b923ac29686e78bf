"""Indirect convolutions on the input's phases (ember/ops/conv_indirect.py on ember's AVX-512 micro-kernel): the
forward, input gradient and weight gradient against PyTorch in float64 (float32 accuracy) for strides 1-3, rectangular
strides and kernels, dilation with stride, asymmetric and cropping (negative) padding, channel counts that fill no
12 x 32 tile, sums longer than one block of the kernels (K > 256 rows, P > 256 pixels); the layers conv.py sends
there (asserted per case) through F.conv2d with every gradient; inf/NaN as the im2col path; the choice rule;
threads. Skipped where the kernels are not built (no numba, or a CPU without AVX-512F)."""
from __future__ import annotations

import numpy as np
import pytest

import ember
import ember.nn.functional as F
from ember import _config
from ember.ops import conv, conv_indirect

torch = pytest.importorskip("torch")

pytestmark = pytest.mark.skipif(not conv_indirect.available(np), reason="no native indirect-convolution kernels")

# (x shape, w shape, stride, padding (top, bottom, left, right), dilation)
CASES = [
    ((2, 3, 32, 32), (64, 3, 7, 7), (2, 2), (3, 3, 3, 3), (1, 1)),  # ResNet's stem
    ((2, 3, 11, 13), (16, 3, 7, 7), (2, 2), (3, 3, 3, 3), (1, 1)),  # odd sizes
    ((2, 1, 28, 28), (13, 1, 4, 4), (2, 2), (1, 1, 1, 1), (1, 1)),  # one input channel, 13 outputs
    ((2, 4, 17, 15), (33, 4, 3, 5), (2, 3), (0, 1, 2, 0), (2, 1)),  # rectangular stride, dilation, asymmetric
    ((2, 20, 12, 14), (30, 20, 4, 4), (2, 2), (1, 1, 1, 1), (1, 1)),  # K = 320 > one block of 256 rows
    ((1, 2, 70, 41), (5, 2, 3, 3), (3, 3), (1, 2, 0, 1), (1, 1)),  # stride 3
    ((2, 5, 12, 12), (19, 5, 3, 3), (1, 1), (1, 1, 1, 1), (1, 1)),  # stride 1 (the kernels allow it)
    ((1, 3, 50, 50), (8, 3, 3, 3), (1, 1), (1, 1, 1, 1), (1, 1)),  # P > 256: the weight sums in several blocks
    ((2, 3, 16, 16), (7, 3, 3, 3), (2, 2), (-1, 1, 1, -1), (1, 1)),  # negative padding crops (after _trim)
]


def _torch_reference(x, w, g, stride, padding, dilation):
    tx = torch.tensor(x, dtype=torch.float64, requires_grad=True)
    tw = torch.tensor(w, dtype=torch.float64, requires_grad=True)
    padded = torch.nn.functional.pad(tx, (padding[2], padding[3], padding[0], padding[1]))
    y = torch.nn.functional.conv2d(padded, tw, stride=stride, dilation=dilation)
    if g is None:
        return y.detach().numpy(), None
    y.backward(torch.tensor(g, dtype=torch.float64))
    return y.detach().numpy(), tw.grad.numpy()


def _close(actual: np.ndarray, expected: np.ndarray, tol: float = 2e-6) -> None:
    assert actual.shape == expected.shape
    scale = np.abs(expected).max()
    assert np.abs(actual - expected).max() <= tol * scale, np.abs(actual - expected).max() / scale


@pytest.mark.parametrize("xs, ws, stride, padding, dilation", CASES)
def test_indirect_kernels_match_torch(xs, ws, stride, padding, dilation) -> None:
    rng = np.random.default_rng(sum(xs) + sum(ws))
    x = rng.standard_normal(xs).astype(np.float32)
    w = rng.standard_normal(ws).astype(np.float32)
    y = conv_indirect.forward(np, x, w, stride, padding, dilation)
    y_ref, _ = _torch_reference(x, w, None, stride, padding, dilation)
    _close(y, y_ref)
    g = rng.standard_normal(y.shape).astype(np.float32)
    _, gw_ref = _torch_reference(x, w, g, stride, padding, dilation)
    _close(conv_indirect.weight_grad(np, x, g, ws, stride, padding, dilation), gw_ref)


CASES_NO_DILATION = [case[:4] for case in CASES if case[4] == (1, 1)] + [
    ((2, 5, 9, 9), (6, 5, 1, 1), (2, 2), (0, 0, 0, 0)),  # 1x1 stride 2: three phases get no gradient
    ((2, 5, 10, 9), (6, 5, 2, 2), (3, 3), (0, 0, 0, 0)),  # kernel smaller than the stride
]


@pytest.mark.parametrize("xs, ws, stride, padding", CASES_NO_DILATION)
def test_indirect_input_grad_matches_torch(xs, ws, stride, padding) -> None:
    """``input_grad``: each phase of the input a stride-1 indirect convolution of ``g`` (one phase at stride 1),
    phases no tap reads get zero."""
    rng = np.random.default_rng(sum(xs))
    x = rng.standard_normal(xs).astype(np.float32)
    w = rng.standard_normal(ws).astype(np.float32)
    tx = torch.tensor(x, dtype=torch.float64, requires_grad=True)
    padded = torch.nn.functional.pad(tx, (padding[2], padding[3], padding[0], padding[1]))
    ty = torch.nn.functional.conv2d(padded, torch.tensor(w, dtype=torch.float64), stride=stride)
    g = rng.standard_normal(tuple(ty.shape)).astype(np.float32)
    ty.backward(torch.tensor(g, dtype=torch.float64))
    _close(conv_indirect.input_grad(np, g, w, xs, stride, padding), tx.grad.numpy())


@pytest.mark.parametrize("xs, ws, stride, padding, passes", [
    ((3, 3, 32, 32), (64, 3, 7, 7), 2, 3, "fw"),  # ResNet's stem
    ((2, 6, 26, 30), (32, 6, 4, 4), 2, 1, "fw"),  # a DCGAN discriminator's first layer (few channels in)
    ((2, 6, 26, 30), (10, 6, 4, 4), 2, 1, ""),  # few output channels: the NumPy path's cliff (conv._indirect)
    ((2, 16, 40, 40), (32, 16, 3, 3), (3, 2), (0, 2), "fiw"),  # input gradient by phases
    ((2, 16, 40, 40), (16, 16, 3, 3), (3, 2), (0, 2), "fi"),  # 16 output channels: not the weight gradient
    ((2, 1, 32, 32), (16, 1, 3, 3), 2, 1, ""),  # one input channel, 3x3: 9-deep sums
    ((2, 64, 16, 16), (1, 64, 3, 3), 1, 1, ""),  # one output channel: the NumPy path's cliff (conv._indirect)
    ((2, 3, 20, 20), (32, 3, 3, 3), 1, 1, "fw"),  # stride 1, 3 input channels
    ((2, 1, 28, 28), (32, 1, 3, 3), 1, 1, "w"),  # MNIST's conv1: only the weight gradient
])
def test_conv2d_takes_the_indirect_path_and_matches_torch(xs, ws, stride, padding, passes) -> None:
    """Through F.conv2d (bias included): conv.py picks the indirect kernels for the passes named (``f``
    forward, ``i`` input gradient, ``w`` weight gradient), and the output and every gradient agree with torch."""
    st = (stride, stride) if isinstance(stride, int) else stride
    pd = (padding, padding) if isinstance(padding, int) else padding
    geo = (st, (pd[0], pd[0], pd[1], pd[1]), (1, 1), 1, np.float32)
    assert (conv.algorithm(np, xs, ws, *geo) == "indirect") == ("f" in passes)
    assert conv._indirect_input(np, xs, ws, *geo) == ("i" in passes)
    assert conv._indirect_weight(np, xs, ws, *geo) == ("w" in passes)
    rng = np.random.default_rng(1)
    x, w, b = (rng.standard_normal(s).astype(np.float32) for s in (xs, ws, ws[:1]))
    ex, ew, eb = (ember.tensor(a, requires_grad=True) for a in (x, w, b))
    tx, tw, tb = (torch.tensor(a, dtype=torch.float64, requires_grad=True) for a in (x, w, b))
    ey = F.conv2d(ex, ew, eb, stride=stride, padding=padding)
    ty = torch.nn.functional.conv2d(tx, tw, tb, stride=stride, padding=padding)
    g = rng.standard_normal(tuple(ty.shape)).astype(np.float32)
    ey.backward(ember.tensor(g))
    ty.backward(torch.tensor(g, dtype=torch.float64))
    for mine, theirs in ((ey.detach(), ty.detach()), (ex.grad, tx.grad), (ew.grad, tw.grad), (eb.grad, tb.grad)):
        _close(mine.numpy(), theirs.numpy())


def test_the_choice_rule(monkeypatch) -> None:
    f32 = np.float32
    stem = ((128, 3, 32, 32), (64, 3, 7, 7), (2, 2), (3,) * 4, (1, 1), 1)
    assert conv.algorithm(np, *stem, f32) == "indirect"
    assert conv.algorithm(np, (64, 64, 32, 32), (128, 64, 4, 4), (2, 2), (1,) * 4, (1, 1), 1, f32) == "indirect"
    # ResNet-18's stride-2 layers on 32x32 images (8x8 maps and less: measured slower there), stride 1,
    # float64 and groups keep their paths
    assert conv.algorithm(np, (128, 64, 8, 8), (128, 64, 3, 3), (2, 2), (1,) * 4, (1, 1), 1, f32) != "indirect"
    assert conv.algorithm(np, (64, 1, 28, 28), (32, 1, 3, 3), (1, 1), (1,) * 4, (1, 1), 1, f32) != "indirect"
    assert conv.algorithm(np, *stem, np.float64) != "indirect"
    assert conv.algorithm(np, (8, 4, 32, 32), (8, 2, 3, 3), (2, 2), (1,) * 4, (1, 1), 2, f32) != "indirect"
    monkeypatch.setattr(_config, "CONV_ALGORITHM", "im2col")
    assert conv.algorithm(np, *stem, f32) != "indirect"


def _conv_and_grads(x, w, g, stride):
    ex, ew = ember.tensor(x, requires_grad=True), ember.tensor(w, requires_grad=True)
    ey = F.conv2d(ex, ew, stride=stride, padding=1)
    ey.backward(ember.tensor(g))
    return [ey.detach().numpy(), ex.grad.numpy(), ew.grad.numpy()]


def _same_non_finite(mine, reference):
    assert np.array_equal(np.isnan(mine), np.isnan(reference))
    assert np.array_equal(np.isposinf(mine), np.isposinf(reference))
    assert np.array_equal(np.isneginf(mine), np.isneginf(reference))


@pytest.mark.parametrize("stride, xs, ws", [(2, (2, 16, 34, 36), (32, 16, 4, 4)),  # all three passes indirect
                                             (1, (2, 8, 13, 14), (32, 8, 3, 3))])  # forward, weight gradient
@pytest.mark.parametrize("where", ["x", "w", "g"])
@pytest.mark.parametrize("value", [np.inf, -np.inf, np.nan])
def test_inf_nan(where, value, stride, xs, ws, monkeypatch) -> None:
    """The columns past the output width are computed and dropped (they read the next row's phase values): an
    inf there must not leak. Non-finite positions equal those of ember's im2col path, finite values torch's;
    with inf/NaN in ``x`` all positions equal torch's too."""
    rng = np.random.default_rng(2)
    x, w = rng.standard_normal(xs).astype(np.float32), rng.standard_normal(ws).astype(np.float32)
    ys = torch.nn.functional.conv2d(torch.tensor(x), torch.tensor(w), stride=stride, padding=1).shape
    g = rng.standard_normal(tuple(ys)).astype(np.float32)
    target = {"x": x, "w": w, "g": g}[where]
    last = target.shape[3] - 1
    positions = {"x": [(0, 1, 4, 0), (1, 2, 7, last)], "w": [(3, 1, 0, 2), (1, 2, 2, 2)],
                 "g": [(0, 3, 2, last), (1, 0, 5, 0)]}[where]
    for position in positions:
        target[position] = value  # x: first and last columns (read by the dropped columns of other rows)
    geo = ((stride, stride), (1,) * 4, (1, 1), 1, np.float32)
    assert conv.algorithm(np, xs, ws, *geo) == "indirect" and conv._indirect_weight(np, xs, ws, *geo)
    assert conv._indirect_input(np, xs, ws, *geo) == (stride == 2)
    mine = _conv_and_grads(x, w, g, stride)
    monkeypatch.setattr(_config, "CONV_ALGORITHM", "im2col")
    reference = _conv_and_grads(x, w, g, stride)
    tx, tw = torch.tensor(x, requires_grad=True), torch.tensor(w, requires_grad=True)
    ty = torch.nn.functional.conv2d(tx, tw, stride=stride, padding=1)
    ty.backward(torch.tensor(g))
    for result, ours, theirs in zip(mine, reference, (ty.detach().numpy(), tx.grad.numpy(), tw.grad.numpy())):
        _same_non_finite(result, ours)
        if where == "x":
            _same_non_finite(result, theirs)
        finite = np.isfinite(theirs) & np.isfinite(result)
        assert np.allclose(result[finite], theirs[finite], rtol=1e-4, atol=1e-4)


def test_thread_counts_give_the_same_values(monkeypatch) -> None:
    """Images are split over ember's threads: the forward does not depend on the split, the weight gradient
    only through the order its per-thread sums are added (float32 rounding)."""
    rng = np.random.default_rng(3)
    x = rng.standard_normal((6, 3, 32, 32)).astype(np.float32)
    w = rng.standard_normal((64, 3, 7, 7)).astype(np.float32)
    g = rng.standard_normal((6, 64, 16, 16)).astype(np.float32)
    results = {}
    for threads in (1, 2, 3):
        monkeypatch.setattr(_config, "CPU_THREADS", threads)
        monkeypatch.setattr(conv_indirect, "MIN_FLOPS_PER_THREAD", 1.0)
        results[threads] = (conv_indirect.forward(np, x, w, (2, 2), (3,) * 4, (1, 1)),
                            conv_indirect.weight_grad(np, x, g, w.shape, (2, 2), (3,) * 4, (1, 1)))
    for threads in (2, 3):
        assert np.array_equal(results[threads][0], results[1][0])
        _close(results[threads][1], results[1][1], 1e-6)


@pytest.mark.parametrize("output_padding", [0, 1])
def test_conv_transpose2d_runs_indirect_and_matches_torch(output_padding) -> None:
    """A GAN generator's upsampling layer: ``conv_transpose2d``'s forward is the input gradient by phases, its
    input gradient the strided forward and its weight gradient the indirect one; all agree with torch."""
    xs, ws = (2, 32, 17, 18), (32, 16, 4, 4)
    out_shape = (2, 16, 34 + output_padding, 36 + output_padding)
    geo = ((2, 2), (1,) * 4, (1, 1), 1, np.float32)
    if output_padding == 0:  # the conv whose input gradient this is: (2, 16, 34, 36) -> (2, 32, 17, 18)
        assert conv._indirect_input(np, out_shape, (32, 16, 4, 4), *geo)
    rng = np.random.default_rng(4)
    x, w, b = (rng.standard_normal(s).astype(np.float32) for s in (xs, ws, (16,)))
    ex, ew, eb = (ember.tensor(a, requires_grad=True) for a in (x, w, b))
    tx, tw, tb = (torch.tensor(a, dtype=torch.float64, requires_grad=True) for a in (x, w, b))
    ey = F.conv_transpose2d(ex, ew, eb, stride=2, padding=1, output_padding=output_padding)
    ty = torch.nn.functional.conv_transpose2d(tx, tw, tb, stride=2, padding=1, output_padding=output_padding)
    assert tuple(ey.shape) == out_shape
    g = rng.standard_normal(out_shape).astype(np.float32)
    ey.backward(ember.tensor(g))
    ty.backward(torch.tensor(g, dtype=torch.float64))
    for mine, theirs in ((ey.detach(), ty.detach()), (ex.grad, tx.grad), (ew.grad, tw.grad), (eb.grad, tb.grad)):
        _close(mine.numpy(), theirs.numpy())
