"""``torch.fx.Interpreter``: runs a GraphModule node by node; subclass it and override ``run_node`` or the
per-opcode methods (``call_module``, ``call_function``, ...) to observe or change execution.

Example:
    >>> import ember, ember.fx as fx
    >>> gm = fx.symbolic_trace(ember.nn.Sequential(ember.nn.Linear(3, 2), ember.nn.ReLU()))
    >>> x = ember.randn(4, 3)
    >>> bool((fx.Interpreter(gm).run(x) == gm(x)).all())
    True
"""
from __future__ import annotations

from typing import Any, Iterator

from ember.fx.graph import Graph
from ember.fx.node import Node, map_arg
from ember.nn.modules.module import Module


class Interpreter:
    """Execute ``module.graph`` (or ``graph``) on concrete values; ``env`` maps each node to its value.
    With ``garbage_collect_values`` a value is dropped after its last use, as in torch.fx."""

    def __init__(self, module: Module, garbage_collect_values: bool = True, graph: Graph | None = None) -> None:
        self.module = module
        self.submodules = dict(module.named_modules())
        self.graph = graph if graph is not None else module.graph
        self.env: dict[Node, Any] = {}
        self.garbage_collect_values = garbage_collect_values
        self.user_to_last_uses: dict[Node, list[Node]] = {}
        if garbage_collect_values:
            seen: set = set()
            for node in reversed(self.graph.nodes):  # the last user of a value is the first met backwards
                for used in node.all_input_nodes:
                    if used not in seen:
                        seen.add(used)
                        self.user_to_last_uses.setdefault(node, []).append(used)
        self.args_iter: Iterator[Any] = iter(())

    def run(self, *args: Any, initial_env: dict | None = None, enable_io_processing: bool = True) -> Any:
        self.env = dict(initial_env or {})
        self.args_iter = iter(args)
        for node in self.graph.nodes:
            if node in self.env:
                continue
            self.env[node] = self.run_node(node)
            if self.garbage_collect_values:
                for used in self.user_to_last_uses.get(node, ()):
                    self.env.pop(used, None)
            if node.op == "output":
                return self.env[node]
        return None

    def run_node(self, n: Node) -> Any:
        args, kwargs = self.fetch_args_kwargs_from_env(n)
        return getattr(self, n.op)(n.target, args, kwargs)

    # ---- one method per opcode ------------------------------------------------------------------
    def placeholder(self, target: str, args: tuple, kwargs: dict) -> Any:
        try:
            return next(self.args_iter)
        except StopIteration:
            if args:
                return args[0]
            raise RuntimeError(f"Expected positional argument for parameter {target}, but one was not passed in!")

    def get_attr(self, target: str, args: tuple, kwargs: dict) -> Any:
        return self.fetch_attr(target)

    def call_function(self, target: Any, args: tuple, kwargs: dict) -> Any:
        return target(*args, **kwargs)

    def call_method(self, target: str, args: tuple, kwargs: dict) -> Any:
        self_obj, *rest = args
        return getattr(self_obj, target)(*rest, **kwargs)

    def call_module(self, target: str, args: tuple, kwargs: dict) -> Any:
        return self.fetch_attr(target)(*args, **kwargs)

    def output(self, target: str, args: tuple, kwargs: dict) -> Any:
        return args[0]

    # ---- helpers --------------------------------------------------------------------------------
    def fetch_attr(self, target: str) -> Any:
        obj: Any = self.module
        for i, part in enumerate(target.split(".")):
            if not hasattr(obj, part):
                raise RuntimeError(f"Node referenced nonexistent target {'.'.join(target.split('.')[:i + 1])}")
            obj = getattr(obj, part)
        return obj

    def fetch_args_kwargs_from_env(self, n: Node) -> tuple[tuple, dict]:
        return self.map_nodes_to_values(n.args, n), self.map_nodes_to_values(n.kwargs, n)

    def map_nodes_to_values(self, args: Any, n: Node) -> Any:
        def load(node: Node) -> Any:
            if node not in self.env:
                raise RuntimeError(f"Node {n} referenced nonexistent value {node}! Run Graph.lint() to diagnose "
                                   "such issues")
            return self.env[node]
        return map_arg(args, load)
