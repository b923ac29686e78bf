"""Quantized modules against torch 2.13 on both of its x86 CPU engines ('x86', 'fbgemm'): integer outputs of
Linear, Conv2d (+ReLU), dynamic Linear, quantized ReLU/max-pool, and their state dicts in both directions."""
from __future__ import annotations

import io
import warnings

import numpy as np
import pytest

import ember
from ember.ao.nn import quantized as nnq
from ember.ao.nn.intrinsic import quantized as nniq
from ember.ao.nn.quantized import dynamic as nnqd
from ember.ao.nn.quantized.kernels import exact_matmul
from ember.ao.qtensor import from_ints

torch = pytest.importorskip("torch")
tnnq = pytest.importorskip("torch.ao.nn.quantized")
tnniq = pytest.importorskip("torch.ao.nn.intrinsic.quantized")
warnings.filterwarnings("ignore", message=".*quantized tensor creation functions.*")

ENGINES = [e for e in ("x86", "fbgemm") if e in torch.backends.quantized.supported_engines]


@pytest.fixture(params=ENGINES)
def engine(request: pytest.FixtureRequest) -> str:
    before = torch.backends.quantized.engine
    torch.backends.quantized.engine = request.param
    yield request.param
    torch.backends.quantized.engine = before


def _weights(rng: np.random.Generator, shape: tuple, per_channel: bool) -> tuple:
    w = (rng.standard_normal(shape) * 0.1).astype(np.float32)
    if per_channel:
        scales = rng.uniform(0.0005, 0.005, shape[0])
        zeros = np.zeros(shape[0], np.int64)
        return (ember.quantize_per_channel(ember.tensor(w), ember.tensor(scales), ember.tensor(zeros), 0, ember.qint8),
                torch.quantize_per_channel(torch.from_numpy(w), torch.from_numpy(scales), torch.from_numpy(zeros), 0,
                                           torch.qint8))
    scale = float(rng.uniform(0.0005, 0.005))
    return (ember.quantize_per_tensor(ember.tensor(w), scale, 0, ember.qint8),
            torch.quantize_per_tensor(torch.from_numpy(w), scale, 0, torch.qint8))


def _activations(rng: np.random.Generator, shape: tuple) -> tuple:
    x = rng.standard_normal(shape).astype(np.float32)
    scale, zp = float(rng.uniform(0.01, 0.05)), int(rng.integers(0, 256))
    return (ember.quantize_per_tensor(ember.tensor(x), scale, zp, ember.quint8),
            torch.quantize_per_tensor(torch.from_numpy(x), scale, zp, torch.quint8))


def _same_ints(a: object, b: object) -> None:
    np.testing.assert_array_equal(a.int_repr().numpy(), b.int_repr().numpy())
    assert (a.q_scale(), a.q_zero_point()) == (b.q_scale(), b.q_zero_point())


@pytest.mark.parametrize("per_channel", [False, True])
@pytest.mark.parametrize("relu", [False, True])
@pytest.mark.parametrize("bias", [False, True])
def test_linear_equals_torch(engine: str, per_channel: bool, relu: bool, bias: bool) -> None:
    rng = np.random.default_rng(int(per_channel) + 2 * int(relu) + 4 * int(bias))
    for k, m in [(37, 11), (256, 33), (3, 1)]:
        (qw, tw), (qx, tx) = _weights(rng, (m, k), per_channel), _activations(rng, (64, k))
        b = rng.standard_normal(m).astype(np.float32) if bias else None
        ours = (nniq.LinearReLU if relu else nnq.Linear)(k, m, bias)
        theirs = (tnniq.LinearReLU if relu else tnnq.Linear)(k, m, bias)
        ours.set_weight_bias(qw, None if b is None else ember.tensor(b))
        theirs.set_weight_bias(tw, None if b is None else torch.from_numpy(b))
        ours.scale = theirs.scale = float(rng.uniform(0.02, 0.2))
        ours.zero_point = theirs.zero_point = int(rng.integers(0, 256))
        _same_ints(ours(qx), theirs(tx))
        _same_ints(ours(qx.reshape(4, 16, k)), theirs(tx.reshape(4, 16, k)))


@pytest.mark.parametrize("per_channel", [False, True])
@pytest.mark.parametrize("relu", [False, True])
@pytest.mark.parametrize("geometry", [dict(), dict(stride=2, padding=1), dict(padding=(2, 0), dilation=2),
                                      dict(groups=3, stride=(1, 2)), dict(groups=6, padding=1)])
def test_conv2d_equals_torch(engine: str, per_channel: bool, relu: bool, geometry: dict) -> None:
    rng = np.random.default_rng(len(str(geometry)) + int(relu))
    cin, cout = 6, 12
    groups = geometry.get("groups", 1)
    (qw, tw), (qx, tx) = _weights(rng, (cout, cin // groups, 3, 3), per_channel), _activations(rng, (2, cin, 11, 10))
    b = rng.standard_normal(cout).astype(np.float32)
    ours = (nniq.ConvReLU2d if relu else nnq.Conv2d)(cin, cout, 3, **geometry)
    theirs = (tnniq.ConvReLU2d if relu else tnnq.Conv2d)(cin, cout, 3, **geometry)
    ours.set_weight_bias(qw, ember.tensor(b))
    theirs.set_weight_bias(tw, torch.from_numpy(b))
    ours.scale = theirs.scale = float(rng.uniform(0.02, 0.2))
    ours.zero_point = theirs.zero_point = int(rng.integers(0, 256))
    _same_ints(ours(qx), theirs(tx))
    assert repr(ours).replace("ember.", "torch.") == repr(theirs)


@pytest.mark.parametrize("per_channel", [False, True])
def test_dynamic_linear_equals_torch(engine: str, per_channel: bool) -> None:
    rng = np.random.default_rng(11 + per_channel)
    for k, m in [(64, 20), (5, 3), (300, 7)]:
        qw, tw = _weights(rng, (m, k), per_channel)
        b = rng.standard_normal(m).astype(np.float32)
        ours, theirs = nnqd.Linear(k, m), torch.ao.nn.quantized.dynamic.Linear(k, m)
        ours.set_weight_bias(qw, ember.tensor(b))
        theirs.set_weight_bias(tw, torch.from_numpy(b))
        for scale, shift in [(1.0, 0.0), (30.0, 5.0), (1e-3, 0.0), (0.0, 0.0), (2.0, -7.0)]:
            x = (rng.standard_normal((3, 9, k)) * scale + shift).astype(np.float32)
            np.testing.assert_array_equal(ours(ember.tensor(x)).numpy().view(np.int32),
                                          theirs(torch.from_numpy(x)).numpy().view(np.int32))


def test_module_printouts_and_state_dict_keys_equal_torch() -> None:
    pairs = [(nnq.Linear(3, 2), tnnq.Linear(3, 2)), (nnqd.Linear(3, 2), torch.ao.nn.quantized.dynamic.Linear(3, 2)),
             (nnq.Conv2d(2, 4, 3, padding=1, bias=False), tnnq.Conv2d(2, 4, 3, padding=1, bias=False)),
             (nnq.Quantize(0.1, 3, ember.quint8), tnnq.Quantize(0.1, 3, torch.quint8)),
             (nnq.DeQuantize(), tnnq.DeQuantize()), (nniq.LinearReLU(3, 2), tnniq.LinearReLU(3, 2))]
    for ours, theirs in pairs:
        assert repr(ours).replace("ember.", "torch.") == repr(theirs)
        assert list(ours.state_dict()) == list(theirs.state_dict())


def _to_torch_file(obj: object) -> io.BytesIO:
    buffer = io.BytesIO()
    ember.save(obj, buffer)
    buffer.seek(0)
    return buffer


def test_quantized_state_dicts_move_between_libraries(engine: str) -> None:
    rng = np.random.default_rng(5)
    (qw, _), (qx, tx) = _weights(rng, (8, 4, 3, 3), True), _activations(rng, (1, 4, 6, 6))
    ours = nnq.Conv2d(4, 8, 3)
    ours.set_weight_bias(qw, ember.tensor(rng.standard_normal(8).astype(np.float32)))
    ours.scale, ours.zero_point = float(np.float32(0.07)), 120  # converted modules hold float32 scales
    theirs = tnnq.Conv2d(4, 8, 3)
    theirs.load_state_dict(torch.load(_to_torch_file(ours.state_dict()), weights_only=True))  # ember -> torch
    _same_ints(ours(qx), theirs(tx))
    lin_t = tnnq.Linear(5, 3)
    lin_t.set_weight_bias(torch.quantize_per_tensor(torch.randn(3, 5), 0.01, 0, torch.qint8), torch.randn(3))
    lin_t.scale, lin_t.zero_point = float(np.float32(0.05)), 7
    buffer = io.BytesIO()
    torch.save(lin_t.state_dict(), buffer)
    buffer.seek(0)
    lin_e = nnq.Linear(5, 3)
    lin_e.load_state_dict(ember.load(buffer))  # torch -> ember, through the weights-only loader
    qx5, tx5 = _activations(rng, (4, 5))
    _same_ints(lin_e(qx5), lin_t(tx5))
    assert lin_e.scale == lin_t.scale and lin_e.zero_point == 7


def test_quantized_file_with_bad_quantizer_is_refused() -> None:
    for scale, zero_point in [(float("nan"), 2), (0.5, 300)]:
        bad = from_ints(np.ones(3, np.uint8), ember.quint8, scale, zero_point)
        with pytest.raises(ValueError, match="quantizer"):
            ember.load(_to_torch_file({"q": bad}))


@pytest.mark.parametrize("k", [1, 255, 256, 257, 700, 2049])
def test_exact_matmul_equals_int64_arithmetic_at_extreme_values(k: int) -> None:
    rng = np.random.default_rng(k)
    a = rng.choice([-255, 255, 254, -1, 0], size=(3, 5, k)).astype(np.int64)
    b = rng.choice([-255, 255, -254, 1], size=(3, k, 4)).astype(np.int64)
    a[0, 0], b[0, :, 0] = 255, 255  # the largest possible sum: k * 255 * 255
    expected = np.matmul(a, b)
    np.testing.assert_array_equal(exact_matmul(a.astype(np.float32), b.astype(np.float32)), expected)


@pytest.mark.parametrize("shape", [(8, 16, 7, 7), (4, 64), (2, 3, 32)])
def test_qfunctional_and_pooling_on_quantized_equal_torch(shape: tuple) -> None:
    """add/add_relu (sizes that are multiples of 64: torch's AVX-512 kernel has no scalar tail), mul, cat, mean and
    adaptive average pooling on quantized tensors."""
    rng = np.random.default_rng(len(shape))
    a, b = (rng.standard_normal(shape).astype(np.float32) * 3 for _ in range(2))
    pairs = [(ember.quantize_per_tensor(ember.tensor(v), s, z, ember.quint8),
              torch.quantize_per_tensor(torch.from_numpy(v), s, z, torch.quint8))
             for v, s, z in ((a, 0.021, 120), (b, 0.034, 100))]
    (ea, ta), (eb, tb) = pairs
    ours, theirs = nnq.QFunctional(), tnnq.QFunctional()
    ours.scale = theirs.scale = 0.05
    ours.zero_point = theirs.zero_point = 128
    for name in ("add", "add_relu", "mul"):
        _same_ints(getattr(ours, name)(ea, eb), getattr(theirs, name)(ta, tb))
    _same_ints(ours.cat([ea, eb], 1), theirs.cat([ta, tb], 1))
    _same_ints(ea.mean([-1]), ta.mean([-1]))
    if len(shape) == 4:
        _same_ints(ember.nn.functional.adaptive_avg_pool2d(ea, 1), torch.nn.functional.adaptive_avg_pool2d(ta, 1))


def test_quantized_engine_switch_as_torch() -> None:
    before = ember.backends.quantized.engine
    try:
        assert ember.backends.quantized.supported_engines == torch.backends.quantized.supported_engines
        ember.backends.quantized.engine = "fbgemm"
        assert ember.backends.quantized.engine == "fbgemm"
        with pytest.raises(RuntimeError, match="not supported"):
            ember.backends.quantized.engine = "tpu"
        with pytest.warns(UserWarning, match="x86/fbgemm arithmetic"):
            ember.backends.quantized.engine = "qnnpack"
    finally:
        ember.backends.quantized.engine = before
