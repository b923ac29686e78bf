"""Adafactor and Muon step by step against torch.optim (table-driven), and
swap_in_optimizer_params_and_state against torch's."""
from __future__ import annotations

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")

# (name, options, tolerance): 6 steps on a 4x3 matrix, a 2x3x2 tensor (Adafactor factors the last two dims)
# and a vector, in two groups. Muon orthogonalizes in bfloat16: ember rounds to bfloat16 at the points torch's
# CPU kernels round, but its float32 accumulation order differs, so parameters agree to a few bfloat16 ulps of
# the update times lr (measured: <= 3.5e-5 after 6 steps).
CASES = [
    ("Adafactor", {}, 1e-10), ("Adafactor", {"lr": 0.05, "beta2_decay": -0.5, "d": 2.0}, 1e-10),
    ("Adafactor", {"weight_decay": 0.1, "eps": (1e-20, 1e-2)}, 1e-10), ("Adafactor", {"maximize": True}, 1e-10),
    ("Muon", {}, 1e-4), ("Muon", {"lr": 0.01, "nesterov": False, "weight_decay": 0.0}, 1e-4),
    ("Muon", {"adjust_lr_fn": "match_rms_adamw", "momentum": 0.5}, 1e-4),
]


def _shapes(name: str) -> list:
    return [(4, 3), (3, 5)] if name == "Muon" else [(4, 3), (2, 3, 2), (3,)]


@pytest.mark.parametrize("name,options,tol", CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_steps_match_torch(name: str, options: dict, tol: float) -> None:
    rng = np.random.default_rng(0)
    shapes = _shapes(name)
    init = [rng.standard_normal(s) for s in shapes]
    grads = [[rng.standard_normal(s) for s in shapes] for _ in range(6)]
    dtype = "float32" if name == "Muon" else "float64"
    eps_ = [ember.tensor(a, dtype=getattr(ember, dtype), requires_grad=True) for a in init]
    tps = [torch.tensor(a, dtype=getattr(torch, dtype), requires_grad=True) for a in init]
    groups = lambda ps: [{"params": ps[:1]}, {"params": ps[1:], "lr": 0.003}]  # noqa: E731
    eopt = getattr(ember.optim, name)(groups(eps_), **options)
    topt = getattr(torch.optim, name)(groups(tps), **options)
    for step_grads in grads:
        for e, t, g in zip(eps_, tps, step_grads):
            e.grad, t.grad = ember.tensor(g, dtype=e.dtype), torch.tensor(g, dtype=t.dtype)
        eopt.step()
        topt.step()
        for e, t in zip(eps_, tps):
            np.testing.assert_allclose(e.detach().numpy(), t.detach().numpy(), rtol=tol, atol=tol, err_msg=name)
    tstate, estate = topt.state_dict()["state"], eopt.state_dict()["state"]
    for key in tstate:
        assert set(estate[key]) == set(tstate[key]), (name, "state keys differ")


@pytest.mark.parametrize("name,bad", [("Adafactor", {"beta2_decay": 0.5}), ("Adafactor", {"d": 0.5}),
                                      ("Adafactor", {"eps": (-1.0, 1e-3)}), ("Muon", {"momentum": -1.0}),
                                      ("Muon", {"adjust_lr_fn": "nope"})])
def test_invalid_options_raise_like_torch(name: str, bad: dict) -> None:
    with pytest.raises(ValueError) as t_err:
        getattr(torch.optim, name)([torch.zeros(2, 2, requires_grad=True)], **bad)
    with pytest.raises(ValueError) as e_err:
        getattr(ember.optim, name)([ember.zeros(2, 2, requires_grad=True)], **bad)
    assert str(e_err.value) == str(t_err.value)


def test_muon_refuses_non_matrices() -> None:
    with pytest.raises(ValueError, match="Muon only supports 2D parameters"):
        ember.optim.Muon([ember.zeros(3, requires_grad=True)])


def test_swap_in_params_and_state_like_torch() -> None:
    results = {}
    for lib in (torch, ember):
        w = lib.zeros(3, requires_grad=True)
        opt = lib.optim.Adam([w], lr=0.1)
        w.grad = lib.ones(3)
        opt.step()
        osd = opt.state_dict()
        other = lib.full((3,), 2.0)
        other.grad = lib.full((3,), -1.0)
        with lib.optim.swap_in_optimizer_params_and_state(opt, {"w": other}, osd):
            opt.step()
            inside = opt.param_groups[0]["params"][0] is other
        results[lib.__name__] = (w.detach().numpy().copy(), other.numpy().copy(),
                                 float(osd["state"][0]["step"]), inside, opt.param_groups[0]["params"][0] is w)
    (tw, to, ts, ti, tr), (ew, eo, es, ei, er) = results["torch"], results["ember"]
    np.testing.assert_allclose(ew, tw)
    np.testing.assert_allclose(eo, to, rtol=1e-6)
    assert (es, ei, er) == (ts, ti, tr) == (2.0, True, True)
    with pytest.raises(RuntimeError, match="requires initialized optimizer state"):
        fresh = ember.optim.SGD([ember.zeros(1, requires_grad=True)], lr=0.1)
        with ember.optim.swap_in_optimizer_params_and_state(fresh, {}, fresh.state_dict()):
            pass
