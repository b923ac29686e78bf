"""ember.autograd.functional against torch.autograd.functional: the same signatures, values (including
vectorize=True and forward-mode, which batch through ember.func.vmap), strict mode and argument errors."""
from __future__ import annotations

import inspect

import numpy as np
import pytest

import ember
import ember.autograd.functional as EAF

torch = pytest.importorskip("torch")
TAF = torch.autograd.functional
NAMES = ["vjp", "jvp", "jacobian", "hessian", "hvp", "vhp"]


def lib_inputs(lib, arrays):
    return tuple(lib.tensor(a) for a in arrays)


def same(mine, theirs):
    if isinstance(mine, (tuple, list)):
        assert isinstance(theirs, (tuple, list)) and len(mine) == len(theirs)
        for m, t in zip(mine, theirs):
            same(m, t)
        return
    np.testing.assert_allclose(mine.detach().numpy(), theirs.detach().numpy(), rtol=1e-7, atol=1e-10)
    assert tuple(mine.shape) == tuple(theirs.shape)


@pytest.mark.parametrize("name", NAMES)
def test_signatures_match_torch(name):
    mine = inspect.signature(getattr(EAF, name))
    theirs = inspect.signature(getattr(TAF, name))
    assert [(p.name, p.default, p.kind) for p in mine.parameters.values()] == \
        [(p.name, p.default, p.kind) for p in theirs.parameters.values()]


def two_in_two_out(lib):
    return lambda a, b: ((a * b).sin(), (a ** 2).sum() * b)


def scalar(lib):
    return lambda a, b: ((a * b).exp().sum() + (a ** 3).sum() * b.sum())


@pytest.mark.parametrize("kwargs", [{}, {"vectorize": True}, {"vectorize": True, "strategy": "forward-mode"},
                                    {"create_graph": True}])
def test_jacobian_and_hessian_values(rng, kwargs):
    arrays = [rng.standard_normal(3), rng.standard_normal(3)]
    same(EAF.jacobian(two_in_two_out(ember), lib_inputs(ember, arrays), **kwargs),
         TAF.jacobian(two_in_two_out(torch), lib_inputs(torch, arrays), **kwargs))
    same(EAF.jacobian(lambda a: a.exp() * 2, ember.tensor(arrays[0]), **kwargs),
         TAF.jacobian(lambda a: a.exp() * 2, torch.tensor(arrays[0]), **kwargs))
    hkw = {("outer_jacobian_strategy" if k == "strategy" else k): v for k, v in kwargs.items()}
    same(EAF.hessian(scalar(ember), lib_inputs(ember, arrays), **hkw),
         TAF.hessian(scalar(torch), lib_inputs(torch, arrays), **hkw))


def test_products_values(rng):
    arrays = [rng.standard_normal(3), rng.standard_normal(3)]
    vs = [rng.standard_normal(3), rng.standard_normal(3)]
    for name, fn in (("vjp", two_in_two_out), ("jvp", two_in_two_out), ("hvp", scalar), ("vhp", scalar)):
        v_e = lib_inputs(ember, vs if name != "vjp" else vs)
        v_t = lib_inputs(torch, vs)
        same(getattr(EAF, name)(fn(ember), lib_inputs(ember, arrays), v_e),
             getattr(TAF, name)(fn(torch), lib_inputs(torch, arrays), v_t))


def _error(fn):
    with pytest.raises(Exception) as info:
        fn()
    return type(info.value), str(info.value)


@pytest.mark.parametrize("case", ["strategy_no_vectorize", "bad_strategy", "strict_jacobian", "strict_jvp",
                                  "strict_vjp", "bad_input_type", "v_length", "v_size", "hessian_not_scalar",
                                  "vhp_tuple_output", "hvp_not_scalar"])
def test_errors_match_torch(case):
    def run(lib, F):
        x = lib.ones(3, dtype=lib.float64)
        if case == "strategy_no_vectorize":
            return F.jacobian(lambda a: a, x, strategy="forward-mode")
        if case == "bad_strategy":
            return F.jacobian(lambda a: a, x, vectorize=True, strategy="sideways")
        if case == "strict_jacobian":
            return F.jacobian(lambda a: lib.ones(2), x, strict=True)
        if case == "strict_jvp":
            return F.jvp(lambda a: a.detach() * 2, x, x, strict=True)
        if case == "strict_vjp":
            return F.vjp(lambda a: a.detach() * 2, x, x, strict=True)
        if case == "bad_input_type":
            return F.jacobian(lambda a: a, (x, 3))
        if case == "v_length":
            return F.vjp(lambda a, b: a * b, (x, x), (x, x))
        if case == "v_size":
            return F.jvp(lambda a: a * 2, x, lib.ones(2, dtype=lib.float64))
        if case == "hessian_not_scalar":
            return F.hessian(lambda a: a * 2, x)
        if case == "vhp_tuple_output":
            return F.vhp(lambda a: (a.sum(), a.sum()), x, x)
        if case == "hvp_not_scalar":
            return F.hvp(lambda a: a * 2, x, x)
        raise AssertionError(case)

    mine, theirs = _error(lambda: run(ember, EAF)), _error(lambda: run(torch, TAF))
    assert mine[0] is theirs[0], (mine, theirs)
    assert mine[1] == theirs[1].replace("torch.Tensor", "ember.tensor.Tensor").replace("torch.Size", "ember.Size") \
        .replace("is" + "only", "is only")  # PyTorch's message lacks that space


def test_non_strict_independent_outputs_give_zeros(rng):
    x = rng.standard_normal(3)
    same(EAF.jvp(lambda a: a.detach() * 2, ember.tensor(x), ember.tensor(x)),
         TAF.jvp(lambda a: a.detach() * 2, torch.tensor(x), torch.tensor(x)))
    same(EAF.jacobian(lambda a: ember.ones(2, dtype=a.dtype), ember.tensor(x)),
         TAF.jacobian(lambda a: torch.ones(2, dtype=a.dtype), torch.tensor(x)))
    same(EAF.hessian(lambda a: (a * 2).sum(), ember.tensor(x)), TAF.hessian(lambda a: (a * 2).sum(), torch.tensor(x)))
