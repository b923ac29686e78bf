"""vmap's interpreter: batched tensors and the level that runs their ops through batching rules.

Inside ``vmap`` every batched input is a :class:`~ember.tensor.Tensor` whose ``_data`` is a
:class:`BatchedValue`: a tensor one level down (``value``, which holds the whole batch) plus where its
batch dimension is (``bdim``, or None for a tensor this level tracks but that has no batch dim). The
tensor's shape is the per-sample (logical) shape. vmap pushes a :class:`BatchInterpreter` on the thread's
interpreter stack (``ember.interpreters``); dispatch hands it every op, and it runs the op's batching rule
(``ember/ops/batching.py``) one level down, with itself taken off the stack, as JAX's ``process_primitive``
binds at the level below. Nested vmaps are levels of the same stack.

Autograd works at both levels: an op on batched tensors that require grad (``ember.func.grad`` inside
vmap) records an ordinary node whose tensors are batched, so its backward runs through the batching rules
too (per-sample gradients); the ops the rules run one level down record nodes there when that level's
tensors require grad (``grad`` of ``vmap``).

Example:
    >>> import ember
    >>> from ember.func import vmap
    >>> vmap(lambda row: row.sum())(ember.ones(3, 4)).tolist()
    [4.0, 4.0, 4.0]
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ember import dtypes, interpreters
from ember.autograd import grad_mode
from ember.creation import _wrap_array, rand, randn
from ember.func import batched_backward
from ember.ops import batching, dispatch
from ember.ops.registry import OpDef

_STACK = interpreters._STACK
_RULES: dict = {}  # op name -> (record, its batching rule): rule_for's answer, looked up once per record

_ITEM_MESSAGE = ("vmap: It looks like you're calling .item() on a Tensor. We don't support vmap over calling "
                 ".item() on a Tensor, please try to rewrite what you're doing with other operations.")
_CONTROL_FLOW_MESSAGE = ("vmap: It looks like you're attempting to use a Tensor in some data-dependent control "
                         "flow. We don't support that yet; write it with ember.where (both branches computed).")
_RANDOM_MESSAGE = ("vmap: called random operation while in randomness error mode. Please either use the 'same' or "
                   "'different' randomness flags on vmap or perform the randomness operation out of vmap")


class _Flags:
    c_contiguous = True
    f_contiguous = False
    writeable = True


class BatchedValue(interpreters.SymbolicValue):
    """The ``_data`` of a batched tensor: the whole batch one level down plus where its batch dim is.

    It mimics an array's metadata (``shape``, ``dtype``, ``ndim`` are the per-sample ones) so Tensor's
    methods work; reading values (``.item()``, ``bool()``, printing) raises, as in PyTorch's vmap.
    """

    __slots__ = ("value", "bdim", "level", "shape", "dtype")

    def __init__(self, value: Any, bdim: int | None, level: "BatchInterpreter") -> None:
        self.value = value
        self.bdim = bdim
        self.level = level
        shape = tuple(value._data.shape)
        self.shape = shape if bdim is None else shape[:bdim] + shape[bdim + 1:]
        self.dtype = value._data.dtype

    @property
    def interpreter(self) -> interpreters.Interpreter:
        # The top of the stack, not this value's own level: an op mixing levels belongs to the innermost one
        # (JAX's find_top_trace), which passes the outer levels' tensors down as unbatched values.
        if not self.level.live:
            raise RuntimeError("vmap: a batched tensor was used after its vmap returned (it escaped through a "
                               "global, a closure or a mutated argument); return it from the function instead.")
        return interpreters.current()

    @property
    def itemsize(self) -> int:  # ndim/size/nbytes/strides follow from it and shape (SymbolicValue)
        return self.dtype.itemsize

    flags = _Flags()
    base = None
    replays_views = True  # in-place writes through views of it follow eager's rules (ember/ops/inplace.py)

    def array_input_grads(self, node: Any, grads: list) -> tuple | None:
        """The engine's array mode for a node recorded on this level (``self`` is its cotangent or a saved value): input
        gradients from the record's batched array rule (ember/func/batched_backward.py) as tensors of this
        level, or None (the node then runs its ``vjp`` through the batching rules)."""
        g = grads[0]
        g = g if g.__class__ is np.ndarray else g._data
        if type(g) is np.ndarray:  # an unbatched plain cotangent (grad's seed)
            found = batched_backward.input_grads(self.level, node, g, None, grads)
        elif type(g) is BatchedValue and g.level is self.level:
            found = batched_backward.input_grads(self.level, node, g.value._data, g.bdim, grads)
        else:
            return None
        if found is None:
            return None
        device, wrap, make = self.value._device, self.level.wrap, dispatch.Tensor._make
        return tuple(None if r is None else wrap(make(r[0], device, False), r[1]) for r in found)

    def copy(self) -> "BatchedValue":
        return BatchedValue(self.value.clone(), self.bdim, self.level)

    def item(self) -> Any:
        raise RuntimeError(_ITEM_MESSAGE)

    def tolist(self) -> Any:
        raise RuntimeError(_ITEM_MESSAGE)

    def __bool__(self) -> bool:
        raise RuntimeError(_CONTROL_FLOW_MESSAGE)

    def __array__(self, *args: Any, **kwargs: Any) -> Any:
        if not self.level.live:
            self.interpreter  # noqa: B018 (raises: the tensor escaped its vmap)
        raise RuntimeError("vmap: the values of a batched tensor cannot be read inside vmap (printing, .numpy(), "
                           "NumPy functions); return the tensor from the function and read it outside.")

    def __repr__(self) -> str:
        return f"BatchedValue(lvl={self.level.depth}, bdim={self.bdim}, value={self.value!r})"


class BatchInterpreter(interpreters.Interpreter):
    """One vmap level: ``size`` samples, a ``randomness`` mode ('error', 'same', 'different')."""

    traces = False

    def __init__(self, size: int, randomness: str, depth: int) -> None:
        self.size = size
        self.randomness = randomness
        self.depth = depth
        self.live = True

    def __repr__(self) -> str:
        return f"BatchInterpreter(level={self.depth}, size={self.size})"

    def wrap(self, value: Any, bdim: int | None) -> Any:
        """A tensor of this level holding ``value`` (batched at ``bdim``, or tracked unbatched when None)."""
        return dispatch.Tensor._make(BatchedValue(value, bdim, self), value._device, False)

    def unwrap(self, tensor: Any) -> tuple:
        """(value one level down, bdim) of a tensor; a tensor of another level is unbatched here."""
        data = getattr(tensor, "_data", None)
        if type(data) is BatchedValue and data.level is self:
            return data.value, data.bdim
        return tensor, None

    def process(self, op: OpDef, args: tuple, attrs: dict) -> Any:
        values, bdims = [], []
        mine = batched = needs_grad = False
        tensor = dispatch.Tensor
        for a in args:
            data = a._data if isinstance(a, tensor) else None
            if type(data) is BatchedValue and data.level is self:
                mine = True
                values.append(data.value)
                bdims.append(data.bdim)
                if data.bdim is not None:
                    batched = True
                if a._requires_grad:
                    needs_grad = True
            else:
                values.append(a)
                bdims.append(None)
        stack = _STACK.interpreters
        if stack[-1] is self:  # the usual case: this level is on top (else: suspend it and the levels above)
            stack.pop()
            suspended: list = [self]
        else:
            suspended = interpreters.suspend(self)
        try:
            if not batched:
                out = dispatch.apply(op, tuple(values), dict(attrs))
                out_dims: Any = None if op.num_outputs == 1 else (None,) * op.num_outputs
            else:
                rule = _RULES.get(op.name)
                if rule is None or rule[0] is not op:  # resolved once per record (a re-registered name: again)
                    rule = _RULES[op.name] = (op, batching.rule_for(op) or batching.loop)
                out, out_dims = rule[1](op, tuple(values), tuple(bdims), dict(attrs), self.size)
        finally:
            stack.extend(suspended)
        if not mine:
            return out
        if op.num_outputs == 1:
            result: Any = self.wrap(out, out_dims)
            outputs: tuple = (result,)
            if op.view and _shares_memory(out, values[0]):  # a view here too: in-place writes follow PyTorch's
                dispatch._share_version(result, args[0], op, attrs)  # view rules (CopySlices, view replay)
        else:
            result = outputs = tuple(self.wrap(o, d) for o, d in zip(out, out_dims))
        if needs_grad and op.vjp is not None and grad_mode.STATE.enabled:
            dispatch.record(op, outputs, args, attrs)
        return result

    # ---- in-place writes, views, random numbers -------------------------------------------------------
    def lift(self, tensor: Any) -> None:
        """Nothing to do: batched tensors hold their data one level down."""

    def mark_view(self, view: Any, source: Any, op_name: str, attrs: dict) -> None:
        """Not called for batched tensors: their view ops run as records (``replays_views``)."""

    def write(self, tensor: Any, result: Any, op_name: str) -> None:
        """``tensor[...] = result`` where either side is batched: written into the batch one level down."""
        target, tdim = self.unwrap(tensor)
        if type(result) is BatchedValue and result.level is self:
            value, rdim = result.value, result.bdim
        elif type(result) is BatchedValue:
            value, rdim = dispatch.Tensor._make(result, tensor._device, False), None
        else:
            value, rdim = result, None
        if rdim is not None and tdim is None:
            raise RuntimeError(
                "vmap: inplace arithmetic(self, *extra_args) is not possible because there exists a Tensor `other` "
                "in extra_args that has more elements than `self`. This happened due to `other` being vmapped over "
                "but `self` not being vmapped over in a vmap. Please try to use out-of-place operators instead of "
                f"inplace arithmetic. If said operator is being called inside ember ({op_name}), please file a bug "
                "report instead.")
        suspended = interpreters.suspend(self)
        try:
            if not isinstance(value, dispatch.Tensor):
                value = _as_tensor(value, target)
            logical = target.ndim - (tdim is not None)
            if rdim is None:  # unbatched: ones in front up to the target's rank, a unit batch dim at tdim
                missing = logical - value.ndim
                value = value.reshape((1,) * max(missing, 0) + tuple(value.shape))
                if tdim is not None:
                    value = value.unsqueeze(tdim)
            else:  # batched: ones after the batch dim up to the target's rank, the batch dim moved to tdim
                value = batching.move(batching.pad_rank(batching.to_front(value, rdim), logical), 0, tdim)
            with grad_mode.no_grad():
                target.copy_(value)
        finally:
            interpreters.resume(suspended)

    def random_node(self, kind: str, shape: tuple, dtype: Any, device: Any, generator: Any, inputs: tuple,
                    params: dict) -> Any:
        if self.randomness == "error":
            raise RuntimeError(_RANDOM_MESSAGE)
        if self.randomness == "same":
            return None  # drawn once, unbatched: every sample sees the same numbers
        return self._draw_batched(kind, tuple(shape), dtype, device, generator, inputs, params)

    def check_direct_sampling(self) -> None:
        if self.randomness == "error":
            raise RuntimeError(_RANDOM_MESSAGE)
        if self.randomness == "different":
            raise RuntimeError("vmap: this random function has no batched form for randomness='different' (it "
                               "draws its numbers directly); use randomness='same', or draw the numbers outside "
                               "vmap and pass them in batched.")

    def _draw_batched(self, kind: str, shape: tuple, dtype: Any, device: Any, generator: Any, inputs: tuple,
                      params: dict) -> Any:
        """One draw per sample: ``(size, *shape)`` numbers drawn one level down (through ember.rand/randn, so an
        enclosing vmap with randomness='different' batches them again), batched at dim 0 here."""
        if kind not in ("uniform", "normal", "bernoulli"):
            raise RuntimeError(f"vmap: random '{kind}' has no batched form for randomness='different'; use "
                               "randomness='same' or draw outside vmap")
        full = (self.size,) + shape
        suspended = interpreters.suspend(self)
        try:
            if kind == "normal":
                drawn = randn(*full, generator=generator, dtype=dtype, device=device)
            else:
                drawn = rand(*full, generator=generator, device=device,
                             dtype=dtype if dtype.is_floating_point else dtypes.float32)
        finally:
            interpreters.resume(suspended)
        u = self.wrap(drawn, 0)
        if kind == "normal":
            mean, std = params.get("mean", 0.0), params.get("std", 1.0)
            return u * std + mean if (mean, std) != (0.0, 1.0) else u
        if kind == "uniform":
            low, high = params.get("low", 0.0), params.get("high", 1.0)
            return u * (high - low) + low if (low, high) != (0.0, 1.0) else u
        probs = inputs[0] if inputs else params.get("p", 0.5)
        mask = (u < probs).to(dtype)
        scale = params.get("scale", 1.0)
        return mask * scale if scale != 1.0 else mask


def _as_tensor(value: Any, like: Any) -> Any:
    array = like._device.xp.asarray(value, dtype=like._data.dtype if hasattr(like._data, "dtype") else None)
    return _wrap_array(array, like._device)


def _shares_memory(out: Any, source: Any) -> bool:
    """True when ``out`` (one level down) is a view of ``source``: the level below tracked it as one."""
    vc = getattr(source, "_vc", None)
    return vc is not None and getattr(out, "_vc", None) is vc


def top_level() -> BatchInterpreter | None:
    """The innermost vmap level on this thread's stack, or None outside vmap."""
    top = interpreters.current()
    return top if isinstance(top, BatchInterpreter) else None
