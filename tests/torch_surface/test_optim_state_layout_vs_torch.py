"""Optimizer and scheduler ``state_dict`` layouts as torch 2.13's after a step: the same keys in the same order,
the same value types and tensor shapes/dtypes, the same ``repr`` (what ``print(optimizer)`` and checkpoints show),
and the same learning rates along four scheduler steps. LBFGS is left out: its state keeps Python floats where
torch keeps 0-d tensors (docs/pytorch-compat.md, api21)."""
import warnings

import pytest

import ember

torch = pytest.importorskip("torch")


def _layout(obj):
    if isinstance(obj, dict):
        return [(str(k), _layout(v)) for k, v in obj.items()]
    if isinstance(obj, (list, tuple)):
        return type(obj).__name__, [_layout(v) for v in obj]
    if hasattr(obj, "shape") and hasattr(obj, "dtype"):
        return "tensor", tuple(obj.shape), str(obj.dtype).split(".")[-1]
    return "callable" if callable(obj) else repr(obj)


_OPTIMIZERS = {"SGD": dict(lr=0.1, momentum=0.9, nesterov=True), "Adam": dict(amsgrad=True), "AdamW": {},
               "Adagrad": {}, "Adadelta": {}, "Adamax": {}, "ASGD": {}, "NAdam": {}, "RAdam": {}, "RMSprop": {},
               "Rprop": {}, "SparseAdam": {}, "Adafactor": {}, "Muon": {}}


@pytest.mark.parametrize("name", sorted(_OPTIMIZERS))
def test_optimizer_state_dict_layout_and_repr_as_torch(name: str) -> None:
    seen = []
    for L in (torch, ember):
        p = L.nn.Parameter(L.ones(3, 2))
        opt = getattr(L.optim, name)([p], **_OPTIMIZERS[name])
        if name != "SparseAdam":  # (its step needs sparse gradients)
            (p * p).sum().backward()
            opt.step()
        seen.append((_layout(opt.state_dict()), repr(opt)))
    assert seen[1] == seen[0]


_SCHEDULERS = {"StepLR": dict(step_size=2), "MultiStepLR": dict(milestones=[1, 2]), "ConstantLR": {},
               "LinearLR": {}, "ExponentialLR": dict(gamma=0.9), "PolynomialLR": {},
               "CosineAnnealingLR": dict(T_max=3), "CosineAnnealingWarmRestarts": dict(T_0=2),
               "CyclicLR": dict(base_lr=0.01, max_lr=0.1), "OneCycleLR": dict(max_lr=0.1, total_steps=10),
               "ReduceLROnPlateau": {}}


@pytest.mark.parametrize("name", sorted(_SCHEDULERS))
def test_scheduler_state_dict_layout_and_rates_as_torch(name: str) -> None:
    seen = []
    for L in (torch, ember):
        opt = L.optim.SGD([L.nn.Parameter(L.ones(2))], lr=0.1, momentum=0.9)
        sched = getattr(L.optim.lr_scheduler, name)(opt, **_SCHEDULERS[name])
        rates = []
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for _ in range(4):
                opt.step()
                sched.step(1.0) if name == "ReduceLROnPlateau" else sched.step()
                rates.append(round(opt.param_groups[0]["lr"], 12))
        seen.append((_layout(sched.state_dict()), rates, sorted(opt.param_groups[0])))
    assert seen[1] == seen[0]


def test_lbfgs_step_gives_no_float_warning_as_torch() -> None:
    # torch's step runs under no_grad, so its float(loss) does not warn about requires_grad
    for L in (torch, ember):
        p = L.nn.Parameter(L.tensor([1.0, -2.0]))
        opt = L.optim.LBFGS([p], max_iter=4)

        def closure():
            opt.zero_grad()
            loss = ((p - 0.3) ** 2).sum()
            loss.backward()
            return loss

        with warnings.catch_warnings():
            warnings.simplefilter("error")
            opt.step(closure)
        assert abs(p.detach().numpy() - 0.3).max() < 1e-5
