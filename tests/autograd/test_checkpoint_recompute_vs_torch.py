"""``torch.utils.checkpoint`` with recomputation, against torch 2.13 (autograd audit, func24): both forms
(``use_reentrant`` True/False) give torch's values and gradients with dropout replayed (``preserve_rng_state``),
call the function twice, update batch norm's running statistics twice (as torch), pass non-tensor arguments, and
the reentrant form's rules: nothing recorded when no input requires grad (parameters get no gradient),
``autograd.grad`` / ``backward(inputs=)`` refused, keyword arguments refused; ``checkpoint_sequential`` too."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")


def _model(lib):
    lib.manual_seed(0)
    return lib.nn.Sequential(lib.nn.Linear(4, 6), lib.nn.BatchNorm1d(6), lib.nn.Tanh(), lib.nn.Dropout(0.4),
                             lib.nn.Linear(6, 3)).double()


def _run(lib, mode: str, x_requires_grad: bool = True, sequential: bool = False) -> list:
    model = _model(lib)
    calls = [0]
    model.register_forward_hook(lambda *a: calls.__setitem__(0, calls[0] + 1))
    x = lib.tensor(np.random.default_rng(0).standard_normal((5, 4)), requires_grad=x_requires_grad)
    lib.manual_seed(7)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch's "None of the inputs have requires_grad=True"
        if mode == "plain":
            y = model(x)
        elif sequential:
            y = lib.utils.checkpoint.checkpoint_sequential(model, 2, x, use_reentrant=mode == "reentrant")
        else:
            y = lib.utils.checkpoint.checkpoint(model, x, use_reentrant=mode == "reentrant")
    if y.requires_grad:
        (y * y.detach().cos()).sum().backward()
    grads = [None if p.grad is None else p.grad.numpy() for p in model.parameters()]
    return [y.detach().numpy(), y.requires_grad, None if x.grad is None else x.grad.numpy(), grads,
            model[1].running_mean.numpy(), calls[0]]


def _assert_same(a, b) -> None:
    if isinstance(a, list):
        assert len(a) == len(b)
        for p, q in zip(a, b):
            _assert_same(p, q)
    elif isinstance(a, np.ndarray):
        np.testing.assert_allclose(b, a, rtol=1e-10, atol=1e-12)
    else:
        assert a == b


# torch's first checkpoint call imports torch._dynamo (4-7 s): the comparisons with torch's checkpoint are slow; the
# fast twins compare with torch's plain run, literal torch messages and formulas.
@pytest.mark.slow
@pytest.mark.parametrize("mode", ["reentrant", "non_reentrant"])
@pytest.mark.parametrize("x_requires_grad", [True, False])
@pytest.mark.parametrize("sequential", [False, True])
def test_values_gradients_and_side_effects_as_torch(mode: str, x_requires_grad: bool, sequential: bool) -> None:
    want = _run(torch, mode, x_requires_grad, sequential)
    got = _run(ember, mode, x_requires_grad, sequential)
    _assert_same(want[:-1], got[:-1])  # values, gradients, batch norm's running mean (updated twice in both)
    if not sequential:  # the reentrant recomputation reruns the module's forward hook; torch's non-reentrant one
        # stops once the last saved tensor is recomputed (its early stop), before the hook; ember's runs to the end
        # (documented in ember/utils/checkpoint.py); nothing recorded: no rerun
        assert want[-1] == (2 if mode == "reentrant" and x_requires_grad else 1)
        assert got[-1] == (1 if mode == "reentrant" and not x_requires_grad else 2)


@pytest.mark.parametrize("mode", ["reentrant", "non_reentrant"])
def test_checkpoint_equals_torch_plain_run_and_updates_statistics_twice(mode: str) -> None:
    """Fast twin: the checkpointed ember run gives torch's plain values and gradients; batch norm's running mean
    was updated twice from zero (r -> m * b, then (1 - m) * m * b + m * b = 1.9 * (m * b) for momentum 0.1)."""
    want, got = _run(torch, "plain"), _run(ember, mode)
    _assert_same(want[:4], got[:4])
    np.testing.assert_allclose(got[4], 1.9 * want[4], rtol=1e-12)
    assert got[5] == 2


def test_dropout_replay_matches_the_plain_run() -> None:
    """Independent of torch: the recomputation draws the same dropout mask (gradients equal the plain run's)."""
    plain = _run(ember, "plain")
    for mode in ("reentrant", "non_reentrant"):
        got = _run(ember, mode)
        for a, b in zip([plain[0], plain[2]] + plain[3], [got[0], got[2]] + got[3]):
            np.testing.assert_allclose(b, a, rtol=1e-12)


@pytest.mark.slow
def test_non_reentrant_grad_and_double_backward_as_torch() -> None:
    def run(lib):
        x = lib.tensor([0.3, -1.2, 2.0], dtype=lib.float64, requires_grad=True)
        y = lib.utils.checkpoint.checkpoint(lambda a, k: (a.sin() * a * k).sum(), x, k=2.0, use_reentrant=False)
        (g,) = lib.autograd.grad(y, x, create_graph=True)
        (gg,) = lib.autograd.grad(g.sum(), x)
        return g.detach().numpy(), gg.numpy()
    _assert_same(list(run(torch)), list(run(ember)))
    x0 = np.array([0.3, -1.2, 2.0])  # d/dx 2 x sin x = 2 sin x + 2 x cos x; again: 4 cos x - 2 x sin x
    np.testing.assert_allclose(run(ember)[1], 4 * np.cos(x0) - 2 * x0 * np.sin(x0), rtol=1e-12)


def _err_grad_reentrant(lib):
    x = lib.ones(3, requires_grad=True)
    lib.autograd.grad(lib.utils.checkpoint.checkpoint(lambda a: a.exp(), x, use_reentrant=True).sum(), x)


def _err_inputs_reentrant(lib):
    x = lib.ones(3, requires_grad=True)
    lib.utils.checkpoint.checkpoint(lambda a: a.exp(), x, use_reentrant=True).sum().backward(inputs=[x])


def _err_kwargs_reentrant(lib):
    lib.utils.checkpoint.checkpoint(lambda a, k: a * k, lib.ones(3, requires_grad=True), k=2.0, use_reentrant=True)


def _err_context_fn_reentrant(lib):
    lib.utils.checkpoint.checkpoint(lambda a: a, lib.ones(3, requires_grad=True), use_reentrant=True,
                                    context_fn=lambda: (None, None))


_REFUSALS = [
    (_err_grad_reentrant, "When use_reentrant=True, torch.utils.checkpoint is incompatible with .grad()"),
    (_err_inputs_reentrant, "When use_reentrant=True, torch.utils.checkpoint is incompatible with .grad()"),
    (_err_kwargs_reentrant, "Unexpected keyword arguments: k"),
    (_err_context_fn_reentrant, "Passing `context_fn` or `debug` is only supported when use_reentrant=False"),
]


@pytest.mark.parametrize("case,message", _REFUSALS)
def test_reentrant_refusals_with_torch_messages(case, message: str) -> None:
    with pytest.raises((RuntimeError, ValueError), match=message):
        case(ember)


def test_non_reentrant_double_backward_against_the_formula() -> None:
    x = ember.tensor([0.3, -1.2, 2.0], dtype=ember.float64, requires_grad=True)
    y = ember.utils.checkpoint.checkpoint(lambda a, k: (a.sin() * a * k).sum(), x, k=2.0, use_reentrant=False)
    (g,) = ember.autograd.grad(y, x, create_graph=True)
    (gg,) = ember.autograd.grad(g.sum(), x)
    x0 = np.array([0.3, -1.2, 2.0])  # d/dx 2 x sin x = 2 sin x + 2 x cos x; again: 4 cos x - 2 x sin x
    np.testing.assert_allclose(g.detach().numpy(), 2 * np.sin(x0) + 2 * x0 * np.cos(x0), rtol=1e-12)
    np.testing.assert_allclose(gg.numpy(), 4 * np.cos(x0) - 2 * x0 * np.sin(x0), rtol=1e-12)


@pytest.mark.slow
@pytest.mark.parametrize("case,message", _REFUSALS)
def test_reentrant_refusals_as_torch(case, message: str) -> None:
    with pytest.raises(Exception, match=message) as want:
        case(torch)
    with pytest.raises(want.type, match=message):
        case(ember)


@pytest.mark.parametrize("lib", [pytest.param(torch, marks=pytest.mark.slow), ember], ids=["torch", "ember"])
def test_use_reentrant_not_passed_warns_and_is_reentrant(lib) -> None:
    with pytest.warns(UserWarning, match="the use_reentrant parameter should be passed explicitly"):
        y = lib.utils.checkpoint.checkpoint(lambda a: a * 2, lib.ones(2, requires_grad=True))
    assert y.grad_fn is not None and "Checkpoint" in type(y.grad_fn).__name__ + y.grad_fn.name()
