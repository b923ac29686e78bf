"""torch.fx.symbolic_trace against torch 2.13: the same nodes (names, opcodes, targets, arguments), the same
printed graph, GraphModules computing the module's values, Tracer.is_leaf_module, fx.wrap, Proxy errors."""
from __future__ import annotations

import math

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")
import torch.fx  # noqa: E402

LIBS = {"ember": ember, "torch": torch}


def _scaled_sum(x, scale):
    """A helper that tracing must record as one call (fx.wrap), not trace through."""
    return x.sum() * scale


ember.fx.wrap("_scaled_sum")
torch.fx.wrap("_scaled_sum")


def _modules(lib):
    nn, F = lib.nn, lib.nn.functional

    class Mixed(nn.Module):
        def __init__(self):
            super().__init__()
            self.linear = nn.Linear(4, 5)
            self.param = nn.Parameter(lib.rand(5))
            self.register_buffer("offset", lib.ones(5))

        def forward(self, x, y=2):
            a, b = x.chunk(2, dim=0)
            z = F.relu(self.linear(x) + self.param).clamp(min=0.0, max=1.0)
            out = lib.cat([z, z * y], 1).sum(dim=-1) + x.shape[0] + abs(a).mean()
            return out - self.offset.mean() + b.sum()

    class Inner(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(6, 3)

        def forward(self, x):
            return lib.tanh(self.fc(x))

    class Nested(nn.Module):
        def __init__(self):
            super().__init__()
            self.block = nn.Sequential(nn.Linear(4, 6), nn.ReLU())
            self.inner = Inner()

        def forward(self, x):
            h = self.inner(self.block(x))
            return lib.flatten(h.unsqueeze(1), 1), _scaled_sum(h, 3.0)

    class Views(nn.Module):
        def forward(self, x):
            n = x.size(0)
            y = x.view(n, -1).transpose(0, 1)[:, 1:3]
            return {"y": y * math.pi, "neg": -x.reshape(-1)}

    return {"mixed": Mixed, "nested": Nested, "views": Views}


def _same_weights(ember_module, torch_module):
    state = {k: ember.tensor(v.detach().numpy()) for k, v in torch_module.state_dict().items()}
    ember_module.load_state_dict(state)


def _signature(graph):
    rows = []
    for node in graph.nodes:
        target = node.target if isinstance(node.target, str) else node.target.__name__
        kwargs = {k: v for k, v in node.kwargs.items() if k != "inplace"}  # torch's F.relu passes inplace=False
        rows.append((node.name, node.op, target, str(node.args), str(kwargs), len(node.users)))
    return rows


@pytest.mark.parametrize("name", ["mixed", "nested", "views"])
def test_traced_graph_has_torch_nodes(name):
    ember_graph = ember.fx.symbolic_trace(_modules(ember)[name]()).graph
    torch_graph = torch.fx.symbolic_trace(_modules(torch)[name]()).graph
    assert _signature(ember_graph) == _signature(torch_graph)


def test_printed_graph_matches_torch_but_for_library_names():
    text = str(ember.fx.symbolic_trace(_modules(ember)["mixed"]()).graph)
    expected = str(torch.fx.symbolic_trace(_modules(torch)["mixed"]()).graph)
    expected = expected.replace("torch.nn.functional.relu](args = (%add,), kwargs = {inplace: False})",
                                "torch.nn.functional.relu](args = (%add,), kwargs = {})")
    assert text == expected.replace("torch.", "ember.")


@pytest.mark.parametrize("name", ["mixed", "nested", "views"])
def test_graph_module_computes_the_module_values(name):
    torch.manual_seed(0)
    t_module = _modules(torch)[name]()
    e_module = _modules(ember)[name]()
    _same_weights(e_module, t_module)
    x = np.random.default_rng(3).standard_normal((4, 4)).astype(np.float32)
    gm = ember.fx.symbolic_trace(e_module)
    got, direct, expected = gm(ember.tensor(x)), e_module(ember.tensor(x)), t_module(torch.tensor(x))

    def flat(v):
        if isinstance(v, dict):
            return [flat(v[k]) for k in sorted(v)]
        if isinstance(v, (tuple, list)):
            return [flat(e) for e in v]
        return v.detach().numpy()

    for a, b, c in zip(np.concatenate([np.ravel(a) for a in _leaves(flat(got))]),
                       np.concatenate([np.ravel(a) for a in _leaves(flat(direct))]),
                       np.concatenate([np.ravel(a) for a in _leaves(flat(expected))])):
        assert a == b
        assert abs(a - c) <= 1e-5 * max(1.0, abs(c))


def _leaves(value):
    if isinstance(value, list):
        out = []
        for v in value:
            out.extend(_leaves(v))
        return out
    return [value]


def test_gradients_flow_through_graph_module():
    module = _modules(ember)["nested"]()
    gm = ember.fx.symbolic_trace(module)
    x = ember.randn(3, 4)
    gm(x)[0].sum().backward()
    grads = [p.grad.numpy().copy() for p in module.parameters()]
    for p in module.parameters():
        p.grad = None
    module(x)[0].sum().backward()
    for got, p in zip(grads, module.parameters()):
        np.testing.assert_array_equal(got, p.grad.numpy())


def _leaf_tracer_nodes(lib):
    class Inner(lib.nn.Module):
        def forward(self, x):
            return x * 2 + 1

    class Outer(lib.nn.Module):
        def __init__(self):
            super().__init__()
            self.inner = Inner()

        def forward(self, x):
            return self.inner(x).relu()

    class KeepInner(lib.fx.Tracer):
        def is_leaf_module(self, m, qualname):
            return isinstance(m, Inner) or super().is_leaf_module(m, qualname)

    default = [(n.op, n.name) for n in lib.fx.Tracer().trace(Outer()).nodes]
    kept = [(n.op, n.name) for n in KeepInner().trace(Outer()).nodes]
    return default, kept


def test_tracer_is_leaf_module_as_torch():
    assert _leaf_tracer_nodes(ember) == _leaf_tracer_nodes(torch)
    assert ("call_module", "inner") in _leaf_tracer_nodes(ember)[1]


def _trace_error(lib, fn):
    try:
        lib.fx.symbolic_trace(fn)
    except Exception as error:  # noqa: BLE001 - type and message are compared
        return type(error).__name__, str(error)
    return None


@pytest.mark.parametrize("case", ["branch", "loop", "len"])
def test_proxy_errors_as_torch(case):
    fns = {
        "branch": lambda x: x * 2 if x.sum() > 0 else x,
        "loop": lambda x: [v for v in x],
        "len": lambda x: len(x),
    }
    got, expected = _trace_error(ember, fns[case]), _trace_error(torch, fns[case])
    assert got == expected and got is not None


def test_concrete_args_keep_a_checked_placeholder_like_torch():
    """As torch 2.13: the concrete argument stays a placeholder whose value is asserted (the default True is not
    the specialized False, so calling without it fails); an unknown name is refused by ember (torch traces on
    and fails later at the control flow)."""
    def f(x, flag=True):
        return x * 2 if flag else x

    for lib in (ember, torch):
        gm = lib.fx.symbolic_trace(f, concrete_args={"flag": False})
        assert [n.op for n in gm.graph.nodes] == ["placeholder", "placeholder", "call_function", "call_function",
                                                  "output"]
        assert gm(lib.ones(2), False).tolist() == [1.0, 1.0]
        with pytest.raises(AssertionError, match="flag has been specialized to have value False"):
            gm(lib.ones(2))
    with pytest.raises(TypeError, match="does not take"):
        ember.fx.symbolic_trace(f, concrete_args={"other": 1})


def test_default_values_become_placeholder_defaults():
    def f(x, scale=3.0):
        return x * scale

    for lib in (ember, torch):
        gm = lib.fx.symbolic_trace(f)
        placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
        assert [p.args for p in placeholders] == [(), (3.0,)]
        assert gm(lib.ones(2)).tolist() == [3.0, 3.0]
        assert gm(lib.ones(2), 2.0).tolist() == [2.0, 2.0]
