"""scaled_dot_product_attention as one record with a fused backward (ember/ops/attention.py):
forward and gradients against PyTorch, causal masks on square and non-square scores, special points
(inf/NaN inputs, saturated softmax), second derivatives, the composite fallbacks, the stand-in device
and ember.compile.
"""
from __future__ import annotations

import math

import numpy as np
import pytest

import ember
import ember.nn.functional as F
from ember.ops.attention import fits

torch = pytest.importorskip("torch")


def _reference(q, k, v, causal, scale=None):
    """softmax(Q K^T scale + mask) V in plain torch ops (differentiable twice, unlike torch's fused kernel)."""
    scores = q @ k.transpose(-1, -2) * (1.0 / math.sqrt(q.shape[-1]) if scale is None else scale)
    if causal:
        scores = scores.masked_fill(~torch.ones(scores.shape[-2:], dtype=torch.bool).tril(), float("-inf"))
    return torch.softmax(scores, -1) @ v


def _both(arrays):
    return [ember.tensor(a, requires_grad=True) for a in arrays], [torch.tensor(a, requires_grad=True) for a in arrays]


@pytest.mark.parametrize("dtype, tol", [(np.float32, 2e-6), (np.float64, 1e-13)])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("shapes", [((2, 3, 7, 4), (2, 3, 7, 4), (2, 3, 7, 5)),   # square, dv != dk
                                    ((2, 5, 4), (2, 9, 4), (2, 9, 3)),            # fewer queries than keys
                                    ((1, 2, 130, 4), (1, 2, 70, 4), (1, 2, 70, 3)),  # query blocks (causal)
                                    ((1, 2, 130, 4), (1, 2, 200, 4), (1, 2, 200, 3)),
                                    ((9, 4), (5, 4), (5, 4))])                    # 2-D, more queries than keys
def test_forward_and_gradients_vs_torch(dtype, tol, causal, shapes):
    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal(s).astype(dtype) for s in shapes]
    ours, theirs = _both(arrays)
    assert fits(*ours, None, 0.0)
    out = F.scaled_dot_product_attention(*ours, is_causal=causal, scale=0.7)
    want = torch.nn.functional.scaled_dot_product_attention(*theirs, is_causal=causal, scale=0.7)
    g = rng.standard_normal(tuple(out.shape)).astype(dtype)
    out.backward(ember.tensor(g))
    want.backward(torch.tensor(g))
    # rows with no visible key (causal, more queries than keys is not that: row i sees keys 0..i) stay finite
    np.testing.assert_allclose(out.detach().numpy(), want.detach().numpy(), rtol=tol, atol=tol)
    for a, b in zip(ours, theirs):
        np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=tol, atol=tol)


@pytest.mark.parametrize("causal", [False, True])
def test_second_derivatives_vs_torch(causal):
    rng = np.random.default_rng(1)
    arrays = [rng.standard_normal((2, 2, 5, 3)) for _ in range(3)]
    ours, theirs = _both(arrays)
    first = ember.autograd.grad(F.scaled_dot_product_attention(*ours, is_causal=causal).pow(2).sum(), ours,
                                create_graph=True)
    want_first = torch.autograd.grad(_reference(*theirs, causal).pow(2).sum(), theirs, create_graph=True)
    second = ember.autograd.grad(sum(t.sum() for t in first), ours)
    want_second = torch.autograd.grad(sum(t.sum() for t in want_first), theirs)
    for a, b in zip(first + second, tuple(want_first) + tuple(want_second)):
        np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-12, atol=1e-12)


def test_special_points_vs_torch():
    """Huge scores (softmax saturates to one-hot: no overflow), and inf / NaN inputs (NaN where torch's
    math gives NaN)."""
    rng = np.random.default_rng(2)
    q, k, v = (rng.standard_normal((1, 2, 4, 3)).astype(np.float32) for _ in range(3))
    cases = {"huge": (q * 1e4, k * 1e4, v), "zeros": (q * 0, k * 0, v)}
    q_inf = q.copy()
    q_inf[0, 0, 1, 0] = np.inf
    k_nan = k.copy()
    k_nan[0, 1, 2, 2] = np.nan
    cases.update({"inf query": (q_inf, k, v), "nan key": (q, k_nan, v)})
    for name, arrays in cases.items():
        for causal in (False, True):
            ours, theirs = _both(arrays)
            with np.errstate(all="ignore"):
                out = F.scaled_dot_product_attention(*ours, is_causal=causal)
                out.sum().backward()
            want = _reference(*theirs, causal)
            want.sum().backward()
            np.testing.assert_allclose(out.detach().numpy(), want.detach().numpy(), rtol=1e-5, atol=1e-5,
                                       err_msg=f"{name} causal={causal}")
            for a, b in zip(ours, theirs):
                np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-4, atol=1e-4,
                                           err_msg=f"{name} causal={causal} gradient")


def test_cases_the_record_does_not_take_run_the_composite():
    q = ember.randn(2, 3, 4)
    mask = ember.ones(3, 3, dtype=ember.bool).tril()
    assert not fits(q, q, q, mask, 0.0)
    assert not fits(q, q, q, None, 0.1)
    assert not fits(q.half(), q.half(), q.half(), None, 0.0)
    assert not fits(q, ember.randn(1, 3, 4), ember.randn(1, 3, 4), None, 0.0)  # broadcast batch
    with_mask = F.scaled_dot_product_attention(q, q, q, attn_mask=mask)
    np.testing.assert_allclose(with_mask.numpy(), F.scaled_dot_product_attention(q, q, q, is_causal=True).numpy(),
                               rtol=1e-6, atol=1e-6)


def test_on_the_standin_device_and_compiled():
    rng = np.random.default_rng(3)
    arrays = [rng.standard_normal((2, 2, 6, 4)).astype(np.float32) for _ in range(3)]

    def step(q, k, v):
        return F.scaled_dot_product_attention(q, k, v, is_causal=True).square().sum()

    ours, theirs = _both(arrays)
    step(*ours).backward()
    _reference(*theirs, True).square().sum().backward()
    with ember.testing.standin_cuda():
        device = [ember.tensor(a, device="cuda", requires_grad=True) for a in arrays]
        step(*device).backward()
        grads_device = [t.grad.cpu().numpy() for t in device]
    compiled = ember.compile(lambda q, k, v: ember.autograd.grad(step(q, k, v), [q, k, v]), fallback="raise")
    fresh = [ember.tensor(a, requires_grad=True) for a in arrays]
    for _ in range(3):  # eager call, trace, compiled graph
        grads_compiled = compiled(*fresh)
    for a, b, c, d in zip(ours, theirs, grads_device, grads_compiled):
        np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=2e-6, atol=2e-6)
        np.testing.assert_allclose(c, a.grad.numpy(), rtol=1e-6, atol=1e-6)
        np.testing.assert_allclose(d.numpy(), a.grad.numpy(), rtol=1e-6, atol=1e-6)


def test_onnx_export_runs_like_ember():
    pytest.importorskip("onnx")
    ort = pytest.importorskip("onnxruntime")
    import io

    class Block(ember.nn.Module):
        def forward(self, q, k, v):
            return F.scaled_dot_product_attention(q, k, v, is_causal=True) + F.scaled_dot_product_attention(q, k, v)

    rng = np.random.default_rng(5)
    arrays = [rng.standard_normal((2, 3, 6, 4)).astype(np.float32) for _ in range(3)]
    buffer = io.BytesIO()
    ember.onnx.export(Block(), tuple(ember.tensor(a) for a in arrays), buffer, input_names=["q", "k", "v"])
    session = ort.InferenceSession(buffer.getvalue())
    (got,) = session.run(None, dict(zip(["q", "k", "v"], arrays)))
    np.testing.assert_allclose(got, Block()(*(ember.tensor(a) for a in arrays)).numpy(), rtol=1e-5, atol=1e-5)
