"""trust21: one case per class of silent difference found by the seventh wave (grad2, a sweep at new seeds).

Each compares ember with torch 2.13 on the CPU (or, where torch itself is wrong, with float64 finite
differences). Reproduce a fuzz case with ``python tests/trust/trust_fuzz_cli.py grad2 --seed N``.
"""
from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import ember  # noqa: E402


def _second(L, f, x_np: np.ndarray) -> tuple:
    """f(x), its gradient and the gradient of sum(g * g) / 2 + sum(g * c), all with create_graph."""
    x = L.tensor(x_np, dtype=L.float64, requires_grad=True)
    y = f(L, x)
    w = L.tensor(1 + 0.25 * (np.arange(y.numel()).reshape(tuple(y.shape)) % 7), dtype=L.float64)
    g, = L.autograd.grad((y * w).sum(), x, create_graph=True)
    c = L.tensor(np.cos(np.arange(x.numel(), dtype=np.float64)).reshape(tuple(x.shape)))
    g2, = L.autograd.grad((g * g).sum() * 0.5 + (g * c).sum(), x, create_graph=True)
    return tuple(t.detach().numpy() for t in (y, g, g2))


def _agree(f, x_np: np.ndarray) -> None:
    for got, want in zip(_second(ember, f, x_np), _second(torch, f, x_np)):
        np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)


KINK_POINTS = np.array([[0.0, -0.0, 1.0, -1.0], [0.5, -2.0, 0.0, 3.0]])


@pytest.mark.parametrize("f", [
    lambda L, x: L.nn.functional.elu(x),
    lambda L, x: L.nn.functional.elu(x, alpha=0.5),
    lambda L, x: L.nn.functional.celu(x, 0.5),
    lambda L, x: L.nn.functional.selu(x),
], ids=["elu", "elu_alpha", "celu", "selu"])
def test_elu_family_curvature_at_zero_is_torchs(f) -> None:
    """torch's elu_double_backward masks x < 0 while elu_backward takes x <= 0: slope alpha, curvature 0 at 0
    (ember gave alpha * exp(0))."""
    _agree(f, KINK_POINTS)


@pytest.mark.parametrize("f", [
    lambda L, x: L.nn.functional.smooth_l1_loss(x ** 2, x.flip(0) * 0.3),
    lambda L, x: L.nn.functional.smooth_l1_loss(x, x.detach().flip(1), beta=0.5, reduction="none"),
    lambda L, x: L.nn.functional.huber_loss(x ** 2, x.flip(0) * 0.3),
    lambda L, x: L.nn.functional.huber_loss(x, x.detach().flip(1), delta=2.0, reduction="none"),
], ids=["smooth_l1", "smooth_l1_beta", "huber", "huber_delta"])
def test_smooth_l1_huber_second_derivative_at_zero_difference(f) -> None:
    """The quadratic side squared |d|: abs's zero slope at d == 0 made the curvature 0 there (torch: 1 / beta)."""
    x = np.array([[0.0, 1.0, 0.7, 0.0], [0.0, 0.25, 0.7, 3.0]])
    _agree(f, x)


@pytest.mark.parametrize("f", [
    lambda L, x: L.logaddexp(x, x.flip(0)),
    lambda L, x: L.logaddexp2(x, x.flip(0) * 1.0),
    lambda L, x: L.logaddexp(x, x * 1.0),
], ids=["logaddexp", "logaddexp2", "logaddexp_self"])
def test_logaddexp_curvature_at_ties(f) -> None:
    """max + log1p(exp(-|a - b|)) has cancelling kinks at a == b: the second derivative there was 0."""
    x = np.array([[0.0, 1.0, 0.25, 0.5], [0.0, 1.0, 0.25, 0.5], [-3.0, 2.0, 0.25, 9.0]])
    _agree(f, x)


def test_logaddexp_values_at_special_points() -> None:
    v = [0.0, -0.0, 1.0, -50.0, 700.0, float("inf"), -float("inf"), float("nan")]
    a, b = np.meshgrid(v, v)
    for dtype in ("float32", "float64"):
        got = ember.logaddexp(ember.tensor(a, dtype=getattr(ember, dtype)), ember.tensor(b, dtype=getattr(ember, dtype)))
        want = torch.logaddexp(torch.tensor(a, dtype=getattr(torch, dtype)), torch.tensor(b, dtype=getattr(torch, dtype)))
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-6 if dtype == "float32" else 1e-15)


@pytest.mark.parametrize("size,out", [(5, 7), (5, 3), (7, 4), (10, 4), (9, 9)])
def test_adaptive_avg_pool_keeps_inf_and_nan_in_their_windows(size: int, out: int) -> None:
    """An averaging matrix with 0 weights made 0 * inf = NaN in every window of the row; torch sums each window."""
    x = np.linspace(-2, 3, 2 * size).reshape(1, 2, size)
    x[0, 0, 1], x[0, 1, size - 1], x[0, 1, 2] = -np.inf, np.inf, np.nan
    for fn in ("adaptive_avg_pool1d", "interpolate"):
        got_t, want_t = (ember.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True))
        call = (lambda L, t: getattr(L.nn.functional, fn)(t, out)) if fn != "interpolate" else (
            lambda L, t: L.nn.functional.interpolate(t, size=out, mode="area"))
        got, want = call(ember, got_t), call(torch, want_t)
        np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=1e-12)
        weight = np.arange(out * 2.0).reshape(1, 2, out)
        (got.nan_to_num(0.0, 0.0, 0.0) * ember.tensor(weight)).sum().backward()
        (want.nan_to_num(0.0, 0.0, 0.0) * torch.tensor(weight)).sum().backward()
        np.testing.assert_allclose(got_t.grad.numpy(), want_t.grad.numpy(), rtol=1e-12)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32"])
def test_adaptive_avg_pool2d_uneven_windows_round_once(dtype: str) -> None:
    x = np.random.default_rng(1).standard_normal((2, 3, 7, 9)) * 100
    got = ember.nn.functional.adaptive_avg_pool2d(ember.tensor(x, dtype=ember.float32).to(getattr(ember, dtype)), (3, 4))
    want = torch.nn.functional.adaptive_avg_pool2d(torch.tensor(x, dtype=torch.float32).to(getattr(torch, dtype)), (3, 4))
    assert got.dtype == getattr(ember, dtype)
    # float32: the two separable passes round twice where torch's window sum rounds once (within 2 ulps)
    np.testing.assert_allclose(got.float().numpy(), want.float().numpy(), rtol=0 if dtype != "float32" else 1e-6,
                               atol=0 if dtype != "float32" else 3e-7 * float(np.abs(want.float().numpy()).max()))


def test_any_all_of_uint8_into_a_bool_out() -> None:
    for L in (ember, torch):
        x = L.tensor([[0, 3], [0, 0]], dtype=L.uint8)
        o = L.empty(0, dtype=L.bool)
        assert L.any(x, 0, out=o) is o and o.tolist() == [False, True]
        assert L.all(x, 1, out=o).tolist() == [False, False] and o.dtype == L.bool
        assert L.any(x, out=o).item() is True


def test_erfinv_keeps_the_sign_of_zero() -> None:
    v = [-0.0, 0.0, -0.5, 0.5, -1.0, 1.0]
    for dtype in ("float16", "bfloat16", "float32", "float64"):
        got = ember.erfinv(ember.tensor(v).to(getattr(ember, dtype))).float().numpy()
        want = torch.erfinv(torch.tensor(v).to(getattr(torch, dtype))).float().numpy()
        np.testing.assert_array_equal(np.signbit(got), np.signbit(want))
        np.testing.assert_allclose(got, want, rtol=1e-6)


def test_layer_norm_third_derivative_matches_finite_differences() -> None:
    """torch's native layer_norm/batch_norm double backward is wrong at the third order (its own composite agrees
    with ember); ember's is checked against float64 central differences of the second derivative."""
    x0 = np.random.default_rng(3).standard_normal((3, 4))
    c = np.cos(x0)
    w = 1 + 0.25 * (np.arange(12).reshape(3, 4) % 7)

    def h2(x_np: np.ndarray) -> tuple:
        x = ember.tensor(x_np, requires_grad=True)
        y = ember.nn.functional.layer_norm(x, (4,))
        g, = ember.autograd.grad((y * ember.tensor(w)).sum(), x, create_graph=True)
        g2, = ember.autograd.grad((g * ember.tensor(c)).sum(), x, create_graph=True)
        return (g2 * ember.tensor(c)).sum(), x

    total, x = h2(x0)
    h3, = ember.autograd.grad(total, x)
    eps = 1e-6
    for j in range(4):
        d = np.zeros_like(x0)
        d[0, j] = eps
        fd = (h2(x0 + d)[0].item() - h2(x0 - d)[0].item()) / (2 * eps)
        assert abs(h3.numpy()[0, j] - fd) < 1e-6 * max(1.0, abs(fd))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("exponent", [3, -2, 3.0, -2.0, 2, -1])  # 0.5: torch's MKL sqrt (README)
def test_pow_by_small_integers_is_torchs_bit_for_bit(dtype: str, exponent: float) -> None:
    """torch spells x ** 3 as x * x * x and x ** -2 as 1 / (x * x); NumPy's power rounds once (31% of float32
    values differed in the last bit). Function, operator, in-place and augmented forms."""
    rng = np.random.default_rng(0)
    x = np.concatenate([rng.uniform(-8, 8, 3000), [0.0, -0.0, np.inf, -np.inf, np.nan, 1e-30, 3e38, 1e-200, 1e200]])
    e, t = ember.tensor(x, dtype=getattr(ember, dtype)), torch.tensor(x, dtype=getattr(torch, dtype))
    forms = [lambda L, v: L.pow(v, exponent), lambda L, v: v ** exponent, lambda L, v: v.clone().pow_(exponent)]
    for form in forms:
        np.testing.assert_array_equal(form(ember, e).numpy(), form(torch, t).numpy())
    a, b = e.clone(), t.clone()
    a **= exponent
    b **= exponent
    np.testing.assert_array_equal(a.numpy(), b.numpy())


def test_nansum_nanmean_gradients_multiply_by_the_mask() -> None:
    """torch's nansum backward is g * ~isnan(x): nanmean of an all-NaN row (count 0, g / 0 = inf) gives NaN
    gradients there; a where() gave 0 (found by the reduce_edge sweep, seed 300170)."""
    n = float("nan")
    for rows in ([[n, n, n], [1.0, n, 2.0]], [[1.0, 2.0, 3.0], [n, 5.0, n]]):
        for f in (lambda L, t: L.nanmean(t), lambda L, t: L.nanmean(t, 1), lambda L, t: L.nansum(t, 0).exp()):
            grads = []
            for L in (ember, torch):
                x = L.tensor(rows, dtype=L.float64, requires_grad=True)
                y = f(L, x)
                (y * L.arange(1.0, y.numel() + 1, dtype=L.float64).reshape(y.shape)).sum().backward()
                grads.append(x.grad.numpy())
            np.testing.assert_allclose(grads[0], grads[1], rtol=1e-14)
