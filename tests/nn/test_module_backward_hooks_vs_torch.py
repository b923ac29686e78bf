"""Module backward hooks (register_full_backward_hook / register_full_backward_pre_hook) and forward hooks
with kwargs, run side by side with torch 2.13 on the same weights: what the hooks see, what replacing
gradients does, firing order, handles, and errors."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

import ember
import ember.nn as enn

torch = pytest.importorskip("torch")


def _np(t):
    return None if t is None else t.detach().numpy()


def _same(a, b, tol=1e-12):
    if a is None or b is None:
        assert a is None and b is None
        return
    np.testing.assert_allclose(_np(a), _np(b), rtol=tol, atol=tol)


def _linear_pair(seed=0):
    tm = torch.nn.Linear(3, 2).double()
    em = enn.Linear(3, 2).double()
    em.load_state_dict({k: v.detach().numpy() for k, v in tm.state_dict().items()})
    x = np.random.default_rng(seed).standard_normal((4, 3))
    return em, tm, x


def test_full_hook_sees_grads_and_replaces_grad_input():
    em, tm, x = _linear_pair()
    seen = {"ember": [], "torch": []}
    results = {}
    for name, lib, m in (("ember", ember, em), ("torch", torch, tm)):
        def hook(module, grad_input, grad_output, name=name):
            assert module is (em if name == "ember" else tm)
            seen[name].append((grad_input, grad_output))
            return (grad_input[0] * 3,)

        handle = m.register_full_backward_hook(hook)
        xi = lib.tensor(x, requires_grad=True)
        (m(xi) ** 2).sum().backward()
        results[name] = (xi.grad, m.weight.grad)
        handle.remove()
        xi.grad = None
        m.weight.grad = None
        (m(xi) ** 2).sum().backward()  # removed: no hook, plain gradient
        results[name + "_plain"] = xi.grad
    (gi_e, go_e), = seen["ember"]
    (gi_t, go_t), = seen["torch"]
    assert len(gi_e) == len(gi_t) == 1 and len(go_e) == len(go_t) == 1
    _same(gi_e[0], gi_t[0])
    _same(go_e[0], go_t[0])
    _same(results["ember"][0], results["torch"][0])  # x.grad tripled
    _same(results["ember"][1], results["torch"][1])  # weight grad unchanged by the input hook
    _same(results["ember_plain"], results["torch_plain"])
    assert len(seen["ember"]) == 1


def test_pre_hook_replaces_grad_output_for_whole_module():
    em, tm, x = _linear_pair(1)
    out = {}
    for name, lib, m in (("ember", ember, em), ("torch", torch, tm)):
        calls = []
        h1 = m.register_full_backward_pre_hook(lambda mod, go, calls=calls: calls.append("second") or (go[0] * 2,))
        h2 = m.register_full_backward_pre_hook(lambda mod, go, calls=calls: calls.append("first"), prepend=True)
        captured = []
        h3 = m.register_full_backward_hook(lambda mod, gi, go, captured=captured: captured.append(go))
        xi = lib.tensor(x, requires_grad=True)
        m(xi).pow(3).sum().backward()
        out[name] = (xi.grad, m.weight.grad, m.bias.grad, captured[0][0], calls)
        for h in (h1, h2, h3):
            h.remove()
    for a, b in zip(out["ember"][:4], out["torch"][:4]):
        _same(a, b)
    assert out["ember"][4] == out["torch"][4] == ["first", "second"]


class _Mixed:
    """forward(x, scale, y) -> (x*scale + y, y.sum()): non-tensor args and tuple outputs."""

    @staticmethod
    def build(nn):
        class Mixed(nn.Module):
            def forward(self, x, scale, y):
                return x * scale + y, (y * y).sum()

        return Mixed()


def test_non_tensor_args_and_tuple_outputs():
    rng = np.random.default_rng(2)
    x, y = rng.standard_normal((2, 3)), rng.standard_normal((2, 3))
    got = {}
    for name, lib, nn in (("ember", ember, enn), ("torch", torch, torch.nn)):
        m = _Mixed.build(nn)
        record = []
        m.register_full_backward_hook(lambda mod, gi, go, record=record: record.append((gi, go)))
        xi, yi = lib.tensor(x, requires_grad=True), lib.tensor(y, requires_grad=True)
        a, b = m(xi, 2.5, yi)
        (a.sum() * 2 + b).backward()
        got[name] = record
    (gi_e, go_e), = got["ember"]
    (gi_t, go_t), = got["torch"]
    assert len(gi_e) == len(gi_t) == 3 and gi_e[1] is None and gi_t[1] is None
    assert len(go_e) == len(go_t) == 2
    for a, b in zip(gi_e + go_e, gi_t + go_t):
        _same(a, b)


def test_input_without_grad_fires_with_none_and_warns():
    em, tm, x = _linear_pair(3)
    got = {}
    for name, lib, m in (("ember", ember, em), ("torch", torch, tm)):
        record = []
        m.register_full_backward_hook(lambda mod, gi, go, record=record: record.append((gi, go)))
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            m(lib.tensor(x)).sum().backward()
        assert any("no inputs require gradients" in str(w.message) for w in caught)
        got[name] = record
    (gi_e, go_e), = got["ember"]
    (gi_t, go_t), = got["torch"]
    assert gi_e == gi_t == (None,)
    _same(go_e[0], go_t[0])
    # Returning gradients there is an error, as in torch.
    em.register_full_backward_hook(lambda mod, gi, go: (ember.ones(4, 3),))
    with pytest.raises(RuntimeError, match="no input requires gradient"), pytest.warns(UserWarning):
        em(ember.tensor(x)).sum().backward()


def test_nested_modules_fire_in_backward_order():
    order = {}
    for name, nn, lib in (("ember", enn, ember), ("torch", torch.nn, torch)):
        lib.manual_seed(0)
        net = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 2))
        calls = []
        for label, mod in (("net", net), ("fc1", net[0]), ("act", net[1]), ("fc2", net[2])):
            mod.register_full_backward_hook(lambda m, gi, go, label=label, calls=calls: calls.append(label))
            mod.register_full_backward_pre_hook(lambda m, go, label=label, calls=calls: calls.append("pre-" + label))
        net(lib.randn(5, 3, requires_grad=True)).sum().backward()
        order[name] = calls
    assert order["ember"] == order["torch"]


def test_hook_wrong_length_is_a_clear_error():
    em, _, x = _linear_pair()
    em.register_full_backward_hook(lambda mod, gi, go: (gi[0], gi[0]))
    with pytest.raises(RuntimeError, match="invalid number of grad_input, got 2, but expected 1"):
        em(ember.tensor(x, requires_grad=True)).sum().backward()
    em2, _, _ = _linear_pair()
    em2.register_full_backward_pre_hook(lambda mod, go: (go[0], go[0]))
    with pytest.raises(RuntimeError, match="invalid number of grad_output, got 2, but expected 1"):
        em2(ember.tensor(x, requires_grad=True)).sum().backward()


def test_no_grad_forward_with_hooks_is_plain():
    em, _, x = _linear_pair()
    calls = []
    em.register_full_backward_hook(lambda *a: calls.append(1))
    with ember.no_grad():
        out = em(ember.tensor(x, requires_grad=True))
    assert not out.requires_grad and calls == []


def test_forward_hooks_with_kwargs_match_torch():
    got = {}
    for name, nn, lib in (("ember", enn, ember), ("torch", torch.nn, torch)):
        class Scale(nn.Module):
            def forward(self, x, factor=1.0):
                return x * factor

        m = Scale()
        m.register_forward_pre_hook(lambda mod, args, kwargs: (args, {**kwargs, "factor": kwargs["factor"] * 10}),
                                    with_kwargs=True)
        m.register_forward_hook(lambda mod, args, kwargs, out: out + kwargs["factor"], with_kwargs=True)
        got[name] = m(lib.ones(2, dtype=lib.float64), factor=2.0)
    _same(got["ember"], got["torch"])
