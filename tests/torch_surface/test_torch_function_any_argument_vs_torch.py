"""``__torch_function__`` dispatch when the overriding object is *any* argument, side by side with torch 2.13: a plain
tensor's methods (``plain.add(sub)``), functions, operators (reflected too) and nested list arguments
(``torch.cat([plain, sub])``), with a Tensor subclass, a subclass of it (subclasses before superclasses) and a class
that is not a Tensor (PyTorch's "Tensor-like" objects). Each scenario runs with ``L = torch`` and ``L = ember``; the
reported ``func``, ``types``, argument types and the result's type must be equal."""
from __future__ import annotations

import gc

import pytest

import ember
from ember import _torch_function

torch = pytest.importorskip("torch")


@pytest.fixture(autouse=True)
def _switch_returns_to_off():
    yield
    if _torch_function.SWITCH.on or _torch_function.SWITCH.carry:  # (a full collection only when needed: it is slow)
        gc.collect()
    assert not _torch_function.SWITCH.on and not _torch_function.SWITCH.carry, "an override outlived its test"
    assert "add" not in vars(ember.Tensor) or vars(ember.Tensor)["add"] is _torch_function._ORIGINAL["add"]


def _outcome(call, *logs):
    for log in logs:
        log.clear()
    try:
        result = call()
        result = result if isinstance(result, str) else type(result).__name__
    except Exception as error:  # noqa: BLE001  (the error's type is part of the outcome)
        result = "error " + type(error).__name__
    return result, [entry for log in logs for entry in log]


def _subclass_scenarios(L):
    log = []

    class Log(L.Tensor):
        @classmethod
        def __torch_function__(cls, func, types, args=(), kwargs=None):
            log.append((cls.__name__, func.__name__, tuple(t.__name__ for t in types)))
            return super().__torch_function__(func, types, args, kwargs)

    class Log2(Log):
        pass

    p, s, s2 = L.ones(2, 2), L.ones(2, 2).as_subclass(Log), L.ones(2, 2).as_subclass(Log2)
    cases = {
        "p.add(s)": lambda: p.add(s), "p.mul(s)": lambda: p.mul(s), "p.matmul(s)": lambda: p.matmul(s),
        "p.add(other=s)": lambda: p.add(other=s), "p.sub(s, alpha=2)": lambda: p.sub(s, alpha=2),
        "p.add_(s)": lambda: p.clone().add_(s), "p.copy_(s)": lambda: p.clone().copy_(s),
        "p.expand_as(s)": lambda: p.expand_as(s), "p.where(mask, s)": lambda: p.where(p > 0, s),
        "add(p, s)": lambda: L.add(p, s), "p + s": lambda: p + s, "s + p": lambda: s + p, "p @ s": lambda: p @ s,
        "p - s": lambda: p - s, "p * s": lambda: p * s, "p / s": lambda: p / s, "2 + s": lambda: 2 + s,
        "p < s": lambda: p < s, "p == s": lambda: p == s, "p ** s": lambda: p ** s,
        "cat([p, s])": lambda: L.cat([p, s]), "stack((p, s))": lambda: L.stack((p, s)),
        "p.add(s2)": lambda: p.add(s2), "add(s, s2)": lambda: L.add(s, s2), "cat([p, s, s2])": lambda: L.cat([p, s, s2]),
        "s.add(s2)": lambda: s.add(s2), "cat([s2, s])": lambda: L.cat([s2, s]), "p.new_ones(2)": lambda: p.new_ones(2),
    }
    return {name: _outcome(call, log) for name, call in cases.items()}


def _tensor_like_scenarios(L):
    log = []

    class TensorLike:
        @classmethod
        def __torch_function__(cls, func, types, args=(), kwargs=None):
            log.append((func.__name__, tuple(t.__name__ for t in types), tuple(type(a).__name__ for a in args),
                        sorted(kwargs or {})))
            return "handled"

    p, f = L.ones(2, 2), TensorLike()
    cases = {  # operators first: ember learns of the class from the first one (see docs/pytorch-compat.md)
        "p + f": lambda: p + f, "f + p": lambda: f + p, "f - p": lambda: f - p, "f * p": lambda: f * p,
        "f / p": lambda: f / p, "f @ p": lambda: f @ p, "p @ f": lambda: p @ f, "f == p": lambda: f == p,
        "f < p": lambda: f < p, "f ** p": lambda: f ** p, "f % p": lambda: f % p, "f // p": lambda: f // p,
        "p == f": lambda: p == f, "p != f": lambda: p != f, "p ** f": lambda: p ** f, "p % f": lambda: p % f,
        "p // f": lambda: p // f, "p & f": lambda: p.bool() & f, "p >= f": lambda: p >= f,
        "p += f": lambda: p.clone().__iadd__(f), "cat([p, f])": lambda: L.cat([p, f]), "add(p, f)": lambda: L.add(p, f),
        "relu(f)": lambda: L.relu(f), "F.linear(f, p)": lambda: L.nn.functional.linear(f, p),
        "p.add(f)": lambda: p.add(f), "p.mul(f)": lambda: p.mul(f), "p.add(f, alpha=2)": lambda: p.add(f, alpha=2),
        "p.expand_as(f)": lambda: p.expand_as(f), "p.matmul(f)": lambda: p.matmul(f), "p.div(f)": lambda: p.div(f),
        "where(mask, p, f)": lambda: L.where(p > 0, p, f), "p + None": lambda: p + None, "p == None": lambda: p == None,  # noqa: E711
    }
    return {name: _outcome(call, log) for name, call in cases.items()}


_RESULTS: dict = {}


def _results(kind, L):
    if (kind, L) not in _RESULTS:
        _RESULTS[kind, L] = (_subclass_scenarios if kind == "subclass" else _tensor_like_scenarios)(L)
        gc.collect()
    return _RESULTS[kind, L]


@pytest.mark.parametrize("name", list(_results("subclass", torch)))
def test_tensor_subclass_in_any_argument(name):
    assert _results("subclass", ember)[name] == _results("subclass", torch)[name]


@pytest.mark.parametrize("name", list(_results("tensor_like", torch)))
def test_tensor_like_object_in_any_argument(name):
    assert _results("tensor_like", ember)[name] == _results("tensor_like", torch)[name]


def test_plain_programs_keep_plain_methods():
    """No override alive: Tensor's methods and operators are its own functions (the eager fast path)."""
    assert vars(ember.Tensor)["__add__"] is _torch_function._ORIGINAL["__add__"]
    assert not _torch_function.SWITCH.carry


@pytest.mark.parametrize("meet", ["has_torch_function", "is_tensor_like", "cat"])
def test_methods_dispatch_once_the_class_was_met(meet):
    """ember learns of a Tensor-like class from a function, an operator or torch.overrides' helpers (its plain
    methods have no failure hook); from then on ``plain.mul(obj)`` reaches ``obj.__torch_function__`` as torch's."""
    def run(L):
        class TensorLike:
            @classmethod
            def __torch_function__(cls, func, types, args=(), kwargs=None):
                return func.__name__, tuple(type(a).__name__ for a in args), sorted(kwargs or {})

        obj, plain = TensorLike(), L.ones(2)
        met = {"has_torch_function": lambda: L.overrides.has_torch_function((obj,)),
               "is_tensor_like": lambda: L.overrides.is_tensor_like(obj),
               "cat": lambda: L.cat([plain, obj])}[meet]()
        return met, plain.mul(obj), plain.sub(obj, alpha=2), plain.expand_as(obj)

    assert run(ember) == run(torch)
