"""PyTorch's quantization tutorials side by side with torch 2.13, on small models with the same float weights:

* static post-training quantization, eager mode (fuse Conv+BN+ReLU, QuantStub/DeQuantStub, prepare, calibrate,
  convert) with ``default_qconfig`` and ``get_default_qconfig('x86')``;
* quantization-aware training (``fuse_modules_qat``, ``get_default_qat_qconfig('x86')``, ``prepare_qat``, SGD steps,
  ``freeze_bn_stats``/``disable_observer``, convert);
* dynamic quantization of a word language model's Linear layers (``quantize_dynamic``).

What must be equal bit for bit: folded weights, quantized weights (int_repr, scales), and the converted model's
outputs given the same quantized parameters (torch's converted state dict loaded into ember's model). What can
differ: activation ranges seen during calibration, since the float convolutions and matmuls of the two libraries
round differently in the last bit; those are checked to be within float32 rounding.
"""
from __future__ import annotations

import io
import re
import warnings

import numpy as np
import pytest

import ember
import ember.ao.quantization as eq

torch = pytest.importorskip("torch")
tq = pytest.importorskip("torch.ao.quantization")
warnings.filterwarnings("ignore", message=".*reduce_range will be deprecated.*")
warnings.filterwarnings("ignore", message=".*quantized tensor creation functions.*")


def _cnn(lib: object) -> object:
    nn, q = lib.nn, (eq if lib is ember else tq)

    class Net(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.quant, self.dequant = q.QuantStub(), q.DeQuantStub()
            self.conv1, self.bn1, self.relu1 = nn.Conv2d(1, 6, 3, padding=1), nn.BatchNorm2d(6), nn.ReLU()
            self.conv2, self.bn2, self.relu2 = nn.Conv2d(6, 8, 3, stride=2, bias=False), nn.BatchNorm2d(8), nn.ReLU()
            self.pool = nn.MaxPool2d(2)
            self.fc1, self.relu3, self.fc2 = nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 5)

        def forward(self, x: object) -> object:
            x = self.quant(x)
            x = self.relu1(self.bn1(self.conv1(x)))
            x = self.pool(self.relu2(self.bn2(self.conv2(x))))
            x = lib.flatten(x, 1)
            return self.dequant(self.fc2(self.relu3(self.fc1(x))))

    return Net()


FUSE = [["conv1", "bn1", "relu1"], ["conv2", "bn2", "relu2"], ["fc1", "relu3"]]


def _twins(seed: int) -> tuple:
    """The same float CNN in both libraries (BatchNorm statistics included)."""
    ember.manual_seed(seed)
    ours, theirs = _cnn(ember), _cnn(torch)
    rng = np.random.default_rng(seed)
    state = {}
    for name, value in ours.state_dict().items():
        array = value.numpy()
        if name.endswith("running_var"):
            array = rng.uniform(0.5, 2.0, array.shape).astype(np.float32)
        elif name.endswith("running_mean") or name.endswith("bn1.bias") or name.endswith("bn2.weight"):
            array = rng.standard_normal(array.shape).astype(np.float32) * 0.3 + (name.endswith("weight"))
        state[name] = array
    ours.load_state_dict({k: ember.tensor(v) for k, v in state.items()})
    theirs.load_state_dict({k: torch.from_numpy(v.copy()) for k, v in state.items()})
    return ours, theirs


def _data(seed: int, n: int = 16) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((n, 1, 8, 8)).astype(np.float32)


def _torch_names(text: str) -> str:
    return text.replace("ember.", "torch.")


def _numbers_masked(text: str) -> str:
    """A printout with its activation scales and zero points masked (calibration rounding may move them)."""
    return re.sub(r"(scale|zero_point)=(tensor\(\[[^]]*\]\)|[-0-9.e]+)", r"\1=_", text)


def _quantized_modules(model: object) -> dict:
    return {name: m for name, m in model.named_modules() if hasattr(m, "scale") and hasattr(m, "weight")
            and callable(m.weight)}


def _compare_converted(ours: object, theirs: object, batch: np.ndarray) -> None:
    q_ours, q_theirs = _quantized_modules(ours), _quantized_modules(theirs)
    assert sorted(q_ours) == sorted(q_theirs) and q_ours
    for name in q_ours:
        a, b = q_ours[name], q_theirs[name]
        assert type(a).__name__ == type(b).__name__
        np.testing.assert_array_equal(a.weight().int_repr().numpy(), b.weight().int_repr().numpy())
        np.testing.assert_array_equal(a.weight().q_per_channel_scales().numpy() if a.weight().qscheme().name ==
                                      "per_channel_affine" else a.weight().q_scale(),
                                      b.weight().q_per_channel_scales().numpy() if b.weight().qscheme() ==
                                      torch.per_channel_affine else b.weight().q_scale())
        np.testing.assert_allclose(a.scale, b.scale, rtol=1e-5)   # activations: float rounding of the two libraries
        assert abs(a.zero_point - b.zero_point) <= 1
    # the converted models' outputs, each library on its own calibration: within a few output steps
    out_ours, out_theirs = ours(ember.tensor(batch)).numpy(), theirs(torch.from_numpy(batch)).numpy()
    step = q_ours["fc2"].scale
    assert np.max(np.abs(out_ours - out_theirs)) <= 3 * step
    # with torch's quantized parameters (through a torch-format file), ember's integer kernels give torch's bits
    buffer = io.BytesIO()
    torch.save(theirs.state_dict(), buffer)
    buffer.seek(0)
    ours.load_state_dict(ember.load(buffer))
    np.testing.assert_array_equal(ours(ember.tensor(batch)).numpy().view(np.int32),
                                  theirs(torch.from_numpy(batch)).numpy().view(np.int32))


@pytest.mark.parametrize("qconfig", ["default_qconfig", "x86", "fbgemm"])
def test_static_quantization_tutorial_flow_matches_torch(qconfig: str) -> None:
    ours, theirs = _twins(1)
    ours.eval(), theirs.eval()
    eq.fuse_modules(ours, FUSE, inplace=True)
    tq.fuse_modules(theirs, FUSE, inplace=True)
    for name in ("conv1", "conv2", "fc1"):  # folded BatchNorm: the same float32 weights and biases
        a, b = getattr(ours, name)[0], getattr(theirs, name)[0]
        np.testing.assert_array_equal(a.weight.detach().numpy(), b.weight.detach().numpy())
        np.testing.assert_array_equal(a.bias.detach().numpy(), b.bias.detach().numpy())
    if qconfig == "default_qconfig":
        ours.qconfig, theirs.qconfig = eq.default_qconfig, tq.default_qconfig
    else:
        ours.qconfig, theirs.qconfig = eq.get_default_qconfig(qconfig), tq.get_default_qconfig(qconfig)
    eq.prepare(ours, inplace=True)
    tq.prepare(theirs, inplace=True)
    assert _torch_names(repr(ours)) == repr(theirs)  # the same observers in the same places
    for seed in range(3):  # calibration
        batch = _data(seed)
        ours(ember.tensor(batch)), theirs(torch.from_numpy(batch))
    eq.convert(ours, inplace=True)
    tq.convert(theirs, inplace=True)
    assert _numbers_masked(_torch_names(repr(ours))) == _numbers_masked(repr(theirs))
    _compare_converted(ours, theirs, _data(10))


def test_quantization_aware_training_tutorial_flow_matches_torch() -> None:
    ours, theirs = _twins(2)
    ours.train(), theirs.train()
    eq.fuse_modules_qat(ours, FUSE, inplace=True)
    tq.fuse_modules_qat(theirs, FUSE, inplace=True)
    ours.qconfig, theirs.qconfig = eq.get_default_qat_qconfig("x86"), tq.get_default_qat_qconfig("x86")
    eq.prepare_qat(ours, inplace=True)
    tq.prepare_qat(theirs, inplace=True)
    assert [type(m).__name__ for m in ours.modules()] == [type(m).__name__ for m in theirs.modules()]
    opt_ours = ember.optim.SGD(ours.parameters(), lr=0.05)
    opt_theirs = torch.optim.SGD(theirs.parameters(), lr=0.05)
    rng = np.random.default_rng(3)
    for step in range(4):
        batch, target = _data(20 + step), rng.integers(0, 5, 16)
        for model, opt, lib, wrap in ((ours, opt_ours, ember, ember.tensor), (theirs, opt_theirs, torch,
                                                                                torch.from_numpy)):
            opt.zero_grad()
            loss = lib.nn.functional.cross_entropy(model(wrap(batch)), wrap(target.copy()))
            loss.backward()
            opt.step()
        if step == 2:
            ours.apply(eq.disable_observer), theirs.apply(tq.disable_observer)
            ours.apply(ember.ao.nn.intrinsic.qat.freeze_bn_stats)
            theirs.apply(torch.ao.nn.intrinsic.qat.freeze_bn_stats)
    for (name, a), (_, b) in zip(ours.named_parameters(), theirs.named_parameters()):
        np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-3, atol=1e-4, err_msg=name)
    ours.eval(), theirs.eval()
    out_ours = ours(ember.tensor(_data(9))).detach().numpy()
    out_theirs = theirs(torch.from_numpy(_data(9))).detach().numpy()
    np.testing.assert_allclose(out_ours, out_theirs, rtol=1e-3, atol=2e-2)
    converted_ours, converted_theirs = eq.convert(ours), tq.convert(theirs)
    # trained weights differ by float rounding, so compare each library's quantized weights with the other's
    # quantization of its own float weights: the steps agree except where a value sits on a rounding tie
    for name, module in _quantized_modules(converted_ours).items():
        theirs_w = _quantized_modules(converted_theirs)[name].weight().int_repr().numpy().astype(int)
        assert np.mean(module.weight().int_repr().numpy().astype(int) != theirs_w) < 0.05
    out = converted_theirs(torch.from_numpy(_data(11)))
    buffer = io.BytesIO()
    torch.save(converted_theirs.state_dict(), buffer)
    buffer.seek(0)
    converted_ours.load_state_dict(ember.load(buffer))
    np.testing.assert_array_equal(converted_ours(ember.tensor(_data(11))).numpy().view(np.int32),
                                  out.numpy().view(np.int32))


def _language_model(lib: object, vocab: int = 50, hidden: int = 24) -> object:
    nn = lib.nn

    class LSTMModel(nn.Module):
        """The tutorial's word language model, small: embedding, LSTM, linear decoder."""

        def __init__(self) -> None:
            super().__init__()
            self.drop = nn.Dropout(0.5)
            self.encoder = nn.Embedding(vocab, hidden)
            self.rnn = nn.LSTM(hidden, hidden, 2, dropout=0.5)
            self.decoder = nn.Linear(hidden, vocab)

        def forward(self, tokens: object, hidden_state: object) -> tuple:
            emb = self.drop(self.encoder(tokens))
            output, hidden_state = self.rnn(emb, hidden_state)
            return self.decoder(self.drop(output)), hidden_state

    return LSTMModel()


def test_dynamic_quantization_tutorial_flow_matches_torch() -> None:
    ember.manual_seed(4)
    ours, theirs = _language_model(ember), _language_model(torch)
    theirs.load_state_dict({k: torch.from_numpy(v.detach().numpy().copy()) for k, v in ours.state_dict().items()})
    ours.eval(), theirs.eval()
    q_ours = eq.quantize_dynamic(ours, {ember.nn.Linear}, dtype=ember.qint8)
    q_theirs = tq.quantize_dynamic(theirs, {torch.nn.Linear}, dtype=torch.qint8)
    assert repr(q_ours.decoder).replace("ember.", "torch.") == repr(q_theirs.decoder)
    np.testing.assert_array_equal(q_ours.decoder.weight().int_repr().numpy(),
                                  q_theirs.decoder.weight().int_repr().numpy())
    assert q_ours.decoder.weight().q_scale() == q_theirs.decoder.weight().q_scale()
    tokens = np.random.default_rng(5).integers(0, 50, (7, 3))
    zeros = np.zeros((2, 3, 24), np.float32)
    out_ours, _ = q_ours(ember.tensor(tokens), (ember.tensor(zeros), ember.tensor(zeros)))
    out_theirs, _ = q_theirs(torch.from_numpy(tokens), (torch.from_numpy(zeros), torch.from_numpy(zeros)))
    np.testing.assert_allclose(out_ours.detach().numpy(), out_theirs.detach().numpy(), rtol=1e-4, atol=5e-3)
    # the dynamic decoder alone, on the same float input: the same bits
    features = np.random.default_rng(6).standard_normal((21, 24)).astype(np.float32)
    np.testing.assert_array_equal(q_ours.decoder(ember.tensor(features)).numpy().view(np.int32),
                                  q_theirs.decoder(torch.from_numpy(features)).detach().numpy().view(np.int32))
    with pytest.warns(UserWarning, match="LSTM"):
        eq.quantize_dynamic(ours, {ember.nn.LSTM, ember.nn.Linear})
