"""nn / optim / train / compile / amp / serialization on the stand-in CUDA device, against the CPU.

Every case builds the same model from the same weights on the CPU and on device ``cuda`` (the stand-in,
whose arrays refuse silent host conversion as CuPy's do), runs the same steps and compares. The CPU path
is itself checked against PyTorch and NumPy elsewhere; here a stray ``np.`` call on device data, a host
``.item()`` read through NumPy, a tensor left on the CPU or a forgotten transfer fails.
"""
from __future__ import annotations

import copy
from typing import Any, Callable

import numpy as np
import pytest

import ember
import ember.optim
from ember import nn
from ember.backends.standin import StandinArray
from ember.data import DataLoader, TensorDataset
import ember.nn.functional as F

DEVICES = ["cpu", "cuda"]


@pytest.fixture(autouse=True)
def _standin():
    with ember.testing.standin_cuda():
        yield


def _host(t: ember.Tensor) -> np.ndarray:
    return t.detach().cpu().numpy()


def _on(device: str, module: nn.Module) -> None:
    for name, p in list(module.named_parameters()) + list(module.named_buffers()):
        assert p.device.type == device, f"{name} is on {p.device}, want {device}"
        if device == "cuda":
            assert type(p._data) is StandinArray, f"{name} holds a {type(p._data).__name__}"


def _twins(make: Callable[[], nn.Module]) -> tuple[nn.Module, nn.Module]:
    """The same model on the CPU and on the device (identical weights)."""
    ember.manual_seed(0)
    cpu = make()
    dev = copy.deepcopy(cpu).to("cuda")
    _on("cuda", dev)
    return cpu, dev


def _assert_same(a: Any, b: Any, rtol: float = 1e-5, what: str = "") -> None:
    np.testing.assert_allclose(_host(a).astype(np.float64), _host(b).astype(np.float64), rtol=rtol,
                               atol=rtol, err_msg=what)


def _train(model: nn.Module, make_opt: Callable, xs: np.ndarray, ys: np.ndarray, device: str, loss_fn: Callable,
           steps: int = 3) -> list:
    opt = make_opt(model.parameters())
    losses = []
    for _ in range(steps):
        x, y = ember.tensor(xs, device=device), ember.tensor(ys, device=device)
        opt.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


# ---- devices, transfers, errors ------------------------------------------------------------------------
def test_creation_ops_take_device_and_transfers_round_trip():
    d = ember.device("cuda")
    made = [ember.zeros(2, 3, device=d), ember.ones(2, device="cuda"), ember.full((2,), 3.0, device="cuda"),
            ember.empty(4, device="cuda"), ember.arange(5, device="cuda"), ember.linspace(0, 1, 5, device="cuda"),
            ember.eye(3, device="cuda"), ember.rand(3, device="cuda"), ember.randn(3, device="cuda"),
            ember.randint(0, 5, (4,), device="cuda"), ember.randperm(6, device="cuda"),
            ember.tensor([1.0, 2.0], device="cuda"), ember.zeros_like(ember.ones(2), device="cuda")]
    for t in made:
        assert t.device == d and t.is_cuda and type(t._data) is StandinArray
    x = ember.arange(6.0).reshape(2, 3)
    for moved in (x.cuda(), x.to("cuda"), x.to("cuda:0"), x.to(d, ember.float64)):
        assert moved.is_cuda
        np.testing.assert_array_equal(moved.cpu().numpy(), x.numpy())
    assert x.cuda().cpu().device.type == "cpu" and type(x.cuda().cpu()._data) is np.ndarray
    w = ember.tensor([1.0, 2.0, 3.0], requires_grad=True)
    (w.cuda() * 2).sum().backward()  # gradients flow back across the transfer, onto the CPU leaf
    assert w.grad.device.type == "cpu"
    np.testing.assert_array_equal(w.grad.numpy(), [2.0, 2.0, 2.0])


def test_device_tensors_refuse_silent_host_conversion():
    x = ember.ones(3, device="cuda")
    with pytest.raises(TypeError, match="can't convert cuda device type tensor to numpy. Use Tensor.cpu()"):
        np.asarray(x)
    with pytest.raises(TypeError, match="can't convert cuda"):
        x.numpy()
    with pytest.raises(TypeError, match="Implicit conversion to a NumPy array is not allowed"):
        np.asarray(x._data)
    assert x.sum().item() == 3.0 and float(x[0]) == 1.0 and x.tolist() == [1.0, 1.0, 1.0]
    assert "device='cuda'" in repr(x)


def test_mixing_devices_names_the_op_and_both_devices():
    a, b = ember.ones(3), ember.ones(3, device="cuda")
    with pytest.raises(RuntimeError, match=r"^add: .*same device.* (cpu and cuda|cuda and cpu)"):
        a + b
    with pytest.raises(RuntimeError, match=r"^matmul: .*same device.* (cpu and cuda|cuda and cpu)"):
        ember.ones(2, 3) @ ember.ones(3, 2, device="cuda")
    with pytest.raises(RuntimeError, match=r"^cat: .*same device"):
        ember.cat([a, b])
    # 0-d CPU tensors act as scalars with device tensors, as in PyTorch
    out = b * ember.tensor(2.0)
    assert out.is_cuda and out.tolist() == [2.0, 2.0, 2.0]


# ---- nn + optim --------------------------------------------------------------------------------------
def _mlp() -> nn.Module:
    return nn.Sequential(nn.Linear(8, 16), nn.GELU(), nn.LayerNorm(16), nn.Linear(16, 4))


@pytest.mark.parametrize("make_opt", [
    lambda p: ember.optim.SGD(p, lr=0.1, momentum=0.9, nesterov=True, weight_decay=1e-3),
    lambda p: ember.optim.Adam(p, lr=1e-2, amsgrad=True),
    lambda p: ember.optim.AdamW(p, lr=1e-2),
    lambda p: ember.optim.RMSprop(p, lr=1e-2, momentum=0.5),
    lambda p: ember.optim.Adagrad(p, lr=0.1),
], ids=["sgd", "adam", "adamw", "rmsprop", "adagrad"])
def test_mlp_training_steps_match_cpu(make_opt):
    rng = np.random.default_rng(0)
    xs, ys = rng.standard_normal((16, 8)).astype(np.float32), rng.integers(0, 4, 16)
    cpu, dev = _twins(_mlp)
    want = _train(cpu, make_opt, xs, ys, "cpu", F.cross_entropy)
    got = _train(dev, make_opt, xs, ys, "cuda", F.cross_entropy)
    np.testing.assert_allclose(got, want, rtol=1e-5)
    _on("cuda", dev)
    for (name, p), q in zip(dev.named_parameters(), cpu.parameters()):
        _assert_same(p, q, 1e-5, name)


def test_cnn_with_batchnorm_pooling_dropout_matches_cpu():
    def make() -> nn.Module:
        return nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(), nn.MaxPool2d(2),
                             nn.Conv2d(4, 4, 3, stride=2), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(4, 3))

    rng = np.random.default_rng(1)
    xs, ys = rng.standard_normal((4, 1, 10, 10)).astype(np.float32), rng.integers(0, 3, 4)
    cpu, dev = _twins(make)
    opt = lambda p: ember.optim.SGD(p, lr=0.1, momentum=0.9)  # noqa: E731
    np.testing.assert_allclose(_train(dev, opt, xs, ys, "cuda", F.cross_entropy),
                               _train(cpu, opt, xs, ys, "cpu", F.cross_entropy), rtol=1e-5)
    _on("cuda", dev)
    _assert_same(dev[1].running_var, cpu[1].running_var, 1e-5, "running_var")
    dev.eval(), cpu.eval()
    _assert_same(dev(ember.tensor(xs, device="cuda")), cpu(ember.tensor(xs)), 1e-5, "eval forward")
    drop = nn.Dropout(0.5).to("cuda")
    out = drop(ember.ones(1000, device="cuda"))
    assert out.is_cuda and 350 < int((out == 0).sum()) < 650


def test_recurrent_and_attention_models_match_cpu():
    rng = np.random.default_rng(2)
    tokens = rng.integers(0, 20, (3, 7))

    class Net(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.emb = nn.Embedding(20, 16)
            self.lstm = nn.LSTM(16, 16, batch_first=True)
            self.enc = nn.TransformerEncoderLayer(16, 4, 32, dropout=0.0, batch_first=True, norm_first=True)
            self.out = nn.Linear(16, 20)

        def forward(self, x: Any) -> Any:
            h, _ = self.lstm(self.emb(x))
            return self.out(self.enc(h))

    cpu, dev = _twins(Net)
    loss = lambda out, y: F.cross_entropy(out.reshape(-1, 20), y.reshape(-1))  # noqa: E731
    opt = lambda p: ember.optim.Adam(p, lr=1e-2)  # noqa: E731
    np.testing.assert_allclose(_train(dev, opt, tokens, tokens, "cuda", loss),
                               _train(cpu, opt, tokens, tokens, "cpu", loss), rtol=1e-4)
    _on("cuda", dev)


def test_clip_grad_norm_and_lr_scheduler_on_device():
    cpu, dev = _twins(_mlp)
    for model, device in ((cpu, "cpu"), (dev, "cuda")):
        x = ember.ones(4, 8, device=device)
        model(x).pow(2).sum().backward()
    norms = [nn.utils.clip_grad_norm_(m.parameters(), 0.5) for m in (cpu, dev)]
    assert norms[1].is_cuda
    _assert_same(norms[1], norms[0], 1e-5)
    for p, q in zip(dev.parameters(), cpu.parameters()):
        _assert_same(p.grad, q.grad, 1e-5)
    opt = ember.optim.SGD(dev.parameters(), lr=0.1)
    sched = ember.optim.lr_scheduler.OneCycleLR(opt, max_lr=1.0, total_steps=5)
    opt.step(), sched.step()
    _on("cuda", dev)


# ---- compile, amp, train, checkpoints -------------------------------------------------------------------
def test_compiled_training_step_matches_eager_cpu():
    rng = np.random.default_rng(3)
    xs, ys = rng.standard_normal((16, 8)).astype(np.float32), rng.integers(0, 4, 16)
    cpu, dev = _twins(_mlp)
    results = {}
    for model, device in ((cpu, "cpu"), (dev, "cuda")):
        opt = ember.optim.Adam(model.parameters(), lr=1e-2)

        def step(x: Any, y: Any) -> Any:
            opt.zero_grad()
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            return loss

        fn = ember.compile(step, fallback="raise") if device == "cuda" else step
        x, y = ember.tensor(xs, device=device), ember.tensor(ys, device=device)
        results[device] = [float(fn(x, y)) for _ in range(4)]  # call 1 eager, 2 traces, 3-4 replay
    np.testing.assert_allclose(results["cuda"], results["cpu"], rtol=1e-5)
    _on("cuda", dev)
    for p, q in zip(dev.parameters(), cpu.parameters()):
        _assert_same(p, q, 1e-5)


def test_autocast_and_grad_scaler_on_device():
    cpu, dev = _twins(_mlp)
    rng = np.random.default_rng(4)
    xs, ys = rng.standard_normal((8, 8)).astype(np.float32), rng.integers(0, 4, 8)
    losses = {}
    for model, device in ((cpu, "cpu"), (dev, "cuda")):
        opt = ember.optim.SGD(model.parameters(), lr=0.1)
        scaler = ember.amp.GradScaler(device, init_scale=2.0 ** 8)
        with ember.autocast(device, dtype=ember.bfloat16):
            out = model(ember.tensor(xs, device=device))
            assert out.dtype is ember.bfloat16
            loss = F.cross_entropy(out, ember.tensor(ys, device=device))
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        losses[device] = loss.item()
        assert scaler.get_scale() == 2.0 ** 8
    np.testing.assert_allclose(losses["cuda"], losses["cpu"], rtol=1e-2)
    _on("cuda", dev)


def test_model_fit_on_device():
    rng = np.random.default_rng(5)
    xs = rng.standard_normal((64, 8)).astype(np.float32)
    ys = (xs[:, 0] > 0).astype(np.int64)
    loader = DataLoader(TensorDataset(ember.tensor(xs), ember.tensor(ys)), batch_size=16)
    ember.manual_seed(0)
    model = _mlp()
    trainer = ember.train.Model(model, device="cuda")
    trainer.configure(optimizer="adam", loss="cross_entropy", metrics=["accuracy"])
    history = trainer.fit(loader, epochs=3, verbose=0)
    _on("cuda", model)
    assert history.history["loss"][-1] < history.history["loss"][0]


@pytest.mark.parametrize("fmt", ["torch", "safetensors"])
def test_checkpoint_saved_on_device_loads_on_cpu_and_back(tmp_path, fmt):
    cpu, dev = _twins(_mlp)
    path = tmp_path / "ckpt.pt"
    ember.save(dev.state_dict(), path, **({"format": "safetensors"} if fmt == "safetensors" else {}))
    loaded = ember.load(path, map_location="cpu")
    for name, t in loaded.items():
        assert t.device.type == "cpu" and type(t._data) is np.ndarray, name
        _assert_same(t, cpu.state_dict()[name], 0.0, name)
    fresh = _mlp().to("cuda")
    fresh.load_state_dict(loaded)
    _on("cuda", fresh)
    back = ember.load(path, map_location="cuda")
    assert all(t.is_cuda for t in back.values())
    cpu_model = _mlp()
    cpu_model.load_state_dict(dev.state_dict())  # device tensors into a CPU model: copied over
    _on("cpu", cpu_model)
    for (name, p), q in zip(cpu_model.named_parameters(), cpu.parameters()):
        _assert_same(p, q, 0.0, name)


def test_random_numbers_are_drawn_by_the_device_generator():
    ember.manual_seed(0)
    a = ember.randn(1000, device="cuda")
    ember.manual_seed(0)
    b = ember.randn(1000, device="cuda")
    ember.manual_seed(0)
    host = ember.randn(1000)
    np.testing.assert_array_equal(a.cpu().numpy(), b.cpu().numpy())  # seeded: reproducible
    # drawn by the device's own generator, not on the host and copied (as on a GPU, other numbers)
    assert not np.array_equal(a.cpu().numpy(), host.numpy())
    ember.manual_seed(0)
    ember.rand(10, device="cuda")
    after = ember.randn(1000)  # device draws leave the CPU generator alone
    np.testing.assert_array_equal(after.numpy(), host.numpy())
    assert abs(float(a.mean())) < 0.15 and abs(float(a.std()) - 1) < 0.1


# ---- nn layers and functions, forward and backward, device vs CPU -----------------------------------------
class _Apply(nn.Module):
    """``fn(mods, *inputs)`` as a module, with ``mods`` registered (so ``.to`` moves them)."""

    def __init__(self, fn: Callable, **mods: nn.Module) -> None:
        super().__init__()
        self.fn = fn
        for key, m in mods.items():
            setattr(self, key, m)

    def forward(self, *xs: Any) -> Any:
        return self.fn(self, *xs)


LAYERS = {
    "conv1d": (lambda: nn.Conv1d(3, 4, 3, padding=2, dilation=2), [(2, 3, 9)]),
    "conv3d": (lambda: nn.Conv3d(2, 3, 2, stride=2), [(1, 2, 4, 4, 4)]),
    "conv_transpose2d": (lambda: nn.ConvTranspose2d(3, 2, 3, stride=2, output_padding=1), [(2, 3, 4, 4)]),
    "avg_pool2d": (lambda: nn.AvgPool2d(2, ceil_mode=True, count_include_pad=False), [(2, 3, 5, 5)]),
    "max_pool1d": (lambda: nn.MaxPool1d(3, stride=2, padding=1), [(2, 3, 9)]),
    "upsample_bilinear": (lambda: nn.Upsample(scale_factor=2, mode="bilinear", align_corners=False), [(1, 2, 3, 3)]),
    "gru": (lambda: _Apply(lambda s, x: s.m(x)[0], m=nn.GRU(4, 5, num_layers=2, bidirectional=True, batch_first=True)),
            [(2, 3, 4)]),
    "multihead_attention": (lambda: _Apply(lambda s, x: s.m(x, x, x)[0], m=nn.MultiheadAttention(8, 2, batch_first=True)),
                            [(2, 5, 8)]),
    "group_norm": (lambda: nn.GroupNorm(2, 4), [(2, 4, 3, 3)]),
    "instance_norm": (lambda: nn.InstanceNorm2d(3, affine=True), [(2, 3, 4, 4)]),
    "pixel_shuffle": (lambda: nn.PixelShuffle(2), [(1, 8, 2, 2)]),
    "embedding_bag": (lambda: _Apply(lambda s, w: s.m(ember.tensor([[1, 2], [3, 9]], device=w.device)) * w.sum(),
                                     m=nn.EmbeddingBag(10, 4, mode="mean")), [(1,)]),
    "sdpa_causal": (lambda: _Apply(lambda s, q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True)),
                    [(2, 2, 4, 8), (2, 2, 4, 8), (2, 2, 4, 8)]),
    "pad_reflect_unfold": (lambda: _Apply(lambda s, x: F.unfold(F.pad(x, (1, 1, 1, 1), mode="reflect"), 3)),
                           [(1, 2, 4, 4)]),
    "losses": (lambda: _Apply(lambda s, a, b: F.mse_loss(a, b) + F.smooth_l1_loss(a, b) + F.l1_loss(a, b)
                              + F.binary_cross_entropy_with_logits(a, b.sigmoid())
                              + F.kl_div(a.log_softmax(-1), b.softmax(-1), reduction="batchmean")
                              + F.huber_loss(a, b) + F.cosine_embedding_loss(a, b, ember.ones(3, device=a.device))),
               [(3, 5), (3, 5)]),
    "cross_entropy_smoothing_weight": (lambda: _Apply(lambda s, a: F.cross_entropy(
        a, ember.tensor([0, 2, 1], device=a.device), label_smoothing=0.1,
        weight=ember.tensor([1.0, 2.0, 0.5, 1.0], device=a.device))), [(3, 4)]),
}


@pytest.mark.parametrize("name", sorted(LAYERS))
def test_layer_forward_backward_matches_cpu(name):
    make, shapes = LAYERS[name]
    cpu, dev = _twins(make)
    rng = np.random.default_rng(6)
    arrays = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    results = {}
    for model, device in ((cpu, "cpu"), (dev, "cuda")):
        xs = [ember.tensor(a, device=device, requires_grad=True) for a in arrays]
        out = model(*xs)
        out.backward(ember.tensor(np.random.default_rng(7).standard_normal(tuple(out.shape)).astype(np.float32),
                                  device=device))
        results[device] = (out, [x.grad for x in xs], [p.grad for p in model.parameters()])
    (out_d, gx_d, gp_d), (out_c, gx_c, gp_c) = results["cuda"], results["cpu"]
    assert out_d.is_cuda and type(out_d._data) is StandinArray
    _assert_same(out_d, out_c, 1e-5, f"{name} forward")
    for g_d, g_c in zip(gx_d + gp_d, gx_c + gp_c):
        assert (g_d is None) == (g_c is None)
        if g_d is not None:
            assert g_d.is_cuda
            _assert_same(g_d, g_c, 1e-4, f"{name} gradient")


# ---- functions outside the op specs: deterministic ones equal the CPU's, samplers draw on the device ---------
FUNCTIONS = {
    "linalg_inv_det_special": lambda d: ember.linalg.inv(ember.eye(3, device=d) * 2 + 0.1) + ember.linalg.det(
        ember.eye(3, device=d) * 2) + ember.special.i0(ember.ones(3, 3, device=d)),
    "topk_sort_nonzero": lambda d: ember.cat([ember.arange(10.0, device=d).topk(3)[0],
                                              ember.arange(10.0, device=d).flip(0).sort()[0][:3],
                                              (ember.arange(5.0, device=d) > 2).nonzero().reshape(-1).float()]),
    "masked_select_histc": lambda d: ember.cat([ember.arange(6.0, device=d)[ember.arange(6.0, device=d) > 3],
                                                ember.histc(ember.arange(6.0, device=d), 3)]),
    "index_add_scatter_add": lambda d: ember.zeros(5, device=d).index_add_(0, ember.tensor([0, 1], device=d),
                                                                           ember.ones(2, device=d)).scatter_add_(
        0, ember.tensor([0, 0], device=d), ember.ones(2, device=d)),
    "allclose_equal_stack": lambda d: ember.stack([ember.tensor(float(ember.allclose(ember.ones(2, device=d),
                                                                                      ember.ones(2, device=d))),
                                                                device=d), ember.ones((), device=d)]),
}
SAMPLERS = {
    "bernoulli": lambda d: ember.bernoulli(ember.full((4000,), 0.3, device=d)),
    "multinomial": lambda d: ember.multinomial(ember.tensor([0.7, 0.3], device=d), 4000, replacement=True).float(),
    "normal_": lambda d: ember.empty(4000, device=d).normal_(0.3, 0.01),
    "uniform_": lambda d: ember.empty(4000, device=d).uniform_(0.2, 0.4),
    "dropout2d": lambda d: F.dropout2d(ember.ones(4000, 1, 1, 1, device=d), 0.7, training=True).reshape(-1) * 0.3,
    "init_uniform": lambda d: nn.init.uniform_(ember.empty(4000, device=d), 0.2, 0.4),
    "normal_rsample": lambda d: ember.distributions.Normal(ember.full((4000,), 0.3, device=d),
                                                           ember.full((4000,), 0.01, device=d)).rsample(),
    "categorical": lambda d: ember.distributions.Categorical(probs=ember.tensor([0.7, 0.3], device=d)).sample(
        (4000,)).float(),
}


@pytest.mark.parametrize("name", sorted(FUNCTIONS))
def test_functions_on_device_match_cpu(name):
    got, want = FUNCTIONS[name]("cuda"), FUNCTIONS[name]("cpu")
    assert got.is_cuda and type(got._data) is StandinArray
    _assert_same(got, want, 1e-6, name)


@pytest.mark.parametrize("name", sorted(SAMPLERS))
def test_samplers_draw_on_the_device(name):
    ember.manual_seed(0)
    out = SAMPLERS[name]("cuda")
    assert out.is_cuda and type(out._data) is StandinArray and tuple(out.shape) == (4000,)
    assert abs(float(out.mean()) - 0.3) < 0.03, name  # each sampler above has mean 0.3
