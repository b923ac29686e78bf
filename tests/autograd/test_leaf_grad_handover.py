"""A leaf's first gradient becomes ``.grad`` without a copy when nothing but the engine holds it
(ember/autograd/engine.py, ``_LOCAL_REFS``), and is copied whenever anything else may still see it: two leaves
given one array, a node hook that kept the gradient, a user-given seed, ``retain_graph`` runs. Values against
torch."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import ember
from ember.backends import cpu_parallel_ufunc


@pytest.fixture
def copies(monkeypatch):
    """The shapes of the leaf gradients the engine copied."""
    made: list = []
    original = cpu_parallel_ufunc.copy

    def counting(x):
        made.append(tuple(x.shape))
        return original(x)

    monkeypatch.setattr(cpu_parallel_ufunc, "copy", counting)
    return made


def _pair(shape, seed=0):
    a = np.random.default_rng(seed).standard_normal(shape).astype(np.float32)
    return ember.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)


def test_linear_gradients_are_handed_over_and_match_torch(copies):
    rng = np.random.default_rng(1)
    x = rng.standard_normal((5, 7)).astype(np.float32)
    lin = ember.nn.Linear(7, 3)
    ref = torch.nn.Linear(7, 3)
    ref.load_state_dict({k: torch.tensor(v.numpy()) for k, v in lin.state_dict().items()})
    for _ in range(2):  # zero_grad() sets .grad to None: each backward gives first gradients
        lin.zero_grad()
        ref.zero_grad()
        lin(ember.tensor(x)).relu().sum().backward()
        ref(torch.tensor(x)).relu().sum().backward()
    assert copies == []  # the weight's and the bias's gradients were taken over
    np.testing.assert_allclose(lin.weight.grad.numpy(), ref.weight.grad.numpy(), rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(lin.bias.grad.numpy(), ref.bias.grad.numpy(), rtol=1e-6, atol=1e-6)
    assert lin.weight.grad.numpy().flags.writeable and lin.weight.grad.is_contiguous()
    lin.weight.grad.add_(1.0)  # the taken-over buffer is .grad's own: writing it is fine
    np.testing.assert_allclose(lin.weight.grad.numpy(), ref.weight.grad.numpy() + 1, rtol=1e-6, atol=1e-6)


def test_one_array_for_two_leaves_is_copied(copies):
    (a, ta), (b, tb) = _pair((4, 3), 2), _pair((4, 3), 3)
    w = ember.tensor(np.arange(12, dtype=np.float32).reshape(4, 3))
    ((a + b) * w).sum().backward()  # add gives both inputs the same gradient array
    ((ta + tb) * torch.tensor(w.numpy())).sum().backward()
    assert not np.shares_memory(a.grad.numpy(), b.grad.numpy())
    a.grad.mul_(0)
    np.testing.assert_array_equal(b.grad.numpy(), tb.grad.numpy())
    np.testing.assert_array_equal(ta.grad.numpy() * 0, a.grad.numpy())


def test_a_gradient_a_node_hook_kept_is_copied():
    a, ta = _pair((3, 3), 4)
    kept: list = []
    y = a * 2.0
    y.grad_fn.register_hook(lambda grad_inputs, grad_outputs: kept.append(grad_inputs[0]))
    (y * y).sum().backward()
    ty = ta * 2.0
    (ty * ty).sum().backward()
    assert len(kept) == 1 and not np.shares_memory(kept[0].numpy(), a.grad.numpy())
    kept[0].mul_(0)  # the hook's tensor is the hook's: .grad stays
    np.testing.assert_allclose(a.grad.numpy(), ta.grad.numpy(), rtol=1e-6)


def test_a_given_seed_reaching_a_leaf_unchanged_is_not_aliased():
    a, ta = _pair((2, 3), 5)
    seed = ember.ones(2, 3) * 3.0
    (a + 0.0).backward(seed)
    (ta + 0.0).backward(torch.ones(2, 3) * 3.0)
    assert not np.shares_memory(seed.numpy(), a.grad.numpy())
    seed.mul_(0)
    np.testing.assert_array_equal(a.grad.numpy(), ta.grad.numpy())


def test_retain_graph_runs_accumulate_into_the_taken_buffer():
    a, ta = _pair((3, 4), 6)
    loss = (a * a).sum()
    loss.backward(retain_graph=True)
    first = a.grad.numpy().copy()
    loss.backward()
    tloss = (ta * ta).sum()
    tloss.backward(retain_graph=True)
    tloss.backward()
    np.testing.assert_allclose(a.grad.numpy(), 2 * first, rtol=1e-6)
    np.testing.assert_allclose(a.grad.numpy(), ta.grad.numpy(), rtol=1e-6)


def test_a_leaf_used_twice_and_a_captured_gradient():
    a, ta = _pair((3,), 7)
    b, tb = _pair((3,), 8)
    (ga,) = ember.autograd.grad((a * b + a).sum(), [a], retain_graph=True)
    (tga,) = torch.autograd.grad((ta * tb + ta).sum(), [ta], retain_graph=True)
    np.testing.assert_allclose(ga.numpy(), tga.numpy(), rtol=1e-6)
    assert a.grad is None  # grad() leaves .grad alone
    (a * b + a * a).sum().backward()
    (ta * tb + ta * ta).sum().backward()
    np.testing.assert_allclose(a.grad.numpy(), ta.grad.numpy(), rtol=1e-6)
    np.testing.assert_allclose(b.grad.numpy(), tb.grad.numpy(), rtol=1e-6)


def test_leaf_hooks_and_post_accumulate_hooks_still_run():
    a, ta = _pair((2, 2), 9)
    seen: list = []
    a.register_hook(lambda g: g * 2)
    a.register_post_accumulate_grad_hook(lambda p: seen.append(p.grad.numpy().copy()))
    ta.register_hook(lambda g: g * 2)
    (a * 3.0).sum().backward()
    (ta * 3.0).sum().backward()
    np.testing.assert_array_equal(a.grad.numpy(), ta.grad.numpy())
    np.testing.assert_array_equal(seen[0], ta.grad.numpy())


def test_tensor_gradients_of_op_rules_are_handed_over_and_match_torch(copies):
    rng = np.random.default_rng(10)
    x = rng.standard_normal((2, 3, 6, 6)).astype(np.float32)
    conv, tconv = ember.nn.Conv2d(3, 4, 3, bias=False), torch.nn.Conv2d(3, 4, 3, bias=False)
    tconv.weight.data = torch.tensor(conv.weight.detach().numpy())
    emb, temb = ember.nn.Embedding(7, 5), torch.nn.Embedding(7, 5)
    temb.weight.data = torch.tensor(emb.weight.detach().numpy())
    idx = [1, 3, 3, 6]
    conv(ember.tensor(x)).pow(2).sum().backward()
    tconv(torch.tensor(x)).pow(2).sum().backward()
    emb(ember.tensor(idx)).pow(2).sum().backward()
    temb(torch.tensor(idx)).pow(2).sum().backward()
    assert (4, 3, 3, 3) not in copies and (7, 5) not in copies  # taken over
    np.testing.assert_allclose(conv.weight.grad.numpy(), tconv.weight.grad.numpy(), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(emb.weight.grad.numpy(), temb.weight.grad.numpy(), rtol=1e-6)


class _ReturnsKept(ember.autograd.Function):
    """A backward that returns a tensor it also keeps: .grad must not alias it."""

    kept: list = []

    @staticmethod
    def forward(ctx, x):
        return x * 1.0

    @staticmethod
    def backward(ctx, g):
        out = g * 3.0
        _ReturnsKept.kept.append(out)
        return out


def test_a_gradient_tensor_kept_elsewhere_is_copied():
    a = ember.tensor([1.0, 2.0, 3.0], requires_grad=True)
    _ReturnsKept.apply(a).sum().backward()
    kept = _ReturnsKept.kept.pop()
    assert not np.shares_memory(kept.numpy(), a.grad.numpy())
    kept.mul_(0)
    assert a.grad.tolist() == [3.0, 3.0, 3.0]
    stored: list = []
    b = ember.nn.Embedding(4, 2)
    b.weight.register_hook(lambda g: stored.append(g))  # a leaf hook sees (and keeps) the gradient tensor
    b(ember.tensor([0, 1])).sum().backward()
    assert not np.shares_memory(stored[0].numpy(), b.weight.grad.numpy())
