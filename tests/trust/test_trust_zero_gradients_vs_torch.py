"""Ops whose derivative is zero (or a simple scale) where ember's results were detached: the result requires grad
and backward gives torch's gradient (zeros, +0 not -0; frexp's mantissa g / exp2(exponent) with torch's float32 exp2, so 0 for float64 beyond
2**128 and inf below 2**-149; nextafter g and 0; fill's
tensor value the sum of g). Special points: -0, subnormals, +-inf, NaN inputs, and inf/NaN upstream gradients.
"""
from __future__ import annotations

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")

X = [1.5, -2.5, -0.0, 0.0, 4.0, 5e-324, -1e308, 1e-300, float("inf"), float("-inf"), float("nan"), 3.0, -7.0]
Y = [0.7, 2.0, 1e-40, -1.0, 3.0, -0.5, 1.0, 2.0, 1.0, -3.0, 1.0, float("inf"), float("-inf")]
UPSTREAM = [1.0, 0.0, -2.0, -1.0, 3.0, float("inf"), -0.5, float("nan"), 1.0, -1.0, 2.0, -3.0, 0.25]

CASES = {
    "div_floor": lambda L, x, y: L.div(x, y, rounding_mode="floor"),
    "div_trunc": lambda L, x, y: L.div(x, y, rounding_mode="trunc"),
    "frexp_mantissa": lambda L, x, y: L.frexp(x)[0],
    "x_times_mantissa": lambda L, x, y: x * L.frexp(x).mantissa,
    "nextafter": lambda L, x, y: L.nextafter(x, y),
    "fill_number": lambda L, x, y: L.fill(x, 2.5),
    "fill_tensor": lambda L, x, y: L.fill(x, y[1]),
    "norm_p0": lambda L, x, y: L.norm(x, p=0) * x,
    "vector_norm_0": lambda L, x, y: L.linalg.vector_norm(y, 0) * x,
    "sign": lambda L, x, y: L.sign(x),
    "floor": lambda L, x, y: L.floor(x),
    "ceil": lambda L, x, y: L.ceil(x),
    "round": lambda L, x, y: L.round(x),
    "trunc": lambda L, x, y: L.trunc(x),
}


def _grads(lib, case, dtype):
    x = lib.tensor(X, dtype=getattr(lib, dtype), requires_grad=True)
    y = lib.tensor(Y, dtype=getattr(lib, dtype), requires_grad=True)
    out = CASES[case](lib, x, y)
    assert out.requires_grad, case
    g = lib.tensor(UPSTREAM, dtype=out.dtype)
    out.backward(g if out.ndim else g.sum())
    return [None if t.grad is None else t.grad.detach().numpy() for t in (x, y)], out.detach().numpy()


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_zero_and_scaled_gradients_equal_torch(case, dtype):
    (gx_t, gy_t), v_t = _grads(torch, case, dtype)
    (gx_e, gy_e), v_e = _grads(ember, case, dtype)
    keep = ~np.isnan(np.array(X)) if case == "sign" else slice(None)  # sign(nan): NaN, a documented decision
    np.testing.assert_array_equal(v_e[keep], v_t[keep], err_msg=f"{case} values")
    for name, ge, gt in (("x", gx_e, gx_t), ("y", gy_e, gy_t)):
        if gt is None:  # torch's None and a zero gradient are the same gradient
            assert ge is None or not np.any(ge), f"{case}: d/d{name} {ge}, torch None"
            continue
        assert ge is not None, f"{case}: d/d{name} missing (torch {gt})"
        np.testing.assert_array_equal(ge, gt, err_msg=f"{case}: d/d{name}")
        assert np.array_equal(np.signbit(ge[~np.isnan(gt)]), np.signbit(gt[~np.isnan(gt)])), \
            f"{case}: d/d{name} signs of zero {ge} vs {gt}"


def test_floor_divide_gradient_is_zeros_where_torch_has_none():
    """Decision: ``x // y`` passes zeros back (torch's floor_divide raises 'derivative ... not implemented';
    its ``div(rounding_mode='floor')``, the same function, gives zeros): the result requires grad in both."""
    x = ember.tensor([3.5, -2.0], requires_grad=True)
    out = x // 2
    assert out.requires_grad and torch.floor_divide(torch.tensor([3.5], requires_grad=True), 2).requires_grad
    (out * x).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), np.float32([1.0, -1.0]))  # only the product's term


def test_no_grad_results_stay_plain():
    x = ember.tensor([1.5, -2.5], requires_grad=True)
    with ember.no_grad():
        assert not ember.frexp(x)[0].requires_grad and not ember.nextafter(x, x).requires_grad
    assert ember.frexp(x.detach())[0].grad_fn is None
