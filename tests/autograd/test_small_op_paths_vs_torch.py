"""The small-input paths of the eighteenth session (docs/cpu-performance.md, "eager18") against torch and against
ember's own large-input paths: relu's and clamp's gradients below and above the small-array size (where() against
the masked multiply and the native kernel), clamp through the clip ufunc, softmax/log_softmax row kernels called
inline, and binary ops of a float tensor with a Python number."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import ember
from ember.backends import cpu_math_kernels
from ember.ops import elementwise as ew

F, TF = ember.nn.functional, torch.nn.functional
SPECIAL = [0.0, -0.0, 1.0, -1.0, 2.5, -2.5, np.inf, -np.inf, np.nan, 1e-40, -1e-40, 3e38, -3e38]


def _values(n: int, dtype: type) -> np.ndarray:
    rng = np.random.default_rng(n)
    x = rng.standard_normal(n).astype(dtype)
    x[:len(SPECIAL)] = np.array(SPECIAL[:n], dtype)
    return x


def _bits_equal(a: np.ndarray, b: np.ndarray) -> bool:
    """Equal values, NaN where NaN, and the same sign of every zero."""
    return a.shape == b.shape and a.dtype == b.dtype and bool(np.all(
        (a == b) & (np.signbit(a) == np.signbit(b)) | (np.isnan(a) & np.isnan(b))))


@pytest.mark.parametrize("n", [13, ew._SMALL_MASK, ew._SMALL_MASK + 1, 5000])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("op", ["relu", "clamp_min", "clamp_max", "clamp_both"])
def test_relu_clamp_values_and_grads_vs_torch(n, dtype, op):
    """Forward and gradient at 0, -0, +-inf, NaN, subnormals and +-3e38 in x and in the incoming gradient, on both
    sides of the small-array size: torch's values, and 0 (never NaN) where the gradient is cut."""
    x, g = _values(n, dtype), _values(n, dtype)[::-1].copy()
    results = []
    for lib in (ember, torch):
        t = lib.tensor(x, requires_grad=True)
        y = {"relu": lambda: t.relu(), "clamp_min": lambda: t.clamp(min=0), "clamp_max": lambda: t.clamp(max=0.5),
             "clamp_both": lambda: t.clamp(-1.0, 1.0)}[op]()
        y.backward(lib.tensor(g))
        results.append((y.detach().numpy(), t.grad.numpy()))
    (ey, eg), (ty, tg) = results
    if op == "relu":  # (relu(-0.0) is +0 in ember and -0 in torch, on every path: NumPy's maximum)
        np.testing.assert_array_equal(ey, ty)
    else:
        assert _bits_equal(ey, ty)
    np.testing.assert_array_equal(eg, tg)  # (values and NaNs; torch's masked-off zeros are +0, ember's below)
    cut = (tg == 0) & (g != 0)  # where a gradient (NaN and inf included) was cut to 0
    assert cut.any()
    if n <= ew._SMALL_MASK:  # the small path gives torch's +0 where the gradient is cut
        assert not np.any(np.signbit(eg[cut]))


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16])
def test_masked_grad_small_path_matches_large_path(dtype):
    """The where() path and the masked multiply agree on every value (the zeros' signs aside)."""
    for n in (1, 7, ew._SMALL_MASK):
        g, mask = _values(n, dtype), _values(n, dtype) > 0
        small = ew._masked_grad(np, g, mask)
        with np.errstate(invalid="ignore"):
            large = np.where(np.isfinite(g * mask), g * mask, np.where(mask, g, 0)).astype(dtype)
        assert small.dtype == np.dtype(dtype) and small.shape == g.shape
        np.testing.assert_array_equal(small, large)


def test_masked_grad_broadcast_mask_takes_the_general_path():
    g = np.array([[1.0, -2.0], [np.inf, 3.0]], np.float32)
    mask = np.array([True, False])
    np.testing.assert_array_equal(ew._masked_grad(np, g, mask), [[1.0, 0.0], [np.inf, 0.0]])


def test_clamp_keeps_negative_zero_as_torch():
    x = np.array([-0.0, 0.0, -1.0, 0.5], np.float32)
    for kwargs in ({"min": 0}, {"min": 0.0}, {"max": -0.0}, {"max": 0}):
        got = ember.tensor(x).clamp(**kwargs).numpy()
        assert _bits_equal(got, torch.tensor(x).clamp(**kwargs).numpy()), kwargs


@pytest.mark.parametrize("rows", [1, 5, 3000])
@pytest.mark.parametrize("fn", ["softmax", "log_softmax"])
def test_row_kernels_inline_and_split_vs_torch(rows, fn, monkeypatch):
    """softmax/log_softmax forward and gradient, rows few enough to run inline and many enough to split
    (MIN_CHUNK lowered so the split runs on a small input), against torch in float64 and each other bit for bit."""
    rng = np.random.default_rng(rows)
    x = rng.standard_normal((rows, 8))
    x[0, :3] = [-np.inf, 1e300, -1e300]
    g = rng.standard_normal((rows, 8))
    want_t = torch.tensor(x, requires_grad=True)
    want = getattr(TF, fn)(want_t, 1)
    want.backward(torch.tensor(g))
    outs = []
    for chunk in (cpu_math_kernels.MIN_CHUNK, 16):
        monkeypatch.setattr(cpu_math_kernels, "MIN_CHUNK", chunk)
        t = ember.tensor(x, requires_grad=True)
        y = getattr(F, fn)(t, 1)
        y.backward(ember.tensor(g))
        np.testing.assert_allclose(y.detach().numpy(), want.detach().numpy(), rtol=1e-12, atol=1e-300)
        np.testing.assert_allclose(t.grad.numpy(), want_t.grad.numpy(), rtol=1e-10, atol=1e-12)
        outs.append((y.detach().numpy(), t.grad.numpy()))
    assert _bits_equal(outs[0][0], outs[1][0]) and _bits_equal(outs[0][1], outs[1][1])


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64", "bfloat16"])
@pytest.mark.parametrize("scalar", [2, 0.5, -3, True, 300, 1e-6])
@pytest.mark.parametrize("op", ["mul", "rmul", "pow", "sub", "add", "div"])
def test_float_tensor_with_python_number_dtype_and_values_vs_torch(dtype, scalar, op):
    x = np.array([0.5, -1.5, 2.0, 0.0], np.float32)
    fns = {"mul": lambda t: t * scalar, "rmul": lambda t: scalar * t, "pow": lambda t: t.abs() ** scalar,
           "sub": lambda t: t - scalar, "add": lambda t: t + scalar, "div": lambda t: t / scalar}
    if op == "sub" and type(scalar) is bool:
        return  # (torch refuses bool subtraction; tested elsewhere)
    got = fns[op](ember.tensor(x).to(getattr(ember, dtype)))
    want = fns[op](torch.tensor(x).to(getattr(torch, dtype)))
    assert str(got.dtype).split(".")[-1] == str(want.dtype).split(".")[-1]
    np.testing.assert_allclose(got.float().numpy(), want.float().numpy(), rtol=1e-2 if "16" in dtype else 1e-6)
