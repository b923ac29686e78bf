"""Array gradient rules (``OpDef.array_vjp``) against the ember-op rules (``OpDef.vjp``).

A plain backward pass runs a record's array rule on NumPy arrays where it has one; it must give the
same bits as the ember-op rule (same NumPy calls, same order). Every op spec that exercises such a
record runs both ways (``engine.ARRAY_RULES`` on and off) in float32 and float64, contiguous and
transposed; the array path must actually have been taken. The rest checks what the array path must
keep: saved-tensor version checks, freed graphs, hooks, create_graph, the profiler's view.
"""
from __future__ import annotations

import numpy as np
import pytest

import ember
from ember.autograd import engine
from ember.autograd.node import OpNode
from ember.ops.registry import OPS

from op_harness import as_tuple, cotangents, diff_positions, layout_tensor, layout_values, make_inputs, weighted_loss
from op_specs import SPECS

ARRAY_OPS = sorted(name for name, op in OPS.items() if op.array_vjp is not None)
CASES = [spec for spec in SPECS if spec.grad and set(spec.ops) & set(ARRAY_OPS)]
# Specs whose every case the array rules hand back to the ember-op rules: tensor exponents (pow's rule
# takes where()), index tensors (getitem's rule checks their versions), complex values.
ALWAYS_FALLBACK = {"pow", "rpow_scalar", "pow_complex", "pow_complex_exponent", "getitem_advanced",
                   "getitem_advanced_list", "getitem_bool", "getitem_bool_cmp", "index_select", "masked_select",
                   "zeta", "mul_by_complex_scalar", "sgn_complex"}


def _grads(spec, arrays, layout: str, array_rules: bool, taken: list) -> list:
    tensors = []
    positions = diff_positions(spec, arrays)
    for i, a in enumerate(arrays):
        values = layout_values(a, layout) if i in positions and layout != "contiguous" else None
        if values is not None:
            tensors.append(layout_tensor(values, layout, "cpu", requires_grad=True))
        else:
            tensors.append(ember.tensor(a, requires_grad=i in positions))
    outs = as_tuple(spec.fn(*tensors))
    loss = weighted_loss(spec, outs, cotangents(outs))
    original = OpNode.apply_arrays

    def spy(node, grads):
        result = original(node, grads)
        if result is not None:
            taken.append(node.op.name)
        return result

    engine.ARRAY_RULES = array_rules
    OpNode.apply_arrays = spy
    try:
        grads = ember.autograd.grad(loss, [tensors[i] for i in positions], allow_unused=True)
    finally:
        engine.ARRAY_RULES = True
        OpNode.apply_arrays = original
    return [None if g is None else np.asarray(g.detach().__array__()) for g in grads]


@pytest.mark.parametrize("spec", CASES, ids=lambda s: s.name)
def test_array_rules_give_the_ember_rules_bits(spec):
    taken: list = []
    for dtype in ("float32", "float64"):
        for case in spec.shapes:
            arrays = make_inputs(spec, case, dtype)
            if not diff_positions(spec, arrays):
                continue
            for layout in ("contiguous", "transposed"):
                fast = _grads(spec, arrays, layout, True, taken)
                slow_taken: list = []
                slow = _grads(spec, arrays, layout, False, slow_taken)
                assert not slow_taken, "ARRAY_RULES=False still ran array rules"
                for i, (f, s) in enumerate(zip(fast, slow)):
                    where = f"{spec.name} {dtype} {case} {layout}, gradient {i}"
                    assert (f is None) == (s is None), where
                    if f is not None:
                        assert f.dtype == s.dtype and f.shape == s.shape, where
                        np.testing.assert_array_equal(f, s, err_msg=where, strict=True)
    if spec.name not in ALWAYS_FALLBACK:
        assert set(taken) & set(spec.ops), f"{spec.name}: the array rules of {spec.ops} never ran"


def test_array_rules_cover_the_hot_records():
    assert {"add", "sub", "mul", "div", "matmul", "linear", "sum", "mean", "tanh", "sigmoid", "relu", "exp",
            "getitem", "reshape", "permute", "expand"} <= set(ARRAY_OPS)


def test_saved_tensor_modified_in_place_raises_the_same_error():
    messages = []
    for array_rules in (True, False):
        x = ember.ones(3, requires_grad=True)
        y = x.exp()
        y.add_(1)  # exp saved its output
        engine.ARRAY_RULES = array_rules
        try:
            with pytest.raises(RuntimeError, match="modified by an inplace operation") as info:
                y.sum().backward()
        finally:
            engine.ARRAY_RULES = True
        messages.append(str(info.value))
    assert messages[0] == messages[1]


def test_slice_of_a_base_changed_in_place_needs_no_version_check():
    # getitem's backward reads no values: changing the base afterwards is fine (PyTorch too)
    w = ember.ones(4, requires_grad=True)
    h = w * 2
    part = h[1:3]
    with ember.no_grad():
        h.mul_(3)
    part.sum().backward()
    np.testing.assert_array_equal(w.grad.numpy(), [0.0, 2.0, 2.0, 0.0])


def test_second_backward_without_retain_graph_raises():
    x = ember.ones(3, requires_grad=True)
    y = (x * x).sum()
    y.backward()
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        y.backward()


def test_retain_graph_twice_accumulates():
    x = ember.tensor([1.0, 2.0], requires_grad=True)
    y = (x.tanh() * x).sum()
    y.backward(retain_graph=True)
    y.backward()
    t = np.tanh([1.0, 2.0])
    np.testing.assert_allclose(x.grad.numpy(), 2 * (t + np.array([1.0, 2.0]) * (1 - t * t)), rtol=1e-6)


def test_tensor_hooks_see_and_replace_gradients():
    x = ember.ones(3, requires_grad=True)
    h = x * 2
    seen = []
    h.register_hook(lambda g: seen.append(g.numpy().copy()) or g * 10)
    (h * 3).sum().backward()
    np.testing.assert_array_equal(seen[0], [3.0, 3.0, 3.0])
    np.testing.assert_array_equal(x.grad.numpy(), [60.0, 60.0, 60.0])


def test_create_graph_keeps_the_ember_rules():
    taken: list = []
    original = OpNode.apply_arrays
    OpNode.apply_arrays = lambda node, grads: taken.append(node) or original(node, grads)
    try:
        x = ember.tensor(2.0, requires_grad=True)
        (dy,) = ember.autograd.grad(x ** 3, x, create_graph=True)
        first = len(taken)
        (d2,) = ember.autograd.grad(dy, x)
    finally:
        OpNode.apply_arrays = original
    assert float(dy) == 12.0 and float(d2) == 12.0
    assert first == 0 and len(taken) > 0  # only the second, plain pass may use array rules


def test_profiler_sees_the_backward_ops_when_asked():
    from ember.profiler import profile

    x = ember.ones(4, 4, requires_grad=True)
    with profile(backward_ops=True) as prof:
        (x @ x).sum().backward()
    names = [e.key for e in prof.key_averages()]
    assert names.count("matmul") >= 1
    assert sum(e.count for e in prof.key_averages() if e.key == "matmul") == 3  # forward + two gradients


def test_a_profile_keeps_the_array_rules():
    # a profile shows the backward as it runs unprofiled: the node is one event, costed as its rule's ops
    from ember.profiler import profile

    x = ember.ones(4, 4, requires_grad=True)
    with profile(with_flops=True) as prof:
        (x @ x).sum().backward()
    assert sum(e.count for e in prof.key_averages() if e.key == "matmul") == 1  # the forward only
    (node,) = [e for e in prof.events() if e.name.endswith("MatmulBackward0")]
    assert node.cpu_children == [] and node.flops == 2 * (2 * 4 * 4 * 4)  # both gradients, 2*M*N*K each


def test_float16_takes_the_ember_rules():
    taken: list = []
    original = OpNode.apply_arrays

    def spy(node, grads):
        result = original(node, grads)
        taken.append(result is not None)
        return result

    OpNode.apply_arrays = spy
    try:
        x = ember.ones(3, dtype=ember.float16, requires_grad=True)
        (x * x).sum().backward()
    finally:
        OpNode.apply_arrays = original
    assert taken and not any(taken)
    assert x.grad.dtype is ember.float16
    np.testing.assert_array_equal(x.grad.numpy(), [2.0, 2.0, 2.0])
