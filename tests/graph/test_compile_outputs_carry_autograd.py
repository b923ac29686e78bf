"""ember.compile: results of compiled functions carry autograd history (torch.compile's forward usage).

Every gradient is checked against the same model run eagerly (float64, tight tolerance) and, for
the standard layers, against torch 2.13 CPU with the same weights.
"""
from __future__ import annotations

import warnings

import numpy as np
import pytest

import ember
from ember.graph.compiled_autograd import CompiledAutograd

torch = pytest.importorskip("torch")

TOL = dict(rtol=1e-10, atol=1e-12)


# ---- helpers ---------------------------------------------------------------------------------------
def _pair(make):
    """Two identical float64 models: one to run eagerly, one to compile."""
    ember.manual_seed(0)
    eager = make().double()
    ember.manual_seed(0)
    compiled = make().double()
    return eager, compiled


def _torch_twin(model, make_torch):
    twin = make_torch().double()
    twin.load_state_dict({k: torch.from_numpy(np.array(v.detach().numpy())) for k, v in model.state_dict().items()})
    return twin


def _grads(model) -> dict:
    return {n: p.grad.numpy().copy() for n, p in model.named_parameters() if p.grad is not None}


def _assert_grads_equal(a: dict, b: dict, **tol) -> None:
    assert a.keys() == b.keys() and a
    for name in a:
        np.testing.assert_allclose(a[name], b[name], err_msg=name, **(tol or TOL))


def _weighted_loss(out, seed: int = 1):
    weights = np.random.default_rng(seed).standard_normal(tuple(out.shape))
    return (out * ember.tensor(weights)).sum(), weights


def _check_model(make, make_torch, x_np, calls: int = 4):
    eager, model = _pair(make)
    cm = ember.compile(model)
    x = ember.tensor(x_np)
    for call in range(calls):
        for m, f in ((eager, eager), (model, cm)):
            m.zero_grad()
            loss, _ = _weighted_loss(f(x))
            loss.backward()
        _assert_grads_equal(_grads(model), _grads(eager))
        for (name, a), (_, b) in zip(model.state_dict().items(), eager.state_dict().items()):
            np.testing.assert_allclose(a.numpy(), b.numpy(), err_msg=f"call {call}: {name}", **TOL)
    assert isinstance(cm.last, CompiledAutograd) and "split: backward" in cm.explain()
    # torch, same weights (BN running statistics do not enter a train-mode forward)
    twin = _torch_twin(model, make_torch)
    twin.train(model.training)
    out = twin(torch.from_numpy(x_np))
    (out * torch.from_numpy(_weighted_loss(cm(x))[1])).sum().backward()
    model.zero_grad()
    _weighted_loss(cm(x))[0].backward()
    expected = {n: p.grad.numpy() for n, p in twin.named_parameters()}
    _assert_grads_equal(_grads(model), expected, rtol=1e-9, atol=1e-11)
    return cm


# ---- standard models: compiled grads == eager grads == torch grads ----------------------------------
def test_linear():
    x = np.random.default_rng(0).standard_normal((4, 3))
    _check_model(lambda: ember.nn.Linear(3, 2), lambda: torch.nn.Linear(3, 2), x)


def test_mlp():
    def make(nn):
        return lambda: nn.Sequential(nn.Linear(5, 16), nn.Tanh(), nn.Linear(16, 8), nn.ReLU(), nn.Linear(8, 3))

    x = np.random.default_rng(0).standard_normal((6, 5))
    _check_model(make(ember.nn), make(torch.nn), x)


def test_cnn_with_batchnorm_in_train_mode():
    def make(nn):
        return lambda: nn.Sequential(nn.Conv2d(2, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(), nn.MaxPool2d(2),
                                     nn.Flatten(), nn.Linear(4 * 3 * 3, 5))

    x = np.random.default_rng(0).standard_normal((3, 2, 6, 6))
    cm = _check_model(make(ember.nn), make(torch.nn), x)
    assert cm.graph.updates, "BatchNorm running statistics must still be written by the compiled forward"


def test_transformer_encoder_layer():
    def make(nn):
        return lambda: nn.TransformerEncoderLayer(8, 2, dim_feedforward=16, dropout=0.0, batch_first=True)

    x = np.random.default_rng(0).standard_normal((2, 5, 8))
    _check_model(make(ember.nn), make(torch.nn), x)


# ---- inputs, outputs, loops -----------------------------------------------------------------------------
def test_gradients_reach_inputs_that_require_grad_and_their_history():
    eager, model = _pair(lambda: ember.nn.Sequential(ember.nn.Linear(3, 4), ember.nn.Sigmoid()))
    cm = ember.compile(model)
    rng = np.random.default_rng(2)
    for call in range(4):
        a_np = rng.standard_normal((5, 3))
        results = []
        for f in (eager, cm):
            a = ember.tensor(a_np, requires_grad=True)
            x = ember.tensor(a_np * 0.5, requires_grad=True)
            b = a * 2.0  # an argument with history: the gradient must flow on into a
            loss = (f(x) * f(b)).sum()
            loss.backward()
            results.append((x.grad.numpy(), a.grad.numpy()))
        np.testing.assert_allclose(results[1][0], results[0][0], **TOL)
        np.testing.assert_allclose(results[1][1], results[0][1], **TOL)
    # torch reference for d loss / dx of the last call
    twin = _torch_twin(model, lambda: torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Sigmoid()))
    ta = torch.tensor(a_np, requires_grad=True)
    tx = torch.tensor(a_np * 0.5, requires_grad=True)
    (twin(tx) * twin(ta * 2.0)).sum().backward()
    np.testing.assert_allclose(results[1][0], tx.grad.numpy(), rtol=1e-9)
    np.testing.assert_allclose(results[1][1], ta.grad.numpy(), rtol=1e-9)


def test_multiple_outputs_only_one_used():
    w = ember.tensor(np.random.default_rng(3).standard_normal((3, 3)), requires_grad=True)

    def f(x):
        h = (x @ w).tanh()
        return {"h": h, "y": (h * h).sum(dim=1), "label": h.argmax(dim=1)}

    cf = ember.compile(f)
    x = ember.tensor(np.random.default_rng(4).standard_normal((4, 3)))
    for _ in range(4):
        expected = []
        for fn in (f, cf):
            w.grad = None
            out = fn(x)
            assert out["h"].requires_grad and out["y"].requires_grad and not out["label"].requires_grad
            out["y"].sum().backward()
            g_y = w.grad.numpy().copy()
            w.grad = None
            out = fn(x)
            out["h"].sum().backward()
            expected.append((g_y, w.grad.numpy().copy()))
        np.testing.assert_allclose(expected[1][0], expected[0][0], **TOL)
        np.testing.assert_allclose(expected[1][1], expected[0][1], **TOL)
    tw = torch.tensor(w.detach().numpy(), requires_grad=True)
    th = (torch.from_numpy(x.numpy()) @ tw).tanh()
    (th * th).sum(dim=1).sum().backward()
    np.testing.assert_allclose(expected[1][0], tw.grad.numpy(), rtol=1e-9)


@pytest.mark.parametrize("case", ["same_tensor_twice", "returns_parameter", "returns_argument"])
def test_outputs_that_are_repeated_or_inputs(case):
    w = ember.tensor([0.5, -2.0], dtype=ember.float64, requires_grad=True)

    def f(x):
        y = x * w
        if case == "same_tensor_twice":
            return y, y
        if case == "returns_parameter":
            return w, y
        return x, y

    cf = ember.compile(f)
    results = []
    for fn in (f, cf, cf, cf):
        x = ember.tensor([3.0, 4.0], dtype=ember.float64, requires_grad=True)
        a, b = fn(x)
        (a.sum() * 3.0 + (b * b).sum()).backward()
        results.append((w.grad.numpy().copy(), x.grad.numpy().copy()))
        w.grad = None
    assert isinstance(cf.last, CompiledAutograd)
    xn, wn = np.array([3.0, 4.0]), w.detach().numpy()
    expected = {"same_tensor_twice": (3 * xn + 2 * xn * wn * xn, 3 * wn + 2 * xn * wn * wn),
                "returns_parameter": (3 + 2 * xn * wn * xn, 2 * xn * wn * wn),
                "returns_argument": (2 * xn * wn * xn, 3 + 2 * xn * wn * wn)}[case]
    for gw, gx in results:
        np.testing.assert_allclose(gw, expected[0], **TOL)
        np.testing.assert_allclose(gx, expected[1], **TOL)


def test_two_calls_then_one_backward():
    # The second call's run must not overwrite what the first call saved (fused kernels reuse scratch).
    def make():
        return ember.nn.Sequential(ember.nn.Linear(4, 6), ember.nn.Tanh(), ember.nn.Linear(6, 6), ember.nn.GELU(),
                                   ember.nn.BatchNorm1d(6), ember.nn.Linear(6, 1))

    eager, model = _pair(make)
    cm = ember.compile(model)
    rng = np.random.default_rng(7)
    for _ in range(4):
        a, b = (ember.tensor(rng.standard_normal((5, 4))) for _ in range(2))
        for m, f in ((eager, eager), (model, cm)):
            m.zero_grad()
            ya, yb = f(a), f(b)
            ((ya * ya).sum() + (yb ** 3).sum()).backward()
        _assert_grads_equal(_grads(model), _grads(eager))
    assert isinstance(cm.last, CompiledAutograd)


def test_training_loop_equals_eager_loop():
    def make():
        return ember.nn.Sequential(ember.nn.Linear(4, 8), ember.nn.ReLU(), ember.nn.Linear(8, 2))

    eager, model = _pair(make)
    cm = ember.compile(model)
    rng = np.random.default_rng(5)
    data = [(ember.tensor(rng.standard_normal((6, 4))), ember.tensor(rng.standard_normal((6, 2)))) for _ in range(5)]
    for f in (eager, cm):  # cm.parameters() reaches the module, as with torch.compile
        opt = ember.optim.SGD(f.parameters(), lr=0.1, momentum=0.9)
        for x, t in data:
            opt.zero_grad()
            loss = ((f(x) - t) ** 2).mean()
            loss.backward()
            opt.step()
    for (name, a), (_, b) in zip(model.named_parameters(), eager.named_parameters()):
        np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), err_msg=name, **TOL)
    assert isinstance(cm.last, CompiledAutograd)


# ---- modes and graph semantics ------------------------------------------------------------------------
def test_no_grad_inference_runs_the_plain_forward_graph():
    eager, model = _pair(lambda: ember.nn.Sequential(ember.nn.Linear(3, 4), ember.nn.ReLU()))
    cm = ember.compile(model)
    x = ember.tensor(np.random.default_rng(6).standard_normal((2, 3)))
    for _ in range(3):
        cm(x).sum().backward()  # the grad-enabled key: history
    assert isinstance(cm.last, CompiledAutograd)
    for _ in range(3):
        with ember.no_grad():
            y = cm(x)
        assert not y.requires_grad and y.grad_fn is None
    assert not isinstance(cm.last, CompiledAutograd)
    assert len(cm.last.executable.fetch_slots) == len(cm.graph.outputs) == 1  # no saved values fetched
    assert not cm.graph.updates
    np.testing.assert_allclose(y.numpy(), eager(x).detach().numpy(), **TOL)


def test_no_grad_and_detach_inside_the_function_stop_gradients_as_in_eager():
    w = ember.tensor([0.5, -1.0, 2.0], dtype=ember.float64, requires_grad=True)

    def f(x):
        with ember.no_grad():
            scale = (w * w).sum()
        return x * w * w.detach() * scale

    cf = ember.compile(f)
    x = ember.tensor([1.0, 2.0, 3.0], dtype=ember.float64)
    for _ in range(3):
        w.grad = None
        cf(x).sum().backward()
    # d/dw of x * w * const = x * w_detached * scale
    wn, xn = w.detach().numpy(), x.numpy()
    np.testing.assert_allclose(w.grad.numpy(), xn * wn * (wn * wn).sum(), **TOL)


def test_second_backward_without_retain_graph_raises():
    model = ember.nn.Linear(3, 2).double()
    cm = ember.compile(model)
    x = ember.randn(4, 3, dtype=ember.float64)
    for _ in range(2):
        cm(x)
    y = cm(x)
    y.sum().backward()
    with pytest.raises(RuntimeError, match="second time"):
        y.sum().backward()
    model.zero_grad()
    y = cm(x)
    y.sum().backward(retain_graph=True)
    first = model.weight.grad.numpy().copy()
    y.sum().backward()
    np.testing.assert_allclose(model.weight.grad.numpy(), 2 * first, **TOL)


def test_create_graph_raises_a_clear_error():
    model = ember.nn.Linear(3, 2).double()
    cm = ember.compile(model)
    x = ember.randn(4, 3, dtype=ember.float64)
    for _ in range(2):
        y = cm(x)
    assert isinstance(cm.last, CompiledAutograd)
    with pytest.raises(RuntimeError, match="create_graph"):
        y.pow(2).sum().backward(create_graph=True)


def test_hooks_run_at_backward_time():
    model = ember.nn.Linear(3, 2).double()
    seen = []
    model.weight.register_hook(lambda g: seen.append(g.numpy().copy()))
    cm = ember.compile(model)
    x = ember.randn(4, 3, dtype=ember.float64)
    for _ in range(3):
        model.zero_grad()
        y = cm(x)
        y.register_hook(lambda g: g * 2)  # a hook on the compiled output doubles its gradient
        y.sum().backward()
    assert len(seen) == 3
    expected = 2 * np.ones((4, 2)).T @ x.numpy()
    for g in seen:
        np.testing.assert_allclose(g, expected, **TOL)
    np.testing.assert_allclose(model.weight.grad.numpy(), expected, **TOL)


def test_in_place_change_of_a_saved_tensor_is_caught():
    def f(x):
        return x.exp()  # exp saves its output, which is also the result

    cf = ember.compile(f)
    for _ in range(3):
        x = ember.tensor([0.0, 1.0], dtype=ember.float64, requires_grad=True)
        y = cf(x)
    with ember.no_grad():
        y.add_(1.0)
    with pytest.raises(RuntimeError, match="modified by an inplace"):
        y.sum().backward()
    # the argument itself, saved by reference, changed before backward
    w = ember.tensor([1.0, 2.0], dtype=ember.float64, requires_grad=True)
    g = ember.compile(lambda x: x * w)
    for _ in range(3):
        x = ember.tensor([3.0, 4.0], dtype=ember.float64)
        y = g(x)
    x.add_(1.0)
    with pytest.raises(RuntimeError, match="modified by an inplace"):
        y.sum().backward()


def test_freezing_a_parameter_after_tracing_retraces():
    eager, model = _pair(lambda: ember.nn.Sequential(ember.nn.Linear(3, 4), ember.nn.Linear(4, 2)))
    cm = ember.compile(model)
    x = ember.randn(5, 3, dtype=ember.float64)
    for _ in range(3):
        cm(x).sum().backward()
    for m in (eager, model):
        m[0].weight.requires_grad_(False)
        m.zero_grad()
    for f in (eager, cm):
        f(x).sum().backward()
    assert model[0].weight.grad is None
    _assert_grads_equal(_grads(model), _grads(eager))


def test_training_step_with_backward_inside_is_unchanged():
    w = ember.tensor(np.ones(3), requires_grad=True)

    @ember.compile
    def step(x):
        loss = (x * w).sum()
        loss.backward()
        with ember.no_grad():
            w.sub_(0.1 * w.grad)
            w.grad = None
        return loss

    losses = [step(ember.ones(3, dtype=ember.float64)).item() for _ in range(3)]
    np.testing.assert_allclose(losses, [3.0, 2.7, 2.4], **TOL)
    assert not isinstance(step.last, CompiledAutograd)
    assert len(step.last.executable.fetch_slots) == 1


def test_compiled_module_inside_a_compiled_training_step():
    eager, model = _pair(lambda: ember.nn.Linear(3, 1))
    cm = ember.compile(model)
    x = ember.randn(4, 3, dtype=ember.float64)
    cm(x), cm(x)  # cm has a compiled entry before the outer function is traced

    def step_for(f, m):
        def step(x):
            loss = (f(x) ** 2).sum()
            loss.backward()
            with ember.no_grad():
                for p in m.parameters():
                    p.sub_(0.01 * p.grad)
                    p.grad = None
            return loss
        return step

    outer = ember.compile(step_for(cm, model))
    reference = step_for(eager, eager)
    for _ in range(4):
        np.testing.assert_allclose(outer(x).item(), reference(x).item(), **TOL)
    assert outer.last is not None and not isinstance(outer.last, CompiledAutograd)  # traced, cm inlined


# ---- fallbacks stay correct ----------------------------------------------------------------------------
class _NumpyBackward(ember.autograd.Function):
    """A custom Function whose backward needs data (so it cannot be traced symbolically)."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * ember.tensor(2.0 * x.detach().numpy(), dtype=x.dtype)


@pytest.mark.parametrize("case", ["custom_function", "non_leaf_closure"])
def test_fallback_to_eager_keeps_gradients_correct(case):
    w = ember.tensor([0.5, -1.5, 2.0], dtype=ember.float64, requires_grad=True)
    closure = w * 3.0  # a non-leaf that requires grad, read by the compiled function

    def f(x):
        if case == "custom_function":
            return _NumpyBackward.apply(x * w)
        return x * closure

    cf = ember.compile(f)
    x = ember.tensor([1.0, 2.0, 3.0], dtype=ember.float64)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(3):
            w.grad = None
            cf(x).sum().backward(retain_graph=True)
    assert any("falling back to eager" in str(c.message) for c in caught)
    xn, wn = x.numpy(), w.detach().numpy()
    expected = 2 * (xn * wn) * xn if case == "custom_function" else 3.0 * xn
    np.testing.assert_allclose(w.grad.numpy(), expected, **TOL)
