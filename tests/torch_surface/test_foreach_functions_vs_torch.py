"""``torch._foreach_*`` (multi-tensor functions) against torch 2.13: values, operand forms, returns, errors.

timm's ModelEmaV3 calls ``torch._foreach_lerp_`` / ``_foreach_mul_`` / ``_foreach_add_`` in every training step
and its optimizers call ``_foreach_norm`` and friends; ember had none of them.
"""
from __future__ import annotations

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")

SHAPES = [(3,), (2, 4), ()]


def _pair(seed: int, positive: bool = False, dtype: str = "float64"):
    rng = np.random.default_rng(seed)
    arrays = [rng.uniform(0.2, 0.9, s) if positive else rng.normal(size=s) for s in SHAPES]
    arrays = [np.asarray(a, dtype=dtype) for a in arrays]
    return [ember.tensor(a) for a in arrays], [torch.tensor(a) for a in arrays]


def _same(e_list, t_list, tol: float = 1e-12) -> None:
    assert len(e_list) == len(t_list)
    for e, t in zip(e_list, t_list):
        assert str(e.dtype).split(".")[-1] == str(t.dtype).split(".")[-1]
        np.testing.assert_allclose(e.numpy(), t.detach().numpy(), rtol=tol, atol=tol)


def test_every_foreach_name_of_torch_exists() -> None:
    names = {n for n in dir(torch) if n.startswith("_foreach_")}
    assert names and names <= set(dir(ember))


UNARY = ["abs", "acos", "asin", "atan", "ceil", "cos", "cosh", "erf", "erfc", "exp", "expm1", "floor", "frac",
         "lgamma", "log", "log10", "log1p", "log2", "neg", "reciprocal", "round", "rsqrt", "sigmoid", "sign", "sin",
         "sinh", "sqrt", "tan", "tanh", "trunc"]


@pytest.mark.parametrize("op", UNARY)
def test_unary_out_of_place_and_in_place(op: str) -> None:
    e, t = _pair(0, positive=True)
    name = f"_foreach_{op}"
    e_out, t_out = getattr(ember, name)(e), getattr(torch, name)(t)
    assert isinstance(e_out, tuple) and isinstance(t_out, tuple)
    _same(e_out, t_out)
    e_ret, t_ret = getattr(ember, name + "_")(e), getattr(torch, name + "_")(t)
    assert e_ret is e and t_ret is t  # in-place forms hand back the list they were given
    _same(e, t)


def _operands(form: str, seed: int):
    """The second operand in each of PyTorch's forms, for ember and for torch."""
    if form == "scalar":
        return 1.5, 1.5
    if form == "scalarlist":
        return [0.5, -2.0, 3.0], [0.5, -2.0, 3.0]
    if form == "tensor0d":
        return ember.tensor(0.75, dtype=ember.float64), torch.tensor(0.75, dtype=torch.float64)
    return _pair(seed, positive=True)  # tensorlist


FORMS = ["scalar", "scalarlist", "tensor0d", "tensorlist"]


@pytest.mark.parametrize("op", ["add", "sub", "mul", "div", "pow", "clamp_min", "clamp_max", "maximum", "minimum"])
@pytest.mark.parametrize("form", FORMS)
def test_binary_forms(op: str, form: str) -> None:
    e, t = _pair(1, positive=(op == "pow"))
    eo, to = _operands(form, 2)
    name = f"_foreach_{op}"
    _same(getattr(ember, name)(e, eo), getattr(torch, name)(t, to))
    getattr(ember, name + "_")(e, eo)
    getattr(torch, name + "_")(t, to)
    _same(e, t)


@pytest.mark.parametrize("op, form", [("add", "tensorlist"), ("sub", "tensorlist"), ("add", "tensor0d")])
def test_alpha(op: str, form: str) -> None:  # torch 2.13's sub has no 0-d tensor overload with alpha
    e, t = _pair(3)
    eo, to = _operands(form, 4)
    name = f"_foreach_{op}"
    _same(getattr(ember, name)(e, eo, alpha=-0.3), getattr(torch, name)(t, to, alpha=-0.3))
    getattr(ember, name + "_")(e, eo, alpha=2)
    getattr(torch, name + "_")(t, to, alpha=2)
    _same(e, t)


def test_pow_with_a_number_as_base() -> None:
    e, t = _pair(5)
    _same(ember._foreach_pow(2.0, e), torch._foreach_pow(2.0, t))


@pytest.mark.parametrize("op", ["addcmul", "addcdiv"])
@pytest.mark.parametrize("value", ["default", 0.5, [1.0, -2.0, 0.25], "tensor"])
def test_addcmul_addcdiv_values(op: str, value) -> None:
    e, t = _pair(6)
    e1, t1 = _pair(7)
    e2, t2 = _pair(8, positive=True)
    args_e, args_t = [e, e1, e2], [t, t1, t2]
    if value == "tensor":
        args_e.append(ember.tensor([1.0, -2.0, 0.25]))
        args_t.append(torch.tensor([1.0, -2.0, 0.25]))
    elif value != "default":
        args_e.append(value)
        args_t.append(value)
    name = f"_foreach_{op}"
    _same(getattr(ember, name)(*args_e), getattr(torch, name)(*args_t))
    getattr(ember, name + "_")(*args_e)
    getattr(torch, name + "_")(*args_t)
    _same(e, t)


@pytest.mark.parametrize("form", ["scalar", "scalarlist", "tensorlist"])
def test_lerp_as_a_model_ema_uses_it(form: str) -> None:
    ema_e, ema_t = _pair(9)
    new_e, new_t = _pair(10)
    we, wt = _operands(form, 11)
    _same(ember._foreach_lerp(ema_e, new_e, we), torch._foreach_lerp(ema_t, new_t, wt))
    assert ember._foreach_lerp_(ema_e, new_e, we) is ema_e
    torch._foreach_lerp_(ema_t, new_t, wt)
    _same(ema_e, ema_t)


@pytest.mark.parametrize("ord_", [2, 1, float("inf"), 3])
def test_norm_and_powsum(ord_) -> None:
    e, t = _pair(12)
    _same(ember._foreach_norm(e, ord_), torch._foreach_norm(t, ord_))
    if ord_ != float("inf"):
        _same(ember._foreach_powsum(e, ord_), torch._foreach_powsum(t, ord_))


def test_norm_dtype_max_mm_clone_copy_zero() -> None:
    e, t = _pair(13, dtype="float32")
    _same(ember._foreach_norm(e, dtype=ember.float64), torch._foreach_norm(t, dtype=torch.float64), tol=1e-6)
    _same(ember._foreach_max(e), torch._foreach_max(t))
    me = [ember.tensor(np.arange(6.0).reshape(2, 3)), ember.ones(4, 1)]
    mt = [torch.tensor(np.arange(6.0).reshape(2, 3)), torch.ones(4, 1)]
    ne = [ember.tensor(np.arange(12.0).reshape(3, 4)), ember.ones(1, 2)]
    nt = [torch.tensor(np.arange(12.0).reshape(3, 4)), torch.ones(1, 2)]
    _same(ember._foreach_mm(me, ne), torch._foreach_mm(mt, nt))
    clones_e, clones_t = ember._foreach_clone(e), torch._foreach_clone(t)
    src_e, src_t = _pair(14, dtype="float32")
    assert ember._foreach_copy_(e, src_e) is e
    torch._foreach_copy_(t, src_t)
    _same(e, t)
    _same(clones_e, clones_t)  # the clones kept the values from before the copy
    assert ember._foreach_zero_(e) is e
    torch._foreach_zero_(t)
    _same(e, t)


def test_integer_tensors_promote_as_the_single_tensor_ops() -> None:
    e = [ember.tensor([1, 2, 3])]
    t = [torch.tensor([1, 2, 3])]
    _same(ember._foreach_add(e, 2), torch._foreach_add(t, 2))
    _same(ember._foreach_div(e, 2), torch._foreach_div(t, 2))
    _same(ember._foreach_sqrt(e), torch._foreach_sqrt(t))
    with pytest.raises(RuntimeError):
        torch._foreach_mul_(t, 1.5)
    with pytest.raises(RuntimeError):
        ember._foreach_mul_(e, 1.5)


def test_out_of_place_forms_are_differentiable() -> None:
    xe, xt = _pair(15)
    for x in xe + xt:
        x.requires_grad_(True)
    ye = ember._foreach_addcmul(ember._foreach_mul(xe, 3.0), xe, xe, 0.5)
    yt = torch._foreach_addcmul(torch._foreach_mul(xt, 3.0), xt, xt, 0.5)
    sum(y.sum() for y in ye).backward()
    sum(y.sum() for y in yt).backward()
    _same([x.grad for x in xe], [x.grad for x in xt])


@pytest.mark.parametrize("call", [
    lambda lib, a: getattr(lib, "_foreach_add")([], 1),
    lambda lib, a: getattr(lib, "_foreach_add")(a, a[:1]),
    lambda lib, a: getattr(lib, "_foreach_add")(a, [1.0]),
    lambda lib, a: getattr(lib, "_foreach_mul")(a, lib.ones(3)),
    lambda lib, a: getattr(lib, "_foreach_lerp_")(a, a[:2], 0.5),
    lambda lib, a: getattr(lib, "_foreach_addcmul")(a, a, a, lib.tensor(1.0)),
])
def test_errors_as_torch(call) -> None:
    e, t = _pair(16)
    with pytest.raises(RuntimeError) as te:
        call(torch, t)
    with pytest.raises(RuntimeError) as ee:
        call(ember, e)
    assert str(ee.value).split(",")[0] == str(te.value).split(",")[0]
