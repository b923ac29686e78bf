"""The grad_fn Node API (name, next_functions, register_hook/register_prehook, metadata, _saved_*),
register_multi_grad_hook, post-accumulate hooks and tensor hooks under backward(inputs=...), against torch."""
from __future__ import annotations

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")

LIBS = {"ember": ember, "torch": torch}


@pytest.mark.parametrize("lib_name", ["ember", "torch"])
def test_grad_fn_is_a_node_with_names_and_next_functions(lib_name):
    lib = LIBS[lib_name]
    a = lib.tensor([1.0, 2.0], requires_grad=True)
    y = (a * 3).exp()
    assert isinstance(y.grad_fn, lib.autograd.graph.Node)
    assert y.grad_fn.name() == "ExpBackward0"
    (mul, index), = y.grad_fn.next_functions
    assert mul.name() == "MulBackward0" and index == 0
    assert isinstance(mul, lib.autograd.graph.Node)
    leaf, _ = mul.next_functions[0]
    assert leaf.name() == "torch::autograd::AccumulateGrad" and leaf.variable is a
    assert isinstance(leaf, lib.autograd.graph.Node)


def _node_hooks(lib):
    a = lib.tensor([1.0, -2.0, 3.0], requires_grad=True)
    b = a.clone()
    c = b * b
    seen = []
    handle = b.grad_fn.register_hook(lambda gI, gO: seen.append(("post", [g.tolist() for g in gI],
                                                                    [g.tolist() for g in gO])) or (gO[0] * 2,))
    c.grad_fn.register_prehook(lambda gO: seen.append(("pre", [g.tolist() for g in gO])) or (gO[0] + 1,))
    c.sum().backward(retain_graph=True)
    first = a.grad.tolist()
    handle.remove()
    a.grad = None
    c.sum().backward()
    return seen, first, a.grad.tolist()


def test_node_register_hook_and_prehook_as_torch():
    assert _node_hooks(ember) == _node_hooks(torch)


@pytest.mark.parametrize("lib_name", ["ember", "torch"])
def test_node_metadata_is_a_persistent_dict(lib_name):
    lib = LIBS[lib_name]
    y = lib.ones(2, requires_grad=True).sin()
    assert y.grad_fn.metadata == {}
    y.grad_fn.metadata["layer"] = "fc1"
    assert y.grad_fn.metadata == {"layer": "fc1"}


def _saved_values(lib):
    x = lib.tensor([[1.0, 2.0], [3.0, -4.0]], requires_grad=True)
    w = lib.tensor([[0.5, -1.0], [2.0, 1.5]], requires_grad=True)
    out = {}
    y = x * w
    out["mul"] = (y.grad_fn._saved_self.tolist(), y.grad_fn._saved_other.tolist())
    y = x ** 3
    out["pow"] = (y.grad_fn._saved_self.tolist(), y.grad_fn._saved_exponent)
    y = x.exp()
    out["exp"] = np.round(y.grad_fn._saved_result.detach().numpy(), 5).tolist()
    y = x.softmax(1)
    out["softmax"] = (np.round(y.grad_fn._saved_result.detach().numpy(), 6).tolist(), y.grad_fn._saved_dim)
    y = x.tanh()
    out["tanh"] = np.round(y.grad_fn._saved_result.detach().numpy(), 6).tolist()
    y = x * 2.0
    out["mul_scalar_self"] = y.grad_fn._saved_self  # not needed: None in both
    return out


def test_saved_attributes_read_for_teaching_match_torch():
    assert _saved_values(ember) == _saved_values(torch)


def test_saved_attributes_after_backward_raise_as_torch():
    for lib in (ember, torch):
        y = lib.ones(2, requires_grad=True).exp()
        y.sum().backward()
        with pytest.raises(RuntimeError, match="second time"):
            y.grad_fn._saved_result


def _multi_grad_all(lib):
    a = lib.tensor([1.0, 2.0, 3.0], requires_grad=True)
    b = lib.tensor([0.5, -1.0, 2.0], requires_grad=True)
    c = a * b
    d = a * b
    calls = []
    lib.autograd.graph.register_multi_grad_hook((a, b, c, d), lambda grads: calls.append(
        [None if g is None else g.tolist() for g in grads]))
    c.sum().backward(retain_graph=True)
    c.sum().backward(inputs=(a,), retain_graph=True)
    (c.sum() + d.sum()).backward()
    return calls


def test_register_multi_grad_hook_all_as_torch():
    assert _multi_grad_all(ember) == _multi_grad_all(torch)


def _multi_grad_any(lib):
    a = lib.tensor([1.0, 2.0], requires_grad=True)
    b = lib.tensor([3.0, 4.0], requires_grad=True)
    calls = []
    handle = lib.autograd.graph.register_multi_grad_hook((a, b), lambda g: calls.append(g.tolist()), mode="any")
    (a * b).sum().backward()
    (a * 2 + b * 5).sum().backward()
    handle.remove()
    (a * b).sum().backward()
    return calls


def test_register_multi_grad_hook_any_calls_once_per_backward():
    assert _multi_grad_any(ember) == _multi_grad_any(torch)
    assert len(_multi_grad_any(ember)) == 2


def test_register_multi_grad_hook_refuses_unknown_mode():
    a = ember.ones(2, requires_grad=True)
    with pytest.raises(ValueError, match="Expects mode to be one of"):
        ember.autograd.graph.register_multi_grad_hook((a,), print, mode="some")


def _tensor_hooks_with_inputs(lib):
    a = lib.ones(3, requires_grad=True)
    b = lib.ones(3, requires_grad=True)
    calls = []
    a.register_hook(lambda g: calls.append("a"))
    b.register_hook(lambda g: calls.append("b"))
    c = a * b
    c.register_hook(lambda g: calls.append("c"))
    d = c.exp()
    d.sum().backward(inputs=(a,), retain_graph=True)
    calls.append("|")
    lib.autograd.grad(d.sum(), (a,), retain_graph=True)
    calls.append("|")
    d.sum().backward()
    return calls, np.round(a.grad.numpy(), 5).tolist(), np.round(b.grad.numpy(), 5).tolist()


def test_tensor_hooks_run_once_and_only_for_what_backward_inputs_need():
    assert _tensor_hooks_with_inputs(ember) == _tensor_hooks_with_inputs(torch)


def _post_accumulate(lib):
    w = lib.tensor([1.0, 2.0], requires_grad=True)
    seen = []
    w.register_hook(lambda g: seen.append(("hook", g.tolist())))
    w.register_post_accumulate_grad_hook(lambda p: seen.append(("post", p.grad.tolist())))
    (w * w).sum().backward()
    (w * 3).sum().backward()
    return seen


def test_post_accumulate_grad_hook_as_torch():
    assert _post_accumulate(ember) == _post_accumulate(torch)


def test_gradient_edge_and_increment_version():
    for lib in (ember, torch):
        x = lib.ones(2, requires_grad=True)
        y = x * 2
        edge = lib.autograd.graph.get_gradient_edge(y)
        assert edge.node is y.grad_fn and edge.output_nr == 0
        assert lib.autograd.graph.get_gradient_edge(x).node.name() == "torch::autograd::AccumulateGrad"
        z = x.sin()
        lib.autograd.graph.increment_version(x)
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            z.sum().backward()
