"""The engine's gradient sums and unused outputs (gpt20): a gradient slot's buffer is summed into in place only
when nothing else holds it, with the bits of ``current + g``; non-differentiable outputs get no zeros.

Compared with PyTorch (values) and with the engine's out-of-place sum (bits).
"""
from __future__ import annotations

import numpy as np
import pytest
import torch

import ember
from ember.autograd import engine


def _residual_block(lib, x, w, ln_w):
    """A pre-LN residual block: x's gradient is the residual's passthrough plus layer norm's (a summed slot)."""
    h = lib.nn.functional.layer_norm(x, (x.shape[-1],), ln_w, None)
    y = x + h.matmul(w)
    return (y * y).sum()


def _grads(lib, arrays):
    tensors = [lib.tensor(a, requires_grad=True) for a in arrays]
    _residual_block(lib, *tensors).backward()
    return [t.grad.numpy() if lib is ember else t.grad.detach().numpy() for t in tensors]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_summed_in_place_matches_out_of_place_bits_and_torch(dtype, monkeypatch) -> None:
    rng = np.random.default_rng(0)
    # 4 x 64 x 96 = 24576 elements: above SUM_IN_PLACE_MIN, so x's slot is summed in place
    arrays = [rng.standard_normal((4, 64, 96)).astype(dtype), (rng.standard_normal((96, 96)) / 10).astype(dtype),
              rng.standard_normal(96).astype(dtype)]
    calls = []
    original = engine._sum_arrays

    def spy(current, g):
        calls.append(current.size)
        return original(current, g)

    monkeypatch.setattr(engine, "_sum_arrays", spy)
    fast = _grads(ember, arrays)
    assert calls and max(calls) >= engine.SUM_IN_PLACE_MIN  # the path under test ran
    tol = 1e-5 if dtype == np.float32 else 1e-12
    for a, b in zip(fast, _grads(torch, arrays)):
        np.testing.assert_allclose(a, b, rtol=tol, atol=tol * np.abs(b).max())
    # special points (a huge value, -0.0, a subnormal): the same bits as summing into a new array
    arrays[0][0, 0, :3] = [1e30, -0.0, 3e-39 if dtype == np.float32 else 1e-310]
    fast = _grads(ember, arrays)
    monkeypatch.setattr(engine, "_sum_arrays", lambda current, g: current + g)
    plain = _grads(ember, arrays)
    for a, b in zip(fast, plain):
        np.testing.assert_array_equal(a, b)


def test_a_buffer_held_elsewhere_is_not_summed_into() -> None:
    """``c = b + b`` hands one gradient array to both of b's slots, and a retained gradient is held by its tensor:
    neither may change when a later gradient is summed."""
    x = ember.tensor(np.ones((64, 300), np.float32), requires_grad=True)
    u = x * 3.0
    u.retain_grad()
    b = u + 0.0
    c = b + b + u  # u's slot: b's path plus the direct one
    c.backward(ember.ones_like(c))
    np.testing.assert_array_equal(u.grad.numpy(), np.full((64, 300), 3.0, np.float32))
    np.testing.assert_array_equal(x.grad.numpy(), np.full((64, 300), 9.0, np.float32))

    seen = []
    y = ember.tensor(np.ones((200, 200)), requires_grad=True)
    v = y * 2.0
    v.register_hook(lambda g: seen.append(g.numpy().copy()) or None)
    w = v.exp()
    (v * v + w).sum().backward()
    expected = 2 * 2.0 + np.exp(2.0)
    np.testing.assert_allclose(seen[0], np.full((200, 200), expected))
    np.testing.assert_allclose(y.grad.numpy(), np.full((200, 200), 2 * expected))


def test_sum_arrays_in_place_only_for_a_lone_buffer() -> None:
    """Called as the engine calls it (the slot and one local name hold the buffer): in place; one more holder
    (here ``held``): a new array, the held one unchanged."""
    g = np.full(1 << 15, 0.5, np.float32)
    slot = [np.arange(1 << 15, dtype=np.float32)]
    current = slot[0]
    total = engine._sum_arrays(current, g)
    assert total is current and total[3] == 3.5
    slot = [np.arange(1 << 15, dtype=np.float32)]
    current = slot[0]
    held = current
    total = engine._sum_arrays(current, g)
    assert total is not current and total[3] == 3.5 and held[3] == 3.0
    view = np.arange(1 << 16, dtype=np.float32)[::2]  # a view: never summed into
    assert engine._sum_arrays(view, g) is not view
    small = np.ones(4, np.float32)
    assert engine._sum_arrays(small, small) is not small
    promoted = engine._sum_arrays(np.ones(1 << 15, np.float32), np.ones(1 << 15))
    assert promoted.dtype == np.float64


def test_non_differentiable_outputs_get_no_zeros() -> None:
    """Attention's probabilities (a non-differentiable second output) and layer norm's statistics: the rule
    never reads them, so _materialize leaves them None; a differentiable output with no gradient gets zeros."""

    class Op:
        nondiff_outputs = (1,)
        materialize_grads = True

    class Node:
        op = Op()
        output_meta = [((2, 3), ember.float32, ember.device("cpu"))] * 3

    g = ember.ones(2, 3)
    out = engine._materialize(Node(), [g, None, None])
    assert out[0] is g and out[1] is None
    assert out[2] is not None and out[2].numpy().tolist() == [[0.0] * 3] * 2
    assert engine._materialize(Node(), [g, None, g])[1] is None

    q = ember.tensor(np.random.default_rng(1).standard_normal((2, 2, 8, 4)).astype(np.float32), requires_grad=True)
    tq = torch.tensor(q.detach().numpy(), requires_grad=True)
    ember.nn.functional.scaled_dot_product_attention(q, q, q, is_causal=True).sum().backward()
    torch.nn.functional.scaled_dot_product_attention(tq, tq, tq, is_causal=True).sum().backward()
    np.testing.assert_allclose(q.grad.numpy(), tq.grad.numpy(), rtol=1e-5, atol=1e-6)
