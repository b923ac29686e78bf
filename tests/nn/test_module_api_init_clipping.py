"""Module API behaviour (registration, state_dict, hooks, modes, dtype moves, repr), init statistics and
gradient clipping, checked against torch 2.13 CPU and closed-form statistics."""
from __future__ import annotations

import math

import numpy as np
import pytest

import ember
import ember.nn as enn
from ember.nn import init

torch = pytest.importorskip("torch")
tnn = torch.nn


# ---- architectures built identically in both frameworks -------------------------------------------
def _cnn(nn):
    return nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Dropout(0.25), nn.Flatten(), nn.Linear(8 * 4 * 4, 10))


class _Net:
    """A model with nested children, a shared module and several layer kinds, written once for both."""

    @staticmethod
    def build(nn):
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.embed = nn.Embedding(20, 8, padding_idx=0)
                self.rnn = nn.LSTM(8, 6, num_layers=2, batch_first=True, bidirectional=True)
                self.gru = nn.GRU(12, 5)
                self.attn = nn.MultiheadAttention(8, 2, kdim=4, vdim=3, bias=False)
                self.encoder = nn.TransformerEncoder(nn.TransformerEncoderLayer(8, 2, 16), 2, norm=nn.LayerNorm(8),
                                                     enable_nested_tensor=False)
                self.bn = nn.BatchNorm1d(5, affine=False)
                self.bn_nostats = nn.BatchNorm1d(5, track_running_stats=False)
                self.heads = nn.ModuleDict({"a": nn.Linear(5, 2), "b": nn.Sequential(nn.Linear(5, 3), nn.Tanh())})
                self.blocks = nn.ModuleList([nn.Conv1d(2, 4, 3), nn.LayerNorm([4, 7], bias=False)])
                self.loss = nn.CrossEntropyLoss(weight=nn.Parameter(torch_or_ember(nn).ones(3)).detach())
                self.shared = self.heads["a"]

        return Net()


def torch_or_ember(nn):
    return torch if nn is tnn else ember


@pytest.fixture(scope="module")
def nets():
    return _Net.build(enn), _Net.build(tnn)


def test_state_dict_keys_and_shapes_match_torch(nets):
    e_net, t_net = nets
    e_state, t_state = e_net.state_dict(), t_net.state_dict()
    assert list(e_state) == list(t_state)
    for key, value in t_state.items():
        assert tuple(e_state[key].shape) == tuple(value.shape), key
        assert e_state[key].dtype.name == str(value.dtype).replace("torch.", ""), key


def test_traversal_names_match_torch(nets):
    e_net, t_net = nets
    assert [n for n, _ in e_net.named_parameters()] == [n for n, _ in t_net.named_parameters()]
    assert [n for n, _ in e_net.named_buffers()] == [n for n, _ in t_net.named_buffers()]
    assert [n for n, _ in e_net.named_modules()] == [n for n, _ in t_net.named_modules()]
    assert [n for n, _ in e_net.named_children()] == [n for n, _ in t_net.named_children()]
    assert ([n for n, _ in e_net.named_parameters(remove_duplicate=False)]
            == [n for n, _ in t_net.named_parameters(remove_duplicate=False)])
    assert ([n for n, _ in e_net.named_parameters(prefix="m", recurse=False)]
            == [n for n, _ in t_net.named_parameters(prefix="m", recurse=False)])
    assert [n for n, _ in e_net.rnn.named_parameters(prefix="x")] == [n for n, _ in
                                                                       t_net.rnn.named_parameters(prefix="x")]
    assert len(list(e_net.parameters())) == len(list(t_net.parameters()))
    e_order, t_order = [], []
    e_net.apply(lambda m: e_order.append(type(m).__name__))
    t_net.apply(lambda m: t_order.append(type(m).__name__))
    assert e_order == t_order


def test_repr_matches_torch():
    def build(nn):
        return nn.Sequential(
            _cnn(nn), nn.Embedding(10, 3, padding_idx=0), nn.LSTM(4, 8, num_layers=2, batch_first=True,
                                                                     bidirectional=True),
            nn.GRU(3, 4), nn.RNN(3, 4, nonlinearity="relu", bias=False), nn.LayerNorm(6), nn.GELU(),
            nn.Softmax(dim=1), nn.LogSoftmax(dim=-1), nn.LeakyReLU(0.2), nn.SiLU(), nn.Sigmoid(),
            nn.Conv1d(2, 4, 3, stride=2, padding=1, bias=False), nn.AvgPool2d(2), nn.AdaptiveAvgPool2d((1, 1)),
            nn.Identity(), nn.Unflatten(1, (2, 3)), nn.MSELoss(), nn.BCEWithLogitsLoss(),
            nn.TransformerEncoderLayer(8, 2, 16, batch_first=True),
        )

    assert repr(build(enn)) == repr(build(tnn))


def test_parameter_basics():
    p = enn.Parameter(ember.tensor([1.0, 2.0]))
    assert isinstance(p, ember.Tensor) and p.requires_grad and p.is_leaf
    assert repr(p) == repr(tnn.Parameter(torch.tensor([1.0, 2.0])))
    assert not enn.Parameter(ember.zeros(2), requires_grad=False).requires_grad
    assert type(p * 2) is ember.Tensor  # ops return plain tensors


def test_setattr_getattr_delattr_registration():
    m = enn.Module()
    m.w = enn.Parameter(ember.zeros(2))
    m.child = enn.Linear(2, 2)
    m.register_buffer("stat", ember.ones(3))
    m.register_buffer("scratch", ember.ones(1), persistent=False)
    m.plain = ember.ones(1)  # a plain tensor attribute is not state
    assert list(m.state_dict()) == ["w", "stat", "child.weight", "child.bias"]
    assert [n for n, _ in m.named_buffers()] == ["stat", "scratch"]
    assert m.w is m._parameters["w"] and m.child is m._modules["child"]
    m.stat = ember.zeros(3)  # re-assigning a buffer keeps it a buffer
    assert float(m.state_dict()["stat"].sum()) == 0.0
    with pytest.raises(TypeError, match="parameter 'w'"):
        m.w = ember.zeros(2)
    m.w = None
    assert "w" not in m.state_dict()
    del m.child
    assert not hasattr(m, "child") and "child.weight" not in m.state_dict()
    with pytest.raises(AttributeError, match="no attribute 'missing'"):
        _ = m.missing
    with pytest.raises(KeyError, match="already exists"):
        m.register_buffer("plain", ember.ones(1))

    class NoInit(enn.Module):
        def __init__(self):
            self.w = enn.Parameter(ember.zeros(1))

    with pytest.raises(AttributeError, match="before Module.__init__"):
        NoInit()


def test_load_state_dict_strict_errors_name_keys():
    model = enn.Sequential(enn.Linear(3, 2), enn.BatchNorm1d(2))
    state = model.state_dict()
    broken = {k: v for k, v in state.items() if k != "0.bias"}
    broken["extra.weight"] = ember.zeros(1)
    with pytest.raises(RuntimeError) as error:
        model.load_state_dict(broken)
    message = str(error.value)
    assert 'Missing key(s) in state_dict: "0.bias"' in message
    assert 'Unexpected key(s) in state_dict: "extra.weight"' in message
    result = model.load_state_dict(broken, strict=False)
    assert result.missing_keys == ["0.bias"] and result.unexpected_keys == ["extra.weight"]
    bad_shape = dict(state)
    bad_shape["0.weight"] = ember.zeros(4, 3)
    with pytest.raises(RuntimeError, match=r"size mismatch for 0\.weight"):
        model.load_state_dict(bad_shape)


def test_load_state_dict_copies_values_and_old_batchnorm_checkpoints():
    src, dst = enn.Sequential(enn.Linear(3, 2), enn.BatchNorm1d(2)), enn.Sequential(enn.Linear(3, 2),
                                                                                      enn.BatchNorm1d(2))
    weight_before = dst[0].weight
    state = {k: v for k, v in src.state_dict().items() if not k.endswith("num_batches_tracked")}
    dst.load_state_dict(state)  # PyTorch accepts checkpoints from before num_batches_tracked
    assert dst[0].weight is weight_before  # loaded in place: optimizers keep their references
    np.testing.assert_array_equal(dst[0].weight.detach().numpy(), src[0].weight.detach().numpy())
    # NumPy arrays load too (e.g. straight from safetensors.numpy.load_file)
    dst.load_state_dict({k: np.asarray(v.numpy()) for k, v in src.state_dict().items()})


def test_state_dict_values_share_memory_and_are_detached():
    lin = enn.Linear(2, 2)
    state = lin.state_dict()
    assert not state["weight"].requires_grad
    with ember.no_grad():
        lin.weight.fill_(3.0)
    assert float(state["weight"].sum()) == 12.0
    assert lin.state_dict(keep_vars=True)["weight"] is lin.weight


def test_forward_hooks_and_removable_handles():
    lin = enn.Linear(2, 2)
    calls = []
    pre = lin.register_forward_pre_hook(lambda m, args: (args[0] * 0,))
    post = lin.register_forward_hook(lambda m, args, out: out + 100)
    first = lin.register_forward_hook(lambda m, args, out: calls.append("first"), prepend=True)
    kw = lin.register_forward_pre_hook(lambda m, args, kwargs: calls.append(sorted(kwargs)), with_kwargs=True)
    out = lin(ember.ones(1, 2))
    expected = lin.bias.detach().numpy() + 100
    np.testing.assert_allclose(out.detach().numpy()[0], expected, rtol=1e-6)
    assert calls == [[], "first"]
    for handle in (pre, post, first, kw):
        handle.remove()
    x = ember.ones(1, 2)
    np.testing.assert_allclose(lin(x).detach().numpy(), (x.matmul(lin.weight.t()) + lin.bias).detach().numpy())
    assert calls == [[], "first"]


def test_train_eval_affect_dropout_and_batchnorm():
    model = enn.Sequential(enn.Dropout(0.5), enn.BatchNorm1d(4))
    assert model.training and model[0].training
    model.eval()
    assert not model[0].training and not model[1].training
    x = ember.randn(64, 4) * 3 + 1
    out = model(x)  # eval: identity dropout, running stats (0, 1) -> x / sqrt(1 + eps)
    np.testing.assert_allclose(_array(out), _array(x) / math.sqrt(1 + 1e-5), rtol=1e-5)
    model.train()
    ember.manual_seed(0)
    out = model[0](ember.ones(1000))
    values = set(np.round(out.numpy(), 5).tolist())
    assert values == {0.0, 2.0} and 350 < int((out == 0).sum()) < 650
    y = _array(model[1](x))  # train: batch statistics
    np.testing.assert_allclose(y.mean(0), 0, atol=1e-5)
    np.testing.assert_allclose(y.std(0), 1, atol=1e-3)
    assert int(model[1].num_batches_tracked) == 1
    np.testing.assert_allclose(model[1].running_mean.numpy(), 0.1 * x.numpy().mean(0), rtol=1e-5, atol=1e-6)


def test_to_dtype_keeps_parameter_identity_and_integer_buffers():
    model = enn.Sequential(enn.Linear(3, 4), enn.BatchNorm1d(4))
    weight = model[0].weight
    model(ember.randn(5, 3)).sum().backward()
    model.to(ember.float64)
    assert model[0].weight is weight and weight.dtype == ember.float64 and weight.requires_grad
    assert weight.grad.dtype == ember.float64
    assert model[1].running_mean.dtype == ember.float64
    assert model[1].num_batches_tracked.dtype == ember.int64
    assert model(ember.randn(5, 3, dtype=ember.float64)).dtype == ember.float64
    assert model.float()[0].weight.dtype == ember.float32
    assert model.double()[0].bias.dtype == ember.float64
    assert model.to("cpu") is model and model.cpu() is model
    with pytest.raises(TypeError, match="floating point"):
        model.to(ember.int32)


def test_zero_grad_and_requires_grad():
    lin = enn.Linear(2, 2)
    lin(ember.ones(1, 2)).sum().backward()
    lin.zero_grad(set_to_none=False)
    assert float(lin.weight.grad.abs().sum()) == 0.0
    lin.zero_grad()
    assert lin.weight.grad is None
    lin.requires_grad_(False)
    assert not any(p.requires_grad for p in lin.parameters())


def test_containers():
    seq = enn.Sequential(enn.Linear(2, 3), enn.ReLU(), enn.Linear(3, 1))
    assert len(seq) == 3 and isinstance(seq[-1], enn.Linear) and isinstance(seq[1:], enn.Sequential)
    t_seq = tnn.Sequential(tnn.Linear(2, 3), tnn.ReLU(), tnn.Linear(3, 1))
    assert list(seq[1:].state_dict()) == list(t_seq[1:].state_dict())  # slices keep the names
    seq.append(enn.Sigmoid())
    assert len(seq) == 4 and seq(ember.ones(5, 2)).shape == (5, 1)
    del seq[1]
    assert [type(m).__name__ for m in seq] == ["Linear", "Linear", "Sigmoid"]
    assert list(seq._modules) == ["0", "1", "2"]
    with pytest.raises(IndexError):
        seq[3]
    layers = enn.ModuleList([enn.Linear(2, 2) for _ in range(3)])
    layers.append(enn.Tanh())
    assert len(layers) == 4 and len(list(layers.parameters())) == 6 and isinstance(layers[-2:], enn.ModuleList)
    heads = enn.ModuleDict({"a": enn.Linear(1, 1)})
    heads["b"] = enn.Linear(1, 2)
    assert list(heads.keys()) == ["a", "b"] and "b" in heads and len(heads) == 2
    params = enn.ParameterList([enn.Parameter(ember.zeros(2)), ember.ones(3)])
    assert [tuple(p.shape) for p in params] == [(2,), (3,)] and all(isinstance(p, enn.Parameter) for p in params)
    assert list(enn.ParameterDict({"x": ember.zeros(1)}).state_dict()) == ["x"]


def test_sequential_from_ordered_dict_names():
    from collections import OrderedDict

    net = enn.Sequential(OrderedDict([("fc", enn.Linear(2, 2)), ("act", enn.ReLU())]))
    assert list(net.state_dict()) == ["fc.weight", "fc.bias"] and net.fc is net[0]


# ---- initialization ------------------------------------------------------------------------------
def _array(t):
    return np.asarray(t.detach().numpy(), dtype=np.float64)


def test_fan_and_gain_match_torch():
    for shape in [(5, 7), (8, 3, 3, 3), (4, 2, 5)]:
        assert init._calculate_fan_in_and_fan_out(ember.empty(*shape)) == \
            tnn.init._calculate_fan_in_and_fan_out(torch.empty(*shape))
    for name, param in [("relu", None), ("tanh", None), ("leaky_relu", None), ("leaky_relu", 0.2),
                        ("linear", None), ("selu", None), ("sigmoid", None)]:
        assert init.calculate_gain(name, param) == pytest.approx(tnn.init.calculate_gain(name, param))
    with pytest.raises(ValueError):
        init._calculate_fan_in_and_fan_out(ember.empty(3))


def test_init_distributions_statistics():
    ember.manual_seed(0)
    w = ember.empty(400, 300)
    bound = math.sqrt(6 / 300)  # kaiming uniform, relu, fan_in
    values = _array(init.kaiming_uniform_(w, nonlinearity="relu"))
    assert values.max() <= bound and values.min() >= -bound
    assert values.std() == pytest.approx(bound / math.sqrt(3), rel=0.02)
    values = _array(init.kaiming_normal_(w, mode="fan_out", nonlinearity="relu"))
    assert values.std() == pytest.approx(math.sqrt(2 / 400), rel=0.02) and abs(values.mean()) < 1e-3
    values = _array(init.xavier_uniform_(w, gain=2.0))
    bound = 2.0 * math.sqrt(6 / 700)
    assert values.max() <= bound and values.min() >= -bound
    assert values.std() == pytest.approx(bound / math.sqrt(3), rel=0.02)
    values = _array(init.xavier_normal_(w))
    assert values.std() == pytest.approx(math.sqrt(2 / 700), rel=0.02)
    values = _array(init.trunc_normal_(w, mean=1.0, std=2.0, a=-1.0, b=2.0))
    assert values.min() >= -1.0 and values.max() <= 2.0
    from scipy import stats

    expected = stats.truncnorm((-1 - 1) / 2, (2 - 1) / 2, loc=1, scale=2)
    assert values.mean() == pytest.approx(expected.mean(), abs=0.01)
    assert values.std() == pytest.approx(expected.std(), rel=0.02)
    values = _array(init.uniform_(w, -2, 3))
    assert values.min() >= -2 and values.max() <= 3 and values.mean() == pytest.approx(0.5, abs=0.02)
    values = _array(init.normal_(w, 1.5, 0.5))
    assert values.mean() == pytest.approx(1.5, abs=0.01) and values.std() == pytest.approx(0.5, rel=0.02)


def test_init_deterministic_fills():
    w = ember.empty(3, 5)
    np.testing.assert_array_equal(_array(init.eye_(w)), np.eye(3, 5))
    np.testing.assert_array_equal(_array(init.constant_(w, 0.25)), np.full((3, 5), 0.25))
    np.testing.assert_array_equal(_array(init.zeros_(w)), np.zeros((3, 5)))
    np.testing.assert_array_equal(_array(init.ones_(w)), np.ones((3, 5)))
    for shape in [(6, 4), (3, 8), (4, 2, 3)]:
        q = _array(init.orthogonal_(ember.empty(*shape), gain=2.0)).reshape(shape[0], -1)
        small = min(q.shape)
        gram = q @ q.T if q.shape[0] == small else q.T @ q
        np.testing.assert_allclose(gram, 4.0 * np.eye(small), atol=1e-5)
    t_w = torch.empty(4, 2, 3)
    tnn.init.dirac_(t_w)
    np.testing.assert_array_equal(_array(init.dirac_(ember.empty(4, 2, 3))), t_w.numpy())


def test_init_is_in_place_untracked_and_seeded():
    p = enn.Parameter(ember.zeros(4, 4))
    out = init.normal_(p)
    assert out is p and p.grad_fn is None and p.requires_grad
    ember.manual_seed(3)
    a = _array(enn.Linear(5, 5).weight)
    ember.manual_seed(3)
    b = _array(enn.Linear(5, 5).weight)
    np.testing.assert_array_equal(a, b)
    generator = ember.Generator().manual_seed(1)
    c = _array(init.uniform_(ember.empty(3), generator=generator))
    d = _array(init.uniform_(ember.empty(3), generator=ember.Generator().manual_seed(1)))
    np.testing.assert_array_equal(c, d)


def test_default_layer_initialization():
    ember.manual_seed(0)
    lin = enn.Linear(256, 300)
    bound = 1 / math.sqrt(256)  # kaiming_uniform_(a=sqrt(5)) == U(-1/sqrt(fan_in), 1/sqrt(fan_in))
    for values in (_array(lin.weight), _array(lin.bias)):
        assert values.max() <= bound and values.min() >= -bound
    assert _array(lin.weight).std() == pytest.approx(bound / math.sqrt(3), rel=0.02)
    conv = enn.Conv2d(16, 32, 3)
    bound = 1 / math.sqrt(16 * 9)
    assert np.abs(_array(conv.weight)).max() <= bound and np.abs(_array(conv.bias)).max() <= bound
    assert _array(conv.weight).std() == pytest.approx(bound / math.sqrt(3), rel=0.05)
    lstm = enn.LSTM(10, 64, num_layers=2)
    for p in lstm.parameters():
        assert np.abs(_array(p)).max() <= 1 / 8
    assert _array(lstm.weight_hh_l1).std() == pytest.approx(1 / 8 / math.sqrt(3), rel=0.03)
    emb = enn.Embedding(1000, 64, padding_idx=3)
    values = _array(emb.weight)
    assert values[3].tolist() == [0.0] * 64 and values.std() == pytest.approx(1.0, rel=0.02)
    mha = enn.MultiheadAttention(64, 4)
    bound = math.sqrt(6 / (64 + 192))
    assert np.abs(_array(mha.in_proj_weight)).max() <= bound
    assert _array(mha.in_proj_weight).std() == pytest.approx(bound / math.sqrt(3), rel=0.03)
    assert not _array(mha.in_proj_bias).any() and not _array(mha.out_proj.bias).any()
    bn = enn.BatchNorm2d(3)
    assert _array(bn.weight).tolist() == [1, 1, 1] and _array(bn.running_var).tolist() == [1, 1, 1]


# ---- utils ------------------------------------------------------------------------------------------
def _grads_pair(seed: int):
    rng = np.random.default_rng(seed)
    arrays = [rng.standard_normal(s).astype(np.float32) * 3 for s in [(4, 3), (5,), (2, 2, 2)]]
    e_params = [enn.Parameter(ember.zeros(*a.shape)) for a in arrays]
    t_params = [tnn.Parameter(torch.zeros(*a.shape)) for a in arrays]
    for e, t, a in zip(e_params, t_params, arrays):
        e.grad, t.grad = ember.tensor(a), torch.tensor(a)
    return e_params, t_params


@pytest.mark.parametrize("norm_type", [2.0, 1.0, float("inf"), 3.0])
@pytest.mark.parametrize("max_norm", [0.5, 1e4])
def test_clip_grad_norm_matches_torch(norm_type, max_norm):
    e_params, t_params = _grads_pair(0)
    e_total = enn.utils.clip_grad_norm_(e_params, max_norm, norm_type=norm_type)
    t_total = tnn.utils.clip_grad_norm_(t_params, max_norm, norm_type=norm_type)
    assert float(e_total) == pytest.approx(float(t_total), rel=1e-5)
    for e, t in zip(e_params, t_params):
        np.testing.assert_allclose(e.grad.numpy(), t.grad.numpy(), rtol=1e-5, atol=1e-7)


def test_clip_grad_norm_nonfinite_and_value():
    e_params, _ = _grads_pair(1)
    e_params[0].grad = e_params[0].grad * float("nan")
    with pytest.raises(RuntimeError, match="non-finite"):
        enn.utils.clip_grad_norm_(e_params, 1.0, error_if_nonfinite=True)
    e_params, t_params = _grads_pair(2)
    enn.utils.clip_grad_value_(e_params, 0.7)
    tnn.utils.clip_grad_value_(t_params, 0.7)
    for e, t in zip(e_params, t_params):
        np.testing.assert_array_equal(e.grad.numpy(), t.grad.numpy())


def test_clip_grad_norm_after_backward_and_vector_conversion():
    lin = enn.Linear(3, 2)
    (lin(ember.ones(4, 3)) * 10).sum().backward()  # gradients come back as broadcast results
    total = enn.utils.clip_grad_norm_(lin.parameters(), 1.0)
    assert float(total) > 1.0
    norm = math.sqrt(sum(float((p.grad * p.grad).sum()) for p in lin.parameters()))
    assert norm == pytest.approx(1.0, rel=1e-4)
    vec = enn.utils.parameters_to_vector(lin.parameters())
    assert tuple(vec.shape) == (8,)
    enn.utils.vector_to_parameters(ember.arange(8).float(), lin.parameters())
    assert _array(lin.weight).ravel().tolist() == [0, 1, 2, 3, 4, 5] and _array(lin.bias).tolist() == [6, 7]


def test_losses_match_torch():
    rng = np.random.default_rng(0)
    logits = rng.standard_normal((6, 4)).astype(np.float32)
    target = np.array([0, 3, 1, 2, 2, 1])
    weight = np.array([1.0, 2.0, 0.5, 1.5], dtype=np.float32)
    probs = 1 / (1 + np.exp(-logits))
    binary = (rng.random((6, 4)) > 0.5).astype(np.float32)
    cases = [
        ("CrossEntropyLoss", dict(weight="w", label_smoothing=0.1), logits, target),
        ("NLLLoss", dict(weight="w", reduction="sum"), logits, target),
        ("MultiMarginLoss", dict(margin=0.5, p=2), logits, target),
        ("MSELoss", dict(), logits, binary),
        ("L1Loss", dict(reduction="none"), logits, binary),
        ("BCELoss", dict(), probs, binary),
        ("BCEWithLogitsLoss", dict(pos_weight="w"), logits, binary),
    ]
    for name, kwargs, x, y in cases:
        e_kwargs = {k: (ember.tensor(weight) if v == "w" else v) for k, v in kwargs.items()}
        t_kwargs = {k: (torch.tensor(weight) if v == "w" else v) for k, v in kwargs.items()}
        e_loss = getattr(enn, name)(**e_kwargs)(ember.tensor(x), ember.tensor(y))
        t_loss = getattr(tnn, name)(**t_kwargs)(torch.tensor(x), torch.tensor(y))
        np.testing.assert_allclose(e_loss.numpy(), t_loss.numpy(), rtol=1e-5, atol=1e-6, err_msg=name)
    assert list(enn.CrossEntropyLoss(weight=ember.ones(3)).state_dict()) == ["weight"]


def test_positional_modules():
    pe = enn.PositionalEncoding(6, max_len=10)
    x = ember.zeros(4, 2, 6)  # (L, N, E)
    out = _array(pe(x))
    pos = np.arange(4)[:, None]
    freq = 10000 ** (-np.arange(0, 6, 2) / 6)
    np.testing.assert_allclose(out[:, 0, 0::2], np.sin(pos * freq), atol=1e-6)
    np.testing.assert_allclose(out[:, 1, 1::2], np.cos(pos * freq), atol=1e-6)
    assert list(pe.state_dict()) == [] and list(pe.parameters()) == []
    with pytest.raises(ValueError, match="max_len"):
        pe(ember.zeros(11, 1, 6))
    learned = enn.LearnedPositionalEmbedding(8, 6, batch_first=True)
    y = ember.randn(2, 5, 6)
    np.testing.assert_allclose(_array(learned(y)), _array(y) + _array(learned.weight)[None, :5], rtol=1e-6)
    learned(y).sum().backward()
    np.testing.assert_allclose(_array(learned.weight.grad)[:5], 2.0)
    np.testing.assert_allclose(_array(learned.weight.grad)[5:], 0.0)


def test_rnn_input_errors_are_clear():
    lstm = enn.LSTM(3, 4, batch_first=True)
    with pytest.raises(RuntimeError, match="input_size"):
        lstm(ember.randn(2, 5, 7))
    with pytest.raises(ValueError, match="lengths"):
        lstm(ember.randn(2, 5, 3), lengths=[6, 1])
    with pytest.raises(RuntimeError, match="hidden"):
        lstm(ember.randn(2, 5, 3), (ember.zeros(1, 3, 4), ember.zeros(1, 3, 4)))


def test_rnn_dropout_only_between_layers_in_training():
    lstm = enn.LSTM(3, 4, num_layers=2, dropout=0.5)
    x = ember.randn(5, 2, 3)
    with ember.no_grad():
        lstm.eval()
        np.testing.assert_array_equal(_array(lstm(x)[0]), _array(lstm(x)[0]))
        lstm.train()
        ember.manual_seed(0)
        first = _array(lstm(x)[0])
        ember.manual_seed(1)
        assert not np.allclose(first, _array(lstm(x)[0]))
        single = enn.GRU(3, 4, num_layers=1, dropout=0.0).train()
        np.testing.assert_array_equal(_array(single(x)[0]), _array(single.eval()(x)[0]))


def test_conv_transpose_output_size_matches_torch():
    e_conv, t_conv = enn.ConvTranspose2d(2, 3, 3, stride=2, padding=1), tnn.ConvTranspose2d(2, 3, 3, stride=2,
                                                                                           padding=1)
    e_conv.load_state_dict({k: ember.tensor(v.numpy()) for k, v in t_conv.state_dict().items()})
    x = np.random.default_rng(0).standard_normal((1, 2, 5, 5)).astype(np.float32)
    e_out = e_conv(ember.tensor(x), output_size=(10, 10))
    t_out = t_conv(torch.tensor(x), output_size=(10, 10))
    assert tuple(e_out.shape) == tuple(t_out.shape) == (1, 3, 10, 10)
    np.testing.assert_allclose(_array(e_out), t_out.detach().numpy(), atol=1e-5)
    with pytest.raises(ValueError, match="output_size"):
        e_conv(ember.tensor(x), output_size=(14, 14))
