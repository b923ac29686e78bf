"""ember.viz: pictures of autograd graphs and static graphs (DOT text always; SVG/PNG through Graphviz).

Example:
    >>> import ember
    >>> x = ember.randn(3, requires_grad=True)
    >>> doc = ember.viz.draw((x * 2).sum())
    >>> doc.source.startswith("digraph")
    True
    >>> doc.render("loss.svg")  # needs the dot program  # doctest: +SKIP
"""
from ember.viz.dot import Dot
from ember.viz.draw import autograd_graph, compiled_graphs, draw, make_dot, side_by_side, static_graph
from ember.viz.tensorboard_graph import graph_def

__all__ = ["draw", "make_dot", "Dot", "autograd_graph", "static_graph", "side_by_side", "compiled_graphs", "graph_def"]
