"""ember.nn.functional against torch.nn.functional (forward and gradients), gradchecks, errors."""
from __future__ import annotations

import numpy as np
import pytest

import ember
import ember.nn.functional as F

torch = pytest.importorskip("torch")
TF = torch.nn.functional

TOL = {"float64": dict(rtol=1e-7, atol=1e-10), "float32": dict(rtol=2e-4, atol=2e-5)}


def _pair(arrays: list, dtype: str, grad: list) -> tuple:
    """The same data as torch and ember tensors (float arrays take ``dtype``)."""
    t_args, e_args = [], []
    for a, g in zip(arrays, grad):
        if a is None:
            t_args.append(None)
            e_args.append(None)
            continue
        if a.dtype.kind == "f":
            a = a.astype(dtype)
        t_args.append(torch.tensor(a, requires_grad=bool(g)))
        e_args.append(ember.tensor(a, requires_grad=bool(g)))
    return t_args, e_args


def compare(t_fn, e_fn, arrays, dtype="float64", grad=None, seed=0, tol=None):
    """Run both, compare outputs and the gradients of sum(out * random) w.r.t. every grad input."""
    grad = grad if grad is not None else [a is not None and a.dtype.kind == "f" for a in arrays]
    t_args, e_args = _pair(arrays, dtype, grad)
    t_out = t_fn(*t_args)
    e_out = e_fn(*e_args)
    tol = tol or TOL[dtype]
    t_outs = t_out if isinstance(t_out, tuple) else (t_out,)
    e_outs = e_out if isinstance(e_out, tuple) else (e_out,)
    for t, e in zip(t_outs, e_outs):
        assert tuple(e.shape) == tuple(t.shape), (tuple(e.shape), tuple(t.shape))
        np.testing.assert_allclose(e.detach().numpy(), t.detach().numpy(), **tol)
    t_main, e_main = t_outs[0], e_outs[0]
    if not any(grad) or not t_main.requires_grad:
        return e_out
    seed_grad = np.random.default_rng(seed).standard_normal(tuple(t_main.shape)).astype(dtype)
    (t_main * torch.tensor(seed_grad)).sum().backward()
    (e_main * ember.tensor(seed_grad)).sum().backward()
    for t, e, g in zip(t_args, e_args, grad):
        if g:
            assert e.grad is not None, "ember produced no gradient"
            np.testing.assert_allclose(e.grad.numpy(), t.grad.numpy(), **tol)
    return e_out


def rnd(*shape, seed=0, low=None):
    a = np.random.default_rng(seed).standard_normal(shape)
    return a if low is None else np.abs(a) + low


def ints(high, *shape, seed=0):
    return np.random.default_rng(seed).integers(0, high, shape).astype(np.int64)


BOTH = pytest.mark.parametrize("dtype", ["float64", "float32"])


# ---- activations ---------------------------------------------------------------------------------
ACTIVATIONS = [
    ("relu", lambda m, x: m.relu(x)),
    ("gelu", lambda m, x: m.gelu(x)),
    ("gelu_tanh", lambda m, x: m.gelu(x, approximate="tanh")),
    ("silu", lambda m, x: m.silu(x)),
    ("sigmoid", lambda m, x: m.sigmoid(x)),
    ("tanh", lambda m, x: m.tanh(x)),
    ("leaky_relu", lambda m, x: m.leaky_relu(x, 0.1)),
    ("elu", lambda m, x: m.elu(x, 0.7)),
    ("selu", lambda m, x: m.selu(x)),
    ("softplus", lambda m, x: m.softplus(x, beta=2.0, threshold=3.0)),
    ("logsigmoid", lambda m, x: m.logsigmoid(x)),
    ("hardtanh", lambda m, x: m.hardtanh(x, -0.5, 0.7)),
    ("relu6", lambda m, x: m.relu6(x * 4)),
    ("hardswish", lambda m, x: m.hardswish(x * 4)),
    ("hardsigmoid", lambda m, x: m.hardsigmoid(x * 4)),
    ("mish", lambda m, x: m.mish(x)),
    ("softsign", lambda m, x: m.softsign(x)),
    ("glu", lambda m, x: m.glu(x, -1)),
    ("celu", lambda m, x: m.celu(x, 0.5)),  # 0.5: torch rounds 1/alpha to float32
    ("threshold", lambda m, x: m.threshold(x, 0.2, -1.5)),
    ("tanhshrink", lambda m, x: m.tanhshrink(x)),
    ("softmax0", lambda m, x: m.softmax(x, dim=0)),
    ("softmax-1", lambda m, x: m.softmax(x, dim=-1)),
    ("log_softmax", lambda m, x: m.log_softmax(x, dim=1)),
    ("softmin", lambda m, x: m.softmin(x, dim=1)),
    ("normalize", lambda m, x: m.normalize(x, p=2.0, dim=1)),
]


@BOTH
@pytest.mark.parametrize("name,fn", ACTIVATIONS, ids=[a[0] for a in ACTIVATIONS])
def test_activation(name, fn, dtype):
    x = rnd(4, 6, seed=1) * 3
    compare(lambda t: fn(TF, t), lambda e: fn(F, e), [x], dtype)


def test_softmax_large_values_stable():
    x = np.array([[1000.0, 0.0, -1000.0]])
    out = F.softmax(ember.tensor(x), dim=1).numpy()
    np.testing.assert_allclose(out, [[1.0, 0.0, 0.0]])
    assert np.isfinite(F.log_softmax(ember.tensor(x), dim=1).numpy()).all()
    np.testing.assert_allclose(F.log_softmax(ember.tensor(x), 1).numpy(), TF.log_softmax(torch.tensor(x), 1).numpy())


def test_inplace_relu():
    x = ember.tensor([-1.0, 2.0])
    out = F.relu(x, inplace=True)
    assert out is x and x.tolist() == [0.0, 2.0]


# ---- linear, embedding, one_hot, dropout ---------------------------------------------------------
@BOTH
def test_linear(dtype):
    compare(TF.linear, F.linear, [rnd(2, 3, 5), rnd(4, 5, seed=1), rnd(4, seed=2)], dtype)
    compare(TF.linear, F.linear, [rnd(3, 5), rnd(4, 5, seed=1), None], dtype)


def test_bilinear():
    compare(TF.bilinear, F.bilinear, [rnd(3, 4), rnd(3, 5, seed=1), rnd(2, 4, 5, seed=2), rnd(2, seed=3)])


def test_embedding_padding_idx():
    idx = np.array([[0, 2, 1], [2, 2, 3]])
    compare(lambda i, w: TF.embedding(i, w, padding_idx=2), lambda i, w: F.embedding(i, w, padding_idx=2),
            [idx, rnd(5, 3)], grad=[False, True])


def test_embedding_max_norm():
    w = rnd(5, 3) * 3
    tw, ew = torch.tensor(w), ember.tensor(w)
    idx = np.array([1, 3])
    t_out = TF.embedding(torch.tensor(idx), tw, max_norm=1.0)
    e_out = F.embedding(ember.tensor(idx), ew, max_norm=1.0)
    np.testing.assert_allclose(e_out.numpy(), t_out.numpy(), rtol=1e-6)
    np.testing.assert_allclose(ew.numpy(), tw.numpy(), rtol=1e-6)


def test_one_hot():
    idx = np.array([[0, 3], [2, 1]])
    out = F.one_hot(ember.tensor(idx), 5)
    assert out.dtype is ember.int64
    np.testing.assert_array_equal(out.numpy(), TF.one_hot(torch.tensor(idx), 5).numpy())
    np.testing.assert_array_equal(F.one_hot(ember.tensor(idx)).numpy(), TF.one_hot(torch.tensor(idx)).numpy())


def test_dropout_statistics_and_seed():
    x = ember.ones(200, 100)
    ember.manual_seed(3)
    a = F.dropout(x, 0.3)
    ember.manual_seed(3)
    b = F.dropout(x, 0.3)
    np.testing.assert_array_equal(a.numpy(), b.numpy())
    values = np.unique(a.numpy())
    np.testing.assert_allclose(values, [0.0, 1 / 0.7], rtol=1e-6)
    assert abs((a.numpy() == 0).mean() - 0.3) < 0.02
    assert F.dropout(x, 0.3, training=False) is x
    assert float(F.dropout(x, 1.0).abs().sum()) == 0.0
    w = ember.ones(10, requires_grad=True)
    out = F.dropout(w, 0.5)
    out.sum().backward()
    np.testing.assert_allclose(w.grad.numpy(), out.detach().numpy())
    with pytest.raises(ValueError, match="between 0 and 1"):
        F.dropout(x, 1.5)


# ---- normalization -------------------------------------------------------------------------------
@BOTH
def test_layer_norm(dtype):
    compare(lambda x, w, b: TF.layer_norm(x, (4, 5), w, b, 1e-5), lambda x, w, b: F.layer_norm(x, (4, 5), w, b, 1e-5),
            [rnd(3, 4, 5), rnd(4, 5, seed=1), rnd(4, 5, seed=2)], dtype)
    compare(lambda x: TF.layer_norm(x, (5,)), lambda x: F.layer_norm(x, 5), [rnd(2, 3, 5)], dtype)


@BOTH
@pytest.mark.parametrize("shape", [(6, 3), (4, 3, 5, 2)])
def test_batch_norm_training_updates_running_stats(dtype, shape):
    c = shape[1]
    rm, rv = rnd(c, seed=5), rnd(c, seed=6, low=0.5)
    t_rm, t_rv = torch.tensor(rm.astype(dtype)), torch.tensor(rv.astype(dtype))
    e_rm, e_rv = ember.tensor(rm.astype(dtype)), ember.tensor(rv.astype(dtype))
    compare(lambda x, w, b: TF.batch_norm(x, t_rm, t_rv, w, b, True, 0.2, 1e-4),
            lambda x, w, b: F.batch_norm(x, e_rm, e_rv, w, b, True, 0.2, 1e-4),
            [rnd(*shape), rnd(c, seed=1), rnd(c, seed=2)], dtype)
    np.testing.assert_allclose(e_rm.numpy(), t_rm.numpy(), **TOL[dtype])
    np.testing.assert_allclose(e_rv.numpy(), t_rv.numpy(), **TOL[dtype])


def test_batch_norm_eval():
    rm, rv = rnd(3, seed=5), rnd(3, seed=6, low=0.5)
    compare(lambda x, w, b: TF.batch_norm(x, torch.tensor(rm), torch.tensor(rv), w, b, False),
            lambda x, w, b: F.batch_norm(x, ember.tensor(rm), ember.tensor(rv), w, b, False),
            [rnd(4, 3, 2, 2), rnd(3, seed=1), rnd(3, seed=2)])
    compare(lambda x: TF.batch_norm(x, None, None, training=True), lambda x: F.batch_norm(x, None, None, training=True),
            [rnd(4, 3, 2)])


def test_group_and_instance_norm():
    compare(lambda x, w, b: TF.group_norm(x, 2, w, b), lambda x, w, b: F.group_norm(x, 2, w, b),
            [rnd(2, 4, 3, 3), rnd(4, seed=1), rnd(4, seed=2)])
    compare(lambda x: TF.instance_norm(x), lambda x: F.instance_norm(x), [rnd(2, 3, 4, 4)])


def test_cosine_similarity():
    compare(lambda a, b: TF.cosine_similarity(a, b, dim=1), lambda a, b: F.cosine_similarity(a, b, dim=1),
            [rnd(4, 5), rnd(4, 5, seed=1)])
    compare(lambda a, b: TF.pairwise_distance(a, b), lambda a, b: F.pairwise_distance(a, b),
            [rnd(4, 5), rnd(4, 5, seed=1)])


# ---- convolution ---------------------------------------------------------------------------------
CONV2D_CASES = [
    dict(),
    dict(stride=2, padding=1),
    dict(padding="same", dilation=2),
    dict(padding="valid"),
    dict(stride=(2, 1), padding=(1, 2), dilation=(1, 2)),
    dict(groups=2, padding=1),
    dict(stride=3),
]


@BOTH
@pytest.mark.parametrize("kw", CONV2D_CASES, ids=[str(k) for k in CONV2D_CASES])
def test_conv2d(kw, dtype):
    c_in = 4
    groups = kw.get("groups", 1)
    compare(lambda x, w, b: TF.conv2d(x, w, b, **kw), lambda x, w, b: F.conv2d(x, w, b, **kw),
            [rnd(2, c_in, 9, 8), rnd(6, c_in // groups, 3, 2, seed=1), rnd(6, seed=2)], dtype)


@pytest.mark.filterwarnings("ignore:Using padding='same'")
def test_conv2d_even_kernel_same_and_unbatched():
    compare(lambda x, w: TF.conv2d(x, w, padding="same"), lambda x, w: F.conv2d(x, w, padding="same"),
            [rnd(2, 3, 6, 7), rnd(2, 3, 4, 2, seed=1)])
    compare(lambda x, w: TF.conv2d(x, w, padding=1), lambda x, w: F.conv2d(x, w, padding=1),
            [rnd(3, 5, 5), rnd(2, 3, 3, 3, seed=1)])


@BOTH
@pytest.mark.parametrize("kw", [dict(), dict(stride=2, padding=2, dilation=2), dict(padding="same", groups=2)])
def test_conv1d(kw, dtype):
    groups = kw.get("groups", 1)
    compare(lambda x, w, b: TF.conv1d(x, w, b, **kw), lambda x, w, b: F.conv1d(x, w, b, **kw),
            [rnd(2, 4, 11), rnd(6, 4 // groups, 3, seed=1), rnd(6, seed=2)], dtype)


def test_conv_transpose2d():
    compare(lambda x, w, b: TF.conv_transpose2d(x, w, b, stride=2, padding=1, output_padding=1),
            lambda x, w, b: F.conv_transpose2d(x, w, b, stride=2, padding=1, output_padding=1),
            [rnd(2, 3, 4, 5), rnd(3, 2, 3, 3, seed=1), rnd(2, seed=2)])


def test_conv2d_gradcheck_and_double_backward():
    x = ember.tensor(rnd(1, 2, 5, 4), requires_grad=True)
    w = ember.tensor(rnd(3, 2, 3, 2, seed=1), requires_grad=True)
    fn = lambda a, b: F.conv2d(a, b, stride=(2, 1), padding=1, dilation=(1, 2))  # noqa: E731
    assert ember.autograd.gradcheck(fn, (x, w))
    assert ember.autograd.gradgradcheck(fn, (x, w))


def test_conv2d_double_backward_matches_torch():
    x, w = rnd(2, 3, 6, 6), rnd(4, 3, 3, 3, seed=1)
    tx, tw = torch.tensor(x, requires_grad=True), torch.tensor(w, requires_grad=True)
    ex, ew = ember.tensor(x, requires_grad=True), ember.tensor(w, requires_grad=True)
    t_gx, = torch.autograd.grad((TF.conv2d(tx, tw, padding=1, stride=2) ** 2).sum(), tx, create_graph=True)
    e_gx, = ember.autograd.grad((F.conv2d(ex, ew, padding=1, stride=2) ** 2).sum(), ex, create_graph=True)
    (t_gx ** 2).sum().backward()
    (e_gx ** 2).sum().backward()
    np.testing.assert_allclose(ex.grad.numpy(), tx.grad.numpy(), rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(ew.grad.numpy(), tw.grad.numpy(), rtol=1e-9, atol=1e-9)


def test_conv2d_errors_name_op_and_shapes():
    x = ember.randn(2, 3, 8, 8)
    with pytest.raises(RuntimeError, match=r"conv2d.*\(2, 3, 8, 8\).*\(4, 5, 3, 3\)"):
        F.conv2d(x, ember.randn(4, 5, 3, 3))
    with pytest.raises(RuntimeError, match="conv2d.*4-D weight"):
        F.conv2d(x, ember.randn(4, 3, 3))
    with pytest.raises(RuntimeError, match="conv2d.*smaller than"):
        F.conv2d(x, ember.randn(4, 3, 9, 9))
    with pytest.raises(RuntimeError, match="conv2d.*dtype"):
        F.conv2d(x, ember.randn(4, 3, 3, 3, dtype=ember.float64))
    with pytest.raises(ValueError, match="same"):
        F.conv2d(x, ember.randn(4, 3, 3, 3), stride=2, padding="same")


# ---- pooling -------------------------------------------------------------------------------------
POOL_CASES = [
    dict(kernel_size=2),
    dict(kernel_size=3, stride=2, padding=1),
    dict(kernel_size=(3, 2), stride=(1, 2), dilation=(2, 1)),
    dict(kernel_size=3, stride=2, ceil_mode=True),
    dict(kernel_size=2, stride=1),
]


@BOTH
@pytest.mark.parametrize("kw", POOL_CASES, ids=[str(k) for k in POOL_CASES])
def test_max_pool2d(kw, dtype):
    compare(lambda x: TF.max_pool2d(x, **kw, return_indices=True), lambda x: F.max_pool2d(x, **kw, return_indices=True),
            [rnd(2, 3, 9, 8)], dtype)


def test_max_pool_ties_and_1d():
    x = np.zeros((1, 1, 4, 4))
    compare(lambda t: TF.max_pool2d(t, 2, return_indices=True), lambda t: F.max_pool2d(t, 2, return_indices=True), [x])
    compare(lambda t: TF.max_pool1d(t, 3, 2, 1), lambda t: F.max_pool1d(t, 3, 2, 1), [rnd(2, 3, 10)])


AVG_CASES = [
    dict(kernel_size=2),
    dict(kernel_size=3, stride=2, padding=1),
    dict(kernel_size=3, stride=2, padding=1, count_include_pad=False),
    dict(kernel_size=3, stride=2, padding=1, ceil_mode=True),
    dict(kernel_size=3, stride=2, padding=1, ceil_mode=True, count_include_pad=False),
    dict(kernel_size=2, divisor_override=3),
]


@BOTH
@pytest.mark.parametrize("kw", AVG_CASES, ids=[str(k) for k in AVG_CASES])
def test_avg_pool2d(kw, dtype):
    compare(lambda x: TF.avg_pool2d(x, **kw), lambda x: F.avg_pool2d(x, **kw), [rnd(2, 3, 9, 8)], dtype)


@pytest.mark.parametrize("size", [(1, 1), 3, (2, 4), (None, 3), 4])
def test_adaptive_avg_pool2d(size):
    compare(lambda x: TF.adaptive_avg_pool2d(x, size), lambda x: F.adaptive_avg_pool2d(x, size), [rnd(2, 3, 8, 7)])


def test_pool_1d_and_adaptive_max():
    compare(lambda x: TF.avg_pool1d(x, 3, 2, 1), lambda x: F.avg_pool1d(x, 3, 2, 1), [rnd(2, 3, 10)])
    compare(lambda x: TF.adaptive_avg_pool1d(x, 4), lambda x: F.adaptive_avg_pool1d(x, 4), [rnd(2, 3, 10)])
    compare(lambda x: TF.adaptive_max_pool2d(x, 2), lambda x: F.adaptive_max_pool2d(x, 2), [rnd(2, 3, 8, 6)])


def test_pool_gradcheck_and_double_backward():
    x = ember.tensor(rnd(1, 2, 5, 5), requires_grad=True)
    assert ember.autograd.gradcheck(lambda t: F.max_pool2d(t, 3, 2, 1), (x,))
    assert ember.autograd.gradgradcheck(lambda t: F.max_pool2d(t, 3, 2, 1) ** 2, (x,))
    assert ember.autograd.gradcheck(lambda t: F.avg_pool2d(t, 3, 2, 1, count_include_pad=False), (x,))
    assert ember.autograd.gradgradcheck(lambda t: F.avg_pool2d(t, 3, 2, 1) ** 2, (x,))


# ---- losses --------------------------------------------------------------------------------------
REDUCTIONS = ["mean", "sum", "none"]


@BOTH
@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_regression_losses(reduction, dtype):
    a, b = rnd(3, 4), rnd(3, 4, seed=1)
    for name in ("mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss"):
        compare(lambda x, y: getattr(TF, name)(x, y, reduction=reduction),
                lambda x, y: getattr(F, name)(x, y, reduction=reduction), [a, b], dtype)


@BOTH
@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_cross_entropy_indices(reduction, dtype):
    x, t, w = rnd(5, 4), ints(4, 5), rnd(4, seed=3, low=0.1)
    t[1] = -100
    compare(lambda a, b: TF.cross_entropy(a, b, reduction=reduction),
            lambda a, b: F.cross_entropy(a, b, reduction=reduction), [x, t], dtype)
    compare(lambda a, b, c: TF.cross_entropy(a, b, c, reduction=reduction, label_smoothing=0.2),
            lambda a, b, c: F.cross_entropy(a, b, c, reduction=reduction, label_smoothing=0.2), [x, t, w], dtype,
            grad=[True, False, False])
    compare(lambda a, b: TF.cross_entropy(a, b, reduction=reduction, label_smoothing=0.1),
            lambda a, b: F.cross_entropy(a, b, reduction=reduction, label_smoothing=0.1), [x, t], dtype)


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_cross_entropy_spatial_and_probabilities(reduction):
    x, t = rnd(2, 3, 4, 5), ints(3, 2, 4, 5)
    t[0, 1, 2] = 1
    w = rnd(3, seed=3, low=0.1)
    compare(lambda a, b, c: TF.cross_entropy(a, b, c, ignore_index=1, reduction=reduction),
            lambda a, b, c: F.cross_entropy(a, b, c, ignore_index=1, reduction=reduction), [x, t, w],
            grad=[True, False, False])
    p = np.random.default_rng(4).dirichlet(np.ones(3), size=(2, 4, 5)).transpose(0, 3, 1, 2).copy()
    compare(lambda a, b, c: TF.cross_entropy(a, b, c, reduction=reduction, label_smoothing=0.3),
            lambda a, b, c: F.cross_entropy(a, b, c, reduction=reduction, label_smoothing=0.3), [x, p, w],
            grad=[True, True, False])
    compare(lambda a, b: TF.cross_entropy(a, b, reduction=reduction),
            lambda a, b: F.cross_entropy(a, b, reduction=reduction), [rnd(4), np.array(2)])


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_nll_loss(reduction):
    x, t, w = rnd(6, 4), ints(4, 6), rnd(4, seed=3, low=0.1)
    t[0] = 3
    compare(lambda a, b, c: TF.nll_loss(a, b, c, ignore_index=3, reduction=reduction),
            lambda a, b, c: F.nll_loss(a, b, c, ignore_index=3, reduction=reduction), [x, t, w],
            grad=[True, False, False])


@BOTH
@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_binary_losses(reduction, dtype):
    p = 1 / (1 + np.exp(-rnd(3, 4)))
    t = np.random.default_rng(1).random((3, 4))
    w, pw = rnd(4, seed=2, low=0.1), rnd(4, seed=3, low=0.1)
    compare(lambda a, b, c: TF.binary_cross_entropy(a, b, c, reduction=reduction),
            lambda a, b, c: F.binary_cross_entropy(a, b, c, reduction=reduction), [p, t, w], dtype,
            grad=[True, False, False])
    compare(lambda a, b, c, d: TF.binary_cross_entropy_with_logits(a, b, c, reduction=reduction, pos_weight=d),
            lambda a, b, c, d: F.binary_cross_entropy_with_logits(a, b, c, reduction=reduction, pos_weight=d),
            [rnd(3, 4) * 30, t, w, pw], dtype,
            grad=[True, True, False, False])
    compare(lambda a, b: TF.binary_cross_entropy_with_logits(a, b, reduction=reduction),
            lambda a, b: F.binary_cross_entropy_with_logits(a, b, reduction=reduction), [rnd(3, 4), t], dtype)


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("p", [1, 2])
def test_multi_margin_loss(reduction, p):
    x, t, w = rnd(5, 4), ints(4, 5), rnd(4, seed=3, low=0.1)
    compare(lambda a, b, c: TF.multi_margin_loss(a, b, p=p, margin=0.7, weight=c, reduction=reduction),
            lambda a, b, c: F.multi_margin_loss(a, b, p=p, margin=0.7, weight=c, reduction=reduction), [x, t, w],
            grad=[True, False, False])
    compare(lambda a, b: TF.multi_margin_loss(a, b, p=p, reduction=reduction),
            lambda a, b: F.multi_margin_loss(a, b, p=p, reduction=reduction), [x, t])


def test_other_losses():
    a, b = rnd(3, 4), rnd(3, 4, seed=1)
    y = np.sign(rnd(3, seed=2))
    target_probs = np.random.default_rng(2).dirichlet(np.ones(4), size=3)
    compare(lambda x, t: TF.kl_div(x, t, reduction="batchmean"), lambda x, t: F.kl_div(x, t, reduction="batchmean"),
            [np.log(np.random.default_rng(1).dirichlet(np.ones(4), size=3)), target_probs])
    compare(lambda x, z, t: TF.cosine_embedding_loss(x, z, t, margin=0.1),
            lambda x, z, t: F.cosine_embedding_loss(x, z, t, margin=0.1), [a, b, y], grad=[True, True, False])
    compare(TF.soft_margin_loss, F.soft_margin_loss, [a, np.sign(b)], grad=[True, False])
    compare(lambda x, z, t: TF.margin_ranking_loss(x, z, t, 0.2), lambda x, z, t: F.margin_ranking_loss(x, z, t, 0.2),
            [rnd(5), rnd(5, seed=1), np.sign(rnd(5, seed=2))], grad=[True, True, False])
    compare(TF.triplet_margin_loss, F.triplet_margin_loss, [a, b, rnd(3, 4, seed=5)])


def test_loss_gradchecks():
    x = ember.tensor(rnd(3, 4), requires_grad=True)
    t = ember.tensor(ints(4, 3))
    w = ember.tensor(rnd(4, seed=3, low=0.1))
    assert ember.autograd.gradcheck(lambda a: F.cross_entropy(a, t, w, label_smoothing=0.1), (x,))
    assert ember.autograd.gradcheck(lambda a: F.multi_margin_loss(a, t, p=2), (x,))
    y = ember.tensor(np.random.default_rng(1).random((3, 4)))
    assert ember.autograd.gradcheck(lambda a: F.binary_cross_entropy_with_logits(a, y, pos_weight=w), (x,))


def test_loss_errors():
    with pytest.raises(ValueError, match="reduction"):
        F.mse_loss(ember.ones(2), ember.ones(2), reduction="avg")
    with pytest.raises(ValueError, match=r"cross_entropy.*target of shape"):
        F.cross_entropy(ember.ones(3, 4), ember.tensor([1, 2]))
    with pytest.raises(IndexError, match="out of bounds"):
        F.nll_loss(ember.ones(2, 3), ember.tensor([0, 5]))
    with pytest.raises(RuntimeError, match="between 0 and 1"):
        F.binary_cross_entropy(ember.tensor([2.0]), ember.tensor([1.0]))


# ---- attention, pad, misc ------------------------------------------------------------------------
@BOTH
def test_scaled_dot_product_attention(dtype):
    q, k, v = rnd(2, 3, 5, 4), rnd(2, 3, 6, 4, seed=1), rnd(2, 3, 6, 2, seed=2)
    compare(TF.scaled_dot_product_attention, F.scaled_dot_product_attention, [q, k, v], dtype)
    compare(lambda a, b, c: TF.scaled_dot_product_attention(a, b, c, is_causal=True, scale=0.3),
            lambda a, b, c: F.scaled_dot_product_attention(a, b, c, is_causal=True, scale=0.3), [q, k, v], dtype)
    mask = np.random.default_rng(3).random((5, 6)) > 0.3
    mask[:, 0] = True
    compare(lambda a, b, c, m: TF.scaled_dot_product_attention(a, b, c, attn_mask=m),
            lambda a, b, c, m: F.scaled_dot_product_attention(a, b, c, attn_mask=m), [q, k, v, mask], dtype,
            grad=[True, True, True, False])
    compare(lambda a, b, c, m: TF.scaled_dot_product_attention(a, b, c, attn_mask=m),
            lambda a, b, c, m: F.scaled_dot_product_attention(a, b, c, attn_mask=m), [q, k, v, rnd(5, 6, seed=4)],
            dtype, grad=[True, True, True, False])


def test_attention_dropout_uses_generator():
    q = ember.randn(1, 4, 8)
    ember.manual_seed(1)
    a = F.scaled_dot_product_attention(q, q, q, dropout_p=0.5)
    ember.manual_seed(1)
    b = F.scaled_dot_product_attention(q, q, q, dropout_p=0.5)
    np.testing.assert_array_equal(a.numpy(), b.numpy())


@pytest.mark.parametrize("mode", ["constant", "reflect", "replicate", "circular"])
def test_pad(mode):
    x = rnd(2, 3, 5, 6)
    compare(lambda t: TF.pad(t, (1, 2, 2, 1), mode=mode), lambda t: F.pad(t, (1, 2, 2, 1), mode=mode), [x])
    if mode == "constant":
        compare(lambda t: TF.pad(t, (1, -2), value=3.5), lambda t: F.pad(t, (1, -2), value=3.5), [x])


def test_unfold_and_interpolate():
    compare(lambda t: TF.unfold(t, 3, padding=1, stride=2), lambda t: F.unfold(t, 3, padding=1, stride=2),
            [rnd(2, 3, 5, 6)])
    compare(lambda t: TF.interpolate(t, scale_factor=2), lambda t: F.interpolate(t, scale_factor=2), [rnd(1, 2, 3, 4)])


# ---- higher order --------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["softmax", "log_softmax", "layer_norm", "gelu", "gelu_tanh", "silu"])
def test_double_backward(name):
    fns = {
        "softmax": lambda t: F.softmax(t, dim=1),
        "log_softmax": lambda t: F.log_softmax(t, dim=-1),
        "layer_norm": lambda t: F.layer_norm(t, (4,)),
        "gelu": F.gelu,
        "gelu_tanh": lambda t: F.gelu(t, approximate="tanh"),
        "silu": F.silu,
    }
    x = ember.tensor(rnd(2, 4), requires_grad=True)
    assert ember.autograd.gradcheck(fns[name], (x,))
    assert ember.autograd.gradgradcheck(fns[name], (x,))


def test_norm_gradchecks():
    x = ember.tensor(rnd(4, 2, 3), requires_grad=True)
    w = ember.tensor(rnd(2, seed=1), requires_grad=True)
    b = ember.tensor(rnd(2, seed=2), requires_grad=True)
    assert ember.autograd.gradcheck(lambda a, c, d: F.batch_norm(a, None, None, c, d, training=True), (x, w, b))
    lw = ember.tensor(rnd(3, seed=3), requires_grad=True)
    assert ember.autograd.gradcheck(lambda a, c: F.layer_norm(a, (3,), c), (x, lw))


def test_shape_rules_match_eager():
    from ember.ops.registry import OPS, Spec, abstract_eval

    x = ember.randn(2, 4, 7, 6)
    w = ember.randn(6, 2, 3, 3)
    geo = dict(stride=(2, 1), padding=(1, 0, 1, 1), dilation=(1, 2), groups=2)
    y = F.conv2d(x, w, stride=(2, 1), padding=0, dilation=(1, 2), groups=2)  # sanity: eager works
    spec = lambda t: Spec(tuple(t.shape), t.dtype)  # noqa: E731
    from ember.ops import conv

    out = conv.conv2d_raw(x, w, **geo)
    assert abstract_eval(OPS["conv2d"], (spec(x), spec(w)), geo).shape == tuple(out.shape)
    gx = conv.conv2d_input_grad(out, w, tuple(x.shape), **geo)
    assert abstract_eval(OPS["conv2d_input_grad"], (spec(out), spec(w)),
                         {"input_shape": tuple(x.shape), **geo}).shape == tuple(gx.shape)
    gw = conv.conv2d_weight_grad(x, out, tuple(w.shape), **geo)
    assert abstract_eval(OPS["conv2d_weight_grad"], (spec(x), spec(out)),
                         {"weight_shape": tuple(w.shape), **geo}).shape == tuple(gw.shape)
    attrs = dict(kernel=(3, 3), stride=(2, 2), padding=(1, 1), dilation=(1, 1), ceil_mode=True)
    values, idx = ember.ops.dispatch.apply(OPS["max_pool2d"], (x,), attrs) if hasattr(ember, "ops") else (None, None)
    specs = abstract_eval(OPS["max_pool2d"], (spec(x),), attrs)
    assert specs[0].shape == tuple(values.shape) and specs[1].dtype is ember.int64
    avg_attrs = dict(kernel=(3, 3), stride=(2, 2), padding=(1, 1), ceil_mode=True)
    assert abstract_eval(OPS["avg_pool2d"], (spec(x),), avg_attrs).shape == tuple(
        F.avg_pool2d(x, 3, 2, 1, ceil_mode=True).shape)
    assert y.shape[1] == 6
    for name in ("conv2d", "max_pool2d", "avg_pool2d", "softmax", "log_softmax", "gelu"):
        assert OPS[name].onnx


def test_layer_norm_double_backward_weight_only_and_bias_only():
    x = ember.tensor(rnd(3, 4))
    w = ember.tensor(rnd(4, seed=1), requires_grad=True)
    b = ember.tensor(rnd(4, seed=2), requires_grad=True)
    assert ember.autograd.gradgradcheck(lambda c: F.layer_norm(x, (4,), c) ** 2, (w,))
    assert ember.autograd.gradgradcheck(lambda c: F.layer_norm(x * c, (4,), None, c) ** 2, (b,))
    compare(lambda a, c: TF.layer_norm(a, (4,), None, c), lambda a, c: F.layer_norm(a, (4,), None, c),
            [rnd(3, 4), rnd(4, seed=2)])


def test_linear_double_backward():
    x = ember.tensor(rnd(2, 3, 4), requires_grad=True)
    w = ember.tensor(rnd(5, 4, seed=1), requires_grad=True)
    b = ember.tensor(rnd(5, seed=2), requires_grad=True)
    assert ember.autograd.gradgradcheck(lambda a, c, d: F.linear(a, c, d) ** 2, (x, w, b))


def test_max_unpool2d_and_rms_norm():
    x = rnd(2, 3, 6, 6)
    tv, ti = TF.max_pool2d(torch.tensor(x), 2, return_indices=True)
    ev, ei = F.max_pool2d(ember.tensor(x), 2, return_indices=True)
    compare(lambda v: TF.max_unpool2d(v, ti, 2), lambda v: F.max_unpool2d(v, ei, 2), [tv.numpy()])
    compare(lambda a, w: TF.rms_norm(a, (4,), w), lambda a, w: F.rms_norm(a, (4,), w), [rnd(3, 4), rnd(4, seed=1)])


def test_prelu_hinge_poisson():
    compare(TF.prelu, F.prelu, [rnd(2, 3, 4), rnd(3, seed=1)])
    compare(lambda x, t: TF.hinge_embedding_loss(x, t, margin=0.5),
            lambda x, t: F.hinge_embedding_loss(x, t, margin=0.5), [rnd(6), np.sign(rnd(6, seed=1))],
            grad=[True, False])
    counts = np.random.default_rng(2).poisson(2.0, (3, 4)).astype(np.float64)
    compare(lambda x, t: TF.poisson_nll_loss(x, t, full=True), lambda x, t: F.poisson_nll_loss(x, t, full=True),
            [rnd(3, 4), counts], grad=[True, False])
    compare(lambda x, t: TF.poisson_nll_loss(x, t, log_input=False),
            lambda x, t: F.poisson_nll_loss(x, t, log_input=False), [rnd(3, 4, low=0.1), counts], grad=[True, False])
