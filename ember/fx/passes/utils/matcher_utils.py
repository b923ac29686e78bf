"""``torch.fx.passes.utils.matcher_utils``: find every place a pattern graph occurs in a larger graph.

Matching follows use-def edges backwards from the pattern's returned nodes (its anchors): two nodes match
when their opcodes and targets are equal and their arguments match pairwise (nodes recursively, literals by
type and value); a pattern placeholder matches any argument, the same one each time it is used. A match is
kept only when it is self-contained (its inner nodes have no users outside it), fusing it would not make a
cycle, and (by default) it does not overlap an earlier match.

Example:
    >>> import ember, ember.fx as fx
    >>> graph = fx.symbolic_trace(lambda x: ember.relu(x + 1) * 2).graph
    >>> pattern = fx.symbolic_trace(lambda a: ember.relu(a + 1)).graph
    >>> [m.anchors[0].name for m in SubgraphMatcher(pattern).match(graph)]
    ['relu']
"""
from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

from ember.fx.graph import Graph
from ember.fx.node import Node
from ember.tensor import Tensor


@dataclass
class InternalMatch:
    """One occurrence: pattern node -> graph node, plus the graph nodes standing for the pattern's
    placeholders and for its returned values (in the pattern's order)."""
    anchors: list
    nodes_map: dict = field(default_factory=dict)
    placeholder_nodes: list = field(default_factory=list)
    returning_nodes: list = field(default_factory=list)
    name_node_map: dict = field(default_factory=dict)

    def __copy__(self) -> "InternalMatch":
        return InternalMatch(self.anchors, dict(self.nodes_map), list(self.placeholder_nodes),
                             list(self.returning_nodes))


def _attribute(owner: Any, target: str) -> Any:
    for part in target.split("."):
        owner = getattr(owner, part)
    return owner


class SubgraphMatcher:
    """``SubgraphMatcher(pattern).match(graph)`` -> list of InternalMatch (torch.fx's options)."""

    def __init__(self, pattern: Graph, match_output: bool = False, match_placeholder: bool = False,
                 remove_overlapping_matches: bool = True, ignore_literals: bool = False) -> None:
        nodes = list(pattern.nodes)
        if not nodes:
            raise ValueError("SubgraphMatcher cannot be initialized with an empty pattern")
        for node in nodes:
            if node.op == "placeholder" and not node.users:
                raise ValueError(f"SubgraphMatcher: the pattern's argument {node.target!r} is unused; a pattern "
                                 "takes only the arguments it uses")
            if node.op not in ("output", "placeholder") and not node.users:
                raise ValueError(f"SubgraphMatcher cannot be initialized with a pattern with dead code: node "
                                 f"{node.name} is unused; remove it from the pattern")
        self.pattern = pattern
        self.match_output = match_output
        self.match_placeholder = match_placeholder
        self.remove_overlapping_matches = remove_overlapping_matches
        self.ignore_literals = ignore_literals
        self.pattern_placeholder_nodes = [n for n in nodes if n.op == "placeholder"]
        output = nodes[-1]
        self.pattern_returning_nodes: list[Node] = output.all_input_nodes
        self.pattern_anchors = ([output] if match_output else
                                [n for n in output.all_input_nodes if len(n.users) == 1])

    # ---- comparing one pair -------------------------------------------------------------------
    def _match_attributes(self, pn: Node, gn: Node) -> bool:
        if pn.graph.owning_module is None or gn.graph.owning_module is None:
            raise RuntimeError("SubgraphMatcher: matching get_attr nodes needs graphs owned by GraphModules "
                               "(pass the pattern as a GraphModule, or trace it)")
        pattern_value = _attribute(pn.graph.owning_module, pn.target)
        graph_value = _attribute(gn.graph.owning_module, gn.target)
        if type(pattern_value) is not type(graph_value):
            return False
        if isinstance(pattern_value, Tensor):
            return True  # tensors match by kind, not by value, as in torch.fx
        raise RuntimeError(f"SubgraphMatcher: unsupported attribute type {type(pattern_value).__name__} when "
                           "matching get_attr nodes")

    def _nodes_are_equal(self, pn: Node, gn: Node) -> bool:
        if not self.match_placeholder and pn.op == "placeholder":
            return True
        if pn.op != gn.op:
            return False
        if pn.op in ("placeholder", "output"):
            return True
        if pn.op == "get_attr":
            return self._match_attributes(pn, gn)
        return pn.target == gn.target

    def _match_literals(self, pn: Any, gn: Any, match: InternalMatch) -> bool:
        if isinstance(pn, Node):
            if pn.op != "placeholder":
                return False
            if pn in match.nodes_map:
                return match.nodes_map[pn] == gn
            match.nodes_map[pn] = gn
            return True
        if isinstance(gn, Node):
            return False
        return type(gn) is type(pn) and gn == pn

    def _match_args(self, pattern_args: Any, graph_args: Any, match: InternalMatch) -> bool:
        if len(pattern_args) != len(graph_args):
            return False
        for pa, ga in zip(pattern_args, graph_args):
            if isinstance(pa, Node) and isinstance(ga, Node):
                ok = self._match_nodes(pa, ga, match)
            elif isinstance(pa, (list, tuple)) and isinstance(ga, (list, tuple)):
                ok = self._match_args(pa, ga, match)
            else:
                ok = self._match_literals(pa, ga, match) or self.ignore_literals
            if not ok:
                return False
        return True

    def _match_nodes(self, pn: Node, gn: Node, match: InternalMatch) -> bool:
        if pn in match.nodes_map:
            return match.nodes_map[pn] == gn
        if gn in match.nodes_map.values():
            return False
        if not self._nodes_are_equal(pn, gn):
            return False
        match.nodes_map[pn] = gn
        if pn.op == "placeholder":
            return True
        if len(pn.args) != len(gn.args) or list(pn.kwargs) != list(gn.kwargs):
            return False
        return self._match_args(list(pn.args) + list(pn.kwargs.values()),
                                list(gn.args) + list(gn.kwargs.values()), match)

    # ---- the whole graph ------------------------------------------------------------------------
    def _is_contained(self, nodes_map: dict) -> bool:
        inside = {gn: pn for pn, gn in nodes_map.items() if pn.op != "placeholder"}
        for gn, pn in inside.items():
            if pn in self.pattern_returning_nodes:
                continue
            if any(user not in inside for user in gn.users):
                return False  # an inner value leaks out of the pattern
        return True

    @staticmethod
    def _fusable(nodes: list[Node]) -> bool:
        """No path leaves the matched nodes and comes back (fusing them would make a cycle)."""
        inside = set(nodes)
        frontier = [user for n in nodes for user in n.users if user not in inside]
        seen: set = set()
        while frontier:
            node = frontier.pop()
            if node in seen:
                continue
            seen.add(node)
            for user in node.users:
                if user in inside:
                    return False
                frontier.append(user)
        return True

    def _without_overlaps(self, matches: list[InternalMatch]) -> list[InternalMatch]:
        kept, taken = [], set()
        for match in matches:
            inner = [gn for pn, gn in match.nodes_map.items() if pn.op not in ("placeholder", "output")]
            if any(gn in taken for gn in inner):
                continue
            kept.append(match)
            taken.update(inner)
        return kept

    def match(self, graph: Graph, node_name_match: str = "") -> list[InternalMatch]:
        candidates = [(anchor, [n for n in graph.nodes if self._nodes_are_equal(anchor, n)
                                or (node_name_match and node_name_match in n.name)])
                      for anchor in self.pattern_anchors]
        candidates = [(anchor, nodes) for anchor, nodes in candidates if nodes]
        matches: list[InternalMatch] = []

        def extend(index: int, match: InternalMatch) -> None:
            if index == len(candidates):
                match.placeholder_nodes = [match.nodes_map[pn] for pn in self.pattern_placeholder_nodes]
                match.returning_nodes = [match.nodes_map[pn] for pn in self.pattern_returning_nodes]
                matches.append(match)
                return
            anchor, nodes = candidates[index]
            for node in nodes:
                attempt = copy.copy(match)
                if self._match_nodes(anchor, node, attempt):
                    extend(index + 1, attempt)

        if candidates:
            extend(0, InternalMatch(anchors=self.pattern_anchors))
        matches = [m for m in matches if self._is_contained(m.nodes_map)]
        matches = [m for m in matches if self._fusable(
            [gn for pn, gn in m.nodes_map.items() if pn.op not in ("placeholder", "output")])]
        return self._without_overlaps(matches) if self.remove_overlapping_matches else matches


__all__ = ["InternalMatch", "SubgraphMatcher"]
