"""Lowering merges of a compiled step (ember/graph/passes/index_grads.py, scalar_chains.py): sibling slices'
gradients fill one buffer and each parameter's chain of scalar Adam kernels runs as one shared node, with the same
bits as the graph without them (signed zeros included) and eager's values."""
from __future__ import annotations

import numpy as np
import pytest

import ember
from ember.graph.passes import index_grads, share_scalar
from train_steps import classification_step


def _nodes(fn, name: str) -> list:
    return [n for n in fn.last.executable.nodes if n.op.name == name or str(n.attrs.get("ops", "")).startswith(name)]


def _qkv_step(slices, merge: bool, monkeypatch, compiled: bool = True) -> tuple:
    """Gradients of a packed projection read through ``slices`` of its last dim (heads split and permuted, as
    attention does), with zeros of both signs in the incoming gradients."""
    if not merge:
        monkeypatch.setattr(index_grads, "merge_index_grads", lambda nodes, keep: list(nodes))
    rng = np.random.default_rng(0)
    w = ember.tensor(rng.standard_normal((6, 12)).astype(np.float32), requires_grad=True)
    x = ember.tensor(rng.standard_normal((2, 5, 6)).astype(np.float32))
    z = rng.standard_normal((2, 2, 5, 2)).astype(np.float32)
    z[0, 0] = -0.0  # -0.0 * g: gradients of -0.0 reach the slices (the old sum turned them into 0.0)
    z[1, 1] = 0.0
    zt = ember.tensor(z)

    def step(x):
        qkv = x @ w
        loss = 0
        for k, part in enumerate(qkv[..., s] for s in slices):
            heads = part.reshape(2, 5, 2, part.shape[-1] // 2).permute(0, 2, 1, 3)
            loss = loss + (heads * (zt + k)).sum()
        w.grad = None
        loss.backward()
        return w.grad.clone()

    fn = ember.compile(step, fallback="raise", measure=False) if compiled else step
    grads = [fn(x).numpy().copy() for _ in range(3)]
    if not merge:
        monkeypatch.undo()
    return grads, fn


COVERING = [slice(0, 4), slice(4, 8), slice(8, 12)]


@pytest.mark.parametrize("slices", [COVERING, [slice(0, 4), slice(8, 12)]], ids=["covering", "gaps"])
def test_sibling_slice_gradients_fill_one_buffer_with_the_old_bits(slices, monkeypatch) -> None:
    got, fn = _qkv_step(slices, True, monkeypatch)
    assert len(_nodes(fn, "index_grad_sum")) == 1 and not _nodes(fn, "index_backward")
    want, ref = _qkv_step(slices, False, monkeypatch)
    assert not _nodes(ref, "index_grad_sum")
    for a, b in zip(got, want):
        assert a.tobytes() == b.tobytes()  # signed zeros too
    eager, _ = _qkv_step(slices, True, monkeypatch, compiled=False)
    np.testing.assert_allclose(got[-1], eager[-1], rtol=1e-6, atol=1e-6)


def test_overlapping_slices_keep_the_full_sums(monkeypatch) -> None:
    slices = [slice(0, 4), slice(2, 6)]  # columns 2 and 3 read twice: the sum's order is kept as traced
    got, fn = _qkv_step(slices, True, monkeypatch)
    assert not _nodes(fn, "index_grad_sum")
    eager, _ = _qkv_step(slices, True, monkeypatch, compiled=False)
    np.testing.assert_allclose(got[-1], eager[-1], rtol=1e-6, atol=1e-6)


def test_index_grad_sum_kernel_writes_each_slice_once() -> None:
    kernel = index_grads.IndexGradSum([(slice(None), slice(0, 2)), (slice(None), slice(2, 3))], (3, 3), True,
                                      [None, None])
    a = np.array([[1, -0.0], [2, 3], [4, 5]], np.float32)
    b = np.array([[-0.0], [np.inf], [np.nan]], np.float32)
    out = kernel(np, a, b)
    want = np.zeros((3, 3), np.float32)
    want[:, :2] += a
    want[:, 2:] += b
    assert out.tobytes() == want.tobytes()
    assert not np.signbit(out[0, 1]) and not np.signbit(out[0, 2])  # 0 + -0.0 is 0.0


def test_adam_bias_corrections_are_one_shared_chain(monkeypatch) -> None:
    def train(chains: bool) -> tuple:
        if not chains:
            monkeypatch.setattr(share_scalar, "merge_scalar_chains", lambda nodes, *a, **k: list(nodes))
        ember.manual_seed(0)
        model = ember.nn.Sequential(ember.nn.Linear(8, 16), ember.nn.ReLU(), ember.nn.Linear(16, 3))
        opt = ember.optim.Adam(model.parameters(), 1e-2)
        x, t = ember.randn(5, 8), ember.tensor(np.arange(5) % 3)

        step = classification_step(model, opt)

        fn = ember.compile(step, fallback="raise", measure=False)
        losses = [float(fn(x, t)) for _ in range(5)]
        monkeypatch.undo()
        return losses, [p.detach().numpy().copy() for p in model.parameters()], fn

    losses, params, fn = train(True)
    shared = _nodes(fn, "shared(")
    assert len(shared) == 1 and shared[0].attrs["ops"].startswith("shared(chain ") and shared[0].attrs["ops"].endswith(
        " x4"), [n.attrs["ops"] for n in shared]
    ref_losses, ref_params, ref = train(False)
    assert len(_nodes(ref, "shared(")) > 1
    assert losses == ref_losses
    for p, q in zip(params, ref_params):
        assert p.tobytes() == q.tobytes()


def test_gpt_style_head_split_writes_the_packed_layout(monkeypatch) -> None:
    # qkv.reshape(B, T, 3, H, D).permute(2, 0, 3, 1, 4); q, k, v = t[0], t[1], t[2]: the buffer is made in qkv's
    # layout and the reshape back from the permuted sum (a copy) disappears
    def run(merge: bool) -> tuple:
        if not merge:
            monkeypatch.setattr(index_grads, "merge_index_grads", lambda nodes, keep: list(nodes))
        rng = np.random.default_rng(1)
        w = ember.tensor(rng.standard_normal((6, 12)).astype(np.float32), requires_grad=True)
        x = ember.tensor(rng.standard_normal((2, 5, 6)).astype(np.float32))
        z = rng.standard_normal((2, 2, 5, 2)).astype(np.float32)
        z[1] = -0.0
        zt = ember.tensor(z)

        def step(x):
            t = (x @ w).reshape(2, 5, 3, 2, 2).permute(2, 0, 3, 1, 4)
            q, k, v = t[0], t[1], t[2]
            loss = (q * zt).sum() + (k * (zt + 1)).sum() + (v * v).sum()
            w.grad = None
            loss.backward()
            return w.grad.clone()

        fn = ember.compile(step, fallback="raise", measure=False)
        out = [fn(x).numpy().copy() for _ in range(3)]
        monkeypatch.undo()
        return out, fn, step(x).numpy()

    got, fn, eager = run(True)
    merged = _nodes(fn, "index_grad_sum")
    assert len(merged) == 1 and merged[0].op.impl.layout is not None
    want, _, _ = run(False)
    for a, b in zip(got, want):
        assert a.tobytes() == b.tobytes()
    np.testing.assert_allclose(got[-1], eager, rtol=1e-6, atol=1e-6)
