"""``ember.jit.load`` of TorchScript archives written by real ``torch.jit.save`` (torch 2.13), run by ember's
interpreter: outputs, gradients, parameters, buffers and module structure must equal torch's on the same inputs.

Every archive is made here by torch into ``tmp_path`` (nothing made by others is committed). Models: an MLP and a
CNN with batch norm (traced and scripted), an LSTM and a GRU, a Transformer encoder layer (grad mode, eval without
grad: PyTorch's fused fast path, masks), a ResNet-18-shaped network (torchvision's when it imports, else the same
architecture written here), modules with loops/branches/submodules/containers/error messages, float64 models.
"""
from __future__ import annotations

import io
import math

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")
nn = torch.nn


# ---- helpers --------------------------------------------------------------------------------------------------
def _save(tmp_path, module, how, example=None, name="m"):
    """torch.jit.save of ``module`` scripted or traced (on ``example``) into tmp_path; returns the path."""
    path = tmp_path / f"{name}_{how}.pt"
    made = torch.jit.script(module) if how == "script" else torch.jit.trace(module, example, check_trace=False)
    torch.jit.save(made, str(path))
    return path


def _e(x):
    return ember.tensor(x.detach().numpy()) if isinstance(x, torch.Tensor) else x


def _flat(out):
    if isinstance(out, (tuple, list)):
        return [leaf for item in out for leaf in _flat(item)]
    return [out]


def _tolerance(dtype):
    return (1e-10, 1e-10) if dtype == torch.float64 else (2e-5, 2e-5)


def _check_close(ours, theirs, dtype, what):
    rtol, atol = _tolerance(dtype)
    for k, (a, b) in enumerate(zip(_flat(ours), _flat(theirs))):
        if isinstance(b, torch.Tensor):
            assert isinstance(a, ember.Tensor), f"{what}[{k}]: ember gave {type(a).__name__}"
            assert tuple(a.shape) == tuple(b.shape), f"{what}[{k}]: shape {tuple(a.shape)} vs {tuple(b.shape)}"
            np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=rtol, atol=atol, err_msg=what)
        else:
            assert a == b, f"{what}[{k}]: {a!r} vs {b!r}"
    assert len(_flat(ours)) == len(_flat(theirs)), what


def _compare(path, inputs, dtype=torch.float32, grads=True, kwargs=None):
    """Load ``path`` in both libraries, run them on ``inputs`` and compare outputs, input and parameter
    gradients, and the state afterwards (buffers that forward updates, such as batch norm's running stats)."""
    kwargs = kwargs or {}
    theirs, ours = torch.jit.load(str(path)), ember.jit.load(path)
    assert [n for n, _ in ours.named_parameters()] == [n for n, _ in theirs.named_parameters()]
    assert list(ours.state_dict()) == list(theirs.state_dict())
    assert [n for n, _ in ours.named_modules()] == [n for n, _ in theirs.named_modules()]
    t_in = [x.clone().requires_grad_(grads and x.is_floating_point()) for x in inputs]
    e_in = [_e(x).requires_grad_(grads and x.is_floating_point()) for x in inputs]
    t_out = theirs(*t_in, **kwargs)
    e_out = ours(*e_in, **{k: _e(v) for k, v in kwargs.items()})
    _check_close(e_out, t_out, dtype, "output")
    if grads:
        gen = torch.Generator().manual_seed(1)
        t_loss, e_loss = 0, 0
        for a, b in zip(_flat(e_out), _flat(t_out)):
            if isinstance(b, torch.Tensor) and b.is_floating_point():
                w = torch.randn(b.shape, generator=gen, dtype=b.dtype)
                t_loss = t_loss + (b * w).sum()
                e_loss = e_loss + (a * _e(w)).sum()
        t_loss.backward()
        e_loss.backward()
        for x, y in zip(e_in, t_in):
            if y.grad is not None:
                _check_close(x.grad, y.grad, dtype, "input grad")
        t_params = dict(theirs.named_parameters())
        for name, p in ours.named_parameters():
            if t_params[name].grad is None:
                assert p.grad is None or not p.grad.abs().sum().item(), name
            else:
                _check_close(p.grad, t_params[name].grad, dtype, f"grad of {name}")
    t_state = theirs.state_dict()
    for name, value in ours.state_dict().items():
        _check_close(value, t_state[name], dtype, f"state {name} after forward")
    return ours, theirs


# ---- models -------------------------------------------------------------------------------------------------
class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(4, 16), nn.Linear(16, 3)

    def forward(self, x):
        return self.fc2(torch.tanh(self.fc1(x)))


def _cnn():
    return nn.Sequential(nn.Conv2d(3, 6, 3, padding=1), nn.BatchNorm2d(6), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Conv2d(6, 4, 3, stride=2), nn.BatchNorm2d(4), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
                         nn.Flatten(), nn.Linear(4, 5))


class RNNs(nn.Module):
    def __init__(self, bidirectional=False):
        super().__init__()
        self.lstm = nn.LSTM(4, 6, num_layers=2, batch_first=True, bidirectional=bidirectional)
        self.gru = nn.GRU(4, 3)
        self.head = nn.Linear(6 * (2 if bidirectional else 1), 2)

    def forward(self, x):
        out, (h, c) = self.lstm(x)
        g, gh = self.gru(x.transpose(0, 1))
        return self.head(out[:, -1]), h, c, g, gh


class Flow(nn.Module):
    """Loops, branches, submodules in a ModuleList and a ModuleDict, list/dict/tuple values, string errors."""

    def __init__(self):
        super().__init__()
        self.blocks = nn.ModuleList([nn.Linear(4, 4) for _ in range(3)])
        self.heads = nn.ModuleDict({"a": nn.Linear(4, 2), "b": nn.Linear(4, 2)})
        self.scales: list[float] = [0.5, 1.5, -1.0]
        self.limit = 3

    def forward(self, x, mode: str = "a"):
        if x.dim() != 2:
            raise ValueError(f"expected 2-D input, got {x.dim()}-D")
        outs: list[torch.Tensor] = []
        for k, block in enumerate(self.blocks):
            y = block(x) * self.scales[k]
            if bool(y.mean() > 0):
                y = torch.relu(y)
            else:
                y = y - 1.0
            outs.append(y)
        x = torch.stack(outs, 0).sum(0)
        steps = 0
        while steps < self.limit and float(x.abs().max()) > 0.1:
            x = x / 2
            steps += 1
        stats = {"steps": steps, "n": len(outs)}
        if mode == "a":
            out = self.heads["a"](x)
        else:
            out = self.heads["b"](x)
        return out, stats["steps"] + stats["n"], (x.shape[0], x.shape[-1])


# ---- tests --------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("how", ["trace", "script"])
def test_mlp(tmp_path, how):
    torch.manual_seed(0)
    x = torch.randn(5, 4)
    _compare(_save(tmp_path, MLP(), how, (x,)), [x])


@pytest.mark.parametrize("how", ["trace", "script"])
@pytest.mark.parametrize("train", [False, True])
def test_cnn_with_batch_norm(tmp_path, how, train):
    torch.manual_seed(1)
    model = _cnn().train(train)
    x = torch.randn(3, 3, 12, 12)
    ours, theirs = _compare(_save(tmp_path, model, how, (x,)), [x])
    assert ours.training == theirs.training == train
    ours.eval(), theirs.eval()  # mode switches reach the interpreted code (scripted batch norm reads self.training)
    _check_close(ours(_e(x)), theirs(x), torch.float32, "after eval()")


def test_lstm_gru_scripted(tmp_path):
    torch.manual_seed(2)
    x = torch.randn(3, 7, 4)
    _compare(_save(tmp_path, RNNs(), "script"), [x])


def test_bidirectional_lstm_traced(tmp_path):
    torch.manual_seed(3)
    x = torch.randn(2, 5, 4)
    _compare(_save(tmp_path, RNNs(bidirectional=True), "trace", (x,)), [x])


@pytest.mark.parametrize("how", ["trace", "script"])
def test_transformer_encoder_layer(tmp_path, how):
    torch.manual_seed(4)
    layer = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True).eval()
    x = torch.randn(2, 5, 8)
    _compare(_save(tmp_path, layer, how, (x,)), [x])


def test_transformer_fast_path_and_masks(tmp_path):
    """Scripted encoder layers in eval mode without grad take PyTorch's fused kernels
    (_transformer_encoder_layer_fwd, _native_multi_head_attention); ember composes them from its ops."""
    torch.manual_seed(5)
    encoder = nn.TransformerEncoder(nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True,
                                                               activation="gelu"), 2, enable_nested_tensor=False)
    path = _save(tmp_path, encoder.eval(), "script")
    theirs, ours = torch.jit.load(str(path)), ember.jit.load(path)
    x = torch.randn(2, 5, 8)
    padding = torch.tensor([[False] * 5, [False, False, False, True, True]])
    causal = nn.Transformer.generate_square_subsequent_mask(5)
    with torch.no_grad(), ember.no_grad():
        _check_close(ours(_e(x)), theirs(x), torch.float32, "fast path")
        _check_close(ours(_e(x), mask=_e(causal)), theirs(x, mask=causal), torch.float32, "causal mask")
    _compare(path, [x], kwargs={"src_key_padding_mask": padding})


class _Block(nn.Module):
    """torchvision's BasicBlock, written here for when torchvision cannot be imported."""

    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.downsample = None
        if stride != 1 or cin != cout:
            self.downsample = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        identity = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        return self.relu(self.bn2(self.conv2(out)) + identity)


class _ResNet18(nn.Module):
    def __init__(self, width=64, classes=1000):
        super().__init__()
        self.conv1 = nn.Conv2d(3, width, 7, 2, 3, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(3, 2, 1)
        widths = [width, width * 2, width * 4, width * 8]
        cin = width
        for k, w in enumerate(widths):
            stride = 1 if k == 0 else 2
            setattr(self, f"layer{k + 1}", nn.Sequential(_Block(cin, w, stride), _Block(w, w, 1)))
            cin = w
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(cin, classes)

    def forward(self, x):
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(torch.flatten(self.avgpool(x), 1))


def _resnet18(width=64, classes=1000):
    try:
        from torchvision.models import resnet18
        return resnet18(num_classes=classes) if width == 64 else _ResNet18(width, classes)
    except Exception:  # torchvision missing, or built for another torch (its C++ ops fail to register)
        return _ResNet18(width, classes)


@pytest.mark.parametrize("how", ["trace", pytest.param("script", marks=pytest.mark.slow)])
def test_resnet18_shaped_small(tmp_path, how):
    torch.manual_seed(6)
    model = _resnet18(width=8, classes=10).eval()
    x = torch.randn(2, 3, 32, 32)
    _compare(_save(tmp_path, model, how, (x,)), [x])


@pytest.mark.slow
def test_resnet18_traced_full_size(tmp_path):
    torch.manual_seed(7)
    model = _resnet18().eval()
    x = torch.randn(1, 3, 64, 64)
    _compare(_save(tmp_path, model, "trace", (x,)), [x])


def test_control_flow_containers_and_errors(tmp_path):
    torch.manual_seed(8)
    path = _save(tmp_path, Flow(), "script")
    x = torch.randn(4, 4)
    _compare(path, [x])
    _compare(path, [x], kwargs={"mode": "b"})
    theirs, ours = torch.jit.load(str(path)), ember.jit.load(path)
    with pytest.raises(Exception) as t_error:
        theirs(torch.randn(2, 2, 2))
    with pytest.raises(ValueError, match="expected 2-D input, got 3-D") as e_error:
        ours(ember.randn(2, 2, 2))
    assert "expected 2-D input, got 3-D" in str(t_error.value)
    assert ours.limit == theirs.limit == 3 and ours.scales == theirs.scales


@pytest.mark.parametrize("how", ["trace", "script"])
def test_float64_models_agree_to_1e_10(tmp_path, how):
    torch.manual_seed(9)
    x = torch.randn(2, 3, 12, 12, dtype=torch.float64)
    _compare(_save(tmp_path, _cnn().double().train(), how, (x,)), [x], dtype=torch.float64)
    seq = torch.randn(3, 7, 4, dtype=torch.float64)
    _compare(_save(tmp_path, RNNs().double(), "script", name="rnn"), [seq], dtype=torch.float64)


def test_constants_buffers_and_dtypes(tmp_path):
    """A traced tensor constant (constants.pkl, CONSTANTS.c0), integer dtype codes (torch.to(x, 6)), buffers."""

    class Consts(nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("offset", torch.arange(3.0))

        def forward(self, x):
            y = x + torch.tensor([1.0, 2.0, 3.0]) * x.size(0)
            return y.to(torch.float64) + self.offset, (y > 1).to(torch.int32), x.long().sum(1)

    x = torch.randn(2, 3)
    _compare(_save(tmp_path, Consts(), "trace", (x,)), [x], grads=False)
    _compare(_save(tmp_path, Consts(), "script"), [x], grads=False)


def test_loaded_module_is_an_ember_module(tmp_path):
    """Parameters train with ember's optimizers; state_dict round-trips; file objects load; extra files."""
    torch.manual_seed(10)
    scripted = torch.jit.script(MLP())
    buffer = io.BytesIO()
    torch.jit.save(scripted, buffer, _extra_files={"meta.txt": b"hello"})
    buffer.seek(0)
    extra = {"meta.txt": b"", "missing": b""}
    ours = ember.jit.load(buffer, _extra_files=extra)
    assert extra == {"meta.txt": b"hello", "missing": b""}
    assert isinstance(ours, ember.nn.Module)
    opt = ember.optim.SGD(ours.parameters(), lr=0.1)
    x, y = ember.randn(8, 4), ember.randn(8, 3)
    before = ember.nn.functional.mse_loss(ours(x), y).item()
    for _ in range(5):
        opt.zero_grad()
        ember.nn.functional.mse_loss(ours(x), y).backward()
        opt.step()
    assert ember.nn.functional.mse_loss(ours(x), y).item() < before
    fresh = MLP()
    fresh.load_state_dict({k: torch.from_numpy(v.detach().numpy().copy()) for k, v in ours.state_dict().items()})
    np.testing.assert_allclose(fresh(torch.from_numpy(x.numpy())).detach().numpy(), ours(x).detach().numpy(),
                               rtol=1e-6, atol=1e-6)


def test_code_graph_and_trace(tmp_path):
    """.code is forward's TorchScript source as saved; .graph refuses clearly; ember.jit.trace makes an ember
    graph of the interpreted module."""
    torch.manual_seed(11)
    path = _save(tmp_path, MLP(), "script")
    ours, theirs = ember.jit.load(path), torch.jit.load(str(path))
    assert ours.code.startswith("def forward(self")
    body = [line.strip() for line in ours.code.splitlines()[2:]]
    assert body == [line.strip() for line in theirs.code.splitlines()[2:]]
    with pytest.raises(AttributeError, match="no TorchScript IR graph"):
        ours.graph
    x = ember.randn(3, 4)
    traced = ember.jit.trace(ours, x)
    assert "linear" in str(traced.graph)
    np.testing.assert_allclose(traced(x).detach().numpy(), ours(x).detach().numpy(), rtol=1e-6)


def test_map_location_cpu_only(tmp_path):
    path = _save(tmp_path, MLP(), "script")
    assert isinstance(ember.jit.load(path, map_location="cpu"), ember.nn.Module)
    with pytest.raises(ValueError, match="map_location"):
        ember.jit.load(path, map_location="cuda:1")


def test_dtype_codes_match_torch():
    """ember's table of ATen ScalarType codes (how TorchScript prints dtypes) against torch's own numbering."""
    from ember.jit.torchscript.builtins import SCALAR_TYPES
    for code, name in SCALAR_TYPES.items():
        assert _scalar_type_code(getattr(torch, name)) == code, name


def _scalar_type_code(dtype):
    @torch.jit.script
    def f(x: torch.Tensor) -> int:
        return x.dtype  # TorchScript's dtype is the ScalarType integer
    return int(f(torch.empty(0, dtype=dtype)))


@pytest.mark.parametrize("kind", ["mlp_trace", "cnn_script", "rnn_script", "transformer_script"])
def test_train_in_ember_then_save_for_torch(tmp_path, kind):
    """.save writes a TorchScript archive: after SGD steps in ember, torch.jit.load of it computes what ember's
    module computes (parameters, batch-norm buffers, shared LSTM weights all carried), and ember reads it back."""
    torch.manual_seed(12)
    models = {"mlp_trace": (MLP(), "trace", (5, 4)), "cnn_script": (_cnn(), "script", (3, 3, 12, 12)),
              "rnn_script": (RNNs(), "script", (3, 7, 4)),
              "transformer_script": (nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True), "script",
                                     (2, 5, 8))}
    model, how, shape = models[kind]
    x = torch.randn(*shape)
    ours = ember.jit.load(_save(tmp_path, model, how, (x,)))
    opt = ember.optim.SGD(ours.parameters(), lr=0.05, momentum=0.9)
    for _ in range(3):
        opt.zero_grad()
        sum(o.float().pow(2).mean() for o in _flat(ours(_e(x))) if isinstance(o, ember.Tensor)).backward()
        opt.step()
    extra = {"note.txt": b"trained in ember"}
    ours.save(tmp_path / "trained.pt", _extra_files=extra)
    files = {"note.txt": ""}
    theirs = torch.jit.load(str(tmp_path / "trained.pt"), _extra_files=files)
    assert files["note.txt"] == b"trained in ember"
    ours.eval(), theirs.eval()
    probe = torch.randn(*shape)
    _check_close(ours(_e(probe)), theirs(probe), torch.float32, "torch on ember's archive")
    for name, value in theirs.state_dict().items():
        _check_close(ours.state_dict()[name], value, torch.float32, name)
    again = ember.jit.load(tmp_path / "trained.pt").eval()
    _check_close(again(_e(probe)), theirs(probe), torch.float32, "ember on its own archive")
    buffer = io.BytesIO()
    again.save(buffer)
    buffer.seek(0)
    reloaded = torch.jit.load(buffer).eval()
    for a, b in zip(_flat(reloaded(probe)), _flat(theirs(probe))):
        np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-6, atol=1e-6)


class _Accumulator:
    """A TorchScript class: construction prints as ``__torch__.X.__new__(__torch__.X)`` then ``__init__``."""

    def __init__(self, scale: float):
        self.scale = scale
        self.items: list[torch.Tensor] = []

    def add(self, x: torch.Tensor):
        self.items.append(x * self.scale)

    def total(self) -> torch.Tensor:
        return torch.stack(self.items).sum(0)


class Many(nn.Module):
    """Embedding, Conv1d, LayerNorm, GroupNorm, Optional arguments, a dict attribute iterated with string ops, a
    TorchScript class instance, max with indices, where, cumsum, an ellipsis slice."""

    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(10, 4)
        self.conv = nn.Conv1d(4, 4, 3, padding=1)
        self.norm = nn.LayerNorm(4)
        self.names: dict[str, int] = {"a": 1, "b": 2}
        self.gn = nn.GroupNorm(2, 4)

    def helper(self, x: torch.Tensor, k: int | None = None) -> torch.Tensor:
        if k is None:
            return x
        return x * k

    def forward(self, idx: torch.Tensor, mask: torch.Tensor | None = None):
        x = self.emb(idx)
        y = self.norm(self.conv(x.transpose(1, 2)).transpose(1, 2) + x)
        y = self.gn(y.transpose(1, 2)).transpose(1, 2)
        if mask is not None:
            y = y.masked_fill(mask.unsqueeze(-1), 0.0)
        keys: list[str] = []
        total = 0
        for name, v in self.names.items():
            keys.append(name.upper() + str(v))
            total += v
        acc = _Accumulator(0.5)
        for i in range(y.size(1)):
            acc.add(y[:, i])
        out = self.helper(acc.total(), total)
        out = torch.nn.functional.gelu(out) + torch.clamp(out, min=-1.0, max=1.0) ** 2
        s = y.softmax(-1).max(dim=-1)[0]
        z = torch.where(s > 0.3, s, torch.zeros_like(s)).cumsum(1)
        return out, keys, z[..., :2].flatten()


def test_classes_dicts_strings_optionals(tmp_path):
    torch.jit.script(_Accumulator)
    torch.manual_seed(13)
    path = _save(tmp_path, Many(), "script")
    idx = torch.randint(0, 10, (2, 5))
    mask = torch.tensor([[False, True, False, False, True], [False] * 5])
    theirs, ours = torch.jit.load(str(path)), ember.jit.load(path)
    t_out = theirs(idx, mask)
    e_out = ours(_e(idx), _e(mask))
    _check_close(e_out, t_out, torch.float32, "many")
    assert e_out[1] == ["A1", "B2"]
    _compare(path, [idx])
