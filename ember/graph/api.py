"""Define-then-run (TensorFlow 1 style) under ember's names, on the same IR and executor as
``ember.compile``.

* :func:`placeholder` (shape, dtype) - a graph input fed at each run;
* :class:`Variable` - a tensor that persists across runs (graph state); change it only with
  :func:`assign`, :func:`assign_add`, :func:`assign_sub`, which are nodes that write the variable
  *when they run* (after the run's other nodes: reads see start-of-run values);
* :func:`group` - one node that runs several;
* :func:`gradients` (ys, xs) - symbolic gradients: new graph nodes built by the ops' vjp rules;
* :class:`Session` - ``run(fetches, feed_dict)`` executes only the subgraph the fetches need: an
  update that is not fetched does not run (the lectures' gotcha), and returns NumPy arrays;
* :func:`device` (:mod:`ember.graph.placement`) - place nodes on the processes of an
  ``ember.distributed`` job; the Session then runs each rank's part, joined by send/recv nodes
  (:mod:`ember.graph.partition`, :mod:`ember.graph.distributed_session`).

Ops on placeholders/Variables build nodes in the *default graph*: a symbolic tensor's ops go to its
graph's builder (:mod:`ember.interpreters`); ops on concrete tensors stay eager.

Example:
    >>> import numpy as np, ember, ember.graph as G
    >>> G.reset_default_graph()
    >>> x = G.placeholder((2,), ember.float64)
    >>> w = G.Variable(ember.tensor([1.0, 2.0], dtype=ember.float64))
    >>> loss = (x * w).sum()
    >>> (gw,) = G.gradients(loss, [w])
    >>> step = G.assign_sub(w, 0.5 * gw)
    >>> sess = G.Session()
    >>> sess.run(loss, {x: np.array([1.0, 1.0])}), sess.run(w)
    (array(3.), array([1., 2.]))
    >>> _ = sess.run(step, {x: np.array([1.0, 1.0])}); sess.run(w)
    array([0.5, 1.5])
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from ember import creation, dtypes, interpreters
from ember.autograd import grad_mode
from ember.graph import ops as graph_ops, placement
from ember.graph.builder import Builder, SymbolicTensor, symbolic
from ember.graph.executor import Executable, needed_nodes
from ember.graph.ir import Graph, Value, on_device, to_host
from ember.ops import dispatch
from ember.tensor import Tensor
from ember.creation import tensor

_DEFAULT: list = []


def get_default_graph() -> Graph:
    """The graph placeholders and Variables are added to (made on first use)."""
    if not _DEFAULT:
        graph = Graph("default")
        Builder(graph, trace=False)
        _DEFAULT.append(graph)
        interpreters.graph_opened()  # its tensors carry their builder (ember.interpreters): not pushed
    return _DEFAULT[0]


def reset_default_graph() -> None:
    """Forget the default graph."""
    if _DEFAULT:
        _DEFAULT.clear()
        interpreters.graph_closed()


def placeholder(shape: Sequence[int], dtype: Any = None, name: str | None = None) -> Any:
    """A graph input of fixed ``shape`` and ``dtype`` (default: the default float dtype)."""
    dt = dtypes.to_dtype(dtype) if dtype is not None else dtypes.get_default_dtype()
    graph = get_default_graph()
    return symbolic(graph.add_input(tuple(shape), dt, None, name or f"placeholder{len(graph.inputs)}"))


class Variable(SymbolicTensor):
    """A graph variable: holds its value across runs; write it with ``assign``."""

    def __new__(cls, initial_value: Any, name: str | None = None, dtype: Any = None) -> "Variable":
        init = initial_value if isinstance(initial_value, Tensor) else tensor(initial_value, dtype=dtype)
        if dtype is not None:
            init = init.to(dtypes.to_dtype(dtype))
        store = Tensor._make(on_device(init.detach()._data, init._device), init._device, False)
        graph = get_default_graph()
        value = graph.add_state(store, name or f"variable{len(graph.states)}")
        return cls._make(value, value.device, False)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        pass

    def numpy(self, *, force: bool = False) -> np.ndarray:
        return self._data.tensor._data.copy()

    def __repr__(self) -> str:
        return f"Variable({self._data.label()}: {self._data.type_str()})"


def assign(variable: Any, value: Any) -> Any:
    """A node that writes ``value`` into ``variable`` when it runs; its result is the new value."""
    target = variable._data if isinstance(variable, Tensor) else None
    if type(target) is not Value or target.kind != "state":
        raise TypeError(f"assign: the first argument must be an ember.graph.Variable, got {type(variable).__name__}")
    graph = target.graph
    new = graph.builder.value_of(value) if isinstance(value, Tensor) else graph.add_const(
        np.full(target.shape, value, dtype=target.dtype))
    with placement.placed(target.rank):  # the write runs where the Variable lives
        (out,) = graph.add_node(graph_ops.ASSIGN, (target, new), {})
    return symbolic(out)


def assign_add(variable: Any, delta: Any) -> Any:
    """``assign(variable, variable + delta)``, the addition colocated with the Variable (TF's AssignAdd)."""
    with placement.placed(variable._data.rank if isinstance(variable, Tensor) else None):
        return assign(variable, variable + delta)


def assign_sub(variable: Any, delta: Any) -> Any:
    """``assign(variable, variable - delta)``, the subtraction colocated with the Variable (TF's AssignSub)."""
    with placement.placed(variable._data.rank if isinstance(variable, Tensor) else None):
        return assign(variable, variable - delta)


def group(*tensors: Any) -> Any:
    """One node whose running runs all of ``tensors`` (e.g. several assigns)."""
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        tensors = tuple(tensors[0])
    graph = get_default_graph()
    values = tuple(graph.builder.value_of(t) for t in tensors)
    (out,) = graph.add_node(graph_ops.GROUP, values, {})
    return symbolic(out)


# ---- symbolic gradients --------------------------------------------------------------------------
class _Ctx:
    """The vjp ctx of one graph node, with symbolic tensors for its inputs and outputs."""

    def __init__(self, node: Any, needs: tuple) -> None:
        self.inputs = tuple(symbolic(i) if isinstance(i, Value) else i for i in node.inputs)
        outs = tuple(symbolic(o) for o in node.outputs)
        self.out = outs[0] if len(outs) == 1 else outs
        self.attrs = node.attrs
        self.needs = self.needs_input_grad = needs
        self.input_meta = tuple(i.shape if isinstance(i, Value) else None for i in node.inputs)
        self.saved_tensors = self.inputs


def gradients(ys: Any, xs: Sequence[Any], grad_ys: Any = None) -> list:
    """Symbolic d(sum ys)/d(xs): graph nodes built by walking the graph backward with each op's vjp.

    Returns one symbolic tensor per x (None where x does not reach ys), like ``tf.gradients``.
    Each gradient node is placed with the forward node it differentiates (TF's
    ``colocate_gradients_with_ops``), so a placed model's backward pass runs where its forward did.
    """
    ys = list(ys) if isinstance(ys, (list, tuple)) else [ys]
    xs = list(xs) if isinstance(xs, (list, tuple)) else [xs]
    graph = ys[0]._data.graph
    y_values = [y._data for y in ys]
    x_values = [x._data for x in xs]
    # Values on a path from some x: only those get gradients.
    reach = {v.id for v in x_values}
    for node in graph.nodes:
        if any(isinstance(i, Value) and i.id in reach for i in node.inputs):
            reach.update(o.id for o in node.outputs)
    grads: dict[int, Any] = {}
    seeds = grad_ys if isinstance(grad_ys, (list, tuple)) else [grad_ys] * len(ys)
    with grad_mode.no_grad():
        for y, g in zip(ys, seeds):
            with placement.placed(y._data.rank):
                g = creation.ones_like(y) if g is None else g
                grads[y._data.id] = grads[y._data.id] + g if y._data.id in grads else g
        for node in reversed(needed_nodes(graph, y_values)):
            out_grads = [grads.get(o.id) for o in node.outputs]
            if all(g is None for g in out_grads) or node.op.vjp is None:
                continue
            needs = tuple(isinstance(i, Value) and i.id in reach and k not in node.op.nondiff_inputs
                          for k, i in enumerate(node.inputs))
            if not any(needs):
                continue
            with placement.colocate_with(node):  # the vjp and the accumulation run where the op ran
                if len(out_grads) > 1:
                    out_grads = [g if g is not None else creation.zeros(o.shape, dtype=o.edtype)
                                 for g, o in zip(out_grads, node.outputs)]
                result = node.op.input_grads(_Ctx(node, needs), out_grads[0] if len(out_grads) == 1 else tuple(out_grads))
                for i, g, need in zip(node.inputs, result, needs):
                    if need and g is not None:
                        grads[i.id] = grads[i.id] + g if i.id in grads else g
    return [grads.get(v.id) for v in x_values]


# ---- running ----------------------------------------------------------------------------------------
class Session:
    """Runs parts of a graph: ``run(fetches, feed_dict)`` computes only what the fetches need.

    In an ``ember.distributed`` job, a graph placed with :func:`device` runs partitioned: each rank
    runs its nodes, joined by send/recv, and fetches come back on every rank
    (``broadcast_fetches=False``: on the owning rank only). ``distributed`` (None: automatic),
    ``default_rank`` (where unplaced nodes go) and the rest: :mod:`ember.graph.distributed_session`.
    """

    def __init__(self, graph: Graph | None = None, fuse: bool = True, *, distributed: bool | None = None,
                 default_rank: int = 0, broadcast_fetches: bool = True) -> None:
        self.graph = graph or get_default_graph()
        self.fuse = fuse
        self.distributed = distributed
        self.default_rank = default_rank
        self.broadcast_fetches = broadcast_fetches
        self._plans: dict = {}
        self._dist_plans: dict = {}

    def _distributed_job(self) -> tuple | None:
        """(rank, world size) when this run is partitioned over a job, else None (a local run)."""
        from ember.graph import distributed_session as ds

        if self.distributed is False:
            return None
        where = ds.job()
        if self.distributed is True:
            if where is None:
                raise RuntimeError("Session(distributed=True).run: no ember.distributed job; launch with "
                                   "`python -m ember.distributed.run -n N script.py` and call "
                                   "ember.distributed.init_process_group('mpi') first")
            return where
        return where if where is not None and where[1] > 1 and ds.is_placed(self.graph) else None

    def partition(self, fetches: Any, world_size: int | None = None) -> Any:
        """The per-rank subgraphs (with their send/recv nodes) a distributed run of ``fetches`` uses."""
        from ember.graph.compile import flatten
        from ember.graph.partition import partition

        leaves: list = []
        flatten(fetches, leaves)
        if world_size is None:
            where = self._distributed_job()
            world_size = where[1] if where is not None else 1
        return partition(self.graph, [t._data for t in leaves], world_size, self.default_rank)

    def __enter__(self) -> "Session":
        return self

    def __exit__(self, *exc: Any) -> None:
        self._plans.clear()
        self._dist_plans.clear()

    def run(self, fetches: Any, feed_dict: dict | None = None, seed: int | None = None) -> Any:
        """Fetch a tensor, or a list/tuple/dict of them; returns NumPy arrays (None for a group).

        Random nodes (``dropout(placeholder)``...) sample anew at each run from a seed drawn from
        ember's default generator, or from ``seed`` when given (see :mod:`ember.graph.rng`).
        """
        leaves: list = []
        from ember.graph.compile import flatten, unflatten

        structure = flatten(fetches, leaves)
        values = []
        for t in leaves:
            v = t._data
            if type(v) is not Value or v.graph is not self.graph:
                raise TypeError(f"Session.run: fetch {t!r} is not a tensor of this session's graph")
            values.append(v)
        key = tuple(v.id for v in values)
        where = self._distributed_job()
        if where is not None:
            return unflatten(structure, self._run_distributed(key, values, where, feed_dict, seed))
        plan = self._plans.get(key)
        if plan is None:
            from ember.graph.distributed_session import check_local

            check_local(self.graph, values, self.distributed)
            needed = {i.id for n in needed_nodes(self.graph, values) for i in n.inputs if isinstance(i, Value)}
            needed.update(key)
            plan = self._plans[key] = (Executable(self.graph, values, include_updates=False, fuse=self.fuse), needed)
        executable, needed = plan
        feeds = _feeds_by_id(feed_dict)
        inputs = []
        for p in self.graph.inputs:
            if p.id not in feeds:
                if p.id in needed:
                    raise RuntimeError(f"Session.run: placeholder {p.label()} ({p.type_str()}) is needed by the "
                                       "fetches but was not fed; add it to feed_dict")
                inputs.append(None)
                continue
            raw = feeds[p.id]
            array = np.asarray(raw.detach().cpu().numpy() if isinstance(raw, Tensor) else raw, dtype=p.dtype)
            if array.shape != p.shape:
                raise ValueError(f"Session.run: placeholder {p.label()} has shape {p.shape}, fed shape {array.shape}")
            if p.device is not None and p.device.type != "cpu":
                array = p.device.backend.asarray(array)  # fed host data: copied to the placeholder's device
            inputs.append(array)
        results = executable.run(inputs, seed=seed)
        # Variables and fed arrays come back as copies, never as the live buffers.
        results = [r.copy() if v.kind != "node" and r is not None else r for r, v in zip(results, values)]
        # Fetches come back as NumPy arrays (TensorFlow's Session.run): device values are copied over.
        return unflatten(structure, [None if r is None else to_host(r, v.device) for r, v in zip(results, values)])

    def _run_distributed(self, key: tuple, values: list, where: tuple, feed_dict: dict | None,
                         seed: int | None) -> list:
        from ember.graph.distributed_session import DistributedPlan

        plan = self._dist_plans.get(key)
        if plan is None:
            plan = self._dist_plans[key] = DistributedPlan(self.graph, values, where[0], where[1], self.default_rank,
                                                           self.fuse)
        return plan.run(_feeds_by_id(feed_dict), seed, self.broadcast_fetches)


def _feeds_by_id(feed_dict: dict | None) -> dict:
    """``{placeholder: value}`` keyed by the placeholder's graph value id (anything else is an error)."""
    feeds = {}
    for k, v in (feed_dict or {}).items():
        kv = k._data if isinstance(k, Tensor) else None
        if type(kv) is not Value or kv.kind != "input":
            raise TypeError(f"Session.run: feed_dict key {k!r} is not a placeholder")
        feeds[kv.id] = v
    return feeds


Runner = Session


def run(fetches: Any, feed_dict: dict | None = None, seed: int | None = None) -> Any:
    """Run on the default graph with a session kept for it."""
    graph = get_default_graph()
    session = getattr(graph, "_session", None)
    if session is None:
        session = graph._session = Session(graph)
    return session.run(fetches, feed_dict, seed)
