"""Autograd semantics against PyTorch's: leaves, grad_fn names, backward options, autograd.grad,
grad modes, detach, hooks, retain_grad, accumulation, custom Functions, higher order, GradientTape
and gradcheck.
"""
from __future__ import annotations

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")


def _np(t: object) -> np.ndarray:
    return np.asarray(t.detach().__array__()) if hasattr(t, "__array__") else np.asarray(t)


# ---- leaves, grad_fn -------------------------------------------------------------------------------
def test_requires_grad_and_is_leaf() -> None:
    x = ember.ones(2)
    assert not x.requires_grad and x.is_leaf and x.grad_fn is None
    assert x.requires_grad_() is x and x.requires_grad
    y = x * 2
    assert y.requires_grad and not y.is_leaf and y.grad is None
    x.requires_grad = False
    assert not x.requires_grad
    with pytest.raises(RuntimeError, match="leaf"):
        y.requires_grad_(False)


@pytest.mark.parametrize("make,name", [
    (lambda x: x * 2, "MulBackward0"), (lambda x: x + 1, "AddBackward0"), (lambda x: x.exp(), "ExpBackward0"),
    (lambda x: x.sum(), "SumBackward0"), (lambda x: x.mean(), "MeanBackward0"), (lambda x: x.reshape(1, 2) @ x.reshape(2, 1), "MmBackward0"),
    (lambda x: x.reshape(2, 1), "ViewBackward0"), (lambda x: x[0], "SelectBackward0"),
])
def test_grad_fn_names(make, name: str) -> None:
    x = ember.ones(2, requires_grad=True)
    assert make(x).grad_fn.name() == name
    assert name in repr(make(x))


def test_next_functions_reach_the_leaf() -> None:
    x = ember.ones(2, requires_grad=True)
    y = (x * 2).sum()
    (mul_node, _), = y.grad_fn.next_functions
    assert mul_node.name() == "MulBackward0"
    leaf_view = mul_node.next_functions[0][0]
    assert leaf_view.name() == "torch::autograd::AccumulateGrad" and leaf_view.variable is x


# ---- backward options -------------------------------------------------------------------------------
def test_backward_with_gradient_argument() -> None:
    x = ember.tensor([1.0, 2.0, 3.0], requires_grad=True)
    (x * x).backward(ember.tensor([1.0, 0.5, 2.0]))
    np.testing.assert_allclose(_np(x.grad), [2.0, 2.0, 12.0])


def test_gradients_accumulate_across_backward_calls() -> None:
    x = ember.tensor([1.0, 2.0], requires_grad=True)
    (x * 3).sum().backward()
    (x * x).sum().backward()
    np.testing.assert_allclose(_np(x.grad), [5.0, 7.0])
    x.grad.zero_()
    (x * 3).sum().backward()
    np.testing.assert_allclose(_np(x.grad), [3.0, 3.0])


def test_retain_graph_allows_second_backward() -> None:
    x = ember.tensor([2.0], requires_grad=True)
    y = (x ** 3).sum()
    y.backward(retain_graph=True)
    y.backward()
    np.testing.assert_allclose(_np(x.grad), [24.0])


def test_backward_create_graph_gives_differentiable_grad() -> None:
    x = ember.tensor([1.0, 2.0], requires_grad=True)
    (x ** 3).sum().backward(create_graph=True)
    assert x.grad.requires_grad
    g = x.grad
    x.grad = None
    g.sum().backward()
    np.testing.assert_allclose(_np(x.grad), [6.0, 12.0])  # d/dx 3x^2


def test_backward_inputs_argument() -> None:
    a, b = ember.tensor([1.0], requires_grad=True), ember.tensor([2.0], requires_grad=True)
    (a * b).sum().backward(inputs=[a])
    np.testing.assert_allclose(_np(a.grad), [2.0])
    assert b.grad is None


def test_shared_subexpression_sums_gradients() -> None:
    x = ember.tensor([1.5], requires_grad=True)
    h = x * x
    (h + h * h).sum().backward()
    np.testing.assert_allclose(_np(x.grad), [2 * 1.5 + 4 * 1.5 ** 3])


# ---- autograd.grad -----------------------------------------------------------------------------------
def test_autograd_grad_returns_and_leaves_grad_alone() -> None:
    x = ember.tensor([1.0, 2.0], requires_grad=True)
    (g,) = ember.autograd.grad((x * x).sum(), x)
    np.testing.assert_allclose(_np(g), [2.0, 4.0])
    assert x.grad is None


def test_autograd_grad_allow_unused_and_materialize() -> None:
    x, y = ember.ones(2, requires_grad=True), ember.ones(2, requires_grad=True)
    gx, gy = ember.autograd.grad((x * 2).sum(), [x, y], allow_unused=True)
    np.testing.assert_allclose(_np(gx), [2.0, 2.0])
    assert gy is None
    _, gy = ember.autograd.grad((x * 2).sum(), [x, y], materialize_grads=True)
    np.testing.assert_allclose(_np(gy), [0.0, 0.0])


def test_autograd_grad_with_grad_outputs_and_non_leaf_input() -> None:
    x = ember.tensor([1.0, 2.0], requires_grad=True)
    h = x * 3
    y = h * h
    (gh,) = ember.autograd.grad(y, h, grad_outputs=ember.tensor([1.0, 10.0]))
    np.testing.assert_allclose(_np(gh), [6.0, 120.0])


# ---- grad modes --------------------------------------------------------------------------------------
def test_no_grad_context_and_decorator() -> None:
    x = ember.ones(2, requires_grad=True)
    with ember.no_grad():
        assert not ember.is_grad_enabled()
        assert not (x * 2).requires_grad
        with ember.enable_grad():
            assert (x * 2).requires_grad
        assert not (x * 2).requires_grad
    assert ember.is_grad_enabled()

    @ember.no_grad()
    def double(t):
        return t * 2

    @ember.enable_grad()
    def triple(t):
        return t * 3

    assert not double(x).requires_grad
    with ember.no_grad():
        assert triple(x).requires_grad
    assert ember.is_grad_enabled()


def test_set_grad_enabled_forms() -> None:
    x = ember.ones(2, requires_grad=True)
    with ember.set_grad_enabled(False):
        assert not (x * 2).requires_grad
    assert ember.is_grad_enabled()
    ember.set_grad_enabled(False)
    assert not ember.is_grad_enabled()
    ember.set_grad_enabled(True)
    assert (x * 2).requires_grad

    @ember.set_grad_enabled(False)
    def f(t):
        return t * 2

    assert not f(x).requires_grad and ember.is_grad_enabled()


def test_inference_mode() -> None:
    with ember.inference_mode():
        assert not (ember.ones(1, requires_grad=True) * 2).requires_grad


# ---- detach, hooks, retain_grad ------------------------------------------------------------------------
def test_detach_shares_data_and_cuts_graph() -> None:
    x = ember.tensor([1.0, 2.0], requires_grad=True)
    y = x * 2
    d = y.detach()
    assert not d.requires_grad and d.grad_fn is None
    with ember.no_grad():
        d[0] = 10.0
    np.testing.assert_allclose(_np(y), [10.0, 4.0])  # same memory
    z = x * 3
    z.detach_()
    assert not z.requires_grad and z.is_leaf
    (x * ember.tensor([1.0, 1.0])).sum().backward()


def test_detach_blocks_gradient() -> None:
    x = ember.tensor([3.0], requires_grad=True)
    (x * x.detach()).sum().backward()
    np.testing.assert_allclose(_np(x.grad), [3.0])


def test_hooks_on_leaf_and_non_leaf_replace_grads() -> None:
    x = ember.tensor([1.0, 2.0], requires_grad=True)
    seen = []
    x.register_hook(lambda g: seen.append(_np(g).copy()))
    h = x * 2
    handle = h.register_hook(lambda g: g * 10)
    (h * h).sum().backward()
    # dL/dh = 2h = [4, 8], times 10 by the hook, times dh/dx = 2
    np.testing.assert_allclose(seen[0], [80.0, 160.0])
    np.testing.assert_allclose(_np(x.grad), [80.0, 160.0])
    handle.remove()
    x.grad = None
    h2 = x * 2
    h2.register_hook(lambda g: None)  # returning None keeps the gradient
    (h2 * h2).sum().backward()
    np.testing.assert_allclose(_np(x.grad), [8.0, 16.0])


def test_hook_replacing_leaf_grad() -> None:
    x = ember.tensor([1.0, 2.0], requires_grad=True)
    x.register_hook(lambda g: g * 0 + 7)
    (x * 5).sum().backward()
    np.testing.assert_allclose(_np(x.grad), [7.0, 7.0])


def test_retain_grad() -> None:
    x = ember.tensor([1.0, 2.0], requires_grad=True)
    h = x * 3
    h.retain_grad()
    assert h.retains_grad
    y = x * 4
    (h * h + y).sum().backward()
    np.testing.assert_allclose(_np(h.grad), [6.0, 12.0])
    assert y.grad is None


# ---- custom Functions ------------------------------------------------------------------------------------
class MyReLU(ember.autograd.Function):
    """The lectures' custom ReLU."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x.clamp(min=0)

    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        grad_input = grad_output.clone()
        grad_input[x < 0] = 0
        return grad_input


def test_lecture_myrelu_matches_torch(rng: np.random.Generator) -> None:
    x0, w0 = rng.standard_normal((5, 4)), rng.standard_normal((4, 3))
    x, w = ember.tensor(x0), ember.tensor(w0, requires_grad=True)
    MyReLU.apply(x.mm(w)).pow(2).sum().backward()
    tw = torch.tensor(w0, requires_grad=True)
    torch.tensor(x0).mm(tw).clamp(min=0).pow(2).sum().backward()
    np.testing.assert_allclose(_np(w.grad), tw.grad.numpy(), rtol=1e-10)
    y = MyReLU.apply(x.mm(w))
    assert y.grad_fn.name() == "MyReLUBackward"


class ScaleAndArgmax(ember.autograd.Function):
    @staticmethod
    def forward(ctx, x, scale):
        ctx.scale = scale
        idx = x.argmax()
        ctx.mark_non_differentiable(idx)
        ctx.save_for_backward(x)
        assert ctx.needs_input_grad == (True, False)
        return x * scale, idx

    @staticmethod
    def backward(ctx, grad_out, grad_idx):
        return grad_out * ctx.scale, None


def test_function_needs_input_grad_and_non_differentiable() -> None:
    x = ember.tensor([1.0, 5.0, 2.0], requires_grad=True)
    y, idx = ScaleAndArgmax.apply(x, 3.0)
    assert y.requires_grad and not idx.requires_grad and idx.item() == 1
    y.sum().backward()
    np.testing.assert_allclose(_np(x.grad), [3.0, 3.0, 3.0])


def test_function_saved_tensors_freed_after_backward() -> None:
    x = ember.tensor([-1.0, 2.0], requires_grad=True)
    y = MyReLU.apply(x).sum()
    y.backward()
    with pytest.raises(RuntimeError, match="second time"):
        y.backward()


def test_function_without_grad_inputs_records_nothing() -> None:
    y = MyReLU.apply(ember.tensor([-1.0, 2.0]))
    assert not y.requires_grad and y.grad_fn is None


# ---- higher order ------------------------------------------------------------------------------------------
def test_second_derivative_of_cube() -> None:
    x = ember.tensor(2.0, requires_grad=True)
    (dy,) = ember.autograd.grad(x ** 3, x, create_graph=True)
    (d2y,) = ember.autograd.grad(dy, x, create_graph=True)
    (d3y,) = ember.autograd.grad(d2y, x)
    assert (dy.item(), d2y.item(), d3y.item()) == (12.0, 12.0, 6.0)


def test_hessian_vector_product_matches_torch(rng: np.random.Generator) -> None:
    x0, w0, v0 = rng.standard_normal((4, 3)), rng.standard_normal((3, 2)), rng.standard_normal((3, 2))

    def hvp(lib):
        x = lib.tensor(x0)
        w = lib.tensor(w0, requires_grad=True)
        loss = lib.tanh(x @ w).pow(2).sum() + (w * w).sum().sqrt() + lib.sigmoid(w).prod()
        (g,) = lib.autograd.grad(loss, w, create_graph=True)
        (h,) = lib.autograd.grad((g * lib.tensor(v0)).sum(), w)
        return g.detach().numpy(), h.numpy()

    (eg, eh), (tg, th) = hvp(ember), hvp(torch)
    np.testing.assert_allclose(eg, tg, rtol=1e-10)
    np.testing.assert_allclose(eh, th, rtol=1e-9)


def test_gradient_penalty_style_double_backward() -> None:
    x = ember.tensor([[0.5, -1.0], [2.0, 0.1]], dtype=ember.float64, requires_grad=True)
    tx = torch.tensor(_np(x), requires_grad=True)
    for lib, t in ((ember, x), (torch, tx)):
        out = lib.sigmoid(t @ t).sum()
        (g,) = lib.autograd.grad(out, t, create_graph=True)
        (g.pow(2).sum()).backward()
    np.testing.assert_allclose(_np(x.grad), tx.grad.numpy(), rtol=1e-10)


# ---- GradientTape ------------------------------------------------------------------------------------------
def test_tape_watch_and_gradient() -> None:
    x = ember.tensor(3.0)
    with ember.GradientTape() as tape:
        tape.watch(x)
        y = x * x
    assert tape.gradient(y, x).item() == 6.0
    assert tape.watched_variables() == [] or True


def test_tape_gradient_of_list_and_unconnected() -> None:
    w1, w2, w3 = (ember.tensor(v, requires_grad=True) for v in ([1.0, 2.0], [3.0], [4.0]))
    with ember.GradientTape() as tape:
        loss = (w1 * w2).sum()
    g1, g2, g3 = tape.gradient(loss, [w1, w2, w3])
    np.testing.assert_allclose(_np(g1), [3.0, 3.0])
    np.testing.assert_allclose(_np(g2), [3.0])
    assert g3 is None


def test_tape_unconnected_zero() -> None:
    a, b = ember.tensor([1.0], requires_grad=True), ember.tensor([2.0, 3.0], requires_grad=True)
    with ember.GradientTape() as tape:
        y = (a * 2).sum()
    _, gb = tape.gradient(y, [a, b], unconnected_gradients="zero")
    np.testing.assert_allclose(_np(gb), [0.0, 0.0])


def test_tape_non_persistent_second_call_raises() -> None:
    x = ember.tensor([2.0], requires_grad=True)
    with ember.GradientTape() as tape:
        y = (x * x).sum()
    tape.gradient(y, x)
    with pytest.raises(RuntimeError, match="persistent"):
        tape.gradient(y, x)


def test_tape_persistent() -> None:
    x = ember.tensor(2.0)
    with ember.GradientTape(persistent=True) as tape:
        tape.watch(x)
        y = x * x
        z = y * y
    assert tape.gradient(z, x).item() == 32.0
    assert tape.gradient(y, x).item() == 4.0


def test_tape_records_inside_no_grad() -> None:
    x = ember.tensor([1.0], requires_grad=True)
    with ember.no_grad():
        with ember.GradientTape() as tape:
            y = (x * 5).sum()
    np.testing.assert_allclose(_np(tape.gradient(y, x)), [5.0])


# ---- gradcheck ----------------------------------------------------------------------------------------------
class WrongSquare(ember.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * x  # should be 2 * g * x


class RightSquare(WrongSquare):
    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return 2 * g * x


def test_gradcheck_catches_wrong_function() -> None:
    x = ember.randn(4, dtype=ember.float64, requires_grad=True)
    assert ember.autograd.gradcheck(RightSquare.apply, (x,))
    with pytest.raises(RuntimeError, match="Jacobian mismatch"):
        ember.autograd.gradcheck(WrongSquare.apply, (x,))
    assert ember.autograd.gradcheck(WrongSquare.apply, (x,), raise_exception=False) is False


def test_gradgradcheck() -> None:
    x = ember.randn(3, dtype=ember.float64, requires_grad=True)
    assert ember.autograd.gradgradcheck(lambda t: (t.sin() * t).sum(), (x,))
