"""One-input-channel 3x3 convolutions (MNIST's conv1) on ``conv3x3_shallow_forward`` and ``conv3x3_shallow_weight``
(ember/ops/conv_direct.py, ember/backends/cpu_conv_kernels.py): the forward (bias in the kernel or none) and the
weight gradient against PyTorch in float64 (float32 accuracy), the layers conv.py sends there, the same NaNs as the
im2col path at inf/NaN inputs, weights and output gradients, and the forward's bits on one thread or two. Skipped
without numba."""
from __future__ import annotations

import numpy as np
import pytest

from ember import _config
from ember.backends import cpu_kernels
from ember.ops import conv

torch = pytest.importorskip("torch")

pytestmark = pytest.mark.skipif(cpu_kernels.get("conv3x3_shallow_forward") is None, reason="needs numba")

# (x shape, output channels, padding (top, bottom, left, right), bias)
CASES = [
    ((5, 1, 28, 28), 32, (1, 1, 1, 1), True),  # MNIST's conv1
    ((3, 1, 7, 5), 5, (0, 0, 0, 0), False),  # no padding, odd sizes
    ((2, 1, 9, 11), 17, (2, 2, 2, 2), True),  # padding 2: border outputs see only padding on a side
    ((2, 1, 6, 13), 3, (0, 2, 1, 0), True),  # asymmetric padding
    ((1, 1, 3, 4), 2, (0, 0, 0, 0), False),  # a single output row
]


def _forward(x, w, b, padding):
    args = (x, w) if b is None else (x, w, b)
    return conv._conv_impl(np, *args, stride=(1, 1), padding=padding, dilation=(1, 1), groups=1)


def _torch(x, w, b, padding):
    tx = torch.nn.functional.pad(torch.tensor(x, dtype=torch.float64), (padding[2], padding[3], padding[0], padding[1]))
    tb = None if b is None else torch.tensor(b, dtype=torch.float64)
    return torch.nn.functional.conv2d(tx, torch.tensor(w, dtype=torch.float64), tb).numpy()


@pytest.mark.parametrize("x_shape,o,padding,bias", CASES)
def test_forward_matches_torch_float64(x_shape, o, padding, bias):
    assert conv.algorithm(np, x_shape, (o, 1, 3, 3), (1, 1), padding, (1, 1), 1, np.float32) == "shallow 3x3"
    rng = np.random.default_rng(sum(x_shape) + o)
    x = rng.standard_normal(x_shape).astype(np.float32)
    w = rng.standard_normal((o, 1, 3, 3)).astype(np.float32)
    b = rng.standard_normal(o).astype(np.float32) if bias else None
    ours, ref = _forward(x, w, b, padding), _torch(x, w, b, padding)
    assert ours.dtype == np.float32 and ours.shape == ref.shape
    # float32 rounding of nine products and a bias: a few units of 6e-8 of the largest output
    assert np.abs(ours - ref).max() <= 4e-7 * np.abs(ref).max()


@pytest.mark.parametrize("x_shape,o,padding,bias", CASES)
def test_weight_grad_matches_torch_float64(x_shape, o, padding, bias):
    rng = np.random.default_rng(sum(x_shape) + 2 * o)
    x = rng.standard_normal(x_shape).astype(np.float32)
    w_shape = (o, 1, 3, 3)
    oh, ow = x_shape[2] + padding[0] + padding[1] - 2, x_shape[3] + padding[2] + padding[3] - 2
    g = rng.standard_normal((x_shape[0], o, oh, ow)).astype(np.float32)
    ours = conv._weight_grad_impl(np, x, g, w_shape, (1, 1), padding, (1, 1), 1)
    tx = torch.nn.functional.pad(torch.tensor(x, dtype=torch.float64), (padding[2], padding[3], padding[0], padding[1]))
    ref = torch.nn.grad.conv2d_weight(tx, w_shape, torch.tensor(g, dtype=torch.float64)).numpy()
    assert ours.dtype == np.float32 and ours.shape == w_shape
    assert np.abs(ours - ref).max() <= 1e-6 * np.abs(ref).max()


@pytest.mark.parametrize("special", [np.inf, np.nan])
@pytest.mark.parametrize("where", ["x", "g"])
def test_weight_grad_non_finite_as_im2col(special, where, monkeypatch):
    """An inf/NaN in x takes the im2col path (the kernel's zero columns would meet it); in g the kernel's sums
    make the NaNs and infs the columns' do."""
    rng = np.random.default_rng(11)
    x = rng.standard_normal((2, 1, 6, 7)).astype(np.float32)
    g = rng.standard_normal((2, 3, 6, 7)).astype(np.float32)
    (x if where == "x" else g)[1, 0, 2, 6] = special
    ours = conv._weight_grad_impl(np, x, g, (3, 1, 3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 1)
    monkeypatch.setattr(_config, "CONV_ALGORITHM", "im2col")
    plain = conv._weight_grad_impl(np, x, g, (3, 1, 3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 1)
    assert np.array_equal(np.isnan(ours), np.isnan(plain)) and np.array_equal(np.isinf(ours), np.isinf(plain))
    finite = np.isfinite(plain)
    assert np.allclose(ours[finite], plain[finite], rtol=1e-5, atol=1e-5)


def test_the_rule(monkeypatch):
    shape, w = (64, 1, 28, 28), (32, 1, 3, 3)
    assert conv.algorithm(np, shape, w, (1, 1), (1, 1, 1, 1), (1, 1), 1, np.float32) == "shallow 3x3"
    for other in [((64, 2, 28, 28), (32, 2, 3, 3), (1, 1), (1, 1)),  # two input channels
                  ((64, 1, 28, 28), (32, 1, 5, 5), (1, 1), (1, 1)),  # 5x5
                  ((64, 1, 28, 28), w, (2, 2), (1, 1)),  # stride 2
                  ((64, 1, 28, 28), w, (1, 1), (2, 2))]:  # dilation
        assert conv.algorithm(np, other[0], other[1], other[2], (1, 1, 1, 1), other[3], 1, np.float32) != "shallow 3x3"
    assert conv.algorithm(np, shape, w, (1, 1), (1, 1, 1, 1), (1, 1), 1, np.float64) != "shallow 3x3"
    monkeypatch.setattr(_config, "CONV_ALGORITHM", "im2col")  # programs that must match torch's im2col sums
    assert conv.algorithm(np, shape, w, (1, 1), (1, 1, 1, 1), (1, 1), 1, np.float32) != "shallow 3x3"


@pytest.mark.parametrize("special", [np.inf, -np.inf, np.nan])
@pytest.mark.parametrize("where", ["x", "w"])
def test_non_finite_as_im2col(special, where, monkeypatch):
    """Padding is multiplied, as im2col's columns are: an inf weight makes NaN where its tap reads padding."""
    rng = np.random.default_rng(7)
    x = rng.standard_normal((2, 1, 6, 7)).astype(np.float32)
    w = rng.standard_normal((4, 1, 3, 3)).astype(np.float32)
    b = rng.standard_normal(4).astype(np.float32)
    (x if where == "x" else w)[0, 0, 0, 1] = special
    ours = _forward(x, w, b, (1, 1, 1, 1))
    monkeypatch.setattr(_config, "CONV_ALGORITHM", "im2col")
    plain = _forward(x, w, b, (1, 1, 1, 1))
    assert np.array_equal(np.isnan(ours), np.isnan(plain)) and np.array_equal(np.isinf(ours), np.isinf(plain))
    finite = np.isfinite(plain)
    assert np.allclose(ours[finite], plain[finite], rtol=1e-5, atol=1e-5)


def test_threads_give_the_same_bits(monkeypatch):
    rng = np.random.default_rng(3)
    x = rng.standard_normal((64, 1, 28, 28)).astype(np.float32)
    w, b = rng.standard_normal((32, 1, 3, 3)).astype(np.float32), rng.standard_normal(32).astype(np.float32)
    monkeypatch.setattr(_config, "CPU_THREADS", 1)
    one = _forward(x, w, b, (1, 1, 1, 1))
    monkeypatch.setattr(_config, "CPU_THREADS", 2)
    assert np.array_equal(one, _forward(x, w, b, (1, 1, 1, 1)))


def test_shallow_halves_on_the_hot_worker_match_the_pool(monkeypatch) -> None:
    """MNIST conv1's forward and weight gradient in halves on the hot worker (woken if asleep): the bits of ember's
    pool on two threads (the same image cut, the same two float64 totals), and torch's values within rounding."""
    from ember.backends import cpu_hot_worker, cpu_threads  # noqa: PLC0415 - this test's own
    from ember.ops import conv_direct  # noqa: PLC0415
    if conv_direct.native_kernel(np, "hot_shallow") is None or not cpu_hot_worker.available():
        pytest.skip("no numba kernels or hot worker here")
    monkeypatch.setattr(_config, "CPU_THREADS", 2)
    monkeypatch.setattr(cpu_threads, "_POOL", None)
    rng = np.random.default_rng(20)
    x = rng.standard_normal((64, 1, 28, 28)).astype(np.float32)
    w = rng.standard_normal((32, 1, 3, 3)).astype(np.float32)
    b = rng.standard_normal(32).astype(np.float32)
    g = rng.standard_normal((64, 32, 28, 28)).astype(np.float32)
    splits = []
    real = cpu_hot_worker.split_call_into
    monkeypatch.setattr(conv_direct.cpu_hot_worker, "split_call_into", lambda *a, **k: splits.append(real(*a, **k))
                        or splits[-1])
    results = {}
    for hot in (True, False):
        monkeypatch.setattr(_config, "HOT_WORKER", hot)
        results[hot] = (conv_direct.shallow_forward(x, w, b, (1, 1, 1, 1)),
                        conv_direct.shallow_weight_grad(x, g, (32, 1, 3, 3), (1, 1, 1, 1)))
    assert splits and all(splits)
    for new, old in zip(results[True], results[False]):
        np.testing.assert_array_equal(new, old)
    want = torch.nn.functional.conv2d(torch.tensor(x), torch.tensor(w), torch.tensor(b), padding=1).numpy()
    np.testing.assert_allclose(results[True][0], want, rtol=1e-5, atol=1e-5)
