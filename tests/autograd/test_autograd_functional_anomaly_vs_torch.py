"""torch.autograd.functional (jacobian, hessian, vjp, jvp, hvp, vhp), detect_anomaly and Variable vs torch."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")

FUNCS = {  # name -> (function of one library's namespace, input shapes)
    "square": (lambda lib: lambda x: x ** 2, [(3,)]),
    "matvec": (lambda lib: lambda x, w: (w @ x).tanh(), [(3,), (2, 3)]),
    "scalar": (lambda lib: lambda x: (x.sin() * x).sum(), [(4,)]),
    "two_out": (lambda lib: lambda x, y: (x * y, (x + y).exp()), [(2,), (2,)]),
}
SCALAR = ["scalar"]


def _inputs(shapes, lib, seed=0):
    rng = np.random.default_rng(seed)
    return tuple(lib.tensor(rng.standard_normal(s)) for s in shapes)


def _compare(a, b):
    if isinstance(b, (tuple, list)):
        assert isinstance(a, (tuple, list)) and len(a) == len(b)
        for x, y in zip(a, b):
            _compare(x, y)
        return
    np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("name", list(FUNCS))
def test_jacobian(name: str) -> None:
    fn, shapes = FUNCS[name]
    args_e, args_t = _inputs(shapes, ember), _inputs(shapes, torch)
    arg = lambda a: a if len(a) > 1 else a[0]  # noqa: E731
    _compare(ember.autograd.functional.jacobian(fn(ember), arg(args_e)),
             torch.autograd.functional.jacobian(fn(torch), arg(args_t)))


@pytest.mark.parametrize("op", ["vjp", "jvp"])
@pytest.mark.parametrize("name", ["square", "matvec", "two_out"])
def test_vjp_jvp(op: str, name: str) -> None:
    fn, shapes = FUNCS[name]
    args_e, args_t = _inputs(shapes, ember), _inputs(shapes, torch)
    out_t = fn(torch)(*args_t)
    outs = out_t if isinstance(out_t, tuple) else (out_t,)
    rng = np.random.default_rng(5)
    v_np = [rng.standard_normal(tuple(o.shape)) for o in outs] if op == "vjp" else \
        [rng.standard_normal(tuple(a.shape)) for a in args_t]
    pack = lambda lib, xs: tuple(lib.tensor(x) for x in xs) if len(xs) > 1 else lib.tensor(xs[0])  # noqa: E731
    arg = lambda a: a if len(a) > 1 else a[0]  # noqa: E731
    _compare(getattr(ember.autograd.functional, op)(fn(ember), arg(args_e), pack(ember, v_np)),
             getattr(torch.autograd.functional, op)(fn(torch), arg(args_t), pack(torch, v_np)))


@pytest.mark.parametrize("op", ["hessian", "hvp", "vhp"])
def test_second_order(op: str) -> None:
    fn, shapes = FUNCS["scalar"]
    (x_e,), (x_t,) = _inputs(shapes, ember), _inputs(shapes, torch)
    if op == "hessian":
        _compare(ember.autograd.functional.hessian(fn(ember), x_e), torch.autograd.functional.hessian(fn(torch), x_t))
        return
    v = np.random.default_rng(2).standard_normal(shapes[0])
    _compare(getattr(ember.autograd.functional, op)(fn(ember), x_e, ember.tensor(v)),
             getattr(torch.autograd.functional, op)(fn(torch), x_t, torch.tensor(v)))


def test_strict_mode_refuses_independent_outputs() -> None:
    with pytest.raises(RuntimeError, match="does not require gradients") as mine:
        ember.autograd.functional.vjp(lambda x: ember.ones(2), ember.ones(2), ember.ones(2), strict=True)
    with pytest.raises(RuntimeError) as theirs:
        torch.autograd.functional.vjp(lambda x: torch.ones(2), torch.ones(2), torch.ones(2), strict=True)
    assert str(mine.value) == str(theirs.value)


@pytest.mark.parametrize("make", [lambda lib, x: x.sqrt() * 0, lambda lib, x: (x / x), lambda lib, x: x.log() * 0])
def test_detect_anomaly_names_the_node_like_torch(make) -> None:
    messages = []
    for lib in (torch, ember):
        x = lib.tensor([0.0, 1.0], requires_grad=True)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with lib.autograd.detect_anomaly():
                with pytest.raises(RuntimeError) as err:
                    make(lib, x).sum().backward()
        messages.append(str(err.value).splitlines()[0])
    assert messages[0] == messages[1]
    x = ember.tensor([0.0], requires_grad=True)
    (x.sqrt() * 0).sum().backward()  # outside the block: NaNs pass, as in torch
    assert np.isnan(x.grad.numpy()).all() and not ember.autograd.is_anomaly_enabled()


def test_set_detect_anomaly_and_variable() -> None:
    with ember.autograd.set_detect_anomaly(True):
        assert ember.autograd.is_anomaly_enabled()
    assert not ember.autograd.is_anomaly_enabled()
    v = ember.autograd.Variable(ember.ones(2), requires_grad=True)
    tv = torch.autograd.Variable(torch.ones(2), requires_grad=True)
    assert isinstance(v, ember.Tensor) and v.requires_grad == tv.requires_grad
    assert isinstance(ember.ones(1), ember.autograd.Variable)
