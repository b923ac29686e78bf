"""``autograd.grad`` / ``backward`` options and the leaf gradient's layout, each case run on torch 2.13 and ember
alike (the same scenario written once against the module): values, dtypes, strides, or the same error class with
torch's message. Found by the eighteenth session's autograd audit (func24)."""
from __future__ import annotations

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")


def _x(lib, values=(1.0, 2.0, 3.0)):
    return lib.tensor(list(values), dtype=lib.float64, requires_grad=True)


def _run(case, lib):
    try:
        return "ok", case(lib)
    except Exception as e:  # noqa: BLE001 - the error itself is the result compared
        return "err", type(e), str(e)


def _same(a, b) -> None:
    if isinstance(a, (tuple, list)):
        assert isinstance(b, (tuple, list)) and len(a) == len(b)
        for x, y in zip(a, b):
            _same(x, y)
    elif isinstance(a, torch.Tensor):
        assert tuple(b.shape) == tuple(a.shape) and str(b.dtype).split(".")[-1] == str(a.dtype).split(".")[-1]
        np.testing.assert_allclose(np.asarray(b.detach().numpy()), a.detach().numpy(), rtol=1e-12, atol=1e-12)
    else:
        assert a == b


ERRORS = {
    "materialize_with_allow_unused_false": (
        lambda t: t.autograd.grad((_x(t) * 2).sum(), [_x(t)], allow_unused=False, materialize_grads=True),
        "Expected allow_unused to be True or not passed when materialize_grads=True"),
    "grad_outputs_count": (
        lambda t: (lambda x: t.autograd.grad([(x * 2).sum(), (x * x).sum()], [x], grad_outputs=[None]))(_x(t)),
        "got 2 tensors and 1 gradients"),
    "backward_grad_tensors_count": (
        lambda t: (lambda x: t.autograd.backward([(x * 2).sum(), x.sum()], [t.tensor(1.0, dtype=t.float64)]))(_x(t)),
        "got 2 tensors and 1 gradients"),
    "grad_empty_inputs": (lambda t: t.autograd.grad((_x(t) * 2).sum(), []), "`inputs` argument to `grad()` cannot be"),
    "backward_empty_inputs": (lambda t: (_x(t) * 2).sum().backward(inputs=[]),
                              "`inputs` argument to `backward()` cannot be empty"),
    "batched_sizes_differ": (
        lambda t: (lambda x: t.autograd.grad([x.sin(), (x * x).sum()], x, is_grads_batched=True, grad_outputs=[
            t.eye(3, dtype=t.float64), t.ones(2, dtype=t.float64)]))(_x(t)),
        "Expected all tensors to have the same size in the mapped dimension"),
}


@pytest.mark.parametrize("name", sorted(ERRORS))
def test_errors_as_torch(name: str) -> None:
    case, message = ERRORS[name]
    want, got = _run(case, torch), _run(case, ember)
    assert want[0] == "err" and message in want[2], want
    assert got[0] == "err" and got[1] is want[1] and message in got[2], got


VALUES = {
    # a grad_output of another dtype takes the output's dtype (torch's engine casts to the input's metadata)
    "float32_grad_output": lambda t: (lambda x: t.autograd.grad(x * 2, x, grad_outputs=t.ones(3, dtype=t.float32)))(
        _x(t)),
    "int_grad_output": lambda t: (lambda x: t.autograd.grad(x.sin(), x, grad_outputs=t.ones(3, dtype=t.int64)))(_x(t)),
    "materialize_unused": lambda t: (lambda x, y: t.autograd.grad((x * 2).sum(), [x, y], materialize_grads=True))(
        _x(t), _x(t)),
    # .grad of a leaf follows the leaf's strides when it is dense (torch's gradient layout contract)
    "transposed_leaf": lambda t: (lambda w: ((w * 2).sum().backward(), w.grad.stride(), w.grad)[1:])(
        t.arange(12.0, dtype=t.float64).reshape(3, 4).t().requires_grad_()),
    "transposed_leaf_mm": lambda t: (lambda w: (((t.ones(2, 4, dtype=t.float64) @ w).sum().backward()),
                                                w.grad.stride(), w.grad)[1:])(
        t.ones(3, 4, dtype=t.float64).t().requires_grad_()),
    "transposed_leaf_accumulated": lambda t: (lambda w: ((w * 2).sum().backward(), (w * w).sum().backward(),
                                                         w.grad.stride(), w.grad)[2:])(
        t.arange(12.0, dtype=t.float64).reshape(3, 4).t().requires_grad_()),
    "channels_last_leaf": lambda t: (lambda w: ((w.sin()).sum().backward(), w.grad.stride(), w.grad)[1:])(
        t.arange(120.0, dtype=t.float64).reshape(2, 3, 4, 5).to(memory_format=t.channels_last).requires_grad_()),
    "sliced_leaf_gets_contiguous": lambda t: (lambda w: ((w * 3).sum().backward(), w.grad.stride())[1:])(
        t.ones(4, 6, dtype=t.float64)[:, ::2].requires_grad_()),
    "expanded_leaf_gets_contiguous": lambda t: (lambda w: ((w * 3).sum().backward(), w.grad.stride())[1:])(
        t.ones(3, 1, dtype=t.float64).expand(3, 4).requires_grad_()),
    "backward_inputs_captured_transposed": lambda t: (lambda w: ((w * w).sum().backward(inputs=[w]),
                                                                 w.grad.stride(), w.grad)[1:])(
        t.arange(6.0, dtype=t.float64).reshape(2, 3).t().requires_grad_()),
}


@pytest.mark.parametrize("name", sorted(VALUES))
def test_values_and_layouts_as_torch(name: str) -> None:
    want, got = _run(VALUES[name], torch), _run(VALUES[name], ember)
    assert want[0] == "ok", want
    assert got[0] == "ok", got
    _same(want[1], got[1])


def test_retain_grad_after_inplace_is_the_new_value_gradient() -> None:
    """``.grad`` of a tensor that retains grad and is then changed in place is the gradient of the new value
    (torch moves the retains_grad hook to the new history); a plain hook keeps the old value's gradient."""
    def case(lib):
        x = _x(lib)
        a = x * 1
        a.retain_grad()
        seen = []
        a.register_hook(lambda g: seen.append(g.clone()))
        a.mul_(2)
        v = x * 1
        v.retain_grad()
        v[1:].mul_(x[:2])  # a view's in-place: v's history is CopySlices now
        (a * a).sum().backward()
        (v * v).sum().backward()
        return a.grad, seen[0], v.grad, x.grad
    _same(case(torch), case(ember))
    got = case(ember)
    xv = np.array([1.0, 2.0, 3.0])  # independent: d(sum (2x)^2)/d(2x) = 2*(2x); before mul_: times 2
    np.testing.assert_allclose(got[0].numpy(), 4 * xv)
    np.testing.assert_allclose(got[1].numpy(), 8 * xv)


MESSAGES = {  # torch's own text is the start of ember's message
    "input_not_requiring_grad": lambda t: t.autograd.grad((_x(t) * 2).sum(), [t.ones(3)]),
    "unused_input": lambda t: (lambda x, y: t.autograd.grad((x * 2).sum(), [x, y]))(_x(t), _x(t)),
    "shape_mismatch": lambda t: (lambda x: t.autograd.grad(x * 2, x, grad_outputs=t.ones(2, dtype=t.float64)))(_x(t)),
    "backward_twice": lambda t: (lambda y: (y.backward(), y.backward()))((_x(t).exp()).sum()),
}


@pytest.mark.parametrize("name", sorted(MESSAGES))
def test_messages_start_with_torchs(name: str) -> None:
    want, got = _run(MESSAGES[name], torch), _run(MESSAGES[name], ember)
    assert want[0] == got[0] == "err" and got[1] is want[1]
    assert got[2].startswith(want[2].replace("torch.Size", "ember.Size").rstrip(".")), (want[2], got[2])


def test_retains_grad_hook_runs_after_other_hooks_and_keeps_history_under_create_graph() -> None:
    """torch runs a tensor's retains-grad hook after its other hooks whatever the order they were registered in,
    and under ``create_graph`` the retained gradient requires grad (ember stored the pre-hook gradient, detached)."""
    def case(lib):
        x = _x(lib)
        y = x * 2
        y.retain_grad()
        y.register_hook(lambda g: g * 10)
        (y * y).sum().backward()
        z = x * x
        z.retain_grad()
        (z * z).sum().backward(create_graph=True)
        return y.grad, z.grad.requires_grad, z.grad
    want, got = case(torch), case(ember)
    _same(want, got)
    np.testing.assert_allclose(got[0].numpy(), 10 * 2 * 2 * np.array([1.0, 2.0, 3.0]))  # 10 * d(y^2)/dy, y = 2x
