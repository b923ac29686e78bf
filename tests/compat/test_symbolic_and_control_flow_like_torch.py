"""torch.sym_* helpers, SymInt/SymFloat/SymBool, torch.cond and torch.while_loop (eager, inside ember.compile
and in an fx trace), torch.version, get_device_module, the deterministic debug mode: as torch 2.13."""
import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")


@pytest.fixture(autouse=True)
def _keep_torch_distribution_validation():
    """torch.cond / torch.while_loop run dynamo, which switches off torch.distributions' argument validation
    for the whole process; later tests compare ember's validation errors with torch's, so restore it."""
    before = torch.distributions.Distribution._validate_args
    yield
    torch.distributions.Distribution.set_default_validate_args(before)


@pytest.mark.parametrize("call", [
    lambda t: t.sym_int(3.7), lambda t: t.sym_int(-3.7), lambda t: t.sym_float(3), lambda t: t.sym_max(2, 3.0),
    lambda t: t.sym_max(4, 3), lambda t: t.sym_min(2, 3.5), lambda t: t.sym_not(True), lambda t: t.sym_ite(False, 1, 2),
    lambda t: t.sym_sqrt(4), lambda t: t.sym_sum([1, 2, 3]), lambda t: isinstance(3, t.SymInt),
    lambda t: isinstance(3.0, (float, t.SymFloat)),
])
def test_sym_helpers_like_torch(call):
    got, want = call(ember), call(torch)
    assert got == want and type(got) is type(want)


def test_sym_constrain_range_like_torch():
    for lib in (ember, torch):
        lib.sym_constrain_range(2, min=0, max=3)
        with pytest.raises(RuntimeError, match="Invalid value range"):
            lib.sym_constrain_range(5, min=0, max=3)


@pytest.mark.parametrize("pred", [True, False, "t", "f", "t1", "i1"])
def test_cond_eager_like_torch(pred):
    def make(lib):
        return {"t": lib.tensor(True), "f": lib.tensor(False), "t1": lib.tensor([True]), "i1": lib.tensor(1)}.get(
            pred, pred)
    got = ember.cond(make(ember), lambda x: x + 1, lambda x: x - 1, (ember.arange(3.0),))
    want = torch.cond(make(torch), lambda x: x + 1, lambda x: x - 1, (torch.arange(3.0),))
    assert got.tolist() == want.tolist()


def test_cond_refuses_a_many_element_predicate():
    for lib in (ember, torch):
        with pytest.raises(RuntimeError, match="single-element tensor"):
            lib.cond(lib.tensor([True, False]), lambda x: x, lambda x: x, (lib.ones(1),))


def test_cond_inside_compile_keeps_both_branches():
    f = ember.compile(lambda x: ember.cond(x.sum() > 3, lambda t: t * 2, lambda t: t - 1, (x,)))
    x = ember.arange(4.0)
    assert f(x).tolist() == [0.0, 2.0, 4.0, 6.0]
    assert f(x * 0).tolist() == [-1.0, -1.0, -1.0, -1.0]  # the same trace, the other branch


def test_cond_in_an_fx_trace():
    class M(ember.nn.Module):
        def forward(self, x):
            return ember.cond(x.sum() > 3, lambda t: t * 2, lambda t: t - 1, (x,))

    gm = ember.fx.symbolic_trace(M())
    assert gm(ember.arange(4.0)).tolist() == [0.0, 2.0, 4.0, 6.0]
    assert gm(ember.zeros(2)).tolist() == [-1.0, -1.0]


def test_while_loop_like_torch():
    got = ember.while_loop(lambda i, s: i < 5, lambda i, s: (i + 1, s + i), (ember.tensor(0), ember.tensor(0.0)))
    want = torch.while_loop(lambda i, s: i < 5, lambda i, s: (i + 1, s + i), (torch.tensor(0), torch.tensor(0.0)))
    assert [g.item() for g in got] == [w.item() for w in want]


def test_while_loop_on_traced_values_is_refused():
    f = ember.compile(lambda x: ember.while_loop(lambda t: t.sum() < 10, lambda t: (t * 2,), (x,)))
    with pytest.raises(RuntimeError, match="trip count"):
        for _ in range(3):  # past ember.compile's eager warm-up calls, to the trace
            f(ember.ones(2))


def test_version_module_like_torch_cpu():
    assert ember.version.cuda is None and torch.version.cuda is None
    assert ember.version.__version__ == ember.__version__
    assert set(torch.version.__all__) <= set(dir(ember.version))


def test_get_device_module():
    assert ember.get_device_module("cpu") is ember.cpu and ember.get_device_module("cuda") is ember.cuda
    assert ember.get_device_module(ember.device("cpu")).is_available()


def test_deterministic_debug_mode_like_torch():
    try:
        for lib in (ember, torch):
            lib.set_deterministic_debug_mode("warn")
            assert lib.get_deterministic_debug_mode() == 1 and lib.is_deterministic_algorithms_warn_only_enabled()
            lib.set_deterministic_debug_mode(2)
            assert lib.get_deterministic_debug_mode() == 2 and lib.are_deterministic_algorithms_enabled()
    finally:
        ember.set_deterministic_debug_mode(0)
        torch.set_deterministic_debug_mode(0)
    assert ember.get_deterministic_debug_mode() == 0


def test_torch_functional_module_names():
    for name in torch.functional.__all__:
        assert hasattr(ember.functional, name), name
    np.testing.assert_allclose(ember.functional.einsum("ij->j", ember.ones(2, 3)).numpy(), [2.0, 2.0, 2.0])


def test_sym_ite_wants_a_bool_like_torch():
    for lib in (ember, torch):
        with pytest.raises(AssertionError, match="expected SymBool or bool"):
            lib.sym_ite(0, 1, 2)
