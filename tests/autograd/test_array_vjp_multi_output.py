"""Array gradient rules of multi-output records (cross entropy: the loss and its non-differentiable
log-softmax): the rule takes the first output's gradient, gives the ember-op rule's bits, and is taken
only when no other output received a gradient."""
from __future__ import annotations

import numpy as np
import pytest

import ember
from ember.autograd import engine
from ember.autograd.node import OpNode

torch = pytest.importorskip("torch")


def _x_grad(logits: np.ndarray, target: list, reduction: str, ignore_index: int, array_rules: bool,
            taken: list) -> np.ndarray:
    original = OpNode.apply_arrays

    def spy(node, grads, batched=True):
        result = original(node, grads, batched)
        if result is not None:
            taken.append(node.op.name)
        return result

    x = ember.tensor(logits, requires_grad=True)
    loss = ember.nn.functional.cross_entropy(x, ember.tensor(target), reduction=reduction, ignore_index=ignore_index)
    engine.ARRAY_RULES = array_rules
    OpNode.apply_arrays = spy
    try:
        (loss.sum() * 1.5 if reduction == "none" else loss * 1.5).backward()
    finally:
        engine.ARRAY_RULES = True
        OpNode.apply_arrays = original
    return x.grad.numpy()


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("ignore_index, target", [(-100, [0, 1, 2, 3, 1]), (1, [0, 1, 2, 3, 1]), (2, [2, 2, 2, 2, 2])])
def test_cross_entropy_array_rule_gives_the_op_rules_bits_and_torchs_values(dtype, reduction, ignore_index, target):
    logits = np.random.default_rng(0).standard_normal((5, 4)).astype(dtype) * 3
    logits[1, 2] = np.nan if ignore_index == 1 else logits[1, 2]  # a NaN in an ignored row: 0 there, as torch
    taken: list = []
    fast = _x_grad(logits, target, reduction, ignore_index, True, taken)
    slow_taken: list = []
    slow = _x_grad(logits, target, reduction, ignore_index, False, slow_taken)
    assert "cross_entropy" in taken and "cross_entropy" not in slow_taken
    np.testing.assert_array_equal(fast, slow, strict=True)
    tx = torch.tensor(logits, requires_grad=True)
    tl = torch.nn.functional.cross_entropy(tx, torch.tensor(target), reduction=reduction, ignore_index=ignore_index)
    (tl.sum() * 1.5 if reduction == "none" else tl * 1.5).backward()
    tol = 1e-6 if dtype == "float32" else 1e-13
    finite = np.isfinite(logits).all(axis=1)  # (torch 2.13 gives NaN in an ignored row holding NaN, ember 0)
    np.testing.assert_allclose(fast[finite], tx.grad.numpy()[finite], rtol=tol, atol=tol)


def test_second_output_gradient_keeps_the_op_rule():
    """A multi-output node whose second output received a gradient runs its ember-op rule (max with indices has
    no array rule; lstm_layer's second and third outputs do take gradients): values as torch."""
    x = np.random.default_rng(1).standard_normal((3, 2, 8))
    ex, tx = ember.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    elstm, tlstm = ember.nn.LSTM(8, 4).double(), torch.nn.LSTM(8, 4).double()
    elstm.load_state_dict({k: ember.tensor(v.detach().numpy()) for k, v in tlstm.state_dict().items()})
    eo, (eh, ec) = elstm(ex)
    to, (th, tc) = tlstm(tx)
    (eo.sum() + ec.pow(2).sum()).backward()
    (to.sum() + tc.pow(2).sum()).backward()
    np.testing.assert_allclose(ex.grad.numpy(), tx.grad.numpy(), rtol=1e-10, atol=1e-12)


def test_create_graph_keeps_the_op_rules_for_cross_entropy():
    logits = np.random.default_rng(2).standard_normal((4, 3))
    x, tx = ember.tensor(logits, requires_grad=True), torch.tensor(logits, requires_grad=True)
    (g,) = ember.autograd.grad(ember.nn.functional.cross_entropy(x, ember.tensor([0, 2, 1, 2])), x, create_graph=True)
    (tg,) = torch.autograd.grad(torch.nn.functional.cross_entropy(tx, torch.tensor([0, 2, 1, 2])), tx,
                                create_graph=True)
    g.pow(2).sum().backward()
    tg.pow(2).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-10, atol=1e-13)
