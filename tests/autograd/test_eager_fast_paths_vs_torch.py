"""The eager fast paths of the fifteenth session (docs/cpu-performance.md, "overhead15") against torch and NumPy:
the backward engine's one-root walk and its leaf accumulation from arrays, the two-input record, the
0-stride views of the sum/mean gradient rules, clamp with number bounds, index_select/embedding's bounds read
from the array, cross entropy's target range test."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import ember
from ember.ops.array_views import broadcast_view

F, TF = ember.nn.functional, torch.nn.functional


@pytest.mark.parametrize("shapes", [((), (3,)), ((), ()), ((), (2, 0, 3)), ((1,), (4,)), ((3, 1), (2, 3, 5)),
                                    ((2, 3), (2, 3)), ((1, 1), (1, 1)), ((0,), (3, 0)), ((1, 3), (0, 3)),
                                    ((2, 1, 3), (4, 2, 7, 3))])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_broadcast_view_is_numpys_view(shapes, dtype):
    source, target = shapes
    g = np.asarray(np.random.default_rng(0).standard_normal(source)).astype(dtype)
    mine, numpys = broadcast_view(g, target), np.broadcast_to(g, target)
    assert (mine.shape, mine.strides, mine.dtype, mine.flags.writeable) == \
        (numpys.shape, numpys.strides, numpys.dtype, numpys.flags.writeable)
    assert np.shares_memory(mine, g) or mine.size == 0
    np.testing.assert_array_equal(mine, numpys)


@pytest.mark.parametrize("source,target", [((3,), (4,)), ((2,), (-1,)), ((2, 3), (3,))])
def test_broadcast_view_refuses_as_numpy(source, target):
    with pytest.raises(ValueError):
        np.broadcast_to(np.ones(source), target)
    with pytest.raises(ValueError):
        broadcast_view(np.ones(source), target)


def _pair(a, requires_grad=True):
    return ember.tensor(a, requires_grad=requires_grad), torch.tensor(a, requires_grad=requires_grad)


def test_w1_step_grads_accumulate_as_torch():
    """The lectures' step twice: the first backward fills .grad (copied, never the engine's buffer), the second
    adds into it; zero_() then keeps the buffer."""
    rng = np.random.default_rng(1)
    x, y = rng.standard_normal((4, 3)), rng.standard_normal((4, 2))
    w1, w2 = rng.standard_normal((3, 5)), rng.standard_normal((5, 2))
    got, want = [], []
    for lib, out in ((ember, got), (torch, want)):
        a, b = lib.tensor(w1, requires_grad=True), lib.tensor(w2, requires_grad=True)
        for step in range(3):
            loss = (lib.tensor(x).mm(a).clamp(min=0).mm(b) - lib.tensor(y)).pow(2).sum()
            loss.backward()
            out.append((a.grad.numpy().copy(), b.grad.numpy().copy()))
            if step == 1:
                with lib.no_grad():
                    a.grad.zero_()
                    b.grad.zero_()
    for (ga, gb), (ta, tb) in zip(got, want):
        np.testing.assert_allclose(ga, ta, rtol=1e-12)
        np.testing.assert_allclose(gb, tb, rtol=1e-12)


def test_leaf_gradient_never_aliases_the_seed_or_a_shared_term():
    x = ember.ones(3, requires_grad=True)
    seed = ember.tensor([1.0, 2.0, 3.0])
    (x * 1).backward(seed)
    assert not np.shares_memory(x.grad.numpy(), seed.numpy())
    x.grad = None
    y = ember.ones(3, requires_grad=True)
    (x + y).sum().backward()  # add's rule hands the same array to both leaves
    assert not np.shares_memory(x.grad.numpy(), y.grad.numpy())
    x.grad.add_(1.0)
    np.testing.assert_array_equal(y.grad.numpy(), np.ones(3, np.float32))


def test_leaf_hooks_see_tensors_and_replace_the_gradient():
    seen = []
    for lib in (ember, torch):
        x = lib.ones(3, requires_grad=True)
        x.register_hook(lambda g, lib=lib: seen.append(type(g) is lib.Tensor) or g * 2)
        x.register_post_accumulate_grad_hook(lambda p: seen.append(p.grad.sum().item()))
        (x * x).sum().backward()
        np.testing.assert_array_equal(x.grad.numpy(), np.full(3, 4.0, np.float32))
    assert seen == [True, 12.0, True, 12.0]


def test_two_roots_one_reached_from_the_other():
    for lib in (ember, torch):
        x = lib.tensor([1.0, 2.0], requires_grad=True)
        a = x * 3
        b = (a * a).sum()
        lib.autograd.backward([b, a], [lib.tensor(1.0), lib.ones(2)])
        np.testing.assert_array_equal(x.grad.numpy(), np.array([21.0, 39.0], np.float32))


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64", "int64"])
@pytest.mark.parametrize("bounds", [{"min": 0}, {"max": 1.5}, {"min": 0, "max": 1}, {"min": -1.5, "max": 2.0}])
def test_clamp_with_number_bounds_as_torch(dtype, bounds):
    values = np.array([-2.0, -1.5, 0.0, 0.5, 1.0, 2.0, 3.0, np.inf, -np.inf])
    e, t = getattr(ember, dtype), getattr(torch, dtype)
    got, want = ember.tensor(values).to(e).clamp(**bounds), torch.tensor(values).to(t).clamp(**bounds)
    assert str(got.dtype).split(".")[-1] == str(want.dtype).split(".")[-1]
    np.testing.assert_array_equal(got.float().numpy(), want.float().numpy())
    if dtype != "int64":  # the gradient at the bounds themselves goes to the input, as torch's
        x, tx = _pair(values[:7])
        x.clamp(**bounds).sum().backward()
        tx.clamp(**bounds).sum().backward()
        np.testing.assert_array_equal(x.grad.numpy(), tx.grad.numpy())


def test_index_select_and_embedding_as_torch():
    rng = np.random.default_rng(2)
    w = rng.standard_normal((5, 3))
    for index in ([0, 4, 4, 1], [[1, 2], [0, 4]], 3, []):
        x, tx = _pair(w)
        i, ti = ember.tensor(index, dtype=ember.long), torch.tensor(index, dtype=torch.long)
        emb, temb = F.embedding(i, x), TF.embedding(ti, tx)
        np.testing.assert_array_equal(emb.detach().numpy(), temb.detach().numpy())
        (emb * 2).sum().backward()
        (temb * 2).sum().backward()
        np.testing.assert_array_equal(x.grad.numpy(), tx.grad.numpy())
        assert type(emb.grad_fn).__name__ == type(temb.grad_fn).__name__
        if np.ndim(index) <= 1:  # index_select: a 0-d or 1-D index
            dim = 1 if np.ndim(index) == 0 else 0
            index = 2 if dim == 1 else index
            sel = x.index_select(dim, ember.tensor(index, dtype=ember.long))
            tsel = tx.index_select(dim, torch.tensor(index, dtype=torch.long))
            np.testing.assert_array_equal(sel.detach().numpy(), tsel.detach().numpy())
            assert type(sel.grad_fn).__name__ == type(tsel.grad_fn).__name__


@pytest.mark.parametrize("bad", [[0, 5], [-1, 0]])
def test_index_select_and_embedding_refuse_out_of_range(bad):
    w = ember.zeros(5, 3)
    with pytest.raises(IndexError, match="out of range"):
        F.embedding(ember.tensor(bad), w)
    with pytest.raises(IndexError, match="out of range"):
        w.index_select(0, ember.tensor(bad))
    with pytest.raises(IndexError):
        TF.embedding(torch.tensor(bad), torch.zeros(5, 3))


@pytest.mark.parametrize("ignore_index", [-100, 0, 2, 7])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_cross_entropy_targets_as_torch(ignore_index, reduction):
    rng = np.random.default_rng(3)
    logits = rng.standard_normal((6, 4))
    target = np.array([0, 1, 2, 3, 2, 0])
    x, tx = _pair(logits)
    loss = F.cross_entropy(x, ember.tensor(target), ignore_index=ignore_index, reduction=reduction)
    tloss = TF.cross_entropy(tx, torch.tensor(target), ignore_index=ignore_index, reduction=reduction)
    np.testing.assert_allclose(loss.detach().numpy(), tloss.detach().numpy(), rtol=1e-12)
    loss.sum().backward()
    tloss.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-12, atol=1e-15)


def test_cross_entropy_all_ignored_and_bad_targets_as_torch():
    x, tx = _pair(np.ones((3, 4)))
    loss, tloss = F.cross_entropy(x, ember.full((3,), -100)), TF.cross_entropy(tx, torch.full((3,), -100))
    assert np.isnan(loss.item()) and np.isnan(tloss.item())
    loss.backward()
    tloss.backward()
    np.testing.assert_array_equal(x.grad.numpy(), tx.grad.numpy())
    for bad in ([0, 4, 1], [0, -5, -100]):
        with pytest.raises(IndexError, match="out of bounds"):
            F.cross_entropy(x, ember.tensor(bad))
        with pytest.raises(IndexError):
            TF.cross_entropy(tx, torch.tensor(bad))
