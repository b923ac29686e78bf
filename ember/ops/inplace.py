"""In-place ops (``add_``, ``x[idx] = v``, ...): write into the tensor's own buffer, bump its
version, and — when autograd is recording — rebase the tensor's history onto the op's node.
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

from ember.autograd import grad_mode
from ember.ops import dispatch
from ember.ops.registry import OpDef


def check_inplace(t: Any, op_name: str, recording: bool) -> None:
    """PyTorch's rules: no in-place on a leaf that requires grad while grad mode is on."""
    if recording and t._requires_grad and t.grad_fn is None:
        raise RuntimeError(
            f"{op_name}: a leaf Variable that requires grad is being used in an in-place operation. "
            "Wrap the update in `with ember.no_grad():` (as optimizers do) or clone the tensor first."
        )
    if recording and t._base is not None and (t._base._requires_grad or t._requires_grad):
        raise RuntimeError(
            f"{op_name}: in-place changes to a view of a tensor that requires grad are not supported by ember's "
            "autograd; use an out-of-place op (e.g. ember.where) or .clone() the view first."
        )


def _write(t: Any, result: Any, op_name: str) -> None:
    if dispatch.SYMBOLIC.active and dispatch.SYMBOLIC.write(t, result, op_name):
        return
    data = t._data
    if tuple(result.shape) != tuple(data.shape):
        raise RuntimeError(
            f"{op_name}: output with shape {list(data.shape)} doesn't match the broadcast shape "
            f"{list(result.shape)}; in-place ops cannot grow the tensor they write into."
        )
    if result.dtype != data.dtype and not np.can_cast(result.dtype, data.dtype, casting="same_kind"):
        from ember.dtypes import from_numpy_dtype

        raise RuntimeError(
            f"{op_name}: result type {from_numpy_dtype(result.dtype)} can't be cast to the desired output type "
            f"{from_numpy_dtype(data.dtype)}; convert the tensor first (e.g. x = x.float())."
        )
    if not data.flags.writeable:
        raise RuntimeError(f"{op_name}: this tensor is a read-only (expanded) view; clone() it before writing")
    data[...] = result


def _ufunc_into(t: Any, ufunc: Any, other: Any, op_name: str) -> None:
    """Compute straight into the tensor's buffer (no temporary, no copy)."""
    data = t._data
    try:
        ufunc(data, other, out=data, casting="same_kind")
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


def fill(t: Any, value: Any, op_name: str) -> Any:
    """``zero_``/``fill_``: a direct fill when autograd is not recording."""
    recording = grad_mode.STATE.enabled and t._requires_grad
    check_inplace(t, op_name, recording)
    if not recording and dispatch.SYMBOLIC.active:  # graph building: a constant fill of the (lifted) tensor
        dispatch.SYMBOLIC.lift(t)
        if dispatch.SYMBOLIC.is_symbolic(t):
            _write(t, np.full((), value, dtype=t._data.dtype), op_name)
            t._bump()
            return t
    if not recording and t._data.flags.writeable:
        t._data.fill(value)
        t._bump()
        return t
    return inplace_call(t, op_name, lambda x: x * 0 + value, needs_copy=False)


def _rebase(t: Any, result: Any) -> None:
    """After a recorded in-place op, ``t`` is the op's output: same buffer, new history."""
    t.grad_fn = result.grad_fn
    t._output_nr = result._output_nr
    t._requires_grad = result._requires_grad


def _snapshot(t: Any, keep_copy: bool) -> Any:
    """A stand-in for ``t`` as it was before the write, with ``t``'s history."""
    from ember.tensor import Tensor

    old = Tensor._make(t._data.copy() if keep_copy else t._data, t._device, t._requires_grad)
    old.grad_fn = t.grad_fn
    old._output_nr = t._output_nr
    return old


def inplace_binary(op: OpDef, t: Any, other: Any, op_name: str) -> Any:
    if dispatch.SYMBOLIC.active:
        dispatch.SYMBOLIC.lift(t)
    recording = grad_mode.STATE.enabled and (
        t._requires_grad or (isinstance(other, dispatch.Tensor) and other._requires_grad)
    )
    check_inplace(t, op_name, recording)
    if not recording and dispatch.SYMBOLIC.active:  # graph building: the op may be symbolic
        with grad_mode.no_grad():
            _write(t, dispatch.binary(op, t, other)._data, op_name)
    elif not recording:
        other_data = other._data if isinstance(other, dispatch.Tensor) else other
        ufunc = op.extra.get("ufunc")
        if ufunc is not None and t._data.flags.writeable:
            _ufunc_into(t, getattr(t._device.xp, ufunc), other_data, op_name)
        else:
            out = op.impl(t._device.xp, t._data, other_data)
            _write(t, t._device.xp.asarray(out), op_name)
    else:
        old = _snapshot(t, op.save in ("inputs", "both"))
        result = dispatch.binary(op, old, other)
        _write(t, result._data, op_name)
        _rebase(t, result)
    t._bump()
    return t


def inplace_call(t: Any, op_name: str, compute: Callable[[Any], Any], needs_copy: bool = True,
                 others: tuple = ()) -> Any:
    """Generic in-place: ``compute(tensor) -> tensor`` out of place, then write back into ``t``.

    ``others``: the other tensor operands; any of them requiring grad makes the write recorded too.
    """
    if dispatch.SYMBOLIC.active:
        dispatch.SYMBOLIC.lift(t)
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
    from ember.ops import movement

    if dispatch.SYMBOLIC.active:
        dispatch.SYMBOLIC.lift(t)
    index, index_tensors = movement.split_index(key, t._device)
    value_requires_grad = isinstance(value, dispatch.Tensor) and value._requires_grad
    recording = grad_mode.STATE.enabled and (t._requires_grad or value_requires_grad)
    check_inplace(t, "index_put_ (setitem)", recording)
    if not recording and not dispatch.SYMBOLIC.active:
        arrays = [i._data for i in index_tensors]
        full = movement._rebuild_index(index, arrays)
        raw = value._data if isinstance(value, dispatch.Tensor) else value
        if isinstance(value, dispatch.Tensor) and value._device != t._device:
            raise RuntimeError(f"index_put_: value is on {value.device} but the tensor is on {t.device}; move it first")
        try:
            t._data[full] = raw
        except IndexError as error:
            raise movement._index_error(t._data, index, error) from None
        except ValueError as error:
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
