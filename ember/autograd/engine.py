"""The backward engine: walks the recorded graph from the roots in dependency order.

Each node runs once, after every node that feeds it gradient has run (Kahn's algorithm over the
edges reachable from the roots), so a tensor used many times gets the sum of its gradients.
"""
from __future__ import annotations

import sys
import threading
import time
from typing import Any, Sequence

import numpy as np

from ember import interpreters
from ember.amp.state import STATE as _AUTOCAST
from ember.autograd import anomaly_mode, grad_into, grad_mode
from ember.autograd.node import OP_NODE_CLASSES, OpNode
from ember.autograd.index_grad import IndexGrad, accumulate as _accumulate_lazy
from ember.backends import cpu_hot_ufuncs, cpu_parallel_ufunc
from ember.device import CPU

Tensor: Any = None  # ember.tensor.Tensor, looked up on the first backward pass (it imports this package)


def _edge_of(tensor: Any) -> tuple:
    if tensor.grad_fn is not None:
        return (tensor.grad_fn, tensor._output_nr)
    return (tensor, 0)


# Callbacks queued during a backward pass run once when the outermost pass ends (DistributedDataParallel
# waits for its gradient all-reduces there). One list per thread, like the grad mode.
_LOCAL = threading.local()

# The profiler's hook (ember/profiler): None unless a profile is recording (one global read per node).
PROFILER: Any = None
# Plain backward passes run ops' array gradient rules (OpDef.array_vjp) where they have them; False runs
# every node's ember-op rule (the tests compare the two).
ARRAY_RULES = True
_clock = time.perf_counter_ns


def queue_callback(callback: Any) -> None:
    """Run ``callback()`` once the backward pass in progress on this thread has finished.

    Example:
        >>> import ember
        >>> from ember.autograd.engine import queue_callback
        >>> x = ember.ones(2, requires_grad=True)
        >>> done = []
        >>> _ = x.register_hook(lambda g: queue_callback(lambda: done.append(True)))
        >>> x.sum().backward(); done
        [True]
    """
    pending = getattr(_LOCAL, "callbacks", None)
    if pending is None:
        raise RuntimeError("queue_callback: no backward pass is running on this thread; call it from a hook")
    pending.append(callback)


def _accumulate(buffers: dict, key: int, index: int, size: int, grad: Any) -> None:
    slot = buffers.get(key)
    if slot is None:
        slot = buffers[key] = [None] * size
    current = slot[index]
    slot[index] = grad if current is None else current + grad


_NO_IDS: frozenset = frozenset()


class GraphTask:
    """One backward pass in progress on this thread: what ``register_multi_grad_hook`` asks about.

    ``reachable`` holds the ids of the nodes (and leaves) reachable from the roots (a set or the engine's dict of
    dependency counts keyed by them); with captures
    (``autograd.grad``, ``backward(inputs=...)``) only the nodes on a path to a captured gradient run
    (``needed``) and only captured leaves get their hooks, as in PyTorch.
    """

    __slots__ = ("id", "reachable", "needed", "captured")
    _count = 0

    def __init__(self, reachable: set, needed: set | None, captured: set) -> None:
        GraphTask._count += 1
        self.id = GraphTask._count
        self.reachable = reachable
        self.needed = needed
        self.captured = captured

    def will_execute(self, node: Any) -> bool:
        key = id(node)
        if key not in self.reachable:
            return False
        return self.needed is None or key in self.needed or key in self.captured


def current_graph_task() -> GraphTask | None:
    """The backward pass running on this thread (the innermost one), or None outside backward."""
    return getattr(_LOCAL, "task", None)


def run_backward(
    roots: Sequence[Any],
    root_grads: Sequence[Any],
    retain_graph: bool,
    create_graph: bool,
    capture: Sequence[Any] | None = None,
    accumulate_into_grad: bool = True,
) -> list | None:
    """Propagate ``root_grads`` from ``roots`` back through the graph.

    With ``capture`` (autograd.grad), returns the gradient arriving at each captured tensor and
    leaves ``.grad`` untouched; otherwise accumulates into leaves' ``.grad``.
    """
    outer = getattr(_LOCAL, "callbacks", None) is None
    if outer:
        _LOCAL.callbacks = []
    task = getattr(_LOCAL, "task", None)
    try:
        captured = _propagate(roots, root_grads, retain_graph, create_graph, capture, accumulate_into_grad)
        if outer:
            pending = _LOCAL.callbacks
            while pending:  # a callback may queue another
                pending.pop(0)()
    finally:
        _LOCAL.task = task
        if outer:
            _LOCAL.callbacks = None
    return captured


def _needed_nodes(root_nodes: list, captured: set, Tensor: type) -> set:
    """Ids of the nodes with a path to a captured edge (they must run); children are decided first."""
    needed: set = set()
    done: set = set()
    for root in root_nodes:
        if id(root) in done:
            continue
        stack = [(root, False)]
        while stack:
            node, expanded = stack.pop()
            key = id(node)
            if expanded:
                done.add(key)
                if any(e is not None and (id(e[0]) in needed or id(e[0]) in captured) for e in node.next_edges):
                    needed.add(key)
                continue
            if key in done or isinstance(node, Tensor):
                done.add(key)
                continue
            stack.append((node, True))
            for edge in node.next_edges:
                if edge is not None and id(edge[0]) not in done:
                    stack.append((edge[0], False))
    return needed


def _propagate(roots: Sequence[Any], root_grads: Sequence[Any], retain_graph: bool, create_graph: bool,
               capture: Sequence[Any] | None, accumulate_into_grad: bool) -> list | None:
    global Tensor
    if Tensor is None:
        from ember.tensor import Tensor  # noqa: PLC0415 - the engine is imported before the Tensor class exists

    capture_keys: dict = {}
    captured: list | None = None
    if capture is not None:
        captured = [None] * len(capture)
        for i, t in enumerate(capture):
            node, index = _edge_of(t)
            capture_keys.setdefault((id(node), index), []).append(i)

    # 1. Count, for every node reachable from the roots, how many edges point at it. The roots enter with 0
    # (one of them may be reached from another); the dict's keys are then the ids of every reachable node.
    if len(roots) == 1:  # (loss.backward(): one root, no comprehensions)
        root = roots[0]
        fn = root.grad_fn
        root_edges = [(fn, root._output_nr) if fn is not None else (root, 0)]
        root_nodes = [root_edges[0][0]]
        dependencies: dict[int, int] = {id(root_nodes[0]): 0}
    else:
        root_edges = [_edge_of(t) for t in roots]
        root_nodes = list({id(e[0]): e[0] for e in root_edges}.values())  # a root given twice is walked once
        dependencies = {id(n): 0 for n in root_nodes}
    stack = list(root_nodes)
    get = dependencies.get
    while stack:
        node = stack.pop()
        if isinstance(node, Tensor):
            continue
        for edge in node.next_edges:
            if edge is None:
                continue
            child = edge[0]
            key = id(child)
            count = get(key)
            if count is None:
                dependencies[key] = 1
                stack.append(child)
            else:
                dependencies[key] = count + 1
    # With captures, only what leads to a captured gradient runs (PyTorch's exec_info).
    captured_ids = {key for key, _ in capture_keys} if capture_keys else _NO_IDS
    needed = _needed_nodes(root_nodes, captured_ids, Tensor) if capture is not None else None
    _LOCAL.task = GraphTask(dependencies, needed, captured_ids)

    # 2. Seed the buffers with the root gradients.
    buffers: dict[int, list] = {}
    if len(root_edges) == 1:
        node, index = root_edges[0]
        size = 1 if isinstance(node, Tensor) else node.num_outputs
        slot = buffers[id(node)] = [None] * size
        slot[index] = root_grads[0]
        ready = [node]  # (a single root has no edge into it)
    else:
        for (node, index), grad in zip(root_edges, root_grads):
            size = 1 if isinstance(node, Tensor) else node.num_outputs
            _accumulate(buffers, id(node), index, size, grad)
        ready = [n for n in root_nodes if dependencies[id(n)] == 0]

    accumulate = accumulate_into_grad and capture is None
    anomaly = anomaly_mode.STATE.enabled
    # Array rules (OpDef.array_vjp) when nothing needs the backward's own ops: no graph of it is built
    # (create_graph), and no profiler, flop counter, autocast region, trace or anomaly check watches them.
    # Their results stay NumPy arrays in the buffers (two arrays add with NumPy, as two tensors would) and
    # become tensors only where a tensor is needed: hooks, captures, leaves, ember-op rules.
    # A profile keeps them (it records each such node as one event, costed from its op's rules later); the FLOP
    # counter (``backward_ops``) counts the backward's ops one by one, so it needs the ember-op rules. vmap's level
    # (an interpreter that does not trace) keeps them too; its batched array rules run only outside a profile.
    arrays = ARRAY_RULES and not (create_graph or anomaly or _AUTOCAST.active
                                  or (interpreters.GRAPHS.count and interpreters.watching())
                                  or PROFILER is not None and getattr(PROFILER, "backward_ops", True))
    batched = PROFILER is None
    previous_mode = grad_mode.STATE.enabled
    grad_mode.STATE.enabled = create_graph
    try:
        while ready:
            node = ready.pop()
            if node.__class__ is Tensor or isinstance(node, Tensor):
                grads = buffers.pop(id(node), None)
                if needed is None or id(node) in captured_ids:
                    _finish_leaf(node, _tensor(_full(grads[0])) if grads else None, capture_keys, captured,
                                 accumulate)
                continue
            grads = buffers.pop(id(node), None) or [None] * node.num_outputs
            if grads[0].__class__ is IndexGrad:  # a view's gradient kept as (index, values): index_grad.py
                grads[0] = grads[0].materialize()
            if len(grads) > 1:
                grads = [_full(g) for g in grads]
            skip = False
            if needed is not None and id(node) not in needed:  # nothing captured lies below it
                if id(node) not in captured_ids:
                    _release_children(node, dependencies, ready)
                    continue
                skip = True  # its gradient is captured, but it need not run
            if node.pre_hooks:
                grads = [_tensor(g) for g in grads]
                for index, hooks in node.pre_hooks.items():
                    for hook in hooks:
                        if grads[index] is not None:
                            replaced = hook(grads[index])
                            if replaced is not None:
                                grads[index] = replaced
            extra = node.extra
            if extra is not None:
                grads = [_tensor(g) for g in grads]
                for hook in tuple(extra.pre):
                    replaced = hook(tuple(grads))
                    if replaced is not None:
                        grads = list(_checked_hook_result(hook, replaced, len(grads)))
            if capture_keys:
                grads = [_tensor(g) for g in grads]
                for index, g in enumerate(grads):
                    for slot in capture_keys.get((id(node), index), ()):
                        captured[slot] = g
            if skip:
                _release_children(node, dependencies, ready)
                continue
            edges = node.next_edges
            leaves = None
            empty = grads[0] is None if len(grads) == 1 else all(g is None for g in grads)
            if empty:
                input_grads = (None,) * len(edges)
            else:
                t0 = PROFILER and _clock()
                input_grads = None
                if arrays and node.__class__ in OP_NODE_CLASSES and (node.op.array_vjp is not None or (
                        node.op.batch_array_vjp is not None and (len(grads) == 1 or extra is None))):
                    # (before zeros are made for unused outputs)
                    if node.op in grad_into.OPS and accumulate and needed is None and not interpreters.GRAPHS.count \
                            and grad_into.begin(node, dependencies, buffers, Tensor):
                        # a weight gradient added into .grad by its GEMM (w1hot21); the rule may decline
                        try:
                            input_grads = node.apply_arrays(grads) if batched else node.apply_arrays(grads, False)
                        finally:
                            input_grads = grad_into.end(input_grads)
                    else:
                        input_grads = node.apply_arrays(grads) if batched else node.apply_arrays(grads, False)
                if input_grads is None:
                    grads = [_tensor(g) for g in grads]
                    if len(grads) > 1:
                        grads = _materialize(node, grads)
                    input_grads = anomaly_mode.run_node(node, grads) if anomaly else node.apply(grads)
                    if t0 and PROFILER is not None:
                        PROFILER.node(node, t0, grads)
                elif t0 and PROFILER is not None:  # the array rules ran: no op of the backward dispatched
                    PROFILER.array_node(node, t0, grads)
                if not retain_graph:
                    node.release()
                if len(input_grads) != len(edges):
                    raise RuntimeError(
                        f"{node.name()} returned {len(input_grads)} gradients but its op has {len(edges)} inputs"
                    )
                if extra is not None:
                    input_grads = tuple(_tensor(g) for g in input_grads)
                    grads = [_tensor(g) for g in grads]
                    for hook in tuple(extra.post):
                        replaced = hook(tuple(input_grads), tuple(grads))
                        if replaced is not None:
                            input_grads = _checked_hook_result(hook, replaced, len(input_grads))
            for edge, g in zip(edges, input_grads):
                if edge is None:
                    continue
                child, index = edge
                key = id(child)
                if g is not None:
                    slot = buffers.get(key)
                    if slot is None:
                        slot = buffers[key] = [None] * (1 if isinstance(child, Tensor) else child.num_outputs)
                    current = slot[index]
                    if current is None:
                        slot[index] = g
                    elif current.__class__ is g.__class__ is np.ndarray:
                        slot[index] = _sum_arrays(current, g)
                    elif current.__class__ is np.ndarray and g.__class__ is Tensor and g._data.__class__ is np.ndarray \
                            and not grad_mode.STATE.enabled:  # an array rule's gradient + an ember-op rule's
                        slot[index] = _sum_arrays(current, g._data)
                    elif current.__class__ is IndexGrad or g.__class__ is IndexGrad:  # views' gradients: one buffer
                        total = _accumulate_lazy(current, g)
                        slot[index] = total if total is not None else _tensor(_full(current)) + _tensor(_full(g))
                    else:
                        slot[index] = _tensor(current) + _tensor(g)
                remaining = dependencies[key] - 1
                dependencies[key] = remaining
                if remaining == 0:
                    if isinstance(child, Tensor):
                        if leaves is None:
                            leaves = [child]
                        else:
                            leaves.append(child)
                    else:
                        ready.append(child)
            if leaves is not None:
                # The leaves this node completed finish now, in edge order and before any other node runs (PyTorch
                # runs AccumulateGrad first), after the engine dropped its own references to their gradients: an
                # array rule's result that nothing else holds becomes ``.grad`` itself instead of a copy of it.
                g = slot = current = total = input_grads = grads = None
                for child in leaves:
                    key = id(child)
                    leaf_grads = buffers.pop(key, None)
                    if needed is None or key in captured_ids:
                        grad = _full(leaf_grads[0]) if leaf_grads else None
                        leaf_grads = None
                        # (asked before the call: its argument list would add a reference)
                        if grad.__class__ is np.ndarray:
                            handed_over = arrays and sys.getrefcount(grad) <= _LOCAL_REFS
                        else:  # an ember-op rule's tensor (convolution, norms, embedding): it and its array alone
                            handed_over = (grad.__class__ is Tensor and accumulate and not child._hooks
                                           and not grad_mode.STATE.enabled and not interpreters.GRAPHS.count
                                           and grad._data.__class__ is np.ndarray
                                           and sys.getrefcount(grad) <= _LOCAL_REFS
                                           and sys.getrefcount(grad._data) <= _SLOT_REFS)
                        _finish_leaf(child, grad, capture_keys, captured, accumulate, handed_over)
                grad = None
                leaves = None
    finally:
        grad_mode.STATE.enabled = previous_mode
    return captured


# Gradients of at least this many elements are summed into the slot's own buffer when it may be (_sum_arrays).
SUM_IN_PLACE_MIN = 1 << 14
# sys.getrefcount of an array only the gradient slot holds, seen from _sum_arrays: the slot, the engine's local
# ``current``, the argument and getrefcount's own.
_SLOT_ONLY_REFS = 4


def _sum_arrays(current: np.ndarray, g: np.ndarray) -> np.ndarray:
    """``current + g`` for a gradient slot: into ``current`` itself when only the slot holds it (a vjp's fresh
    result that no other slot, saved value or view shares: it owns its memory and nothing else references it)
    and the sum keeps its shape and dtype, as PyTorch's InputBuffer adds in place; large sums split over ember's
    threads. Same bits as ``current + g`` either way (one IEEE addition per element). GPT's residual stream gets
    12 such sums of 6 MB a step: 1.66 -> 0.78 ms each on one core (no new buffer to fault in and write)."""
    if (current.size >= SUM_IN_PLACE_MIN and current.base is None and current.flags.writeable
            and g.shape == current.shape and g.dtype == current.dtype and sys.getrefcount(current) <= _SLOT_ONLY_REFS):
        if not cpu_hot_ufuncs.add_into(current, g) and not cpu_parallel_ufunc.add_into(current, g):
            np.add(current, g, out=current)
        return current
    split = None
    if current.size >= SUM_IN_PLACE_MIN:  # halves on the hot worker while it spins (w1hot21), else the pool
        split = cpu_hot_ufuncs.binary(np.add, current, g)
        if split is None:
            split = cpu_parallel_ufunc.binary(np.add, current, g)
    total = current + g if split is None else split
    return total if total.__class__ is np.ndarray else np.asarray(total)  # 0-d: a scalar


def _full(g: Any) -> Any:
    """A gradient as an array or tensor: a view's (index, values) gradient materialized (index_grad.py)."""
    return g.materialize() if g.__class__ is IndexGrad else g


def _release_children(node: Any, dependencies: dict, ready: list) -> None:
    """A node that does not run still counts as done for its children (they may be needed elsewhere)."""
    for edge in node.next_edges:
        if edge is None:
            continue
        key = id(edge[0])
        remaining = dependencies[key] - 1
        dependencies[key] = remaining
        if remaining == 0:
            ready.append(edge[0])


def _tensor(g: Any) -> Any:
    """A gradient as a tensor: array rules' results (CPU NumPy arrays) are wrapped, tensors and None kept."""
    return Tensor._make(g, CPU, False) if g.__class__ is np.ndarray else g


def _materialize(node: Any, grads: list) -> list:
    """Multi-output nodes get zeros for outputs that received no gradient, as in PyTorch. An op's
    non-differentiable outputs (``nondiff_outputs``: attention's probabilities, layer norm's mean and rstd)
    never receive one and its rule never reads theirs, so they stay None: GPT's attention probabilities
    were 6 x 25 MB of zeros a step (~16 ms on one core)."""
    if len(grads) == 1 or all(g is not None for g in grads):
        return grads
    if not getattr(node, "materialize_grads", True):  # a custom Function's ctx.set_materialize_grads(False)
        return grads
    op = getattr(node, "op", None)
    nondiff = ()
    if op is not None:
        if not getattr(op, "materialize_grads", True):
            return grads
        nondiff = getattr(op, "nondiff_outputs", ())
        if all(g is not None or i in nondiff for i, g in enumerate(grads)):
            return grads
    metas = getattr(node, "output_meta", None)
    if metas is None:
        return grads
    from ember import creation

    # A custom Function's non-tensor outputs (``return loss, None``) have no meta: their gradient stays None.
    return [g if g is not None or i in nondiff or m is None else creation.zeros(m[0], dtype=m[1], device=m[2])
            for i, (g, m) in enumerate(zip(grads, metas))]


def _finish_leaf(leaf: Any, grad: Any, capture_keys: dict, captured: list | None, accumulate: bool,
                 handed_over: bool = False) -> None:
    """The gradient (a tensor, or an array rule's NumPy array) arriving at a leaf: its hooks, a capture, ``.grad``.
    ``handed_over``: the engine held the array's last reference (see ``_LOCAL_REFS``), so ``.grad`` may take it."""
    if grad is None:
        return
    if grad.__class__ is np.ndarray:
        if accumulate and not leaf._hooks and not grad_mode.STATE.enabled:  # (no hook needs a tensor)
            _accumulate_array(leaf, grad, handed_over)
            post_hooks = leaf.__dict__.get("_post_accumulate_hooks")
            if post_hooks:
                _run_post_accumulate(leaf, post_hooks)
            return
        grad = _tensor(grad)
    for hook in leaf._hooks or ():
        replaced = hook(grad)
        if replaced is not None:
            grad = replaced
    if captured is not None:
        for slot in capture_keys.get((id(leaf), 0), ()):
            captured[slot] = grad
    if accumulate:
        _accumulate_into_grad(leaf, grad, handed_over)
        post_hooks = leaf.__dict__.get("_post_accumulate_hooks")
        if post_hooks:
            _run_post_accumulate(leaf, post_hooks)


def accumulate_captured(leaf: Any, grad: Any) -> None:
    """``backward(inputs=...)``: put a captured gradient (its hooks already ran) into ``.grad``."""
    _accumulate_into_grad(leaf, grad)
    post_hooks = leaf.__dict__.get("_post_accumulate_hooks")
    if post_hooks:
        _run_post_accumulate(leaf, post_hooks)


def _run_post_accumulate(leaf: Any, hooks: list) -> None:
    """``register_post_accumulate_grad_hook`` hooks, in order, after ``.grad`` got this pass's gradient."""
    for hook in tuple(hooks):
        if hook(leaf) is not None:
            raise RuntimeError("Tensor post accumulate grad hooks should return None.")


def _checked_hook_result(hook: Any, replaced: Any, expected: int) -> tuple:
    """A Node hook's replacement gradients: one per slot, as PyTorch checks."""
    replaced = tuple(replaced)
    if len(replaced) != expected:
        name = getattr(hook, "__name__", type(hook).__name__)
        raise RuntimeError(f"hook '{name}' has returned an incorrect number of values (got {len(replaced)}, but "
                           f"expected {expected})")
    return replaced


def _accumulate_into_grad(leaf: Any, grad: Any, handed_over: bool = False) -> None:
    shape, leaf_shape = grad._data.shape, leaf._data.shape
    if shape != leaf_shape and tuple(shape) != tuple(leaf_shape):
        raise RuntimeError(
            f"backward: gradient of shape {tuple(shape)} does not match leaf of shape {tuple(leaf_shape)}"
        )
    if grad_mode.STATE.enabled:  # create_graph: keep the gradient's own history
        leaf.grad = grad if leaf.grad is None else leaf.grad + grad
    elif interpreters.GRAPHS.count and interpreters.SUBCLASSES.level.owns(grad):
        interpreters.SUBCLASSES.level.accumulate(leaf, grad)  # a dispatch mode or subclass sees detach / add
    elif leaf.grad is None:
        data = grad._data
        if leaf._data.__class__ is np.ndarray and not leaf._data.flags.c_contiguous and _dense_not_c(leaf._data):
            leaf.grad = _tensor_class()._make(_in_layout_of(leaf._data, data), leaf._device, False)
            return
        if not (handed_over and data.base is None and data.flags.c_contiguous and data.flags.writeable):
            # never alias a buffer that something else may still hold (a meta one: a new shell)
            data = cpu_parallel_ufunc.copy(data) if leaf._device.type != "meta" else leaf._device.xp.copy(data)
        leaf.grad = _tensor_class()._make(data, leaf._device, False)
    else:
        if interpreters.GRAPHS.count:  # graph building: the gradients may be graph values
            from ember.ops.dispatch import is_symbolic  # noqa: PLC0415 - dispatch imports this package

            if is_symbolic(leaf.grad) or is_symbolic(grad):
                leaf.grad.add_(grad)
                return
        if leaf._device.type != "meta":  # (a meta gradient has no values to add)
            leaf.grad._data += grad._data
        leaf.grad._bump()


def _accumulate_array(leaf: Any, data: Any, handed_over: bool = False) -> None:
    """``_accumulate_into_grad`` for a NumPy gradient outside ``create_graph`` (no Tensor around it first).
    ``handed_over``: nothing but the engine held ``data``, so a first gradient becomes ``.grad`` without a copy when
    it owns its memory in C order (what the copy would make; PyTorch's AccumulateGrad steals such a gradient too)."""
    if interpreters.GRAPHS.count:  # graph building: .grad may be a graph value (the tensor path handles it)
        _accumulate_into_grad(leaf, _tensor(data))
        return
    shape, leaf_shape = data.shape, leaf._data.shape
    if shape != leaf_shape and tuple(shape) != tuple(leaf_shape):
        raise RuntimeError(
            f"backward: gradient of shape {tuple(shape)} does not match leaf of shape {tuple(leaf_shape)}"
        )
    current = leaf.grad
    if current is None:
        if leaf._data.__class__ is np.ndarray and not leaf._data.flags.c_contiguous and _dense_not_c(leaf._data):
            leaf.grad = Tensor._make(_in_layout_of(leaf._data, data), leaf._device, False)
            return
        if not (handed_over and data.base is None and data.flags.c_contiguous and data.flags.writeable):
            data = cpu_parallel_ufunc.copy(data)  # never alias a buffer that something else may still hold
        leaf.grad = Tensor._make(data, leaf._device, False)
        return
    buffer = current._data
    # medium: in halves on the hot worker while it spins after the weight gradient's product (w1hot21); large: on
    # ember's threads
    if not (buffer.size >= cpu_hot_ufuncs.MIN_ELEMENTS and cpu_hot_ufuncs.add_into(buffer, data)) \
            and not cpu_parallel_ufunc.add_into(buffer, data):
        buffer += data
    current._bump()


def _dense_not_c(data: Any) -> bool:
    """PyTorch's ``is_non_overlapping_and_dense`` for a NumPy array that is not C-contiguous (a transposed or
    channels-last parameter): its elements fill one block with no gaps and no overlaps, in some order of axes."""
    expected = data.itemsize
    for stride, size in sorted((st, n) for st, n in zip(data.strides, data.shape) if n != 1):
        if stride != expected:
            return False
        expected *= size
    return True


def _in_layout_of(like: np.ndarray, data: np.ndarray) -> np.ndarray:
    """A new array with ``data``'s values and ``like``'s strides: PyTorch's gradient layout contract (a leaf's first
    ``.grad`` has the leaf's strides when the leaf is dense; ``empty_like`` with order 'K' keeps their axis order)."""
    out = np.empty_like(like)
    np.copyto(out, data)
    return out


def _tensor_class() -> type:
    """ember.tensor.Tensor (set by the first backward pass; ``accumulate_captured`` may come first)."""
    global Tensor
    if Tensor is None:
        from ember.tensor import Tensor  # noqa: PLC0415 - the engine is imported before the Tensor class exists
    return Tensor


def _refs_of_a_local() -> int:
    """What ``sys.getrefcount`` says of an array held by one local variable only (2 on CPython 3.11-3.13: the
    local and the call's argument), measured on this interpreter, as ``_propagate`` asks it of a leaf's gradient."""
    probe = np.empty(0)
    return sys.getrefcount(probe)


# A leaf's gradient held by nothing but ``_propagate``'s local (the buffers, the node's result tuple and the loop
# variables released first) has this count; any other holder (another leaf's buffer, a hook's tensor, a saved
# tensor, the caller's seed) adds a reference and the gradient is copied as before.
_LOCAL_REFS = _refs_of_a_local()


class _Slot:
    __slots__ = ("_data",)


def _refs_of_a_slot() -> int:
    """What ``sys.getrefcount(t._data)`` says of an array only one object's slot holds (2 on CPython 3.11-3.13)."""
    probe = _Slot()
    probe._data = np.empty(0)
    return sys.getrefcount(probe._data)


# A gradient tensor's array held by that tensor alone (no other tensor shares it: a detach(), a view's base, a
# hook's copy would add a reference); asked with the tensor itself held by the engine's local only.
_SLOT_REFS = _refs_of_a_slot()
