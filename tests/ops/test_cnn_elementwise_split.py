"""relu, relu's backward and 2x2 max pooling (forward and backward) split over ember's threads:
the same results as one thread, as NumPy, and as torch, with NaN and inf where a chunk sees them."""
from __future__ import annotations

import numpy as np
import pytest

import ember
from ember import _config
from ember.backends import cpu_threads
from ember.ops import elementwise, pooling

torch = pytest.importorskip("torch")


@pytest.fixture
def three_threads(monkeypatch):
    monkeypatch.setattr(_config, "CPU_THREADS", 3)
    monkeypatch.setattr(cpu_threads, "_POOL", None)
    monkeypatch.setattr(elementwise, "_SPLIT_ELEMENTS", 1000)
    monkeypatch.setattr(pooling, "_SPLIT_ELEMENTS", 200)
    calls = []
    real = cpu_threads.parallel_for

    def counting(fn, total, min_chunk=1):
        calls.append(min(cpu_threads.num_threads(), total // max(1, min_chunk)))
        return real(fn, total, min_chunk)

    monkeypatch.setattr(elementwise, "parallel_for", counting)
    monkeypatch.setattr(pooling, "parallel_for", counting)
    yield calls
    if cpu_threads._POOL is not None:
        cpu_threads._POOL.shutdown()


def _special(shape, seed):
    x = np.random.default_rng(seed).standard_normal(shape).astype(np.float32)
    flat = x.reshape(-1)
    flat[[0, 7, -1, -5]] = [np.nan, np.inf, -np.inf, 0.0]  # first and last chunk see them
    flat[len(flat) // 2] = -0.0
    return x


def test_relu_forward_backward_split(three_threads) -> None:
    x = _special((4, 3, 20, 20), 0)
    g = np.random.default_rng(1).standard_normal(x.shape).astype(np.float32)
    ex = ember.tensor(x, requires_grad=True)
    ey = ember.relu(ex)
    ey.backward(ember.tensor(g))
    tx = torch.tensor(x, requires_grad=True)
    ty = torch.relu(tx)
    ty.backward(torch.tensor(g))
    np.testing.assert_array_equal(ey.detach().numpy(), ty.detach().numpy())  # NaN in the same places
    np.testing.assert_array_equal(ex.grad.numpy(), tx.grad.numpy())
    np.testing.assert_array_equal(ey.detach().numpy(), np.maximum(x, 0))
    assert max(three_threads) == 3, "relu was not split"


def test_relu_grad_passes_nan_outputs_through() -> None:
    """PyTorch's threshold_backward: 0 where the output is <= 0, else the incoming gradient (NaN too)."""
    out = np.array([np.nan, 0.0, -0.0, 1.0, np.inf], dtype=np.float32)
    g = np.array([2.0, 3.0, 4.0, 5.0, 6.0], dtype=np.float32)
    want = torch.ops.aten.threshold_backward(torch.tensor(g), torch.tensor(out), 0.0).numpy()
    np.testing.assert_array_equal(elementwise.relu_grad(ember.tensor(g), ember.tensor(out)).numpy(), want)


@pytest.mark.parametrize("nan", [False, True])
def test_max_pool_2x2_split(three_threads, nan) -> None:
    x = np.random.default_rng(2).standard_normal((5, 3, 8, 10)).astype(np.float32)
    x[:, :, 0, 0] = x[:, :, 0, 1]  # ties: the first maximum wins, as in PyTorch
    if nan:
        x[4, 1, 3, 3] = np.nan  # only the last thread's images
        x[4, 2, 6, 6] = x[4, 2, 7, 6] = np.nan  # two NaNs in a window: the last one wins, as in PyTorch
    g = np.random.default_rng(3).standard_normal((5, 3, 4, 5)).astype(np.float32)
    ex = ember.tensor(x, requires_grad=True)
    ey = ember.nn.functional.max_pool2d(ex, 2)
    ey.backward(ember.tensor(g))
    tx = torch.tensor(x, requires_grad=True)
    ty = torch.nn.functional.max_pool2d(tx, 2)
    ty.backward(torch.tensor(g))
    np.testing.assert_array_equal(ey.detach().numpy(), ty.detach().numpy())
    np.testing.assert_array_equal(ex.grad.numpy(), tx.grad.numpy())
    if pooling.native_kernel(np, "max_pool2d_2x2") is not None:  # only the native kernels are split
        assert max(three_threads) >= 2, "max pooling was not split"
