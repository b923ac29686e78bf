"""The fused class-index cross entropy (ember/ops/losses_cross_entropy.py) against torch and against
ember's composite (log_softmax + nll_loss): values bit for bit with the composite, gradients and
second derivatives with torch, ignore_index (all ignored too), special logits, vmap per-sample
gradients, ember.compile, the stand-in device and ONNX export."""
from __future__ import annotations

import numpy as np
import pytest

import ember
import ember.nn.functional as F
from ember.ops import losses_cross_entropy as fused

torch = pytest.importorskip("torch")
TF = torch.nn.functional

REDUCTIONS = ["mean", "sum", "none"]


def _logits(n: int, c: int, dtype: type, seed: int = 0) -> np.ndarray:
    return (np.random.default_rng(seed).standard_normal((n, c)) * 3).astype(dtype)


def _targets(n: int, c: int, seed: int = 1, ignored: tuple = ()) -> np.ndarray:
    t = np.random.default_rng(seed).integers(0, c, n)
    t[list(ignored)] = -100
    return t


def _both(x: np.ndarray, t: np.ndarray, reduction: str, ignore_index: int = -100) -> tuple:
    ex = ember.tensor(x, requires_grad=True)
    tx = torch.tensor(x, requires_grad=True)
    el = F.cross_entropy(ex, ember.tensor(t), reduction=reduction, ignore_index=ignore_index)
    tl = TF.cross_entropy(tx, torch.tensor(t), reduction=reduction, ignore_index=ignore_index)
    g = np.random.default_rng(2).standard_normal(tuple(tl.shape)).astype(x.dtype)
    el.backward(ember.tensor(g))
    tl.backward(torch.tensor(g))
    return el.detach().numpy(), tl.detach().numpy(), ex.grad.numpy(), tx.grad.numpy()


def test_the_fused_op_runs_for_the_common_case_only() -> None:
    x, t = ember.zeros(4, 3), ember.tensor([0, 1, 2, 0])
    assert fused.fusable(x, t, None, 0.0)
    assert not fused.fusable(x, t, ember.ones(3), 0.0)          # class weights: composite
    assert not fused.fusable(x, t, None, 0.1)                   # label smoothing: composite
    assert not fused.fusable(ember.zeros(4, 3, 2), ember.zeros(4, 2, dtype=ember.int64), None, 0.0)  # (N, C, d)
    assert not fused.fusable(x.half(), t, None, 0.0)
    assert not fused.fusable(x, t.to(ember.uint8), None, 0.0)
    with ember.profiler.profile() as prof:
        F.cross_entropy(ember.zeros(4, 3, requires_grad=True), t).backward()
    names = {e.name for e in prof.events()}
    # the backward: the fused node (its array rule runs the backward op's impl: one node event, no op dispatched)
    node = "autograd::engine::evaluate_function: CrossEntropyBackward0"
    assert "cross_entropy" in names and node in names and "gather" not in names


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_loss_is_the_composites_bit_for_bit(reduction, dtype) -> None:
    x, t = _logits(33, 7, dtype), _targets(33, 7, ignored=(3, 30))
    got = F.cross_entropy(ember.tensor(x), ember.tensor(t), reduction=reduction).numpy()
    composite = F.nll_loss(F.log_softmax(ember.tensor(x), 1), ember.tensor(t), reduction=reduction).numpy()
    np.testing.assert_array_equal(got, composite)


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("n, c", [(64, 10), (1, 1), (1, 5), (7, 1), (5, 3)])
def test_values_and_gradients_vs_torch(reduction, dtype, n, c) -> None:
    x, t = _logits(n, c, dtype), _targets(n, c, ignored=(n - 1,) if n > 1 else ())
    el, tl, eg, tg = _both(x, t, reduction)
    tol = 1e-6 if dtype == np.float32 else 1e-13
    np.testing.assert_allclose(el, tl, rtol=tol * 10, atol=tol)
    np.testing.assert_allclose(eg, tg, rtol=tol * 10, atol=tol)


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_every_target_ignored(reduction) -> None:
    """A mean over no targets is 0/0 (NaN, as torch), its gradient NaN too; sum and none give 0."""
    x, t = _logits(4, 3, np.float32), np.full(4, 7)
    el, tl, eg, tg = _both(x, t, reduction, ignore_index=7)
    np.testing.assert_array_equal(el, tl)
    np.testing.assert_array_equal(eg, tg)


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("special", [np.inf, -np.inf, np.nan, 1e30, -1e30, 0.0])
def test_special_logits_vs_torch(reduction, special) -> None:
    x = _logits(6, 4, np.float32)
    x[1, 2] = special              # row 1's target class holds it
    x[3, 0] = special              # row 3: another class holds it
    t = np.array([0, 2, 1, 3, 0, 1])
    el, tl, eg, tg = _both(x, t, reduction)
    np.testing.assert_allclose(el, tl, rtol=1e-5, atol=1e-5)   # NaN and inf in the same places
    np.testing.assert_allclose(eg, tg, rtol=1e-5, atol=1e-5)


def test_second_derivatives_vs_torch() -> None:
    x, t = _logits(5, 4, np.float64), _targets(5, 4, ignored=(2,))
    ex, tx = ember.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    (eg,) = ember.autograd.grad(F.cross_entropy(ex, ember.tensor(t)), [ex], create_graph=True)
    (tg,) = torch.autograd.grad(TF.cross_entropy(tx, torch.tensor(t)), [tx], create_graph=True)
    w = np.random.default_rng(3).standard_normal(x.shape)
    (egg,) = ember.autograd.grad((eg * ember.tensor(w)).sum(), [ex])
    (tgg,) = torch.autograd.grad((tg * torch.tensor(w)).sum(), [tx])
    np.testing.assert_allclose(eg.detach().numpy(), tg.detach().numpy(), rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(egg.numpy(), tgg.numpy(), rtol=1e-10, atol=1e-13)


def test_gradient_vs_float64_finite_differences() -> None:
    x, t = _logits(3, 4, np.float64), np.array([1, -100, 3])
    ex = ember.tensor(x, requires_grad=True)
    F.cross_entropy(ex, ember.tensor(t)).backward()
    numeric = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        for sign in (1, -1):
            shifted = x.copy()
            shifted[i] += sign * 1e-6
            numeric[i] += sign * F.cross_entropy(ember.tensor(shifted), ember.tensor(t)).item() / 2e-6
    np.testing.assert_allclose(ex.grad.numpy(), numeric, rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("bad", [10, -1])
def test_out_of_range_target_names_the_op(bad) -> None:
    t = np.array([0, bad, 1])
    with pytest.raises(IndexError, match=f"cross_entropy: .*target {bad} is out of bounds for 10 classes"):
        F.cross_entropy(ember.tensor(_logits(3, 10, np.float32)), ember.tensor(t))


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_vmap_per_sample_gradients_vs_torch_func(reduction) -> None:
    x = _logits(12, 5, np.float32).reshape(3, 4, 5)
    t = _targets(12, 5, ignored=(5,)).reshape(3, 4)
    w = np.random.default_rng(4).standard_normal((5, 5)).astype(np.float32)

    def loss(lib, functional):
        def f(weight, xs, ts):
            out = functional.cross_entropy(xs @ weight, ts, reduction=reduction)
            return out.sum() if reduction == "none" else out
        return f

    got = ember.func.vmap(ember.func.grad(loss(ember, F)), in_dims=(None, 0, 0))(
        ember.tensor(w), ember.tensor(x), ember.tensor(t))
    want = torch.func.vmap(torch.func.grad(loss(torch, TF)), in_dims=(None, 0, 0))(
        torch.tensor(w), torch.tensor(x), torch.tensor(t))
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-5, atol=1e-6)
    values = ember.func.vmap(lambda xs, ts: F.cross_entropy(xs, ts, reduction=reduction))(ember.tensor(x), ember.tensor(t))
    expected = torch.func.vmap(lambda xs, ts: TF.cross_entropy(xs, ts, reduction=reduction))(torch.tensor(x), torch.tensor(t))
    np.testing.assert_allclose(values.numpy(), expected.numpy(), rtol=1e-6, atol=1e-6)


def test_compiled_training_step_matches_eager() -> None:
    x, t = _logits(16, 8, np.float32), _targets(16, 8, ignored=(4,))
    models = []
    for _ in range(2):
        ember.manual_seed(0)
        models.append(ember.nn.Linear(8, 6))

    def make_step(model):
        opt = ember.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)

        def step(a, b):
            loss = F.cross_entropy(model(a), b)
            opt.zero_grad()
            loss.backward()
            opt.step()
            return loss
        return step

    eager, compiled = make_step(models[0]), ember.compile(make_step(models[1]), measure=False)
    for _ in range(4):
        le = eager(ember.tensor(x), ember.tensor(t % 6))
        lc = compiled(ember.tensor(x), ember.tensor(t % 6))
        np.testing.assert_allclose(lc.item(), le.item(), rtol=1e-6)
    np.testing.assert_allclose(models[1].weight.detach().numpy(), models[0].weight.detach().numpy(), rtol=1e-5,
                               atol=1e-6)


def test_on_the_standin_device() -> None:
    from ember.testing import standin_cuda

    x, t = _logits(6, 4, np.float32), _targets(6, 4, ignored=(1,))
    with standin_cuda():
        ex = ember.tensor(x, device="cuda", requires_grad=True)
        loss = F.cross_entropy(ex, ember.tensor(t, device="cuda"))
        loss.backward()
        got, grad = loss.cpu().item(), ex.grad.cpu().numpy()
    tx = torch.tensor(x, requires_grad=True)
    tl = TF.cross_entropy(tx, torch.tensor(t))
    tl.backward()
    np.testing.assert_allclose(got, tl.item(), rtol=1e-6)
    np.testing.assert_allclose(grad, tx.grad.numpy(), rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_onnx_export(tmp_path, reduction) -> None:
    pytest.importorskip("onnx")
    pytest.importorskip("onnxruntime")
    import ember.onnx as eonnx

    x, t = _logits(6, 4, np.float32), _targets(6, 4, ignored=(2,))
    fn = lambda a, b: F.cross_entropy(a, b, reduction=reduction)  # noqa: E731
    inputs = (ember.tensor(x), ember.tensor(t))
    path = str(tmp_path / "ce.onnx")
    eonnx.export(fn, inputs, path)
    (got,) = eonnx.run(path, list(inputs))[:1]
    np.testing.assert_allclose(got, fn(*inputs).numpy(), rtol=1e-6, atol=1e-6)
