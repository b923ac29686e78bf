"""A lazy module's parameters before the first forward, as torch's (d2l's lazy-init chapter prints one).

``torch.nn.parameter.UninitializedParameter`` / ``UninitializedBuffer`` / ``is_lazy`` are where programs look for
them (ember had the classes only under ``nn`` and ``is_lazy`` answered False for every tensor).
"""
import copy

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")


@pytest.mark.parametrize("L", [torch, ember], ids=["torch", "ember"])
def test_lazy_parameters_before_and_after_the_first_call(L):
    m = L.nn.LazyLinear(3)
    w = m.weight
    assert repr(w) == "<UninitializedParameter>" and str(w) == "<UninitializedParameter>"
    assert isinstance(w, L.nn.parameter.UninitializedParameter) and isinstance(w, L.nn.Parameter)
    assert L.nn.parameter.is_lazy(w) and not L.nn.parameter.is_lazy(L.nn.Parameter(L.ones(2)))
    assert not L.nn.parameter.is_lazy(L.ones(2))
    assert L.nn.UninitializedParameter is L.nn.parameter.UninitializedParameter
    assert L.nn.UninitializedBuffer is L.nn.parameter.UninitializedBuffer
    twin = copy.deepcopy(m)
    assert repr(twin.weight) == "<UninitializedParameter>" and twin.weight is not w
    m(L.ones(2, 4))
    assert m.weight is w and type(w) is L.nn.Parameter and tuple(w.shape) == (3, 4)
    assert not L.nn.parameter.is_lazy(w) and repr(w).startswith("Parameter containing:")
    twin(L.ones(2, 5))
    assert tuple(twin.weight.shape) == (3, 5)


def _load_into_fresh_lazy(L):
    L.manual_seed(0)
    make = lambda: L.nn.Sequential(L.nn.LazyLinear(4), L.nn.ReLU(), L.nn.LazyConv1d(2, 3), L.nn.Flatten())  # noqa
    x = L.linspace(-1, 1, 2 * 3 * 5).reshape(2, 3, 5)
    trained = make()
    y = trained(x)
    fresh = make()
    result = fresh.load_state_dict(trained.state_dict())
    loaded = (type(fresh[0]).__name__, tuple(fresh[0].weight.shape), tuple(fresh[2].weight.shape))
    z = fresh(x)
    assert (z == y).all()  # the loaded weights, not fresh ones
    return (str(result), loaded, type(fresh[0]).__name__, type(fresh[2]).__name__, fresh[0].in_features), y


def test_a_checkpoint_loads_into_a_fresh_lazy_model_like_torch():
    # d2l's read-write chapter: MLP of LazyLinear layers; clone.load_state_dict(torch.load(...)) before any forward
    (expected, y_torch), (got, y_ember) = _load_into_fresh_lazy(torch), _load_into_fresh_lazy(ember)
    assert got == expected
    np.testing.assert_allclose(y_ember.detach().numpy(), y_torch.detach().numpy(), rtol=1e-5, atol=1e-6)
