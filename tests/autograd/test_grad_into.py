"""A matmul's weight gradient added into an existing ``.grad`` by its split GEMM (ember/autograd/grad_into.py).

``C = A @ B + C`` in one BLAS call per half must give the bits of the engine's own ``.grad += A @ B`` (K within
one of BLAS's K blocks), with ``.grad``'s version bumped as the engine's add bumps it; every case where another
gradient, a hook, a capture or the layout of ``.grad`` needs the engine's path must not take it. The split runs
forced (the worker's half, or the caller taking it back), so the path is taken whatever the machine's load.
"""
from __future__ import annotations

import numpy as np
import pytest

import ember
from ember.autograd import grad_into
from ember.backends import cpu_hot_worker

pytestmark = pytest.mark.skipif(not cpu_hot_worker.available(), reason="hot worker off here (no numba, no "
                                "OpenBLAS whose threads ember holds, one thread, or EMBER_HOT_WORKER=0)")


@pytest.fixture
def taken(monkeypatch):
    """Every eligible weight gradient added by a forced split (deterministic); the list of (m, k, n) added."""
    added: list = []
    real = cpu_hot_worker.split_gemm_into

    def forced(a, b, out, beta=0, axis=None, force=False):
        done = real(a, b, out, beta, axis, force=True)
        if done and beta == 1:
            added.append((a.shape[0], a.shape[1], b.shape[1]))
        return done
    monkeypatch.setattr(cpu_hot_worker, "split_gemm_into", forced)
    return added


def _w1(dtype=np.float32, steps: int = 3, zero: bool = True) -> list:
    """W1's eager step (64x1000x100x10, sub_ and zero_ as benchmarks/workload_models.two_layer_step); the weights
    and gradients after each step (the first backward makes .grad, the next ones add into it)."""
    rng = np.random.default_rng(1)
    x, y = ember.tensor(rng.standard_normal((64, 1000)).astype(dtype)), ember.tensor(
        rng.standard_normal((64, 10)).astype(dtype))
    w1 = ember.tensor(rng.standard_normal((1000, 100)).astype(dtype), requires_grad=True)
    w2 = ember.tensor(rng.standard_normal((100, 10)).astype(dtype), requires_grad=True)
    seen = []
    for step in range(steps):
        (x.mm(w1).clamp(min=0).mm(w2) - y).pow(2).sum().backward()
        seen += [w1.grad.numpy().copy(), w1.grad._version]
        with ember.no_grad():
            w1.sub_(1e-6 * w1.grad)
            w2.sub_(1e-6 * w2.grad)
            if zero and step % 2:
                w1.grad.zero_()
                w2.grad.zero_()
        seen.append(w1.detach().numpy().copy())
    return seen


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("zero", [True, False])
def test_added_into_grad_is_the_engines_sum_bit_for_bit(taken, monkeypatch, dtype, zero):
    got = _w1(dtype, 4, zero)
    assert taken == [(1000, 64, 100)] * 3  # every backward after the first (which hands its product over)
    monkeypatch.setattr(grad_into, "MAX_K", 0)
    want = _w1(dtype, 4, zero)
    assert len(taken) == 3
    for g, w in zip(got, want):
        if isinstance(g, np.ndarray):
            assert g.tobytes() == w.tobytes()
        else:
            assert g == w  # .grad's version: bumped once per backward either way


def test_against_a_float64_reference(taken):
    rng = np.random.default_rng(2)
    x = rng.standard_normal((64, 1000)).astype(np.float32)
    g = rng.standard_normal((64, 100)).astype(np.float32)
    w = ember.tensor(np.zeros((1000, 100), np.float32), requires_grad=True)
    xt, gt = ember.tensor(x), ember.tensor(g)
    for _ in range(3):
        (xt.mm(w) * gt).sum().backward()
    assert len(taken) == 2
    np.testing.assert_allclose(w.grad.numpy(), 3 * (x.astype(np.float64).T @ g), rtol=1e-4, atol=1e-3)


def test_what_needs_the_engine_is_left_to_it(taken):
    rng = np.random.default_rng(4)
    x = ember.tensor(rng.standard_normal((64, 1000)).astype(np.float32))
    c = ember.tensor(rng.standard_normal((64, 100)).astype(np.float32))  # (a dense upstream gradient)
    w = ember.tensor(rng.standard_normal((1000, 100)).astype(np.float32), requires_grad=True)

    def loss(weight):
        return (x.mm(weight) * c).sum()

    loss(w).backward()
    assert taken == []  # the first gradient becomes .grad itself (handed over)
    (loss(w) + loss(w)).backward()  # two gradients for w: summed first, then added (PyTorch's order)
    handle = w.register_hook(lambda g: g * 1)  # a hook may change the gradient
    loss(w).backward()
    handle.remove()
    handle = w.register_post_accumulate_grad_hook(lambda p: None)
    loss(w).backward()
    handle.remove()
    ember.autograd.grad(loss(w), [w])  # a capture: .grad is not written
    loss(w).backward(inputs=[w])
    kept = w.grad
    w.grad = ember.tensor(np.zeros((100, 1000), np.float32)).t()  # a transposed .grad
    loss(w).backward()
    w.grad = kept
    (x.mm(w)).sum().backward()  # the sum's gradient is a broadcast view BLAS cannot read in place
    wide = ember.tensor(rng.standard_normal((1000, 200)).astype(np.float32))
    v = ember.tensor(rng.standard_normal((200, 100)).astype(np.float32), requires_grad=True)
    for _ in range(2):  # K = 1000 > MAX_K: BLAS would add .grad after its first K block
        (wide.mm(v) * ember.tensor(rng.standard_normal((1000, 100)).astype(np.float32))).sum().backward()
    assert taken == []
    loss(w).backward()  # none of the above: added
    assert taken == [(1000, 64, 100)]


def test_exact_checks_the_blas_in_use():
    assert grad_into.exact(np.dtype(np.float32)) and grad_into.exact(np.dtype(np.float64))
    assert grad_into.LOCAL.target is None and not grad_into.LOCAL.added
