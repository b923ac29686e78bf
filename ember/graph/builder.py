"""Building graphs from ember code: symbolic tensors and the dispatcher's symbolic handler.

A *symbolic tensor* is an ordinary :class:`~ember.tensor.Tensor` whose ``_data`` is an IR
:class:`~ember.graph.ir.Value` instead of an array, so every Tensor method works on it: metadata
comes from the Value, and every op reaches :func:`ember.ops.dispatch.apply` (or its fast paths),
which hands symbolic calls to :func:`handle_op`. The handler appends a node (output shape and
dtype from the op record's shape rule - no compute) and, when autograd is recording, records the
usual autograd node, so ``loss.backward()`` on a symbolic loss runs the eager engine whose vjps,
written in ember ops, add the backward nodes to the graph.

Two builders use this:

* **tracing** (``ember.compile``): concrete tensors that the traced code reads or writes
  (parameters, gradients, optimizer buffers, constants made on the fly) are *lifted*: their
  ``_data`` is swapped for a ``state`` Value for the rest of the trace and restored afterwards.
  In-place writes become SSA values; at the end each lifted tensor whose value changed gets an
  update ``state <- new`` that the executor copies into the tensor's buffer after every run.
  Symbolic tensors that escape the trace (``p.grad`` set by backward, a tensor stored on
  ``self``) are *materialized*: they get a buffer that every run refreshes.
* **define-then-run** (``ember.graph.placeholder``/``Variable``): concrete tensors mixed into the
  graph become constants; in-place writes to a Variable must go through ``assign``.

Example:
    >>> import ember
    >>> from ember.graph.builder import Tracer
    >>> with Tracer() as tr:
    ...     x = tr.input((2, 3), ember.float32)
    ...     y = (x * 2).sum()
    >>> y.shape, y.dtype
    (ember.Size([]), ember.float32)
"""
from __future__ import annotations

import gc
import sys
import weakref
from typing import Any

import numpy as np

from ember import dtypes, interpreters
from ember.autograd import grad_mode
from ember.graph import ops as graph_ops
from ember.graph import layout as layouts, rng
from ember.graph.ir import Graph, TracingError, Value, data_dependent_error, on_device
from ember.ops import dispatch
from ember.tensor import Tensor
from ember.ops.registry import OPS


class SymbolicTensor(Tensor):
    """A tensor in a graph under construction: shape, dtype and device, no data."""

    def __repr__(self) -> str:
        v = self._data
        grad = ", requires_grad=True" if self._requires_grad else ""
        return f"SymbolicTensor({v.label()}: {v.type_str()}{grad})"

    __str__ = __repr__

    def item(self) -> Any:
        raise data_dependent_error(".item()")

    def __bool__(self) -> bool:
        raise data_dependent_error("bool(tensor) (an `if` or `while` on a tensor)")

    def __float__(self) -> float:
        raise data_dependent_error("float(tensor)")

    def __int__(self) -> int:
        raise data_dependent_error("int(tensor)")

    def tolist(self) -> Any:
        raise data_dependent_error(".tolist()")

    def numpy(self, *, force: bool = False) -> Any:
        raise data_dependent_error(".numpy()")

    def __array__(self, dtype: Any = None, copy: Any = None) -> Any:
        raise data_dependent_error("NumPy conversion")


def is_symbolic(value: Any) -> bool:
    """True for graph tensors - and, while this thread traces, for every tensor (so concrete ones get lifted)."""
    return isinstance(value, Tensor) and (type(value._data) is Value or interpreters.tracing())


def symbolic(value: Value, requires_grad: bool = False, cls: type = SymbolicTensor) -> Any:
    return cls._make(value, value.device, requires_grad)


class Builder(interpreters.Interpreter):
    """Adds nodes to one graph; ``trace=True`` lifts concrete tensors (see the module doc).

    It is the interpreter of its graph's symbolic tensors (:mod:`ember.interpreters`); a tracing
    builder is also pushed on the thread's interpreter stack for the trace, so ops on concrete
    tensors come to it too.
    """

    def __init__(self, graph: Graph, trace: bool) -> None:
        self.graph = graph
        self.trace = trace
        graph.builder = self
        self.lifted: dict[int, tuple] = {}  # id(tensor) -> (tensor, original array, state value, original grad)
        self.lift_versions: dict[int, int] = {}  # id(tensor) -> its version when lifted (see finish)
        self.storage: dict[int, Value] = {}  # value id -> the state whose buffer it is (or will be written to)
        self.latest: dict[int, Value] = {}  # state id -> its newest value
        self.created: list = []  # weakrefs to symbolic tensors made while tracing (escape detection)
        self.rng_seeds: dict = {}  # (id(generator) or None, device) -> the graph's seed state (ember/graph/rng.py)
        self.rng_streams = 0  # the next random node's stream number (unique in the graph)
        # Views made while building (an eager view shares memory; a graph value does not): an in-place
        # write into a view is carried to its root (copy_slices) and from the root to its other views.
        self.views: dict[int, tuple] = {}  # id(view) -> (weakref view, weakref root, plain steps from the root)
        self.view_children: dict[int, list] = {}  # id(root) -> weakrefs of its views
        # Memory layouts (ember/graph/layout.py): value id -> witness or layout.UNKNOWN; absent: C-contiguous.
        # ``reshape``/``contiguous`` of an UNKNOWN layout is a view or a copy eagerly depending on the real
        # strides, so its result is *ambiguous*: a write into it raises TracingError (compile runs that call
        # eagerly), and a write into its root poisons it (reading it afterwards raises).
        self.layout: dict[int, Any] = {}
        self.ambiguous: dict[int, Any] = {}  # id(tensor) -> weakref
        self.poisoned: dict[int, Any] = {}  # id(tensor) -> weakref

    # ---- values of arguments ------------------------------------------------------------------
    def value_of(self, a: Any) -> Any:
        if isinstance(a, Tensor):
            data = a._data
            if type(data) is Value:
                if data.graph is not self.graph:
                    raise RuntimeError(
                        f"a symbolic tensor of graph {data.graph.name!r} was used in graph {self.graph.name!r}; "
                        "tensors of two graphs cannot be mixed (build both in one graph or run the first one)")
                return data
            if self.trace:
                return self.lift(a)
            return self.graph.add_const(data, a._device)
        return a

    def lift(self, t: Any) -> Value:
        """Make concrete tensor ``t`` a state of the traced graph until the trace ends."""
        data = t._data
        if type(data) is Value:
            return data
        state = self.graph.add_state(t)
        if not data.flags.c_contiguous:
            self.layout[state.id] = layouts.of_array(data)
        self.lifted[id(t)] = (t, data, state, t.grad)
        self.lift_versions[id(t)] = t._version
        self.storage[state.id] = state
        t._data = state
        return state

    def make(self, value: Value, requires_grad: bool = False) -> Any:
        t = symbolic(value, requires_grad)
        if self.trace:
            self.created.append(weakref.ref(t))
        return t

    # ---- ops ----------------------------------------------------------------------------------
    def apply(self, op: Any, args: tuple, attrs: dict) -> Any:
        if self.trace and op is graph_ops.ASSIGN:  # eagerly assign writes nothing: trace that, not a write
            return graph_ops.traced_assign(*args, **attrs)
        if self.poisoned:
            self._check_poisoned(args)
        inputs = tuple(self.value_of(a) for a in args)
        attrs = {k: v for k, v in attrs.items() if k != "_device"}
        outs = self.graph.add_node(op, inputs, attrs)
        tensors = tuple(self.make(v) for v in outs)
        if op.view and len(args) == 1 and isinstance(args[0], Tensor):  # (getitem with index tensors copies)
            is_view = self._view_layout(op, inputs[0], outs[0], attrs)
            if is_view is not False:  # eagerly a view (or, None, maybe one)
                self.mark_view(tensors[0], args[0], op.name, attrs)
            if is_view is None:
                self.ambiguous[id(tensors[0])] = weakref.ref(tensors[0])
        elif self.layout:
            if op.name == "contiguous" and self.layout.get(inputs[0].id) is layouts.UNKNOWN:
                self.mark_alias(tensors[0], args[0])  # eagerly the tensor itself or a copy: ambiguous
                self.ambiguous[id(tensors[0])] = weakref.ref(tensors[0])
            for v in outs:
                entry = layouts.computed_layout(inputs, self.layout, v.shape)
                if entry is not None:
                    self.layout[v.id] = entry
        if op.vjp is not None and grad_mode.STATE.enabled:
            nondiff = op.nondiff_inputs
            if any(isinstance(a, Tensor) and a._requires_grad and i not in nondiff for i, a in enumerate(args)):
                dispatch.record(op, tensors, args, attrs)
        return tensors[0] if op.num_outputs == 1 else tensors

    process = apply  # the interpreter's answer to dispatch

    def random_node(self, kind: str, shape: tuple, dtype: dtypes.dtype, device: Any, generator: Any, inputs: tuple,
                    params: dict) -> Any:
        return rng.random_node(self, kind, shape, dtype, device, generator, inputs, params)

    def check_direct_sampling(self) -> None:
        if self.trace:
            _no_random()

    def _view_layout(self, op: Any, source: Any, out: Value, attrs: dict) -> bool | None:
        """Record the layout of view op ``op``'s result ``out``; whether eager makes it a view (False: a copy,
        None: it depends on a layout that is not modelled)."""
        entry = self.layout.get(source.id) if type(source) is Value else None
        if op.name == "reshape":
            result, is_view = layouts.reshape_layout(entry, out.shape, out.edtype.itemsize)
        else:
            result, is_view = layouts.view_layout(op, entry, source.shape, source.edtype.itemsize, attrs), True
        if result is not None:
            self.layout[out.id] = result
        return is_view

    def _is(self, table: dict, t: Any) -> bool:
        ref = table.get(id(t))
        return ref is not None and ref() is t

    def _check_poisoned(self, args: Any) -> None:
        for a in args:
            if isinstance(a, Tensor) and self._is(self.poisoned, a):
                raise TracingError(_LAYOUT_MESSAGE)
            if isinstance(a, (list, tuple)):
                self._check_poisoned(a)

    def write(self, t: Any, result: Any, op_name: str) -> None:
        """In-place write ``t[...] = result``: ``t`` now holds a new SSA value."""
        if self.ambiguous and self.trace and (self._is(self.ambiguous, t) or self._is(self.poisoned, t)):
            raise TracingError(_LAYOUT_MESSAGE)
        old = t._data
        if type(old) is not Value:
            raise RuntimeError(
                f"{op_name}: cannot write a symbolic value into an eager tensor outside ember.compile. In a "
                "define-then-run graph use ember.graph.assign(variable, value).")
        if not self.trace and old.kind == "state":
            raise RuntimeError(f"{op_name}: in-place change of graph Variable {old.label()}; write "
                               "ember.graph.assign(var, value) (or assign_add / assign_sub) and run it instead")

        if type(result) is not Value:
            result = self.graph.add_const(on_device(result, t._device), t._device)
        if result.shape != old.shape:
            try:
                (result,) = self.graph.add_node(OPS["expand"], (result,), {"shape": old.shape})
            except Exception:
                raise RuntimeError(f"{op_name}: output with shape {list(old.shape)} doesn't match the broadcast "
                                   f"shape {list(result.shape)}") from None
        if result.edtype is not old.edtype:
            (result,) = self.graph.add_node(OPS["to_dtype"], (result,), {"dtype": old.edtype, "source": result.edtype})
        state = self.storage.get(old.id)
        if state is not None:
            if result.kind != "node" or result.id in self.storage:
                (result,) = self.graph.add_node(OPS["clone"], (result,), {})
            self.storage[result.id] = state
            self.latest[state.id] = result
        t._data = result
        self._propagate_write(t, op_name)

    def mark_view(self, view: Any, source: Any, op_name: str, attrs: dict) -> None:
        """``view`` = op ``op_name``(``source``) reads ``source``'s elements, as an eager view would share
        its memory: later in-place writes into either must reach the other (see :meth:`write`)."""
        entry = self.views.get(id(source))
        if entry is not None and entry[0]() is source:
            root, steps = entry[1](), entry[2]
        else:
            root, steps = source, ()
        if root is None:
            return
        if self.ambiguous and self._is(self.ambiguous, source):
            self.ambiguous[id(view)] = weakref.ref(view)
        steps = steps + ((op_name, tuple(sorted(attrs.items()))),)
        self.views[id(view)] = (weakref.ref(view), weakref.ref(root), steps)
        self.view_children.setdefault(id(root), []).append(weakref.ref(view))
        # The autograd side as for an eager view (ember/ops/dispatch.py _share_version): in-place rules
        # (ember/ops/inplace.py check_inplace) then apply to graph views as they do to eager ones.
        from ember.ops.registry import OPS

        view._base = root
        view._vc = root._vc = root._vc or [0]
        if not grad_mode.STATE.enabled or (source._base is not None and source._view_fn[0] is None):
            view._view_fn = (None, "no_grad")
        else:
            chain = source._view_fn[0] if source._base is not None else ()
            view._view_fn = (chain + ((OPS[op_name], dict(attrs)),), None)

    def mark_alias(self, alias: Any, source: Any) -> None:
        """``alias`` shares ``source``'s memory with no view step of its own (``detach()``, ``.data``): as for
        a view (:meth:`mark_view`), an in-place write into either reaches the other; autograd sees no view."""
        entry = self.views.get(id(source))
        if entry is not None and entry[0]() is source:
            root, steps = entry[1](), entry[2]
        else:
            root, steps = source, ()
        if root is None:
            return
        if self.ambiguous and self._is(self.ambiguous, source):
            self.ambiguous[id(alias)] = weakref.ref(alias)
        self.views[id(alias)] = (weakref.ref(alias), weakref.ref(root), steps)
        self.view_children.setdefault(id(root), []).append(weakref.ref(alias))

    def _propagate_write(self, t: Any, op_name: str) -> None:
        """After ``t`` got a new value: a view's root gets it written in (PyTorch's CopySlices); a root's
        views are re-derived from its new value (view replay), as their shared memory would show."""
        from ember.ops.registry import OPS

        entry = self.views.get(id(t))
        if entry is not None and entry[0]() is t:
            root = entry[1]()
            if root is not None and type(root._data) is Value:
                (whole,) = self.graph.add_node(OPS["copy_slices"], (root._data, t._data), {"steps": entry[2]})
                self.write(root, whole, op_name)
            return
        for ref in self.view_children.get(id(t), ()):
            view = ref()
            entry = self.views.get(id(view)) if view is not None else None
            if entry is None or entry[0]() is not view or type(view._data) is not Value:
                continue
            if self.ambiguous and self._is(self.ambiguous, view):  # eagerly a copy or a view: unknown here
                self.poisoned[id(view)] = weakref.ref(view)
                continue
            (view._data,) = self.graph.add_node(OPS["view_replay"], (t._data,), {"steps": entry[2]})

    # ---- end of a trace -------------------------------------------------------------------------
    def restore(self) -> None:
        """Give every lifted tensor its array (and .grad) back; used when a trace is abandoned."""
        for key, (t, data, _, grad) in self.lifted.items():
            t._data = data
            t.grad = grad
            start = self.lift_versions.get(key)
            if start is not None and t._version > start:  # the trace's writes never happened
                t._vc[0] = start

    def finish(self, outputs: list) -> None:
        """Record outputs and updates, restore lifted tensors, materialize escaped symbolic tensors."""
        if self.poisoned:
            self._check_poisoned(outputs)
        self.ambiguous.clear()
        self.poisoned.clear()
        graph = self.graph
        graph.outputs = [self.value_of(o) for o in outputs]
        returned = {id(o) for o in outputs}
        for ref, _, _ in self.views.values():  # a graph view's link to its root must not make the root escape
            view = ref()
            if view is not None and view._base is not None:
                view._base = None
        self.views.clear()
        self.view_children.clear()
        owned = []
        for key, (t, data, state, _) in list(self.lifted.items()):
            final = self.latest.get(state.id, state)
            current = t._data
            if current is not final and type(current) is Value and self.storage.get(current.id) is not state:
                final = current  # t.data = other: the tensor now holds another value
            t._data = data
            if final is not state:
                graph.updates.append((state, final))
                # The trace's in-place ops bumped t's version; the runs bump it (as often) instead, so
                # t._version counts like eager torch's (one per in-place op per call)
                start = self.lift_versions.get(key, 0)
                if t._version > start:
                    graph.update_bumps[state.id] = t._version - start
                    t._vc[0] = start
            else:
                owned.append(key)
        del outputs
        # Escaped symbolic tensors: .grad of lifted leaves (set by backward) and any tensor the handler
        # made that is still referenced (stored on self, in an optimizer's state...).
        escaped = [entry[0].grad for entry in self.lifted.values() if entry[0].grad is not None]
        grads = len(escaped)  # a .grad escapes even when the function also returns it
        self.created = [r for r in self.created if r() is not None]
        if self.created:
            gc.collect(1)
        escaped += [r() for r in self.created]
        done: set = set()
        t = None
        for k, t in enumerate(escaped):
            if t is None or type(t._data) is not Value or t._data.graph is not graph or id(t) in done \
                    or (id(t) in returned and k >= grads):
                continue
            done.add(id(t))
            value = t._data  # escaped: give it a buffer that each run refreshes
            t._data = t._device.xp.empty(value.shape, dtype=value.dtype)
            t.grad_fn = None
            t._requires_grad = False
            state = graph.add_state(t)
            graph.escaped.add(state.id)
            graph.updates.append((state, value))
        del escaped, t
        self.created = []
        # Lifted tensors that only the graph still references were made during the trace (like the
        # ones_like seed of backward): they are constants the folder may use.
        for key in owned:
            t, data, state, _ = self.lifted[key]
            del t
            entry = self.lifted.pop(key)
            if sys.getrefcount(entry[0]) <= _OWNED_REFS:
                state.kind, state.data, state.tensor = "const", data, None
                graph.states.remove(state)
                graph.consts.append(state)
            del entry
        self.lifted.clear()
        self.lift_versions.clear()


_LAYOUT_MESSAGE = (
    "an in-place write reaches a tensor made by reshape()/contiguous() of a non-contiguous tensor; eagerly such a "
    "tensor is a view or a copy depending on the memory layout, which a graph does not model. Clone it first "
    "(`.clone()`) to write a copy, or let ember.compile run this call eagerly (fallback='eager', the default).")


def _measure_owned_refs() -> int:
    """References a tensor held only by the graph has inside ``finish`` (for the const test)."""
    probe = Tensor._make(np.zeros(()), None, False)
    state = Value(None, (), dtypes.float64, None, "state")
    state.tensor = probe
    table = {0: (probe, None, state, None)}
    del probe
    entry = table.pop(0)
    return sys.getrefcount(entry[0])


_OWNED_REFS = _measure_owned_refs()


def _no_random(*args: Any, **kwargs: Any) -> Any:
    # rand/randn/randint/randperm/bernoulli/multinomial/dropout become random graph nodes
    # (ember/graph/rng.py); whatever still draws from a generator directly while tracing lands here.
    raise TracingError(
        "this random sampling call draws numbers from a generator directly, which a graph cannot replay "
        "(in-place fills such as normal_/uniform_/bernoulli_/exponential_, ember.nn.init, data transforms). "
        "Inside a compiled function use the out-of-place samplers (ember.rand/randn/randint/randperm/bernoulli/"
        "multinomial, dropout), which compile to random nodes; or sample outside and pass the values in; or let "
        "ember.compile fall back to eager (fallback='eager')."
    )


class Tracer:
    """Context manager for one trace: a fresh graph, symbolic dispatch on, concrete tensors lifted."""

    def __init__(self, name: str = "traced") -> None:
        self.graph = Graph(name)
        self.builder = Builder(self.graph, trace=True)

    def input(self, shape: tuple, dtype: dtypes.dtype, device: Any = None, requires_grad: bool = False,
              name: str | None = None, contiguous: Any = True) -> Any:
        """A graph input; ``contiguous``: True, False (layout unknown) or the argument's array (its layout)."""
        value = self.graph.add_input(shape, dtype, device, name)
        if contiguous is not True:  # a concrete array (the argument's): its layout
            entry = layouts.of_array(contiguous) if contiguous is not False else layouts.UNKNOWN
            if entry is not None:
                self.builder.layout[value.id] = entry
        return self.builder.make(value, requires_grad)

    def __enter__(self) -> "Tracer":
        interpreters.push(self.builder)
        return self

    def __exit__(self, exc_type: Any, *exc: Any) -> None:
        interpreters.pop(self.builder)
        if exc_type is not None:
            self.builder.restore()
