"""Editing fx graphs (insert, erase, replace_all_uses_with, recompile), lint, print_tabular, Interpreter,
and what generated code refuses to paste, against torch 2.13 where torch has the same behaviour."""
from __future__ import annotations

import operator

import numpy as np
import pytest

import ember
import ember.fx as efx

torch = pytest.importorskip("torch")
import torch.fx  # noqa: E402

LIBS = {"ember": ember, "torch": torch}


def _model(lib):
    class M(lib.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1 = lib.nn.Linear(3, 4)
            self.fc2 = lib.nn.Linear(4, 2)

        def forward(self, x):
            return self.fc2(lib.relu(self.fc1(x))) + x.sum(dim=1, keepdim=True)

    return M()


def _edit(lib):
    """Swap relu for sigmoid, add a node after fc2, drop a dead node: the tutorials' moves."""
    gm = lib.fx.symbolic_trace(_model(lib))
    graph = gm.graph
    for node in graph.nodes:
        if node.op == "call_function" and node.target is lib.relu:
            with graph.inserting_after(node):
                new = graph.call_function(lib.sigmoid, node.args)
            node.replace_all_uses_with(new)
            graph.erase_node(node)
        if node.op == "call_module" and node.target == "fc2":
            with graph.inserting_after(node):
                doubled = graph.call_function(operator.mul, (node, 2.0))
            node.replace_all_uses_with(doubled, delete_user_cb=lambda user: user is not doubled)
    with graph.inserting_before(next(iter(graph.nodes)).next):
        graph.call_method("exp", (next(iter(graph.nodes)),))  # dead: eliminated below
    graph.eliminate_dead_code()
    graph.lint()
    gm.recompile()
    return gm


def test_edited_graph_matches_torch_edit():
    torch.manual_seed(1)
    t_gm = _edit(torch)
    e_gm = _edit(ember)
    e_gm.load_state_dict({k: ember.tensor(v.detach().numpy()) for k, v in t_gm.state_dict().items()})
    assert [(n.op, n.name) for n in e_gm.graph.nodes] == [(n.op, n.name) for n in t_gm.graph.nodes]
    x = np.random.default_rng(0).standard_normal((5, 3)).astype(np.float32)
    np.testing.assert_allclose(e_gm(ember.tensor(x)).detach().numpy(), t_gm(torch.tensor(x)).detach().numpy(), rtol=1e-5,
                               atol=1e-6)
    assert "sigmoid" in e_gm.code and "relu" not in e_gm.code and "exp" not in e_gm.code


def test_editing_one_graph_module_leaves_another_alone():
    first = efx.symbolic_trace(_model(ember))
    second = efx.symbolic_trace(_model(ember))
    x = ember.randn(2, 3)
    before = second(x).detach().numpy().copy()
    for node in first.graph.nodes:
        if node.op == "output":
            node.args = (node.args[0].args[0],)  # return fc2 + nothing: fc2's output only
    first.graph.eliminate_dead_code()
    first.recompile()
    np.testing.assert_array_equal(second(x).detach().numpy(), before)
    assert first.code != second.code


def _errors(lib):
    out = []
    graph = lib.fx.symbolic_trace(_model(lib)).graph
    fc1 = next(n for n in graph.nodes if n.op == "call_module")
    try:
        graph.erase_node(fc1)
    except RuntimeError as error:
        out.append(str(error).split(" users")[0])
    graph = lib.fx.Graph()
    x = graph.placeholder("x")
    late = graph.call_method("neg", (x,))
    early = graph.call_method("abs", (late,))
    graph.output(early)
    late.prepend(early)  # move abs before its input
    try:
        graph.lint()
    except RuntimeError as error:
        out.append(str(error).split("!")[0])
    return out


def test_erase_with_users_and_lint_errors_as_torch():
    assert _errors(ember) == _errors(torch)
    assert len(_errors(ember)) == 2


def _tabular_rows(lib):
    gm = lib.fx.symbolic_trace(_model(lib))
    return [(n.op, n.name, str(n.args), str(n.kwargs)) for n in gm.graph.nodes]


def test_print_tabular_lists_every_node(capsys):
    efx.symbolic_trace(_model(ember)).graph.print_tabular()
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["opcode", "name", "target", "args", "kwargs"]
    assert set(lines[1]) <= {"-", " "}
    rows = _tabular_rows(ember)
    assert _tabular_rows(ember) == _tabular_rows(torch)
    assert len(lines) == 2 + len(rows)
    for line, (op, name, args, kwargs) in zip(lines[2:], rows):
        assert line.split()[:2] == [op, name] and args in line and line.endswith(kwargs)


class _CountingInterpreter(efx.Interpreter):
    def __init__(self, module):
        super().__init__(module)
        self.seen = []

    def run_node(self, n):
        self.seen.append(n.op)
        return super().run_node(n)


def test_interpreter_runs_the_graph_node_by_node():
    gm = efx.symbolic_trace(_model(ember))
    x = ember.randn(4, 3)
    interp = _CountingInterpreter(gm)
    np.testing.assert_array_equal(interp.run(x).detach().numpy(), gm(x).detach().numpy())
    assert interp.seen == [n.op for n in gm.graph.nodes]
    assert interp.env == {}  or all(n.op == "output" for n in interp.env)  # values dropped after last use


def test_generated_code_refuses_unchecked_strings():
    graph = efx.Graph()
    x = graph.placeholder("x")
    with pytest.raises(ValueError, match="identifier"):
        graph.call_method("relu(); import os; os.getcwd", (x,))
    with pytest.raises(ValueError, match="neither an identifier"):
        graph.get_attr("weight; import os")
    with pytest.raises(ValueError, match="identifier"):
        graph.placeholder("y=__import__('os')")
    sneaky = graph.create_node("call_function", operator.add, (x, "'; raise SystemExit #"),
                               name="total; import os")
    graph.output(sneaky)
    gm = efx.GraphModule(ember.nn.Module(), graph)
    assert gm("a") == "a'; raise SystemExit #"  # the string stayed a literal
    assert sneaky.name == "total__import_os"
    weird = efx.Graph()
    y = weird.placeholder("y")
    weird.output(weird.call_function(operator.mul, (y, float("inf"))))
    assert efx.GraphModule(ember.nn.Module(), weird)(2.0) == float("inf")  # inf is bound, not pasted as `inf`


def test_graph_module_from_dict_root_and_submodule_edits():
    graph = efx.Graph()
    x = graph.placeholder("x")
    h = graph.call_module("layers.0", (x,))
    graph.output(graph.call_function(ember.relu, (h,)))
    layer = ember.nn.Linear(3, 3)
    gm = efx.GraphModule({"layers.0": layer}, graph, "Built")
    assert type(gm).__name__ == "Built"
    x_value = ember.randn(2, 3)
    np.testing.assert_array_equal(gm(x_value).detach().numpy(), ember.relu(layer(x_value)).detach().numpy())
    assert gm.add_submodule("extra.head", ember.nn.Linear(3, 1))
    gm.delete_all_unused_submodules()
    assert [name for name, _ in gm.named_modules()] == ["", "layers", "layers.0"]
    with pytest.raises(RuntimeError, match="was not provided"):
        efx.GraphModule({}, graph)
