"""Tiny matrix products (``linalg.is_tiny``: below both ember's GEMM's and OpenBLAS's own thresholds) go straight
to ``xp.matmul``: no kernel look-up, no BLAS-thread context; the values are NumPy's and torch's, and a product
above the bound still asks (ember/ops/linalg.py)."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import ember
from ember.backends import cpu_blas, cpu_gemm_choice, cpu_mkl
from ember.ops import linalg
from ember.testing import standin_cuda


def _refuse(*args, **kwargs):
    raise AssertionError("a tiny product asked for the GEMM choice or the BLAS thread context")


@pytest.fixture
def no_questions(monkeypatch):
    monkeypatch.setattr(linalg, "native_kernel", _refuse)
    monkeypatch.setattr(cpu_blas, "small_gemm", _refuse)


def test_bound() -> None:
    assert linalg.is_tiny(4, 4, 4) and linalg.is_tiny(64, 64, 64)
    assert not linalg.is_tiny(64, 65, 64)  # 266,240 > OpenBLAS's one-thread limit (262,144)
    assert cpu_blas.OPENBLAS_ONE_THREAD_MACS < cpu_gemm_choice.MIN_MACS


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_tiny_products_skip_the_questions_and_match_torch(no_questions, dtype) -> None:
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((5, 7)).astype(dtype), rng.standard_normal((7, 3)).astype(dtype)
    w, bias = rng.standard_normal((4, 7)).astype(dtype), rng.standard_normal(4).astype(dtype)
    ea, eb, ew, ebias = (ember.tensor(x, requires_grad=True) for x in (a, b, w, bias))
    ta, tb, tw, tbias = (torch.tensor(x, requires_grad=True) for x in (a, b, w, bias))
    got = (ea @ eb).sum() + ember.nn.functional.linear(ea, ew, ebias).square().sum()
    want = (ta @ tb).sum() + torch.nn.functional.linear(ta, tw, tbias).square().sum()
    got.backward()  # the backward's products (matmul_t, linear's array rules) are tiny too
    want.backward()
    tol = dict(rtol=1e-5, atol=1e-5) if dtype == np.float32 else dict(rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(got.item(), want.item(), **tol)
    for e, t in ((ea, ta), (eb, tb), (ew, tw), (ebias, tbias)):
        np.testing.assert_allclose(e.grad.numpy(), t.grad.numpy(), **tol)
    assert np.array_equal((ea @ eb).detach().numpy(), a @ b)  # NumPy's product, bit for bit


def test_special_values_pass_through(no_questions) -> None:
    a = np.array([[0.0, -0.0, np.inf], [np.nan, 1e30, -1e30]], np.float32)
    b = np.array([[1.0, 0.0], [2.0, -1.0], [0.5, 0.0]], np.float32)
    with np.errstate(invalid="ignore"):  # inf * 0 is NaN, as in torch
        got = (ember.tensor(a) @ ember.tensor(b)).numpy()
    want = (torch.tensor(a) @ torch.tensor(b)).numpy()
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_allclose(got[~np.isnan(got)], want[~np.isnan(want)], rtol=1e-6)


def test_larger_products_still_ask(monkeypatch) -> None:
    asked: list[tuple] = []
    real = cpu_blas.small_gemm

    def spy(xp, a, b):
        asked.append(a.shape + b.shape)
        return real(xp, a, b)

    monkeypatch.setattr(cpu_blas, "small_gemm", spy)
    a, b = np.ones((64, 70), np.float32), np.ones((70, 64), np.float32)
    cpu_mkl.use("openblas")  # the thread context is OpenBLAS's (MKL's products, cpu_mkl, need none)
    try:
        got = (ember.tensor(a) @ ember.tensor(b)).numpy()
    finally:
        cpu_mkl.use(None)
    assert asked == [(64, 70, 70, 64)]
    assert np.array_equal(got, a @ b)


def test_tiny_product_on_the_standin_device() -> None:
    with standin_cuda():
        a = ember.ones((3, 4), device="cuda")
        b = ember.full((4, 2), 2.0, device="cuda")
        out = a @ b
        assert out.device.type == "cuda"
        assert np.array_equal(out.cpu().numpy(), np.full((3, 2), 8.0, np.float32))
