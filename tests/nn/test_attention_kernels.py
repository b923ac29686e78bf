"""The attention record's native float32 kernels (ember/backends/cpu_attention_kernels.py, via
ember/ops/attention_kernels.py) against PyTorch in float64: head-split views, causal with more or fewer keys
than queries (torch's top-left is_causal), query blocks' edges, 2-D to 5-D inputs, saturated and NaN/inf
scores; the kernels really run; the split over heads gives the bits of one thread; the vectorized exp."""
from __future__ import annotations

import numpy as np
import pytest

import ember
import ember.nn.functional as F
from ember.backends import cpu_kernels
from ember.ops import attention_kernels

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.skipif(cpu_kernels.get("attention_forward_f32") is None,
                                reason="no native attention kernels (numba or AVX-512 missing)")


def _reference(q, k, v, causal, scale):
    """softmax(Q K^T scale) V after masked_fill of the hidden keys (query i sees keys 0..i) in torch float64 ops:
    ember's convention for NaN/inf inputs (torch's own three paths differ there: the math path adds a -inf bias,
    whose gradient flows to hidden keys; the flash kernel skips hidden blocks)."""
    scores = q @ k.transpose(-1, -2) * (1.0 / q.shape[-1] ** 0.5 if scale is None else scale)
    if causal:
        scores = scores.masked_fill(~torch.ones(scores.shape[-2:], dtype=torch.bool).tril(), float("-inf"))
    return torch.softmax(scores, -1) @ v


def _check(arrays, causal, scale=None, grad=None, rtol=2e-5, atol=2e-5):
    ours = [ember.tensor(a, requires_grad=True) for a in arrays]
    theirs = [torch.tensor(a.astype(np.float64), requires_grad=True) for a in arrays]
    out = F.scaled_dot_product_attention(*ours, is_causal=causal, scale=scale)
    want = _reference(*theirs, causal, scale)
    g = np.random.default_rng(9).standard_normal(tuple(out.shape)).astype(np.float32) if grad is None else grad
    with np.errstate(all="ignore"):
        out.backward(ember.tensor(g))
    want.backward(torch.tensor(g.astype(np.float64)))
    np.testing.assert_allclose(out.detach().numpy(), want.detach().numpy(), rtol=rtol, atol=atol)
    for a, b in zip(ours, theirs):
        np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=10 * rtol, atol=10 * atol)


def _head_split(batch, length, heads, dim, seed=0):
    """q, k, v as a GPT block makes them: views of one (B, T, 3, H, D) projection."""
    packed = np.random.default_rng(seed).standard_normal((batch, length, 3, heads, dim)).astype(np.float32)
    return [packed[:, :, i].transpose(0, 2, 1, 3) for i in range(3)]


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("length", [1, 23, 24, 25, 49, 70])
def test_head_split_views_vs_torch(causal, length):
    _check(_head_split(2, length, 3, 16), causal)


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("shapes", [((2, 3, 30, 8), (2, 3, 45, 8), (2, 3, 45, 5)),     # more keys, other value width
                                    ((2, 2, 50, 12), (2, 2, 20, 12), (2, 2, 20, 12)),  # fewer keys (causal: full rows)
                                    ((40, 33), (40, 33), (40, 33)),                    # no batch axes
                                    ((3, 26, 8), (3, 26, 8), (3, 26, 8)),
                                    ((2, 2, 2, 27, 4), (2, 2, 2, 27, 4), (2, 2, 2, 27, 4))])
def test_shapes_vs_torch(causal, shapes):
    rng = np.random.default_rng(1)
    _check([rng.standard_normal(s).astype(np.float32) for s in shapes], causal, scale=0.37)


def test_special_scores_vs_torch():
    """Saturated softmax (scores of 1e4: one-hot rows), and NaN/inf inputs: NaN exactly where the masked_fill
    composite in torch has NaN, in the output and every gradient."""
    rng = np.random.default_rng(2)
    q, k, v = (rng.standard_normal((2, 2, 30, 8)).astype(np.float32) for _ in range(3))
    _check([q * 100, k * 100, v], causal=True)
    q_inf, k_nan = q.copy(), k.copy()
    q_inf[0, 0, 5, 1] = np.inf
    k_nan[1, 1, 7, 2] = np.nan
    for arrays in ((q_inf, k, v), (q, k_nan, v)):
        for causal in (False, True):
            _check(list(arrays), causal)


def test_the_kernel_runs_and_lays_out_like_the_query(monkeypatch):
    calls = []
    real = attention_kernels.forward
    monkeypatch.setattr(attention_kernels, "forward", lambda *a: calls.append(1) or real(*a))
    q, k, v = (ember.tensor(a) for a in _head_split(2, 20, 3, 8))
    out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    assert calls == [1]
    assert out.stride() == (20 * 3 * 8, 8, 3 * 8, 1)  # (B, T, H, D) in memory, as torch's flash kernel
    assert out.transpose(1, 2).is_contiguous()


def test_gradients_lay_out_like_their_inputs():
    """dq, dk, dv in q's, k's, v's order of axes (head-split views: (B, T, H, D) in memory), so the transposes and
    reshapes back to (B, T, E) are views; the same bits as from contiguous copies of the inputs."""
    q, k, v = _head_split(2, 40, 3, 16, seed=5)
    g = np.random.default_rng(6).standard_normal((2, 3, 40, 16)).astype(np.float32)
    out, weights = attention_kernels.forward(q, k, v, False, 0.25)
    grads = attention_kernels.backward(g, q, k, v, out, weights, False, 0.25)
    for grad in grads:
        assert grad.strides == (40 * 3 * 16 * 4, 16 * 4, 3 * 16 * 4, 4) and grad.transpose(0, 2, 1, 3).flags.c_contiguous
    copies = [np.ascontiguousarray(a) for a in (q, k, v)]
    out_c, weights_c = attention_kernels.forward(*copies, False, 0.25)
    for a, b in zip(grads, attention_kernels.backward(g, *copies, out_c, weights_c, False, 0.25)):
        assert b.flags.c_contiguous and np.array_equal(a, b)


def test_split_over_heads_gives_the_bits_of_one_thread(monkeypatch):
    q, k, v = _head_split(4, 256, 3, 16, seed=3)
    g = np.random.default_rng(4).standard_normal((4, 3, 256, 16)).astype(np.float32)

    def run():
        out, weights = attention_kernels.forward(q, k, v, True, 0.25)
        return (out, weights) + attention_kernels.backward(g, q, k, v, out, weights, True, 0.25)

    monkeypatch.setattr(attention_kernels, "num_threads", lambda: 1)
    one = run()
    splits = []
    real = attention_kernels.parallel_for
    monkeypatch.setattr(attention_kernels, "num_threads", lambda: 2)
    monkeypatch.setattr(attention_kernels, "parallel_for", lambda fn, n, m=1: splits.append(n) or real(fn, n, m))
    two = run()
    assert splits == [12, 12]
    for a, b in zip(one, two):
        assert np.array_equal(a, b, equal_nan=True)


def test_vectorized_exp_within_2_ulp():
    """The softmax's 16-lane exp (``cpu_vector_rows.exp_sum`` with scale 1, shift 0) against float64 exp, on the
    softmax's range and its edges, with every tail length of the masked last vector; and the sum it returns."""
    import numba

    from ember.backends.cpu_vector_rows import exp_sum

    @numba.njit
    def run(x):
        return exp_sum(x.ctypes.data, x.ctypes.data, x.size, np.float32(1.0), np.float32(0.0))

    x = np.concatenate([np.linspace(-87.3, 0.0, 400_001, dtype=np.float32),
                        np.array([-np.inf, -1e30, -88.0, -87.34, 0.0, -0.0, -1e-30], np.float32)])
    want = np.exp(x.astype(np.float64))
    out = x.copy()
    total = run(out)
    normal = want >= np.finfo(np.float32).tiny
    ulps = np.abs(out[normal] - want[normal]) / np.spacing(want[normal].astype(np.float32))
    assert ulps.max() <= 2.0
    assert np.all(out[~normal] == 0.0)
    assert out[-3] == 1.0 and out[-2] == 1.0 and out[-1] == 1.0
    assert abs(total - want.sum()) <= 1e-5 * want.sum()
    for n in range(1, 34):  # tails: nothing past n written
        row = np.full(40, 7.0, np.float32)
        row[:n] = np.linspace(-3, 0, n, dtype=np.float32)
        total = run(row[:n])
        assert np.allclose(row[:n], np.exp(np.linspace(-3, 0, n)), rtol=3e-7, atol=0)
        assert np.all(row[n:] == 7.0) and abs(total - np.exp(np.linspace(-3, 0, n)).sum()) <= 1e-6 * n
    nan = np.array([0.0, np.nan, -1.0], np.float32)
    assert np.isnan(run(nan)) and np.isnan(nan[1]) and nan[0] == 1.0


def test_without_gradients_the_probabilities_are_not_kept():
    """Under no_grad (or inputs that need no gradient) the kernels skip writing the probabilities: the same
    output bits, eager and compiled."""
    q, k, v = _head_split(2, 60, 3, 16, seed=5)
    with_grad = F.scaled_dot_product_attention(*(ember.tensor(a, requires_grad=True) for a in (q, k, v)),
                                               is_causal=True)
    with ember.no_grad():
        plain = F.scaled_dot_product_attention(*(ember.tensor(a) for a in (q, k, v)), is_causal=True)
    compiled = ember.compile(lambda a, b, c: F.scaled_dot_product_attention(a, b, c, is_causal=True))
    for _ in range(3):
        graph = compiled(*(ember.tensor(a) for a in (q, k, v)))
    assert np.array_equal(plain.numpy(), with_grad.detach().numpy())
    assert np.array_equal(graph.numpy(), with_grad.detach().numpy())
