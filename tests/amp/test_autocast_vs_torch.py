"""ember.autocast against torch.autocast('cpu', ...) (torch 2.13, the reference): output dtypes op by
op, values within bfloat16/float16 tolerance, float32 parameter gradients, nesting, decorators,
threads, the weight-cast cache, ember.compile, and the errors."""
from __future__ import annotations

import threading
import warnings

import numpy as np
import pytest

import ember
import ember.nn.functional as EF

torch = pytest.importorskip("torch")
import torch.nn.functional as TF  # noqa: E402

LOW = [("bfloat16", ember.bfloat16, torch.bfloat16), ("float16", ember.float16, torch.float16)]


def _np(t):
    if isinstance(t, torch.Tensor):
        return t.detach().float().numpy()
    return t.detach().float().numpy()


def _name(dtype) -> str:
    return str(dtype).replace("torch.", "").replace("ember.", "")


def _pair(array: np.ndarray, dtype: str | None = None, requires_grad: bool = False):
    e = ember.tensor(array)
    t = torch.tensor(array)
    if dtype is not None:
        e, t = e.to(getattr(ember, dtype)), t.to(getattr(torch, dtype))
    return e.requires_grad_(requires_grad), t.requires_grad_(requires_grad)


RNG = np.random.default_rng(0)


def _r(*shape, positive=False):
    a = RNG.standard_normal(shape).astype(np.float32)
    return np.abs(a) + 0.5 if positive else a


# Each case: (name, input arrays (floats get cast per variant; ints stay), fn(lib, F, *inputs)).
# The same lambda runs on both libraries: ember's PyTorch API is the point.
INT_TARGET = np.array([1, 0, 3, 5], dtype=np.int64)
SIGNS = np.sign(_r(4, 8)).astype(np.float32)
CASES = [
    ("mm", [_r(4, 8), _r(8, 6)], lambda L, F, a, b: L.mm(a, b)),
    ("matmul_op", [_r(2, 4, 8), _r(8, 6)], lambda L, F, a, b: a @ b),
    ("bmm", [_r(2, 4, 8), _r(2, 8, 3)], lambda L, F, a, b: L.bmm(a, b)),
    ("addmm", [_r(6), _r(4, 8), _r(8, 6)], lambda L, F, c, a, b: L.addmm(c, a, b)),
    ("baddbmm", [_r(2, 4, 3), _r(2, 4, 8), _r(2, 8, 3)], lambda L, F, c, a, b: L.baddbmm(c, a, b)),
    ("addbmm", [_r(4, 3), _r(2, 4, 8), _r(2, 8, 3)], lambda L, F, c, a, b: L.addbmm(c, a, b)),
    ("linear", [_r(3, 4, 8), _r(6, 8), _r(6)], lambda L, F, x, w, b: F.linear(x, w, b)),
    ("conv1d", [_r(2, 3, 10), _r(4, 3, 3), _r(4)], lambda L, F, x, w, b: F.conv1d(x, w, b, padding=1)),
    ("conv2d", [_r(2, 3, 8, 8), _r(4, 3, 3, 3), _r(4)], lambda L, F, x, w, b: F.conv2d(x, w, b, stride=2)),
    ("conv3d", [_r(1, 2, 4, 4, 4), _r(3, 2, 2, 2, 2)], lambda L, F, x, w: F.conv3d(x, w)),
    ("conv_transpose2d", [_r(2, 3, 5, 5), _r(3, 2, 3, 3), _r(2)],
     lambda L, F, x, w, b: F.conv_transpose2d(x, w, b, stride=2)),
    ("prelu", [_r(4, 3, 5), np.array([0.25, 0.1, 0.3], np.float32)], lambda L, F, x, w: F.prelu(x, w)),
    ("sdpa", [_r(2, 2, 4, 8), _r(2, 2, 5, 8), _r(2, 2, 5, 8)],
     lambda L, F, q, k, v: F.scaled_dot_product_attention(q, k, v)),
    ("sdpa_float_mask", [_r(2, 4, 8), _r(2, 5, 8), _r(2, 5, 8), _r(4, 5)],
     lambda L, F, q, k, v, m: F.scaled_dot_product_attention(q, k, v, attn_mask=m)),
    ("einsum", [_r(4, 8), _r(6, 8)], lambda L, F, a, b: L.einsum("ij,kj->ik", a, b)),
    ("tensordot", [_r(4, 8), _r(6, 8)], lambda L, F, a, b: L.tensordot(a, b, ([1], [1]))),
    ("dot", [_r(8), _r(8)], lambda L, F, a, b: L.dot(a, b)),
    ("mv", [_r(4, 8), _r(8)], lambda L, F, a, b: L.mv(a, b)),
    ("addmv", [_r(4), _r(4, 8), _r(8)], lambda L, F, c, a, b: L.addmv(c, a, b)),
    ("outer", [_r(4), _r(3)], lambda L, F, a, b: L.outer(a, b)),
    ("softmax", [_r(4, 8)], lambda L, F, x: F.softmax(x, -1)),
    ("log_softmax", [_r(4, 8)], lambda L, F, x: F.log_softmax(x, -1)),
    ("layer_norm", [_r(4, 8), _r(8), _r(8)], lambda L, F, x, w, b: F.layer_norm(x, (8,), w, b)),
    ("group_norm", [_r(2, 4, 3, 3)], lambda L, F, x: F.group_norm(x, 2)),
    ("gelu", [_r(4, 8)], lambda L, F, x: F.gelu(x)),
    ("relu", [_r(4, 8)], lambda L, F, x: F.relu(x)),
    ("sum", [_r(4, 8)], lambda L, F, x: x.sum()),
    ("mean", [_r(4, 8)], lambda L, F, x: x.mean(0)),
    ("prod", [_r(2, 3, positive=True)], lambda L, F, x: x.prod()),
    ("prod_dim", [_r(2, 3, positive=True)], lambda L, F, x: L.prod(x, 1)),
    ("cumsum", [_r(4, 8)], lambda L, F, x: x.cumsum(1)),
    ("trace", [_r(4, 4)], lambda L, F, x: L.trace(x)),
    ("exp_add", [_r(4, 8), _r(4, 8)], lambda L, F, a, b: a.exp() + b),
    ("mse_loss", [_r(4, 8), _r(4, 8)], lambda L, F, a, b: F.mse_loss(a, b)),
    ("l1_loss", [_r(4, 8), _r(4, 8)], lambda L, F, a, b: F.l1_loss(a, b)),
    ("smooth_l1_loss", [_r(4, 8), _r(4, 8)], lambda L, F, a, b: F.smooth_l1_loss(a, b)),
    ("huber_loss", [_r(4, 8), _r(4, 8)], lambda L, F, a, b: F.huber_loss(a, b, delta=0.5)),
    ("cross_entropy", [_r(4, 6), INT_TARGET], lambda L, F, x, t: F.cross_entropy(x, t)),
    ("cross_entropy_smooth", [_r(4, 6), INT_TARGET],
     lambda L, F, x, t: F.cross_entropy(x, t, label_smoothing=0.1)),
    ("nll_loss", [_r(4, 6), INT_TARGET], lambda L, F, x, t: F.nll_loss(F.log_softmax(x, 1), t)),
    ("kl_div", [_r(4, 8), _r(4, 8, positive=True)],
     lambda L, F, a, b: F.kl_div(F.log_softmax(a, 1), b, reduction="batchmean")),
    ("bce", [np.full((4,), 0.3, np.float32), np.full((4,), 0.6, np.float32)],
     lambda L, F, a, b: F.binary_cross_entropy(a, b)),
    ("bce_with_logits", [_r(4, 8), np.full((4, 8), 0.25, np.float32)],
     lambda L, F, a, b: F.binary_cross_entropy_with_logits(a, b)),
    ("soft_margin_loss", [_r(4, 8), SIGNS], lambda L, F, a, b: F.soft_margin_loss(a, b)),
    ("hinge_embedding_loss", [_r(4, 8), SIGNS], lambda L, F, a, b: F.hinge_embedding_loss(a, b)),
    ("margin_ranking_loss", [_r(8), _r(8), SIGNS[0]], lambda L, F, a, b, y: F.margin_ranking_loss(a, b, y)),
    ("triplet_margin_loss", [_r(4, 8), _r(4, 8), _r(4, 8)], lambda L, F, a, p, n: F.triplet_margin_loss(a, p, n)),
    ("multi_margin_loss", [_r(4, 6), INT_TARGET], lambda L, F, x, t: F.multi_margin_loss(x, t)),
    ("cosine_embedding_loss", [_r(4, 8), _r(4, 8), SIGNS[:, 0]],
     lambda L, F, a, b, y: F.cosine_embedding_loss(a, b, y)),
    ("poisson_nll_loss", [_r(4, 8), _r(4, 8, positive=True)], lambda L, F, a, b: F.poisson_nll_loss(a, b)),
    ("cat_same", [_r(2, 3), _r(2, 3)], lambda L, F, a, b: L.cat([a, b])),
    ("stack_same", [_r(2, 3), _r(2, 3)], lambda L, F, a, b: L.stack([a, b], 1)),
    ("avg_pool2d", [_r(2, 3, 6, 6)], lambda L, F, x: F.avg_pool2d(x, 2)),
    ("max_pool2d", [_r(2, 3, 6, 6)], lambda L, F, x: F.max_pool2d(x, 2)),
    ("avg_pool3d", [_r(1, 2, 4, 4, 4)], lambda L, F, x: F.avg_pool3d(x, 2)),
    ("max_pool3d", [_r(1, 2, 4, 4, 4)], lambda L, F, x: F.max_pool3d(x, 2)),
    ("embedding", [np.array([0, 2, 1], np.int64), _r(4, 5)], lambda L, F, i, w: F.embedding(i, w)),
]


NO_TARGET_GRAD = {"soft_margin_loss"}  # torch's kernel refuses a target that requires grad


def _run(lib, F, fn, arrays, dtype, variant, name=""):
    """Make inputs (float32, or all floating ones in the low dtype) and run ``fn`` under autocast."""
    tensors = []
    for k, a in enumerate(arrays):
        t = ember.tensor(a) if lib is ember else torch.tensor(a)
        if a.dtype.kind == "f" and variant == "low":
            t = t.to(dtype)
        if a.dtype.kind == "f" and not (k and name in NO_TARGET_GRAD):
            t.requires_grad_(True)
        tensors.append(t)
    with lib.autocast("cpu", dtype=dtype):
        out = fn(lib, F, *tensors)
    return out, tensors


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
@pytest.mark.parametrize("low", LOW, ids=[d[0] for d in LOW])
@pytest.mark.parametrize("variant", ["fp32_inputs", "low"])
def test_op_dtype_and_value_match_torch(case, low, variant):
    name, arrays, fn = case
    _, edtype, tdtype = low
    try:
        expected, t_inputs = _run(torch, TF, fn, arrays, tdtype, variant, name)
    except (RuntimeError, NotImplementedError) as error:  # torch has no kernel for this dtype mix
        pytest.skip(f"torch raises: {error}")
    got, e_inputs = _run(ember, EF, fn, arrays, edtype, variant, name)
    assert _name(got.dtype) == _name(expected.dtype), f"{name}: ember {got.dtype} vs torch {expected.dtype}"
    np.testing.assert_allclose(_np(got), _np(expected), rtol=3e-2, atol=3e-2 * max(1.0, float(abs(_np(expected)).max())))
    # Gradients reach every floating input in the input's own dtype.
    if expected.requires_grad:
        (expected.float() * torch.tensor(np.linspace(0.5, 1.5, expected.numel(), dtype=np.float32)
                                         ).reshape(expected.shape)).sum().backward()
        (got.float() * ember.tensor(np.linspace(0.5, 1.5, got.numel(), dtype=np.float32)
                                    ).reshape(tuple(got.shape))).sum().backward()
        for e, t in zip(e_inputs, t_inputs):
            if t.grad is None:
                continue
            assert e.grad is not None, f"{name}: no gradient reached an input"
            assert _name(e.grad.dtype) == _name(t.grad.dtype) == _name(t.dtype)
            scale = max(1.0, float(abs(_np(t.grad)).max()))
            np.testing.assert_allclose(_np(e.grad), _np(t.grad), rtol=5e-2, atol=5e-2 * scale)


def test_promote_ops_take_the_widest_input():
    for lib in (ember, torch):
        a = lib.ones(2, 3)
        b = lib.ones(2, 3).to(lib.bfloat16)
        with lib.autocast("cpu"):
            assert _name(lib.cat([a, b]).dtype) == "float32"
            assert _name(lib.stack([b, b]).dtype) == "bfloat16"
            assert _name(lib.cat([a.double(), a]).dtype) == "float64"  # float64 is never cast down


def test_float64_and_integer_inputs_are_not_cast():
    for lib in (ember, torch):
        with lib.autocast("cpu"):
            d = lib.ones(3, 3, dtype=lib.float64)
            assert _name((d @ d).dtype) == "float64"
            i = lib.ones(3, 3, dtype=lib.int64)
            assert _name(lib.cat([i, i]).dtype) == "int64"


# ---- whole models ----------------------------------------------------------------------------
def _copy_params(e_module, t_module):
    state = {k: ember.tensor(v.detach().numpy()) for k, v in t_module.state_dict().items()}
    e_module.load_state_dict(state)


def _models(lib):
    nn = lib.nn
    cnn = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(), nn.Linear(64, 5))
    mlp = nn.Sequential(nn.Linear(8, 16), nn.GELU(), nn.LayerNorm(16), nn.Linear(16, 5))
    layer = nn.TransformerEncoderLayer(16, 4, 32, dropout=0.0, batch_first=True)
    return {"cnn": cnn, "mlp": mlp, "transformer": layer}


INPUTS = {"cnn": _r(2, 3, 8, 8), "mlp": _r(6, 8), "transformer": _r(2, 5, 16)}


@pytest.mark.parametrize("model", ["cnn", "mlp", "transformer"])
@pytest.mark.parametrize("low", LOW, ids=[d[0] for d in LOW])
def test_model_forward_backward_matches_torch_autocast(model, low):
    _, edtype, tdtype = low
    torch.manual_seed(0)
    t_model = _models(torch)[model]
    e_model = _models(ember)[model]
    _copy_params(e_model, t_model)
    x = INPUTS[model]
    target = np.arange(x.shape[0]) % 5
    outs = {}
    for lib, m, dt in ((torch, t_model, tdtype), (ember, e_model, edtype)):
        inp = lib.tensor(x)
        with lib.autocast("cpu", dtype=dt):
            out = m(inp)
            if model == "transformer":
                loss = lib.nn.functional.mse_loss(out, lib.zeros(out.shape))
            else:
                loss = lib.nn.functional.cross_entropy(out, lib.tensor(target))
        loss.backward()
        outs[lib.__name__] = (out, loss, dict(m.named_parameters()))
    (t_out, t_loss, t_params), (e_out, e_loss, e_params) = outs["torch"], outs["ember"]
    assert _name(e_out.dtype) == _name(t_out.dtype)
    assert _name(e_loss.dtype) == _name(t_loss.dtype) == "float32"
    np.testing.assert_allclose(_np(e_out), _np(t_out), rtol=5e-2, atol=5e-2)
    np.testing.assert_allclose(e_loss.item(), t_loss.item(), rtol=3e-2, atol=3e-2)
    for name, tp in t_params.items():
        eg = e_params[name].grad
        assert eg is not None, name
        assert _name(eg.dtype) == _name(tp.grad.dtype) == "float32", name
        scale = max(1e-2, float(abs(tp.grad.numpy()).max()))
        np.testing.assert_allclose(eg.numpy(), tp.grad.numpy(), rtol=0.1, atol=0.1 * scale, err_msg=name)


# ---- state, nesting, decorator, threads -----------------------------------------------------------
def test_state_query_functions_and_nesting():
    assert not ember.is_autocast_enabled("cpu")
    assert ember.get_autocast_dtype("cpu") is ember.bfloat16
    assert ember.get_autocast_dtype("cuda") is ember.float16
    a = ember.ones(2, 2)
    with ember.autocast("cpu", dtype=ember.float16):
        assert ember.is_autocast_enabled("cpu") and not ember.is_autocast_enabled("cuda")
        assert ember.get_autocast_dtype("cpu") is ember.float16
        assert (a @ a).dtype is ember.float16
        with ember.autocast("cpu", enabled=False):
            assert not ember.is_autocast_enabled("cpu")
            assert (a @ a).dtype is ember.float32
            with ember.amp.autocast("cpu", dtype=ember.bfloat16):
                assert (a @ a).dtype is ember.bfloat16
            assert (a @ a).dtype is ember.float32
        assert (a @ a).dtype is ember.float16
        assert ember.get_autocast_dtype("cpu") is ember.float16
    assert not ember.is_autocast_enabled("cpu")
    assert ember.get_autocast_dtype("cpu") is ember.bfloat16
    assert (a @ a).dtype is ember.float32


def test_state_restored_after_exception():
    with pytest.raises(ValueError):
        with ember.autocast("cpu"):
            raise ValueError("boom")
    assert not ember.is_autocast_enabled("cpu")
    assert (ember.ones(2, 2) @ ember.ones(2, 2)).dtype is ember.float32


def test_decorator_and_reentrant_instance():
    region = ember.autocast("cpu")

    @region
    def f(x, depth):
        assert ember.is_autocast_enabled("cpu")
        return f(x, depth - 1) if depth else x @ x

    @ember.autocast("cpu", enabled=False)
    def g(x):
        return x @ x

    x = ember.ones(2, 2)
    assert f(x, 2).dtype is ember.bfloat16
    assert not ember.is_autocast_enabled("cpu")
    with ember.autocast("cpu"):
        assert g(x).dtype is ember.float32
        assert ember.is_autocast_enabled("cpu")


def test_state_is_thread_local():
    seen = {}

    def worker():
        seen["enabled"] = ember.is_autocast_enabled("cpu")
        seen["dtype"] = (ember.ones(2, 2) @ ember.ones(2, 2)).dtype

    with ember.autocast("cpu"):
        thread = threading.Thread(target=worker)
        thread.start()
        thread.join()
        assert (ember.ones(2, 2) @ ember.ones(2, 2)).dtype is ember.bfloat16
    assert seen == {"enabled": False, "dtype": ember.float32}


def test_cpu_amp_alias_is_deprecated_but_works():
    with pytest.warns(FutureWarning):
        region = ember.cpu.amp.autocast()
    with region:
        assert (ember.ones(2, 2) @ ember.ones(2, 2)).dtype is ember.bfloat16


# ---- weight-cast cache --------------------------------------------------------------------------
def test_weight_cast_is_cached_within_a_region_and_dropped_after():
    w = ember.ones(3, 3, requires_grad=True)
    x = ember.ones(2, 3)
    with ember.autocast("cpu"):
        y1 = x @ w
        y2 = x @ w
        assert y1.grad_fn.next_functions[1][0] is y2.grad_fn.next_functions[1][0]  # one cast node
        assert len(ember.amp.state.STATE.cache) == 1
        (y1.float().sum() + y2.float().sum()).backward()
    assert not ember.amp.state.STATE.cache
    np.testing.assert_allclose(w.grad.numpy(), np.full((3, 3), 4.0))
    with ember.autocast("cpu", cache_enabled=False):
        x @ w
        assert not ember.amp.state.STATE.cache


def test_cached_cast_sees_in_place_weight_updates():
    w = ember.ones(2, 2, requires_grad=True)
    x = ember.ones(1, 2)
    with ember.autocast("cpu"):
        assert (x @ w).float().sum().item() == 4.0
        with ember.no_grad():
            w.mul_(2.0)  # an optimizer step inside the region
        assert (x @ w).float().sum().item() == 8.0


def test_cast_cached_under_no_grad_is_not_reused_with_grad():
    w = ember.ones(2, 2, requires_grad=True)
    x = ember.ones(1, 2)
    with ember.autocast("cpu"):
        with ember.no_grad():
            x @ w
        y = x @ w
    y.float().sum().backward()
    assert w.grad is not None and w.grad.dtype is ember.float32


# ---- ember.compile --------------------------------------------------------------------------------
def test_compile_traces_the_casts_and_keys_on_autocast_state():
    lin = ember.nn.Linear(4, 3)

    @ember.compile(warmup=0)
    def f(x):
        return lin(x)

    x = ember.randn(2, 4)
    plain = f(x)
    assert plain.dtype is ember.float32
    with ember.autocast("cpu"):
        low = f(x)
        assert low.dtype is ember.bfloat16
        eager = lin(x)
    assert (f(x)).dtype is ember.float32
    with ember.autocast("cpu", dtype=ember.float16):
        assert f(x).dtype is ember.float16
    np.testing.assert_allclose(_np(low), _np(eager), rtol=1e-2, atol=1e-2)
    np.testing.assert_allclose(_np(low), _np(plain), rtol=3e-2, atol=3e-2)


def test_compiled_training_step_under_autocast_gives_float32_grads():
    lin = ember.nn.Linear(4, 3)

    @ember.compile(warmup=0)
    def loss_fn(x, t):
        with ember.autocast("cpu"):
            return EF.mse_loss(lin(x), t)

    x, t = ember.randn(5, 4), ember.randn(5, 3)
    for _ in range(2):
        lin.zero_grad()
        loss = loss_fn(x, t)
        loss.backward()
    assert loss.dtype is ember.float32
    assert lin.weight.grad.dtype is ember.float32
    lin.zero_grad()
    with ember.autocast("cpu"):
        ref = EF.mse_loss(lin(x), t)
    ref.backward()
    np.testing.assert_allclose(loss.item(), ref.item(), rtol=1e-3)


# ---- errors ---------------------------------------------------------------------------------------
def test_errors_are_clear():
    with pytest.raises(RuntimeError, match="unsupported autocast device_type 'tpu'"):
        ember.autocast("tpu")
    with pytest.raises(ValueError, match="device_type"):
        ember.autocast(ember.device("cpu"))
    with pytest.raises(ValueError, match="floating"):
        ember.autocast("cpu", dtype=ember.int32)
    with pytest.raises(RuntimeError, match="unsupported"):
        ember.is_autocast_enabled("tpu")
    with pytest.warns(UserWarning, match="not supported. Disabling autocast"):
        region = ember.autocast("cpu", dtype=ember.float32)
    with region:
        assert not ember.is_autocast_enabled("cpu")
    with pytest.raises(ValueError, match="unknown policy"):
        ember.amp.autocast_policy("bf16")


def test_autocast_off_leaves_results_untouched():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        a = ember.ones(2, 2)
        assert (a @ a).dtype is ember.float32
        assert EF.mse_loss(a.bfloat16(), a.bfloat16()).dtype is ember.bfloat16


def test_custom_fwd_casts_inputs_and_runs_without_autocast():
    class Product(ember.autograd.Function):
        @staticmethod
        @ember.amp.custom_fwd(device_type="cpu", cast_inputs=ember.float32)
        def forward(ctx, a, b):
            assert not ember.is_autocast_enabled("cpu")
            ctx.save_for_backward(a, b)
            return a @ b

        @staticmethod
        @ember.amp.custom_bwd(device_type="cpu")
        def backward(ctx, g):
            a, b = ctx.saved_tensors
            return g @ b.mT, a.mT @ g

    a = ember.ones(2, 2, requires_grad=True)
    with ember.autocast("cpu"):
        y = Product.apply(a.bfloat16(), a)
    assert y.dtype is ember.float32
    y.sum().backward()
    assert a.grad.dtype is ember.float32
    np.testing.assert_allclose(a.grad.numpy(), np.full((2, 2), 4.0))
