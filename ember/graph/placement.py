"""Device placement for define-then-run graphs: which process (rank) runs each node.

``with ember.graph.device("rank:1"):`` places every graph value created inside it - placeholders,
Variables, op outputs - on rank 1 (its ``Value.rank``). The spellings:

* ``"rank:N"`` (or the int ``N``) - process ``N`` of the ``ember.distributed`` job;
* ``"cpu"``, ``"cpu:N"`` - each process of an MPI job drives one CPU device, so ``cpu:N`` is rank ``N``
  (``"cpu"`` is ``cpu:0``), which lets TF1 lecture code written with ``tf.device("/cpu:1")`` run;
* ``None`` - no placement: the value goes to the session's ``default_rank`` (0 unless told).

Placements nest (the innermost wins). Rules applied by the graph builders, as in TF1:

* gradient nodes made by :func:`ember.graph.gradients` are colocated with the forward node they
  differentiate (TF's ``colocate_gradients_with_ops=True``), whatever scope ``gradients`` runs in;
* a Variable lives where it was created; ``assign``/``assign_add``/``assign_sub`` run there;
* constants are replicated (every process built the same graph), so they are never sent.

``ember.compile`` ignores placement (it traces one process's computation).

Example:
    >>> import ember, ember.graph as G
    >>> G.reset_default_graph()
    >>> with G.device("rank:1"):
    ...     x = G.placeholder((2,), ember.float64)
    >>> x._data.rank, parse_device("cpu:0"), parse_device(None)
    (1, 0, None)
"""
from __future__ import annotations

import contextlib
import re
from typing import Any, Iterator

_STACK: list = []  # the placements in force, innermost last (None: unplaced)
_SPEC = re.compile(r"^/?(?:device:)?(rank|cpu)(?::(\d+))?$")


def parse_device(spec: Any) -> int | None:
    """The rank a placement spec names (None for no placement); ValueError for other spellings."""
    if spec is None:
        return None
    if isinstance(spec, bool):
        raise TypeError(f"ember.graph.device: expected 'rank:N', 'cpu', 'cpu:N', an int or None, got {spec!r}")
    if isinstance(spec, int):
        if spec < 0:
            raise ValueError(f"ember.graph.device({spec}): ranks are >= 0")
        return spec
    text = str(spec).strip().lower()
    match = _SPEC.match(text)
    if match is None:
        raise ValueError(
            f"ember.graph.device({spec!r}): a graph placement names a process of the ember.distributed job: "
            "'rank:N' (or 'cpu:N', the N-th process's CPU), 'cpu' (= rank 0), an int N, or None. GPUs and "
            "'/job:.../task:N' names are not supported; launch one process per device with "
            "`python -m ember.distributed.run -n N script.py` and place nodes with 'rank:N'.")
    return int(match.group(2) or 0)


@contextlib.contextmanager
def device(spec: Any) -> Iterator[int | None]:
    """Place the graph values created inside on the process ``spec`` names (see the module doc)."""
    rank = parse_device(spec)
    _STACK.append(rank)
    try:
        yield rank
    finally:
        _STACK.pop()


@contextlib.contextmanager
def placed(rank: int | None) -> Iterator[None]:
    """Exactly ``rank`` (None: unplaced) inside, overriding outer scopes; used for colocation."""
    _STACK.append(rank)
    try:
        yield
    finally:
        _STACK.pop()


def current_rank() -> int | None:
    """The placement new graph values get (None outside every ``device`` scope)."""
    return _STACK[-1] if _STACK else None


def node_rank(node: Any) -> int | None:
    """The placement recorded for ``node`` (that of its outputs; an assign's is its Variable's)."""
    if node.op.side_effect:
        return node.inputs[0].rank
    return node.outputs[0].rank if node.outputs else None


def colocate_with(node: Any) -> Any:
    """A scope creating values on ``node``'s rank (exactly, unplaced included)."""
    return placed(node_rank(node))


def describe(rank: int | None) -> str:
    return "unplaced" if rank is None else f"rank:{rank}"
