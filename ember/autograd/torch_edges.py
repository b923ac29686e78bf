"""``grad_fn.next_functions`` in PyTorch's shape, for code that walks the graph (torchviz, tutorials).

ember records one node per op record, with one edge per input. PyTorch lists an edge only for the inputs its
derivative formula names (no index tensors, masks or conditions; no Python-number exponent), and some of its
nodes are spelled differently from ember's records: ``F.linear`` is ``AddmmBackward0`` whose edges are
``(bias, input, TBackward0(weight))``, a convolution's node always has three edges (``None`` for a missing
bias), a loss written in several ember ops shows its inputs' edges. This module builds that view *when it is
read* (recording costs nothing): :func:`torch_edges` maps a node's own edges to PyTorch's, adding stand-in
nodes (:class:`StandInNode`) where torch has a node ember does not record (the ``TBackward0`` of the weight).
Stand-ins print, name and walk like torch's nodes; hooks belong on the real nodes.

Decisions: rules exist for the ops programs walk most (linear, addmm, conv, pow, indexing, where, gather,
embedding, losses and norms recorded by :func:`record_inputs`); other nodes keep ember's edges.

Example:
    >>> import ember
    >>> x, w, b = ember.ones(2, 3, requires_grad=True), ember.ones(4, 3, requires_grad=True), ember.ones(4, requires_grad=True)
    >>> [type(f).__name__ for f, _ in ember.nn.functional.linear(x, w, b).grad_fn.next_functions]
    ['AccumulateGrad', 'AccumulateGrad', 'TBackward0']
"""
from __future__ import annotations

from typing import Any, Callable


CONVERT: Callable = lambda edge: edge  # noqa: E731 - ember.autograd.node sets it: a raw edge -> a shown pair


class StandInNode:
    """A node PyTorch records where ember has none (``TBackward0`` of a linear's weight): name and edges only.
    ``raw``: the edges are ember's (converted when read), else already ``next_functions`` pairs."""

    def __init__(self, name: str, next_functions: tuple, raw: bool = False) -> None:
        self._name, self._next, self._raw = name, next_functions, raw

    def name(self) -> str:
        return self._name

    @property
    def next_functions(self) -> tuple:
        return tuple(CONVERT(e) for e in self._next) if self._raw else self._next

    @property
    def metadata(self) -> dict:
        return {}

    def __repr__(self) -> str:
        return f"<{self._name} object at {id(self):#x}>"


_STANDIN_CLASSES: dict[str, type] = {}


def stand_in(name: str, next_functions: tuple, raw: bool = False) -> StandInNode:
    """A :class:`StandInNode` whose class is named ``name`` (``type(node).__name__``, as torchviz reads it)."""
    cls = _STANDIN_CLASSES.get(name)
    if cls is None:
        cls = _STANDIN_CLASSES[name] = type(name, (StandInNode,), {"__module__": __name__})
    return cls(name, next_functions, raw)


def _edge(t: Any) -> Any:
    if isinstance(t, tuple):  # (torch's node name, tensor): a node torch records between (LogSoftmaxBackward0)
        inner = _edge(t[1])
        return None if inner is None else (stand_in(t[0], (inner,), raw=True), 0)
    if t is None or not getattr(t, "_requires_grad", False):
        return None
    fn = t.grad_fn
    return (fn, t._output_nr) if fn is not None else (t, 0)


def record_inputs(out: Any, inputs: tuple) -> Any:
    """Give ``out``'s node PyTorch's edges: those of ``inputs`` (tensors, None, or ``(name, tensor)`` for a node
    torch has in between), in torch's order; for a composite whose last node stands for one torch node
    (``MseLossBackward0``: ``(input, target)``)."""
    node = getattr(out, "grad_fn", None)
    if node is not None and hasattr(node, "_extra"):
        node._extra().edges = tuple(_edge(t) for t in inputs)
    return out


def _drop(positions: Callable[[Any], Any]) -> Callable:
    """A rule that removes the edges at ``positions(node)`` (inputs torch's formula does not name)."""
    def rule(node: Any, edges: tuple) -> tuple:
        drop = set(positions(node))
        return tuple(e for i, e in enumerate(edges) if i not in drop)
    return rule


def _nondiff(node: Any) -> Any:
    return node.op.nondiff_inputs or ()


def _scalars(node: Any) -> Any:
    return [i for i, meta in enumerate(node.input_meta) if meta is None]


def _linear(node: Any, edges: tuple) -> tuple:
    meta = node.input_meta
    x, w = edges[0], edges[1]
    b = edges[2] if len(edges) > 2 and len(meta) > 2 and meta[2] is not None else _MISSING
    rank = len(meta[0]) if meta and meta[0] is not None else 2
    t = (stand_in("TBackward0", (w,)), 0) if w[0] is not None else w
    if rank == 2:
        return (b, x, t) if b is not _MISSING else (x, t)
    if rank > 2:
        view_x = (stand_in("ViewBackward0", (x,)), 0) if x[0] is not None else x
        inner = (b, view_x, t) if b is not _MISSING else (view_x, t)
        return ((stand_in("AddmmBackward0" if b is not _MISSING else "MmBackward0", inner), 0),)
    return edges


def _conv(node: Any, edges: tuple) -> tuple:
    """torch's ConvolutionBackward0 has (input, weight, bias) edges; None for a missing bias."""
    return edges + ((None, 0),) * (3 - len(edges)) if len(edges) < 3 else edges[:3]


_MISSING = object()
RULES: dict[str, Callable] = {
    "linear": _linear,
    "conv1d": _conv, "conv2d": _conv, "conv3d": _conv,
    "pow": _drop(_scalars), "sub": lambda node, edges: edges[1:] if node.input_meta[0] is None else edges,
    "getitem": _drop(_nondiff), "gather": _drop(_nondiff), "index_select": _drop(_nondiff),
    "embedding": _drop(_nondiff), "where": _drop(_nondiff), "masked_fill": _drop(_nondiff),
    "take_along_dim": _drop(_nondiff), "nll_loss": _drop(_nondiff),
}


def torch_edges(node: Any, edges: tuple) -> tuple:
    """PyTorch's ``next_functions`` for ``node``, given its own edges as ``next_functions`` pairs."""
    op = getattr(node, "op", None)
    rule = RULES.get(getattr(op, "name", None))
    return edges if rule is None else rule(node, edges)
