"""Backward-graph nodes. A node is made by every recorded op; it is also the ``ctx`` that the op's
vjp rule reads (``ctx.inputs``, ``ctx.out``, ``ctx.attrs``, ``ctx.needs_input_grad``).

An edge is ``(node, output_index)`` for a non-leaf input, ``(leaf_tensor, 0)`` for a leaf that
requires grad, or ``None`` for an input that takes no gradient.
"""
from __future__ import annotations

import functools
import re
import weakref

from typing import Any, Callable

import numpy as np

from ember import dtypes
from ember.autograd import anomaly_mode, saved_hooks
from ember.autograd import torch_edges as _torch_edges
from ember.autograd.torch_edges import record_inputs, torch_edges

_BACKWARD_SUFFIX = re.compile(r"Backward\d*$")
_FREED_MESSAGE = (  # torch's words
    "Trying to backward through the graph a second time (or directly access saved tensors after they have already "
    "been freed). Saved intermediate values of the graph are freed when you call .backward() or autograd.grad(). "
    "Specify retain_graph=True if you need to backward through the graph a second time or if you need to access "
    "saved tensors after calling backward."
)


class SavedTensor:
    """A tensor saved for backward plus the version it had, so in-place changes are caught.

    An op's own output is saved as data only (no reference to the node, which would be a
    cycle) and unpacked into a tensor whose grad_fn is that node, as PyTorch does.

    Under ``saved_tensors_hooks`` the pack hook's result is kept instead of the tensor (``packed``) and
    the unpack hook rebuilds it at backward; as in PyTorch, versions are then not checked (the hooks own
    the value) and the unpacked value is re-attached to the saved tensor's place in the graph, so
    higher-order gradients still flow. This is the one place where ops and custom Functions save tensors.
    """

    __slots__ = ("tensor", "version", "vc", "is_output", "data", "device", "output_nr", "packed", "unpack_hook",
                 "grad_fn", "leaf")

    def __init__(self, tensor: Any, is_output: bool = False, output_nr: int = 0) -> None:
        vc = tensor._vc
        if vc is None:
            vc = tensor._vc = [0]
        self.vc = vc
        self.version = vc[0]
        self.is_output = is_output
        self.output_nr = output_nr  # which output of a multi-output op (its gradient slot in double backward)
        self.unpack_hook = None
        if is_output:
            self.tensor = None
            self.data = tensor._data
            self.device = tensor._device
        else:
            self.tensor = tensor
        if saved_hooks.ACTIVE[0]:  # some thread uses saved_tensors_hooks: is it this one?
            hooks = saved_hooks.current()
            if hooks is not None:
                self._pack(tensor, *hooks)

    def _pack(self, tensor: Any, pack_hook: Callable, unpack_hook: Callable) -> None:
        """Keep ``pack_hook(tensor)`` instead of the tensor (PyTorch's SavedVariable with hooks)."""
        version = self.vc[0]
        packed = pack_hook(tensor)
        if self.vc[0] != version:
            raise RuntimeError(
                "A saved tensor pack hook is modifying its input in place. Tensors provided as input to pack hook "
                "cannot be modified by in-place operations as this can lead to unexpected side-effects. Return a "
                "new tensor from the hook instead (e.g. tensor.detach().clone()).")
        self.packed = packed
        self.unpack_hook = unpack_hook
        self.grad_fn = None if self.is_output else tensor.grad_fn
        self.output_nr = self.output_nr if self.is_output else tensor._output_nr
        # A leaf that takes gradients stays reachable through the graph's edges anyway; keep it so an
        # unpacked copy can route a higher-order gradient back to it. Anything else is dropped here.
        self.leaf = tensor if not self.is_output and tensor.grad_fn is None and tensor._requires_grad else None
        self.tensor = None
        self.data = None
        self.vc, self.version = [0], 0  # as in PyTorch, the hooks own the value: no version check

    def register_hooks(self, pack_hook: Callable, unpack_hook: Callable) -> None:
        """``grad_fn._raw_saved_self.register_hooks(pack, unpack)``: hooks for this one saved tensor."""
        if not callable(pack_hook) or not callable(unpack_hook):
            raise TypeError("register_hooks: pack_hook and unpack_hook must be callables")
        if self.unpack_hook is not None:
            raise RuntimeError("Calling register_hooks on a saved tensor whose hooks have already been set. Hint: only "
                               "one pair of hooks is allowed at a time.")
        tensor_type = _tensor_type()
        if self.tensor is None and self.data is None:
            raise RuntimeError("Calling register_hooks on a saved tensor after it has been freed. Saved intermediate "
                               "values of the graph are freed when you call .backward() or autograd.grad(). Specify "
                               "retain_graph=True if you need to backward through the graph a second time.")
        if self.is_output:
            tensor = tensor_type._make(self.data, self.device, False)
            tensor._vc = self.vc
        else:
            tensor = self.tensor
        self._pack(tensor, pack_hook, unpack_hook)

    def unpack(self, node: "Node", op_name: str, position: str) -> Any:
        if self.vc[0] != self.version:  # a hooked value has a private counter: never fails
            raise RuntimeError(self._modified_message(node, op_name, position))
        tensor = self.tensor
        if tensor is not None:
            return tensor
        if self.unpack_hook is not None:
            return self._unpack_hooked(node, _tensor_type())
        op = getattr(node, "op", None)  # an output, kept as data
        differentiable = node.output_requires_grad and (op is None or self.output_nr not in op.nondiff_outputs)
        t = _tensor_type()._make(self.data, self.device, differentiable)
        t.grad_fn = node if differentiable else None
        t._output_nr = self.output_nr
        t._vc = self.vc
        return t

    def _modified_message(self, node: "Node", op_name: str, position: str) -> str:
        """PyTorch's message for a saved tensor changed in place since it was saved: its legacy type and
        size, the node that made it (an output: the saving node; an input: its grad_fn now) and both versions;
        then ember names the op that needed it (torch says so only under anomaly detection)."""
        if self.is_output:
            data, device, grad_fn, output_nr = self.data, self.device, node, self.output_nr
        else:
            t = self.tensor
            data, device, grad_fn, output_nr = t._data, t._device, t.grad_fn, t._output_nr
        kind = dtypes.legacy_type_name(dtypes.from_numpy_dtype(data.dtype), device.type)
        made_by = ""
        if grad_fn is not None:  # torch 2.13 names the node without its "Backward0" suffix ("output 0 of Exp")
            made_by = f", which is output {output_nr} of {_BACKWARD_SUFFIX.sub('', grad_fn.name())},"
        hint = ("Hint: the backtrace further above shows the operation that failed to compute its gradient. The "
                "variable in question was changed in there or anywhere later. Good luck!"
                if anomaly_mode.is_anomaly_enabled() else
                "Hint: enable anomaly detection to find the operation that failed to compute its gradient, with "
                "torch.autograd.set_detect_anomaly(True, check_nan=False).")
        return (f"one of the variables needed for gradient computation has been modified by an inplace operation: "
                f"[{kind} [{', '.join(str(n) for n in data.shape)}]]{made_by} is at version {self.vc[0]}; expected "
                f"version {self.version} instead. {hint} (It was saved as the {position} of {op_name}.)")

    def _unpack_hooked(self, node: "Node", tensor_type: type) -> Any:
        value = self.unpack_hook(self.packed)
        if not isinstance(value, tensor_type):
            raise TypeError(f"Output of saved tensor unpack_hook expected to be a Tensor but got result of type "
                            f"{type(value).__name__}")
        if self.is_output:
            op = getattr(node, "op", None)
            grad_fn = node if node.output_requires_grad and (
                op is None or self.output_nr not in op.nondiff_outputs) else None
        else:
            grad_fn = self.grad_fn
            if grad_fn is None and self.leaf is not None:
                if value is self.leaf:
                    return value
                grad_fn = _LeafAlias(self.leaf)
        if grad_fn is None:
            return value.detach() if value._requires_grad else value
        t = tensor_type._make(value._data, value._device, True)
        t.grad_fn = grad_fn
        t._output_nr = self.output_nr if grad_fn is not None and not isinstance(grad_fn, _LeafAlias) else 0
        return t

    def array(self, op_name: str, position: str, node: Any = None) -> Any:
        """The saved value's array, version-checked like :meth:`unpack` (array gradient rules read this)."""
        if self.unpack_hook is not None:  # saved through hooks: only unpack() may rebuild it
            raise NotArrayable
        if self.vc[0] != self.version:
            self.unpack(node, op_name, position)  # raises the in-place modification error
        return self.data if self.is_output else self.tensor._data


_TENSOR: list = []


def _tensor_type() -> type:
    """The Tensor class, looked up once (the core's seam: Tensor is defined above this package)."""
    if not _TENSOR:
        from ember.tensor import Tensor

        _TENSOR.append(Tensor)
    return _TENSOR[0]


class NotArrayable(Exception):
    """Raised by an array gradient rule (or its ctx) for a node it cannot take: the node runs its ``vjp``."""


class ArrayCtx:
    """What an array gradient rule reads (``OpDef.array_vjp``): the saved inputs and output as NumPy arrays
    (Python numbers stay numbers), the attrs, the inputs' shapes and which inputs need a gradient.

    ``inputs`` and ``out`` are read on first use and version-checked then, as ``OpNode.inputs``/``out``
    are; a saved floating array of another dtype than the gradient's raises :class:`NotArrayable`.
    """

    __slots__ = ("node", "dtype", "attrs", "input_meta", "needs", "_inputs")

    def __init__(self, node: "OpNode", dtype: Any) -> None:
        self.node = node
        self.dtype = dtype
        self.attrs = node.attrs
        self.input_meta = node.input_meta
        self.needs = node.needs_input_grad
        self._inputs = None

    @property
    def inputs(self) -> tuple:
        inputs = self._inputs
        if inputs is None:
            node = self.node
            values = []
            dtype = self.dtype
            for i, s in enumerate(node.saved or ()):
                if s.__class__ is SavedTensor:
                    if s.unpack_hook is None and s.vc[0] == s.version:  # (s.array's checks, inlined: they pass)
                        s = s.data if s.is_output else s.tensor._data
                    else:
                        s = s.array(node.op.name, f"input {i}", node)
                    if type(s) is not np.ndarray:
                        raise NotArrayable
                    d = s.dtype
                    if d is not dtype and d != dtype and d.kind in "fcV":
                        raise NotArrayable
                values.append(s)
            inputs = self._inputs = tuple(values)
        return inputs

    @property
    def out(self) -> Any:
        """The saved output's array; for a multi-output op, a tuple (None where an output was not saved)."""
        saved = self.node.saved_out
        if saved.__class__ is tuple:
            name = self.node.op.name
            return tuple(None if s is None else self._check(s.array(name, f"output {i}", self.node)) for i, s in enumerate(saved))
        if saved.__class__ is not SavedTensor:
            raise NotArrayable
        return self._check(saved.array(self.node.op.name, "output", self.node))

    def _check(self, array: Any) -> Any:
        if type(array) is not np.ndarray:
            raise NotArrayable
        d = array.dtype
        if d is not self.dtype and d != self.dtype and d.kind in "fcV":
            raise NotArrayable
        return array


_ARRAY_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))
_FLOAT32, _FLOAT64 = _ARRAY_DTYPES  # (NumPy's own arrays carry these very objects: an identity test first)


class Node:
    """Base class: subclasses implement :meth:`apply` mapping output grads to input grads.

    PyTorch's ``grad_fn`` API: ``name()``, ``next_functions``, ``register_hook(fn(grad_inputs,
    grad_outputs))``, ``register_prehook(fn(grad_outputs))`` and ``metadata`` (a dict). Those hooks and
    the dict live in ``extra`` (None until first used, so a node costs one slot more).
    """

    __slots__ = ("next_edges", "pre_hooks", "freed", "output_requires_grad", "extra", "__weakref__")
    num_outputs = 1  # multi-output subclasses override with a slot

    def __init__(self) -> None:
        self.next_edges: tuple = ()
        self.pre_hooks: dict[int, list[Callable]] | None = None  # tensor hooks, per output
        self.freed = False
        self.output_requires_grad = True
        self.extra: NodeExtra | None = None

    def name(self) -> str:
        return type(self).__name__

    def apply(self, grads: list) -> tuple:
        raise NotImplementedError

    def release(self) -> None:
        """Drop saved values once backward is done with them (unless retain_graph)."""
        self.freed = True

    def _register_tensor_prehook(self, output_nr: int, hook: Callable) -> list:
        """A tensor's ``register_hook`` on a non-leaf: ``hook(grad)`` for output ``output_nr``."""
        if self.pre_hooks is None:
            self.pre_hooks = {}
        hooks = self.pre_hooks.setdefault(output_nr, [])
        if hooks and getattr(hooks[-1], "_retains_grad", False) and not getattr(hook, "_retains_grad", False):
            hooks.insert(len(hooks) - 1, hook)  # torch runs the retains_grad hook after every other tensor hook
        else:
            hooks.append(hook)
        return hooks

    def _move_retains_grad(self, output_nr: int, tensor: Any) -> None:
        """``tensor`` (output ``output_nr`` of this node) got a new history from an in-place op: its
        ``retain_grad`` hook moves there, so ``.grad`` is the gradient of the new value (PyTorch's
        ``update_tensor_hooks_on_new_gradfn``); other tensor hooks stay, seeing the old value's gradient."""
        hooks = self.pre_hooks.get(output_nr) if self.pre_hooks else None
        for hook in hooks or ():
            if getattr(hook, "_retains_grad", False):
                hooks.remove(hook)
                if tensor.grad_fn is not None:
                    tensor.grad_fn._register_tensor_prehook(tensor._output_nr, hook)
                return

    def _extra(self) -> "NodeExtra":
        if self.extra is None:
            self.extra = NodeExtra()
        return self.extra

    def register_prehook(self, fn: Callable) -> "RemovableHandle":
        """``fn(grad_outputs) -> tuple | None`` before this node runs; a tuple replaces the gradients.

        Example:
            >>> import ember
            >>> a = ember.zeros(3, requires_grad=True)
            >>> b = a.clone()
            >>> _ = b.grad_fn.register_prehook(lambda gO: (gO[0] * 2,))
            >>> b.sum().backward(); a.grad
            tensor([2., 2., 2.])
        """
        hooks = self._extra().pre
        hooks.append(fn)
        return RemovableHandle(hooks, fn)

    def register_hook(self, fn: Callable) -> "RemovableHandle":
        """``fn(grad_inputs, grad_outputs) -> tuple | None`` after this node ran; a tuple replaces
        ``grad_inputs`` (one entry per edge of ``next_functions``)."""
        hooks = self._extra().post
        hooks.append(fn)
        return RemovableHandle(hooks, fn)

    @property
    def metadata(self) -> dict:
        """A dict the user may fill; it lives as long as the node."""
        return self._extra().metadata

    @property
    def next_functions(self) -> tuple:
        """PyTorch-style view of the edges: ``((node_or_None, index), ...)``, in PyTorch's shape
        (ember/autograd/torch_edges.py: which inputs torch lists, and in which order)."""
        Tensor = _tensor_type()
        extra = self.extra
        recorded = extra.edges if extra is not None else None
        out = [_torch_pair(edge, Tensor) for edge in (self.next_edges if recorded is None else recorded)]
        return tuple(out) if recorded is not None else torch_edges(self, tuple(out))

    def __repr__(self) -> str:
        return f"<{self.name()} object at {hex(id(self))}>"


class NodeExtra:
    """What a node holds once the user touches its hooks or metadata."""

    __slots__ = ("pre", "post", "metadata", "edges")

    def __init__(self) -> None:
        self.pre: list[Callable] = []
        self.post: list[Callable] = []
        self.metadata: dict = {}
        self.edges: tuple | None = None  # PyTorch's edges where a composite recorded them (torch_edges.record_inputs)


class RemovableHandle:
    """``handle.remove()`` takes the hook out of its list again (PyTorch's RemovableHandle)."""

    def __init__(self, hooks: list, hook: Callable) -> None:
        self._hooks, self._hook = hooks, hook

    def remove(self) -> None:
        if self._hook in self._hooks:
            self._hooks.remove(self._hook)

    def __enter__(self) -> "RemovableHandle":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.remove()


class _LeafAlias(Node):
    """The grad_fn of a leaf's value rebuilt by an unpack hook: passes gradients on to the leaf itself,
    so a higher-order gradient through a hooked saved tensor reaches the leaf's ``.grad`` as in PyTorch."""

    __slots__ = ()

    def __init__(self, leaf: Any) -> None:
        super().__init__()
        self.next_edges = ((leaf, 0),)

    def name(self) -> str:
        return "AccumulateGrad"

    def apply(self, grads: list) -> tuple:
        return (grads[0],)


class NotImplemented_(Node):
    """PyTorch's ``torch::autograd::NotImplemented`` node: the history of an op with no derivative (``set_`` with
    grad enabled on tensors that require grad); it refuses when backward reaches it, naming the op."""

    __slots__ = ("op_name",)

    def __init__(self, op_name: str, edges: tuple) -> None:
        super().__init__()
        self.op_name = op_name
        self.next_edges = edges

    def name(self) -> str:
        return "torch::autograd::NotImplemented"

    def apply(self, grads: list) -> tuple:
        raise RuntimeError(f"derivative for {self.op_name} is not implemented")


NotImplemented_.__name__ = NotImplemented_.__qualname__ = "NotImplemented"  # torch's class name


class AccumulateGrad:
    """What ``next_functions`` shows for a leaf: PyTorch's AccumulateGrad, with ``.variable``; one object per
    leaf while any is held (torchviz tells nodes apart by identity)."""

    _live: "weakref.WeakValueDictionary[int, AccumulateGrad]" = weakref.WeakValueDictionary()

    def __init__(self, variable: Any) -> None:
        self.variable = variable

    @classmethod
    def of(cls, variable: Any) -> "AccumulateGrad":
        """The leaf's AccumulateGrad (the same object while one is alive; it holds the leaf, so ids stay unique)."""
        node = cls._live.get(id(variable))
        if node is None or node.variable is not variable:
            node = cls._live[id(variable)] = cls(variable)
        return node

    def name(self) -> str:
        return "torch::autograd::AccumulateGrad"  # PyTorch's own spelling

    next_functions: tuple = ()

    def register_prehook(self, fn: Callable) -> Any:
        """``fn(grad_outputs)`` before the gradient reaches the leaf: a tensor hook on the leaf."""
        def hook(grad: Any) -> Any:
            replaced = fn((grad,))
            return None if replaced is None else replaced[0]

        return self.variable.register_hook(hook)

    def __repr__(self) -> str:
        return f"<AccumulateGrad object at {id(self):#x}>"  # as PyTorch's (other nodes print so too)


AccumulateGradView = AccumulateGrad  # the earlier name


def _torch_pair(edge: Any, tensor_type: Any = None) -> tuple:
    """An edge as ``next_functions`` shows it: ``(None, 0)``, ``(AccumulateGrad, 0)`` for a leaf, else itself."""
    if edge is None:
        return (None, 0)
    if isinstance(edge[0], tensor_type or _tensor_type()):
        return (AccumulateGrad.of(edge[0]), 0)
    return edge


_torch_edges.CONVERT = _torch_pair


class OpNode(Node):
    """The node recorded for one application of an op record."""

    __slots__ = ("op", "attrs", "saved", "saved_out", "needs_input_grad", "input_meta", "num_outputs", "output_meta",
                 "unpacked", "unpacked_out")

    def __init__(self, op: Any, attrs: dict, next_edges: tuple, input_meta: tuple, needs: tuple | None = None) -> None:
        self.op = op
        self.attrs = attrs
        self.next_edges = next_edges
        self.input_meta = input_meta  # (shape, dtype) per input; None for Python scalars
        self.needs_input_grad = tuple([e is not None for e in next_edges]) if needs is None else needs
        self.extra = None
        self.saved = None
        self.saved_out = None
        self.pre_hooks = None
        self.freed = False
        self.output_requires_grad = True
        self.num_outputs = op.num_outputs
        self.output_meta = None
        # The unpacked saved inputs, kept while apply() runs: a rule per input reads ctx.inputs once per
        # input, and each read would unpack (and version-check) every saved tensor again.
        self.unpacked = None
        self.unpacked_out = None
        # The class carries torch's name (``type(grad_fn).__name__``, as torchviz reads it): fixed per op, or from
        # the op's rule (shapes, attrs; ember/ops/torch_node_names.py); torch_named may rename it later.
        cls = op.__dict__.get("_node_class")
        if cls is None:
            cls = op._node_class = _class_named(op.backward_name) if op.torch_backward_name is None else OpNode
        self.__class__ = cls if cls is not OpNode else _class_named(op.torch_backward_name(self))

    def name(self) -> str:
        rule = self.op.torch_backward_name
        return self.op.backward_name if rule is None else rule(self)


    # ---- the ctx interface that vjp rules use -------------------------------------------
    @property
    def inputs(self) -> tuple:
        unpacked = self.unpacked
        if unpacked:  # inside apply(), after the first read
            return unpacked
        if self.saved is None:
            raise RuntimeError(_FREED_MESSAGE)
        result = tuple([s.unpack(self, self.op.name, f"input {i}") if isinstance(s, SavedTensor) else s
                        for i, s in enumerate(self.saved)])
        if unpacked is not None:  # () while apply() runs: keep them for the other rules of this call
            self.unpacked = result
        return result

    @property
    def out(self) -> Any:
        cached = self.unpacked_out
        if cached is not None:  # inside apply(), after the first read
            return cached
        if self.saved_out is None:
            if self.freed:
                raise RuntimeError(_FREED_MESSAGE)
            raise RuntimeError(f"op {self.op.name} did not save its output (save={self.op.save!r})")
        if isinstance(self.saved_out, tuple):
            result = tuple(s.unpack(self, self.op.name, f"output {i}") if s is not None else None
                           for i, s in enumerate(self.saved_out))
        else:
            result = self.saved_out.unpack(self, self.op.name, "output")
        if self.unpacked is not None:  # inside apply(): each saved value is unpacked once, as in PyTorch
            self.unpacked_out = result
        return result

    @property
    def needs(self) -> tuple:
        return self.needs_input_grad

    def apply(self, grads: list) -> tuple:
        if self.freed and self.op.save != "none":
            raise RuntimeError(_FREED_MESSAGE)
        grad = grads[0] if self.num_outputs == 1 else tuple(grads)
        self.unpacked = ()
        try:
            return self.op.input_grads(self, grad)
        finally:
            self.unpacked = None
            if self.unpacked_out is not None:
                self.unpacked_out = None

    def apply_arrays(self, grads: list, batched: bool = True) -> tuple | None:
        """The input gradients as NumPy arrays from the op's array rules (``OpDef.array_vjp``), or None
        when this node does not qualify: the engine calls it only when no graph of the backward is built
        (``create_graph=False``, no profiler, autocast or tracing). A node qualifies when its gradient and
        every saved floating array it reads are CPU float32/float64 arrays of one dtype; anything else
        (half precision, complex, devices, mixed dtypes) takes :meth:`apply`, whose ops promote."""
        g = grads[0]
        if g.__class__ is not np.ndarray and g is not None:  # a tensor (the engine passes array rules' results on)
            if g._device.type == "meta":  # no data: the ops' rules answer with shapes (ember/ops/meta_dispatch.py)
                return None
            g = g._data
            if type(g) is not np.ndarray:  # vmap's batched values run the batched array rules (their level's)
                rules = getattr(type(g), "array_input_grads", None) if batched else None
                return None if rules is None else g.array_input_grads(self, grads)
        op = self.op
        if g is None or (self.saved is None and op.save != "none"):
            return None  # freed: apply() raises the error
        dtype = g.dtype
        if dtype is not _FLOAT32 and dtype is not _FLOAT64 and dtype not in _ARRAY_DTYPES:
            return None
        # a multi-output op's array rule takes the first output's gradient: the others must have none (a
        # non-differentiable second output, as cross entropy's log-softmax)
        single = self.num_outputs == 1
        if op.array_vjp is not None and (single or all(x is None for x in grads[1:])):
            # a multi-output node recorded under vmap (cross entropy as the loss of vmap(grad(...))) takes its
            # level's batched rules below: its plain array rule would not see the batch and fall back to dispatch
            if single or not batched or self._batched_saved() is None:
                try:
                    return op.array_input_grads(ArrayCtx(self, dtype), g)
                except NotArrayable:
                    pass
        if not batched:
            return None
        # A plain cotangent for a node recorded under vmap (the seed of grad's backward inside vmap): the
        # batched array rules of the level its saved values belong to.
        data = self._batched_saved()
        return None if data is None else data.array_input_grads(self, grads)

    def _batched_saved(self) -> Any:
        """The first saved value that is a vmap-batched array (it carries its level's array rules), or None."""
        for s in (self.saved or ()) + (self.saved_out if self.saved_out.__class__ is tuple else (self.saved_out,)):
            if s.__class__ is SavedTensor:
                data = s.data if s.is_output else getattr(s.tensor, "_data", None)
                if getattr(type(data), "array_input_grads", None) is not None:
                    return data
        return None

    def release(self) -> None:
        self.saved = None
        self.saved_out = None
        self.freed = True


def _saved_property(key: str, raw: bool) -> property:
    def read(node: OpNode) -> Any:
        return _saved_attribute(node, key, raw)

    read.__doc__ = f"PyTorch's ``{'_raw' if raw else ''}_saved_{key}`` of this node."
    return property(read)


# ``y.grad_fn._saved_self``, ``_saved_result``, ``_saved_dim``, ``_raw_saved_other``...: what PyTorch's generated
# nodes show of their saved values, for the names its common ops use. Properties, not ``__getattr__``: a class
# with ``__getattr__`` makes every attribute read of every node slower (CPython's slot_tp_getattr_hook; measured
# 11% on a 100-op backward).
_SAVED_TENSOR_NAMES = ("self", "other", "exponent", "mat2", "input", "weight", "bias", "condition", "indices",
                       "result", "result0", "result1", "result2", "result3")
for _key in _SAVED_TENSOR_NAMES:
    setattr(OpNode, f"_saved_{_key}", _saved_property(_key, raw=False))
    setattr(OpNode, f"_raw_saved_{_key}", _saved_property(_key, raw=True))
for _key in ("dim", "keepdim", "self_sym_sizes", "other_sym_sizes", "mat2_sym_sizes", "input_sym_sizes",
             "weight_sym_sizes"):
    setattr(OpNode, f"_saved_{_key}", _saved_property(_key, raw=False))

# The names PyTorch's derivatives give an op's inputs, where they are not (self, other, ...).
_INPUT_NAMES = {
    "pow": ("self", "exponent"), "mm": ("self", "mat2"), "bmm": ("self", "mat2"), "matmul": ("self", "other"),
    "linear": ("input", "weight", "bias"), "conv2d": ("input", "weight", "bias"), "conv1d": ("input", "weight", "bias"),
    "where": ("condition", "self", "other"), "embedding": ("weight", "indices"),
}


def _saved_attribute(node: OpNode, key: str, raw: bool) -> Any:
    names = _INPUT_NAMES.get(node.op.name) or ("self", "other")
    count = len(node.input_meta)
    if node.op.name not in _INPUT_NAMES and count > 2:
        names = ("self",) + tuple(f"input{i}" for i in range(1, count))
    if key == "result" or (key.startswith("result") and key[6:].isdigit()):
        saved_out = node.saved_out
        if saved_out is None:
            if node.freed:
                raise RuntimeError(_FREED_MESSAGE)
            raise AttributeError(f"{node.name()} did not save its result")
        if isinstance(saved_out, tuple):
            index = int(key[6:] or 0)
            saved, position = saved_out[index], f"output {index}"
            if saved is None:  # an output the backward does not read (OpDef.saved_outputs)
                raise AttributeError(f"{node.name()} did not save its result {index}")
        else:
            saved, position = saved_out, "output"
        return saved if raw else saved.unpack(node, node.op.name, position)
    if key.endswith("_sym_sizes") and key[:-10] in names[:count]:
        return node.input_meta[names.index(key[:-10])]
    if key in names[:count] and node.op.save not in ("none", "output"):
        if node.saved is None:
            raise RuntimeError(_FREED_MESSAGE)
        index = names.index(key)
        saved = node.saved[index]
        if isinstance(saved, SavedTensor):
            return saved if raw else saved.unpack(node, node.op.name, f"input {index}")
        return saved  # None where the op did not need it, a Python number where one was given
    if not raw and key in node.attrs:
        return node.attrs[key]
    raise AttributeError(f"{node.name()} has no saved value {key!r} (inputs: {', '.join(names[:count])}; "
                         f"attributes: {', '.join(node.attrs) or 'none'})")


_NAMED_NODES: dict[str, type] = {}


def torch_named(tensor: Any, name: str) -> Any:
    """``tensor`` whose fresh node prints PyTorch's ``name`` (``F.mse_loss``'s last node, a mean, is
    ``MseLossBackward0``; ``x.t()``'s permute is ``TBackward0``): the node's class becomes a subclass of OpNode that
    only renames it (``type(grad_fn).__name__`` too, as torch's). Untouched without a fresh OpNode."""
    node = tensor.grad_fn
    if node is not None and node.__class__ in OP_NODE_CLASSES:
        node.__class__ = _NAMED_NODES.get(name) or _named_class(name)
    return tensor


def _named_class(name: str) -> type:
    # torch's "torch::autograd::CopySlices" is class CopySlices whose name() says the namespace too
    cls = _NAMED_NODES[name] = type(name.rsplit("::", 1)[-1], (OpNode,), {
        "__slots__": (), "name": lambda self, _n=name: _n, "__module__": __name__})
    OP_NODE_CLASSES.add(cls)
    return cls


def _class_named(name: str) -> type:
    return _NAMED_NODES.get(name) or _named_class(name)


def named_backward(name: str, when: Callable[..., bool] | None = None, inputs: tuple = ()) -> Callable:
    """Decorator: the composite's result prints PyTorch's node ``name`` (not in place: an input returned as the
    result keeps its node); ``when(*args, **kwargs)``: only for the calls torch names so. ``inputs``: the
    arguments whose edges torch's node lists, in its order, as ``(position, keyword)`` pairs (a third item
    names a node torch puts between, as ``LogSoftmaxBackward0`` under cross entropy's ``NllLossBackward0``):
    ``next_functions`` then shows those (ember/autograd/torch_edges.py)."""
    def decorate(fn: Callable) -> Callable:
        @functools.wraps(fn)
        def run(*args: Any, **kwargs: Any) -> Any:
            out = fn(*args, **kwargs)
            if getattr(out, "grad_fn", None) is not None and not (args and out is args[0]) and \
                    (when is None or when(*args, **kwargs)):
                torch_named(out, name)
                if inputs:
                    record_inputs(out, tuple(_argument(args, kwargs, spec) for spec in inputs))
            return out
        return run
    return decorate


def _argument(args: tuple, kwargs: dict, spec: tuple) -> Any:
    value = args[spec[0]] if len(args) > spec[0] else kwargs.get(spec[1])
    return value if len(spec) < 3 else (spec[2], value)


OP_NODE_CLASSES: set = {OpNode}  # OpNode and its renamed forms: the engine's array fast path takes all of them
