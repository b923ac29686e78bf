"""torch's C builtins do not bind ``self`` as class attributes (``class Block: act = torch.tanh``); ember's functions
of the same names do not either, and its Python-level ones (``F.relu``) bind as torch's do. Each scenario runs with
``L = torch`` and ``L = ember`` and the outcomes are compared; the non-binding names are computed from torch here."""
from __future__ import annotations

import copy
import functools
import importlib
import inspect
import pickle
import sys

import numpy as np
import pytest

import ember
from ember import _nonbinding

torch = pytest.importorskip("torch")

NAMESPACES = ("torch", "torch.nn.functional", "torch.linalg", "torch.special", "torch.fft")


def _ember_module(label: str):
    return importlib.import_module("ember" + label[len("torch"):])


def _functions(module) -> dict:
    out = {}
    for name in dir(module):
        value = getattr(module, name, None)
        if name.startswith("_") or isinstance(value, type) or type(value).__name__ == "module" or not callable(value):
            continue
        out[name] = value
    return out


def _binds(value) -> bool:
    class Holder:
        attr = value
    return Holder().attr is not value


@pytest.mark.parametrize("label", NAMESPACES)
def test_non_binding_names_are_torchs(label):
    theirs = _functions(importlib.import_module(label))
    ours = _functions(_ember_module(label))
    common = sorted(set(theirs) & set(ours))
    assert len(common) > 20
    differ = [(n, type(theirs[n]).__name__) for n in common if _binds(theirs[n]) != _binds(ours[n])]
    assert differ == []


@pytest.mark.skipif(not torch.__version__.startswith("2.13"), reason="the table is torch 2.13's")
@pytest.mark.parametrize("label", NAMESPACES)
def test_the_table_is_torchs(label):
    module = importlib.import_module(label)
    builtins = {n for n, v in _functions(module).items() if not hasattr(type(v), "__get__")}
    assert _nonbinding.BUILTIN_NAMES[label] == builtins


def _class_attributes(L):
    """Functions of each kind stored on a class and called through an instance (a module, a config class)."""
    F = L.nn.functional

    class Block(L.nn.Module):
        act = L.tanh
        gate = L.sigmoid
        combine = L.add
        product = L.matmul
        squash = L.special.expit
        size = L.linalg.vector_norm
        spectrum = L.fft.rfft
        conv = F.conv2d  # a C builtin in torch's nn.functional

        def forward(self, x):
            y = self.combine(self.act(x), self.gate(x), alpha=2)
            y = self.product(y, y.T) + self.squash(y).sum()
            w = L.ones(1, 1, 1, 1, dtype=L.float64)
            return y, self.size(y), self.spectrum(y[0]).abs(), self.conv(y[None, None], w)[0, 0]

    class Config:
        activation_fn = L.relu
        table = {"gelu": F.gelu}  # a dict on the class: its values are never bound

    x = L.tensor(np.linspace(-2, 2, 6).reshape(2, 3), dtype=L.float64)
    outs = Block()(x)
    cfg = Config()
    outs += (cfg.activation_fn(x), cfg.table["gelu"](x))
    same = (Block().act is L.tanh, Block.conv is F.conv2d, cfg.activation_fn is L.relu)
    return [o.detach().numpy() for o in outs], same


def test_class_attributes_are_called_as_torch():
    theirs, their_identity = _class_attributes(torch)
    ours, our_identity = _class_attributes(ember)
    assert our_identity == their_identity == (True, True, True)
    for a, b in zip(ours, theirs):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)


def _python_level_binds(L):
    """torch's nn.functional functions written in Python bind: ``self.f(x)`` passes the instance as ``input``."""
    class Holder:
        f = L.nn.functional.relu
        g = L.nn.functional.mse_loss

    h = Holder()
    return h.f is L.nn.functional.relu, h.g is L.nn.functional.mse_loss, inspect.ismethod(h.f)


def test_python_level_functions_bind_as_torchs():
    assert _python_level_binds(ember) == _python_level_binds(torch) == (False, False, True)


@pytest.mark.parametrize("path", ["relu", "add", "tanh", "is_grad_enabled", "special.expit", "linalg.norm", "fft.fft",
                                  "nn.functional.conv2d", "zeros"])
def test_non_binding_functions_keep_what_a_function_has(path):
    fn = functools.reduce(getattr, path.split("."), ember)
    assert _nonbinding.is_nonbinding(fn)
    assert getattr(sys.modules[fn.__module__], fn.__qualname__) is fn  # where pickle finds it
    if path != "special.expit":  # (an alias: the function's own name, as torch's special_expit)
        assert fn.__name__ == path.split(".")[-1]
    function = fn.__wrapped__  # the Python function it calls (the public function before this change)
    assert type(function).__name__ == "function" and fn.__doc__ == function.__doc__
    assert inspect.signature(fn) == inspect.signature(function)
    assert pickle.loads(pickle.dumps(fn)) is fn
    assert copy.copy(fn) is fn and copy.deepcopy(fn) is fn
    bound = functools.partial(fn)
    assert pickle.loads(pickle.dumps(bound)).func is fn


def test_partial_of_a_builtin_pickles_and_calls():
    add_one = pickle.loads(pickle.dumps(functools.partial(ember.add, other=1.0)))
    assert add_one.func is ember.add
    np.testing.assert_array_equal(add_one(ember.zeros(2)).numpy(), [1.0, 1.0])


def test_torch_function_sees_the_public_object_through_a_class_attribute():
    seen = []

    class Logged(ember.Tensor):
        @classmethod
        def __torch_function__(cls, func, types, args=(), kwargs=None):
            seen.append(func)
            return super().__torch_function__(func, types, args, kwargs)

    class Block:
        act = ember.tanh

    x = ember.ones(2).as_subclass(Logged)
    out = Block().act(x)
    assert type(out) is Logged and seen == [ember.tanh] and seen[0] is ember.tanh
    del Logged, x, out


def test_fx_records_the_builtin_as_torch():
    def targets(L):
        class Block(L.nn.Module):
            act = L.tanh

            def forward(self, x):
                return self.act(x) + L.relu(x)

        graph = L.fx.symbolic_trace(Block()).graph
        return [(n.op, n.target.__name__ if callable(n.target) else n.target) for n in graph.nodes], \
            [n.target for n in graph.nodes if n.op == "call_function"][0] is L.tanh

    assert targets(ember) == targets(torch)
