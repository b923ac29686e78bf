"""ember.optim.lr_scheduler against torch.optim.lr_scheduler: the same lr (and momentum) sequence."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

import ember
from ember import optim
from ember.optim import lr_scheduler as sched

torch = pytest.importorskip("torch")
tsched = torch.optim.lr_scheduler

OPTIMIZERS = {
    "SGD": (optim.SGD, torch.optim.SGD, dict(lr=0.1, momentum=0.9)),
    "Adam": (optim.Adam, torch.optim.Adam, dict(lr=0.01)),
    "AdamW": (optim.AdamW, torch.optim.AdamW, dict(lr=0.01)),
    "RMSprop": (optim.RMSprop, torch.optim.RMSprop, dict(lr=0.01, momentum=0.5)),
}


def _optimizers(kind="SGD", groups=2):
    ember_cls, torch_cls, kwargs = OPTIMIZERS[kind]
    mine = [ember.zeros(2, requires_grad=True) for _ in range(groups)]
    theirs = [torch.zeros(2, requires_grad=True) for _ in range(groups)]
    lrs = [kwargs["lr"] * (i + 1) for i in range(groups)]
    opt = ember_cls([{"params": [p], "lr": lr} for p, lr in zip(mine, lrs)], **kwargs)
    topt = torch_cls([{"params": [p], "lr": lr} for p, lr in zip(theirs, lrs)], **kwargs)
    return opt, topt


def _snapshot(opt):
    """Everything a scheduler may touch in the param groups."""
    return [(g["lr"], g.get("momentum"), g.get("betas")) for g in opt.param_groups]


def _run(opt, scheduler, steps, metrics=None):
    seen = [(_snapshot(opt), list(scheduler.get_last_lr()))]
    for i in range(steps):
        opt.step()
        if metrics is None:
            scheduler.step()
        else:
            scheduler.step(metrics[i])
        seen.append((_snapshot(opt), list(scheduler.get_last_lr())))
    return seen


CASES = {
    "StepLR": lambda m, o: m.StepLR(o, step_size=3, gamma=0.5),
    "MultiStepLR": lambda m, o: m.MultiStepLR(o, milestones=[2, 5, 5, 9], gamma=0.3),
    "ExponentialLR": lambda m, o: m.ExponentialLR(o, gamma=0.9),
    "CosineAnnealingLR": lambda m, o: m.CosineAnnealingLR(o, T_max=7, eta_min=0.001),
    "LambdaLR": lambda m, o: m.LambdaLR(o, lr_lambda=lambda e: 1.0 / (1 + e)),
    "LambdaLR-per-group": lambda m, o: m.LambdaLR(o, lr_lambda=[lambda e: 0.9 ** e, lambda e: 1 + e]),
    "MultiplicativeLR": lambda m, o: m.MultiplicativeLR(o, lr_lambda=lambda e: 0.95),
    "LinearLR": lambda m, o: m.LinearLR(o, start_factor=0.25, end_factor=1.0, total_iters=6),
    "LinearLR-decay": lambda m, o: m.LinearLR(o, start_factor=1.0, end_factor=0.1, total_iters=8),
    "ConstantLR": lambda m, o: m.ConstantLR(o, factor=0.5, total_iters=4),
    "PolynomialLR": lambda m, o: m.PolynomialLR(o, total_iters=8, power=2.0),
    "CosineAnnealingWarmRestarts": lambda m, o: m.CosineAnnealingWarmRestarts(o, T_0=4, T_mult=2, eta_min=0.01),
    "OneCycleLR-cos": lambda m, o: m.OneCycleLR(o, max_lr=[0.5, 1.0], total_steps=25),
    "OneCycleLR-linear": lambda m, o: m.OneCycleLR(o, max_lr=0.5, total_steps=25, anneal_strategy="linear",
                                                   pct_start=0.4, div_factor=10.0, final_div_factor=100.0),
    "OneCycleLR-three-phase": lambda m, o: m.OneCycleLR(o, max_lr=0.5, epochs=5, steps_per_epoch=5,
                                                        three_phase=True, base_momentum=0.8, max_momentum=0.9),
    "OneCycleLR-no-momentum": lambda m, o: m.OneCycleLR(o, max_lr=0.5, total_steps=25, cycle_momentum=False),
    "SequentialLR": lambda m, o: m.SequentialLR(o, [m.LinearLR(o, start_factor=0.1, total_iters=4),
                                                    m.CosineAnnealingLR(o, T_max=10)], milestones=[4]),
    "ChainedScheduler": lambda m, o: m.ChainedScheduler([m.ConstantLR(o, factor=0.5, total_iters=3),
                                                         m.ExponentialLR(o, gamma=0.9)]),
}
STEPS = 24


# Momentum cycling is covered with SGD (momentum) and Adam/AdamW (beta1); RMSprop runs the rest.
SEQUENCE_CASES = [(name, kind) for name in CASES for kind in OPTIMIZERS
                  if not (kind == "RMSprop" and name.startswith("OneCycleLR") and "no-momentum" not in name)]


@pytest.mark.parametrize("name, kind", SEQUENCE_CASES)
def test_sequence_matches_torch(name, kind):
    opt, topt = _optimizers(kind)
    mine = _run(opt, CASES[name](sched, opt), STEPS)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        theirs = _run(topt, CASES[name](tsched, topt), STEPS)
    assert mine == theirs


def test_one_cycle_needs_momentum():
    opt = optim.Adagrad([ember.zeros(1, requires_grad=True)], lr=0.1)
    with pytest.raises(ValueError, match="momentum or beta1"):
        sched.OneCycleLR(opt, max_lr=1.0, total_steps=10)
    scheduler = sched.OneCycleLR(opt, max_lr=1.0, total_steps=3, cycle_momentum=False)
    for _ in range(3):
        opt.step()
        scheduler.step()
    with pytest.raises(ValueError, match="Tried to step 4 times"):
        scheduler.step()


PLATEAU_CASES = [
    dict(mode="min", factor=0.5, patience=2),
    dict(mode="min", factor=0.1, patience=0, threshold=0.1, threshold_mode="abs", cooldown=2, min_lr=0.002),
    dict(mode="max", factor=0.3, patience=1, threshold=0.01, cooldown=1, min_lr=[0.0, 0.05]),
    dict(mode="max", factor=0.5, patience=3, threshold=0.5, threshold_mode="abs"),
]


@pytest.mark.parametrize("kwargs", PLATEAU_CASES)
def test_reduce_lr_on_plateau_matches_torch(kwargs):
    rng = np.random.default_rng(0)
    metrics = list(np.cumsum(rng.standard_normal(40)) * 0.3 + 5.0)
    opt, topt = _optimizers("SGD")
    mine = _run(opt, sched.ReduceLROnPlateau(opt, **kwargs), len(metrics), metrics)
    theirs = _run(topt, tsched.ReduceLROnPlateau(topt, **kwargs), len(metrics), metrics)
    assert mine == theirs
    assert mine[-1][0][0][0] < 0.1  # the schedule did reduce something


def test_reduce_lr_on_plateau_accepts_tensor_metric():
    opt, _ = _optimizers("SGD", groups=1)
    scheduler = sched.ReduceLROnPlateau(opt, patience=0)
    scheduler.step(ember.tensor(1.0))
    scheduler.step(ember.tensor(2.0))
    assert opt.param_groups[0]["lr"] == pytest.approx(0.01)


ROUND_TRIP = ["StepLR", "MultiStepLR", "CosineAnnealingLR", "LinearLR", "OneCycleLR-cos", "SequentialLR",
              "LambdaLR", "CosineAnnealingWarmRestarts", "ChainedScheduler"]


@pytest.mark.parametrize("name", ROUND_TRIP)
def test_state_dict_round_trip(name):
    """Save after 7 steps, rebuild optimizer + scheduler, load both, continue: same lrs as without a break."""
    opt, _ = _optimizers("Adam")
    scheduler = CASES[name](sched, opt)
    for _ in range(7):
        opt.step()
        scheduler.step()
    saved_opt, saved_sched = opt.state_dict(), scheduler.state_dict()
    uninterrupted = _run(opt, scheduler, 12)

    fresh, _ = _optimizers("Adam")
    resumed = CASES[name](sched, fresh)  # the scheduler first, then the optimizer state (torch's advice)
    resumed.load_state_dict(saved_sched)
    fresh.load_state_dict(saved_opt)
    assert _run(fresh, resumed, 12) == uninterrupted


def test_plateau_state_dict_round_trip():
    opt, _ = _optimizers("SGD")
    scheduler = sched.ReduceLROnPlateau(opt, patience=1, factor=0.5)
    for metric in [3.0, 2.0, 2.5, 2.6]:
        scheduler.step(metric)
    saved_opt, saved = opt.state_dict(), scheduler.state_dict()
    metrics = [2.7, 1.0, 1.5, 1.6, 1.7, 0.5]
    uninterrupted = _run(opt, scheduler, len(metrics), metrics)
    fresh, _ = _optimizers("SGD")
    resumed = sched.ReduceLROnPlateau(fresh, patience=1, factor=0.5)
    resumed.load_state_dict(saved)
    fresh.load_state_dict(saved_opt)
    assert _run(fresh, resumed, len(metrics), metrics) == uninterrupted


def test_warmup_cosine_equals_torch_sequential():
    opt, topt = _optimizers("AdamW")
    mine = _run(opt, sched.warmup_cosine(opt, warmup_steps=5, total_steps=30, eta_min=1e-4), 30)
    reference = tsched.SequentialLR(topt, [tsched.LinearLR(topt, start_factor=1e-3, end_factor=1.0, total_iters=5),
                                           tsched.CosineAnnealingLR(topt, T_max=25, eta_min=1e-4)], milestones=[5])
    assert mine == _run(topt, reference, 30)
    with pytest.raises(ValueError, match="warmup_steps"):
        sched.warmup_cosine(opt, warmup_steps=10, total_steps=10)


def test_warns_when_stepped_before_optimizer():
    opt, _ = _optimizers("SGD")
    scheduler = sched.StepLR(opt, step_size=2)
    with pytest.warns(UserWarning, match="before `optimizer.step\\(\\)`"):
        scheduler.step()
    opt2, _ = _optimizers("SGD")
    scheduler2 = sched.StepLR(opt2, step_size=2)
    opt2.step()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        scheduler2.step()


def test_scheduler_errors():
    opt, _ = _optimizers("SGD")
    with pytest.raises(TypeError, match="not an Optimizer"):
        sched.StepLR(object(), step_size=1)
    with pytest.raises(KeyError, match="initial_lr"):
        sched.StepLR(opt, step_size=1, last_epoch=3)
    with pytest.raises(ValueError, match="Expected 2 lr_lambdas"):
        sched.LambdaLR(opt, [lambda e: 1.0])
    with pytest.raises(ValueError, match="total_steps"):
        sched.OneCycleLR(opt, max_lr=1.0)
