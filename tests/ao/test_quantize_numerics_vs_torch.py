"""Quantized tensors against torch 2.13: int_repr, dequantize (bits), printing, qparams, layout ops, errors.

The reference is PyTorch itself (the x86/fbgemm CPU kernels); inputs include exact halfway points
((k + 0.5) * scale, where the rounding rule decides), values one ulp off them, and 0, -0, +-inf, NaN, 1e30,
2**31, subnormals.
"""
from __future__ import annotations

import warnings

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")
warnings.filterwarnings("ignore", message=".*quantized tensor creation functions.*")

DTYPES = [("quint8", 0, 255), ("qint8", -128, 127), ("qint32", -2 ** 31, 2 ** 31 - 1)]
SPECIAL = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e30, -1e30, 3e9, -3e9, 1e-45, -1e-45, 127.5, 128.5,
                    -128.5, 255.5, 2.0 ** 31, -2.0 ** 31, 2.0 ** 24 + 1, 0.5, -0.5, 1.5, 2.5], np.float32)


def _inputs(rng: np.random.Generator, scale: float, n: int = 40_003) -> np.ndarray:
    x = (rng.standard_normal(n) * rng.uniform(0.01, 20)).astype(np.float32)
    k = rng.integers(-300, 300, n // 4).astype(np.float32)
    x[: n // 4] = (k + 0.5) * np.float32(scale)                        # exact ties after the multiply
    x[n // 4: 2 * (n // 4)] = (k + 0.5) * np.float32(scale) * np.float32(1 + 1e-7)
    x[-len(SPECIAL):] = SPECIAL
    return x


def _pair(name: str) -> tuple:
    return getattr(ember, name), getattr(torch, name)


@pytest.mark.parametrize("name,lo,hi", DTYPES)
@pytest.mark.parametrize("seed", range(4))
def test_quantize_per_tensor_int_repr_and_dequantize_equal_torch(name: str, lo: int, hi: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    scale = float(10 ** rng.uniform(-4, 1))
    zp = int(rng.integers(max(lo, -1000), min(hi, 1000) + 1))
    x = _inputs(rng, scale)
    edtype, tdtype = _pair(name)
    q = ember.quantize_per_tensor(ember.tensor(x), scale, zp, edtype)
    t = torch.quantize_per_tensor(torch.from_numpy(x), scale, zp, tdtype)
    np.testing.assert_array_equal(q.int_repr().numpy(), t.int_repr().numpy())
    assert q.int_repr().dtype.name == str(t.int_repr().dtype).replace("torch.", "")
    np.testing.assert_array_equal(q.dequantize().numpy().view(np.int32), t.dequantize().numpy().view(np.int32))
    assert (q.q_scale(), q.q_zero_point(), q.qscheme().name) == (t.q_scale(), t.q_zero_point(), "per_tensor_affine")


@pytest.mark.parametrize("name,lo,hi", DTYPES)
@pytest.mark.parametrize("axis", [0, 1])
def test_quantize_per_channel_equals_torch(name: str, lo: int, hi: int, axis: int) -> None:
    rng = np.random.default_rng(7 + axis)
    shape = (9, 2001) if axis == 0 else (3, 11, 61)
    channels = shape[axis]
    scales = 10 ** rng.uniform(-4, 0, channels)
    zps = rng.integers(max(lo, -100), min(hi, 100) + 1, channels)
    x = _inputs(rng, float(scales[0]), int(np.prod(shape))).reshape(shape)
    edtype, tdtype = _pair(name)
    q = ember.quantize_per_channel(ember.tensor(x), ember.tensor(scales), ember.tensor(zps), axis, edtype)
    t = torch.quantize_per_channel(torch.from_numpy(x), torch.from_numpy(scales), torch.from_numpy(zps), axis, tdtype)
    np.testing.assert_array_equal(q.int_repr().numpy(), t.int_repr().numpy())
    np.testing.assert_array_equal(q.dequantize().numpy().view(np.int32), t.dequantize().numpy().view(np.int32))
    np.testing.assert_array_equal(q.q_per_channel_scales().numpy(), t.q_per_channel_scales().numpy())
    np.testing.assert_array_equal(q.q_per_channel_zero_points().numpy(), t.q_per_channel_zero_points().numpy())
    assert q.q_per_channel_axis() == t.q_per_channel_axis() == axis


def _torch_text(text: str) -> str:
    return text.replace("ember.", "torch.")


@pytest.mark.parametrize("values", [[[-1.0, 0.5, 2.0], [0.3, 0.25, -0.7]], [1.0, 2.0], 1.5, [[0.0]], []])
@pytest.mark.parametrize("name", ["quint8", "qint8", "qint32"])
def test_printout_equals_torch(values: object, name: str) -> None:
    edtype, tdtype = _pair(name)
    x = np.array(values, np.float32)
    q = ember.quantize_per_tensor(ember.tensor(x), 0.1, 10, edtype)
    t = torch.quantize_per_tensor(torch.from_numpy(x), 0.1, 10, tdtype)
    assert _torch_text(repr(q)) == repr(t)


def test_printout_summarized_and_per_channel_equal_torch() -> None:
    rng = np.random.default_rng(0)
    x = rng.standard_normal(2000).astype(np.float32)
    assert _torch_text(repr(ember.quantize_per_tensor(ember.tensor(x), 0.1, 10, ember.quint8))) == \
        repr(torch.quantize_per_tensor(torch.from_numpy(x), 0.1, 10, torch.quint8))
    w = rng.standard_normal((2, 3)).astype(np.float32)
    q = ember.quantize_per_channel(ember.tensor(w), ember.tensor([0.1, 0.2]), ember.tensor([0, 1]), 0, ember.qint8)
    t = torch.quantize_per_channel(torch.from_numpy(w), torch.tensor([0.1, 0.2]), torch.tensor([0, 1]), 0, torch.qint8)
    assert _torch_text(repr(q)) == repr(t)


def test_layout_ops_keep_integers_and_quantizer_as_torch() -> None:
    rng = np.random.default_rng(1)
    x = rng.standard_normal((4, 6)).astype(np.float32)
    q = ember.quantize_per_tensor(ember.tensor(x), 0.05, 7, ember.quint8)
    t = torch.quantize_per_tensor(torch.from_numpy(x), 0.05, 7, torch.quint8)
    cases = [lambda a: a.t(), lambda a: a.reshape(3, 8), lambda a: a.view(-1), lambda a: a[1:3, ::2],
             lambda a: a.permute(1, 0), lambda a: a.transpose(0, 1).contiguous(), lambda a: a.unsqueeze(0).squeeze(0),
             lambda a: a.flatten(), lambda a: a.clone(), lambda a: a.detach(), lambda a: a[2],
             lambda a: a.relu(), lambda a: ember.flatten(a) if isinstance(a, ember.Tensor) else torch.flatten(a)]
    for case in cases:
        qe, qt = case(q), case(t)
        assert qe.is_quantized and qt.is_quantized
        np.testing.assert_array_equal(qe.int_repr().numpy(), qt.int_repr().numpy())
        assert (qe.q_scale(), qe.q_zero_point(), tuple(qe.shape)) == (qt.q_scale(), qt.q_zero_point(), tuple(qt.shape))


def test_relu_and_max_pool_on_quantized_equal_torch() -> None:
    rng = np.random.default_rng(2)
    x = rng.standard_normal((2, 3, 9, 8)).astype(np.float32)
    q = ember.quantize_per_tensor(ember.tensor(x), 0.02, 130, ember.quint8)
    t = torch.quantize_per_tensor(torch.from_numpy(x), 0.02, 130, torch.quint8)
    for fe, ft in [(ember.nn.functional.relu, torch.nn.functional.relu),
                   (lambda a: ember.nn.functional.max_pool2d(a, 3, 2, 1), lambda a: torch.nn.functional.max_pool2d(a, 3, 2, 1)),
                   (ember.nn.ReLU(), torch.nn.ReLU()), (ember.nn.MaxPool2d(2), torch.nn.MaxPool2d(2))]:
        np.testing.assert_array_equal(fe(q).int_repr().numpy(), ft(t).int_repr().numpy())


def test_arithmetic_on_quantized_is_refused_with_a_clear_message() -> None:
    q = ember.quantize_per_tensor(ember.tensor([1.0, 2.0]), 0.1, 0, ember.quint8)
    for op in (lambda: q + 1, lambda: q * q, lambda: q.sum(), lambda: ember.exp(q), lambda: q.to(ember.float32)):
        with pytest.raises(NotImplementedError, match="quantized tensor"):
            op()
    with pytest.raises(RuntimeError, match="cannot require grad"):
        q.requires_grad_()


def test_bad_arguments_raise_errors_naming_the_op() -> None:
    x = ember.tensor([1.0, 2.0])
    with pytest.raises(RuntimeError, match="zero_point 300 is above upper bound"):
        ember.quantize_per_tensor(x, 0.1, 300, ember.quint8)
    with pytest.raises(RuntimeError, match="float32"):
        ember.quantize_per_tensor(x.double(), 0.1, 3, ember.quint8)
    with pytest.raises(TypeError, match="quint8"):
        ember.quantize_per_tensor(x, 0.1, 3, ember.int8)
    with pytest.raises(RuntimeError, match="expected 2 scales"):
        ember.quantize_per_channel(x.reshape(2, 1), ember.tensor([0.1]), ember.tensor([0]), 0, ember.qint8)
    with pytest.raises(RuntimeError, match="q_scale"):
        ember.quantize_per_channel(x.reshape(2, 1), ember.tensor([0.1, 0.2]), ember.tensor([0, 0]), 0,
                                   ember.qint8).q_scale()


def test_tensor_scale_and_list_overload_as_torch() -> None:
    x = np.array([0.3, -0.26], np.float32)
    q = ember.quantize_per_tensor(ember.tensor(x), ember.tensor(0.1), ember.tensor(10), ember.quint8)
    t = torch.quantize_per_tensor(torch.from_numpy(x), torch.tensor(0.1), torch.tensor(10), torch.quint8)
    assert q.q_scale() == t.q_scale()
    qs = ember.quantize_per_tensor([ember.tensor(x), ember.tensor(x)], ember.tensor([0.1, 0.2]), ember.tensor([1, 2]),
                                   ember.quint8)
    ts = torch.quantize_per_tensor([torch.from_numpy(x)] * 2, torch.tensor([0.1, 0.2]), torch.tensor([1, 2]),
                                   torch.quint8)
    for a, b in zip(qs, ts):
        assert a.q_scale() == b.q_scale() and a.q_zero_point() == b.q_zero_point()
        np.testing.assert_array_equal(a.int_repr().numpy(), b.int_repr().numpy())


def test_dtypes_and_schemes_as_torch() -> None:
    for name in ("qint8", "quint8", "qint32"):
        assert repr(getattr(ember, name)) == f"ember.{name}"
        assert getattr(ember, name).is_floating_point is False
    assert ember.per_tensor_affine is not ember.per_channel_affine
    assert not ember.ones(2).is_quantized
