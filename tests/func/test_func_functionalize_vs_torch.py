"""ember.func.functionalize and debug_unwrap against torch.func's."""
from __future__ import annotations

import numpy as np
import pytest

import ember
import ember.func as ef

torch = pytest.importorskip("torch")


def _mutating(lib):
    def f(x, w):
        y = x.view(-1)
        y.add_(1)
        x.mul_(w)
        return x.t(), y, (x * w).sum()
    return f


@pytest.mark.parametrize("remove", ["mutations", "mutations_and_views"])
def test_functionalize_applies_mutations_and_returns_fresh_outputs(remove):
    data, weight = np.arange(6.0).reshape(2, 3), np.linspace(0.5, 1.5, 3)
    ours_x, theirs_x = ember.tensor(data), torch.tensor(data)
    ours = ef.functionalize(_mutating(ember), remove=remove)(ours_x, ember.tensor(weight))
    theirs = torch.func.functionalize(_mutating(torch), remove=remove)(theirs_x, torch.tensor(weight))
    np.testing.assert_array_equal(ours_x.numpy(), theirs_x.numpy())  # the input mutations were applied
    for a, b in zip(ours, theirs):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
        assert a.data_ptr() != ours_x.data_ptr()  # no output aliases an input (torch: none does either)
    ours[1].fill_(-1)
    assert float(ours_x.min()) >= 0  # writing an output does not reach the input


def test_functionalize_keeps_gradients_and_composes_with_grad_and_vmap():
    w = np.array([0.3, -1.2, 2.0])
    x = np.random.default_rng(0).standard_normal((4, 3))

    def body(lib):
        def f(w_, x_):
            y = x_.clone()
            y.mul_(w_)
            return y.tanh().sum()
        return f

    ours = ef.vmap(ef.grad(ef.functionalize(body(ember))), in_dims=(None, 0))(ember.tensor(w), ember.tensor(x))
    theirs = torch.func.vmap(torch.func.grad(torch.func.functionalize(body(torch))), in_dims=(None, 0))(
        torch.tensor(w), torch.tensor(x))
    np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=1e-12)


def test_functionalize_refuses_an_unknown_mode_with_torchs_message():
    with pytest.raises(RuntimeError) as ours:
        ef.functionalize(lambda t: t, remove="views")
    with pytest.raises(RuntimeError) as theirs:
        torch.func.functionalize(lambda t: t, remove="views")
    assert str(ours.value) == str(theirs.value)


def test_debug_unwrap_gives_the_batch_one_level_down_or_all_levels():
    seen = {}

    def record(lib, unwrap, key):
        def f(t):
            seen[key] = (tuple(unwrap(t).shape), tuple(unwrap(t, recurse=False).shape))
            return t
        return f

    ef.vmap(ef.vmap(record(ember, ef.debug_unwrap, "ember")))(ember.ones(4, 3, 2))
    torch.func.vmap(torch.func.vmap(record(torch, torch.func.debug_unwrap, "torch")))(torch.ones(4, 3, 2))
    assert seen["ember"] == seen["torch"] == ((4, 3, 2), (3, 2))
    plain = ember.ones(2)
    assert ef.debug_unwrap(plain) is plain
