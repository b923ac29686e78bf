"""CyclicLR step by step against torch 2.13 (lr and momentum / beta1 every step, all modes), and
multilabel_margin_loss / MultiLabelMarginLoss forward and gradients against torch in float64."""
from __future__ import annotations

import numpy as np
import pytest

import ember
import ember.nn as enn
import ember.nn.functional as F

torch = pytest.importorskip("torch")


def _optimizers(kind: str):
    ew = [ember.zeros(2, requires_grad=True), ember.zeros(3, requires_grad=True)]
    tw = [torch.zeros(2, requires_grad=True), torch.zeros(3, requires_grad=True)]
    if kind == "sgd":
        return (ember.optim.SGD([{"params": [ew[0]]}, {"params": [ew[1]]}], lr=0.1, momentum=0.9),
                torch.optim.SGD([{"params": [tw[0]]}, {"params": [tw[1]]}], lr=0.1, momentum=0.9))
    return (ember.optim.Adam([{"params": [ew[0]]}, {"params": [ew[1]]}], lr=0.1),
            torch.optim.Adam([{"params": [tw[0]]}, {"params": [tw[1]]}], lr=0.1))


@pytest.mark.parametrize("kwargs", [
    {"base_lr": 0.01, "max_lr": 0.1, "step_size_up": 4},
    {"base_lr": [0.01, 0.02], "max_lr": [0.1, 0.3], "step_size_up": 3, "step_size_down": 5, "mode": "triangular2"},
    {"base_lr": 0.001, "max_lr": 0.1, "step_size_up": 2, "mode": "exp_range", "gamma": 0.9,
     "base_momentum": [0.7, 0.75], "max_momentum": 0.95},
    {"base_lr": 0.01, "max_lr": 0.1, "step_size_up": 3, "scale_fn": lambda x: 0.5 ** x, "scale_mode": "iterations"},
    {"base_lr": 0.01, "max_lr": 0.1, "step_size_up": 3, "cycle_momentum": False},
])
@pytest.mark.parametrize("kind", ["sgd", "adam"])
def test_cyclic_lr_matches_torch_step_by_step(kwargs, kind):
    eopt, topt = _optimizers(kind)
    es = ember.optim.lr_scheduler.CyclicLR(eopt, **kwargs)
    ts = torch.optim.lr_scheduler.CyclicLR(topt, **kwargs)
    key = "momentum" if kind == "sgd" else "betas"
    for step in range(25):
        assert es.get_last_lr() == ts.get_last_lr(), step
        for eg, tg in zip(eopt.param_groups, topt.param_groups):
            assert eg["lr"] == tg["lr"] and eg[key] == tg[key], step
        eopt.step()
        topt.step()
        es.step()
        ts.step()


def test_cyclic_lr_state_dict_resume_and_errors():
    eopt, _ = _optimizers("sgd")
    sched = ember.optim.lr_scheduler.CyclicLR(eopt, 0.01, 0.1, step_size_up=3, mode="triangular2")
    for _ in range(4):
        eopt.step()
        sched.step()
    state = sched.state_dict()
    assert "optimizer" not in state and state["_scale_fn_custom"] is None
    eopt2, _ = _optimizers("sgd")
    resumed = ember.optim.lr_scheduler.CyclicLR(eopt2, 0.01, 0.1, step_size_up=3, mode="triangular2")
    resumed.load_state_dict(state)
    sched.step()
    resumed.step()
    assert sched.get_last_lr() == resumed.get_last_lr()
    with pytest.raises(ValueError, match="mode 'bogus' is invalid"):
        ember.optim.lr_scheduler.CyclicLR(eopt, 0.01, 0.1, mode="bogus")
    w = ember.zeros(2, requires_grad=True)
    with pytest.raises(ValueError, match="momentum or beta1"):
        ember.optim.lr_scheduler.CyclicLR(ember.optim.Adagrad([w], lr=0.1), 0.01, 0.1)
    with pytest.raises(ValueError, match="same length as optimizer.param_groups"):
        ember.optim.lr_scheduler.CyclicLR(eopt, [0.1, 0.2, 0.3], 1.0)
    assert "CyclicLR" in ember.optim.lr_scheduler.__all__


def _margin_case(seed: int, n: int, c: int):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, c))
    y = np.full((n, c), -1, dtype=np.int64)
    for row in range(n):
        k = rng.integers(0, c + 1)
        y[row, :k] = rng.choice(c, size=k, replace=False)
        if row == 0 and c > 2:  # junk after the first -1 must be ignored; a repeat counts twice
            y[row, :4] = [1, 1, -1, 2] if c > 3 else y[row, :4]
    return x, y


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("n,c", [(4, 5), (1, 3), (3, 1)])
def test_multilabel_margin_loss_matches_torch(reduction, n, c):
    x, y = _margin_case(n * 10 + c, n, c)
    ex, tx = ember.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    el = F.multilabel_margin_loss(ex, ember.tensor(y), reduction=reduction)
    tl = torch.nn.functional.multilabel_margin_loss(tx, torch.tensor(y), reduction=reduction)
    np.testing.assert_allclose(el.detach().numpy(), tl.detach().numpy(), rtol=1e-12, atol=1e-12)
    g = np.random.default_rng(0).standard_normal(tuple(tl.shape))
    (el * ember.tensor(g)).sum().backward()
    (tl * torch.tensor(g)).sum().backward()
    np.testing.assert_allclose(ex.grad.numpy(), tx.grad.numpy(), rtol=1e-12, atol=1e-12)


def test_multilabel_margin_module_unbatched_and_errors():
    x = np.array([0.1, 0.2, 0.4, 0.8])
    y = np.array([3, 0, -1, 1])
    for reduction in ("mean", "none"):
        el = enn.MultiLabelMarginLoss(reduction=reduction)(ember.tensor(x), ember.tensor(y))
        tl = torch.nn.MultiLabelMarginLoss(reduction=reduction)(torch.tensor(x), torch.tensor(y))
        assert tuple(el.shape) == tuple(tl.shape)
        np.testing.assert_allclose(el.numpy(), tl.numpy(), rtol=1e-12)
    with pytest.raises(RuntimeError, match=r"target values must lie in \[-1, 4\)"):
        F.multilabel_margin_loss(ember.tensor(x), ember.tensor(np.array([4, -1, -1, -1])))
    with pytest.raises(RuntimeError, match="same shape"):
        F.multilabel_margin_loss(ember.tensor(x), ember.tensor(np.array([1, 2])))
    with pytest.raises(RuntimeError, match="int64 class indices"):
        F.multilabel_margin_loss(ember.tensor(x), ember.tensor(x))
