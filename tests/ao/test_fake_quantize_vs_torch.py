"""Fake quantization against torch 2.13: values and straight-through gradients of the functions (random values,
exact ties, 0, +-inf, NaN, 1e30), and the FakeQuantize / FusedMovingAvgObsFakeQuantize modules' qparams and
outputs over a sequence of batches."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

import ember
import ember.ao.quantization as eq

torch = pytest.importorskip("torch")
tq = pytest.importorskip("torch.ao.quantization")
warnings.filterwarnings("ignore", message=".*reduce_range will be deprecated.*")

SPECIAL = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e30, -1e30, 1e-45], np.float32)


def _values(rng: np.random.Generator, scale: float, n: int) -> np.ndarray:
    x = (rng.standard_normal(n) * rng.uniform(0.1, 30)).astype(np.float32)
    k = rng.integers(-300, 300, n // 5).astype(np.float32)
    x[: n // 5] = (k + 0.5) * np.float32(scale)
    x[: len(SPECIAL)] = SPECIAL
    return x


def _bits(a: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(a).view(np.int32)


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("qrange", [(0, 255), (-128, 127), (0, 127), (-7, 7)])
def test_fake_quantize_per_tensor_values_and_gradients_equal_torch(seed: int, qrange: tuple) -> None:
    rng = np.random.default_rng(seed)
    lo, hi = qrange
    scale, zp = float(np.float32(10 ** rng.uniform(-3, 0))), int(rng.integers(lo, hi + 1))
    x, g = _values(rng, scale, 30_001), rng.standard_normal(30_001).astype(np.float32)
    tx = torch.from_numpy(x.copy()).requires_grad_()
    ty = torch.fake_quantize_per_tensor_affine(tx, scale, zp, lo, hi)
    ty.backward(torch.from_numpy(g))
    ex = ember.tensor(x.copy(), requires_grad=True)
    ey = ember.fake_quantize_per_tensor_affine(ex, scale, zp, lo, hi)
    ey.backward(ember.tensor(g))
    np.testing.assert_array_equal(_bits(ey.detach().numpy()), _bits(ty.detach().numpy()))
    np.testing.assert_array_equal(_bits(ex.grad.numpy()), _bits(tx.grad.numpy()))


@pytest.mark.parametrize("axis", [0, 1])
def test_fake_quantize_per_channel_values_and_gradients_equal_torch(axis: int) -> None:
    rng = np.random.default_rng(axis)
    shape = (7, 1001) if axis == 0 else (3, 5, 401)
    channels = shape[axis]
    x = _values(rng, 0.01, int(np.prod(shape))).reshape(shape)
    g = rng.standard_normal(shape).astype(np.float32)
    scales = (10 ** rng.uniform(-3, 0, channels)).astype(np.float32)
    zps = rng.integers(-128, 128, channels).astype(np.int32)
    tx = torch.from_numpy(x.copy()).requires_grad_()
    ty = torch.fake_quantize_per_channel_affine(tx, torch.from_numpy(scales), torch.from_numpy(zps), axis, -128, 127)
    ty.backward(torch.from_numpy(g))
    ex = ember.tensor(x.copy(), requires_grad=True)
    ey = ember.fake_quantize_per_channel_affine(ex, ember.tensor(scales), ember.tensor(zps), axis, -128, 127)
    ey.backward(ember.tensor(g))
    np.testing.assert_array_equal(_bits(ey.detach().numpy()), _bits(ty.detach().numpy()))
    np.testing.assert_array_equal(_bits(ex.grad.numpy()), _bits(tx.grad.numpy()))


def test_fake_quantize_runs_on_the_standin_device() -> None:
    with ember.testing.standin_cuda():
        x = ember.tensor([0.26, -3.0, 9.0], device="cuda", requires_grad=True)
        y = ember.fake_quantize_per_tensor_affine(x, 0.1, 0, -128, 127)
        y.sum().backward()
        assert y.device.type == "cuda"
        np.testing.assert_array_equal(y.cpu().detach().numpy(), np.float32([0.3, -3.0, 9.0]) * 0 +
                                      np.array([3, -30, 90], np.float32) * np.float32(0.1))
        np.testing.assert_array_equal(x.grad.cpu().numpy(), [1.0, 1.0, 1.0])


def test_fake_quantize_errors_name_the_op() -> None:
    with pytest.raises(RuntimeError, match="fake_quantize_per_tensor_affine.*zero_point"):
        ember.fake_quantize_per_tensor_affine(ember.ones(2), 0.1, 300, 0, 255)
    with pytest.raises(RuntimeError, match="quant_min"):
        ember.fake_quantize_per_tensor_affine(ember.ones(2), 0.1, 0, 10, 5)
    with pytest.raises(RuntimeError, match="floating point"):
        ember.fake_quantize_per_tensor_affine(ember.ones(2, dtype=ember.int64), 0.1, 0, 0, 255)
    with pytest.raises(RuntimeError, match="must match the size of axis"):
        ember.fake_quantize_per_channel_affine(ember.ones(2, 3), ember.ones(3), ember.zeros(3), 0, 0, 255)


def _module_pair(name: str) -> tuple:
    return getattr(eq, name)(), getattr(tq, name)()


@pytest.mark.parametrize("factory", ["default_fake_quant", "default_weight_fake_quant",
                                     "default_per_channel_weight_fake_quant", "default_fused_act_fake_quant",
                                     "default_fused_wt_fake_quant", "default_fused_per_channel_wt_fake_quant"])
def test_fake_quantize_modules_track_torch_over_batches(factory: str) -> None:
    ours, theirs = _module_pair(factory)
    rng = np.random.default_rng(len(factory))
    for step in range(6):
        x = (rng.standard_normal((4, 33)) * (1 + step) + rng.uniform(-1, 1)).astype(np.float32)
        if step == 4:
            ours.disable_observer(), theirs.disable_observer()
        if step == 5:
            ours.disable_fake_quant(), theirs.disable_fake_quant()
        ey, ty = ours(ember.tensor(x)), theirs(torch.from_numpy(x))
        np.testing.assert_array_equal(_bits(ey.numpy()), _bits(ty.numpy()))
        np.testing.assert_array_equal(_bits(ours.scale.numpy()), _bits(theirs.scale.numpy()))
        np.testing.assert_array_equal(ours.zero_point.numpy(), theirs.zero_point.numpy())
    assert set(ours.state_dict()) == set(theirs.state_dict())
