"""``reduction='elementwise_mean'`` (PyTorch 0.4's name for 'mean') is still read as 'mean', with torch's warning.

vinhkhuc's PyTorch-Mini-Tutorials build ``torch.nn.CrossEntropyLoss(reduction='elementwise_mean')``; torch 2.13
runs them, ember refused the name.
"""
import warnings

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")

FUNCTIONS = ["mse_loss", "l1_loss", "smooth_l1_loss", "binary_cross_entropy_with_logits", "soft_margin_loss",
             "cross_entropy", "nll_loss", "kl_div", "multi_margin_loss"]
REFUSED = ["multilabel_soft_margin_loss", "poisson_nll_loss", "gaussian_nll_loss"]  # torch's Python-level checks
MODULES = ["MSELoss", "L1Loss", "BCEWithLogitsLoss", "CrossEntropyLoss", "NLLLoss"]
CLASS_TARGET = {"cross_entropy", "nll_loss", "multi_margin_loss", "CrossEntropyLoss", "NLLLoss"}


def _inputs(lib, name):
    rng = np.random.default_rng(0)
    x = lib.tensor(rng.standard_normal((4, 3)).astype(np.float32))
    if name in CLASS_TARGET:
        return x, lib.tensor([0, 2, 1, 2])
    return x, lib.tensor(rng.random((4, 3)).astype(np.float32))


@pytest.mark.parametrize("name", FUNCTIONS)
def test_functional_reads_it_as_mean_and_warns(name):
    values = []
    for lib in (torch, ember):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            values.append(getattr(lib.nn.functional, name)(*_inputs(lib, name), reduction="elementwise_mean").item())
        assert any("elementwise_mean" in str(w.message) for w in caught)
    mean = getattr(ember.nn.functional, name)(*_inputs(ember, name), reduction="mean").item()
    assert values[1] == pytest.approx(values[0], rel=1e-6) and values[1] == mean


@pytest.mark.parametrize("name", MODULES)
def test_module_keeps_the_name_and_computes_the_mean(name):
    results = []
    for lib in (torch, ember):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            module = getattr(lib.nn, name)(reduction="elementwise_mean")
            results.append((module.reduction, module(*_inputs(lib, name)).item()))
    assert results[1][0] == results[0][0] == "elementwise_mean"
    assert results[1][1] == pytest.approx(results[0][1], rel=1e-6)


@pytest.mark.parametrize("name", REFUSED)
def test_losses_written_in_python_refuse_it_as_torch(name):
    for lib in (torch, ember):
        args = _inputs(lib, name) + ((lib.ones(4, 3),) if name == "gaussian_nll_loss" else ())
        with pytest.raises(ValueError):
            getattr(lib.nn.functional, name)(*args, reduction="elementwise_mean")


def test_other_names_are_still_refused():
    with pytest.raises(ValueError):
        ember.nn.MSELoss(reduction="average")
    with pytest.raises(ValueError):
        ember.nn.functional.mse_loss(ember.ones(2), ember.zeros(2), reduction="average")
