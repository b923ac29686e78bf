"""Adadelta, Adamax, NAdam, RAdam, Rprop, ASGD step by step against torch.optim (table-driven)."""
from __future__ import annotations

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")

# (name, options): each row runs 8 steps on two parameters in two groups with the same gradients.
CASES = [
    ("Adadelta", {}), ("Adadelta", {"lr": 0.5, "rho": 0.8, "weight_decay": 0.1}), ("Adadelta", {"maximize": True}),
    ("Adamax", {}), ("Adamax", {"lr": 0.01, "betas": (0.8, 0.9), "weight_decay": 0.05}),
    ("Adamax", {"maximize": True}),
    ("NAdam", {}), ("NAdam", {"lr": 0.01, "weight_decay": 0.1}),
    ("NAdam", {"weight_decay": 0.1, "decoupled_weight_decay": True, "momentum_decay": 0.01}),
    ("RAdam", {}), ("RAdam", {"lr": 0.05, "betas": (0.5, 0.6)}),  # rho_t > 5 within the 8 steps
    ("RAdam", {"weight_decay": 0.1, "decoupled_weight_decay": True}), ("RAdam", {"maximize": True}),
    ("Rprop", {}), ("Rprop", {"lr": 0.1, "etas": (0.3, 1.5), "step_sizes": (1e-3, 0.2)}),
    ("Rprop", {"maximize": True}),
    ("ASGD", {}), ("ASGD", {"lr": 0.1, "lambd": 0.01, "alpha": 0.5, "t0": 3, "weight_decay": 0.01}),
]


@pytest.mark.parametrize("name,options", CASES, ids=[f"{n}-{i}" for i, (n, _) in enumerate(CASES)])
def test_steps_match_torch(name: str, options: dict) -> None:
    rng = np.random.default_rng(0)
    w0, b0 = rng.standard_normal((4, 3)), rng.standard_normal(3)
    grads = [(rng.standard_normal((4, 3)), rng.standard_normal(3)) for _ in range(8)]
    grads[3] = (np.zeros((4, 3)), grads[3][1])  # a zero gradient (sign 0 for Rprop)
    ew, eb = ember.tensor(w0, requires_grad=True), ember.tensor(b0, requires_grad=True)
    tw, tb = torch.tensor(w0, requires_grad=True), torch.tensor(b0, requires_grad=True)
    eopt = getattr(ember.optim, name)([{"params": [ew]}, {"params": [eb], "lr": 0.003}], **options)
    topt = getattr(torch.optim, name)([{"params": [tw]}, {"params": [tb], "lr": 0.003}], **options)
    for gw, gb in grads:
        ew.grad, eb.grad = ember.tensor(gw), ember.tensor(gb)
        tw.grad, tb.grad = torch.tensor(gw), torch.tensor(gb)
        eopt.step()
        topt.step()
        np.testing.assert_allclose(ew.detach().numpy(), tw.detach().numpy(), rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(eb.detach().numpy(), tb.detach().numpy(), rtol=1e-10, atol=1e-12)
    tstate = topt.state_dict()["state"]
    estate = eopt.state_dict()["state"]
    for key in tstate:
        assert set(estate[key]) == set(tstate[key]), (name, "state keys differ")
        for k, v in tstate[key].items():
            np.testing.assert_allclose(np.asarray(estate[key][k].numpy() if hasattr(estate[key][k], "numpy")
                                                  else estate[key][k]), v.numpy(), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("name,bad", [("Adadelta", {"rho": 1.5}), ("Adamax", {"betas": (1.0, 0.9)}),
                                      ("NAdam", {"lr": -1.0}), ("RAdam", {"eps": -1.0}),
                                      ("Rprop", {"etas": (1.5, 1.2)}), ("ASGD", {"weight_decay": -1})])
def test_invalid_options_raise_like_torch(name: str, bad: dict) -> None:
    w = ember.zeros(2, requires_grad=True)
    with pytest.raises(ValueError, match="Invalid"):
        getattr(ember.optim, name)([w], **bad)
    with pytest.raises(ValueError):
        getattr(torch.optim, name)([torch.zeros(2, requires_grad=True)], **bad)


def test_float32_parameters_stay_float32() -> None:
    for name, _ in CASES[::3]:
        w = ember.randn(3, requires_grad=True)
        w.grad = ember.randn(3)
        opt = getattr(ember.optim, name)([w])
        opt.step()
        assert w.dtype is ember.float32 and all(v.dtype is ember.float32 for v in opt.state[w].values()
                                                 if getattr(v, "ndim", 0) > 0), name


@pytest.mark.parametrize("options", [{}, {"lr": 0.05, "betas": (0.5, 0.9)}, {"maximize": True}])
def test_sparse_adam_matches_torch_with_sparse_gradients(options: dict) -> None:
    rng = np.random.default_rng(3)
    w0 = rng.standard_normal((6, 3))
    e = ember.tensor(w0, requires_grad=True)
    t = torch.tensor(w0, requires_grad=True)
    eopt, topt = ember.optim.SparseAdam([e], **options), torch.optim.SparseAdam([t], **options)
    for step in range(5):
        rows = rng.choice(6, size=2, replace=False)
        dense = np.zeros((6, 3))
        dense[rows] = rng.standard_normal((2, 3))
        e.grad = ember.tensor(dense)
        t.grad = torch.tensor(dense).to_sparse()
        eopt.step()
        topt.step()
        np.testing.assert_allclose(e.detach().numpy(), t.detach().numpy(), rtol=1e-10, atol=1e-12)
    with pytest.raises(ValueError, match="Invalid"):
        ember.optim.SparseAdam([e], lr=0.0)
