"""The attention record's NumPy path split over the batch on ember's threads (ember/ops/attention.py, ``_by_batch``;
the native kernels' split over heads: tests/nn/test_attention_kernels.py):
values and gradients against PyTorch (float64 reference), the split really taken, and the same bits as the
unsplit call (each slice is computed as it would be alone; BLAS on one thread in both)."""
from __future__ import annotations

import numpy as np
import pytest

import ember
import ember.nn.functional as F
from ember.backends import cpu_blas
from ember.ops import attention

torch = pytest.importorskip("torch")

# (q, k, v) shapes with 2 * _SPLIT_SCORES score elements or more: the split applies on 2+ threads
SPLIT_SHAPES = [((4, 2, 256, 16), (4, 2, 256, 16), (4, 2, 256, 8)),     # causal: 4 query blocks
                ((6, 2, 160, 16), (6, 2, 200, 16), (6, 2, 200, 16)),    # more keys than queries, odd batch
                ((4, 4, 128, 8), (4, 4, 128, 8), (4, 4, 128, 8))]


def _spy(monkeypatch: pytest.MonkeyPatch) -> list:
    """Two ember threads for the attention module, and a record of each parallel_for it starts."""
    calls: list = []
    real = attention.parallel_for

    def spy(fn, total, min_chunk=1):
        calls.append((total, min_chunk))
        real(fn, total, min_chunk)

    monkeypatch.setattr(attention, "num_threads", lambda: 2)
    monkeypatch.setattr(attention, "parallel_for", spy)
    monkeypatch.setattr(attention.attention_kernels, "takes", lambda *arrays: False)  # the NumPy path's split
    return calls


@pytest.mark.parametrize("causal", [True, False])
@pytest.mark.parametrize("shapes", SPLIT_SHAPES)
def test_split_attention_vs_torch(monkeypatch, causal, shapes):
    calls = _spy(monkeypatch)
    rng = np.random.default_rng(3)
    arrays = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    ours = [ember.tensor(a, requires_grad=True) for a in arrays]
    theirs = [torch.tensor(a.astype(np.float64), requires_grad=True) for a in arrays]
    out = F.scaled_dot_product_attention(*ours, is_causal=causal, scale=0.3)
    want = torch.nn.functional.scaled_dot_product_attention(*theirs, is_causal=causal, scale=0.3)
    g = rng.standard_normal(tuple(out.shape)).astype(np.float32)
    out.backward(ember.tensor(g))
    want.backward(torch.tensor(g.astype(np.float64)))
    if cpu_blas._controls() is not None:  # NumPy's BLAS thread count is settable: forward and backward split
        assert [total for total, _ in calls] == [shapes[0][0]] * 2
    np.testing.assert_allclose(out.detach().numpy(), want.detach().numpy(), rtol=1e-5, atol=1e-5)
    for a, b in zip(ours, theirs):
        np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("causal", [True, False])
def test_split_gives_the_bits_of_one_call(monkeypatch, causal):
    if cpu_blas._controls() is None:
        pytest.skip("NumPy's BLAS thread count cannot be set here: attention is never split")
    rng = np.random.default_rng(4)
    q, k, v, g = (rng.standard_normal((5, 3, 256, 16)).astype(np.float32) for _ in range(4))
    q = np.ascontiguousarray(q.transpose(0, 2, 1, 3)).transpose(0, 2, 1, 3)  # head-split views, as in a GPT

    def run() -> tuple:
        out, weights = attention._attention_impl(np, q, k, v, is_causal=causal, scale=0.25)
        return (out, weights) + attention._attention_backward_impl(np, g, q, k, v, out, weights, is_causal=causal,
                                                                   scale=0.25)

    monkeypatch.setattr(attention, "num_threads", lambda: 1)
    monkeypatch.setattr(attention.attention_kernels, "takes", lambda *arrays: False)
    with cpu_blas.single_threaded_blas():  # the unsplit call with BLAS on one thread, as each split block has
        whole = run()
    calls = _spy(monkeypatch)
    split = run()
    assert len(calls) == 2
    for a, b in zip(whole, split):
        assert np.array_equal(a, b)


def test_small_or_unbatched_attention_is_not_split(monkeypatch):
    calls = _spy(monkeypatch)
    rng = np.random.default_rng(5)
    for shape in [(2, 2, 64, 8), (1, 8, 256, 8), (256, 8)]:  # too few scores; a batch of one; no batch axis
        q = ember.tensor(rng.standard_normal(shape).astype(np.float32), requires_grad=True)
        F.scaled_dot_product_attention(q, q, q, is_causal=True).sum().backward()
    assert calls == []
