"""Compiled functions whose outputs carry autograd history (what ``torch.compile`` does for a forward).

When a traced function's outputs require grad (grad mode on, and an output depends on an argument
or a lifted tensor - a parameter - that requires grad) and the function did not consume that graph
itself (no ``loss.backward()`` inside), ``ember.compile`` builds *one* autograd node for the call:

1. **Backward graph.** Right after tracing the forward, the eager engine runs once over the trace's
   own autograd record with symbolic output gradients (``grad_out0``, ...) as seeds, capturing the
   gradients of the differentiable inputs. The ops' vjp rules, written in ember ops, append the
   backward nodes to the same graph - the mechanism a traced ``loss.backward()`` already uses, so
   ``no_grad`` regions, ``detach()`` and non-differentiable outputs mean exactly what they mean
   eagerly (differentiating the graph's structure, as :func:`ember.graph.gradients` does, would not
   see them). Leaf hooks are switched off meanwhile: they run for real when backward runs.
2. **Joint passes, then a split.** The joint graph (outputs: results + input gradients) goes through
   the usual passes, so CSE can reuse forward values in backward. :func:`split` then cuts it: the
   forward keeps exactly the nodes the results and state updates need and additionally returns the
   values backward reads (*saved*); every other node runs in backward, whose inputs are the saved
   values and the output gradients. Both run on an ordinary :class:`~ember.graph.executor.Executable`.
3. **The node.** :class:`CompiledBackward` is an eager autograd node whose edges are the inputs'
   (an argument's ``grad_fn`` when it has one, else the leaf itself), so ``loss.backward()``
   accumulates into ``.grad``, runs hooks, and frees the saved values unless ``retain_graph``.

Saved arrays are kept by reference. Where one aliases an argument, a state tensor or a returned
tensor, the node records that tensor's version and backward raises, like eager autograd, if it was
changed in place in between. ``create_graph=True`` through a compiled node raises (the backward
graph runs on arrays). Anything the backward builder cannot trace raises
:class:`~ember.graph.ir.TracingError`, so ``ember.compile`` falls back to eager for that key.

Example:
    >>> import ember
    >>> m = ember.nn.Linear(3, 2); cm = ember.compile(m); x = ember.ones(4, 3)
    >>> for _ in range(3):
    ...     m.zero_grad(); cm(x).sum().backward()
    >>> m.bias.grad.tolist()
    [4.0, 4.0]
"""
from __future__ import annotations

from typing import Any

from ember.autograd import grad_mode
from ember.autograd.node import _FREED_MESSAGE, Node
from ember.graph.executor import Executable, needed_nodes
from ember.graph.ir import Graph, Node as GraphNode, TracingError, Value
from ember.tensor import Tensor
from ember.autograd.engine import run_backward

STALE = object()  # returned by run() when a state tensor's requires_grad changed since the trace


# ---- building the backward graph while tracing --------------------------------------------------------
class BackwardPlan:
    """What the trace-time backward produced: which outputs and inputs take part, and the gradients."""

    def __init__(self, diff_outputs: list, arg_inputs: list, state_tensors: list, grads: list) -> None:
        self.diff_outputs = diff_outputs  # indices into the flattened outputs
        self.arg_inputs = arg_inputs  # indices into the flattened arguments that get a gradient
        self.state_tensors = state_tensors  # lifted tensors that get a gradient (parameters)
        self.grads = grads  # symbolic gradients: arguments' first, then states' (extra graph outputs)


def _tape_consumed(out_leaves: list) -> bool:
    """True when backward already ran through (and freed) part of the outputs' autograd record."""
    stack = [o.grad_fn for o in out_leaves if o.grad_fn is not None]
    seen: set = set()
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        if node.freed:
            return True
        stack.extend(e[0] for e in node.next_edges if e is not None and not isinstance(e[0], Tensor))
    return False


def build_backward(tracer: Any, out_leaves: list, sym_inputs: list) -> BackwardPlan | None:
    """Add the backward of the traced outputs to the trace's graph; None when no output needs one.

    Called inside the :class:`~ember.graph.builder.Tracer` context, after the traced function
    returned and before ``finish``. Returns None (plain forward, as before) when no output requires
    grad or the function consumed its graph itself (called backward, changed ``.grad`` or wrote a
    tensor that requires grad: a training step). Raises TracingError when it cannot build one.
    """
    diff_outputs = [k for k, o in enumerate(out_leaves) if o._requires_grad and (o.is_floating_point() or o.dtype.is_complex)]
    if not diff_outputs:
        return None
    builder = tracer.builder
    for o in out_leaves:  # a tensor returned as is (``return self.weight``) is an input of the graph too
        builder.lift(o)
    lifted = list(builder.lifted.values())
    for t, _, state, grad in lifted:
        if t.grad is not grad or (t._requires_grad and t._data is not state):
            return None  # backward / zero_grad / an optimizer step ran inside: a training step
    if _tape_consumed(out_leaves):
        return None
    states = []
    for t, _, state, _ in lifted:
        if not t._requires_grad:
            continue
        if t.grad_fn is not None:
            raise TracingError(
                f"the compiled function reads a tensor {state.type_str()} that requires grad and is the result "
                f"of an op outside it ({t.grad_fn.name()}); its gradient cannot flow out of the compiled "
                "graph. Pass it as an argument instead (arguments may have history).")
        states.append(t)
    args = [k for k, s in enumerate(sym_inputs) if s._requires_grad]
    inputs = [sym_inputs[k] for k in args] + states
    seeds = [tracer.input(tuple(out_leaves[k].shape), out_leaves[k].dtype, out_leaves[k].device, False,
                          name=f"grad_out{j}") for j, k in enumerate(diff_outputs)]
    from ember.graph.builder import SymbolicTensor

    hooks = [(t, t._hooks) for t in states if t._hooks]
    for t, _ in hooks:
        t._hooks = None  # user hooks run when the real backward delivers the gradient, not while tracing
    # One root per distinct tensor (``return y, y``): the engine counts a repeated root's edges twice.
    roots: dict[int, list] = {}
    for k, seed in zip(diff_outputs, seeds):
        entry = roots.setdefault(id(out_leaves[k]), [out_leaves[k], None])
        entry[1] = seed if entry[1] is None else entry[1] + seed
    try:
        grads = run_backward([r for r, _ in roots.values()], [g for _, g in roots.values()], retain_graph=False,
                             create_graph=False, capture=inputs)
    except TracingError:
        raise
    except Exception as error:  # a vjp that cannot run on symbolic tensors: let compile fall back
        raise TracingError(f"building the backward graph failed: {type(error).__name__}: {error}") from error
    finally:
        for t, saved in hooks:
            t._hooks = saved
    del seeds, roots
    for o in out_leaves:  # drop the trace's autograd record: nothing may keep its symbolic tensors alive
        if isinstance(o, SymbolicTensor):
            o.grad_fn = None
    n_args = len(args)
    keep = [i for i, g in enumerate(grads) if g is not None]
    return BackwardPlan(diff_outputs, [args[i] for i in keep if i < n_args],
                        [states[i - n_args] for i in keep if i >= n_args], [grads[i] for i in keep])


# ---- cutting the joint graph ------------------------------------------------------------------------
def split(graph: Graph, n_args: int, n_results: int) -> tuple[Graph, list, Graph]:
    """Cut the optimized joint graph into (forward, saved values, backward).

    ``graph.inputs`` are the ``n_args`` arguments then the output-gradient seeds; ``graph.outputs``
    the ``n_results`` results then the input gradients. The forward runs exactly the nodes the
    results and state updates need; every other node the gradients need runs in backward.
    """
    results, grads = graph.outputs[:n_results], graph.outputs[n_results:]
    seeds = graph.inputs[n_args:]
    fwd_nodes = needed_nodes(graph, results + [v for _, v in graph.updates])
    fwd_ids = {id(n) for n in fwd_nodes}
    bwd_nodes = [n for n in needed_nodes(graph, grads) if id(n) not in fwd_ids]
    bwd_defined = {o.id for n in bwd_nodes for o in n.outputs} | {s.id for s in seeds}
    saved: list[Value] = []
    seen: set = set()
    consts: list[Value] = []

    def need(v: Any) -> None:
        if not isinstance(v, Value) or v.id in bwd_defined or v.id in seen:
            return
        seen.add(v.id)
        (consts if v.kind == "const" else saved).append(v)

    for n in bwd_nodes:
        for i in n.inputs:
            need(i)
    for g in grads:
        need(g)

    backward = Graph(graph.name + "_backward")
    mapping: dict[int, Value] = {}
    for k, v in enumerate(saved):
        mapping[v.id] = backward.add_input(v.shape, v.edtype, v.device, name=f"saved{k}")
        if v.kind == "node" and v.name is None:
            v.name = f"saved{k}"  # the same name in both printed graphs
    for k, v in enumerate(seeds):
        mapping[v.id] = backward.add_input(v.shape, v.edtype, v.device, name=f"grad_out{k}")
    backward.consts = consts
    for n in bwd_nodes:
        node = GraphNode(n.op, tuple(mapping.get(i.id, i) if isinstance(i, Value) else i for i in n.inputs),
                         n.attrs, n.outputs)
        for o in n.outputs:
            o.node, o.graph = node, backward
        backward.nodes.append(node)
    backward.outputs = [mapping.get(g.id, g) for g in grads]

    forward = graph.copy_structure()
    forward.name = graph.name
    forward.inputs = graph.inputs[:n_args]
    forward.nodes = fwd_nodes
    forward.outputs = list(results)
    used = {i.id for n in fwd_nodes for i in n.inputs if isinstance(i, Value)}
    used |= {v.id for v in results} | {v.id for v in saved} | {v.id for u in graph.updates for v in u}
    forward.states = [v for v in graph.states if v.id in used]
    forward.consts = [v for v in graph.consts if v.id in used]
    return forward.validate(), saved, backward.validate()


# ---- running ----------------------------------------------------------------------------------------
def _root(array: Any) -> Any:
    """The object owning ``array``'s memory (NumPy views point at it through ``.base``)."""
    base = getattr(array, "base", None)
    while base is not None:
        array = base
        base = getattr(base, "base", None)
    return array


class CompiledAutograd:
    """A cache entry of ``ember.compile`` whose results carry history: forward and backward executables."""

    def __init__(self, forward: Graph, saved: list, backward: Graph, plan: BackwardPlan, out_structure: Any,
                 history: list, trace_seconds: float, passes: tuple) -> None:
        fuse, memory = "fuse" in passes, "memory" in passes
        self.graph = forward
        self.backward_graph = backward
        self.saved = saved  # forward values the backward reads (its inputs saved0, saved1, ...): pictures link them
        self.executable = Executable(forward, list(forward.outputs) + saved, include_updates=True, fuse=fuse,
                                     memory=memory)
        self.backward_executable = Executable(backward, backward.outputs, include_updates=False, fuse=fuse,
                                              memory=memory)
        self.out_structure = out_structure
        self.history = history
        self.trace_seconds = trace_seconds
        self.n_results = len(forward.outputs)
        self.copy_outputs = [v.kind != "node" for v in forward.outputs]
        self.devices = [v.device for v in forward.outputs]
        self.output_nr = [-1] * self.n_results  # result index -> the node's output number (-1: no history)
        for j, k in enumerate(plan.diff_outputs):
            self.output_nr[k] = j
        self.output_meta = [(forward.outputs[k].shape, forward.outputs[k].edtype, forward.outputs[k].device)
                            for k in plan.diff_outputs]
        self.arg_inputs = plan.arg_inputs
        self.state_tensors = plan.state_tensors
        self.copy_grads = [v.kind != "node" for v in backward.outputs]
        self.grad_devices = [v.device for v in backward.outputs]
        # requires_grad of every state as traced: a parameter frozen or unfrozen later means a retrace.
        self.watched = [v.tensor for v in forward.states]
        self.watched_flags = tuple(t._requires_grad for t in self.watched)
        self.identity: dict = {}  # result index -> argument index: ``return x`` gives the caller's x, as eagerly

    def run(self, leaves: list) -> Any:
        from ember.graph.compile import unflatten

        if tuple(t._requires_grad for t in self.watched) != self.watched_flags:
            return STALE
        results = self.executable.run([t._data for t in leaves])
        n = self.n_results
        saved = results[n:]
        node = CompiledBackward(self, saved)
        edges = []
        for k in self.arg_inputs:
            t = leaves[k]
            edges.append((t.grad_fn, t._output_nr) if t.grad_fn is not None else (t, 0))
        edges.extend((t, 0) for t in self.state_tensors)
        node.next_edges = tuple(edges)
        # Saved arrays that alias a tensor someone can change in place: remember its version.
        roots = {id(_root(a)) for a in saved}
        guards = []
        for k, t in enumerate(leaves):
            if id(_root(t._data)) in roots:
                guards.append(_guard(t, f"argument {k}"))
        for t in self.watched:
            if id(_root(t._data)) in roots:
                guards.append(_guard(t, f"tensor {tuple(t.shape)} read by the function"))
        tensors = []
        for k in range(n):
            r = results[k]
            t = Tensor._make(r.copy() if self.copy_outputs[k] else r, self.devices[k], False)
            nr = self.output_nr[k]
            if nr >= 0:
                t._requires_grad = True
                t.grad_fn = node
                t._output_nr = nr
            if not self.copy_outputs[k] and id(_root(r)) in roots:
                guards.append(_guard(t, f"output {k}"))
            tensors.append(t)
        for i, k in self.identity.items():
            tensors[i] = leaves[k]  # its gradient reaches the argument directly; the node sees zeros there
        node.guards = guards
        return unflatten(self.out_structure, tensors)


def _guard(t: Tensor, what: str) -> tuple:
    if t._vc is None:
        t._vc = [0]
    return (t._vc, t._vc[0], what)


class CompiledBackward(Node):
    """The autograd node of one call of a compiled function: runs the compiled backward graph."""

    __slots__ = ("entry", "saved", "guards", "num_outputs", "output_meta")

    def __init__(self, entry: CompiledAutograd, saved: list) -> None:
        super().__init__()
        self.entry = entry
        self.saved: list | None = saved
        self.guards: list = []
        self.num_outputs = len(entry.output_meta)
        self.output_meta = entry.output_meta

    def name(self) -> str:
        return "CompiledFunctionBackward"

    def apply(self, grads: list) -> tuple:
        entry = self.entry
        if self.saved is None:
            raise RuntimeError(_FREED_MESSAGE)
        if grad_mode.STATE.enabled:
            raise RuntimeError(
                f"backward with create_graph=True through the compiled function {entry.graph.name!r} is not "
                "supported: its backward graph runs on arrays and records no history. Call the function "
                "uncompiled where you need higher-order gradients, or compute them inside the compiled function "
                "(ember.autograd.grad(..., create_graph=True) there is traced).")
        for vc, version, what in self.guards:
            if vc[0] != version:
                raise RuntimeError(
                    f"one of the variables needed for gradient computation has been modified by an inplace "
                    f"operation: the {what} of compiled function {entry.graph.name!r} is at version {vc[0]}; "
                    f"expected version {version} instead. Use an out-of-place op, or .clone() the tensor "
                    "before changing it.")
        arrays = []
        for k, (g, (shape, dtype, device)) in enumerate(zip(grads, self.output_meta)):
            if g is None:
                arrays.append(device.xp.zeros(shape, dtype=dtype.np))
                continue
            a = g._data
            if type(a) is Value:
                raise RuntimeError(f"compiled function {entry.graph.name!r}: its backward cannot be traced into "
                                   "another graph; compile the outer function only, or call this one uncompiled")
            if tuple(a.shape) != shape:
                raise RuntimeError(f"compiled function {entry.graph.name!r}: gradient {k} has shape "
                                   f"{tuple(a.shape)} but the output has shape {shape}")
            if a.dtype != dtype.np:
                a = a.astype(dtype.np)
            arrays.append(a)
        results = entry.backward_executable.run(list(self.saved) + arrays)
        return tuple(Tensor._make(r.copy() if copy else r, dev, False)
                     for r, copy, dev in zip(results, entry.copy_grads, entry.grad_devices))

    def release(self) -> None:
        self.saved = None
        self.guards = []
        self.freed = True
