"""In-place ops (``add_``, ``x[idx] = v``, ...): write into the tensor's own buffer, bump its
version, and, when autograd is recording, rebase the tensor's history onto the op's node.

In-place changes of views follow PyTorch (CopySlices): writing ``result`` into a view ``v`` of
``base`` gives ``base`` a new node, ``copy_slices(base_before, result)``, whose backward hands the
view's part of the gradient to ``result`` and passes the rest through; ``v`` (and every live view of
``base`` that may overlap it) is then re-derived from ``base`` (``view_replay``, PyTorch's
AsStridedBackward0), so later uses see the new history. Views remember how they were made
(``_view_fn``) and are listed weakly beside their shared version counter (``_vc[1]``), see
``ember.ops.dispatch._share_version``.

Example:
    >>> x = ember.randn(4, 3, requires_grad=True); y = x * 1
    >>> y[:, 0] = 0; y.diagonal().mul_(3); y[2:].relu_()
    >>> y.sum().backward()  # x.grad matches PyTorch's
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

from ember import dtypes, interpreters
from ember.backends import cpu_hot_ufuncs
from ember.autograd import grad_mode, saved_hooks
from ember.interpreters import GRAPHS, SymbolicValue
from ember.ops.opmath import FLOAT32_SCALAR_OPS
from ember.ops import dispatch, float8_ops, movement, overlap, unsigned_ops, value_check
from ember.ops.registry import OpDef
from ember.device import CPU
from ember.dtypes import from_numpy_dtype
from ember.ops.elementwise import where
from ember.ops.views import COPY_SLICES, VIEW_REPLAY, plain_steps
from ember.ops.complex_ops import DTYPE_VIEWS

_OVERLAP_MESSAGE = (
    "unsupported operation: more than one element of the written-to tensor refers to a single memory "
    "location. Please clone() the tensor before performing the operation."
)
_NO_GRAD_VIEW_MESSAGE = (
    "A view was created in no_grad mode and is being modified inplace with grad mode enabled. Given that this use "
    "case is ambiguous and error-prone, it is forbidden. You can clarify your code by moving both the view and the "
    "inplace either both inside the no_grad block (if you don't want the inplace to be tracked) or both outside (if "
    "you want the inplace to be tracked)."
)


def check_inplace(t: Any, op_name: str, recording: bool) -> None:
    """PyTorch's rules for recorded in-place ops: never on a leaf that requires grad (or a view of
    one), never on a view made under no_grad or by a multi-view function (split, chunk, unbind)."""
    if saved_hooks.BEFORE_INPLACE:  # allow_mutation_on_saved_tensors: keep what backward saved before it changes
        saved_hooks.BEFORE_INPLACE[-1](t)
    if not recording:
        base = t._base
        if (base is not None and t._view_fn[1] == "no_grad" and base._requires_grad
                and grad_mode.STATE.enabled):
            raise RuntimeError(f"{op_name}: {_NO_GRAD_VIEW_MESSAGE}")
        return
    if t._requires_grad and t.grad_fn is None:
        raise RuntimeError(
            f"{op_name}: a leaf Variable that requires grad is being used in an in-place operation. "
            "Wrap the update in `with ember.no_grad():` (as optimizers do) or clone the tensor first."
        )
    base = t._base
    if base is None:
        return
    if base._requires_grad and base.grad_fn is None:
        raise RuntimeError(
            f"{op_name}: a view of a leaf Variable that requires grad is being used in an in-place operation. "
            "Wrap the update in `with ember.no_grad():` or clone the leaf first (y = x.clone(); y[0] = ...)."
        )
    creation = t._view_fn[1]
    if creation == "no_grad":
        raise RuntimeError(f"{op_name}: {_NO_GRAD_VIEW_MESSAGE}")
    if creation is not None:
        _, name, index = creation
        raise RuntimeError(
            f"{op_name}: Output {index} of {name} is a view and is being modified inplace. This view is the output "
            "of a function that returns multiple views. Such functions do not allow the output views to be modified "
            "inplace. You should replace the inplace operation by an out-of-place one."
        )
    if _through_dtype_view(t):
        raise RuntimeError(
            f"{op_name}: in-place change through view_as_real/view_as_complex of a tensor that requires grad: ember "
            "cannot record it (its CopySlices replays views element by element); write into the base tensor, or "
            "change a .clone() of the view and rebuild the base with ember.complex / ember.view_as_complex.")
    if _graph_value(t) or _graph_value(base):  # a TracingError: ember.compile runs it eagerly
        raise interpreters.TracingError(
            f"{op_name}: in-place changes of a view of a tensor that requires grad are not supported while a graph "
            "is being built (ember.compile / define-then-run); use an out-of-place op (e.g. ember.where) or "
            ".clone() the view first."
        )
    if not _writeable(t):
        raise RuntimeError(f"{op_name}: {_OVERLAP_MESSAGE}")


def _through_dtype_view(t: Any) -> bool:
    """Whether ``t`` is (a view of) a view_as_real/view_as_complex of its base."""
    steps = t._view_fn[0] if t._view_fn else None
    return bool(steps) and any(op.name in DTYPE_VIEWS for op, _ in steps)


def _graph_value(t: Any) -> bool:
    """A tensor of a graph under construction (vmap's batched tensors are symbolic but replay views as eager)."""
    return dispatch.is_symbolic(t) and not getattr(t._data, "replays_views", False)


def _writeable(t: Any, allow_overlap: bool = False) -> bool:
    """Whether ``t`` can be written in place. NumPy makes every view of an expanded (broadcast) tensor read-only;
    PyTorch refuses only writes into a tensor whose own elements overlap (``x.expand(2, 3).mul_(2)``), so a
    non-overlapping view of one (``e[0]``, ``e.diagonal()``) gets a writable alias of the same memory here
    (``allow_overlap``: also an overlapping one, for fills, which PyTorch allows: every alias gets the value)."""
    if t._device.backend.is_writeable(t._data):
        return True
    alias = _writable_alias(t._data, allow_overlap)
    if alias is None:
        return False
    t._data = alias  # same memory, now writable: every write path below works unchanged
    return True


def _writable_alias(data: Any, allow_overlap: bool) -> Any:
    """A writable ndarray over ``data``'s memory when ``data`` is a read-only view of a writable NumPy array
    and (unless ``allow_overlap``) no two of its elements share memory; else None."""
    if not isinstance(data, np.ndarray):
        return None
    if data.size == 0:  # nothing to write: a fresh empty array aliases no memory
        return np.empty(data.shape, data.dtype)
    owner = data
    while isinstance(owner.base, np.ndarray):
        owner = owner.base
    if owner is data or not owner.flags.writeable or not owner.flags.c_contiguous or owner.base is not None:
        return None
    if not allow_overlap and _self_overlapping(data.shape, data.strides, data.itemsize):
        return None
    offset = data.__array_interface__["data"][0] - owner.__array_interface__["data"][0]
    try:
        return np.ndarray(data.shape, data.dtype, buffer=owner, offset=offset, strides=data.strides)
    except (TypeError, ValueError):
        return None


def _self_overlapping(shape: tuple, strides: tuple, itemsize: int) -> bool:
    """True when two index tuples of (shape, strides) address the same bytes (a stride 0 over a size > 1, or
    dims whose extents interleave): sorted by |stride|, each stride must clear the span of the smaller ones."""
    dims = sorted((abs(st), n) for n, st in zip(shape, strides) if n > 1)
    span = itemsize
    for stride, n in dims:
        if stride < span:
            return True
        span = stride * (n - 1) + span
    return False


def _lift(t: Any) -> None:
    """While this thread traces, make ``t`` part of the trace before it is read-modified-written."""
    if GRAPHS.count:
        interpreters.current().lift(t)


def _write_symbolic(t: Any, result: Any, op_name: str) -> bool:
    """Hand a write that involves a graph value to that graph's builder; False: nothing symbolic."""
    for data in (t._data, result):
        if isinstance(data, SymbolicValue):
            data.interpreter.write(t, result, op_name)
            return True
    return False


def _watched(t: Any) -> bool:
    """A dispatch mode or a ``__torch_dispatch__`` subclass sees ``t``'s ops (ember/_dispatch_levels.py): in-place
    ops take the dispatched path and the write is an ``aten.copy_`` call it sees. Call only when ``GRAPHS.count``."""
    return interpreters.SUBCLASSES.level.owns(t)


def _write(t: Any, result: Any, op_name: str) -> None:
    if GRAPHS.count and (_write_symbolic(t, result, op_name) or (
            _watched(t) and interpreters.SUBCLASSES.level.write(t, result))):
        return
    data = t._data
    if tuple(result.shape) != tuple(data.shape):
        raise RuntimeError(
            f"{op_name}: output with shape {list(data.shape)} doesn't match the broadcast shape "
            f"{list(result.shape)}; in-place ops cannot grow the tensor they write into."
        )
    if result.dtype != data.dtype and not dtypes.can_cast_result(from_numpy_dtype(result.dtype),
                                                                  from_numpy_dtype(data.dtype)):
        raise _cast_error(op_name, from_numpy_dtype(result.dtype), from_numpy_dtype(data.dtype))
    if not _writeable(t):
        raise RuntimeError(f"{op_name}: {_OVERLAP_MESSAGE}")
    t._data[...] = result  # (re-read: _writeable may have swapped in a writable alias of the same memory)


def _cast_error(op_name: str, result: Any, target: Any) -> RuntimeError:
    return RuntimeError(f"{op_name}: result type {result} can't be cast to the desired output type {target} (an "
                        "in-place op keeps the tensor's dtype); convert the tensor first (e.g. x = x.float()) or "
                        "use the out-of-place op")


def _inplace_operand(op: OpDef, t: Any, other: Any, op_name: str) -> Any:
    """``other`` as the in-place fast path hands it to the ufunc, after PyTorch's checks: the promoted
    result type must be castable to ``t``'s dtype (``int_t.add_(0.5)``, ``x.div_(2)`` on integers and
    ``float_t.mul_(1j)`` raise), bool subtraction raises, an integer scalar wraps into ``t``'s integer
    dtype, a NumPy scalar is read as PyTorch reads it, and a tensor operand of another dtype is cast to
    the promoted dtype first (so the arithmetic happens in that dtype, as in PyTorch)."""
    data = t._data
    kind = data.dtype.kind
    if kind in "fc" and (type(other) is float or type(other) is int):  # the common case, nothing to check
        return other
    if isinstance(other, dispatch.Tensor):
        od = other._data
        if od.dtype == data.dtype and not (op.float_only and data.dtype.kind in "biu"):
            return od
        target = dtypes.result_type(t, other)
        if op.float_only and target.category < 2:
            target = dtypes.get_default_dtype()
        if op.name == "sub" and "b" in (od.dtype.kind, data.dtype.kind):
            raise dispatch._bool_sub_error()
        if not dtypes.can_cast_result(target, t.dtype):
            raise _cast_error(op_name, target, t.dtype)
        return od.astype(target.np) if od.dtype != target.np else od
    if isinstance(other, np.generic):
        other = dtypes.python_scalar(other)
    if not isinstance(other, (bool, int, float, complex)):
        return other
    if kind == "b" or type(other) is bool:
        if op.name == "sub":
            raise dispatch._bool_sub_error()
    tier = 0 if kind == "b" else 1 if kind in "iu" else 3 if kind == "c" else 2
    if dtypes.scalar_category(other) > tier or (op.float_only and tier < 2):
        target = dtypes.result_type(t, other)
        if op.float_only and target.category < 2:
            target = dtypes.get_default_dtype()
        if not dtypes.can_cast_result(target, t.dtype):
            raise _cast_error(op_name, target, t.dtype)
    elif kind in "iu" and type(other) is int and not 0 <= other <= 127 and not op.float_only and op.name != "pow":
        other = dtypes.wrap_int(other, data.dtype)
    return other


def _ufunc_into(t: Any, ufunc: Any, other: Any, op_name: str) -> None:
    """Compute straight into the tensor's buffer (no temporary, no copy); ``other`` has passed
    :func:`_inplace_operand`, so the cast back into the buffer is PyTorch's."""
    data = t._data
    try:
        ufunc(data, other, out=data, casting="unsafe")
    except ValueError:
        shape = tuple(getattr(other, "shape", ()))
        raise RuntimeError(
            f"{op_name}: output with shape {list(data.shape)} doesn't match the broadcast shape of "
            f"{list(data.shape)} and {list(shape)}; in-place ops cannot grow the tensor they write into."
        ) from None
    except TypeError:
        from ember.dtypes import from_numpy_dtype

        other_dtype = getattr(other, "dtype", None)
        raise RuntimeError(
            f"{op_name}: result type of {from_numpy_dtype(data.dtype)} and "
            f"{other_dtype if other_dtype is not None else type(other).__name__} can't be cast to the desired "
            f"output type {from_numpy_dtype(data.dtype)}; convert the tensor first (e.g. x = x.float())."
        ) from None


def _as_float8(value: Any, t: Any) -> Any:
    """``value`` (a number, array or tensor) as a tensor of float8 ``t``'s dtype, with torch's rounding."""
    raw = value._data if isinstance(value, dispatch.Tensor) else np.asarray(value)
    if raw.dtype == t._data.dtype:
        return value
    return dispatch.Tensor._make(t._device.xp.asarray(float8_ops.to_float8(np.asarray(raw), t.dtype)), t._device,
                                 False)


def fill(t: Any, value: Any, op_name: str) -> Any:
    """``zero_``/``fill_``: a direct fill when autograd is not recording."""
    if t._data.dtype in dtypes.FLOAT8_NP:  # the code torch's conversion gives (448 for 1000 in e4m3fn), written raw
        check_inplace(t, op_name, False)
        t._data[...] = _as_float8(value, t)._data
        t._bump()
        return t
    if value.__class__ in (int, float) and _plain_update(t, 0.0) is not None:  # (zero_(): nothing to check)
        data = t._data
        if data.size < cpu_hot_ufuncs.MIN_ELEMENTS or not cpu_hot_ufuncs.fill(data, value):  # (halves: w1hot21)
            data.fill(value)
        t._bump()
        return t
    recording = grad_mode.STATE.enabled and t._requires_grad
    check_inplace(t, op_name, recording)
    if not recording and GRAPHS.count:  # graph building: a constant fill of the (lifted) tensor
        if _watched(t):  # a dispatch mode watches: the fill is a dispatched op and a copy_ it sees
            return inplace_call(t, op_name, lambda x: replaced(x, value), needs_copy=False)
        _lift(t)
        if dispatch.is_symbolic(t):
            _write(t, np.full((), value, dtype=t._data.dtype), op_name)
            t._bump()
            return t
    if not recording and _writeable(t, allow_overlap=True):  # PyTorch fills an expanded tensor too
        t._data.fill(value)
        t._bump()
        return t
    return inplace_call(t, op_name, lambda x: replaced(x, value), needs_copy=False)


def replaced(t: Any, value: Any) -> Any:
    """``value`` broadcast to ``t``'s shape, as a function of ``t`` with zero gradient (so the result
    keeps requiring grad, like PyTorch's FillBackward/CopyBackwards), without ``t * 0`` turning inf into nan."""
    from ember.creation import zeros

    keep = zeros(tuple(t.shape), dtype=dtypes.bool_, device=t.device)
    return where(keep, t, value)


def _rebase(t: Any, result: Any) -> None:
    """After a recorded in-place op, ``t`` is the op's output: same buffer, new history."""
    if t._base is not None:
        _copy_slices(t, result)
        return
    old_fn, old_nr = t.grad_fn, t._output_nr
    t.grad_fn = result.grad_fn
    t._output_nr = result._output_nr
    t._requires_grad = result._requires_grad
    if t._retains_grad and old_fn is not None:
        old_fn._move_retains_grad(old_nr, t)
    vc = t._vc
    if vc is not None and len(vc) > 1 and vc[1]:  # t has (had) views: they now show the new history
        _refresh_views(t, None)


def _copy_slices(view: Any, result: Any) -> None:
    """``result`` was written into ``view``: give its base the CopySlices node, re-derive the views."""
    base = view._base
    steps = plain_steps(view._view_fn[0])
    before = dispatch.Tensor._make(base._data, base._device, base._requires_grad)
    before.grad_fn = base.grad_fn
    before._output_nr = base._output_nr
    if not (before._requires_grad or result._requires_grad):
        return
    dispatch.record(COPY_SLICES, (base,), (before, result), {"steps": steps})
    if base._retains_grad and before.grad_fn is not None:
        before.grad_fn._move_retains_grad(before._output_nr, base)
    _replay_into(view, base, steps)
    _refresh_views(base, view)


def _replay_into(view: Any, base: Any, steps: tuple) -> None:
    """Give ``view`` the history of the same view taken from ``base`` now."""
    fresh = dispatch.apply(VIEW_REPLAY, (base,), {"steps": steps})
    old_fn, old_nr = view.grad_fn, view._output_nr
    view.grad_fn = fresh.grad_fn
    view._output_nr = 0
    view._requires_grad = fresh._requires_grad
    if view._retains_grad and old_fn is not None:
        old_fn._move_retains_grad(old_nr, view)


def _refresh_views(base: Any, written: Any) -> None:
    """Re-derive every live view of ``base`` that may overlap ``written`` (all of them when the base
    itself was written), dropping dead entries from the list on the way."""
    vc = base._vc
    if vc is None or len(vc) < 2:
        return
    live = vc[1]
    kept = []
    overlap = base._device.backend.may_share_memory
    for ref in live:
        other = ref()
        if other is None:
            continue
        kept.append(ref)
        if other is written or other._base is not base or other._view_fn[1] == "no_grad":
            continue
        if _through_dtype_view(other):
            continue  # not re-derivable (see check_inplace): it keeps the history it was made with
        if written is not None and not overlap(other._data, written._data):
            continue  # untouched elements: the old history is still exact
        _replay_into(other, base, plain_steps(other._view_fn[0]))
    live[:] = kept


def _snapshot(t: Any, keep_copy: bool) -> Any:
    """A stand-in for ``t`` as it was before the write, with ``t``'s history."""
    from ember.tensor import Tensor

    old = Tensor._make(t._data.copy() if keep_copy else t._data, t._device, t._requires_grad)
    old.grad_fn = t.grad_fn
    old._output_nr = t._output_nr
    if t._base is not None and t._view_fn[0] and any(op.name == "as_strided" for op, _ in t._view_fn[0]):
        # as_strided may read the base's memory outside its own input (a view of a narrow): the values written
        # depend on those elements, whose gradient the view's own history drops. Read them from the base, as
        # PyTorch's CopySlices does.
        fresh = dispatch.apply(VIEW_REPLAY, (t._base,), {"steps": plain_steps(t._view_fn[0])})
        old.grad_fn = fresh.grad_fn
        old._output_nr = 0
        old._requires_grad = fresh._requires_grad
    return old


_PLAIN_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))


def _plain_update(t: Any, other: Any) -> Any:
    """``other`` as the ufunc takes it when ``t op= other`` needs none of :func:`inplace_binary`'s checks, else None:
    an unrecorded write (no_grad, or nothing requires grad) into a CPU float32/float64 tensor that is no view and
    whose buffer is writable, of a Python float/int or of another CPU tensor of the same dtype whose memory is its
    own (no base: it cannot overlap ``t``), with no graph being built and no ``allow_mutation_on_saved_tensors``.
    The manual SGD step (``w -= lr * w.grad``) and ``zero_grad(set_to_none=False)`` (docs/cpu-performance.md,
    "eager20")."""
    data = t._data
    if (data.__class__ is not np.ndarray or t._device is not CPU or t._base is not None or GRAPHS.count
            or saved_hooks.BEFORE_INPLACE
            or data.dtype not in _PLAIN_FLOATS or (t._requires_grad and grad_mode.STATE.enabled)
            or not data.flags.writeable):
        return None
    if other.__class__ is float or other.__class__ is int:
        return other
    if other.__class__ is not dispatch.Tensor or other._device is not CPU or other is t or (
            other._requires_grad and grad_mode.STATE.enabled):
        return None
    od = other._data
    if od.__class__ is not np.ndarray or od.dtype is not data.dtype or od.base is not None or data.base is not None:
        return None
    return od


def inplace_binary(op: OpDef, t: Any, other: Any, op_name: str) -> Any:
    ufunc = op.ufunc
    # x.pow_(3), x.pow_(-2), x.pow_(+-0.5): torch's x * x * x, 1 / (x * x), sqrt and rsqrt, which the impl spells out
    # (elementwise.py)
    spelled = ufunc == "power" and (other.__class__ is int or other.__class__ is float) and other in (3, -2, 0.5, -0.5)
    if ufunc is not None and not spelled:
        plain = _plain_update(t, other)
        if plain is not None:  # nothing to check, promote or record (see _plain_update)
            data, fn = t._data, getattr(np, ufunc)
            # a medium pass in halves on the hot worker while it spins (w1hot21: `w -= lr * w.grad` after a product)
            if data.size < cpu_hot_ufuncs.MIN_ELEMENTS or cpu_hot_ufuncs.binary(fn, data, plain, out=data) is None:
                _ufunc_into(t, fn, plain, op_name)
            t._bump()
            return t
    _lift(t)
    if isinstance(other, dispatch.Tensor) and other is not t and overlap.status(t, other) == "partial":
        raise RuntimeError(f"{op_name}: {overlap.MESSAGE}")  # x[1:].add_(x[:-1]) raises, as PyTorch
    if isinstance(other, dispatch.Tensor) and op.name in FLOAT32_SCALAR_OPS:  # half *= 0-d: a number (opmath.py)
        pair = dispatch._zero_dim_as_number(t, other)
        if pair is not None:
            other = pair[1]
    recording = grad_mode.STATE.enabled and (
        t._requires_grad or (isinstance(other, dispatch.Tensor) and other._requires_grad)
    )
    check_inplace(t, op_name, recording)
    if t._data.dtype in dtypes.WIDE_UNSIGNED_NP:  # uint16/32/64: torch's short op list (ember/ops/unsigned_ops.py)
        unsigned_ops.check(op, t._data.dtype)
    if not recording and GRAPHS.count and (dispatch.is_symbolic(t) or dispatch.is_symbolic(other) or _watched(t)):
        # the op may be symbolic, or a dispatch mode watches: dispatched, then written
        with grad_mode.no_grad():
            _write(t, dispatch.binary(op, t, other)._data, op_name)
    elif not recording:
        if type(other) is float and t._data.dtype.kind == "f":  # the common case (p.mul_(0.9)): nothing to check
            other_data = other
        else:
            other_data = _inplace_operand(op, t, other, op_name)
        ufunc = op.ufunc
        if op.name == "pow" and (t._data.dtype.kind in "iu" or spelled):  # the impl handles negative integer
            ufunc = None  # exponents, and spells ** 3 and ** -2 as torch does
        if t._data.dtype.itemsize == 2 and t._data.dtype.kind in "fV":  # half: the impl's float32 math (opmath.py)
            ufunc = None
        if ufunc is not None and _writeable(t):
            _ufunc_into(t, getattr(t._device.xp, ufunc), other_data, op_name)
        else:
            out = op.impl(t._device.xp, t._data, other_data)
            _write(t, t._device.xp.asarray(out), op_name)
    else:
        old = _snapshot(t, op.save in ("inputs", "both", "cross"))
        result = dispatch.binary(op, old, other)
        _write(t, result._data, op_name)
        _rebase(t, result)
    t._bump()
    return t


def inplace_call(t: Any, op_name: str, compute: Callable[[Any], Any], needs_copy: bool = True,
                 others: tuple = (), reads: tuple = (), gathers: tuple = ()) -> Any:
    """Generic in-place: ``compute(tensor) -> tensor`` out of place, then write back into ``t``.

    ``others``: the other tensor operands; any of them requiring grad makes the write recorded too.
    ``reads``: operands read elementwise, which may not partially overlap ``t``; ``gathers``: operands read at
    indices, which may not share any memory with ``t`` (PyTorch's checks, ``ember/ops/overlap.py``).
    """
    if reads:
        overlap.check_partial(op_name, t, reads)
    if gathers:
        overlap.check_none(op_name, t, gathers)
    _lift(t)
    recording = grad_mode.STATE.enabled and (
        t._requires_grad or any(isinstance(o, dispatch.Tensor) and o._requires_grad for o in others))
    check_inplace(t, op_name, recording)
    if not recording:
        with grad_mode.no_grad():
            result = compute(t)
        _write(t, result._data, op_name)
    else:
        old = _snapshot(t, needs_copy)
        result = compute(old)
        _write(t, result._data, op_name)
        _rebase(t, result)
    t._bump()
    return t


def setitem(t: Any, key: Any, value: Any) -> None:
    """``t[key] = value`` with PyTorch semantics (broadcast value, recorded when grad is on)."""
    _lift(t)
    index, index_tensors = movement.split_index(key, t._device)
    if t._data.dtype in dtypes.FLOAT8_NP:
        value = _as_float8(value, t)
    if isinstance(value, dispatch.Tensor) and value._device != t._device:
        value = value.to(t._device)  # t[i] = v copies v across devices, as PyTorch's copy_ does
    value_requires_grad = isinstance(value, dispatch.Tensor) and value._requires_grad
    recording = grad_mode.STATE.enabled and (t._requires_grad or value_requires_grad)
    check_inplace(t, "index_put_ (setitem)", recording)
    if type(value) is float and t._data.dtype.kind == "f" and t._data.dtype.itemsize >= 4:
        pass  # the common case (x[i] = 0.5 into float32/float64): nothing to check
    elif isinstance(value, dispatch.Tensor):
        if isinstance(t._data, np.ndarray):
            _check_setitem_overlap(t, index, index_tensors, value)
    else:
        value = _setitem_number(t, index, index_tensors, value)

    if not recording and not any(dispatch.is_symbolic(v) for v in (t, value, *index_tensors)):
        arrays = [i._data for i in index_tensors]
        full = movement._rebuild_index(index, arrays)
        raw = value._data if isinstance(value, dispatch.Tensor) else value
        if not _writeable(t):
            raise RuntimeError(f"index_put_: {_OVERLAP_MESSAGE}")
        try:
            movement.assign_index(t._device.xp, t._data, full, raw)
        except IndexError as error:
            raise movement._index_error(t._data, index, error) from None
        except (ValueError, TypeError) as error:
            raise RuntimeError(
                f"index_put_: cannot assign a value of shape {tuple(getattr(raw, 'shape', ()))} to the selection of "
                f"a tensor of shape {tuple(t.shape)}: {error}"
            ) from None
    else:
        old = _snapshot(t, False)
        result = movement.index_put(old, index, index_tensors, value)
        _write(t, result._data, "index_put_")
        if recording:
            _rebase(t, result)
    t._bump()


def _check_setitem_overlap(t: Any, index: tuple, index_tensors: list, value: Any) -> None:
    """PyTorch's ``t[key] = value``: the basic part of ``key`` (ints, slices, None, Ellipsis) takes a view, then
    ``copy_`` (no partial overlap with ``value``) or, with index tensors, ``index_put_`` (no overlap at all); a 0-d
    value under a bool mask is a fill. ``x[:2] = x[1:]`` and ``x[[1, 0]] = x`` raise, ``x[...] = x`` does not."""
    if not isinstance(value._data, np.ndarray) or value._data.size == 0:
        return
    if not np.may_share_memory(t._data, value._data):
        return
    basic: list = []
    for item in index:
        if isinstance(item, tuple) and item and item[0] == movement.TENSOR_SLOT:
            mask = index_tensors[item[1]]
            basic.extend([slice(None)] * (mask.dim() if mask.dtype is dtypes.bool_ else 1))
        else:
            basic.append(item)
    if Ellipsis not in basic:
        basic.append(Ellipsis)  # a view even where every dim gets an int (NumPy would give a scalar)
    try:
        view = t._data[tuple(basic)]
    except (IndexError, TypeError, ValueError):
        return  # the write itself reports a bad index
    if not index_tensors:
        src = value._data
        while src.ndim > view.ndim and src.shape[0] == 1:  # leading 1s are dropped, as PyTorch's copy_to does
            src = src[0]
        if src.shape != view.shape:  # PyTorch expands the value first: an expanded tensor is not checked
            return
        found = overlap.status_arrays(view, src)
        if found == "partial":
            raise RuntimeError(f"index_put_ (setitem): {overlap.MESSAGE}")
        return
    if value.dim() == 0 and len(index_tensors) == 1 and index_tensors[0].dtype is dtypes.bool_:
        return  # PyTorch's masked_fill_ with a 0-d value: read once
    if overlap.status_arrays(view, value._data) in ("full", "partial"):
        raise RuntimeError(f"index_put_ (setitem): {overlap.MESSAGE}")


def _setitem_number(t: Any, index: tuple, index_tensors: list, value: Any) -> Any:
    """``t[key] = value`` for a value that is not a tensor: refused unless numeric (``None`` reads as NaN in NumPy);
    a number goes through PyTorch's checked conversion (``x[0] = -1`` of uint8 is 255, ``x[0] = 1e10`` of int8
    raises; a half dtype's range is checked only when more than one element is written, as PyTorch's fill)."""
    value_check.require_assignable(value, t.dtype)
    if not isinstance(value, (bool, int, float, complex, np.generic)) or t._data.dtype in dtypes.FLOAT8_NP:
        return value
    numel = 1
    if t._data.dtype.itemsize == 2 and t._data.dtype.kind in "fV" and isinstance(value, float):
        try:
            dummy = np.broadcast_to(np.zeros((), np.int8), t._data.shape)
            numel = dummy[movement._rebuild_index(index, [i._data for i in index_tensors])].size
        except (IndexError, TypeError, ValueError):
            numel = 1
    return value_check.checked_fill_value(value, t.dtype, "index_put_ (setitem)", numel)
