"""Render an ember graph as Python-like source (``TracedModule.code``).

Example:
    >>> import ember
    >>> print(ember.jit.trace(lambda x: (x * 2).exp(), ember.zeros(2)).code)
    def forward(x):
        _0 = ember.mul(x, 2)
        _1 = ember.exp(_0)
        return _1
"""
from __future__ import annotations

from typing import Any

from ember.graph.ir import Graph, Value


def _name(v: Value, names: dict[int, str]) -> str:
    if v.id not in names:
        names[v.id] = f"_{len([n for n in names.values() if n.startswith('_')])}"
    return names[v.id]


def _arg(x: Any, names: dict[int, str]) -> str:
    if isinstance(x, Value):
        if x.kind == "const":
            return f"const({x.type_str()})" if x.data is None or getattr(x.data, "size", 2) > 1 else repr(
                x.data.item() if hasattr(x.data, "item") else x.data)
        return _name(x, names)
    return repr(x)


def graph_code(graph: Graph, self_name: str | None = "self") -> str:
    """``def forward(...)`` with one line per node; states read as ``self.<parameter path>``."""
    names: dict[int, str] = {}
    for k, v in enumerate(graph.inputs):
        names[v.id] = v.name or f"arg{k}"
    for k, v in enumerate(graph.states):
        names[v.id] = f"{self_name}.{v.name}" if self_name and v.name else (v.name or f"state{k}")
    params = ([self_name] if self_name and graph.states else []) + [names[v.id] for v in graph.inputs]
    lines = [f"def forward({', '.join(params)}):"]
    for node in graph.nodes:
        args = [_arg(i, names) for i in node.inputs]
        args += [f"{k}={a!r}" for k, a in node.attrs.items() if not k.startswith("_")]
        outs = ", ".join(_name(o, names) for o in node.outputs) or "_"
        lines.append(f"    {outs} = ember.{node.op.name}({', '.join(args)})")
    outputs = [_arg(v, names) for v in graph.outputs]
    lines.append(f"    return {outputs[0] if len(outputs) == 1 else '(' + ', '.join(outputs) + ')'}")
    return "\n".join(lines)
