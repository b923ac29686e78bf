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


def _lazy_stack(L):
    return L.nn.Sequential(L.nn.LazyLinear(3), L.nn.LazyConv1d(2, 2), L.nn.LazyBatchNorm1d())


def test_lazy_modules_in_float64_draw_torchs_values_and_keep_norm_statistics():
    # after .double() the placeholders are float64: torch materializes and initializes in float64 (other draws
    # than float32's); ember built the float32 module and failed on float64 input
    states = []
    for L in (torch, ember):
        L.manual_seed(0)
        m = _lazy_stack(L).double()
        assert [k for k, _ in m.named_buffers()] == ["2.running_mean", "2.running_var", "2.num_batches_tracked"]
        m(L.tensor(np.linspace(-1, 1, 40).reshape(2, 4, 5)))
        states.append({k: v.detach().numpy() for k, v in m.state_dict().items()})
    assert list(states[0]) == list(states[1])
    for k in states[0]:
        assert states[1][k].dtype == states[0][k].dtype, k
        np.testing.assert_allclose(states[1][k], states[0][k], rtol=1e-12, atol=1e-15, err_msg=k)


def test_lazy_norm_copies_pickles_and_saved_models_still_materialize():
    import io
    import pickle

    m = ember.nn.Sequential(ember.nn.LazyLinear(3), ember.nn.LazyBatchNorm1d()).double()
    x = ember.ones(4, 5, dtype=ember.float64)
    for twin in (copy.deepcopy(m), pickle.loads(pickle.dumps(m))):
        assert repr(twin[1].running_mean) == "<UninitializedBuffer>" and twin[0].weight.dtype == ember.float64
        assert twin(x).dtype == ember.float64 and tuple(twin[1].running_mean.shape) == (3,)
    buf = io.BytesIO()
    ember.save(m, buf)
    buf.seek(0)
    loaded = ember.load(buf, weights_only=False)
    assert tuple(loaded(x).shape) == (4, 3) and tuple(loaded[1].running_var.shape) == (3,)
    with pytest.raises(RuntimeError, match="Can't access the shape of an uninitialized parameter"):
        m[0].weight.shape
