"""cuDNN training graphs (ember/backends/cuda_cudnn_train.py) against the fake frontend (tests/cuda/fake_cudnn.py,
which computes each node in float64 with PyTorch from the arrays read through their declared dims and strides):
layer norm and batch norm forward with statistics and backward, attention with softmax statistics and its
backward; then the hooks in ember/ops/nn_ops.py and ember/ops/normalization.py on the stand-in device (nn.LayerNorm
and nn.BatchNorm2d forward, running statistics and both gradients vs PyTorch). Plumbing, not cuDNN: the GPU tests
compare the real library with the CuPy path."""
from __future__ import annotations

import types

import numpy as np
import pytest
import torch

import ember
from ember.backends import cuda_cudnn, cuda_cudnn_train as train, standin
from ember.testing import standin_cuda

import fake_cudnn  # noqa: E402  (tests/cuda is on the path)


def _host_cupy(xp=np) -> types.SimpleNamespace:
    names = ("empty", "ones", "zeros", "ascontiguousarray", "maximum", "sqrt", "uint8")
    cuda = types.SimpleNamespace(runtime=types.SimpleNamespace(getDevice=lambda: 0),
                                 get_current_stream=lambda: types.SimpleNamespace(ptr=99))
    return types.SimpleNamespace(cuda=cuda, **{n: getattr(xp, n) for n in names})


@pytest.fixture()
def ops():
    fake_cudnn.GRAPHS.clear()
    fake_cudnn.REFUSE.clear()
    return cuda_cudnn.CudnnOps(fake_cudnn, _host_cupy())


def _t(a):
    return torch.from_numpy(np.asarray(a)).double()


def test_layer_norm_training_forward_and_backward(ops):
    rng = np.random.default_rng(0)
    x = (rng.standard_normal((3, 4, 2, 5)) * 2 + 1).astype(np.float32)
    w, b = (rng.standard_normal((2, 5)).astype(np.float32) for _ in range(2))
    y, mean, rstd = train.layer_norm_train(ops, x, (w, b), 2, 1e-5, True)
    xt, wt, bt = (_t(a).requires_grad_() for a in (x, w, b))
    yt = torch.nn.functional.layer_norm(xt, (2, 5), wt, bt, 1e-5)
    np.testing.assert_allclose(y, yt.detach().numpy(), rtol=1e-5, atol=1e-5)
    assert mean.shape == rstd.shape == (3, 4, 1, 1) and mean.dtype == rstd.dtype == np.float32
    np.testing.assert_allclose(mean, x.astype(np.float64).mean((2, 3), keepdims=True), rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(rstd, 1 / np.sqrt(x.astype(np.float64).var((2, 3), keepdims=True) + 1e-5), rtol=1e-5)
    (kind, operands, attrs, outs), = fake_cudnn.GRAPHS[0].ops
    assert kind == "layernorm" and attrs["norm_forward_phase"] == "TRAINING"
    assert operands["input"].dim == [12, 10, 1, 1] and [o.dim for o in outs[1:]] == [[12, 1, 1, 1]] * 2
    g = rng.standard_normal(x.shape).astype(np.float32)
    gx, gw, gb = train.layer_norm_backward(ops, g, x, mean, rstd, (w,), 2)
    yt.backward(_t(g))
    for got, want in ((gx, xt.grad), (gw, wt.grad), (gb, bt.grad)):
        assert got.shape == tuple(want.shape) and got.dtype == np.float32
        np.testing.assert_allclose(got, want.numpy(), rtol=1e-4, atol=1e-4)
    assert fake_cudnn.GRAPHS[1].ops[0][0] == "layernorm_backward"


def test_layer_norm_training_refuses_what_it_does_not_take(ops):
    x = np.ones((4, 6), np.float32)
    w = np.ones(6, np.float32)
    assert train.layer_norm_train(ops, x, (w,), 1, 1e-5, True) is None  # no bias
    assert train.layer_norm_train(ops, x.astype(np.float64), (w, w), 1, 1e-5, True) is None  # float32 only
    assert train.layer_norm_train(ops, np.ones((6, 4), np.float32).T, (w, w), 1, 1e-5, True) is None  # strided
    assert fake_cudnn.GRAPHS == []
    fake_cudnn.REFUSE.add("layernorm")
    assert train.layer_norm_train(ops, x, (w, w), 1, 1e-5, True) is None
    assert train.layer_norm_train(ops, x, (w, w), 1, 1e-5, True) is None
    assert len(fake_cudnn.GRAPHS) == 1  # the refusal is cached


@pytest.mark.parametrize("shape, affine", [((6, 3, 4, 5), True), ((5, 4, 7), False), ((9, 3), True)])
def test_batch_norm_training_forward_and_backward(ops, shape, affine):
    rng = np.random.default_rng(1)
    x = (rng.standard_normal(shape) * 3 - 2).astype(np.float32)
    c = shape[1]
    w = rng.standard_normal(c).astype(np.float32) if affine else None
    b = rng.standard_normal(c).astype(np.float32) if affine else None
    y, mean, var = train.batch_norm_train(ops, x, (w, b) if affine else (), 1e-5, affine)
    xt = _t(x).requires_grad_()
    wt = _t(w).requires_grad_() if affine else None
    bt = _t(b).requires_grad_() if affine else None
    yt = torch.nn.functional.batch_norm(xt, None, None, wt, bt, training=True, eps=1e-5)
    np.testing.assert_allclose(y, yt.detach().numpy(), rtol=1e-5, atol=1e-5)
    dims = (0,) + tuple(range(2, x.ndim))
    np.testing.assert_allclose(mean, x.astype(np.float64).mean(dims), rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(var, x.astype(np.float64).var(dims), rtol=1e-5)  # biased: ember's op returns it
    assert mean.shape == var.shape == (c,) and mean.dtype == np.float32
    g = rng.standard_normal(shape).astype(np.float32)
    gx, gw, gb = train.batch_norm_backward(ops, g, x, mean, var, (w,) if affine else (), 1e-5)
    yt.backward(_t(g))
    np.testing.assert_allclose(gx, xt.grad.numpy(), rtol=1e-4, atol=1e-4)
    want_gw = wt.grad.numpy() if affine else (g * (x - x.mean(dims, keepdims=True)) /
                                              np.sqrt(x.var(dims, keepdims=True) + 1e-5)).sum(dims)
    np.testing.assert_allclose(gw, want_gw, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(gb, g.astype(np.float64).sum(dims), rtol=1e-4, atol=1e-4)
    fwd, bwd = fake_cudnn.GRAPHS
    assert fwd.ops[0][0] == "batchnorm" and fwd.ops[0][1]["input"].dim[:2] == [shape[0], c]
    assert bwd.ops[0][0] == "batchnorm_backward" and bwd.ops[0][1]["inv_variance"].dim == [1, c, 1, 1]


def test_attention_training_graphs(ops):
    rng = np.random.default_rng(2)
    q, k, v = (rng.standard_normal((2, 3, 6, 4)).astype(np.float16) for _ in range(3))
    assert train.sdpa_train(ops, *(a.astype(np.float32) for a in (q, k, v)), True, 0.5) is None  # 16-bit only
    out, stats = train.sdpa_train(ops, q, k, v, True, 0.5)
    qt, kt, vt = (_t(a).requires_grad_() for a in (q, k, v))
    ot = torch.nn.functional.scaled_dot_product_attention(qt, kt, vt, is_causal=True, scale=0.5)
    np.testing.assert_allclose(out.astype(np.float64), ot.detach().numpy(), rtol=2e-3, atol=2e-3)
    scores = (qt @ kt.transpose(-1, -2) * 0.5).masked_fill(torch.ones(6, 6, dtype=torch.bool).triu(1), -np.inf)
    np.testing.assert_allclose(stats, torch.logsumexp(scores, -1, keepdim=True).detach().numpy(), rtol=1e-3)
    assert stats.shape == (2, 3, 6, 1) and stats.dtype == np.float32
    g = rng.standard_normal(out.shape).astype(np.float16)
    dq, dk, dv = train.sdpa_backward(ops, q, k, v, out, g, stats, True, 0.5)
    ot.backward(_t(g))
    for got, want in ((dq, qt.grad), (dk, kt.grad), (dv, vt.grad)):
        np.testing.assert_allclose(got.astype(np.float64), want.numpy(), rtol=1e-2, atol=1e-2)
    kinds = [g.ops[0][0] for g in fake_cudnn.GRAPHS]
    assert kinds == ["sdpa", "sdpa_backward"] and fake_cudnn.GRAPHS[0].ops[0][2]["generate_stats"] is True


def test_norm_layers_use_cudnn_on_the_device_and_match_torch(monkeypatch):
    """The hooks at the top of the layer norm and batch norm impls: on a non-NumPy namespace offering the kernels
    (the stand-in device offering the fake), forward, running statistics and every gradient go through cuDNN."""
    fake_cudnn.GRAPHS.clear()
    fake_cudnn.REFUSE.clear()
    ops = cuda_cudnn.CudnnOps(fake_cudnn, _host_cupy(standin.xp))
    kernels = {**ops.kernels(), **train.kernels(ops)}  # as the CUDA backend's native_kernel serves them
    monkeypatch.setattr(type(standin.BACKEND), "native_kernel", lambda self, name: kernels.get(name))
    rng = np.random.default_rng(3)
    x = rng.standard_normal((4, 3, 5, 6)).astype(np.float32)
    ln_t, bn_t = torch.nn.LayerNorm(6).double(), torch.nn.BatchNorm2d(3).double()
    with torch.no_grad():
        for p in list(ln_t.parameters()) + list(bn_t.parameters()):
            p.copy_(torch.from_numpy(rng.standard_normal(tuple(p.shape))))
    with standin_cuda():
        ln_e, bn_e = ember.nn.LayerNorm(6).cuda(), ember.nn.BatchNorm2d(3).cuda()
        with ember.no_grad():
            for pe, pt in zip(list(ln_e.parameters()) + list(bn_e.parameters()),
                              list(ln_t.parameters()) + list(bn_t.parameters())):
                pe.copy_(ember.tensor(pt.detach().numpy().astype(np.float32), device="cuda"))
        xe = ember.tensor(x, device="cuda", requires_grad=True)
        ye = ln_e(bn_e(xe))
        (ye * ye).sum().backward()
        xt = torch.from_numpy(x).double().requires_grad_()
        yt = ln_t(bn_t(xt))
        (yt * yt).sum().backward()
        np.testing.assert_allclose(ye.detach().cpu().numpy(), yt.detach().numpy(), rtol=1e-4, atol=1e-4)
        np.testing.assert_allclose(xe.grad.cpu().numpy(), xt.grad.numpy(), rtol=1e-3, atol=1e-3)
        for pe, pt in zip(list(ln_e.parameters()) + list(bn_e.parameters()),
                          list(ln_t.parameters()) + list(bn_t.parameters())):
            np.testing.assert_allclose(pe.grad.cpu().numpy(), pt.grad.numpy(), rtol=1e-3, atol=1e-3)
        np.testing.assert_allclose(bn_e.running_mean.cpu().numpy(), bn_t.running_mean.numpy(), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(bn_e.running_var.cpu().numpy(), bn_t.running_var.numpy(), rtol=1e-5, atol=1e-6)
    kinds = sorted(g.ops[0][0] for g in fake_cudnn.GRAPHS)
    assert kinds == ["batchnorm", "batchnorm_backward", "layernorm", "layernorm_backward"], kinds
