"""``torch.export``: ``export(module, args)`` returns an ``ExportedProgram`` built on ember.fx.

The program holds a symbolically traced fx graph (module-level: ember.nn layers stay ``call_module`` nodes, where
torch.export lowers everything to ATen ops and lifts parameters to inputs); ``.module()`` gives a GraphModule that
takes the user's inputs, ``.graph`` / ``.graph_module`` the graph, ``run_decompositions()`` returns the program
unchanged (there is no lower op set to decompose into), and the graph never specializes shapes, so any
``dynamic_shapes`` hold. docs/pytorch-compat.md says more.

Example:
    >>> import ember
    >>> m = ember.nn.Sequential(ember.nn.Linear(3, 2), ember.nn.ReLU())
    >>> ep = ember.export.export(m, (ember.randn(4, 3),))
    >>> ep.graph_signature.user_inputs, ep.graph_signature.parameters
    (['input_1'], ['0.weight', '0.bias'])
    >>> x = ember.randn(5, 3)
    >>> bool((ep.module()(x) == m(x)).all())
    True
"""
from __future__ import annotations

import inspect
from typing import Any, NamedTuple

from ember.fx.graph import Graph
from ember.fx.graph_module import GraphModule
from ember.fx.tracer import Tracer
from ember.nn.modules.module import Module

__all__ = ["export", "save", "load", "ExportedProgram", "ExportGraphSignature", "InputSpec", "OutputSpec", "Dim"]


class InputSpec(NamedTuple):
    kind: str  # "USER_INPUT", "PARAMETER", "BUFFER"
    name: str
    target: str | None


class OutputSpec(NamedTuple):
    kind: str  # "USER_OUTPUT"
    name: str


class ExportGraphSignature:
    """The user's inputs (the graph's placeholders) and the parameters and buffers the program reads. Unlike
    torch.export, parameters and buffers are not lifted to graph inputs: the GraphModule holds them."""

    def __init__(self, input_specs: list[InputSpec], output_specs: list[OutputSpec]) -> None:
        self.input_specs = input_specs
        self.output_specs = output_specs

    @property
    def user_inputs(self) -> list[str]:
        return [s.name for s in self.input_specs if s.kind == "USER_INPUT"]

    @property
    def parameters(self) -> list[str]:
        return [s.target for s in self.input_specs if s.kind == "PARAMETER"]

    @property
    def buffers(self) -> list[str]:
        return [s.target for s in self.input_specs if s.kind == "BUFFER"]

    @property
    def user_outputs(self) -> list[str]:
        return [s.name for s in self.output_specs]

    def __str__(self) -> str:
        lines = ["# inputs"] + [f"{s.name}: {s.kind}" + (f" target={s.target!r}" if s.target else "")
                                for s in self.input_specs]
        return "\n".join(lines + ["", "# outputs"] + [f"{s.name}: {s.kind}" for s in self.output_specs])


class ExportedProgram:
    """What ``export`` returns. Not callable: run ``program.module()(...)``, as in PyTorch."""

    def __init__(self, graph_module: Module, example_inputs: tuple, signature: ExportGraphSignature) -> None:
        self._graph_module = graph_module
        self.example_inputs = example_inputs
        self.graph_signature = signature
        self.dialect = "EMBER_FX"
        self.range_constraints: dict = {}

    @property
    def graph_module(self) -> Module:
        return self._graph_module

    @property
    def graph(self) -> Graph:
        return self._graph_module.graph

    def module(self) -> Module:
        """A GraphModule taking the user's inputs (after ``export.load``: the loaded graph's module) (parameters are its own attributes, shared with the original)."""
        return self._graph_module

    def run_decompositions(self, decomp_table: dict | None = None, **_: Any) -> "ExportedProgram":
        """Nothing to decompose: the graph's calls are ember functions and modules already (returns ``self``)."""
        return self

    @property
    def state_dict(self) -> dict:
        """A dict attribute, as torch's (not a method)."""
        return self._graph_module.state_dict()

    def named_parameters(self) -> Any:
        return self._graph_module.named_parameters()

    def parameters(self) -> Any:
        return self._graph_module.parameters()

    def named_buffers(self) -> Any:
        return self._graph_module.named_buffers()

    def buffers(self) -> Any:
        return self._graph_module.buffers()

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("Unable to call ExportedProgram directly. You should use `exported_program.module()` "
                           "instead.")

    def __str__(self) -> str:
        code = "\n".join(f"    {line}" for line in self._graph_module.print_readable(False).splitlines())
        return f"ExportedProgram:\n{code}\nGraph signature:\n" + "\n".join(
            f"    {line}" for line in str(self.graph_signature).splitlines())


class Dim:
    """``torch.export.Dim(name, min=, max=)``: accepted in ``dynamic_shapes``; ember's graphs keep every size
    symbolic, so no constraint is needed or checked."""

    def __init__(self, name: str, *, min: int | None = None, max: int | None = None) -> None:  # noqa: A002
        self.__name__ = name
        self.min, self.max = min, max


def export(mod: Module, args: tuple, kwargs: dict | None = None, *, dynamic_shapes: Any = None,
           strict: bool = False, preserve_module_call_signature: tuple = ()) -> ExportedProgram:
    """Trace ``mod`` into an ExportedProgram (see the module docstring for what differs from torch.export)."""
    if not isinstance(mod, Module):
        raise ValueError(f"export: expected an nn.Module, got {type(mod).__name__}; wrap a function in a Module")
    if not isinstance(args, tuple):
        raise ValueError(f"export: args must be a tuple of example inputs, got {type(args).__name__}")
    kwargs = dict(kwargs or {})
    params = list(inspect.signature(type(mod).forward).parameters)[1:]
    unknown = sorted(set(kwargs) - set(params))
    if unknown:
        raise TypeError(f"export: {type(mod).__name__}.forward takes no argument(s) {unknown}")
    tracer = Tracer()
    graph = tracer.trace(mod)
    gm = GraphModule(tracer.root, graph, type(mod).__name__)
    parameter_names = {id(p): n for n, p in mod.named_parameters()}
    inputs = [InputSpec("PARAMETER", f"p_{n.replace('.', '_')}", n) for n in parameter_names.values()]
    inputs += [InputSpec("BUFFER", f"b_{n.replace('.', '_')}", n) for n, _ in mod.named_buffers()]
    inputs += [InputSpec("USER_INPUT", n.name, None) for n in graph.nodes if n.op == "placeholder"]
    outputs = []
    for node in graph.nodes:
        if node.op == "output":
            result = node.args[0]
            leaves = result if isinstance(result, (tuple, list)) else [result]
            outputs = [OutputSpec("USER_OUTPUT", getattr(v, "name", repr(v))) for v in leaves]
    return ExportedProgram(gm, (args, kwargs), ExportGraphSignature(inputs, outputs))


from ember.export.serialization import load, save  # noqa: E402  (serialization reads this module's classes)
