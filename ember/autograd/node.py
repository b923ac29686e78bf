"""Backward-graph nodes. A node is made by every recorded op; it is also the ``ctx`` that the op's
vjp rule reads (``ctx.inputs``, ``ctx.out``, ``ctx.attrs``, ``ctx.needs_input_grad``).

An edge is ``(node, output_index)`` for a non-leaf input, ``(leaf_tensor, 0)`` for a leaf that
requires grad, or ``None`` for an input that takes no gradient.
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

_FREED_MESSAGE = (
    "Trying to backward through the graph a second time (or to read saved tensors after they were "
    "freed). Saved values are freed after .backward() or autograd.grad(); pass retain_graph=True "
    "the first time if you need to backward through the same graph again."
)


class SavedTensor:
    """A tensor saved for backward plus the version it had, so in-place changes are caught.

    An op's own output is saved as data only (no reference to the node, which would be a
    cycle) and unpacked into a tensor whose grad_fn is that node, as PyTorch does.
    """

    __slots__ = ("tensor", "version", "vc", "is_output", "data", "device", "output_nr")

    def __init__(self, tensor: Any, is_output: bool = False, output_nr: int = 0) -> None:
        vc = tensor._vc
        if vc is None:
            vc = tensor._vc = [0]
        self.vc = vc
        self.version = vc[0]
        self.is_output = is_output
        self.output_nr = output_nr  # which output of a multi-output op (its gradient slot in double backward)
        if is_output:
            self.tensor = None
            self.data = tensor._data
            self.device = tensor._device
        else:
            self.tensor = tensor

    def unpack(self, node: "Node", op_name: str, position: str) -> Any:
        if self.vc[0] != self.version:
            raise RuntimeError(
                f"one of the variables needed for gradient computation has been modified by an "
                f"inplace operation: the {position} of {op_name} is at version {self.vc[0]}; "
                f"expected version {self.version} instead. Use an out-of-place op (x = x * 2 "
                f"instead of x *= 2) or .clone() the tensor before changing it."
            )
        if self.is_output:
            from ember.tensor import Tensor

            op = getattr(node, "op", None)
            differentiable = node.output_requires_grad and (op is None or self.output_nr not in op.nondiff_outputs)
            t = Tensor._make(self.data, self.device, differentiable)
            t.grad_fn = node if differentiable else None
            t._output_nr = self.output_nr
            t._vc = self.vc
            return t
        return self.tensor

    def array(self, op_name: str, position: str) -> Any:
        """The saved value's array, version-checked like :meth:`unpack` (array gradient rules read this)."""
        if self.vc[0] != self.version:
            self.unpack(None, op_name, position)  # raises the in-place modification error
        return self.data if self.is_output else self.tensor._data


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
            name = self.node.op.name
            values = []
            for i, s in enumerate(self.node.saved or ()):
                if s.__class__ is SavedTensor:
                    s = self._check(s.array(name, f"input {i}"))
                values.append(s)
            inputs = self._inputs = tuple(values)
        return inputs

    @property
    def out(self) -> Any:
        saved = self.node.saved_out
        if saved.__class__ is not SavedTensor:
            raise NotArrayable
        return self._check(saved.array(self.node.op.name, "output"))

    def _check(self, array: Any) -> Any:
        if type(array) is not np.ndarray or (array.dtype != self.dtype and array.dtype.kind in "fcV"):
            raise NotArrayable
        return array


_ARRAY_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))


class Node:
    """Base class: subclasses implement :meth:`apply` mapping output grads to input grads."""

    __slots__ = ("next_edges", "pre_hooks", "freed", "output_requires_grad", "__weakref__")
    num_outputs = 1  # multi-output subclasses override with a slot

    def __init__(self) -> None:
        self.next_edges: tuple = ()
        self.pre_hooks: dict[int, list[Callable]] | None = None
        self.freed = False
        self.output_requires_grad = True

    def name(self) -> str:
        return type(self).__name__

    def apply(self, grads: list) -> tuple:
        raise NotImplementedError

    def release(self) -> None:
        """Drop saved values once backward is done with them (unless retain_graph)."""
        self.freed = True

    def register_prehook(self, output_nr: int, hook: Callable) -> None:
        if self.pre_hooks is None:
            self.pre_hooks = {}
        self.pre_hooks.setdefault(output_nr, []).append(hook)

    @property
    def next_functions(self) -> tuple:
        """PyTorch-style view of the edges: ``((node_or_None, index), ...)``."""
        from ember.tensor import Tensor

        out = []
        for edge in self.next_edges:
            if edge is None:
                out.append((None, 0))
            elif isinstance(edge[0], Tensor):
                out.append((AccumulateGradView(edge[0]), 0))
            else:
                out.append(edge)
        return tuple(out)

    def __repr__(self) -> str:
        return f"<{self.name()} object at {hex(id(self))}>"


class AccumulateGradView:
    """What ``next_functions`` shows for a leaf: PyTorch's AccumulateGrad, with ``.variable``."""

    def __init__(self, variable: Any) -> None:
        self.variable = variable

    def name(self) -> str:
        return "AccumulateGrad"

    def __repr__(self) -> str:
        return "<AccumulateGrad>"


class OpNode(Node):
    """The node recorded for one application of an op record."""

    __slots__ = ("op", "attrs", "saved", "saved_out", "needs_input_grad", "input_meta", "num_outputs", "output_meta",
                 "unpacked")

    def __init__(self, op: Any, attrs: dict, next_edges: tuple, input_meta: tuple, needs: tuple | None = None) -> None:
        self.op = op
        self.attrs = attrs
        self.next_edges = next_edges
        self.input_meta = input_meta  # (shape, dtype) per input; None for Python scalars
        self.needs_input_grad = tuple([e is not None for e in next_edges]) if needs is None else needs
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

    def name(self) -> str:
        return self.op.backward_name

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
        if self.saved_out is None:
            if self.freed:
                raise RuntimeError(_FREED_MESSAGE)
            raise RuntimeError(f"op {self.op.name} did not save its output (save={self.op.save!r})")
        if isinstance(self.saved_out, tuple):
            return tuple(s.unpack(self, self.op.name, f"output {i}") for i, s in enumerate(self.saved_out))
        return self.saved_out.unpack(self, self.op.name, "output")

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

    def apply_arrays(self, grads: list) -> tuple | None:
        """The input gradients as NumPy arrays from the op's array rules (``OpDef.array_vjp``), or None
        when this node does not qualify: the engine calls it only when no graph of the backward is built
        (``create_graph=False``, no profiler, autocast or tracing). A node qualifies when its gradient and
        every saved floating array it reads are CPU float32/float64 arrays of one dtype; anything else
        (half precision, complex, devices, mixed dtypes) takes :meth:`apply`, whose ops promote."""
        if self.num_outputs != 1 or (self.saved is None and self.op.save != "none"):
            return None  # freed: apply() raises the error
        g = grads[0]
        if g.__class__ is not np.ndarray:  # a tensor (the engine passes array rules' results on as arrays)
            g = g._data
        if type(g) is not np.ndarray or g.dtype not in _ARRAY_DTYPES:
            return None
        try:
            return self.op.array_input_grads(ArrayCtx(self, g.dtype), g)
        except NotArrayable:
            return None

    def release(self) -> None:
        self.saved = None
        self.saved_out = None
        self.freed = True
