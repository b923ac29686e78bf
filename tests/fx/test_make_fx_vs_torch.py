"""``make_fx``: graphs of ATen calls, compared with torch 2.13's make_fx on the same functions (CPU).

The graphs are compared by their ``call_function`` targets' names (ember's known decomposition differences, listed
in docs/pytorch-compat.md, filtered), and each GraphModule is run against the function it traced.
"""
from __future__ import annotations

import numpy as np
import pytest
import torch
from torch.fx.experimental.proxy_tensor import make_fx as torch_make_fx

import ember
from ember.fx.experimental.proxy_tensor import make_fx


def _targets(gm: object) -> list:
    return [str(n.target).replace("torch.ops.", "").replace("ember.ops.", "")
            for n in gm.graph.nodes if n.op == "call_function"]


def _step(lib: object, w: object) -> object:
    def step(x, y):
        loss = ((x @ w.t() - y) ** 2).mean()
        (g,) = lib.autograd.grad(loss, [w])
        return loss, g
    return step


def _data() -> tuple:
    rng = np.random.default_rng(0)
    return (rng.standard_normal((3, 4)).astype(np.float32), rng.standard_normal((5, 4)).astype(np.float32),
            rng.standard_normal((5, 3)).astype(np.float32))


@pytest.mark.parametrize("mode", ["real", "fake", "symbolic"])
def test_training_step_with_autograd_grad(mode: str) -> None:
    w, x, y = _data()
    graphs, outs = {}, {}
    for lib, trace in ((torch, torch_make_fx), (ember, make_fx)):
        wt = lib.tensor(w, requires_grad=True)
        step = _step(lib, wt)
        extra = {"_allow_non_fake_inputs": True} if lib is torch and mode != "real" else {}  # (w is a closure)
        gm = trace(step, tracing_mode=mode, **extra)(lib.tensor(x), lib.tensor(y))
        graphs[lib.__name__] = _targets(gm)
        direct = step(lib.tensor(x), lib.tensor(y))
        traced = gm(lib.tensor(x), lib.tensor(y))
        for a, b in zip(traced, direct):
            np.testing.assert_array_equal(a.detach().numpy(), b.detach().numpy())
        outs[lib.__name__] = [t.detach().numpy() for t in traced]
    for a, b in zip(outs["ember"], outs["torch"]):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    # the forward is torch's call for call; the backward's main products too
    forward = ["aten.t.default", "aten.mm.default", "aten.sub.Tensor", "aten.pow.Tensor_Scalar", "aten.mean.default",
               "aten.ones_like.default"]
    assert graphs["torch"][:6] == graphs["ember"][:6] == forward
    keep = {"aten.mm.default", "aten.sub.Tensor", "aten.mean.default"}  # (torch scales by mul.Scalar)
    assert [t for t in graphs["ember"] if t in keep] == [t for t in graphs["torch"] if t in keep]


def test_module_forward_backward_graph_runs_and_matches() -> None:
    ember.manual_seed(0)
    model = ember.nn.Sequential(ember.nn.Linear(4, 8), ember.nn.ReLU(), ember.nn.Linear(8, 3))
    params = list(model.parameters())

    def step(x, y):
        loss = ember.nn.functional.cross_entropy(model(x), y)
        return (loss,) + tuple(ember.autograd.grad(loss, params))

    x, y = ember.randn(6, 4), ember.tensor([0, 1, 2, 0, 1, 2])
    gm = make_fx(step)(x, y)
    names = _targets(gm)
    for op in ("aten.addmm.default", "aten.relu.default", "aten._log_softmax.default", "aten.nll_loss_forward.default",
               "aten.nll_loss_backward.default", "aten.threshold_backward.default", "aten.mm.default"):
        assert op in names
    assert sum(1 for n in gm.graph.nodes if n.op == "get_attr") == 4  # the parameters only, as constants
    x2, y2 = ember.randn(6, 4), ember.tensor([2, 2, 1, 0, 0, 1])
    for a, b in zip(gm(x2, y2), step(x2, y2)):  # new data through the same graph
        np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-6, atol=1e-7)
    assert "ember.ops.aten.addmm.default(" in gm.code


def test_multi_output_ops_and_python_code() -> None:
    def f(x):
        return x.max(dim=1).values.exp() + x.sum(1)

    x = ember.randn(3, 4)
    gm = make_fx(f)(x)
    np.testing.assert_allclose(gm(x).numpy(), f(x).numpy())
    assert any(n.target is __import__("operator").getitem for n in gm.graph.nodes)
    x3 = ember.randn(3, 4)
    np.testing.assert_allclose(gm(x3).numpy(), f(x3).numpy())


def test_placeholder_names_as_torch() -> None:
    def f(x, y):
        return x + y

    def g(*args):
        return args[0] * 2

    for fn, args in ((f, (1, 2)), (g, (1,))):
        e = [n.name for n in make_fx(fn)(*[ember.ones(2) for _ in args]).graph.nodes if n.op == "placeholder"]
        t = [n.name for n in torch_make_fx(fn)(*[torch.ones(2) for _ in args]).graph.nodes if n.op == "placeholder"]
        assert e == t


def test_bad_tracing_mode_is_refused() -> None:
    with pytest.raises(AssertionError, match="tracing_mode"):
        make_fx(lambda x: x, tracing_mode="meta")


def test_in_place_ops_and_a_parameter_update_replay() -> None:
    """In-place ops are dispatched and written through ``aten.copy_`` (torch's functionalized form), so the graph
    replays them: values after the write, and an SGD-style update of an input tensor."""
    def f(x, g):
        y = x.clone()
        y.sub_(0.1 * g)
        y.mul_(2)
        return y * 3

    x, g = ember.randn(3), ember.randn(3)
    gm = make_fx(f)(x, g)
    names = _targets(gm)
    assert names.count("aten.copy_.default") == 2 and "aten.sub.Tensor" in names
    x2, g2 = ember.randn(3), ember.randn(3)
    np.testing.assert_allclose(gm(x2, g2).numpy(), f(x2, g2).numpy())

    def update(p, grad):
        p.sub_(grad * 0.5)

    gm = make_fx(update)(ember.ones(3), ember.ones(3))
    p = ember.tensor([1.0, 2.0, 3.0])
    gm(p, ember.tensor([2.0, 2.0, 4.0]))
    np.testing.assert_array_equal(p.numpy(), [0.0, 1.0, 1.0])
