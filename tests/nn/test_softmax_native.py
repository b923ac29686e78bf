"""softmax / log_softmax along the last dim by the native row kernels (ember/backends/cpu_math_kernels.py) and
their one-op backward records: values and gradients against PyTorch in float64, special points (large, -inf, inf,
NaN, constant rows), non-contiguous inputs, other dims (the NumPy code), second derivatives, the vectorized exp
against NumPy's."""
from __future__ import annotations

import numpy as np
import pytest

import ember
from ember.backends import cpu_kernels, cpu_math_kernels
from ember.nn import functional as F
from ember.ops import nn_ops

torch = pytest.importorskip("torch")
numba = pytest.importorskip("numba")

PAIRS = [(F.softmax, torch.softmax), (F.log_softmax, torch.log_softmax)]


def _run(fn, x, g, dim):
    ex = ember.tensor(x, requires_grad=True)
    out = fn(ex, dim=dim)
    out.backward(ember.tensor(g))
    return out.detach().numpy(), ex.grad.numpy()


def _reference(tfn, x, g, dim):
    tx = torch.tensor(x.astype(np.float64), requires_grad=True)
    out = tfn(tx, dim)
    out.backward(torch.tensor(g.astype(np.float64)))
    return out.detach().numpy(), tx.grad.numpy()


@pytest.mark.parametrize("dtype,tol", [(np.float32, 3e-6), (np.float64, 1e-13)])
@pytest.mark.parametrize("pair", PAIRS, ids=["softmax", "log_softmax"])
@pytest.mark.parametrize("shape,dim", [((7, 300), -1), ((2, 3, 65), 2), ((5,), 0), ((4, 9, 6), 1)])
def test_vs_torch(monkeypatch, pair, dtype, tol, shape, dim):
    asked: list = []
    real = cpu_kernels.get
    monkeypatch.setattr(cpu_kernels, "get", lambda name: asked.append(name) or real(name))
    rng = np.random.default_rng(0)
    x = (rng.standard_normal(shape) * 6).astype(dtype)
    g = rng.standard_normal(shape).astype(dtype)
    out, grad = _run(pair[0], x, g, dim)
    want, want_grad = _reference(pair[1], x, g, dim)
    assert out.dtype == dtype and grad.dtype == dtype
    np.testing.assert_allclose(out, want, rtol=tol, atol=tol)
    np.testing.assert_allclose(grad, want_grad, rtol=tol, atol=tol * 10)
    last = dim in (-1, len(shape) - 1)
    assert any(name.startswith(("softmax_rows", "log_softmax_rows")) for name in asked) == last


@pytest.mark.parametrize("pair", PAIRS, ids=["softmax", "log_softmax"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_special_rows(pair, dtype):
    """Rows with huge spreads, -inf entries (masked), constants; NaN/inf rows as torch's float result."""
    big = 3e38 if dtype == np.float32 else 1e308
    rows = np.array([
        [0.0, 0.0, 0.0, 0.0], [1e4, -1e4, 0.0, 5.0], [-np.inf, 1.0, 2.0, -np.inf], [big, -big, 0.0, 1.0],
        [-80.0, -90.0, -100.0, -110.0], [700.0, 0.0, -700.0, 1.0], [1e-30, 0.0, -1e-30, 2e-30],
        [np.nan, 1.0, 2.0, 3.0], [np.inf, 1.0, 2.0, 3.0], [-np.inf] * 4,
    ], dtype=dtype)
    g = np.random.default_rng(1).standard_normal(rows.shape).astype(dtype)
    with np.errstate(all="ignore"):
        out, grad = _run(pair[0], rows, g, -1)
    tx = torch.tensor(rows, requires_grad=True)
    want = pair[1](tx, -1)
    want.backward(torch.tensor(g))
    np.testing.assert_allclose(out, want.detach().numpy(), rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(grad, tx.grad.numpy(), rtol=1e-5, atol=1e-5)


def test_non_contiguous_input():
    rng = np.random.default_rng(2)
    base = rng.standard_normal((40, 12)).astype(np.float32)
    for fn, tfn in PAIRS:
        ex = ember.tensor(base, requires_grad=True)
        out = fn(ex.t()[:, ::2], dim=-1)  # (12, 20), strided both ways
        g = rng.standard_normal(out.shape).astype(np.float32)
        out.backward(ember.tensor(g))
        tx = torch.tensor(base.astype(np.float64), requires_grad=True)
        want = tfn(tx.t()[:, ::2], -1)
        want.backward(torch.tensor(g.astype(np.float64)))
        np.testing.assert_allclose(out.detach().numpy(), want.detach().numpy(), rtol=3e-6, atol=3e-6)
        np.testing.assert_allclose(ex.grad.numpy(), tx.grad.numpy(), rtol=3e-6, atol=3e-6)


@pytest.mark.parametrize("fn", [F.softmax, F.log_softmax])
def test_second_derivatives_and_backward_records(fn):
    rng = np.random.default_rng(3)
    x = ember.tensor(rng.standard_normal((2, 3, 7)), requires_grad=True)
    assert ember.autograd.gradgradcheck(lambda x: fn(x, dim=-1), (x,))
    g = ember.tensor(rng.standard_normal((3, 7)), requires_grad=True)
    y = ember.tensor(np.abs(rng.standard_normal((3, 7))) / 7, requires_grad=True)
    record = nn_ops.SOFTMAX_BACKWARD if fn is F.softmax else nn_ops.LOG_SOFTMAX_BACKWARD
    assert ember.autograd.gradcheck(lambda g, y: ember.ops.dispatch.apply(record, (g, y), {"dim": 1}), (g, y))


def test_numpy_code_agrees_without_numba(monkeypatch):
    rng = np.random.default_rng(4)
    x = (rng.standard_normal((6, 50)) * 5).astype(np.float32)
    g = rng.standard_normal(x.shape).astype(np.float32)
    native = [_run(fn, x, g, -1) for fn, _ in PAIRS]
    monkeypatch.setattr(cpu_kernels, "_KERNELS", {})
    plain = [_run(fn, x, g, -1) for fn, _ in PAIRS]
    for a, b in zip(native, plain):
        for u, v in zip(a, b):
            np.testing.assert_allclose(u, v, rtol=2e-6, atol=2e-6)


def test_vectorized_exp_against_numpy():
    exp = cpu_math_kernels._exp64(numba, 13)
    exp7 = cpu_math_kernels._exp64(numba, 7)

    @numba.njit
    def run(v, out, out7):  # pragma: no cover - compiled
        for i in range(v.size):
            out[i] = exp(v[i])
            out7[i] = exp7(v[i])

    v = np.concatenate([np.linspace(-760, 720, 100001), [np.inf, -np.inf, np.nan, 0.0, -0.0, 709.78, 709.7828,
                                                           -745.13, -745.14, -708.4, 1e-300]])
    out, out7 = np.empty_like(v), np.empty_like(v)
    run(v, out, out7)
    with np.errstate(all="ignore"):
        want = np.exp(v)
    assert np.array_equal(np.isnan(out), np.isnan(want)) and np.array_equal(np.isinf(out), np.isinf(want))
    normal = np.isfinite(want) & (want > 2.3e-308)
    assert np.max(np.abs(out[normal] / want[normal] - 1)) < 5e-16
    assert np.max(np.abs(out7[normal] / want[normal] - 1)) < 1e-8  # float32 results: 1/6 of an ulp
    sub = np.isfinite(want) & (want <= 2.3e-308)
    np.testing.assert_allclose(out[sub], want[sub], rtol=0, atol=5e-324)
