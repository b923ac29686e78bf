"""Tensor.cauchy_/log_normal_/geometric_: PyTorch's parameters, checks and distributions (statistics on 200k
draws against the distributions' own quantiles and moments), dtypes and the stand-in CUDA device."""
import math

import numpy as np
import pytest

import ember


def test_cauchy_quantiles() -> None:
    ember.manual_seed(0)
    x = ember.empty(200_000, dtype=ember.float64).cauchy_(1.0, 2.0).numpy()
    q25, q50, q75 = np.percentile(x, [25, 50, 75])
    assert abs(q50 - 1.0) < 0.03 and abs(q75 - 3.0) < 0.05 and abs(q25 + 1.0) < 0.05  # median +- sigma


def test_log_normal_moments_of_the_log() -> None:
    ember.manual_seed(1)
    y = ember.empty(200_000, dtype=ember.float64).log_normal_(0.5, 0.3).numpy()
    assert (y > 0).all()
    assert abs(np.log(y).mean() - 0.5) < 0.005 and abs(np.log(y).std() - 0.3) < 0.005
    assert abs(np.log(ember.empty(200_000).log_normal_().numpy()).mean() - 1.0) < 0.03  # PyTorch's defaults 1, 2


@pytest.mark.parametrize("dtype", [ember.int64, ember.float32])
def test_geometric_support_and_mean(dtype) -> None:
    ember.manual_seed(2)
    g = ember.empty(200_000, dtype=dtype).geometric_(0.3).numpy()
    assert g.min() == 1 and np.all(g == np.round(g))
    assert abs(g.mean() - 1 / 0.3) < 0.03
    assert abs((g == 1).mean() - 0.3) < 0.005 and abs((g == 2).mean() - 0.21) < 0.005


@pytest.mark.parametrize("call, message", [
    (lambda: ember.empty(3).cauchy_(0, 0), r"cauchy_ expects sigma > 0.0"),
    (lambda: ember.empty(3).log_normal_(0, -1), r"log_normal_ expects std > 0.0"),
    (lambda: ember.empty(3).geometric_(1.0), r"geometric_ expects p to be in \(0, 1\)"),
    (lambda: ember.empty(3).geometric_(0), r"geometric_ expects p to be in \(0, 1\)"),
    (lambda: ember.empty(3, dtype=ember.int64).cauchy_(), "floating point"),
    (lambda: ember.empty(3, dtype=ember.bool).geometric_(0.5), "not implemented for ember.bool"),
])
def test_bad_parameters_and_dtypes_are_refused(call, message: str) -> None:
    with pytest.raises(RuntimeError, match=message):
        call()


def test_generator_reproduces_and_half_precision_fills() -> None:
    a = ember.empty(5).cauchy_(generator=ember.Generator().manual_seed(3))
    b = ember.empty(5).cauchy_(generator=ember.Generator().manual_seed(3))
    assert ember.equal(a, b)
    h = ember.empty(1000, dtype=ember.float16).log_normal_(0.0, 0.5)
    assert h.dtype == ember.float16 and bool(ember.isfinite(h).all())
    assert math.isclose(float(h.float().log().mean()), 0.0, abs_tol=0.06)


def test_fills_on_the_standin_cuda_device() -> None:
    from ember.testing import standin_cuda

    with standin_cuda():
        for fill in (lambda t: t.cauchy_(), lambda t: t.log_normal_(), lambda t: t.geometric_(0.2)):
            t = fill(ember.empty(64, device="cuda"))
            assert t.device.type == "cuda" and bool(ember.isfinite(t.cpu()).all())
