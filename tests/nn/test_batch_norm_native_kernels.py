"""The native training batch norm kernels (ember/backends/cpu_norm_kernels.py) against PyTorch in float64,
against ember's NumPy path, at special values, and split over threads (bitwise the same as on one)."""
from __future__ import annotations

import numpy as np
import pytest

from ember import _config
from ember.backends import cpu_kernels
from ember.ops import normalization as nm

torch = pytest.importorskip("torch")

pytestmark = pytest.mark.skipif(cpu_kernels.get("batch_norm_train") is None, reason="needs numba")

# (2, 3, 40, 15): rows of 600 values, summed as runs of 256, 256 and 88 (cpu_norm_kernels._BN_RUN)
SHAPES = [(128, 64, 8, 8), (128, 512, 1, 1), (3, 5, 7), (4, 3), (2, 6, 3, 3), (3, 4, 1, 1), (2, 3, 40, 15)]


def _torch_reference(x, w, b, g, eps):
    tx, tw, tb = (torch.tensor(a, dtype=torch.float64, requires_grad=True) for a in (x, w, b))
    y = torch.nn.functional.batch_norm(tx, None, None, tw, tb, training=True, eps=eps)
    y.backward(torch.tensor(g, dtype=torch.float64))
    return y.detach().numpy(), tx.grad.numpy(), tw.grad.numpy(), tb.grad.numpy()


def _ember(x, w, b, g, eps):
    y, mean, var = nm._train_impl(np, x, w, b, eps=eps, has_weight=True)
    gx, gw, gb = nm._backward_impl(np, g, x, mean, var, w, eps=eps)
    return y, gx, gw, gb, mean, var


def _relative(a, ref):
    return float(np.abs(a - ref).max() / (np.abs(ref).max() + 1e-300))


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_matches_torch_float64(shape, dtype):
    rng = np.random.default_rng(sum(shape))
    # a mean far from zero against the spread: the centered formulas must keep their precision
    x = (rng.standard_normal(shape) * 0.5 + 20.0).astype(dtype)
    g = rng.standard_normal(shape).astype(dtype)
    w, b = rng.standard_normal(shape[1]).astype(dtype), rng.standard_normal(shape[1]).astype(dtype)
    ours = _ember(x, w, b, g, 1e-5)
    reference = _torch_reference(x, w, b, g, 1e-5)
    bound = 1e-5 if dtype == np.float32 else 1e-12  # float32: the saved mean (20) rounds by ~1e-6 of the spread (0.5)
    for name, a, ref in zip(("y", "gx", "gw", "gb"), ours, reference):
        assert a.dtype == dtype
        assert _relative(a, ref) < bound, (name, _relative(a, ref))
    assert np.allclose(ours[4], x.mean(axis=tuple(i for i in range(x.ndim) if i != 1)), rtol=1e-6)


def test_agrees_with_the_numpy_path(monkeypatch):
    rng = np.random.default_rng(1)
    x = rng.standard_normal((16, 32, 6, 6)).astype(np.float32)
    g = rng.standard_normal(x.shape).astype(np.float32)
    w, b = rng.standard_normal(32).astype(np.float32), rng.standard_normal(32).astype(np.float32)
    native = _ember(x, w, b, g, 1e-3)
    monkeypatch.setattr(_config, "CPU_KERNELS", "numpy")
    cpu_kernels.reset()
    try:
        plain = _ember(x, w, b, g, 1e-3)
    finally:
        monkeypatch.undo()
        cpu_kernels.reset()
    for a, ref in zip(native, plain):
        np.testing.assert_allclose(a, ref, rtol=2e-5, atol=2e-6)


def test_threads_give_the_same_bits(monkeypatch):
    """Channels are independent: a channel's result does not depend on which thread ran it."""
    rng = np.random.default_rng(2)
    x = rng.standard_normal((64, 64, 16, 16)).astype(np.float32)  # 1M elements: the split runs
    g = rng.standard_normal(x.shape).astype(np.float32)
    w, b = np.ones(64, np.float32), np.zeros(64, np.float32)
    monkeypatch.setattr(_config, "CPU_THREADS", 1)
    one = _ember(x, w, b, g, 1e-5)
    monkeypatch.setattr(_config, "CPU_THREADS", 2)
    two = _ember(x, w, b, g, 1e-5)
    for a, c in zip(one, two):
        assert np.array_equal(a, c)


@pytest.mark.parametrize("special", [np.nan, np.inf, -np.inf])
def test_non_finite_values_poison_their_channel_as_in_torch(special):
    rng = np.random.default_rng(3)
    x = rng.standard_normal((4, 3, 2, 2))
    x[1, 1, 0, 1] = special
    g = rng.standard_normal(x.shape)
    w, b = np.ones(3), np.zeros(3)
    ours = _ember(x, w, b, g, 1e-5)
    reference = _torch_reference(x, w, b, g, 1e-5)
    for name, a, ref in zip(("y", "gx", "gw", "gb"), ours, reference):
        np.testing.assert_allclose(a, ref, rtol=1e-10, atol=1e-12, equal_nan=True, err_msg=name)
    assert np.isnan(ours[0][:, 1]).all() and np.isfinite(ours[0][:, [0, 2]]).all()


def test_zero_gradient_and_constant_channel():
    """A constant channel (variance 0: invstd = 1/sqrt(eps)) and an all-zero gradient, as torch."""
    x = np.ones((5, 2, 3, 3))
    x[:, 1] = np.arange(45, dtype=np.float64).reshape(5, 3, 3)
    g = np.zeros_like(x)
    g[:, 1] = 1.0
    w, b = np.array([2.0, -1.0]), np.array([0.5, 0.25])
    ours = _ember(x, w, b, g, 1e-5)
    reference = _torch_reference(x, w, b, g, 1e-5)
    for a, ref in zip(ours, reference):
        np.testing.assert_allclose(a, ref, rtol=1e-9, atol=1e-12)


def test_non_contiguous_input_takes_the_numpy_path():
    rng = np.random.default_rng(4)
    base = rng.standard_normal((8, 6, 5, 5)).astype(np.float32)
    x = base[:, ::2]  # strided channels: the kernels want C-contiguous data
    g = rng.standard_normal(x.shape).astype(np.float32)
    w, b = np.ones(3, np.float32), np.zeros(3, np.float32)
    ours = _ember(x, w, b, g, 1e-5)
    reference = _torch_reference(x, w, b, g, 1e-5)
    for a, ref in zip(ours, reference):
        assert _relative(a, ref) < 2e-6
