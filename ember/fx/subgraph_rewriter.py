"""``torch.fx.subgraph_rewriter``: replace every non-overlapping occurrence of a pattern in a GraphModule
with a replacement graph (``replace_pattern``), optionally keeping only matches that pass filters.

The pattern and the replacement are functions (or GraphModules) taking the same number of arguments; the
replacement's arguments are bound, in order, to the graph nodes the pattern's arguments matched.

Example:
    >>> import ember, ember.fx as fx
    >>> gm = fx.symbolic_trace(lambda x, y: ember.cat([x, y]).sum())
    >>> matches = replace_pattern(gm, lambda a, b: ember.cat([a, b]), lambda a, b: ember.stack([a, b]))
    >>> len(matches), [n.target.__name__ for n in gm.graph.nodes if n.op == "call_function"]
    (1, ['stack'])
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, NamedTuple

from ember.fx.graph import Graph
from ember.fx.graph_module import GraphModule
from ember.fx.node import Node
from ember.fx.passes.utils.matcher_utils import InternalMatch, SubgraphMatcher
from ember.fx.tracer import symbolic_trace


class Match(NamedTuple):
    """Where a pattern was found: the anchor (the node its result came from) and pattern -> graph nodes."""
    anchor: Node
    nodes_map: dict


@dataclass
class ReplacedPatterns:
    """A match and the nodes put in its place (``replace_pattern_with_filters`` returns these)."""
    anchor: Node
    nodes_map: dict
    replacements: list


def _graph_of(value: Any, what: str) -> Graph:
    if isinstance(value, GraphModule):
        return value.graph
    if isinstance(value, Graph):
        return value
    if callable(value):
        return symbolic_trace(value).graph
    raise TypeError(f"replace_pattern: the {what} must be a function, a GraphModule or a Graph, "
                    f"got {type(value).__name__}")


def _insert_point(graph: Graph, match: InternalMatch) -> Node:
    """Before the first user of a returned node, else right after the last returned node."""
    users = {user for node in match.returning_nodes for user in node.users}
    for node in graph.nodes:
        if node in users:
            return node
    following = None
    for node in reversed(graph.nodes):
        if node in match.returning_nodes:
            break
        following = node
    if following is None:
        raise RuntimeError("replace_pattern: the matched pattern has no node after it to insert before")
    return following


def _replace(gm: GraphModule, pattern: Any, replacement: Any,
             match_filters: list[Callable[[InternalMatch, Graph, Graph], bool]] | None = None,
             ignore_literals: bool = False) -> list[ReplacedPatterns]:
    graph = gm.graph
    pattern_graph = _graph_of(pattern, "pattern")
    replacement_graph = _graph_of(replacement, "replacement")
    matcher = SubgraphMatcher(pattern_graph, ignore_literals=ignore_literals)
    matches = [m for m in matcher.match(graph)
               if all(keep(m, graph, pattern_graph) for keep in (match_filters or ()))]
    replacement_placeholders = [n for n in replacement_graph.nodes if n.op == "placeholder"]
    replaced_by: dict[Node, Node] = {}  # a returned node of an earlier match -> its replacement
    results = []
    for match in matches:
        if len(match.placeholder_nodes) != len(replacement_placeholders):
            raise ValueError(f"replace_pattern: the pattern takes {len(match.placeholder_nodes)} arguments but the "
                             f"replacement takes {len(replacement_placeholders)}; give both the same arguments")
        value_map: dict[Node, Any] = {}
        for placeholder, bound in zip(replacement_placeholders, match.placeholder_nodes):
            value_map[placeholder] = replaced_by.get(bound, bound) if isinstance(bound, Node) else bound
        with graph.inserting_before(_insert_point(graph, match)):
            copied = graph.graph_copy(replacement_graph, value_map)
        copied = (copied,) if isinstance(copied, Node) else tuple(copied)
        if len(copied) != len(match.returning_nodes):
            raise ValueError(f"replace_pattern: the pattern returns {len(match.returning_nodes)} values but the "
                             f"replacement returns {len(copied)}")
        for returned, new in zip(match.returning_nodes, copied):
            returned.replace_all_uses_with(new)
            replaced_by[returned] = new
        for pattern_node in reversed(list(pattern_graph.nodes)):
            if pattern_node.op not in ("placeholder", "output"):
                graph.erase_node(match.nodes_map[pattern_node])
        added = [v for k, v in value_map.items() if k.op != "placeholder"]
        results.append(ReplacedPatterns(match.anchors[0], match.nodes_map, added))
    _install_replacement_attributes(gm, replacement)
    gm.recompile()
    return results


def _install_replacement_attributes(gm: GraphModule, replacement: Any) -> None:
    """Submodules and tensors the replacement's get_attr/call_module nodes name, copied into ``gm``."""
    if not isinstance(replacement, GraphModule):
        return
    for node in replacement.graph.nodes:
        if node.op in ("get_attr", "call_module"):
            owner: Any = replacement
            for part in node.target.split("."):
                owner = getattr(owner, part)
            if not _has_attribute(gm, node.target):
                gm._install(node.target, owner)


def _has_attribute(module: Any, target: str) -> bool:
    for part in target.split("."):
        if not hasattr(module, part):
            return False
        module = getattr(module, part)
    return True


def replace_pattern(gm: GraphModule, pattern: Any, replacement: Any) -> list[Match]:
    """Replace each non-overlapping occurrence of ``pattern`` in ``gm`` with ``replacement``; returns the matches."""
    return [Match(anchor=r.anchor, nodes_map=r.nodes_map) for r in _replace(gm, pattern, replacement)]


def replace_pattern_with_filters(gm: GraphModule, pattern: Any, replacement: Any,
                                 match_filters: list | None = None,
                                 ignore_literals: bool = False) -> list[ReplacedPatterns]:
    """``replace_pattern`` keeping only matches for which every ``filter(match, graph, pattern_graph)`` holds."""
    return _replace(gm, pattern, replacement, match_filters, ignore_literals)


__all__ = ["Match", "ReplacedPatterns", "replace_pattern", "replace_pattern_with_filters"]
