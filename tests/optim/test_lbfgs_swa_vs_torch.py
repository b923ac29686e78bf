"""LBFGS and swa_utils (AveragedModel, SWALR, update_bn, EMA/SWA averaging functions) against torch.optim."""
from __future__ import annotations

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")


def _rosenbrock(lib, w):
    return (1 - w[0]) ** 2 + 100 * (w[1] - w[0] ** 2) ** 2 + (w[2:] ** 2).sum()


def _quadratic(lib, w):
    scales = lib.tensor([1.0, 3.0, 0.5, 2.0], dtype=w.dtype)
    return (scales * (w - 0.7) ** 2).sum() + 0.1 * (w[0] * w[1])


# Rosenbrock is ill-conditioned near its minimum: rounding-level differences (BLAS dot order) grow there,
# so it is compared at a looser tolerance than the well-conditioned quadratic.
@pytest.mark.parametrize("problem,rtol", [(_quadratic, 1e-10), (_rosenbrock, 1e-4)])
@pytest.mark.parametrize("options", [{}, {"lr": 0.5, "history_size": 3}, {"max_iter": 5, "tolerance_change": 1e-5},
                                     {"lr": 0.1, "max_iter": 50, "max_eval": 30}])
def test_lbfgs_matches_torch_step_by_step(options: dict, problem, rtol: float) -> None:
    w0 = np.array([-1.2, 1.0, 0.5, -0.3])
    results = []
    for lib in (torch, ember):
        w = lib.tensor(w0.copy(), requires_grad=True)
        opt = lib.optim.LBFGS([w], **options)
        history = []

        def closure():
            opt.zero_grad()
            loss = problem(lib, w)
            loss.backward()
            return loss

        for _ in range(4):
            history.append(float(opt.step(closure)))
            history.extend(w.detach().numpy().tolist())
        results.append((np.array(history), opt.state[w]["func_evals"], opt.state[w]["n_iter"]))
    np.testing.assert_allclose(results[1][0], results[0][0], rtol=rtol, atol=1e-9 if rtol < 1e-6 else 1e-5)
    assert results[1][1:] == results[0][1:]


def test_lbfgs_refuses_what_it_does_not_do() -> None:
    w = ember.zeros(2, requires_grad=True)
    with pytest.raises(NotImplementedError, match="strong_wolfe"):
        ember.optim.LBFGS([w], line_search_fn="strong_wolfe")
    with pytest.raises(RuntimeError, match="closure"):
        ember.optim.LBFGS([w]).step()


def _pair_models():
    em = ember.nn.Sequential(ember.nn.Linear(3, 4), ember.nn.BatchNorm1d(4), ember.nn.Linear(4, 2)).double()
    tm = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.BatchNorm1d(4), torch.nn.Linear(4, 2)).double()
    tm.load_state_dict({k: torch.tensor(v.numpy()) for k, v in em.state_dict().items()})
    return em, tm


@pytest.mark.parametrize("kind", ["swa", "ema", "multi_ema", "multi_swa", "buffers"])
def test_averaged_model_matches_torch(kind: str) -> None:
    em, tm = _pair_models()
    su_e, su_t = ember.optim.swa_utils, torch.optim.swa_utils
    kwargs = lambda su: {"swa": {}, "ema": {"avg_fn": su.get_ema_avg_fn(0.9)},  # noqa: E731
                         "multi_ema": {"multi_avg_fn": su.get_ema_multi_avg_fn(0.8)},
                         "multi_swa": {"multi_avg_fn": su.get_swa_multi_avg_fn()},
                         "buffers": {"use_buffers": True}}[kind]
    ae, at = su_e.AveragedModel(em, **kwargs(su_e)), su_t.AveragedModel(tm, **kwargs(su_t))
    rng = np.random.default_rng(0)
    for _ in range(4):
        x = rng.standard_normal((5, 3))
        em.train(), tm.train()
        em(ember.tensor(x)), tm(torch.tensor(x))  # moves BN buffers
        with ember.no_grad(), torch.no_grad():
            for pe, pt in zip(em.parameters(), tm.parameters()):
                delta = rng.standard_normal(tuple(pt.shape))
                pe.add_(ember.tensor(delta))
                pt.add_(torch.tensor(delta))
        ae.update_parameters(em)
        at.update_parameters(tm)
    ours, theirs = ae.state_dict(), at.state_dict()
    assert set(ours) == set(theirs)
    for key in theirs:
        np.testing.assert_allclose(ours[key].numpy(), theirs[key].numpy(), rtol=1e-10, atol=1e-12, err_msg=key)


def test_update_bn_matches_torch() -> None:
    em, tm = _pair_models()
    data = [np.random.default_rng(k).standard_normal((6, 3)) for k in range(3)]
    ember.optim.swa_utils.update_bn([ember.tensor(x) for x in data], em)
    torch.optim.swa_utils.update_bn([torch.tensor(x) for x in data], tm)
    for key, value in tm.state_dict().items():
        np.testing.assert_allclose(em.state_dict()[key].numpy(), value.numpy(), rtol=1e-10, atol=1e-12, err_msg=key)
    assert em[1].momentum == tm[1].momentum == 0.1


@pytest.mark.parametrize("options", [{"swa_lr": 0.05}, {"swa_lr": 0.01, "anneal_epochs": 3, "anneal_strategy": "linear"},
                                     {"swa_lr": [0.02, 0.2], "anneal_epochs": 0}])
def test_swalr_matches_torch(options: dict) -> None:
    lrs = []
    for lib in (torch, ember):
        a, b = lib.zeros(2, requires_grad=True), lib.zeros(2, requires_grad=True)
        opt = lib.optim.SGD([{"params": [a]}, {"params": [b], "lr": 0.3}], lr=0.1)
        sched = lib.optim.swa_utils.SWALR(opt, **options)
        seen = []
        for _ in range(8):
            opt.step()
            sched.step()
            seen.append(sched.get_last_lr())
        lrs.append(np.array(seen, dtype=float))
    np.testing.assert_allclose(lrs[1], lrs[0], rtol=1e-12)


def test_swalr_refuses_bad_options_like_torch() -> None:
    for lib in (torch, ember):
        opt = lib.optim.SGD([lib.zeros(1, requires_grad=True)], lr=0.1)
        with pytest.raises(ValueError):
            lib.optim.swa_utils.SWALR(opt, swa_lr=0.1, anneal_strategy="exp")
