"""fx.Transformer, fx.subgraph_rewriter.replace_pattern(_with_filters), SubgraphMatcher and
fx.passes.shape_prop.ShapeProp, each run the same way under torch 2.13 and ember and compared: the graphs
(opcodes, node names, targets, arguments), the matches, and the values the rewritten modules compute."""
from __future__ import annotations

import importlib

import numpy as np
import pytest

import ember
import ember.fx as efx

torch = pytest.importorskip("torch")
import torch.fx  # noqa: E402

LIBS = {"ember": ember, "torch": torch}


def _shape(gm) -> list:
    """A graph as comparable data: target functions by name, argument nodes by name."""
    def arg(value):
        if isinstance(value, (list, tuple)):
            return [arg(v) for v in value]
        return f"%{value.name}" if hasattr(value, "op") and hasattr(value, "users") else value

    def target(node):
        return node.target if isinstance(node.target, str) else node.target.__name__

    return [(n.op, n.name, target(n), arg(n.args), {k: arg(v) for k, v in n.kwargs.items()}) for n in gm.graph.nodes]


def _rewriter(lib):
    return importlib.import_module(f"{lib.__name__}.fx.subgraph_rewriter")


def _values(lib, gm, *arrays):
    return gm(*[lib.tensor(a) for a in arrays]).detach().numpy()


# ---- Transformer -------------------------------------------------------------------------------------
def _swap_transformer(lib):
    class NegSigmoidSwap(lib.fx.Transformer):
        def call_function(self, target, args, kwargs):
            if target is lib.sigmoid:
                return lib.neg(*args, **kwargs)
            return super().call_function(target, args, kwargs)

        def call_method(self, target, args, kwargs):
            if target == "neg":
                call_self, *rest = args
                return call_self.sigmoid(*rest, **kwargs)
            return super().call_method(target, args, kwargs)

    return NegSigmoidSwap


def test_transformer_swaps_functions_and_methods_like_torch():
    def build(lib):
        gm = lib.fx.symbolic_trace(lambda x: lib.sigmoid(x).neg() + lib.sigmoid(x))
        return _swap_transformer(lib)(gm).transform()

    t_gm, e_gm = build(torch), build(ember)
    assert _shape(e_gm) == _shape(t_gm)
    x = np.linspace(-3, 3, 12, dtype=np.float32).reshape(3, 4)
    np.testing.assert_allclose(_values(ember, e_gm, x), _values(torch, t_gm, x), rtol=1e-6)


def _model(lib):
    class M(lib.nn.Module):
        def __init__(self):
            super().__init__()
            self.seq = lib.nn.Sequential(lib.nn.Linear(3, 4), lib.nn.ReLU())
            self.scale = lib.nn.Parameter(lib.ones(4) * 2)

        def forward(self, x, bias=1.0):
            return self.seq(x) * self.scale + bias

    return M()


def test_identity_transformer_copies_modules_parameters_and_defaults():
    torch.manual_seed(0)
    t_model = _model(torch)
    e_model = _model(ember)
    e_model.load_state_dict({k: ember.tensor(v.detach().numpy()) for k, v in t_model.state_dict().items()})
    t_gm = torch.fx.Transformer(torch.fx.symbolic_trace(t_model)).transform()
    e_gm = efx.Transformer(efx.symbolic_trace(e_model)).transform()
    assert _shape(e_gm) == _shape(t_gm)
    assert type(e_gm).__name__ == type(t_gm).__name__ == "GraphModule"
    x = np.random.default_rng(1).standard_normal((5, 3)).astype(np.float32)
    np.testing.assert_allclose(_values(ember, e_gm, x), _values(torch, t_gm, x), rtol=1e-6)
    assert e_gm.scale is e_model.scale  # weights are shared, not copied, as in torch.fx


def test_transformer_can_replace_a_module_call():
    class ReluToGelu(efx.Transformer):
        def call_module(self, target, args, kwargs):
            if isinstance(self.fetch_attr(target), ember.nn.ReLU):
                return ember.nn.functional.gelu(*args)
            return super().call_module(target, args, kwargs)

    model = _model(ember)
    gm = ReluToGelu(efx.symbolic_trace(model)).transform()
    assert [n.target.__name__ for n in gm.graph.nodes if n.op == "call_function"][0] == "gelu"
    x = ember.randn(4, 3)
    expected = ember.nn.functional.gelu(model.seq[0](x)) * model.scale + 1.0
    np.testing.assert_allclose(gm(x).detach().numpy(), expected.detach().numpy(), rtol=1e-6)


def test_functions_are_left_unpatched_after_transform():
    original = ember.sigmoid
    _swap_transformer(ember)(efx.symbolic_trace(lambda x: ember.sigmoid(x))).transform()
    assert ember.sigmoid is original
    np.testing.assert_allclose(ember.sigmoid(ember.tensor([0.0])).numpy(), [0.5])


# ---- replace_pattern -----------------------------------------------------------------------------------
def _docs_module(lib):
    class M(lib.nn.Module):
        def forward(self, x, w1, w2):
            m1 = lib.cat([w1, w2]).sum()
            m2 = lib.cat([w1, w2]).sum()
            return x + lib.max(m1) + lib.max(m2)

    return M()


def _matches(matches) -> list:
    return [(m.anchor.name, sorted((k.name, v.name) for k, v in m.nodes_map.items())) for m in matches]


CASES = {
    # name: (module or function maker, pattern maker, replacement maker, example inputs)
    "docs_cat_to_stack": (_docs_module, lambda lib: (lambda a, b: lib.cat([a, b])),
                          lambda lib: (lambda a, b: lib.stack([a, b])), ((2,), (3,), (3,))),
    "inner_value_leaks_no_match": (lambda lib: (lambda x: (lib.relu(x) + 1) * lib.relu(x)),
                                   lambda lib: (lambda x: lib.relu(x) + 1), lambda lib: (lambda x: lib.sigmoid(x)),
                                   ((4,),)),
    "two_args_one_unused_in_replacement": (
        lambda lib: (lambda x, y: lib.neg(x) + lib.relu(y) + lib.neg(y) + lib.relu(x)),
        lambda lib: (lambda x, y: lib.neg(x) + lib.relu(y)), lambda lib: (lambda x, y: lib.relu(x)), ((4,), (4,))),
    "literal_must_equal": (lambda lib: (lambda x: (x + 1) * (x + 2)), lambda lib: (lambda x: x + 1),
                           lambda lib: (lambda x: x - 1), ((4,),)),
    "method_and_kwargs": (lambda lib: (lambda x: x.sum(dim=1, keepdim=True).exp() + x.sum(dim=0).exp().sum()),
                          lambda lib: (lambda x: x.sum(dim=1, keepdim=True).exp()),
                          lambda lib: (lambda x: x.amax(dim=1, keepdim=True)), ((3, 4),)),
    "placeholder_used_twice": (lambda lib: (lambda x, y: x * x + x * y),
                               lambda lib: (lambda a: a * a), lambda lib: (lambda a: a.square()), ((4,), (4,))),
}


def _rewrite(lib, case):
    make, pattern, replacement, _ = CASES[case]
    gm = lib.fx.symbolic_trace(make(lib))
    matches = _rewriter(lib).replace_pattern(gm, pattern(lib), replacement(lib))
    return gm, matches


@pytest.mark.parametrize("case", sorted(CASES))
def test_replace_pattern_matches_and_rewrites_like_torch(case):
    t_gm, t_matches = _rewrite(torch, case)
    e_gm, e_matches = _rewrite(ember, case)
    assert _matches(e_matches) == _matches(t_matches)
    assert _shape(e_gm) == _shape(t_gm)
    rng = np.random.default_rng(2)
    arrays = [rng.standard_normal(s).astype(np.float32) for s in CASES[case][3]]
    np.testing.assert_allclose(_values(ember, e_gm, *arrays), _values(torch, t_gm, *arrays), rtol=1e-5, atol=1e-6)


def test_replace_pattern_with_filters_and_ignore_literals_like_torch():
    def run(lib):
        gm = lib.fx.symbolic_trace(lambda x: (x + 1) * (x + 2) + (x + 3))
        # with literals ignored, ``x + 2`` also matches the final ``mul + add_2``; the filter keeps the matches
        # whose argument is the input itself
        on_input = lambda match, graph, pattern: match.placeholder_nodes[0].op == "placeholder"  # noqa: E731
        results = _rewriter(lib).replace_pattern_with_filters(
            gm, lambda x: x + 2, lambda x: x * 3, match_filters=[on_input], ignore_literals=True)
        return gm, [(r.anchor.name, [n.name for n in r.replacements]) for r in results]

    (t_gm, t_results), (e_gm, e_results) = run(torch), run(ember)
    assert e_results == t_results and len(e_results) == 3
    assert _shape(e_gm) == _shape(t_gm)


def test_replace_pattern_refuses_mismatched_arguments():
    gm = efx.symbolic_trace(lambda x, y: ember.relu(x) + y)
    with pytest.raises(ValueError, match="pattern takes 2 arguments but the replacement takes 1"):
        efx.replace_pattern(gm, lambda a, b: ember.relu(a) + b, lambda a: a)
    with pytest.raises(ValueError, match="argument 'b' is unused"):
        efx.replace_pattern(gm, lambda a, b: ember.relu(a), lambda a, b: a)


# ---- ShapeProp -------------------------------------------------------------------------------------------
def test_shape_prop_records_torchs_tensor_meta():
    def run(lib):
        shape_prop = importlib.import_module(f"{lib.__name__}.fx.passes.shape_prop")
        gm = lib.fx.symbolic_trace(lambda x: (x.transpose(0, 1), x.chunk(2, dim=0), x.shape[0] + 1))
        x = lib.zeros(4, 3, requires_grad=True)
        shape_prop.ShapeProp(gm).propagate(x)
        rows = []
        for node in gm.graph.nodes:
            meta = node.meta.get("tensor_meta")
            flat = meta if isinstance(meta, (tuple, list)) and not hasattr(meta, "_fields") else [meta]
            rows.append((node.name, node.meta["type"].__name__, [
                None if m is None or not hasattr(m, "_fields") else
                (tuple(m.shape), str(m.dtype).split(".")[-1], m.requires_grad, tuple(m.stride),
                 str(m.memory_format).split(".")[-1], m.is_quantized, m.qparams) for m in flat]))
        return rows

    t_rows, e_rows = run(torch), run(ember)
    normalize = lambda rows: [(n, "Tensor" if t == "Tensor" else t, m) for n, t, m in rows]  # noqa: E731
    assert normalize(e_rows) == normalize(t_rows)


def test_shape_prop_names_the_failing_node():
    from ember.fx.passes.shape_prop import ShapeProp
    gm = efx.symbolic_trace(lambda x: x @ x)
    with pytest.raises(RuntimeError, match="ShapeProp error for: node=%matmul"):
        ShapeProp(gm).propagate(ember.zeros(2, 3))


# ---- concrete_args --------------------------------------------------------------------------------------------
def _specialized(lib):
    def f(x, flag, n=None, scale=2.0):
        if flag:
            x = x * scale
        if n is not None:
            x = x + n
        return x
    return lib.fx.symbolic_trace(f, concrete_args={"flag": True, "n": None, "scale": 3.0})


def test_concrete_args_keep_placeholders_and_assertions_like_torch():
    t_gm, e_gm = _specialized(torch), _specialized(ember)
    assert _shape(e_gm) == _shape(t_gm)
    for lib, gm in ((torch, t_gm), (ember, e_gm)):
        assert gm(lib.ones(2), True, None, 3.0).tolist() == [3.0, 3.0]
        for flag, n, scale, name in ((False, None, 3.0, "flag"), (True, 1.0, 3.0, "n"), (True, None, 2.0, "scale")):
            with pytest.raises(AssertionError, match=f"{name} has been specialized to have value"):
                gm(lib.ones(2), flag, n, scale)
        gm.graph.eliminate_dead_code()
    assert [n.name for n in e_gm.graph.nodes] == [n.name for n in t_gm.graph.nodes]
