"""Every torch.nn class and torch.nn.functional function that ember has accepts all of torch 2.13's parameter
names (a new keyword in torch, such as GroupNorm's ``bias`` or l1_loss's ``weight``, shows up here), and the
new keywords behave as torch's."""
import inspect
import warnings

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")


def _missing(torch_fn, ember_fn) -> list:
    try:
        theirs = inspect.signature(torch_fn).parameters
        ours = inspect.signature(ember_fn).parameters
    except (TypeError, ValueError):
        return []
    if any(p.kind == p.VAR_KEYWORD for p in ours.values()):
        return []
    return [name for name in theirs if name not in ours and name not in ("self", "args", "kwargs")]


def test_nn_class_constructors_take_torchs_parameters() -> None:
    gaps = {}
    for name in dir(torch.nn):
        theirs, ours = getattr(torch.nn, name), getattr(ember.nn, name, None)
        if isinstance(theirs, type) and isinstance(ours, type):
            missing = _missing(theirs.__init__, ours.__init__)
            if missing:
                gaps[name] = missing
    assert gaps == {}


def test_functional_functions_take_torchs_parameters() -> None:
    gaps = {}
    for name in dir(torch.nn.functional):
        theirs, ours = getattr(torch.nn.functional, name), getattr(ember.nn.functional, name, None)
        if not name.startswith("_") and callable(theirs) and callable(ours):
            missing = _missing(theirs, ours)
            if missing:
                gaps[name] = missing
    assert gaps == {}


@pytest.mark.parametrize("make", [
    lambda nn: nn.GroupNorm(2, 4, bias=False), lambda nn: nn.InstanceNorm2d(4, affine=True, bias=False),
    lambda nn: nn.SyncBatchNorm(4, bias=False), lambda nn: nn.GroupNorm(2, 4),
])
def test_norm_bias_keyword_equals_torch(make) -> None:
    t, e = make(torch.nn), make(ember.nn)
    assert sorted(t.state_dict()) == sorted(e.state_dict())
    assert repr(t) == repr(e)
    x = np.random.default_rng(0).standard_normal((2, 4, 3, 3)).astype(np.float32)
    e.load_state_dict({k: ember.tensor(v.numpy()) for k, v in t.state_dict().items()})
    if t.weight is not None:
        with torch.no_grad():
            t.weight.uniform_(0.5, 1.5)
        with ember.no_grad():
            e.weight.copy_(ember.tensor(t.weight.detach().numpy()))
    np.testing.assert_allclose(e(ember.tensor(x)).detach().numpy(), t(torch.tensor(x)).detach().numpy(), atol=1e-5)


def test_l1_loss_weight_hardtanh_legacy_names_and_cell_base() -> None:
    rng = np.random.default_rng(1)
    a, b, w = rng.standard_normal((3, 4)), rng.standard_normal((3, 4)), rng.random((3, 4))
    for reduction in ("mean", "sum", "none"):
        np.testing.assert_allclose(
            ember.nn.functional.l1_loss(ember.tensor(a), ember.tensor(b), reduction=reduction,
                                        weight=ember.tensor(w)).numpy(),
            torch.nn.functional.l1_loss(torch.tensor(a), torch.tensor(b), reduction=reduction,
                                        weight=torch.tensor(w)).numpy(), rtol=1e-12)
    with pytest.warns(FutureWarning, match="min_value"):
        assert repr(ember.nn.Hardtanh(min_value=-2.0)) == "Hardtanh(min_val=-2.0, max_val=1.0)"

    class Cell(ember.nn.RNNCellBase):
        def __init__(self):
            super().__init__(3, 4, True, 2)

    assert tuple(Cell().weight_ih.shape) == (8, 3) and sorted(Cell().state_dict()) == [
        "bias_hh", "bias_ih", "weight_hh", "weight_ih"]


def test_kl_div_loss_module_accepts_batchmean() -> None:
    rng = np.random.default_rng(2)
    a, b = rng.standard_normal((3, 4)), rng.standard_normal((3, 4))
    for log_target in (False, True):
        target = (lambda L, v: L.tensor(v).log_softmax(1)) if log_target else (lambda L, v: L.tensor(v).softmax(1))
        t = torch.nn.KLDivLoss(reduction="batchmean", log_target=log_target)(torch.tensor(a).log_softmax(1),
                                                                             target(torch, b))
        e = ember.nn.KLDivLoss(reduction="batchmean", log_target=log_target)(ember.tensor(a).log_softmax(1),
                                                                             target(ember, b))
        np.testing.assert_allclose(e.item(), t.item(), rtol=1e-12)
    with pytest.raises(ValueError, match="not a valid value for reduction"):
        ember.nn.MSELoss(reduction="batchmean")


# Parameters ember leaves out on purpose: torch's private constructor flag of the legacy storage classes, and
# autograd.backward's pre-0.4 spelling of grad_tensors.
_LEFT_OUT = {"_internal", "grad_variables"}


@pytest.mark.parametrize("path", ["optim", "optim.lr_scheduler", "utils.data", "", "nn.init", "nn.utils",
                                  "distributions", "linalg", "fft", "special", "func", "autograd"])
def test_other_namespaces_take_torchs_parameters(path: str) -> None:
    def resolve(root, dotted):
        for part in filter(None, dotted.split(".")):
            root = getattr(root, part)
        return root

    theirs_ns, ours_ns = resolve(torch, path), resolve(ember, path)
    gaps = {}
    for name in dir(theirs_ns):
        theirs, ours = getattr(theirs_ns, name, None), getattr(ours_ns, name, None)
        if name.startswith("_") or not callable(theirs) or not callable(ours):
            continue
        both_classes = isinstance(theirs, type) and isinstance(ours, type)
        missing = _missing(theirs.__init__, ours.__init__) if both_classes else _missing(theirs, ours)
        missing = [m for m in missing if m not in _LEFT_OUT]
        if missing:
            gaps[name] = missing
    assert gaps == {}
