"""float16/bfloat16 ops compute in float32 and round once, as PyTorch's CPU kernels (ember/ops/opmath.py).

Each case runs the same call in torch 2.13 and ember on the same half-precision inputs (random values plus
0, -0, +-inf, NaN, large and tiny numbers) and asserts the results are equal bit for bit, with the same
dtype. Before, ember rounded after every NumPy step of an op (sigmoid, silu, rsqrt, mish...), turned a
Python scalar into a half number first (``x * 1.001`` was ``x * 1.0`` in bfloat16), ran float16 GEMMs and
einsums with float16 accumulation, and rms_norm refused bfloat16 (NumPy's finfo does not know it).
"""
from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")

HALF = ("float16", "bfloat16")


def _inputs(seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    a = (rng.standard_normal((4, 6, 16)) * 2).astype(np.float32)
    special = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 3e4, -3e4, 1e-6, -1e-6, 0.5, -0.5, 1.0, -1.0,
                        20.0, -20.0, 100.0], np.float32)
    a[0, 0, :] = special
    return {"a": a, "b": (rng.standard_normal((16, 12)) * 0.5).astype(np.float32),
            "w": (rng.standard_normal((12, 16)) * 0.5).astype(np.float32),
            "v": (rng.standard_normal(16)).astype(np.float32)}


# name -> f(lib, a, b, w, v); a is (4, 6, 16) with special values in a[0, 0], b (16, 12), w (12, 16), v (16,)
CASES = {
    # one record whose impl takes several NumPy steps
    "sigmoid": lambda t, a, b, w, v: t.sigmoid(a),
    "sigmoid_": lambda t, a, b, w, v: a.clone().sigmoid_(),
    "silu": lambda t, a, b, w, v: t.nn.functional.silu(a),
    "mish": lambda t, a, b, w, v: t.nn.functional.mish(a),
    "logsigmoid": lambda t, a, b, w, v: t.nn.functional.logsigmoid(a),
    "rsqrt": lambda t, a, b, w, v: t.rsqrt(a.abs()),
    "tanh": lambda t, a, b, w, v: t.tanh(a),
    "exp": lambda t, a, b, w, v: t.exp(a),
    "exp_": lambda t, a, b, w, v: a.clone().exp_(),
    "log1p": lambda t, a, b, w, v: t.log1p(a.abs()),
    "expm1": lambda t, a, b, w, v: t.expm1(a),
    "reciprocal": lambda t, a, b, w, v: t.reciprocal(a),
    "sqrt": lambda t, a, b, w, v: t.sqrt(a.abs()),
    "square": lambda t, a, b, w, v: t.square(a),
    "clamp": lambda t, a, b, w, v: t.clamp(a, -0.3333, 0.7777),
    "leaky_relu": lambda t, a, b, w, v: t.nn.functional.leaky_relu(a, 0.013),
    # Python scalars take part as float32 numbers, not rounded to the half dtype first
    "mul_scalar": lambda t, a, b, w, v: a * 1.001,
    "mul_scalar_": lambda t, a, b, w, v: a.clone().mul_(1.001),
    "div_scalar": lambda t, a, b, w, v: a / math.sqrt(48),
    "add_scalar": lambda t, a, b, w, v: a + 0.3333,
    "pow_scalar": lambda t, a, b, w, v: a.abs() ** 1.5,
    "where_scalar": lambda t, a, b, w, v: t.where(a > 0, a, 0.3333),
    # reductions and normalizations accumulate in float32
    "sum": lambda t, a, b, w, v: a.sum(-1),
    "mean": lambda t, a, b, w, v: a.mean(-1),
    "var": lambda t, a, b, w, v: a.var(-1),
    "std": lambda t, a, b, w, v: a.std(-1),
    "cumsum": lambda t, a, b, w, v: a[1:].cumsum(-1),
    "cumprod": lambda t, a, b, w, v: (a[1:] * 0.1 + 1).cumprod(-1),
    "amax": lambda t, a, b, w, v: a[1:].amax(-1),
    "softmax": lambda t, a, b, w, v: t.softmax(a[1:], -1),
    "layer_norm": lambda t, a, b, w, v: t.nn.functional.layer_norm(a[1:], (16,)),
    "group_norm": lambda t, a, b, w, v: t.nn.functional.group_norm(a[1:], 2),
    "mse_loss": lambda t, a, b, w, v: t.nn.functional.mse_loss(a[1:], a[1:] * 0.5),
    # products: float32 accumulation, one rounding
    "matmul": lambda t, a, b, w, v: a[1:] @ b,
    "linear": lambda t, a, b, w, v: t.nn.functional.linear(a[1:], w),
    "bmm": lambda t, a, b, w, v: a[1:] @ a[1:].transpose(-1, -2),
    "einsum": lambda t, a, b, w, v: t.einsum("bij,jk->bik", a[1:], b),
    "mv": lambda t, a, b, w, v: t.mv(w, v),
    "dot": lambda t, a, b, w, v: t.dot(v, v * 0.5),
    "conv1d": lambda t, a, b, w, v: t.nn.functional.conv1d(a[1:], a[1, :, :3].unsqueeze(0).expand(5, 6, 3)),
    # functions ember writes as several records and PyTorch runs as one kernel (ember/ops/opmath_composite.py)
    "lerp": lambda t, a, b, w, v: t.lerp(a, a * 2, 0.3),
    "lerp_tensor_weight": lambda t, a, b, w, v: t.lerp(a, a * 2, a.sigmoid()),
    "addcmul": lambda t, a, b, w, v: t.addcmul(a, a, a, value=0.5),
    "addcdiv": lambda t, a, b, w, v: t.addcdiv(a, a, a.abs() + 1, value=0.3),
    "addcmul_": lambda t, a, b, w, v: a.clone().addcmul_(a, a, value=0.5),
    "softplus": lambda t, a, b, w, v: t.nn.functional.softplus(a),
    "softplus_beta": lambda t, a, b, w, v: t.nn.functional.softplus(a, beta=2.0, threshold=5.0),
    "elu": lambda t, a, b, w, v: t.nn.functional.elu(a),
    "selu": lambda t, a, b, w, v: t.nn.functional.selu(a),
    "selu_inplace": lambda t, a, b, w, v: t.nn.functional.selu(a.clone(), inplace=True),
    "celu": lambda t, a, b, w, v: t.nn.functional.celu(a, 0.7),
    "hardswish": lambda t, a, b, w, v: t.nn.functional.hardswish(a),
    "hardsigmoid": lambda t, a, b, w, v: t.nn.functional.hardsigmoid(a),
    "glu": lambda t, a, b, w, v: t.nn.functional.glu(a),
    "logaddexp": lambda t, a, b, w, v: t.logaddexp(a[1:], a[1:] * 0.5),
    "baddbmm": lambda t, a, b, w, v: t.baddbmm(a[1:, :, :6], a[1:], a[1:].transpose(-1, -2), beta=0.5, alpha=2.0),
    "logcumsumexp": lambda t, a, b, w, v: t.logcumsumexp(a[1:], -1),
    "interpolate": lambda t, a, b, w, v: t.nn.functional.interpolate(a[1:], scale_factor=2, mode="linear"),
    # rms_norm: PyTorch's fused kernel (weight inside the float32 math, float32's eps by default)
    "rms_norm": lambda t, a, b, w, v: t.nn.functional.rms_norm(a[1:], (16,)),
    "rms_norm_weight": lambda t, a, b, w, v: t.nn.functional.rms_norm(a[1:], (16,), v),
    "rms_norm_eps": lambda t, a, b, w, v: t.nn.functional.rms_norm(a[1:], (16,), v, eps=1e-6),
    "RMSNorm": lambda t, a, b, w, v: t.nn.RMSNorm(16, dtype=a.dtype)(a[1:]),
}


def _run(lib, name: str, half: str) -> np.ndarray:
    data = _inputs()
    dt = getattr(lib, half)
    args = [lib.tensor(data[k]).to(dt) for k in ("a", "b", "w", "v")]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = CASES[name](lib, *args)
    assert str(out.dtype).split(".")[-1] == half, f"{name}: {out.dtype}"
    return out.detach().float().numpy()


@pytest.mark.parametrize("half", HALF)
@pytest.mark.parametrize("name", sorted(CASES))
def test_half_op_equals_torch_bit_for_bit(name: str, half: str) -> None:
    expected = _run(torch, name, half)
    got = _run(ember, name, half)
    assert got.shape == expected.shape
    np.testing.assert_array_equal(got, expected, err_msg=f"{name} in {half}")


# float32 transcendental functions of NumPy and PyTorch's vector library may differ by a float32 ulp, which
# can move a half rounding by one half ulp; in gelu's far negative tail (x < -4) 1 + erf(x) cancels in float32
# in both libraries, leaving differences below 5e-7 (one element of 384).
NEAR_CASES = {
    "gelu_tanh": lambda t, a, b, w, v: t.nn.functional.gelu(a, approximate="tanh"),
    # (PyTorch's float32 erf-gelu gives NaN at +inf, its float64 one inf: the special row is left out)
    "gelu": lambda t, a, b, w, v: t.nn.functional.gelu(a[1:]),
}


@pytest.mark.parametrize("half", HALF)
@pytest.mark.parametrize("name", sorted(NEAR_CASES))
def test_half_op_within_one_half_ulp_of_torch(name: str, half: str) -> None:
    CASES[name] = NEAR_CASES[name]
    try:
        expected, got = _run(torch, name, half), _run(ember, name, half)
    finally:
        del CASES[name]
    ulp = 2.0 ** -7 if half == "bfloat16" else 2.0 ** -10
    np.testing.assert_allclose(got, expected, rtol=ulp, atol=5e-7)


@pytest.mark.parametrize("half", HALF)
def test_half_gradients_round_like_torch(half: str) -> None:
    """Backward through a few recorded ops in half precision: gradients have the half dtype and equal torch's
    to one half ulp (PyTorch's backward kernels are single ops; ember's rules are ops of their own)."""
    data = _inputs(1)["a"][1:]
    grads = []
    for lib in (torch, ember):
        x = lib.tensor(data).to(getattr(lib, half)).requires_grad_()
        y = lib.nn.functional.silu(x) * lib.sigmoid(x) + lib.rsqrt(x.abs() + 1)
        y.sum().backward()
        assert str(x.grad.dtype).split(".")[-1] == half
        grads.append(x.grad.float().numpy())
    ulp = 2.0 ** -7 if half == "bfloat16" else 2.0 ** -10
    np.testing.assert_allclose(grads[1], grads[0], rtol=2 * ulp, atol=2 * ulp)


def test_selu_inplace_leaves_selu_in_the_input_like_torch() -> None:
    """selu(x, inplace=True) left elu(x) in x (the scale was applied to a copy)."""
    data = np.linspace(-3, 3, 13).astype(np.float32)
    got = []
    for lib in (torch, ember):
        x = lib.tensor(data)
        out = lib.nn.functional.selu(x, inplace=True)
        assert out is x
        got.append(x.numpy().copy())
    np.testing.assert_allclose(got[1], got[0], rtol=1e-6, atol=1e-7)


def test_half_opmath_keeps_float32_and_float64_paths() -> None:
    """The wrapper changes nothing for wider dtypes: float32 sigmoid equals NumPy's own formula's result."""
    x = np.linspace(-30, 30, 101).astype(np.float32)
    got = ember.sigmoid(ember.tensor(x)).numpy()
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, 1 / (1 + np.exp(-x.astype(np.float64))), rtol=2e-7, atol=1e-30)


def test_finfo_np_knows_bfloat16() -> None:
    """Defaults taken from a tensor's dtype (rms_norm's eps, distributions' clamps) work for bfloat16."""
    from ember import dtypes

    assert dtypes.finfo_np(ember.bfloat16.np).eps == 2.0 ** -7
    assert dtypes.finfo_np(np.float16).eps == 2.0 ** -10
    logits = ember.tensor([0.5, -1.0, 2.0]).to(ember.bfloat16)
    d = ember.distributions.Categorical(logits=logits)
    assert d.logits.dtype is ember.bfloat16
