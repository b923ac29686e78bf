"""scaled_dot_product_attention through cuDNN's fused attention (ember/cuda_attention.py) on the stand-in device
offering the fake frontend's kernels (tests/cuda/fake_cudnn.py): forward and the three gradients vs PyTorch
float64, the array-formula backward used where cuDNN refuses one, and the conditions under which the composite
runs instead (float32, a mask, dropout, a trace)."""
from __future__ import annotations

import types

import numpy as np
import pytest
import torch

import ember
from ember import cuda_attention
from ember.backends import cuda_cudnn, cuda_cudnn_train as train, standin
from ember.testing import standin_cuda

import fake_cudnn  # noqa: E402  (tests/cuda is on the path)


@pytest.fixture()
def fake_kernels(monkeypatch):
    fake_cudnn.GRAPHS.clear()
    fake_cudnn.REFUSE.clear()
    names = ("empty", "ones", "zeros", "ascontiguousarray", "maximum", "sqrt", "uint8")
    cuda = types.SimpleNamespace(runtime=types.SimpleNamespace(getDevice=lambda: 0),
                                 get_current_stream=lambda: types.SimpleNamespace(ptr=1))
    ops = cuda_cudnn.CudnnOps(fake_cudnn, types.SimpleNamespace(cuda=cuda, **{n: getattr(standin.xp, n) for n in names}))
    kernels = {**ops.kernels(), **train.kernels(ops)}
    monkeypatch.setattr(type(standin.BACKEND), "native_kernel", lambda self, name: kernels.get(name))
    with standin_cuda():
        yield kernels


def _qkv(rng, shape=(2, 3, 8, 4)):
    return [rng.standard_normal(shape).astype(np.float16) for _ in range(3)]


@pytest.mark.parametrize("is_causal, scale", [(True, None), (False, 0.3)])
def test_attention_goes_through_cudnn_and_matches_torch(fake_kernels, is_causal, scale):
    rng = np.random.default_rng(0)
    arrays = _qkv(rng)
    qe, ke, ve = (ember.tensor(a, device="cuda", requires_grad=True) for a in arrays)
    out = ember.nn.functional.scaled_dot_product_attention(qe, ke, ve, is_causal=is_causal, scale=scale)
    g = rng.standard_normal(out.shape).astype(np.float16)
    out.backward(ember.tensor(g, device="cuda"))
    qt, kt, vt = (torch.from_numpy(a).double().requires_grad_() for a in arrays)
    ref = torch.nn.functional.scaled_dot_product_attention(qt, kt, vt, is_causal=is_causal, scale=scale)
    ref.backward(torch.from_numpy(g).double())
    assert out.dtype == ember.float16 and type(out.grad_fn).__name__ != "NoneType"
    np.testing.assert_allclose(out.detach().cpu().numpy().astype(np.float64), ref.detach().numpy(), atol=3e-3, rtol=3e-3)
    for got, want in ((qe, qt), (ke, kt), (ve, vt)):
        np.testing.assert_allclose(got.grad.cpu().numpy().astype(np.float64), want.grad.numpy(), atol=2e-2, rtol=2e-2)
    assert [gr.ops[0][0] for gr in fake_cudnn.GRAPHS] == ["sdpa", "sdpa_backward"]


def test_a_refused_backward_uses_the_statistics_formulas(fake_kernels):
    fake_cudnn.REFUSE.add("sdpa_backward")
    rng = np.random.default_rng(1)
    arrays = _qkv(rng, (1, 2, 6, 8))
    qe, ke, ve = (ember.tensor(a, device="cuda", requires_grad=True) for a in arrays)
    out = ember.nn.functional.scaled_dot_product_attention(qe, ke, ve, is_causal=True)
    (out.float() ** 2).sum().backward()
    qt, kt, vt = (torch.from_numpy(a).double().requires_grad_() for a in arrays)
    (torch.nn.functional.scaled_dot_product_attention(qt, kt, vt, is_causal=True) ** 2).sum().backward()
    for got, want in ((qe, qt), (ke, kt), (ve, vt)):
        np.testing.assert_allclose(got.grad.cpu().numpy().astype(np.float64), want.grad.numpy(), atol=2e-2, rtol=2e-2)
    failures = fake_kernels["cudnn_conv2d"].__self__.failures  # (the one CudnnOps behind every kernel)
    assert [k[0] for k in failures] == ["sdpa_backward"] and [g.ops[0][0] for g in fake_cudnn.GRAPHS] == \
        ["sdpa", "sdpa_backward"]


def test_the_composite_runs_where_cudnn_does_not_apply(fake_kernels):
    rng = np.random.default_rng(2)
    q, k, v = (ember.tensor(a, device="cuda") for a in _qkv(rng))
    ember.nn.functional.scaled_dot_product_attention(q.float(), k.float(), v.float())  # float32
    ember.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=ember.ones(8, 8, dtype=ember.bool,
                                                                                   device="cuda"))
    ember.nn.functional.scaled_dot_product_attention(q, k, v, dropout_p=0.1)
    assert cuda_attention.cudnn_sdpa(q.cpu(), k.cpu(), v.cpu(), False, None) is None
    assert fake_cudnn.GRAPHS == []
