"""Dispatch: run an op record on tensors, apply type promotion, record autograd nodes.

Everything that executes an op goes through :func:`apply` (or the fast paths :func:`unary` and
:func:`binary`, which do the same with less bookkeeping). When a graph is being built (tracing or
define-then-run), the op goes to the interpreter it belongs to instead (:mod:`ember.interpreters`:
a symbolic argument's graph builder, else the top of this thread's interpreter stack).
"""
from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any, Callable
from weakref import ref as _weakref

import numpy as np

from ember import dtypes, interpreters as _interpreters
from ember.autograd import anomaly_mode as _anomaly, grad_mode
from ember.autograd.node import OpNode, SavedTensor
from ember.amp.policy import cast_args as _autocast_args
from ember.amp.state import STATE as _AUTOCAST
from ember.ops.registry import OPS, OpDef
from ember.ops.opmath import FLOAT32_SCALAR_OPS
from ember.interpreters import EAGER, GRAPHS as _GRAPHS, SymbolicValue
from ember.device import CPU
from ember.ops import float8_ops as _float8_ops, layout as _layout, unsigned_ops as _unsigned_ops
from ember.ops import meta_dispatch as _meta_dispatch

_META_XP = _meta_dispatch.META_XP  # the meta device's namespace (ember/ops/meta_dispatch.py)

_STATE = grad_mode.STATE
_NUMBER_TYPES = (int, float, bool, complex)


def is_symbolic(value: Any) -> bool:
    """True for a tensor of a graph under construction, and while this thread traces, for every
    tensor (concrete ones become part of the trace): its values are not known now."""
    return bool(_GRAPHS.count) and isinstance(value, Tensor) and (
        isinstance(value._data, SymbolicValue) or _interpreters.tracing())

# The profiler's hook (ember/profiler): None unless a profile is recording, so an op pays one global
# read when profiling is off. When on, an op takes t0 = PROFILER.clock() at its start (a device profile
# records a timing event there too) and calls PROFILER.op(op, t0, args, attrs, result) at its end.
PROFILER: Any = None
_clock = time.perf_counter_ns

if TYPE_CHECKING:
    from ember.tensor import Tensor
else:
    Tensor = None  # the core's one seam: ember.tensor hands the class over once it exists (see there)
    _make = None  # Tensor._make, bound once with it (a class-level read goes through Tensor's metaclass)


def _device_error(op: OpDef, args: tuple) -> RuntimeError:
    found = list(dict.fromkeys(str(a.device) for a in args if isinstance(a, Tensor)))
    return RuntimeError(
        f"{op.name}: expected all tensors to be on the same device, but found at least two devices, "
        f"{' and '.join(found)}. Move them first, e.g. with .to(device)."
    )


def _cpu_scalars_to_device(op: OpDef, args: tuple) -> tuple:
    """Tensors of two devices: 0-d CPU tensors join the others' device (PyTorch treats them as scalars
    there, ``cuda_x * torch.tensor(2.0)`` works); any other mix raises, naming the op and the devices."""
    others = {a._device for a in args if isinstance(a, Tensor) and not (a._device.type == "cpu" and a._data.ndim == 0)}
    if len(others) != 1:
        raise _device_error(op, args)
    (target,) = others
    return tuple(a.to(target) if isinstance(a, Tensor) and a._device != target else a for a in args)


def _keep_half(out: Any, like: Any) -> Any:
    """float16/bfloat16 inputs give float16/bfloat16 results, as in PyTorch (NumPy and ml_dtypes
    widen them to float32/64 when a Python float takes part); call only when dtypes differ."""
    if like.itemsize == 2 and like.kind in "fV" and out.dtype.kind == "f":
        return out.astype(like)
    return out


def _edge(t: Any) -> tuple:
    fn = t.grad_fn
    return (fn, t._output_nr) if fn is not None else (t, 0)


def _record_node(op: OpDef, args: tuple, attrs: dict, nondiff: tuple, save: str) -> tuple:
    """``record``'s node for several inputs (or nondifferentiable ones): its edges, saved inputs and needs."""
    edges = []
    meta = []
    needs = []
    for i, a in enumerate(args):
        if isinstance(a, Tensor):
            meta.append(a._data.shape)
            if a._requires_grad and not (nondiff and i in nondiff):
                fn = a.grad_fn
                edges.append((fn, a._output_nr) if fn is not None else (a, 0))
                needs.append(True)
                continue
        else:
            meta.append(None)
        edges.append(None)
        needs.append(False)
    needs = tuple(needs)
    node = OpNode(op, attrs, tuple(edges), tuple(meta), needs)
    if _anomaly.STATE.enabled:  # detect_anomaly: keep where this op was called from
        _anomaly.record(node)
    if save == "inputs" or save == "both":
        node.saved = tuple([SavedTensor(a) if isinstance(a, Tensor) else a for a in args])
    elif save == "cross":  # each input only for the others' gradients: kept when another input needs one
        live = needs.count(True)
        node.saved = tuple([(SavedTensor(a) if live - need > 0 else None) if isinstance(a, Tensor) else a
                            for a, need in zip(args, needs)])
    elif save == "first":  # where: only the condition; changing x or y in place afterwards is fine
        node.saved = tuple((SavedTensor(a) if i == 0 else None) if isinstance(a, Tensor) else a
                           for i, a in enumerate(args))
    elif save == "after_first":  # getitem: its index tensors, not the indexed tensor (only its shape is needed)
        node.saved = (None,) + tuple(SavedTensor(a) if isinstance(a, Tensor) else a for a in args[1:])
    else:
        node.saved = (None,) * len(args)
    return node, needs


_NEEDS_ONE, _NEEDS_NONE, _NO_EDGE, _NO_META, _SAVED_NONE = (True,), (False,), (None,), (None,), (None,)
_NEEDS_TWO = (((False, False), (False, True)), ((True, False), (True, True)))  # [a needs][b needs]
_SAVED_NONE_TWO = (None, None)
_NONDIFF_TWO: dict = {}  # id(op.nondiff_inputs) -> (that tuple, (input 0 in it, input 1 in it))


def _nondiff_pair(nondiff: tuple) -> tuple:
    """(input 0 takes no gradient, input 1 takes none) for a record's ``nondiff_inputs``, looked up once per tuple
    (getitem's is ``range(1, 64)``: a membership test walks it)."""
    entry = _NONDIFF_TWO.get(id(nondiff))
    if entry is None or entry[0] is not nondiff:
        entry = _NONDIFF_TWO[id(nondiff)] = (nondiff, (0 in nondiff, 1 in nondiff))
    return entry[1]


def record(op: OpDef, outputs: tuple, args: tuple, attrs: dict) -> None:
    """Attach an autograd node for ``op`` to ``outputs`` (which already hold their data)."""
    nondiff = op.nondiff_inputs
    save = op.save
    if len(args) == 1 and (not nondiff or not _nondiff_pair(nondiff)[0]):
        # one input (views, reductions, unary ops, basic indexing, whose later inputs take no gradient): no lists
        a = args[0]
        if isinstance(a, Tensor):
            meta = (a._data.shape,)
            if a._requires_grad:
                fn = a.grad_fn
                edges = ((fn, a._output_nr) if fn is not None else (a, 0),)
                needs = _NEEDS_ONE
            else:
                edges, needs = _NO_EDGE, _NEEDS_NONE
        else:
            meta, edges, needs = _NO_META, _NO_EDGE, _NEEDS_NONE
        node = OpNode(op, attrs, edges, meta, needs)
        if _anomaly.STATE.enabled:  # detect_anomaly: keep where this op was called from
            _anomaly.record(node)
        if save == "inputs" or save == "both" or save == "first":  # (cross: no other input needs a gradient)
            node.saved = (SavedTensor(a) if isinstance(a, Tensor) else a,)
        elif save == "cross":
            node.saved = (None,) if isinstance(a, Tensor) else (a,)
        else:
            node.saved = _SAVED_NONE
    elif len(args) == 2:  # two inputs (binary ops, matmul, gather, getitem by a tensor): _record_node unrolled
        a, b = args
        a_off = b_off = False
        if nondiff:  # which of the two take no gradient (looked up once per record)
            a_off, b_off = _nondiff_pair(nondiff)
        a_tensor = isinstance(a, Tensor)
        if a_tensor:
            a_meta = a._data.shape
            if a._requires_grad and not a_off:
                fn = a.grad_fn
                a_edge = (fn, a._output_nr) if fn is not None else (a, 0)
            else:
                a_edge = None
        else:
            a_meta = a_edge = None
        b_tensor = isinstance(b, Tensor)
        if b_tensor:
            b_meta = b._data.shape
            if b._requires_grad and not b_off:
                fn = b.grad_fn
                b_edge = (fn, b._output_nr) if fn is not None else (b, 0)
            else:
                b_edge = None
        else:
            b_meta = b_edge = None
        a_needs, b_needs = a_edge is not None, b_edge is not None
        node = OpNode(op, attrs, (a_edge, b_edge), (a_meta, b_meta), _NEEDS_TWO[a_needs][b_needs])
        if _anomaly.STATE.enabled:  # detect_anomaly: keep where this op was called from
            _anomaly.record(node)
        if save == "none":
            node.saved = _SAVED_NONE_TWO
        elif save == "cross":  # each input only for the other's gradient
            node.saved = ((SavedTensor(a) if b_needs else None) if a_tensor else a,
                          (SavedTensor(b) if a_needs else None) if b_tensor else b)
        elif save == "inputs" or save == "both":
            node.saved = (SavedTensor(a) if a_tensor else a, SavedTensor(b) if b_tensor else b)
        elif save == "first":
            node.saved = (SavedTensor(a) if a_tensor else a, None if b_tensor else b)
        elif save == "after_first":
            node.saved = (None, SavedTensor(b) if b_tensor else b)
        else:
            node.saved = _SAVED_NONE_TWO
    else:
        node, needs = _record_node(op, args, attrs, nondiff, save)
    nondiff_out = op.nondiff_outputs
    if len(outputs) == 1 and not nondiff_out:  # one output (most ops): no loop, no membership test
        out = outputs[0]
        out.grad_fn = node
        out._output_nr = 0
        out._requires_grad = True
    else:
        if len(outputs) > 1:
            node.output_meta = [(o._data.shape, o.dtype, o._device) for o in outputs]
        for i, out in enumerate(outputs):
            if i in nondiff_out:
                continue
            out.grad_fn = node
            out._output_nr = i
            out._requires_grad = True
    if save == "output" or save == "both":  # after the outputs got their grad_fn: a pack hook sees it
        if len(outputs) == 1:
            node.saved_out = SavedTensor(outputs[0], is_output=True)
        else:
            kept = op.saved_outputs
            node.saved_out = tuple(SavedTensor(o, is_output=True, output_nr=i) if kept is None or i in kept else None
                                   for i, o in enumerate(outputs))


def _wrap(op: OpDef, out: Any, device: Any, args: tuple, attrs: dict | None = None) -> Any:
    xp_array = device.xp.ndarray
    if op.num_outputs == 1:
        if type(out) is not xp_array:
            out = device.xp.asarray(out)
        result = _make(out, device, False)
        if op.view and out.base is not None:
            _share_version(result, args[0], op, attrs if attrs is not None else {})
        return result
    return tuple(_make(o if type(o) is xp_array else device.xp.asarray(o), device, False) for o in out)


def _owner(array: Any) -> Any:
    """The array that owns ``array``'s memory (NumPy/CuPy keep it in ``.base``)."""
    while True:
        base = getattr(array, "base", None)
        if base is None or not hasattr(base, "shape"):
            return array
        array = base


_NO_GRAD_VIEW = (None, "no_grad")  # a view made under no_grad: never re-derived, never rebased


def _share_version(view: Any, source: Any, op: OpDef | None = None, attrs: dict | None = None) -> None:
    """A view shares its base's version counter, so in-place changes through either are seen.

    It also remembers how it was made from its root base (``_view_fn``: the chain of view ops and
    whether it was made under no_grad) and, made with grad mode on, is listed weakly next to that
    counter (``vc[1]``), so an in-place change of the base or of another view can re-derive its
    history (PyTorch's view replay, see ember/ops/inplace.py).
    """
    data = source._data
    base = view._data.base
    if base is not data and base is not data.base and _owner(base) is not _owner(data):
        return  # the op had to copy (e.g. reshape of a transposed array): not a view
    vc = source._vc
    if vc is None:
        vc = source._vc = [0]
    view._vc = vc
    root = source._base
    if root is not None and source._requires_grad and source.grad_fn is None:
        root = None  # a leaf that is itself a view (``r.t().requires_grad_()``): autograd's base is the leaf
    view._base = source if root is None else root
    if not _STATE.enabled:
        view._view_fn = _NO_GRAD_VIEW
        return
    if root is None:
        view._view_fn = (((op, attrs),), None)
    else:
        steps, creation = source._view_fn
        view._view_fn = _NO_GRAD_VIEW if steps is None else (steps + ((op, attrs),), creation)
    if len(vc) == 1:
        vc.append([])
    live = vc[1]
    live.append(_weakref(view))
    if len(live) >= 64 and not len(live) & (len(live) - 1):  # at powers of two: drop dead views
        live[:] = [r for r in live if r() is not None]


def apply(op: OpDef, args: tuple, attrs: dict | None = None) -> Any:
    """Run ``op`` on ``args`` (tensors and Python scalars) and record it for autograd."""
    if attrs is None:
        attrs = {}
    if op.autocast is not None and _AUTOCAST.active:  # mixed precision: the op's policy (ember/amp/policy.py)
        args = _autocast_args(op.autocast, args)
    if _GRAPHS.count:  # a graph is being built somewhere: ask which interpreter this op belongs to
        interpreter = _interpreters.find(args)
        if interpreter is not EAGER:
            return interpreter.process(op, args, attrs)
    t0 = PROFILER and PROFILER.clock()
    if len(args) == 1 and op.num_outputs == 1:
        # One tensor, one output (views, reductions, softmax, ...): the loop below without its list and flags. Only
        # for a 4/8-byte dtype (half precision takes the opmath wrapper and the gated dtypes their checks below) off
        # the meta device (its shapes come from the records' rules below).
        x = args[0]
        if isinstance(x, Tensor):
            data = x._data
            dt = data.dtype
            device = x._device
            xp = device.xp
            if dt.itemsize != 2 and dt not in _GATED and xp is not _META_XP:
                impl = op.impl
                if impl is op.impl_opmath:
                    impl = op.impl_no_half
                out = impl(xp, data, **attrs) if attrs else impl(xp, data)
                if type(out) is not xp.ndarray:
                    out = xp.asarray(out)
                result = _make(out, device, False)
                if op.view and out.base is not None:
                    _share_version(result, x, op, attrs)
                if x._requires_grad and op.vjp is not None and _STATE.enabled:
                    record(op, (result,), args, attrs)
                if t0 and PROFILER is not None:
                    PROFILER.op(op, t0, args, attrs, result)
                return result
    elif len(args) == 2 and op.num_outputs == 1:
        # Two tensors on one device, one output (matmul, gather, indexing by a tensor): as above.
        a, b = args
        if isinstance(a, Tensor) and isinstance(b, Tensor):
            a_data, b_data = a._data, b._data
            a_dt, b_dt = a_data.dtype, b_data.dtype
            device = a._device
            xp = device.xp
            if b._device is device and a_dt.itemsize != 2 and b_dt.itemsize != 2 and a_dt not in _GATED \
                    and b_dt not in _GATED and xp is not _META_XP:
                impl = op.impl
                if impl is op.impl_opmath:
                    impl = op.impl_no_half
                out = impl(xp, a_data, b_data, **attrs) if attrs else impl(xp, a_data, b_data)
                if type(out) is not xp.ndarray:
                    out = xp.asarray(out)
                result = _make(out, device, False)
                if op.view and out.base is not None:
                    _share_version(result, a, op, attrs)
                if (a._requires_grad or b._requires_grad) and op.vjp is not None and _STATE.enabled:
                    record(op, (result,), args, attrs)
                if t0 and PROFILER is not None:
                    PROFILER.op(op, t0, args, attrs, result)
                return result
    device = None
    arrays = []
    needs_grad = False
    half = False   # a float16/bfloat16 tensor input: the opmath wrapper runs (ember/ops/opmath.py)
    other = False  # a non-tensor argument with a 2-byte dtype (a NumPy array or scalar): the result may be narrowed
    for a in args:
        if isinstance(a, Tensor):
            d = a._device
            if device is None:
                device = d
            elif d is not device and d != device:
                return apply(op, _cpu_scalars_to_device(op, args), attrs)
            data = a._data
            arrays.append(data)
            dt = data.dtype
            if dt in _GATED:  # float8, uint16/32/64: torch's short CPU op lists
                return _apply_gated(op, args, attrs)
            if dt.itemsize == 2:
                half = True
            if a._requires_grad:
                needs_grad = True
        else:
            arrays.append(a)
            if a.__class__ not in _PLAIN_ARGS and getattr(getattr(a, "dtype", None), "itemsize", 0) == 2:
                other = True
    if device is None:
        device = attrs.pop("_device", None) or CPU
    impl = op.impl
    if not half and impl is op.impl_opmath:  # no half input: skip the opmath wrapper's check (ember/ops/opmath.py)
        impl = op.impl_no_half
    xp = device.xp
    if xp is _META_XP and _meta_dispatch.by_rule(op):  # meta tensors: shapes from the record's rule, no compute
        out = _meta_dispatch.outputs(op, args, attrs, Tensor)
        if out is None:
            out = impl(xp, *arrays, **attrs)
    else:
        out = impl(xp, *arrays, **attrs)
    if (half or other) and op.category != "cast" and getattr(out, "dtype", None) is not None \
            and out.dtype.kind == "f":  # (only a 2-byte input can narrow a result: _keep_half)
        for a in arrays:
            if getattr(a, "dtype", None) is not None and a.dtype != out.dtype and a.dtype.itemsize == 2:
                out = _keep_half(out, a.dtype)
                break
    if op.num_outputs == 1:  # _wrap, inlined for the common case
        if type(out) is not xp.ndarray:
            out = xp.asarray(out)
        result = _make(out, device, False)
        if op.view and out.base is not None:
            _share_version(result, args[0], op, attrs)
        if needs_grad and op.vjp is not None and _STATE.enabled:
            record(op, (result,), args, attrs)
    else:
        result = _wrap(op, out, device, args, attrs)
        if needs_grad and op.vjp is not None and _STATE.enabled:
            record(op, result, args, attrs)
    if t0 and PROFILER is not None:
        PROFILER.op(op, t0, args, attrs, result)
    return result


# Argument types that never carry a dtype (apply's check for 2-byte NumPy operands skips them)
_PLAIN_ARGS = frozenset((int, float, bool, complex, str, tuple, list, type(None), slice, type(Ellipsis)))


# dtypes torch runs only a short list of CPU ops on: float8 (ember/ops/float8_ops.py) and uint16/32/64
# (ember/ops/unsigned_ops.py); one set test per operand sends them to _apply_gated
_GATED = frozenset(dtypes.FLOAT8_NP | dtypes.WIDE_UNSIGNED_NP)


def _apply_gated(op: OpDef, args: tuple, attrs: dict) -> Any:
    """``apply`` for a float8 or uint16/32/64 operand: refused where torch has no kernel, else run as usual."""
    arrays = [a._data if isinstance(a, Tensor) else a for a in args]
    if _float8_ops.has_float8(arrays) is not None:
        return _apply_float8(op, args, attrs)
    _unsigned_ops.check(op, _unsigned_ops.first_unsigned(arrays))
    device = next(a._device for a in args if isinstance(a, Tensor))
    if any(a._device != device for a in args if isinstance(a, Tensor)):
        args = _cpu_scalars_to_device(op, args)
        arrays = [a._data if isinstance(a, Tensor) else a for a in args]
    out = (op.impl_no_half or op.impl)(device.xp, *arrays, **attrs)
    result = _wrap(op, out, device, args, attrs)
    if _STATE.enabled and op.vjp is not None and any(isinstance(a, Tensor) and a._requires_grad for a in args):
        record(op, result if isinstance(result, tuple) else (result,), args, attrs)
    return result


def _apply_float8(op: OpDef, args: tuple, attrs: dict) -> Any:
    """``apply`` for float8 operands (ember/ops/float8_ops.py): movement passes the bytes through, eq/ne/isnan/
    abs/mul compute on decoded float32, every other op is refused as torch refuses it. No autograd (torch's float8
    tensors are not differentiable)."""
    arrays = [a._data if isinstance(a, Tensor) else a for a in args]
    device = next(a._device for a in args if isinstance(a, Tensor))
    np_dtype = _float8_ops.has_float8(arrays)
    _float8_ops.check(op, arrays, np_dtype)
    if op.name in _float8_ops.COMPUTES:
        out = _float8_ops.compute(device.xp, op, arrays, attrs, np_dtype)
    else:
        out = (op.impl_no_half or op.impl)(device.xp, *arrays, **attrs)
    return _wrap(op, out, device, args, attrs)


def unary(op: OpDef, x: Any, attrs: dict | None = None) -> Any:
    """Fast path for one-tensor elementwise ops; promotes integers to float for float-only ops."""
    if op.float_only and x._data.dtype.kind in "biu":  # before tracing too: graphs promote as eager
        x = cast(x, dtypes.get_default_dtype())
    if _GRAPHS.count:
        interpreter = _interpreters.find((x,))
        if interpreter is not EAGER:
            return interpreter.process(op, (x,), attrs or {})
    t0 = PROFILER and PROFILER.clock()
    device = x._device
    data = x._data
    dt = data.dtype
    if dt in _GATED:  # float8, uint16/32/64: torch's short CPU op lists
        return _apply_gated(op, (x,), attrs or {})
    impl = op.impl
    if impl is op.impl_opmath and dt.itemsize != 2:  # no half input: skip the wrapper's check (opmath.py)
        impl = op.impl_no_half
    xp = device.xp
    if xp is _META_XP:  # meta tensors: shapes from the record's rule, no compute (ember/ops/meta_dispatch.py)
        out = _meta_dispatch.outputs(op, (x,), attrs or {}, Tensor)
        if out is None:
            out = impl(xp, data, **attrs) if attrs else impl(xp, data)
    elif not data.flags.c_contiguous and data.ndim > 1:
        order = _memory_order(data)
        if order is not None:
            # torch's TensorIterator lays the result out as a dense permuted input (a channels-last map); kernels
            # that write a fresh row-major array (gelu, erf) did not, so a seeded dropout after them drew another
            # mask. Run on the row-major view in memory order and permute back (no copy).
            out = impl(xp, data.transpose(order), **attrs) if attrs else impl(xp, data.transpose(order))
            out = xp.asarray(out).transpose(_inverse(order))
            if out.shape == data.shape and 1 in out.shape:  # torch keeps the input's strides, size-1 dims' too
                out = _layout.with_strides(xp, out, _layout.element_strides(data))
        else:
            out = impl(xp, data, **attrs) if attrs else impl(xp, data)
            if 0 in data.strides and xp is np:
                # an expanded input: NumPy's order='K' puts stride-0 dims innermost, TensorIterator never sorts by
                # them (x.unsqueeze(1).expand(-1, 2, 3).neg() is row-major in torch; in NumPy half it was not)
                strides = _layout.iterator_strides(data.shape, ((data.shape, _layout.element_strides(data)),))
                out = _layout.with_strides(xp, xp.asarray(out), strides)
    else:
        out = impl(xp, data, **attrs) if attrs else impl(xp, data)
    if type(out) is not xp.ndarray:
        out = xp.asarray(out)
    if out.dtype != dt:  # (NumPy lays a one-input result out in its input's order, as torch: no layout step)
        out = _keep_half(out, dt)
    result = _make(out, device, False)
    if x._requires_grad and op.vjp is not None and _STATE.enabled:
        record(op, (result,), (x,), attrs or {})
    if t0 and PROFILER is not None:
        PROFILER.op(op, t0, (x,), attrs, result)
    return result


def _memory_order(data: Any) -> tuple | None:
    """The dims of a dense, non-overlapping ``data`` from outermost to innermost in memory, when transposing it so
    gives a row-major array (a permuted or channels-last tensor); None otherwise (sliced, broadcast)."""
    strides = data.strides
    order = tuple(sorted(range(data.ndim), key=lambda d: -strides[d]))
    return order if data.transpose(order).flags.c_contiguous else None


def _inverse(order: tuple) -> tuple:
    back = [0] * len(order)
    for i, d in enumerate(order):
        back[d] = i
    return tuple(back)


# Ops whose first operand may be a Python number even when the second is one too (PyTorch's
# ``should_allow_numbers_as_tensors`` list: add, sub, mul, div and their aliases, floor_divide)
NUMBERS_AS_TENSORS = frozenset(("add", "sub", "mul", "div", "floor_divide"))


def binary(op: OpDef, a: Any, b: Any) -> Any:
    """Fast path for two-operand elementwise ops with PyTorch's promotion and Python scalars."""
    a_tensor = isinstance(a, Tensor)
    b_tensor = isinstance(b, Tensor)
    if a_tensor and b_tensor:
        if a._data.dtype != b._data.dtype:
            if op.name in FLOAT32_SCALAR_OPS:  # half tensor * 0-d tensor: PyTorch reads the 0-d as a number
                number = _zero_dim_as_number(a, b)
                if number is not None:
                    return binary(op, *number)
            target = dtypes.result_type(a, b)
            if op.float_only and target.category < 2:
                # int8 / uint8: each operand goes straight to float (via uint8, -1 would read as 255)
                target = dtypes.get_default_dtype()
            elif op.name == "sub" and "b" in (a._data.dtype.kind, b._data.dtype.kind):
                raise _bool_sub_error()
            a, b = _cast_to(a, target, op), _cast_to(b, target, op)
        if op.float_only and a._data.dtype.kind in "biu":  # also after promotion: int32 / int64
            target = dtypes.get_default_dtype()
            a, b = cast(a, target), cast(b, target)
        if a._device is not b._device and a._device != b._device:
            a, b = _cpu_scalars_to_device(op, (a, b))
    elif a_tensor or b_tensor:
        tensor = a if a_tensor else b
        scalar = b if a_tensor else a
        if isinstance(scalar, np.generic):
            # NumPy scalars (np.float64 subclasses float) count as Python numbers, as in PyTorch: no float64
            # result; np.bool_ counts as a float, as in PyTorch
            scalar = dtypes.python_scalar(scalar)
            if a_tensor:
                b = scalar
            else:
                a = scalar
        if not isinstance(scalar, _NUMBER_TYPES):
            scalar = _coerce_operand(scalar, op)
            if isinstance(scalar, Tensor):
                return binary(op, a if a_tensor else scalar, scalar if a_tensor else b)
        kind = tensor._data.dtype.kind
        if kind != "f" or (type(scalar) is not float and type(scalar) is not int):
            # (a float tensor with a float or an int, x * 0.5, x ** 2: nothing to check, nothing promotes)
            if kind == "b" or type(scalar) is bool:
                if op.name == "sub":
                    raise _bool_sub_error()
            elif kind in "iu" and type(scalar) is int and not 0 <= scalar <= 127 and not op.float_only \
                    and op.name != "pow":  # (0..127 fits every integer dtype: the common case skips the wrap)
                # PyTorch converts the scalar to the tensor's integer dtype, wrapping (uint8 + 300 adds 44)
                wrapped = dtypes.wrap_int(scalar, tensor._data.dtype)
                if wrapped != scalar:
                    scalar = wrapped
                    if a_tensor:
                        b = scalar
                    else:
                        a = scalar
            category = 0 if kind == "b" else (1 if kind in "iu" else (3 if kind == "c" else 2))
            if dtypes.scalar_category(scalar) > category or (op.float_only and category < 2):
                target = dtypes.result_type(tensor, scalar)
                if op.float_only and not (target.is_floating_point or target.is_complex):
                    target = dtypes.get_default_dtype()
                tensor = cast(tensor, target)
                if a_tensor:
                    a = tensor
                else:
                    b = tensor
    elif op.name in NUMBERS_AS_TENSORS and isinstance(a, _NUMBER_TYPES) and isinstance(b, _NUMBER_TYPES):
        # torch.mul(3, 5) is tensor(15): PyTorch's argument parser takes a number as the tensor for these ops
        # (kornia's tests divide by torch.mul(*kernel_size)); other ops refuse two numbers, as PyTorch
        a = dtypes.python_scalar(a) if isinstance(a, np.generic) else a
        return binary(op, _make(np.array(a, dtype=dtypes.result_type(a).np), CPU, False), b)
    else:
        raise TypeError(f"{op.name}: expected at least one tensor, got {type(a).__name__} and {type(b).__name__}")
    if _GRAPHS.count:
        interpreter = _interpreters.find((a, b))
        if interpreter is not EAGER:
            return interpreter.process(op, (a, b), {})
    t0 = PROFILER and PROFILER.clock()
    device = a._device if a_tensor else b._device
    a_data = a._data if a_tensor else a
    b_data = b._data if b_tensor else b
    first = a_data if a_tensor else b_data
    if (a_tensor and a_data.dtype in _GATED) or (b_tensor and b_data.dtype in _GATED):  # float8, uint16/32/64
        return _apply_gated(op, (a, b), {})  # (torch's short CPU op lists for those)
    try:
        impl = op.impl
        if impl is op.impl_opmath and first.dtype.itemsize != 2:  # (opmath.py, as above)
            impl = op.impl_no_half
        if device.xp is _META_XP:  # meta tensors: shapes from the record's rule (ember/ops/meta_dispatch.py)
            out = _meta_dispatch.outputs(op, (a, b), {}, Tensor)
            if out is None:
                out = impl(device.xp, a_data, b_data)
        else:
            out = impl(device.xp, a_data, b_data)
    except ValueError as error:
        raise _shape_error(op, a, b, error) from None
    except TypeError:
        if op.name == "sub":  # NumPy refuses bool - bool with a TypeError; PyTorch's RuntimeError says why
            raise _bool_sub_error() from None
        raise
    if type(out) is not device.xp.ndarray:
        out = device.xp.asarray(out)
    if out.dtype != first.dtype:
        out = _keep_half(out, first.dtype)
    if not first.flags.c_contiguous:  # permuted or strided: torch's result layout (ember/ops/layout.py)
        out = _layout.elementwise_result(device.xp, out, (a_data, b_data))
    result = _make(out, device, False)
    if _STATE.enabled and op.vjp is not None and (
        (a_tensor and a._requires_grad) or (b_tensor and b._requires_grad)
    ):
        record(op, (result,), (a, b), {})
    if t0 and PROFILER is not None:
        PROFILER.op(op, t0, (a, b), None, result)
    return result


def _zero_dim_as_number(a: Any, b: Any) -> tuple | None:
    """``(a, b)`` with a 0-d CPU operand replaced by its Python number when the other is a float16/bfloat16 tensor
    and the 0-d one does not lift its dtype (PyTorch's mul/div kernels read a CPU scalar tensor at float32, as a
    Python number; ember/ops/opmath.py), else None. A 0-d operand that requires grad stays a tensor."""
    for zero, other, first in ((a, b, True), (b, a, False)):
        data, low = zero._data, other._data.dtype
        if type(data) is not np.ndarray:  # a traced (symbolic) or device value: no number to read
            continue
        if data.ndim == 0 and other._data.ndim > 0 and low.itemsize == 2 and low.kind in "fV" \
                and data.dtype.kind in "biuf" and zero._device.type == "cpu" and not zero._requires_grad:
            number = data.item()
            return (number, b) if first else (a, number)
    return None


def _bool_sub_error() -> RuntimeError:
    return RuntimeError("sub: subtraction, the `-` operator, with a bool tensor is not supported (as in PyTorch). "
                        "If you are trying to invert a mask, use the `~` or `logical_not()` operator instead.")


def _shape_error(op: OpDef, a: Any, b: Any, error: Exception) -> RuntimeError:
    """A ValueError from a binary impl: a broadcast mismatch when the shapes do not broadcast, else the impl's
    own complaint (e.g. integers to negative integer powers) named by the op."""
    sa = tuple(a.shape) if isinstance(a, Tensor) else "scalar"
    sb = tuple(b.shape) if isinstance(b, Tensor) else "scalar"
    pairs = zip(reversed(sa if sa != "scalar" else ()), reversed(sb if sb != "scalar" else ()))
    if all(x == y or 1 in (x, y) for x, y in pairs):
        return RuntimeError(f"{op.name}: {error}")
    # PyTorch's sentence first (tests match it: kornia's "The size of tensor a (2) must match ..."), at the first
    # mismatch from the right, numbered in the broadcast shape
    ndim = max(len(sa), len(sb))
    i, x, y = next((ndim - 1 - k, x, y) for k, (x, y) in enumerate(zip(reversed(sa), reversed(sb)))
                   if x != y and 1 not in (x, y))
    return RuntimeError(
        f"{op.name}: The size of tensor a ({x}) must match the size of tensor b ({y}) at non-singleton dimension "
        f"{i}: shapes {sa} and {sb} cannot be broadcast together (sizes must match or be 1 in each trailing "
        f"dimension). Reshape or unsqueeze one operand first."
    )


class OperandTypeError(TypeError):
    """An operand no op takes (None, a string, an object of another library): Tensor's operators turn it into
    ``NotImplemented``, as torch's, so Python tries the other operand's reflected method (a tuple subclass with
    ``__rmul__``) or its fallbacks (``t == None`` is False)."""


def _coerce_operand(value: Any, op: OpDef) -> Any:
    """Turn a NumPy scalar/array operand into something binary ops accept."""
    import numpy as np

    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray) or type(value) is list or type(value) is tuple:
        from ember.creation import tensor

        return tensor(value)
    raise OperandTypeError(
        f"{op.name}: unsupported operand type {type(value).__name__}; expected a Tensor or a Python number"
    )


def _cast_to(t: Any, target: dtypes.dtype, op: OpDef) -> Any:
    if t._data.dtype == target.np:
        return t
    return cast(t, target)


def cast(t: Any, target: dtypes.dtype) -> Any:
    """Convert ``t`` to dtype ``target`` (recorded, so gradients flow back through the cast)."""
    if t._data.dtype == target.np:
        return t

    attrs = {"dtype": target, "source": t.dtype}
    if not (target.is_floating_point or target.is_complex) and t._requires_grad:
        # Integer and bool results carry no gradient, as in PyTorch.
        with grad_mode.no_grad():
            return apply(OPS["to_dtype"], (t,), attrs)
    return apply(OPS["to_dtype"], (t,), attrs)
