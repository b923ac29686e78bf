"""softmax / log_softmax and their backwards by blocks of rows in cache (ember/ops/softmax_blocks.py), the path
without numba's row kernels for big last-dim inputs: values and gradients against PyTorch (rows of
random spreads and special rows: huge spreads, -inf masks, constants, +inf, NaN), the same bits on one thread and
two, and the blocks really taken through the ops."""
from __future__ import annotations

import numpy as np
import pytest

import ember
from ember import _config
from ember.backends import cpu_kernels
from ember.nn import functional as F
from ember.ops import softmax_blocks

torch = pytest.importorskip("torch")

PAIRS = [(F.softmax, torch.softmax), (F.log_softmax, torch.log_softmax)]


def _inputs(dtype, shape=(300, 260)):
    rng = np.random.default_rng(0)
    x = (rng.standard_normal(shape) * rng.uniform(0.1, 20, (shape[0], 1))).astype(dtype)
    big = 3e38 if dtype == np.float32 else 1e308
    x[3, :] = 0.0  # constant
    x[4, ::2], x[4, 1::2] = 1e4, -1e4  # huge spread
    x[5, :] = -np.inf  # masked, but two entries
    x[5, 7], x[5, 100] = 1.0, 2.0
    x[6, 3], x[6, 9] = big, -big
    x[7, 11] = np.inf
    x[8, 12] = np.nan
    x[9, :] = -np.inf  # all masked: NaN, as torch
    g = rng.standard_normal(shape).astype(dtype)
    return x, g


@pytest.fixture
def numpy_only(monkeypatch):
    monkeypatch.setattr(_config, "CPU_KERNELS", "numpy")
    cpu_kernels.reset()
    yield
    cpu_kernels.reset()


@pytest.mark.parametrize("dtype,tol", [(np.float32, 3e-6), (np.float64, 1e-13)])
@pytest.mark.parametrize("pair", PAIRS, ids=["softmax", "log_softmax"])
def test_blocks_vs_torch(numpy_only, monkeypatch, pair, dtype, tol):
    taken: list = []
    for name in ("softmax", "log_softmax", "softmax_backward", "log_softmax_backward"):
        real = getattr(softmax_blocks, name)
        monkeypatch.setattr(softmax_blocks, name, lambda *a, real=real, name=name, **k: taken.append(name) or real(*a, **k))
    x, g = _inputs(dtype)
    ex = ember.tensor(x, requires_grad=True)
    out = pair[0](ex, dim=-1)
    out.backward(ember.tensor(g))
    tx = torch.tensor(x, requires_grad=True)  # torch in the same dtype: its overflows (3e38 - -3e38) are ours
    want = pair[1](tx, -1)
    want.backward(torch.tensor(g))
    assert len(taken) == 2 and out.dtype == ex.grad.dtype == getattr(ember, np.dtype(dtype).name)
    got, got_grad = out.detach().numpy(), ex.grad.numpy()
    want, want_grad = want.detach().numpy(), tx.grad.numpy()
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_array_equal(np.isnan(got_grad), np.isnan(want_grad))
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol)
    finite = np.isfinite(want_grad)
    np.testing.assert_allclose(got_grad[finite], want_grad[finite], rtol=tol, atol=tol * 10)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_threads_give_the_same_bits(dtype):
    x, g = _inputs(dtype, (1100, 256))
    x = np.where(np.isfinite(x), x, 0).astype(dtype)
    y, ly = softmax_blocks.softmax(x, threads=1), softmax_blocks.log_softmax(x, threads=1)
    for fn, args in ((softmax_blocks.softmax, (x,)), (softmax_blocks.log_softmax, (x,)),
                     (softmax_blocks.softmax_backward, (g, y)), (softmax_blocks.log_softmax_backward, (g, ly))):
        assert np.array_equal(fn(*args, threads=1), fn(*args, threads=2))


def test_takes_only_big_contiguous_last_dim_floats():
    x = np.zeros((512, 256), np.float32)
    assert softmax_blocks.takes(x, -1) and softmax_blocks.takes(x, 1, x)
    assert not softmax_blocks.takes(x, 0)
    assert not softmax_blocks.takes(x.T.copy().T, -1)  # not C-contiguous
    assert not softmax_blocks.takes(x[:100], -1)  # small: the whole-array formulas
    assert not softmax_blocks.takes(x.astype(np.float16), -1)
    assert not softmax_blocks.takes(x, -1, x.astype(np.float64))
